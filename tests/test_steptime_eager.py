"""What an eager PyTorch step costs beyond its GEMMs (issue #20, from the H200 recordings): the host's dispatch as
a floor, the loss's passes over the logits, LoRA's missing weight gradients and activation offload's PCIe copies.
Each against the formula's own terms, so a change in one of them shows here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.estimate.memory import MemoryAssumptions, activation_bytes_per_layer
from gpuplan.estimate.steptime import StepAssumptions, host_link_bytes_per_s, training_step
from gpuplan.spec.training import Parallelism, TrainingJob

A = StepAssumptions()
ONE = Parallelism(gpus=1)


def _gpu():
    return BUNDLED_ACCELERATORS.get("h200-sxm-141gb")


def _model(mid="llama-3.2-1b"):
    return BUNDLED_MODELS.get(mid)


def test_host_dispatch_is_a_floor_under_a_small_eager_step():
    """A 1B model at 256 tokens does little GPU work per kernel: the step is the host's 5.05 ms per layer, and the
    wait is exactly what the GPU's parts leave of it. Compiled (or a fused stack), there is no such floor."""
    model, gpu = _model(), _gpu()
    job = TrainingJob(micro_batch=1, seq_len=256, global_batch=1, precision="bf16", stack="hf")
    s = training_step(model, gpu, ONE, job)
    host = A.eager_host_s_per_layer * model.layers
    assert s.iteration_s == pytest.approx(host, rel=1e-12)
    assert s.parts["host_dispatch_wait"] == pytest.approx(
        host - (s.iteration_s - s.parts["host_dispatch_wait"]), rel=1e-9
    )
    compiled = training_step(model, gpu, ONE, replace(job, compile=True))
    assert "host_dispatch_wait" not in compiled.parts and compiled.iteration_s < host
    big = training_step(model, gpu, ONE, replace(job, micro_batch=8, seq_len=8192, global_batch=8))
    assert "host_dispatch_wait" not in big.parts  # the GPU's work covers the host's


def test_eager_loss_traffic_per_logit():
    """46 bytes per token and vocabulary entry at the GPU's effective bandwidth, on the uncompiled eager stacks."""
    model, gpu = _model(), _gpu()
    job = TrainingJob(micro_batch=4, seq_len=2048, global_batch=4, precision="bf16", stack="hf")
    s = training_step(model, gpu, ONE, job)
    bw = gpu.memory_bandwidth_bytes_per_s * A.hbm_efficiency
    assert s.parts["loss"] == pytest.approx(4 * 2048 * model.vocab_size * 46 / bw, rel=1e-12)
    # a compiled eager stack fuses it; Megatron's own (unfused by default) is tests/test_steptime_loss.py's
    fused = training_step(model, gpu, ONE, replace(job, compile=True))
    assert fused.parts["loss"] == pytest.approx(
        4 * 2048 * model.vocab_size * A.fused_loss_bytes_per_logit / bw, rel=1e-12
    )


def test_lora_backward_has_no_frozen_weight_gradients():
    """LoRA's backward runs one GEMM per base linear (the input gradient) where full training runs two, plus the
    adapters' thin GEMMs; the optimizer steps the adapters only (tens of MB, not the model)."""
    model, gpu = _model("llama-3.1-8b"), _gpu()
    full = TrainingJob(micro_batch=4, seq_len=2048, global_batch=4, precision="bf16", stack="hf")
    lora = replace(full, method="lora")
    f, q = training_step(model, gpu, ONE, full), training_step(model, gpu, ONE, lora)
    # matmul: full = 3 x forward, LoRA = 2 x forward + adapters: between 2/3 and 3/4 of full's
    assert 0.66 < q.parts["matmul"] / f.parts["matmul"] < 0.75
    assert q.parts["optimizer"] < f.parts["optimizer"] / 100


@pytest.mark.parametrize("compile_", [False, True])
def test_lora_branch_joins_the_base_output_elementwise(compile_):
    """Each adapted linear adds its branch to the base output (PEFT: result + lora_B(lora_A(x)) * scaling): forward,
    the scaling and the sum (5 x 2 B per output element eager, 3 x 2 B in one compiled kernel); backward, the scaled
    output gradient (2 x 2 B) and the branch's input gradient summed into the base's (3 x 2 B per input element)."""
    from gpuplan.estimate.params import linear_shapes

    model, gpu = _model(), _gpu()
    full = TrainingJob(micro_batch=1, seq_len=2048, global_batch=1, precision="bf16", stack="hf", compile=compile_)
    lora = replace(full, method="lora")  # default targets q, k, v, o
    f, q = training_step(model, gpu, ONE, full), training_step(model, gpu, ONE, lora)
    shapes = linear_shapes(model)
    out_b = 3.0 if compile_ else 5.0
    per_layer = sum(
        2048 * (out_b * dout + 2 * dout + 3 * din) * 2 for k, (din, dout, n) in shapes.items() if k in lora.targets
    )
    bw = gpu.memory_bandwidth_bytes_per_s * A.hbm_efficiency
    extra = q.parts["elementwise"] - f.parts["elementwise"]
    assert extra == pytest.approx(model.layers * per_layer / bw, rel=1e-9)


@pytest.mark.parametrize("m", [1, 4])
def test_autocast_casts_every_fp32_weight_each_micro_batch(m):
    """PyTorch AMP (fp32 weights under autocast) casts each weight to bf16 every forward (6 B per parameter), casts
    its gradient back (6 B) and, from the second micro-batch on, adds it into .grad (12 B); pure bf16 and LoRA's
    16-bit base pay none of it."""
    from gpuplan.estimate.params import count_params

    model, gpu = _model(), _gpu()
    amp = TrainingJob(micro_batch=1, seq_len=2048, global_batch=m, precision="bf16-mixed", stack="hf")
    s = training_step(model, gpu, ONE, amp)
    bw = gpu.memory_bandwidth_bytes_per_s * A.hbm_efficiency
    params = count_params(model).total
    assert s.parts["amp_casts"] == pytest.approx(m * params * (12 + 12 * (m - 1) / m) / bw, rel=1e-12)
    assert "amp_casts" not in training_step(model, gpu, ONE, replace(amp, precision="bf16")).parts
    assert "amp_casts" not in training_step(model, gpu, ONE, replace(amp, method="lora")).parts


def test_activation_offload_pays_what_compute_cannot_hide():
    """Each offloaded layer's saved activations go to the host in forward and come back in backward over PCIe;
    per layer the exposed time is max(0, copy - forward) + max(0, copy - backward)."""
    model, gpu = _model("llama-3.1-8b"), _gpu()
    job = TrainingJob(micro_batch=4, seq_len=4096, global_batch=4, precision="bf16", stack="hf", offload_layers=8)
    lay = Parallelism(gpus=1, offload="activations")
    s = training_step(model, gpu, lay, job)
    kept = sum(activation_bytes_per_layer(model, job, lay, MemoryAssumptions()).values())
    copy = kept / host_link_bytes_per_s(gpu, A)
    assert copy > 0.01  # gigabytes per layer over ~51 GB/s: tens of ms, more than a layer's compute here
    on = training_step(model, gpu, Parallelism(gpus=1), job)
    assert s.parts["activation_offload"] > 0 and s.iteration_s > on.iteration_s
    fewer = training_step(model, gpu, lay, replace(job, offload_layers=4))
    assert fewer.parts["activation_offload"] == pytest.approx(s.parts["activation_offload"] / 2, rel=1e-12)


def test_distributed_optimizer_splits_the_reduction_and_the_gather():
    """ZeRO-1 (Megatron's distributed optimizer): the gradients' reduce-scatter hides behind backward with
    --overlap-grad-reduce, the parameters' all-gather (half the all-reduce's bytes) behind the next forward only with
    --overlap-param-gather; plain data parallelism (ZeRO-0) is an all-reduce behind backward either way."""
    model, gpu = _model("llama-3.1-8b"), BUNDLED_ACCELERATORS.get("h100")
    job = TrainingJob(micro_batch=1, seq_len=4096, global_batch=64, precision="bf16-mixed", recipe="megatron")
    lay = Parallelism(gpus=64, tp=1, zero=1)
    grad_only = training_step(model, gpu, lay, replace(job, overlap_grad_reduce=True))
    both = training_step(model, gpu, lay, replace(job, overlap_grad_reduce=True, overlap_param_gather=True))
    exposed_without = grad_only.parts.get("dp_comm", 0.0)
    assert exposed_without > 0  # the all-gather waits
    assert both.parts.get("dp_comm", 0.0) < exposed_without
    plain = Parallelism(gpus=64, tp=1, zero=0)
    a = training_step(model, gpu, plain, replace(job, overlap_grad_reduce=True))
    b = training_step(model, gpu, plain, replace(job, overlap_grad_reduce=True, overlap_param_gather=True))
    assert a.parts.get("dp_comm", 0.0) == b.parts.get("dp_comm", 0.0)
