"""The NVLink domain as the catalog gives it (issue #13, item 4): on GB200/GB300 NVL72 the scale-up link joins 72
GPUs across 18 hosts of 4, so collectives inside 72 GPUs stay on NVLink; an 8-GPU HGX board keeps its 8."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import BUNDLED_ACCELERATORS, BUNDLED_MODELS
from gpuplan.estimate.steptime import StepAssumptions, nvlink_domain_gpus, training_step
from gpuplan.spec.training import Parallelism, TrainingJob

A = StepAssumptions()
JOB = TrainingJob(micro_batch=1, seq_len=8192, global_batch=576, precision="bf16-mixed", fsdp=True)


def test_domain_comes_from_the_catalog_only_where_it_spans_hosts():
    assert nvlink_domain_gpus(BUNDLED_ACCELERATORS.get("gb200"), A) == 72
    assert nvlink_domain_gpus(BUNDLED_ACCELERATORS.get("gb300"), A) == 72
    assert nvlink_domain_gpus(BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), A) == 8
    # an NVLink-bridged pair of PCIe cards keeps the 8-GPU host (its other GPUs are reached over PCIe, not NICs)
    assert nvlink_domain_gpus(BUNDLED_ACCELERATORS.get("h100-nvl-94gb"), A) == 8
    # the assumption wins, both ways
    assert nvlink_domain_gpus(BUNDLED_ACCELERATORS.get("gb200"), replace(A, nvlink_domain_gpus=4)) == 4
    assert nvlink_domain_gpus(BUNDLED_ACCELERATORS.get("h100-sxm-80gb"), replace(A, nvlink_domain_gpus=16)) == 16


def test_gb200_data_parallel_traffic_stays_on_nvlink_inside_the_rack():
    """64 GB200 with FSDP: the gathers and the reduce-scatter run on NVLink 5 (one rack) and hide behind compute;
    treated as 8-GPU hosts the same job waits for NIC-bound gathers."""
    model, gpu = BUNDLED_MODELS.get("llama-3.1-70b"), BUNDLED_ACCELERATORS.get("gb200")
    layout = Parallelism(gpus=64, tp=8, zero=3)
    rack = training_step(model, gpu, layout, JOB, A)
    hosts = training_step(model, gpu, layout, JOB, replace(A, nvlink_domain_gpus=8))
    # in the rack only the pipeline's fill and drain wait (the first gather, the last reduce-scatters)
    assert rack.parts["zero3_gather"] < 0.05 * hosts.parts["zero3_gather"]
    assert rack.parts["dp_comm"] < hosts.parts["dp_comm"]
    assert rack.iteration_s < hosts.iteration_s
    # the compute is the same: only the collectives moved
    assert rack.parts["matmul"] == pytest.approx(hosts.parts["matmul"], rel=1e-12)


def test_hgx_board_unchanged():
    """On an 8-GPU H100 board the default is the old 8: setting it explicitly changes nothing."""
    model, gpu = BUNDLED_MODELS.get("llama-3.1-70b"), BUNDLED_ACCELERATORS.get("h100-sxm-80gb")
    layout = Parallelism(gpus=64, tp=8, zero=3)
    a = training_step(model, gpu, layout, JOB, A)
    b = training_step(model, gpu, layout, JOB, replace(A, nvlink_domain_gpus=8))
    assert a.iteration_s == pytest.approx(b.iteration_s, rel=1e-12)
