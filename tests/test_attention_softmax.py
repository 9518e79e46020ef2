"""The softmax's share of a flash-attention kernel, carried from Hopper to other architectures: the head-dim sweep
and the exponential-unit throughput measured on one H200 (docs/measurements/kernels_headdim_sfu_h200.json), the
per-SM-clock catalog figures of Blackwell and Blackwell Ultra, and what they do to a B200 step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan import api
from gpuplan.estimate.steptime import (
    HOPPER_EXP2_PER_CLOCK_PER_SM,
    StepAssumptions,
    attention_softmax_factor,
)

MEASURED = Path(__file__).resolve().parents[1] / "docs" / "measurements" / "kernels_headdim_sfu_h200.json"


def _per_clock(backend: str) -> dict[int, float]:
    """Forward + backward FLOPs per SM and clock at each head dim, from the rate and the SM clock the kernel held."""
    rec = json.loads(MEASURED.read_text())
    sms = rec["sm_count"]
    out = {}
    for r in rec["attention"]:
        if r["backend"] == backend and "error" not in r:
            clock_hz = r["sustained_fwd_bwd"]["sm_clock_mhz_median"] * 1e6
            out[r["qk_head_dim"]] = r["fwd_bwd_tflops"] * 1e12 / (sms * clock_hz)
    return out


def test_softmax_channels_and_exp2_share_are_the_measured_ones():
    """cuDNN's per-clock rate at head dims 64 and 128 fits d / (d + c) with c within 10 % of the constant (80), its
    tensor-only rate stays under Hopper's 4,096 FLOPs per SM clock, and the measured exponential throughput (15.6 per
    SM clock, the CUDA guide's 16 within 5 %) makes the exponentials' share of the per-position work the constant's
    0.40 within 0.05."""
    a = StepAssumptions()
    pc = _per_clock("cudnn")
    r = pc[128] / pc[64]  # = 2 (64 + c) / (128 + c)
    c = (128 * r - 128) / (2 - r)
    assert c == pytest.approx(a.attention_softmax_channels, rel=0.10)
    tensor_only = pc[128] * (128 + c) / 128
    assert 0.7 * 4096 < tensor_only < 4096
    exp2 = json.loads(MEASURED.read_text())["sfu"]["exp2_per_clock_per_sm"]
    assert exp2 == pytest.approx(HOPPER_EXP2_PER_CLOCK_PER_SM, rel=0.05)
    clocks_per_position = 14 * c / tensor_only  # forward + backward: 14 d FLOPs per attended position
    share = (2 / exp2) / clocks_per_position  # the forward's exponential and the backward's recomputed one
    assert share == pytest.approx(a.attention_softmax_exp2_share, abs=0.05)


def test_padded_head_dims_run_at_the_padded_rate():
    """Why only 64 and 128 are fitted: cuDNN runs head dim 32 at 64's per-clock cost and 96 at 128's (within 10 %,
    counted at the padded width), so those points carry the padding, not the softmax."""
    pc = _per_clock("cudnn")
    assert pc[32] * 64 / 32 == pytest.approx(pc[64], rel=0.10)
    assert pc[96] * 128 / 96 == pytest.approx(pc[128], rel=0.10)


def test_factor_is_one_on_hopper_and_lower_where_the_tensor_cores_outgrew_the_softmax():
    """1 on every Hopper part (Hopper's own figures or none); a B200 (8,192 tensor FLOPs and 16 exponentials per SM
    clock) runs a Hopper-class kernel at (128 + 80) / (128 + 160) = 0.722 of its tensor-peak rate at head dim 128;
    a B300 (Blackwell Ultra: 32 exponentials) at 0.81; head dim 64 suffers more than 128."""
    a = StepAssumptions()
    for gid in ("h100-sxm-80gb", "h200-sxm-141gb", "gh200"):
        assert attention_softmax_factor(BUNDLED_ACCELERATORS.get(gid), 128, a) == pytest.approx(1.0)
    b200 = BUNDLED_ACCELERATORS.get("b200")
    assert attention_softmax_factor(b200, 128, a) == pytest.approx(208 / 288, rel=1e-6)
    assert attention_softmax_factor(b200, 64, a) < attention_softmax_factor(b200, 128, a)
    b300 = BUNDLED_ACCELERATORS.get("b300")
    assert attention_softmax_factor(b300, 128, a) == pytest.approx(208 / (128 + 80 * 1.6), rel=1e-6)
    for gid in ("b200", "gb200", "b300", "gb300"):
        gpu = BUNDLED_ACCELERATORS.get(gid)
        assert gpu.tensor_flops_per_clock_per_sm == 8192
        assert gpu.source_for("exp2_per_clock_per_sm").url.startswith("https://")


def test_b200_attention_time_grows_by_the_factor():
    """End to end: a B200 Llama 3.1 8B step at 8k tokens spends 1 / 0.722 as long in attention as the factor-free
    model (the attention part alone; every other part unchanged), and FA2's path is untouched."""
    kw = dict(
        model="llama-3.1-8b",
        gpu="b200",
        gpus=8,
        fsdp=True,
        micro_batch=1,
        global_batch=8,
        seq_len=8192,
        tokens=1e9,
        offline=True,
    )
    now = api.train(**kw).plan.step.parts
    off = api.train(**kw, assume={"attention_softmax_channels": 0.0}).plan.step.parts
    assert now["attention"] / off["attention"] == pytest.approx(1 / (208 / 288), rel=0.01)
    assert now["matmul"] == pytest.approx(off["matmul"])
    fa2 = api.train(**kw, attention_kernel="fa2").plan.step.parts["attention"]
    fa2_off = api.train(**kw, attention_kernel="fa2", assume={"attention_softmax_channels": 0.0}).plan.step.parts
    assert fa2 == pytest.approx(fa2_off["attention"])
