"""A vision-language model's vision tower is held in memory (training and serving), on the first stage."""

from __future__ import annotations

import pytest

import gpuplan
from gpuplan.estimate.params import count_params


def test_vision_tower_weights_are_held():
    model = gpuplan.model("qwen2-vl-7b").model
    b = count_params(model)
    vision = b.parts["vision"]
    assert vision > 5e8  # Qwen2-VL-7B's ViT is ~0.68B parameters
    s = gpuplan.serve("qwen2-vl-7b", gpu="h100")
    # bf16: every parameter, the tower too (within 1e-4: the serving weight sum leaves out the q/k/v biases)
    assert s.serving.parts["weights"] == pytest.approx(2 * b.total, rel=1e-4)
    assert s.serving.parts["weights"] > 2 * (b.total - vision) + vision  # the tower is clearly in
    t = gpuplan.train("qwen2-vl-7b", gpu="h100", gpus=8, zero=3)
    assert t.memory.parts["weights"] * 8 == pytest.approx(2 * b.total, rel=1e-6)  # ZeRO-3: 1/8 of 16-bit weights
