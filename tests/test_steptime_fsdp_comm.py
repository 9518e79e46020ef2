"""ZeRO-3/FSDP communication as it runs (issue 13): the gradient collective is a reduce-scatter (the ZeRO paper's
3 x params in all), a prefetching pipeline still waits for each pass's first gather and the last reduce-scatter,
and FSDP's reduce dtype is `--main-grads`. Each against the formula's own terms."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.errors import JobError
from gpuplan.estimate.memory import resolve_recipe
from gpuplan.estimate.params import count_params
from gpuplan.estimate.steptime import StepAssumptions, training_step
from gpuplan.plan.validate import NIC_BUSBW_PER_LINE_RATE, _network_bytes_per_s_per_gpu
from gpuplan.spec.training import Parallelism, TrainingJob

A = StepAssumptions()
MODEL = "llama-2-7b"


def _step(layout, job, a=A):
    return training_step(BUNDLED_MODELS.get(MODEL), BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), layout, job, a)


def test_zero3_gradient_collective_is_a_reduce_scatter():
    """Unhidden (--no-overlap-grad-reduce), the ZeRO-3 gradient collective moves S (n-1)/n: half the bytes of the
    ZeRO-1 all-reduce of the same gradients (whose second half is the parameter all-gather)."""
    job = TrainingJob(micro_batch=2, seq_len=4096, global_batch=32, fsdp=True, overlap_grad_reduce=False)
    z3 = _step(Parallelism(gpus=16, zero=3), job)
    n, params = 16, count_params(BUNDLED_MODELS.get(MODEL)).total
    busbw = min(BUNDLED_ACCELERATORS.get("h100-sxm-80gb").scale_up_bytes_per_s * A.link_efficiency, 8 * 48e9)
    expected = A.collective_latency_s + params * 4 * (n - 1) / n / busbw  # fp32 reduce dtype (torchtitan)
    assert z3.parts["dp_comm"] == pytest.approx(expected, rel=1e-9)


def test_fsdp_reduce_dtype_is_main_grads():
    job = TrainingJob(micro_batch=2, seq_len=4096, global_batch=32, fsdp=True, overlap_grad_reduce=False)
    layout = Parallelism(gpus=16, zero=3)
    fp32 = _step(layout, job)
    bf16 = _step(layout, replace(job, main_grads="bf16"))
    lat = A.collective_latency_s
    assert bf16.parts["dp_comm"] - lat == pytest.approx((fp32.parts["dp_comm"] - lat) / 2, rel=1e-9)
    # the copy-in of the unsharded gradients writes 2 bytes, not 4
    assert bf16.parts["sharding_copies"] == pytest.approx(fp32.parts["sharding_copies"] * 12 / 14, rel=1e-9)
    recipe, why = resolve_recipe(replace(job, main_grads="bf16"), layout)
    assert recipe.name == "fsdp" and "reduce dtype" in why
    with pytest.raises(JobError, match="--fp8-params"):
        resolve_recipe(replace(job, main_grads="bf16", fp8_params=True, precision="fp8-mixed"), layout)


def test_prefetch_still_waits_for_the_first_gather():
    """Compute far longer than the gathers: a prefetching FSDP still waits for the unit outside the layers and the
    first layer before the forward, and for the last reduce-scatters after the backward."""
    job = TrainingJob(micro_batch=2, seq_len=4096, global_batch=32, fsdp=True)
    s = _step(Parallelism(gpus=16, zero=3), job)
    model = BUNDLED_MODELS.get(MODEL)
    b = count_params(model)
    outside = b.parts["embeddings"] + b.parts["lm_head"]
    layer = (b.total - outside) / model.layers
    busbw = min(BUNDLED_ACCELERATORS.get("h100-sxm-80gb").scale_up_bytes_per_s * A.link_efficiency, 8 * 48e9)
    # NCCL's ring latency on 16 ranks over 2 nodes: one network step and 14 NVLink steps, per collective
    one = A.collective_latency_s + A.ring_step_latency_s + 14 * A.intra_ring_step_latency_s
    fill = (outside + layer) * 2 * 15 / 16 / busbw + 2 * one
    assert s.parts["zero3_gather"] == pytest.approx(fill, rel=1e-9)  # one micro-batch
    drain = (outside + layer) * 4 * 15 / 16 / busbw + 2 * A.collective_latency_s
    assert s.parts["dp_comm"] == pytest.approx(drain, rel=1e-9)


def test_stated_network_per_gpu():
    line = NIC_BUSBW_PER_LINE_RATE
    assert _network_bytes_per_s_per_gpu("800 Gbps inter-node", 8) == pytest.approx(800e9 / 8 / 8 * line)
    assert _network_bytes_per_s_per_gpu("3.2 Tbps inter-node", 8) == pytest.approx(48e9, rel=1e-9)
    assert _network_bytes_per_s_per_gpu("NVLink4 within node; 8x400 Gb/s InfiniBand per node", 8) == pytest.approx(
        48e9, rel=1e-9
    )
    assert _network_bytes_per_s_per_gpu("RDMA backend network 400 Gb/s per GPU", 8) == pytest.approx(48e9, rel=1e-9)
    assert _network_bytes_per_s_per_gpu("NVLink within node", 8) is None
    assert _network_bytes_per_s_per_gpu(None, 8) is None


def test_per_op_sac_gathers_sequence_parallel_inputs_again():
    """torchtitan's per-op SAC saves the reduce-scatters' outputs, not the all-gathers': under TP with sequence
    parallelism the recompute adds the forward's all-gathers, half its tensor-parallel traffic (a quarter of the
    forward + backward's); without SP there is no gather to repeat. Seen by slowing the link alone."""
    gpu, model = BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), BUNDLED_MODELS.get("llama-3.1-8b")
    job = TrainingJob(micro_batch=2, seq_len=8192, global_batch=16, recompute="per-op", compile=True, fsdp=True)
    slow = replace(A, link_efficiency=0.4)
    for sp in (True, False):
        layout = Parallelism(gpus=64, tp=8, zero=3, sequence_parallel=sp)
        fast_s, slow_s = (training_step(model, gpu, layout, job, a) for a in (A, slow))
        d_recompute = slow_s.parts["recompute"] - fast_s.parts["recompute"]
        d_comm = slow_s.parts["tp_comm"] - fast_s.parts["tp_comm"]
        assert d_comm > 0
        assert d_recompute == pytest.approx(d_comm / 4 if sp else 0.0, rel=1e-9, abs=1e-12)


def test_deepspeed_2021_list_gathers_cost_per_rank():
    """DeepSpeed v0.3's ZeRO-3 gathers each tensor into a list of one view per rank, which PyTorch fills by one copy
    per rank: a per-rank cost per gathered tensor, so the gathers grow with the group; today's DeepSpeed
    (all_gather_into_tensor, prefetched) has none of it."""
    gpu, model = BUNDLED_ACCELERATORS.get("a100-sxm-80gb"), BUNDLED_MODELS.get("llama-2-7b")
    job = TrainingJob(micro_batch=1, seq_len=2048, global_batch=512, precision="fp16-mixed", stack="deepspeed-2021")
    free = replace(A, list_gather_s_per_rank=0.0)
    extra = {}
    for n in (64, 256):
        layout = Parallelism(gpus=n, zero=3)
        costly, plain = (training_step(model, gpu, layout, job, a) for a in (A, free))
        extra[n] = costly.parts["zero3_gather"] - plain.parts["zero3_gather"]
        # two passes (no recompute) x micro-batches x gathered tensors per layer x layers x ranks x the per-rank cost
        tensors = costly.parts["zero3_gather"] > 0 and extra[n] / (2 * costly.micro_batches * model.layers * n * 5e-6)
        assert tensors == pytest.approx(round(tensors), rel=1e-9) and tensors >= 4
    # the cost per micro-batch grows with the group (4x the ranks, 4x the cost)
    per_mb = {n: extra[n] / training_step(model, gpu, Parallelism(gpus=n, zero=3), job, A).micro_batches for n in extra}
    assert per_mb[256] == pytest.approx(4 * per_mb[64], rel=1e-9)
    modern = training_step(model, gpu, Parallelism(gpus=64, zero=3), replace(job, stack="deepspeed"), A)
    modern_free = training_step(model, gpu, Parallelism(gpus=64, zero=3), replace(job, stack="deepspeed"), free)
    assert modern.iteration_s == pytest.approx(modern_free.iteration_s, rel=1e-12)
