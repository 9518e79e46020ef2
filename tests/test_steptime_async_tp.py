"""Megatron's backward tensor-parallel collectives beside the GEMMs (issue 13): Megatron-Core's
LinearWithGradAccumulationAndAsyncCommunication runs a column-parallel layer's backward all-gather / reduce-scatter
(or all-reduce) while its GEMMs run; a row-parallel layer's output-gradient all-gather under sequence parallelism
stays exposed. ``--stack megatron-2021`` runs every backward collective in turn, as Megatron-LM did before
September 2021."""

from __future__ import annotations

import pytest

import gpuplan


def _step(stack, **kw):
    base = dict(gpu="h100", gpus=8, tp=8, micro_batch=1, global_batch=64, seq_len=4096, tokens="1B", zero=1)
    return gpuplan.train("llama-3.1-70b", stack=stack, **{**base, **kw}, offline=True).plan.step


@pytest.mark.parametrize("sp", [True, False])
def test_backward_collectives_beside_gemms(sp):
    old = _step("megatron-2021", sequence_parallel=sp)
    new = _step("megatron", sequence_parallel=sp)
    # the 2021 stack pays forward and backward in turn: twice the forward's collectives
    fwd = old.parts["tp_comm"] / 2
    assert fwd > 0
    # 70B at tp 8: each layer's GEMMs outlast its collectives, so the column-parallel side hides whole; under
    # sequence parallelism the row-parallel all-gathers (half the forward's traffic) stay, without it nothing does
    expected = fwd + (0.5 * fwd if sp else 0.0)
    assert new.parts["tp_comm"] == pytest.approx(expected, rel=1e-9)
    # what runs beside the GEMMs still holds the SMs NCCL uses (collective_sms of the H100's 132)
    hidden = fwd  # the column-parallel side moves as much as the forward
    extra = new.parts.get("comm_sm_contention", 0.0) - old.parts.get("comm_sm_contention", 0.0)
    assert extra == pytest.approx(hidden * 20 / 132, rel=1e-9)
    # everything else is the same step
    for k in ("matmul", "attention", "elementwise"):
        assert new.parts[k] == pytest.approx(old.parts[k], rel=1e-12)


def test_no_tensor_parallelism_no_change():
    a, b = _step("megatron", tp=1, zero=1, gpus=8), _step("megatron-2021", tp=1, zero=1, gpus=8)
    assert a.parts.get("tp_comm", 0.0) == b.parts.get("tp_comm", 0.0) == 0.0


def test_tp_comm_overlap_supersedes():
    # with --tp-comm-overlap (Transformer Engine userbuffers) every collective is chunked behind its GEMMs
    s = _step("megatron", sequence_parallel=True, tp_comm_overlap=True)
    assert s.parts.get("tp_comm", 0.0) == pytest.approx(0.0, abs=1e-12)
