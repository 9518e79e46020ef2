"""The whole machine around the GPUs: storage, checkpoints, failures and goodput, CPU, host RAM, network,
energy and emissions. Pure formulas (no I/O, no printing); every name carries its unit.

Sources, by part:
- Dataset bytes: tokens x bytes per token. Pre-tokenized data is stored as uint16 when the vocabulary has
  fewer than 65,500 entries and int32 otherwise (Megatron-LM ``megatron/core/datasets/indexed_dataset.py``,
  ``DType.optimal_dtype``).
- Checkpoint bytes: weights + fp32 master weights + optimizer states per trained parameter, as the memory
  recipes count them (BLOOM 176B: 2 + 4 + 8 = 14 B/param = 2.46e12 B = 2.24 TiB, the model card's "2.3TB").
- Failures: a per-GPU-hour rate (Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783,
  section 3.3.4: 419 unexpected interruptions in 54 days on 16,384 H100; Kokolis et al., "Revisiting
  Reliability in Large-Scale Machine Learning Research Clusters", arXiv:2410.21680 / HPCA 2025: MTTF 7.9 h
  for 1,024-GPU jobs on A100 clusters); failures of independent GPUs add, so the cluster MTBF is
  1 / (rate x GPUs).
- Checkpoint interval: Young 1974 ("A first order approximation to the optimum checkpoint interval",
  CACM 17(9)) sqrt(2 delta M); Daly 2006 ("A higher order estimate of the optimum checkpoint interval for
  restart dumps", FGCS 22(3)) sqrt(2 delta M) [1 + (1/3) sqrt(delta/2M) + (1/9) delta/2M] - delta for
  delta < 2M, else M; and Daly's expected wall time M e^(R/M) (e^((tau+delta)/M) - 1) T_s / tau.
- CPU cores and host RAM: Bekman, ml-engineering, compute/cpu ("1 cpu core per process that is tied to the
  accelerator" + "1 cpu core for each DataLoader worker process - and typically you need 2-4 workers") and
  compute/cpu-memory ("at least as much CPU memory on each node as there is on the GPUs").
- Network: ring all-reduce moves 2(n-1)/n x S per rank (nccl-tests PERFORMANCE.md), hidden when it fits in
  the backward pass it overlaps.
- Energy: GPU-hours x TDP (the power cap where --assume power_limit_w sets one below it) x host-power factor x
  PUE (the TCO module's rule); CO2eq = energy x grid intensity.
- Arrays: the failure, checkpoint and storage formulas take plain numbers or numpy arrays (``xp.py``), so
  ``plan train`` adjusts every candidate of its grid for failures with the very functions ``train`` uses.
- The instance's resources (``--offer``): vCPUs, host RAM and local NVMe from the offers catalog (each figure with
  its source, docs/offers-schema.md) against the needs above; a figure the offer does not publish is "unknown".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import JobError
from ..units import GiB, MiB
from . import xp
from .assumptions import AssumptionSet, check_assumptions

HOUR_S = 3600.0


def _sqrt(x: float) -> float:
    """Square root: ``math.sqrt`` on a number, ``numpy.sqrt`` on an array (both correctly rounded)."""
    return xp._np().sqrt(x) if xp.is_array(x) else math.sqrt(x)


def _exp(x: float) -> float:
    """e^x: ``math.exp`` on a number, ``numpy.exp`` on an array; inf past the float range (both ways)."""
    return _past_range(x, "exp")


def _expm1(x: float) -> float:
    """e^x - 1 without cancellation near 0: ``math.expm1`` on a number, ``numpy.expm1`` on an array; inf past the
    float range (a checkpoint that takes many MTBFs to write: the run never finishes)."""
    return _past_range(x, "expm1")


def _past_range(x: float, name: str) -> float:
    if xp.is_array(x):
        np = xp._np()
        with np.errstate(over="ignore"):
            return getattr(np, name)(x)  # type: ignore[no-any-return]
    try:
        return getattr(math, name)(x)  # type: ignore[no-any-return]
    except OverflowError:
        return math.inf


# ------------------------------------------------------------------------------------------ failures

#: Llama 3 405B pre-training: 419 unexpected interruptions in a 54-day snapshot on 16,384 H100.
LLAMA3_FAILURES_PER_GPU_HOUR = 419 / (16_384 * 54 * 24)
#: Meta's RSC-1/RSC-2 A100 research clusters: MTTF 7.9 h for 1,024-GPU jobs.
RSC_FAILURES_PER_GPU_HOUR = 1 / (7.9 * 1_024)

FAILURE_SOURCES: Mapping[str, tuple[float, str]] = MappingProxyType(
    {
        "llama3": (
            LLAMA3_FAILURES_PER_GPU_HOUR,
            "Dubey et al. 2024, The Llama 3 Herd of Models (arXiv:2407.21783), section 3.3.4: 419 unexpected "
            "interruptions in a 54-day snapshot on 16,384 H100 = 1.97e-5 per GPU-hour",
        ),
        "rsc": (
            RSC_FAILURES_PER_GPU_HOUR,
            "Kokolis et al., Revisiting Reliability in Large-Scale Machine Learning Research Clusters "
            "(arXiv:2410.21680, HPCA 2025): MTTF 7.9 h for 1,024-GPU jobs on Meta's A100 clusters = 1.24e-4 per "
            "GPU-hour",
        ),
    }
)
FAILURE_RANGE_NOTE = (
    "published rates span 1.97e-5 (Llama 3, 16K H100) to 1.24e-4 (Meta RSC A100 clusters) "
    "failures per GPU-hour, a 6x spread"
)


def default_failure_source(architecture: str) -> str:
    """The source most like the plan: Meta's A100 clusters for Ampere and older, Llama 3's H100 run otherwise."""
    return "rsc" if architecture.lower() in ("ampere", "volta", "turing", "cdna2", "cdna") else "llama3"


def cluster_mtbf_s(failures_per_gpu_hour: float, gpus: int) -> float:
    """Mean time between failures of the job: independent GPUs' rates add (series system), so
    MTBF = 3600 / (rate x GPUs) seconds."""
    if not xp.all_true(xp.isfinite(failures_per_gpu_hour) & (failures_per_gpu_hour > 0) & (gpus >= 1)):
        raise JobError("the failure rate must be a finite number > 0 and the GPU count >= 1")
    return HOUR_S / (failures_per_gpu_hour * gpus)


def expected_failures(failures_per_gpu_hour: float, gpus: int, hours: float) -> float:
    """Poisson expectation: rate x GPUs x hours (Llama 3: 1.97e-5 x 16,384 x 1,296 h = 419)."""
    return failures_per_gpu_hour * gpus * hours


def young_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Young 1974: the compute time between checkpoints that minimizes lost time, sqrt(2 delta M)."""
    return _sqrt(2 * delta_s * mtbf_s)


def daly_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Daly 2006, eq. for the higher-order optimum: sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) +
    (1/9) (delta / 2M)] - delta when delta < 2M, else M. Daly's own cases (R = 10 min, delta = 5 min):
    117 min at M = 24 h, 57 min at M = 6 h, 9.1 min at M = 15 min."""
    x = delta_s / (2 * mtbf_s)
    return xp.where(delta_s >= 2 * mtbf_s, mtbf_s, _sqrt(2 * delta_s * mtbf_s) * (1 + _sqrt(x) / 3 + x / 9) - delta_s)


def daly_wall_time_s(solve_s: float, interval_s: float, delta_s: float, restart_s: float, mtbf_s: float) -> float:
    """Daly 2006's expected wall time under Poisson failures: M e^(R/M) (e^((tau + delta)/M) - 1) T_s / tau.
    To first order it is T_s (1 + delta/tau) (1 + R/M + (tau + delta) / 2M): checkpoint writes, then per
    failure a restart and the rework of half an interval on average."""
    if not xp.all_true((interval_s > 0) & (mtbf_s > 0)):
        raise JobError("the checkpoint interval and the MTBF must be more than zero")
    m = mtbf_s
    return m * _exp(restart_s / m) * _expm1((interval_s + delta_s) / m) * solve_s / interval_s


@dataclass(frozen=True)
class FailureCost:
    """A run's expected wall time with failures, and where the time beyond the ideal goes."""

    solve_s: float
    wall_s: float
    interruptions: float
    checkpoint_s: float
    restart_s: float
    rework_s: float

    @property
    def goodput(self) -> float:
        """Useful time over wall time, in (0, 1]."""
        return self.solve_s / self.wall_s


def run_with_failures(
    solve_s: float, interval_s: float, delta_s: float, restart_s: float, mtbf_s: float, lost_per_failure_s: float = 0.0
) -> FailureCost:
    """Daly's wall time, itemized: checkpoint writes (T_s / tau x delta), expected interruptions (wall / M),
    restarts (interruptions x R, plus ``lost_per_failure_s``: an asynchronous checkpoint still being written
    when a failure strikes is lost, which costs its write time on average), and the rest, rework."""
    per_failure = restart_s + lost_per_failure_s
    wall = daly_wall_time_s(solve_s, interval_s, delta_s, per_failure, mtbf_s)
    n = wall / mtbf_s
    ckpt = solve_s / interval_s * delta_s
    restarts = n * per_failure
    return FailureCost(solve_s, wall, n, ckpt, restarts, xp.maximum(0.0, wall - solve_s - ckpt - restarts))


# -------------------------------------------------------------------------------------- storage, data


def token_dtype_bytes(vocab_size: int | None) -> int:
    """Bytes per stored token: uint16 below 65,500 vocabulary entries, else int32 (Megatron-LM
    DType.optimal_dtype); 4 when the vocabulary is unknown."""
    return 2 if vocab_size is not None and vocab_size < 65_500 else 4


def dataset_bytes(tokens: float, bytes_per_token: float) -> float:
    """Bytes the run reads: tokens (x epochs) x bytes per token."""
    return tokens * bytes_per_token


def read_bytes_per_s(tokens_per_s: float, bytes_per_token: float) -> float:
    """Storage read throughput that keeps up with training: tokens/s x bytes per token."""
    return tokens_per_s * bytes_per_token


@dataclass(frozen=True)
class StorageClass:
    """A storage class's sourced bandwidths per node (bytes/s), and whether what it holds survives a node."""

    read_bytes_per_s_per_node: float
    write_bytes_per_s_per_node: float
    aggregate_write_bytes_per_s: float  # 0: no cap beyond the nodes' own
    durable: bool
    source: str


STORAGE_CLASSES: Mapping[str, StorageClass] = MappingProxyType(
    {
        "local-nvme": StorageClass(
            50e9,
            25e9,
            0.0,
            False,
            "DGX H100 internal storage: 8 x 3.84 TB NVMe U.2 in RAID 0 (NVIDIA DGX H100 user guide); a Gen4 x4 U.2 "
            "drive's link carries 7.9 GB/s (PCI-SIG) and such drives are rated ~7 GB/s sequential read and ~3-4 GB/s "
            "write: ~50 GB/s read, ~25 GB/s write per node (approximate; measure with fio or gdsio). Not durable: a "
            "node loss loses its checkpoint unless it is copied out",
        ),
        "nfs": StorageClass(
            1500 * MiB,
            1500 * MiB,
            1 * GiB,
            True,
            "Amazon EFS performance specifications (Elastic throughput, a managed NFS): 1,500 MiB/s per client; 20-60 "
            "GiB/s read and 1-5 GiB/s write per file system (the low end, 1 GiB/s, caps checkpoint writes)",
        ),
        "lustre": StorageClass(
            40e9,
            20e9,
            2e12,
            True,
            "NVIDIA DGX SuperPOD (H100) reference architecture: 'a GDS-enabled application should be able to read data "
            "at over 40 GBps' per node from the storage fabric; writes taken at half that; aggregate capped at 2 TB/s, "
            "the sustained throughput of the file system behind Llama 3's 16K-GPU run (Dubey et al. 2024, section "
            "3.3.1: Tectonic, 2 TB/s sustained, 7 TB/s peak)",
        ),
        "object": StorageClass(
            12.5e9,
            12.5e9,
            0.0,
            True,
            "Amazon S3 performance guidelines: up to 100 Gb/s (12.5 GB/s) between one EC2 instance and S3 with "
            "parallel requests (the CRT client); a bucket scales by prefix (3,500 PUT, 5,500 GET per second per "
            "prefix)",
        ),
    }
)


def storage_write_bytes_per_s(storage: StorageClass, writer_nodes: int) -> float:
    """Write bandwidth a checkpoint gets: the writing nodes' own bandwidth, capped by the file system's."""
    own = storage.write_bytes_per_s_per_node * xp.maximum(1, writer_nodes)
    return xp.minimum(own, storage.aggregate_write_bytes_per_s) if storage.aggregate_write_bytes_per_s else own


# ------------------------------------------------------------------------------------------ checkpoints


@dataclass(frozen=True)
class CheckpointSize:
    """A checkpoint, itemized, and the share of the busiest writing rank when the state is sharded."""

    weights_bytes: float
    master_weights_bytes: float
    optimizer_bytes: float
    per_rank_bytes: float
    writer_ranks: int

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.master_weights_bytes + self.optimizer_bytes


def checkpoint_size(
    params: float,
    weight_bytes_per_param: float,
    master_bytes_per_param: float,
    optimizer_bytes_per_param: float,
    model_shards: int = 1,
    optimizer_shards: int = 1,
) -> CheckpointSize:
    """params x (weights + master + optimizer bytes). Weights are split over ``model_shards`` ranks (tensor x
    pipeline, x data with ZeRO-3), master weights and optimizer states over ``optimizer_shards`` (x data
    parallel with ZeRO >= 1 or Megatron's distributed optimizer); each distinct shard is written once."""
    w, m, o = params * weight_bytes_per_param, params * master_bytes_per_param, params * optimizer_bytes_per_param
    per_rank = w / model_shards + (m + o) / optimizer_shards
    return CheckpointSize(w, m, o, per_rank, xp.maximum(model_shards, optimizer_shards))


def transfer_s(size_bytes: float, bytes_per_s: float) -> float:
    """Seconds to move ``size_bytes`` at ``bytes_per_s``."""
    if not xp.all_true(bytes_per_s > 0):
        raise JobError("a bandwidth must be more than zero")
    return size_bytes / bytes_per_s


def checkpoint_blocking_s(write_s: float, device_to_host_s: float, asynchronous: bool) -> float:
    """Training stops for the whole write when checkpoints are synchronous; asynchronous checkpointing
    (PyTorch DCP async_save, Megatron --async-save, torchtitan's pinned-memory staging) stops it only for the
    device-to-host copy, then writes from host memory in the background."""
    return device_to_host_s if asynchronous else write_s


# ------------------------------------------------------------------------------------- CPU and host RAM


def cpu_cores_per_gpu(loader_workers_per_gpu: float, cores_per_process: float = 1.0) -> float:
    """Bekman (ml-engineering, compute/cpu): 1 core for the process tied to the GPU + 1 per DataLoader
    worker (2-4 workers; 2 is usually plenty for language models)."""
    return cores_per_process + loader_workers_per_gpu


def host_ram_floor_bytes(gpu_memory_bytes: float, gpus_per_node: int, ratio: float = 1.0) -> float:
    """Bekman (ml-engineering, compute/cpu-memory): at least as much CPU memory per node as GPU memory."""
    return gpu_memory_bytes * gpus_per_node * ratio


# ------------------------------------------------------------------------------- the instance's resources

#: The outcomes of comparing what a plan needs with what an instance has.
OK, SHORT, UNKNOWN = "ok", "short", "unknown"


def resource_status(needed: float, available: float | None) -> str:
    """ "ok" when the instance has at least what is needed, "short" when it has less, "unknown" when the offer
    does not publish the figure (never taken as zero)."""
    if available is None:
        return UNKNOWN
    return OK if available >= needed else SHORT


def node_checkpoint_bytes(per_rank_bytes: float, ranks_on_node: int, writer_ranks: int, total_bytes: float) -> float:
    """The checkpoint shards one node writes: the per-rank share of each of its writing ranks (at most
    ``writer_ranks``: a rank that holds the same shard as another writes nothing), never more than the whole."""
    return min(total_bytes, per_rank_bytes * max(1, min(ranks_on_node, writer_ranks)))


def local_nvme_need_bytes(
    checkpoint_bytes_per_node: float, checkpoints_kept: float, staged_bytes_per_node: float
) -> float:
    """Local disk one node needs when checkpoints and data live on its NVMe: the checkpoints it keeps (the last
    complete one and the one being written: a checkpoint must not overwrite the only good copy) plus its
    share of the staged dataset."""
    return checkpoint_bytes_per_node * checkpoints_kept + staged_bytes_per_node


# ---------------------------------------------------------------------------------------------- network


def allreduce_bytes_per_rank(message_bytes: float, ranks: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``message_bytes``: 2(n-1)/n x S (nccl-tests
    PERFORMANCE.md); reduce-scatter + all-gather (ZeRO-1/2) move the same."""
    return 0.0 if ranks <= 1 else 2 * (ranks - 1) / ranks * message_bytes


def exposed_s(traffic_bytes: float, bytes_per_s: float, window_s: float) -> float:
    """Time the transfer adds beyond the compute it overlaps: max(0, bytes / bandwidth - window)."""
    return max(0.0, transfer_s(traffic_bytes, bytes_per_s) - window_s)


# ------------------------------------------------------------------------------------ energy, emissions


def replica_start_s(
    cold_start_s: float, engine_warmup_s: float, instance_boot_s: float | None = None
) -> tuple[float, bool]:
    """Seconds until one more serving replica takes traffic: its node's boot (when known), the weights' cold start
    (storage to host, host to GPU), the engine's warm-up; and whether the figure is complete (False: the boot is
    unknown, so it is a lower bound). Replicas added at once start in parallel, each on its own node, so this is
    also the time to absorb a traffic step of any number of replicas (while the storage serves each node at its
    per-node rate)."""
    known = instance_boot_s is not None
    return (instance_boot_s or 0.0) + cold_start_s + engine_warmup_s, known


def energy_kwh(gpu_hours: float, tdp_w: float, host_power_factor: float = 1.0, pue: float = 1.0) -> float:
    """GPU-hours x TDP x host-power factor (CPUs, NICs, fans) x PUE, in kWh (the TCO module's energy rule)."""
    return gpu_hours * tdp_w / 1000 * host_power_factor * pue


def co2eq_kg(energy: float, grid_gco2_per_kwh: float) -> float:
    """kg CO2-equivalent: kWh x grid intensity (g/kWh) / 1000. The Llama 3.1 model card's 405B figure,
    30.84M H100 GPU-hours at 700 W TDP -> 8,930 t location-based, implies 413.6 g/kWh over TDP energy."""
    return energy * grid_gco2_per_kwh / 1000


# ------------------------------------------------------------------------------------------ assumptions


@dataclass(frozen=True)
class MachineAssumptions(AssumptionSet):
    """Defaults of the machine formulas; each overridable with --assume NAME=VALUE, each with its source."""

    failures_per_gpu_hour: float | None = None  # None: by GPU generation (Llama 3 for Hopper and later, RSC for Ampere)
    restart_s: float = 600.0
    pcie_efficiency: float = 0.8
    loader_workers_per_gpu: float = 2.0
    loader_worker_bytes: int = 512 * MiB
    host_ram_per_gpu_memory: float = 1.0
    host_power_factor: float = 1.82
    pue: float = 1.58
    grid_gco2_per_kwh: float = 480.0
    local_checkpoints_kept: float = 2.0
    engine_warmup_s: float = 34.0
    instance_boot_s: float | None = None  # None: unknown (no offer in the catalog publishes a boot time)

    SOURCES = MappingProxyType(
        {
            "failures_per_gpu_hour": (
                "failures per GPU-hour",
                FAILURE_SOURCES["llama3"][1] + "; " + FAILURE_SOURCES["rsc"][1] + "; unset: picked by GPU generation",
            ),
            "restart_s": (
                "seconds",
                "lost per interruption to rescheduling, NCCL start-up and loading the checkpoint; "
                "Daly 2006 uses R = 10 min in his worked cases; a judgment, measure your own restarts",
            ),
            "pcie_efficiency": (
                "fraction of PCIe bandwidth",
                "real transfers reach ~80-90 % of the PCI-SIG rate (TLP "
                "headers, flow control); device-to-host checkpoint copies and weight loads at 80 %",
            ),
            "loader_workers_per_gpu": (
                "workers",
                "Bekman, ml-engineering compute/cpu: 2-4 DataLoader workers per "
                "accelerator, '2 workers is usually plenty for LMs'",
            ),
            "loader_worker_bytes": (
                "bytes",
                "host memory per DataLoader worker process (a Python interpreter with torch, "
                "a memory-mapped shard, prefetch_factor=2 batches): a judgment, measure its RSS",
            ),
            "host_ram_per_gpu_memory": (
                "x GPU memory per node",
                "Bekman, ml-engineering compute/cpu-memory: 'at least as "
                "much CPU memory on each node as there is on the GPUs'",
            ),
            "host_power_factor": (
                "x GPU TDP",
                "the TCO default (data/ownership.toml): NVIDIA DGX H100 10.2 kW max input / (8 x 700 W) = 1.82",
            ),
            "pue": (
                "facility / IT power",
                "the TCO default (data/ownership.toml): Uptime Institute 2023 industry average PUE 1.58",
            ),
            "grid_gco2_per_kwh": (
                "g CO2eq per kWh",
                "Ember, Global Electricity Review 2024: world power-sector "
                "emissions intensity 480 gCO2/kWh in 2023 (the Llama 3.1 model card's 405B figures "
                "imply 413.6 g/kWh over TDP energy)",
            ),
            "local_checkpoints_kept": (
                "checkpoints",
                "kept on local NVMe when --storage local-nvme: the last complete checkpoint and the one being "
                "written (a judgment: never overwrite the only good copy; torchtitan's keep_latest_k and Megatron's "
                "rotation keep more)",
            ),
            "engine_warmup_s": (
                "seconds",
                "a serving engine's start-up after its weights are on the GPUs (memory profiling, KV-cache "
                "allocation, torch.compile from its cache, CUDA-graph capture): vLLM issue #20264 (2025, V1 engine, "
                "compile cache reused): 'init engine (profile, create kv cache, warmup model) took 34.11 seconds', of "
                "which graph capture 17 s; a cold compile cache adds ~20-30 s (vLLM PR #10460, Llama-3-8B). vLLM's "
                "figure, taken for every engine",
            ),
            "instance_boot_s": (
                "seconds",
                "provisioning and booting one more GPU node (capacity, image, drivers): no offer in the catalog "
                "publishes it and it varies by provider and free capacity; unset: unknown (the scale-up time is then a "
                "lower bound)",
            ),
        }
    )

    def __post_init__(self) -> None:
        check_assumptions(
            self,
            fractions=("pcie_efficiency", "failures_per_gpu_hour"),
            positive=(
                "pcie_efficiency",
                "host_power_factor",
                "pue",
                "host_ram_per_gpu_memory",
                "failures_per_gpu_hour",
            ),
            ranges={
                "pue": (1, 10),
                "host_power_factor": (1, 10),
                "grid_gco2_per_kwh": (0, 2000),
                "loader_workers_per_gpu": (0, 256),
                "host_ram_per_gpu_memory": (0, 64),
                "restart_s": (0, 30 * 86400),
                "loader_worker_bytes": (0, 1024 * GiB),
                "local_checkpoints_kept": (1, 1000),
                "engine_warmup_s": (0, 86400),
                "instance_boot_s": (0, 86400),
            },
        )
