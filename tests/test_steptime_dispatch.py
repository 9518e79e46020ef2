"""What the records' own setups say about the optimistic and pessimistic clusters of issue #13: a DeepEP dispatch
sends a token once per destination rank, NeMo AutoModel's MoE benchmarks route with a fake balanced gate (k
consecutive experts per token), and TorchAO's H100 table ran on the 96 GB HBM2e part."""

from __future__ import annotations

import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan.catalog import load_models
from gpuplan.errors import JobError
from gpuplan.estimate.steptime import StepAssumptions, training_step
from gpuplan.plan import validate as v
from gpuplan.spec.training import Parallelism, TrainingJob

JOB = TrainingJob(
    micro_batch=1, seq_len=4096, global_batch=512, precision="bf16", recompute="none", stack="fsdp2", fsdp=True
)
LAYOUT = Parallelism(gpus=256, tp=1, pp=1, ep=64, zero=3)


def _a2a(**assume: float) -> float:
    model = load_models().get("deepseek-v3")
    # latency off, so that the all-to-all is pure volume over bandwidth
    a = StepAssumptions(collective_latency_s=0.0, **assume)
    step = training_step(model, BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), LAYOUT, JOB, a)
    return float(step.parts["moe_all_to_all"])


def test_dispatch_volume_scales_with_ranks_per_token():
    """DeepSeek-V3 (k = 8) at ep 64: unset is one copy per expert, the same as 8 ranks; 2 ranks move a quarter of
    the bytes (the all-to-all is bandwidth over the same paths); more ranks than the group holds are capped."""
    per_expert = _a2a()
    assert per_expert > 0
    assert _a2a(moe_dispatch_ranks_per_token=8) == pytest.approx(per_expert, rel=1e-12)
    assert _a2a(moe_dispatch_ranks_per_token=2) == pytest.approx(per_expert / 4, rel=1e-12)
    assert _a2a(moe_dispatch_ranks_per_token=1000) == pytest.approx(per_expert * 64 / 8, rel=1e-12)


@pytest.mark.parametrize("bad", [0, 0.5])
def test_dispatch_ranks_below_one_refused(bad):
    with pytest.raises(JobError):
        StepAssumptions(moe_dispatch_ranks_per_token=bad)


@pytest.mark.parametrize(
    ("experts", "k", "ep", "ranks"),
    [
        (256, 8, 64, 2.0),  # DeepSeek-V3: ranks of 4 experts, 8 consecutive experts span 2
        (128, 8, 8, 1.0),  # Qwen3-30B-A3B: ranks of 16, aligned blocks of 8 stay on one
        (128, 4, 64, 2.0),  # gpt-oss-120b: ranks of 2
        (32, 4, 8, 1.0),  # gpt-oss-20b: ranks of 4
        (12, 4, 4, 2.0),  # ranks of 3: blocks 0-3, 4-7, 8-11 each straddle two ranks
        (256, 8, 48, None),  # experts do not split evenly
    ],
)
def test_fake_gate_ranks(experts, k, ep, ranks):
    got = v.fake_gate_ranks_per_token(experts, k, ep)
    assert got == (pytest.approx(ranks, abs=1e-12) if ranks is not None else None)


def _cases():
    from gpuplan import api

    cat = api._catalogs(())
    return {c.id: c for c in v.map_records(cat, v.load_files()).cases if c.category == "training"}


def test_automodel_moe_rows_carry_the_fake_gate_dispatch():
    cases = _cases()
    dsv3 = cases["automodel-h100-deepseek-v3-256gpu-bf16"]
    assert dsv3.kwargs["assume"]["moe_dispatch_ranks_per_token"] == pytest.approx(2.0, abs=1e-12)
    assert any("fake balanced gate" in n for n in dsv3.notes)
    # the dense row of the same source is untouched
    dense = cases["automodel-h100-llama3-70b-64gpu-bf16"]
    assert "moe_dispatch_ranks_per_token" not in dense.kwargs.get("assume", {})


def test_torchao_h100_rows_run_on_the_96gb_part():
    cases = _cases()
    for rid in ("torchao-h100-llama3-8b-8gpu-fsdp-bf16", "torchao-h100-llama3-8b-8gpu-fsdp-fp8-tensorwise"):
        assert cases[rid].kwargs["gpu"] == "h100-sxm-96gb"
        assert any("pytorch/ao#1802" in n for n in cases[rid].notes)
    # other sources' unstated H100s keep the 80 GB SXM
    assert cases["ibm-fsdp-llama2-7b-96xh100-bf16"].kwargs["gpu"] == "h100-sxm-80gb"


def test_automodel_rows_read_the_config_of_their_date():
    """The MoE rows were published with the table (2025-10-06) and never re-measured: gpt-oss-20b's config then
    checkpointed every block (it was turned off on 2025-11-10), gpt-oss-120b's did not."""
    cases = _cases()
    assert cases["automodel-h100-gpt-oss-20b-8gpu-bf16"].kwargs["recompute"] == "full"
    assert cases["automodel-h100-gpt-oss-120b-64gpu-bf16"].kwargs["recompute"] == "none"
    assert cases["automodel-h100-deepseek-v3-256gpu-bf16"].kwargs["recompute"] == "full"
