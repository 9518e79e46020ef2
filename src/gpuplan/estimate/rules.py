"""The rules of thumb users already apply, reproduced so the detailed estimate can be shown beside them.

Source: the rules of thumb in common use: 18 bytes per parameter for mixed-precision AdamW with fp32
gradients (Hugging Face Transformers docs, "Model training anatomy"; ZeRO, Rajbhandari et al. 2020, section
3.1, counts 16 with 16-bit gradients), a flat allowance, and the GPU-count formula derived in ``time.py``:
training memory (mixed precision, AdamW) = params x 18 B x 1.25; inference = params x 2 B x 1.25. The 18
bytes are 2 (16-bit weights) + 4 (fp32 gradients) + 4 (fp32 master weights) + 8 (two fp32 Adam moments); the
1.25 is a rough allowance for activations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TRAINING_BYTES_PER_PARAM = 18.0
INFERENCE_BYTES_PER_PARAM = 2.0
ACTIVATION_ALLOWANCE = 1.25


@dataclass(frozen=True)
class RuleOfThumb:
    """The seed rule for one job: total bytes, and GPUs of a given capacity it implies."""

    bytes_per_param: float
    allowance: float
    total_bytes: float
    min_gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "formula": f"params x {self.bytes_per_param:g} B x {self.allowance:g}",
            "total_bytes": self.total_bytes,
            "min_gpus": self.min_gpus,
        }


def training_rule(params: float, capacity_bytes: float) -> RuleOfThumb:
    """params x 18 x 1.25 bytes for the whole job; GPUs = ceil(total / capacity) (seed rule)."""
    total = params * TRAINING_BYTES_PER_PARAM * ACTIVATION_ALLOWANCE
    return RuleOfThumb(TRAINING_BYTES_PER_PARAM, ACTIVATION_ALLOWANCE, total, math.ceil(total / capacity_bytes))


def inference_rule(params: float, capacity_bytes: float) -> RuleOfThumb:
    """params x 2 x 1.25 bytes; GPUs = ceil(total / capacity) (seed rule)."""
    total = params * INFERENCE_BYTES_PER_PARAM * ACTIVATION_ALLOWANCE
    return RuleOfThumb(INFERENCE_BYTES_PER_PARAM, ACTIVATION_ALLOWANCE, total, math.ceil(total / capacity_bytes))
