"""The loss over the logits as each stack runs it (issue 13): Megatron-LM's vocab-parallel cross-entropy is unfused
unless --cross-entropy-loss-fusion, so a Megatron step pays its fp32 passes over every logit (52 B each); the flag (or
a compiled stack) leaves a fused kernel's 10 B."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.estimate.steptime import StepAssumptions, training_step
from gpuplan.spec.training import Parallelism, TrainingJob

A = StepAssumptions()


def test_megatron_loss_unfused_by_default():
    gpu, model = BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), BUNDLED_MODELS.get("llama-3.1-8b")
    job = TrainingJob(micro_batch=1, seq_len=4096, global_batch=16, stack="megatron", recipe="megatron")
    layout = Parallelism(gpus=8, tp=2)
    s = training_step(model, gpu, layout, job, A)
    m = 16 // (1 * 4)  # micro-batches per step: global / (micro x dp)
    bw = gpu.memory_bandwidth_bytes_per_s * A.hbm_efficiency
    expected = m * 4096 * model.vocab_size / 2 * A.megatron_loss_bytes_per_logit / bw
    assert s.parts["loss"] == pytest.approx(expected, rel=1e-9)
    fused = training_step(model, gpu, layout, replace(job, cross_entropy_fusion=True), A)
    assert fused.parts["loss"] == pytest.approx(expected * A.fused_loss_bytes_per_logit / 52.0, rel=1e-9)
    assert fused.iteration_s == pytest.approx(s.iteration_s - s.parts["loss"] + fused.parts["loss"], rel=1e-9)
    # an eager stack compiled fuses it; told otherwise it pays the eager loss
    hf = replace(job, stack="fsdp2", recipe="auto", compile=True)
    compiled = training_step(model, gpu, Parallelism(gpus=8), hf, A)
    assert compiled.parts["loss"] == pytest.approx(16 // 8 * 4096 * model.vocab_size * 10.0 / bw, rel=1e-9)
    unfused = training_step(model, gpu, Parallelism(gpus=8), replace(hf, cross_entropy_fusion=False), A)
    assert unfused.parts["loss"] == pytest.approx(
        16 // 8 * 4096 * model.vocab_size * A.eager_loss_bytes_per_logit / bw, rel=1e-9
    )


def test_cli_flag_and_json(run):
    code, out, err = run(
        "train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--stack", "megatron", "--recipe", "megatron",
        "--cross-entropy-fusion", "--distributed-optimizer", "--tokens", "1B", "--json",
    )  # fmt: skip
    assert code == 0, err
    rec = json.loads(out)
    assert rec["job"]["cross_entropy_fusion"] is True
    fused_loss = rec["time"]["step_parts_s"]["loss"]
    plain = json.loads(
        run(
            "train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--stack", "megatron", "--recipe", "megatron",
            "--distributed-optimizer", "--tokens", "1B", "--json",
        )[1]
    )  # fmt: skip
    assert plain["job"]["cross_entropy_fusion"] is None and plain["time"]["cross_entropy_fusion"] is False
    assert rec["time"]["cross_entropy_fusion"] is True
    assert plain["time"]["step_parts_s"]["loss"] == pytest.approx(fused_loss * 52 / 10, rel=1e-9)
