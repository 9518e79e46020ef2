"""Flash-attention rates as measured on an H200 (docs/measurements/kernels_h200.json,
kernels_attention_extended_h200.json, hf_attention_kernels_h200.json): the per-tile cost that slows short
sequences, the head-dim share, and ``--attention-kernel`` (FlashAttention-2 against cuDNN's Hopper kernels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.estimate.steptime import StepAssumptions, training_step

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "docs" / "measurements"


def _rows() -> list[dict]:
    rows = []
    for name in ("kernels_h200.json", "kernels_attention_extended_h200.json"):
        rows += [r for r in json.loads((MEASURED / name).read_text())["attention"] if "error" not in r]
    return rows


def _hd128(backend: str) -> list[dict]:
    return [
        r
        for r in _rows()
        if r["backend"] == backend
        and r.get("qk_head_dim", r.get("head_dim")) == 128
        and r.get("v_head_dim", 128) == 128
    ]


def _model_s(r: dict, rate: float, a: StepAssumptions) -> float:
    """gpuplan's flash-attention time for one measured call: the forward FLOPs with attention_forward_tile_tokens
    more positions per query, the backward's 2.5x with attention_backward_tile_tokens more per key."""
    causal = r["causal"] and r["q_len"] == r["kv_len"]
    keys_per_query = r["kv_len"] / 2 if causal else r["kv_len"]
    queries_per_key = r["q_len"] / 2 if causal else r["q_len"]
    f = r["fwd_flops"]
    fwd = f * (keys_per_query + a.attention_forward_tile_tokens) / keys_per_query
    bwd = a.flash_backward_flops_ratio * f * (queries_per_key + a.attention_backward_tile_tokens) / queries_per_key
    return (fwd + bwd) / rate


@pytest.mark.parametrize(
    ("backend", "rate_of", "worst", "mean"),
    [
        # FlashAttention-2 at its ceiling, 330 TFLOP/s; cuDNN at flash_attention_efficiency x the H200's 989.5
        ("flash", lambda a: a.fa2_ceiling_flops_per_s, 0.08, 0.04),
        ("cudnn", lambda a: a.flash_attention_efficiency * 989.5e12, 0.16, 0.07),
    ],
)
def test_tile_cost_reproduces_the_measured_falloff(backend, rate_of, worst, mean):
    """Over causal and full masks of 1k-128k tokens (head dim 128), the forward + backward time the model gives
    each measured call is within 8 % (FA2; cuDNN 16 %, its 1k-token call) and 4 % (7 %) on average, where one
    flat rate at the long-sequence value misses the 2k-token calls by 30 % and more."""
    a = StepAssumptions()
    rows = _hd128(backend)
    assert len(rows) >= 12
    errors = [_model_s(r, rate_of(a), a) / r["fwd_bwd_s"] - 1 for r in rows]
    assert max(abs(e) for e in errors) <= worst, errors
    assert sum(abs(e) for e in errors) / len(errors) <= mean
    flat = StepAssumptions(attention_forward_tile_tokens=0.0, attention_backward_tile_tokens=0.0)
    short = [r for r in rows if r["case"] in ("causal-1k", "causal-2k")]
    assert short and all(_model_s(r, rate_of(a), flat) / r["fwd_bwd_s"] - 1 < -0.20 for r in short)


def test_measured_long_sequence_rates_are_the_constants():
    """At 32k-128k tokens the measured forward + backward rates are the constants the model starts from: FA2 321
    and 321 TFLOP/s against fa2_ceiling_flops_per_s 330 (3 %); cuDNN 540 against 0.55 x 989.5 = 544 (1 %)."""
    a = StepAssumptions()
    by = {(r["case"], r["backend"]): r["fwd_bwd_tflops"] * 1e12 for r in _rows()}
    assert by[("causal-32k", "flash")] == pytest.approx(a.fa2_ceiling_flops_per_s, rel=0.04)
    assert by[("causal-128k", "flash")] == pytest.approx(a.fa2_ceiling_flops_per_s, rel=0.04)
    assert by[("causal-32k", "cudnn")] == pytest.approx(a.flash_attention_efficiency * 989.5e12, rel=0.02)


def test_head_dim_factor_matches_the_measurement():
    """Head dim 64 against 128 at causal 4k: the model's rate ratio d/(d+d0) x (128+d0)/128 is the measured one
    (FA2 240/270, cuDNN 381/492) within 2 %."""
    a = StepAssumptions()
    by = {(r["case"], r["backend"]): r["fwd_bwd_tflops"] for r in _rows()}
    for backend, d0 in (("flash", a.fa2_head_dim_overhead), ("cudnn", a.hopper_attention_head_dim_overhead)):
        measured = by[("causal-4k-h64d64", backend)] / by[("causal-4k", backend)]
        assert 64 / (64 + d0) * (128 + d0) / 128 == pytest.approx(measured, rel=0.02)


def _step(model_id: str, seq: int, **job):
    from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
    from gpuplan.spec.training import Parallelism, TrainingJob

    return training_step(
        BUNDLED_MODELS.get(model_id),
        BUNDLED_ACCELERATORS.get("h100-sxm-80gb"),
        Parallelism(gpus=1),
        TrainingJob(seq_len=seq, global_batch=1, **job),
        StepAssumptions(),
    )


def test_short_sequences_pay_the_tile_cost_in_the_step():
    """In a whole step the attention time per attention FLOP at 2k tokens is the measured FA2 ratio of 32k to 2k
    (321 / 229 = 1.40 TFLOP/s) within 5 %; the matmuls per token are the same at both lengths."""
    from conftest import BUNDLED_MODELS
    from gpuplan.estimate.flops import attention_flops_forward

    model = BUNDLED_MODELS.get("llama-3.1-8b")
    per_flop = {}
    for seq in (2048, 32768):
        step = _step("llama-3.1-8b", seq, stack="fsdp2", attention_kernel="fa2")
        per_flop[seq] = step.parts["attention"] / (seq * attention_flops_forward(model, seq, causal=True))
    by = {(r["case"], r["backend"]): r["fwd_bwd_tflops"] for r in _rows()}
    measured = by[("causal-32k", "flash")] / by[("causal-2k", "flash")]
    assert per_flop[2048] / per_flop[32768] == pytest.approx(measured, rel=0.05)


def test_attention_kernel_choice():
    """On an H100 the fsdp2 and hf stacks price cuDNN's kernels by default (PyTorch >= 2.9 prefers them on sm90, as
    measured with torch 2.11); fa2 prices FlashAttention-2, 1.6-1.7x slower at 8k; the step says which it priced."""
    auto = _step("llama-3.1-8b", 8192, stack="fsdp2")
    cudnn = _step("llama-3.1-8b", 8192, stack="fsdp2", attention_kernel="cudnn")
    fa2 = _step("llama-3.1-8b", 8192, stack="fsdp2", attention_kernel="fa2")
    assert auto.parts["attention"] == cudnn.parts["attention"]
    assert auto.attention_kernel == "cudnn" and fa2.attention_kernel == "fa2"
    assert 1.5 < fa2.parts["attention"] / cudnn.parts["attention"] < 1.8
    assert _step("llama-3.1-8b", 8192, stack="hf").attention_kernel == "cudnn"
    assert _step("llama-3.1-8b", 8192, stack="fsdp2", flash_attention=False).attention_kernel is None
    hf = json.loads((MEASURED / "hf_attention_kernels_h200.json").read_text())["hf_llama_attention_kernels"]
    assert any("cudnn" in k and "sm90" in k for k in hf["sdpa"])  # what that default rests on


def test_attention_kernel_flag_cli_and_json(run):
    """--attention-kernel reaches the JSON as asked (job) and as priced (time); auto is cuDNN's kernels on an H100,
    faster than fa2; without flash attention both are null, and asking for a kernel then is one clear line, exit 2."""
    from test_cli import one_line_error

    args = ("train", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--gpus", "8", "--fsdp", "--tokens", "1e9")
    code, out, _ = run(*args, "--attention-kernel", "fa2", "--json")
    fa2 = json.loads(out)
    assert code == 0 and fa2["job"]["attention_kernel"] == "fa2" and fa2["time"]["attention_kernel"] == "fa2"
    auto = json.loads(run(*args, "--json")[1])
    assert auto["job"]["attention_kernel"] == "auto" and auto["time"]["attention_kernel"] == "cudnn"
    assert auto["time"]["step_s"] < fa2["time"]["step_s"]
    off = json.loads(run(*args, "--no-flash-attention", "--json")[1])
    assert off["job"]["attention_kernel"] is None and off["time"]["attention_kernel"] is None
    line = one_line_error(*run(*args, "--no-flash-attention", "--attention-kernel", "cudnn"))
    assert "--attention-kernel cudnn" in line and "--no-flash-attention" in line
    assert "flash attention on (fa2)" in run(*args, "--attention-kernel", "fa2")[1]


def test_validate_prices_fa2_where_the_run_had_it():
    """validate maps the runs whose software tried FlashAttention-2 first (torchtitan of 2024 and mid-2025, IBM's
    fms-fsdp, AutoModel's CP and FlexAttention rows) to --attention-kernel fa2 with a note, and leaves the others
    on the stack's default: AutoModel's Transformer Engine MoE rows and this repo's torch 2.11 H200 recordings."""
    from gpuplan import api
    from gpuplan.plan import validate as v

    cases = {c.id: c for c in v.map_records(api._catalogs(()), v.load_files()).cases if c.category == "training"}
    tt = cases["torchtitan-2412-llama31-8b-8gpu-fsdp-bf16"]
    assert tt.kwargs["attention_kernel"] == "fa2" and any("FlashAttention-2" in n for n in tt.notes)
    assert cases["automodel-h100-gpt-oss-20b-8gpu-bf16"].kwargs["attention_kernel"] == "fa2"
    assert "attention_kernel" not in cases["automodel-h100-deepseek-v3-256gpu-bf16"].kwargs
    assert "attention_kernel" not in cases["gpuplan-h200-train-bf16-b2-s2048"].kwargs
