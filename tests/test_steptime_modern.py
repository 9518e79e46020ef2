"""The step-time model on modern stacks (issue #13): accuracy bounds on the bundled training records, so a
regression fails, and the mechanisms the model represents (fp8 as it runs, GEMM shapes, stack profiles,
overlap, the default global batch)."""

from __future__ import annotations

import pytest

import gpuplan
from gpuplan.estimate.steptime import (
    FP8_RECIPES,
    STACKS,
    StepAssumptions,
    default_global_batch_tokens,
    training_step,
)
from gpuplan.plan import validate as v


@pytest.fixture(scope="module")
def training_report():
    return gpuplan.validate(category="training")


def test_training_throughput_bounds(training_report):
    """The bounds reached on the bundled records (tokens/s per GPU, 80 values): MAE 71.9 % and median
    +29.3 % before issue #13's step-time work; now MAE about 33 %, median about +12 %."""
    s = v.summarize(training_report.rows)["training"]["all"]
    assert s["count"] >= 80
    assert s["mae"] <= 0.36
    assert abs(s["median_signed_error"]) <= 0.15
    by_stack = v.summarize(training_report.rows)["training"]["stack"]
    assert by_stack["megatron"]["mae"] <= 0.22
    assert by_stack["nemo"]["mae"] <= 0.16


def test_training_loso_bound(training_report):
    loso = training_report.loso["categories"]["training"]["loso"]
    assert loso["mae"] <= 0.34


def _step(**kw):
    base = dict(gpu="h100", gpus=8, micro_batch=1, global_batch=64, seq_len=4096, tokens="1B")
    report = gpuplan.train("llama-3.1-8b", **{**base, **kw}, offline=True)
    return report.plan.step


def test_fp8_gain_below_2x_end_to_end():
    bf16 = _step(tp=1, zero=1, recipe="megatron")
    fp8 = _step(tp=1, zero=1, recipe="megatron", precision="fp8-mixed")
    gain = fp8.tokens_per_s / bf16.tokens_per_s
    assert 1.1 < gain < 1.7  # measured end to end: ~1.3x (NeMo, torchtitan), never the peak's 2x
    assert fp8.fp8_recipe == "delayed" and "fp8_cast" in fp8.parts
    # attention runs at 16 bits: its time does not halve
    assert fp8.parts["attention"] == pytest.approx(bf16.parts["attention"], rel=1e-9)


def test_fp8_recipes_charge_quantization():
    delayed = _step(precision="fp8-mixed", fp8_recipe="delayed", recipe="megatron")
    rowwise = _step(precision="fp8-mixed", fp8_recipe="rowwise", recipe="megatron")
    assert rowwise.parts["fp8_cast"] > delayed.parts["fp8_cast"] > 0
    assert set(FP8_RECIPES) == {"delayed", "tensorwise", "rowwise", "blockwise", "mxfp8"}


def test_micro_batch_1_vs_8_efficiency_differ():
    """Few tokens per GEMM turn it memory-bound (the roofline of each GEMM): micro-batch 8 reaches a higher
    MFU than micro-batch 1 at a short sequence."""
    one = _step(micro_batch=1, global_batch=64, seq_len=128)
    eight = _step(micro_batch=8, global_batch=64, seq_len=128)
    assert eight.mfu > one.mfu * 1.05


def test_stack_profiles():
    mega = _step(stack="megatron")
    eager = _step(stack="fsdp2", fsdp=True)
    compiled = _step(stack="fsdp2", fsdp=True, compile=True)
    assert eager.tokens_per_s < compiled.tokens_per_s
    assert eager.parts["elementwise"] > compiled.parts["elementwise"]
    assert mega.stack == "megatron" and eager.stack == "fsdp2"
    assert set(STACKS) == {"megatron", "fsdp2", "deepspeed", "hf"}
    auto = _step(fsdp=True)
    assert auto.stack == "fsdp2"


def test_overlap_flags_hide_communication():
    base = dict(gpus=64, tp=8, sequence_parallel=True, recipe="megatron", global_batch=64)
    plain = _step(**base)
    over = _step(**base, tp_comm_overlap=True, overlap_grad_reduce=True)
    assert over.parts.get("tp_comm", 0.0) < plain.parts["tp_comm"]
    assert over.parts.get("dp_comm", 0.0) < plain.parts["dp_comm"]
    assert over.tokens_per_s > plain.tokens_per_s


def test_default_global_batch_rule():
    assert default_global_batch_tokens(125e6) == 0.5e6
    assert default_global_batch_tokens(8e9) == 2e6
    assert default_global_batch_tokens(405e9) == 4e6
    step = _step(global_batch=None)
    assert step.global_batch * 4096 == pytest.approx(2e6, rel=0.05)
    assert "default" in step.global_batch_source


def test_zero3_per_tensor_gathers_cost_latency():
    """DeepSpeed-style per-tensor ZeRO-3 gathers pay the ring's inter-node steps per tensor and sit on the
    critical path; FSDP2 prefetches one gather per block."""
    from gpuplan.catalog.session import Catalogs

    cat = Catalogs()
    model = cat.models().get("llama-3.1-8b") if hasattr(cat.models(), "get") else None
    if model is None:
        pytest.skip("model registry has no get()")
    gpu = cat.accelerators().get("a100-sxm-80gb")
    from gpuplan.spec.training import Parallelism, TrainingJob

    lay = Parallelism(gpus=256, zero=3)
    ds = training_step(model, gpu, lay, TrainingJob(global_batch=256, stack="deepspeed"), StepAssumptions())
    fs = training_step(model, gpu, lay, TrainingJob(global_batch=256, stack="fsdp2", fsdp=True), StepAssumptions())
    assert ds.parts.get("zero3_gather", 0.0) > fs.parts.get("zero3_gather", 0.0)
