"""Training time, GPU count for a deadline, GPU-hours and cost, from FLOPs and a (predicted or given) MFU.

- Total model FLOPs = training FLOPs per token (PaLM appendix B with causal attention, ``flops.py``:
  the same count as the step-time model's MFU numerator, so time = FLOPs / (GPUs x peak x MFU) equals
  tokens / throughput) x tokens x epochs.
- Time = total FLOPs / (GPUs x dense peak of the training dtype x MFU) (Narayanan et al.
  2021 eq. 4 is the same relation with their hardware-FLOPs convention).
- The seed rule: GPUs = tokens x epochs x params x C / hours with tokens and params in billions, where
  C = 6e18 / (3600 x peak x MFU) = 13.35 for an A100 (312 dense bf16 TFLOP/s) at 40 % MFU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import JobError
from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..units import MAX_EPOCHS, MAX_GPUS, MAX_TOKENS, check_range
from . import xp
from .flops import CAUSAL_CONVENTION, flops_per_token

HOUR_S = 3600.0


def training_dtype(precision: str) -> str:
    """The dtype whose dense peak bounds a recipe's matmuls (MFU is against it)."""
    return {
        "fp32": "tf32",
        "fp16-mixed": "fp16",
        "bf16-mixed": "bf16",
        "bf16": "bf16",
        "fp8-mixed": "fp8",
        "fp4-mixed": "fp4",
    }[precision]


def peak_for(gpu: Accelerator, precision: str) -> float:
    dtype = training_dtype(precision)
    peak = gpu.peak(dtype) or (gpu.peak("fp32") if dtype == "tf32" else None)
    if not peak:
        raise JobError(f"{gpu.id} has no {dtype} peak in the catalog; pick another --precision or GPU")
    return peak


@dataclass(frozen=True)
class TrainingCompute:
    """Model FLOPs of a whole run."""

    flops_per_token: float
    tokens: float
    epochs: float
    convention: str = ""

    @property
    def total_flops(self) -> float:
        return self.flops_per_token * self.tokens * self.epochs


def training_compute(
    model: ModelSpec | ParamsOnlyModel, seq_len: int, tokens: float, epochs: float = 1.0, method: str = "full"
) -> TrainingCompute:
    """6N + causal attention FLOPs per token (PaLM appendix B, attention halved for the causal mask as
    FlashAttention counts it; ``flops.py``) over tokens x epochs: at least one token, at most MAX_TOKENS.
    LoRA/QLoRA (``method``): ``FlopsPerToken.step_flops``, 2x the forward."""
    check_range(tokens, "--tokens", 1, MAX_TOKENS, why="training tokens")
    check_range(epochs, "--epochs", 0, MAX_EPOCHS, low_open=True)
    if tokens * epochs < 1:
        raise JobError(f"--tokens x --epochs is {tokens * epochs:.3g}: less than one token to train on")
    per_token = flops_per_token(model, seq_len, causal=True)
    convention = CAUSAL_CONVENTION + ("" if method == "full" else "; LoRA: 2x forward")
    return TrainingCompute(per_token.step_flops(method), tokens, epochs, convention)


@dataclass(frozen=True)
class TrainingTime:
    """Wall time of a training run on ``gpus`` GPUs at ``mfu`` of the dense peak."""

    seconds: float
    gpus: int
    mfu: float
    peak_flops_per_s: float

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / HOUR_S


def time_to_train(total_flops: float, gpus: int, peak: float, mfu: float) -> TrainingTime:
    """Seconds = FLOPs / (GPUs x peak x MFU). ``gpus`` and ``mfu`` may be arrays of one shape (the planner's grid,
    ``xp.py``): every element is checked, and the times come back element by element."""
    if not xp.all_true(xp.isfinite(mfu) & (mfu > 0) & (mfu <= 1)):
        raise JobError(f"MFU must be in (0, 1], got {mfu}")
    positive = math.isfinite(total_flops) and total_flops > 0 and math.isfinite(peak) and peak > 0
    if not (positive and xp.all_true(gpus >= 1)):
        raise JobError(
            f"training time needs positive, finite FLOPs ({total_flops:g}), GPUs ({gpus}) and peak ({peak:g})"
        )
    seconds = total_flops / (gpus * peak * mfu)
    if not xp.all_true(xp.isfinite(seconds)):
        raise JobError("the training time overflows: fewer --tokens or --epochs, or a larger --mfu")
    return TrainingTime(seconds, gpus, mfu, peak)


def gpus_for_deadline(total_flops: float, deadline_s: float, peak: float, mfu: float, granularity: int = 1) -> int:
    """Fewest GPUs (a multiple of ``granularity``: the model-parallel group, or a node) to finish in time."""
    if not (math.isfinite(deadline_s) and deadline_s > 0):
        raise JobError("--deadline must be a finite time more than zero")
    need = total_flops / (deadline_s * peak * mfu)
    if not math.isfinite(need) or need > MAX_GPUS:
        raise JobError(
            f"the deadline needs about {need:.3g} GPUs, more than the {MAX_GPUS:,} gpuplan plans with; "
            "give more time or train on fewer tokens"
        )
    return max(granularity, math.ceil(need / granularity - 1e-9) * granularity)


def seed_rule_constant(peak: float, mfu: float) -> float:
    """C in GPUs = tokens_B x epochs x params_B x C / hours: 6e18 / (3600 x peak x MFU)."""
    return 6e18 / (HOUR_S * peak * mfu)


def seed_rule_gpus(params: float, tokens: float, epochs: float, hours: float, peak: float, mfu: float) -> float:
    """The seed rule, with its constant derived for this GPU and MFU (13.35 for A100 bf16 at 40 %)."""
    return tokens / 1e9 * epochs * params / 1e9 * seed_rule_constant(peak, mfu) / hours
