"""The host's share of a step under ZeRO-Offload / ZeRO-Infinity (issue #13): the CPU optimizer, the PCIe copies
and the per-layer parameter fetches, against a case computed by hand, and the same formula on numpy arrays."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan.estimate.params import count_params
from gpuplan.estimate.steptime import StepAssumptions, offload_step_s, training_step
from gpuplan.spec.accelerator import pcie_bytes_per_s
from gpuplan.spec.training import Parallelism, TrainingJob
from test_steptime import gpt

#: the ZeRO-Offload paper's setting (Ren et al. 2021, section 6.1): one V100 32 GB of a DGX-2 whose host (2 x 24-core
#: Xeon Platinum 8168, 6 DDR4-2666 channels per socket: 2 x 6 x 21.33 GB/s = 256 GB/s) serves the single GPU
DGX2_ONE_GPU = StepAssumptions(host_cores_per_gpu=48, host_memory_bytes_per_s_per_gpu=256e9)
MODEL_10B = gpt({"hidden": 4096, "layers": 50, "heads": 32})  # 12 x 50 x 4096^2 = 10.1B in the blocks
JOB = TrainingJob(
    micro_batch=8, seq_len=512, global_batch=8, precision="fp16-mixed", flash_attention=False, recompute="full"
)


def _v100():
    return BUNDLED_ACCELERATORS.get("v100-sxm2-32gb")


def test_optimizer_offload_by_hand():
    """10B GPT on one V100 (PCIe 3 x16, 15.75 GB/s x 0.8 = 12.6 GB/s): CPU-Adam streams 30 B per parameter at
    min(256 GB/s, 48 cores x 10 GB/s) = 256 GB/s; the 16-bit parameters go up (2 B each) behind it; the GPU's own
    optimizer part is gone."""
    n = count_params(MODEL_10B).total
    lay = Parallelism(gpus=1, tp=1, pp=1, zero=2, offload="optimizer")
    s = training_step(MODEL_10B, _v100(), lay, JOB, DGX2_ONE_GPU)
    pcie = pcie_bytes_per_s(3) * 0.8
    cpu = n * 30 / 256e9
    assert s.parts["cpu_optimizer"] == pytest.approx(cpu, rel=1e-12)
    assert cpu == pytest.approx(1.20, abs=0.03)  # hand: 10.3e9 x 30 B / 256 GB/s
    assert s.parts["offload_params_up"] == pytest.approx(n * 2 / pcie - cpu, rel=1e-12)
    assert s.parts["offload_params_up"] == pytest.approx(0.43, abs=0.03)  # 20.6 GB / 12.6 GB/s - 1.20 s
    assert "optimizer" not in s.parts
    # the gradients (1.6 s per micro-batch) go down behind the backward (~3 s for 4k tokens of a 10B model)
    assert "offload_grads" not in s.parts
    plain = training_step(MODEL_10B, _v100(), Parallelism(gpus=1, tp=1, pp=1, zero=2), JOB, DGX2_ONE_GPU)
    added = cpu + s.parts["offload_params_up"] - plain.parts["optimizer"]
    assert s.iteration_s - plain.iteration_s == pytest.approx(added)


def test_host_cores_bound_the_cpu_step():
    """With the machine block's 3 cores per GPU (the default), CPU-Adam streams 3 x 10 GB/s, not the 256 GB/s of
    the whole host: 8.5x slower."""
    n = count_params(MODEL_10B).total
    lay = Parallelism(gpus=1, tp=1, pp=1, zero=2, offload="optimizer")
    few = StepAssumptions(host_memory_bytes_per_s_per_gpu=256e9)
    s = training_step(MODEL_10B, _v100(), lay, JOB, few)
    assert s.parts["cpu_optimizer"] == pytest.approx(n * 30 / 30e9, rel=1e-12)


def test_gradients_exposed_when_backward_is_short():
    """A micro-batch of one 512-token sequence: the backward (~0.4 s) no longer covers the 1.6 s gradient copy."""
    lay = Parallelism(gpus=1, tp=1, pp=1, zero=2, offload="optimizer")
    job = TrainingJob(micro_batch=1, seq_len=512, global_batch=4, precision="fp16-mixed", flash_attention=False)
    s = training_step(MODEL_10B, _v100(), lay, job, DGX2_ONE_GPU)
    n = count_params(MODEL_10B).total
    down = n * 2 / (pcie_bytes_per_s(3) * 0.8)
    assert 0 < s.parts["offload_grads"] < 4 * down
    assert s.parts["offload_grads"] > 4 * (down - 1.0)


def test_params_offload_fetches_each_pass():
    """ZeRO-Infinity on 8 GPUs, DeepSpeed of 2021 (no prefetch): each micro-batch fetches the rank's shard (1/8) of
    every layer up PCIe for the forward, the backward and the recompute; no upload after the step."""
    n = count_params(MODEL_10B).total
    lay = Parallelism(gpus=8, tp=1, pp=1, zero=3, offload="params")
    job = TrainingJob(micro_batch=4, seq_len=512, global_batch=64, precision="fp16-mixed", stack="deepspeed-2021")
    s = training_step(MODEL_10B, _v100(), lay, job, StepAssumptions())
    fetch = n / 8 * 2 / (pcie_bytes_per_s(3) * 0.8)
    assert s.micro_batches == 2
    assert s.parts["offload_param_fetch"] == pytest.approx(2 * 2 * fetch, rel=1e-12)  # recompute none: 2 passes
    assert "offload_params_up" not in s.parts
    job_rc = TrainingJob(
        micro_batch=4, seq_len=512, global_batch=64, precision="fp16-mixed", stack="deepspeed-2021", recompute="full"
    )
    s_rc = training_step(MODEL_10B, _v100(), lay, job_rc, StepAssumptions())
    assert s_rc.parts["offload_param_fetch"] == pytest.approx(2 * 3 * fetch, rel=1e-12)


def test_offload_is_never_free():
    """Across sizes and batches offload never makes a step faster than the same layout without it."""
    for mb, gb in ((1, 8), (4, 64), (8, 256)):
        job = TrainingJob(micro_batch=mb, seq_len=1024, global_batch=gb, precision="bf16-mixed")
        a100 = BUNDLED_ACCELERATORS.get("a100-sxm-80gb")
        base = training_step(MODEL_10B, a100, Parallelism(gpus=8, zero=3), job)
        for off in ("optimizer", "params"):
            s = training_step(MODEL_10B, a100, Parallelism(gpus=8, zero=3, offload=off), job)
            assert s.iteration_s > base.iteration_s


def test_offload_formula_on_arrays():
    """The planner calls it with arrays: each element equals the plain-number call to 1e-12."""
    gpu = _v100()
    opt = np.array([1e8, 5e8, 2e9])
    fwd, bwd, mbs = np.array([0.01, 0.2, 1.0]), np.array([0.02, 0.4, 2.0]), np.array([1, 4, 16])
    a = StepAssumptions()
    for params_off in (False, True):
        for prefetch in (False, True):
            kw = {"params_offloaded": params_off, "prefetch": prefetch, "refetch": True}
            arr = offload_step_s(gpu, a, opt, opt, mbs, fwd, bwd, **kw)
            for i in range(3):
                one = offload_step_s(gpu, a, float(opt[i]), float(opt[i]), int(mbs[i]), fwd[i], bwd[i], **kw)
                for k, v in one.items():
                    assert float(np.asarray(arr[k])[i]) == pytest.approx(float(v), rel=1e-12, abs=0)


def test_activation_offload_copies_what_the_memory_estimate_counts():
    """--assume on the memory side (here the saved activations' bytes per element) reaches the step's offload copies:
    the bytes crossing PCIe are the ones the memory estimate keeps, so doubling them doubles the copy time."""
    import gpuplan

    def run(width: int):
        return gpuplan.train(
            "llama-3.1-8b", gpu="h100", gpus=8, fsdp=True, offload="activations", micro_batch=1, global_batch=8,
            seq_len=8192, tokens="1B", assume={"activation_bytes_per_element": width}, offline=True,
        )  # fmt: skip

    two, four = run(2), run(4)
    assert four.memory.total_bytes > two.memory.total_bytes
    s2, s4 = two.plan.step.parts["activation_offload"], four.plan.step.parts["activation_offload"]
    assert s2 > 0 and s4 > 2 * s2  # copy time doubles; the compute covering part of it does not


def test_grace_superchips_offload_over_nvlink_c2c():
    """A Grace superchip's GPU reaches its host over NVLink-C2C, not a PCIe slot: the catalog's
    host_link_bytes_per_s (GH200 450 GB/s per direction; GB200 225, two GPUs sharing the superchip's 900 GB/s
    bidirectional) x offload_pcie_efficiency is what offload and checkpoint copies get; an HGX B200 keeps its
    PCIe Gen 5 x16 (63 GB/s)."""
    from gpuplan.estimate.steptime import host_link_bytes_per_s

    a = StepAssumptions()
    gh200, gb200, b200 = (BUNDLED_ACCELERATORS.get(g) for g in ("gh200", "gb200", "b200"))
    assert host_link_bytes_per_s(gh200, a) == pytest.approx(450e9 * a.offload_pcie_efficiency)
    assert host_link_bytes_per_s(gb200, a) == pytest.approx(225e9 * a.offload_pcie_efficiency)
    assert host_link_bytes_per_s(b200, a) == pytest.approx(pcie_bytes_per_s(b200.pcie_gen or 4) * 0.8)
    assert gb200.source_for("host_link_bytes_per_s").derivation
    # activation offload of a 70B layer stack: the same job spends far less waiting on the link on a GB200
    model = gpt({"hidden": 8192, "layers": 8, "heads": 64})
    job = TrainingJob(micro_batch=2, seq_len=8192, global_batch=2, precision="bf16-mixed", offload_layers=8)
    lay = Parallelism(gpus=1, tp=1, pp=1, offload="activations")
    waits = {g.id: training_step(model, g, lay, job, a).parts.get("activation_offload", 0.0) for g in (gb200, b200)}
    assert waits["b200"] > 0 and waits["gb200"] < waits["b200"] / 3
