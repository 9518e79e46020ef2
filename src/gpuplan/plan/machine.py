"""The ``machine`` block of a training or serving plan: storage, checkpoints, failures and goodput, CPU, host
RAM, network, energy and emissions, built from the formulas in ``estimate/machine.py``. Pure (no I/O).

A figure that cannot be computed (time-based ones without ``--tokens``, the network without the
architecture, energy without a TDP) is None here and absent from the JSON, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError, QuantityError
from ..estimate import machine as mx, xp
from ..estimate.assumptions import Assumption
from ..spec.accelerator import Accelerator
from ..spec.choices import SERVE_STORAGE_DEFAULT, TRAIN_STORAGE_DEFAULT, Storage, values
from ..spec.model import ModelSpec
from ..units import check_range, parse_bytes, parse_count

if TYPE_CHECKING:  # imported where used: serving never loads the training step-time and memory modules
    from ..estimate.steptime import StepAssumptions

STORAGE_CHOICES = values(Storage)
DEFAULT_TRAIN_STORAGE = TRAIN_STORAGE_DEFAULT.value
DEFAULT_SERVE_STORAGE = SERVE_STORAGE_DEFAULT.value
#: Machine assumptions only serving uses (the scale-up time of a fleet): left out of train's assumptions list.
SERVE_ONLY_ASSUMPTIONS = frozenset({"engine_warmup_s", "instance_boot_s"})
#: GPUs per node when a serving plan is not told otherwise: HGX/DGX boards hold 8 (StepAssumptions.gpus_per_node).
DEFAULT_GPUS_PER_NODE = 8


def parse_bytes_per_s(text: str | float, what: str = "--storage-write") -> float:
    """A bandwidth: ``20GB/s``, ``1.5GiB/s``, ``800MB/s`` (``/s`` optional); more than zero."""
    raw = str(text).strip()
    body = raw[:-2] if raw.lower().endswith("/s") else raw
    try:
        value = parse_bytes(body, what)
    except QuantityError:
        raise QuantityError(f"can't read {what} '{text}': write bytes per second, like 20GB/s or 1.5GiB/s") from None
    if value <= 0:
        raise QuantityError(f"{what} '{text}' must be more than zero; write it like 20GB/s")
    return float(value)


#: (flag name, low, high, low_open, why) of the plain-number machine options, checked by units.check_range.
_RANGES = {
    "storage_write_bytes_per_s": ("--storage-write", 0.0, 1e15, True, "bytes per second"),
    "bytes_per_token": ("--bytes-per-token", 0.0, 1e9, True, "stored bytes per training token"),
    "bytes_per_sample": (
        "--bytes-per-sample",
        0.0,
        1e15,
        True,
        "stored bytes per training sample (one sequence of --seq-len tokens)",
    ),
    "mtbf_per_gpu_hours": (
        "--mtbf-per-gpu-hours",
        1.0,
        1e9,
        False,
        "one GPU's mean time between failures, in hours; fleets report 8,000-50,000",
    ),
    "grid_gco2_per_kwh": ("--grid-gco2-per-kwh", 0.0, 2000.0, False, "grams of CO2eq per kWh; 0 is market-based"),
}


def _number(text: str | float, field: str) -> float:
    flag, low, high, low_open, why = _RANGES[field]
    value = parse_count(text, flag, allow_zero=not low_open)
    return check_range(value, flag, low, high, low_open=low_open, why=why)


@dataclass(frozen=True)
class MachineOptions:
    """The user's machine choices (flags); each validated on construction (QuantityError: one line, exit 2)."""

    storage: str = DEFAULT_TRAIN_STORAGE
    storage_write_bytes_per_s: float | None = None
    bytes_per_token: float | None = None  # None: the stored token size for the model's vocabulary
    bytes_per_sample: float | None = None  # per sequence of seq_len tokens (non-text data); excludes bytes_per_token
    async_checkpoint: bool = False
    mtbf_per_gpu_hours: float | None = None
    grid_gco2_per_kwh: float | None = None

    @classmethod
    def from_flags(
        cls,
        storage: str | None = None,
        storage_write: str | float | None = None,
        bytes_per_token: str | float | None = None,
        async_checkpoint: bool = False,
        mtbf_per_gpu_hours: str | float | None = None,
        grid_gco2_per_kwh: str | float | None = None,
        default_storage: str = DEFAULT_TRAIN_STORAGE,
        bytes_per_sample: str | float | None = None,
    ) -> MachineOptions:
        if bytes_per_token is not None and bytes_per_sample is not None:
            raise InputError(
                "--bytes-per-sample",
                "give --bytes-per-token or --bytes-per-sample (bytes per sequence of --seq-len tokens), not both",
            )
        return cls(
            storage=storage or default_storage,
            storage_write_bytes_per_s=parse_bytes_per_s(storage_write) if storage_write is not None else None,
            bytes_per_token=_number(bytes_per_token, "bytes_per_token") if bytes_per_token is not None else None,
            bytes_per_sample=_number(bytes_per_sample, "bytes_per_sample") if bytes_per_sample is not None else None,
            async_checkpoint=async_checkpoint,
            mtbf_per_gpu_hours=_number(mtbf_per_gpu_hours, "mtbf_per_gpu_hours")
            if mtbf_per_gpu_hours is not None
            else None,
            grid_gco2_per_kwh=_number(grid_gco2_per_kwh, "grid_gco2_per_kwh")
            if grid_gco2_per_kwh is not None
            else None,
        )

    def __post_init__(self) -> None:
        if self.storage not in mx.STORAGE_CLASSES:
            raise QuantityError(f"--storage must be one of {', '.join(STORAGE_CHOICES)}, got {self.storage!r}")
        for name, (flag, low, high, low_open, why) in _RANGES.items():
            if getattr(self, name) is not None:
                check_range(getattr(self, name), flag, low, high, low_open=low_open, why=why)
        if self.bytes_per_token is not None and self.bytes_per_sample is not None:
            raise InputError("--bytes-per-sample", "give --bytes-per-token or --bytes-per-sample, not both")


@dataclass(frozen=True)
class MachineReport:
    """The ``machine`` block: figures (None when not computable), assumptions used, notes."""

    figures: dict[str, Any]
    assumptions: tuple[Assumption, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return _drop_none(self.figures)


def _drop_none(d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            v = _drop_none(v)
        if v is not None:
            out[k] = v
    return out


def _host_link_bytes_per_s(gpu: Accelerator, a: mx.MachineAssumptions) -> float:
    """The GPU's link to its host (NVLink-C2C on a Grace superchip, else PCIe x16), x ``pcie_efficiency``."""
    return gpu.host_bytes_per_s * a.pcie_efficiency


def _failure_rate(gpu: Accelerator, options: MachineOptions, a: mx.MachineAssumptions) -> tuple[float, str]:
    if options.mtbf_per_gpu_hours is not None:
        return 1 / options.mtbf_per_gpu_hours, f"--mtbf-per-gpu-hours {options.mtbf_per_gpu_hours:g}"
    if a.failures_per_gpu_hour is not None:
        return a.failures_per_gpu_hour, "--assume failures_per_gpu_hour"
    key = mx.default_failure_source(gpu.architecture)
    rate, source = mx.FAILURE_SOURCES[key]
    return rate, f"{source} (picked for {gpu.architecture}; {mx.FAILURE_RANGE_NOTE})"


@dataclass(frozen=True)
class Checkpointing:
    """A run's checkpoints and failures, as plain numbers (one layout: ``train``) or numpy arrays of one shape (the
    candidates of ``plan train``): the itemized checkpoint, the nodes writing it and their bandwidth, the write,
    device-to-host copy and blocking times, the cluster MTBF, the checkpoint interval (Daly's optimum, stretched to
    the write time for asynchronous checkpoints), and with the ideal time the run with failures (Daly's wall time)
    and its cost."""

    size: mx.CheckpointSize
    nodes: Any
    writer_nodes: Any
    write_bytes_per_s: Any
    write_s: Any
    device_to_host_s: Any
    blocking_s: Any
    mtbf_s: Any
    interval_s: Any
    stretched: Any  # the asynchronous write was longer than Daly's interval
    run: mx.FailureCost | None = None
    cost_with_failures_usd: Any = None


def checkpointing(
    *,
    trainable_params: Any,
    bytes_per_param: tuple[float, float, float],
    tp: Any,
    pp: Any,
    data: Any,
    zero: Any,
    gpus: Any,
    gpus_per_node: Any,
    storage: mx.StorageClass,
    storage_write_bytes_per_s: float | None,
    nvme_write_bytes_per_s_per_node: Any,
    host_link_bytes_per_s: Any,
    failures_per_gpu_hour: Any,
    restart_s: float,
    asynchronous: bool,
    solve_s: Any = None,
    usd_per_gpu_hour: Any = None,
) -> Checkpointing:
    """The checkpoint and failure part of the machine block, on plain numbers or arrays (``estimate/xp.py``).

    ``bytes_per_param``: (weights, master weights, optimizer states) per trained parameter (the recipe's, as the
    memory estimate counts them); ``data``: dp x cp (the ranks that hold the same model shard); the weights shard
    over tp x pp (x data with ZeRO-3), master weights and states over tp x pp (x data with ZeRO >= 1)
    (``estimate.machine.checkpoint_size``). Write bandwidth: ``storage_write_bytes_per_s`` (``--storage-write``)
    when given, else the offer's local NVMe write per node x writing nodes where ``nvme_write_bytes_per_s_per_node``
    is more than 0 (``--storage local-nvme`` on an offer that publishes it), else the storage class's
    (``storage_write_bytes_per_s``: per node, capped by the file system). Failures: the cluster MTBF of ``gpus`` at
    ``failures_per_gpu_hour`` (series system), Daly 2006's interval and wall time
    (``estimate.machine.run_with_failures``); an asynchronous checkpoint blocks only for its device-to-host copy,
    its interval is at least its write time, and a failure during the write loses it (its write time).
    ``usd_per_gpu_hour``: the cost with failures is the wall time x GPUs x the price."""
    ckpt = mx.checkpoint_size(
        trainable_params,
        *bytes_per_param,
        model_shards=tp * pp * xp.where(zero >= 3, data, 1),
        optimizer_shards=tp * pp * xp.where(zero >= 1, data, 1),
    )
    nodes = xp.ceil(gpus / gpus_per_node)
    writer_nodes = xp.minimum(nodes, xp.ceil(ckpt.writer_ranks / gpus_per_node))
    if storage_write_bytes_per_s is not None:
        write_bw = storage_write_bytes_per_s
    else:
        write_bw = xp.where(
            nvme_write_bytes_per_s_per_node > 0,
            nvme_write_bytes_per_s_per_node * writer_nodes,
            mx.storage_write_bytes_per_s(storage, writer_nodes),
        )
    write_s = mx.transfer_s(ckpt.total_bytes, write_bw)
    d2h_s = mx.transfer_s(ckpt.per_rank_bytes, host_link_bytes_per_s)
    blocking_s = mx.checkpoint_blocking_s(write_s, d2h_s, asynchronous)
    mtbf_s = mx.cluster_mtbf_s(failures_per_gpu_hour, gpus)
    daly = mx.daly_interval_s(blocking_s, mtbf_s)
    # the background write must finish before the next checkpoint starts
    stretched = (daly < write_s) if asynchronous else False
    interval_s = xp.where(stretched, write_s, daly)
    run = cost = None
    if solve_s is not None:
        extra = write_s if asynchronous else 0.0
        run = mx.run_with_failures(solve_s, interval_s, blocking_s, restart_s, mtbf_s, extra)
        if usd_per_gpu_hour is not None:
            cost = run.wall_s * gpus / mx.HOUR_S * usd_per_gpu_hour
    return Checkpointing(
        ckpt, nodes, writer_nodes, write_bw, write_s, d2h_s, blocking_s, mtbf_s, interval_s, stretched, run, cost
    )


def checkpoint_bytes_per_param(model, job, layout, gpu: Accelerator | None = None) -> tuple[float, float, float]:
    """(weights, master weights, optimizer states) bytes per trained parameter of a layout: the recipe the memory
    estimate resolves for it (``estimate.memory.resolve_recipe``: precision, sharding, model parallelism, and the
    stack ``gpu`` implies: a TPU's jax) and its optimizer's states. ``layout`` needs ``tp``, ``pp``, ``cp`` and
    ``zero`` (one value each)."""
    from ..estimate.memory import _optimizer_bytes_per_param, resolve_recipe, stack_job

    recipe, _ = resolve_recipe(stack_job(job, gpu) if gpu is not None else job, layout)
    spec = model if isinstance(model, ModelSpec) else None
    return recipe.weights, recipe.master, _optimizer_bytes_per_param(job, recipe, spec)


def layout_failures(
    model,
    gpu: Accelerator,
    offer,
    layout,
    job,
    solve_s: float,
    *,
    options: MachineOptions = MachineOptions(),
    assumptions: mx.MachineAssumptions = mx.MachineAssumptions(),
) -> Checkpointing:
    """One full-training layout on one offer, as ``train --offer``'s machine block takes it (:func:`checkpointing`):
    the offer's node size and price, its local NVMe write with ``--storage local-nvme``, the GPU's failure rate and
    host link. ``plan train --explain`` ranks a layout with it; the search does the same on arrays."""
    from ..estimate.params import count_params

    return checkpointing(
        trainable_params=count_params(model).total,
        bytes_per_param=checkpoint_bytes_per_param(model, job, layout, gpu),
        tp=layout.tp,
        pp=layout.pp,
        data=layout.dp * layout.cp,
        zero=layout.zero,
        gpus=layout.gpus,
        gpus_per_node=max(1, offer.gpu_count),
        storage=mx.STORAGE_CLASSES[options.storage],
        storage_write_bytes_per_s=options.storage_write_bytes_per_s,
        nvme_write_bytes_per_s_per_node=nvme_write_per_node(offer, options),
        host_link_bytes_per_s=_host_link_bytes_per_s(gpu, assumptions),
        failures_per_gpu_hour=_failure_rate(gpu, options, assumptions)[0],
        restart_s=assumptions.restart_s,
        asynchronous=options.async_checkpoint,
        solve_s=solve_s,
        usd_per_gpu_hour=offer.usd_per_gpu_hour,
    )


def nvme_write_per_node(offer, options: MachineOptions) -> float:
    """The offer's local NVMe write bandwidth per node where checkpoints go there (``--storage local-nvme``) and
    the offer publishes it; 0 otherwise (the storage class's figure then stands)."""
    if options.storage != "local-nvme" or offer is None:
        return 0.0
    return float(offer.local_nvme_write_bytes_per_s or 0.0)


def failure_rate(gpu: Accelerator, options: MachineOptions, a: mx.MachineAssumptions) -> tuple[float, str]:
    """Failures per GPU-hour and where the figure comes from: ``--mtbf-per-gpu-hours``, else ``--assume
    failures_per_gpu_hour``, else the published rate most like the GPU's generation."""
    return _failure_rate(gpu, options, a)


def host_link_bytes_per_s(gpu: Accelerator, a: mx.MachineAssumptions) -> float:
    """The device-to-host bandwidth a checkpoint copy or a weight load gets: the GPU's host link (PCIe, or a Grace
    superchip's NVLink-C2C) x efficiency."""
    return _host_link_bytes_per_s(gpu, a)


def train_machine(
    model,
    gpu: Accelerator,
    layout,
    job,
    memory,
    plan=None,
    *,
    step_assumptions: StepAssumptions | None = None,
    options: MachineOptions = MachineOptions(),
    assumptions: mx.MachineAssumptions = mx.MachineAssumptions(),
) -> MachineReport:
    """The machine a training plan needs. ``memory`` is the MemoryReport of the layout; ``plan`` the
    TrainingPlan (None without --tokens: the time-based figures are then absent)."""
    from ..estimate.memory import _optimizer_bytes_per_param
    from ..estimate.steptime import StepAssumptions

    step_assumptions = step_assumptions if step_assumptions is not None else StepAssumptions()
    a = assumptions
    offer = plan.offer if plan is not None else None
    scale_out_set = step_assumptions.scale_out_bytes_per_s_per_gpu is not None  # --assume wins over the offer
    if offer is not None:
        from .training import offer_network

        step_assumptions = offer_network(offer, step_assumptions)
    gpn = max(1, step_assumptions.gpus_per_node)
    nodes = math.ceil(layout.gpus / gpn)
    gpus_here = min(layout.gpus, gpn)
    notes: list[str] = []

    # ---- checkpoint: the trained parameters' weights, master weights and optimizer states
    recipe = memory.recipe
    spec = model if isinstance(model, ModelSpec) else None
    storage = mx.STORAGE_CLASSES[options.storage]
    on_nvme = options.storage == "local-nvme" and offer is not None
    read_per_node = storage.read_bytes_per_s_per_node
    if on_nvme and offer is not None and offer.local_nvme_read_bytes_per_s:
        read_per_node = offer.local_nvme_read_bytes_per_s
    rate, rate_src = _failure_rate(gpu, options, a)
    ck = checkpointing(
        trainable_params=memory.trainable_params,
        bytes_per_param=(recipe.weights, recipe.master, _optimizer_bytes_per_param(job, recipe, spec)),
        tp=layout.tp,
        pp=layout.pp,
        data=layout.dp * layout.cp,
        zero=layout.zero,
        gpus=layout.gpus,
        gpus_per_node=gpn,
        storage=storage,
        storage_write_bytes_per_s=options.storage_write_bytes_per_s,
        nvme_write_bytes_per_s_per_node=nvme_write_per_node(offer, options),
        host_link_bytes_per_s=_host_link_bytes_per_s(gpu, a),
        failures_per_gpu_hour=rate,
        restart_s=a.restart_s,
        asynchronous=options.async_checkpoint,
        solve_s=plan.time.seconds if plan is not None else None,
        usd_per_gpu_hour=plan.usd_per_gpu_hour if plan is not None else None,
    )
    ckpt, writer_nodes, write_bw = ck.size, ck.writer_nodes, ck.write_bytes_per_s
    write_s, d2h_s, blocking_s = ck.write_s, ck.device_to_host_s, ck.blocking_s
    mtbf_s, interval_s = ck.mtbf_s, ck.interval_s
    if options.storage_write_bytes_per_s is not None:
        write_src = "--storage-write"
    elif on_nvme and offer is not None and offer.local_nvme_write_bytes_per_s:
        src = offer.source_for("local_nvme_write_bytes_per_s")
        write_src = f"offer {offer.id}: local NVMe write per node x {writer_nodes} node(s) ({src.title}, {src.date})"
    else:
        write_src = f"{options.storage}: {writer_nodes} writing node(s) x per-node write" + (
            ", capped by the file system"
            if storage.aggregate_write_bytes_per_s and write_bw == storage.aggregate_write_bytes_per_s
            else ""
        )
    if job.method != "full":
        notes.append("checkpoint: the adapters and their optimizer states only (the frozen base is not saved)")
    if not storage.durable and options.storage_write_bytes_per_s is None:
        notes.append("local NVMe is not durable: copy checkpoints to shared storage, or a node loss loses them")

    # ---- failures and the checkpoint interval
    if ck.stretched:
        notes.append("asynchronous checkpoints: the interval is stretched to the storage write time")

    # ---- host: CPU cores and RAM per node
    cores = mx.cpu_cores_per_gpu(a.loader_workers_per_gpu)
    ram_parts = {
        "gpu_memory_floor_bytes": mx.host_ram_floor_bytes(gpu.memory_bytes, gpus_here, a.host_ram_per_gpu_memory),
        "loader_workers_bytes": gpus_here * a.loader_workers_per_gpu * a.loader_worker_bytes,
        "cpu_offload_bytes": gpus_here * memory.cpu_offload_bytes,
        "pinned_checkpoint_staging_bytes": gpus_here * ckpt.per_rank_bytes if options.async_checkpoint else 0.0,
    }

    # ---- time-based figures (need --tokens)
    if options.bytes_per_sample is not None:
        # a sample is one sequence of seq_len tokens: its stored bytes spread over them
        bpt = options.bytes_per_sample / job.seq_len
        bpt_src = f"--bytes-per-sample {options.bytes_per_sample:g} / --seq-len {job.seq_len} tokens per sample"
    elif options.bytes_per_token:
        bpt, bpt_src = options.bytes_per_token, "--bytes-per-token"
    else:
        bpt = mx.token_dtype_bytes(getattr(model, "vocab_size", None))
        bpt_src = "Megatron-LM DType.optimal_dtype: uint16 below 65,500 vocabulary entries, else int32"
    figures: dict[str, Any] = {
        "storage": {
            "class": options.storage,
            "source": storage.source,
            "read_bytes_per_s_per_node": read_per_node,
            "write_bytes_per_s": write_bw,
            "write_source": write_src,
        },
        "bytes_per_token": bpt,
        "bytes_per_token_source": bpt_src,
        "bytes_per_sample": options.bytes_per_sample,
        "dataset_bytes": None,
        "storage_read_bytes_per_s": None,
        "storage_read_bytes_per_s_per_node": None,
        "checkpoint_bytes": ckpt.total_bytes,
        "checkpoint_parts_bytes": {
            "weights_bytes": ckpt.weights_bytes,
            "master_weights_bytes": ckpt.master_weights_bytes,
            "optimizer_bytes": ckpt.optimizer_bytes,
        },
        "checkpoint_bytes_per_rank": ckpt.per_rank_bytes,
        "checkpoint_writer_ranks": ckpt.writer_ranks,
        "checkpoint_write_s": write_s,
        "checkpoint_device_to_host_s": d2h_s,
        "checkpoint_blocking_s": blocking_s,
        "async_checkpoint": options.async_checkpoint,
        "failures_per_gpu_hour": rate,
        "failures_source": rate_src,
        "cluster_mtbf_s": mtbf_s,
        "checkpoint_interval_s": interval_s,
        "checkpoint_interval_young_s": mx.young_interval_s(blocking_s, mtbf_s),
        "checkpoint_interval_method": "Daly 2006 higher-order optimum (Young 1974 beside it)",
        "checkpoint_interval_steps": None,
        "expected_interruptions": None,
        "time_lost_s": None,
        "goodput": None,
        "wall_time_s": None,
        "wall_time_with_failures_s": None,
        "cost_usd": None,
        "cost_with_failures_usd": None,
        "cpu_cores_per_gpu": cores,
        "cpu_cores_per_node": cores * gpus_here,
        "host_ram_bytes_per_node": sum(ram_parts.values()),
        "host_ram_parts_bytes": ram_parts,
        "network_bytes_per_s_per_gpu": None,
        "nic_bytes_per_s_per_gpu": None,
        "nic_source": None,
        "network_exposed_s_per_step": None,
        "energy_kwh": None,
        "co2eq_kg": None,
        "grid_gco2_per_kwh": options.grid_gco2_per_kwh
        if options.grid_gco2_per_kwh is not None
        else a.grid_gco2_per_kwh,
    }
    if plan is not None:
        tokens = plan.compute.tokens * plan.compute.epochs
        solve_s = plan.time.seconds
        tokens_per_s = tokens / solve_s
        figures["dataset_bytes"] = mx.dataset_bytes(tokens, bpt)
        figures["storage_read_bytes_per_s"] = mx.read_bytes_per_s(tokens_per_s, bpt)
        figures["storage_read_bytes_per_s_per_node"] = figures["storage_read_bytes_per_s"] / nodes
        if figures["storage_read_bytes_per_s_per_node"] > read_per_node:
            notes.append(
                f"storage: {options.storage} reads {read_per_node / 1e9:.3g} GB/s per node, "
                f"less than the {figures['storage_read_bytes_per_s_per_node'] / 1e9:.3g} GB/s the plan needs"
            )
        fc = ck.run
        assert fc is not None  # (computed with the plan's time)
        finite = math.isfinite(fc.wall_s)
        if finite:
            figures.update(
                expected_interruptions=fc.interruptions,
                goodput=fc.goodput,
                wall_time_s=solve_s,
                wall_time_with_failures_s=fc.wall_s,
                time_lost_s={"checkpoint_s": fc.checkpoint_s, "restart_s": fc.restart_s, "rework_s": fc.rework_s},
            )
        else:  # past the float range: left absent, never inf or 0
            notes.append(
                f"failures: a checkpoint takes {write_s / 3600:,.3g} h to write against a cluster MTBF of "
                f"{mtbf_s / 3600:,.3g} h; the run is expected never to finish (no goodput, wall time or energy)"
            )
        if plan.step is not None:
            figures["checkpoint_interval_steps"] = max(1, round(interval_s / plan.step.iteration_s))
        if plan.usd_per_gpu_hour is not None:
            figures["cost_usd"] = plan.usd
            figures["cost_with_failures_usd"] = ck.cost_with_failures_usd if finite else None
        if gpu.tdp_w and finite:
            gpu_hours = fc.wall_s * layout.gpus / mx.HOUR_S
            # a power cap (--assume power_limit_w) bounds the GPU's draw as it slows its step: both or neither
            cap = step_assumptions.power_limit_w
            gpu_w = gpu.tdp_w if cap is None else min(cap, gpu.tdp_w)
            figures["energy_kwh"] = mx.energy_kwh(gpu_hours, gpu_w, a.host_power_factor, a.pue)
            figures["co2eq_kg"] = mx.co2eq_kg(figures["energy_kwh"], figures["grid_gco2_per_kwh"])
        elif not gpu.tdp_w:
            notes.append(f"energy: {gpu.id} has no TDP in the catalog")
        if plan.step is not None and isinstance(model, ModelSpec):
            figures.update(_network(model, gpu, layout, job, memory, plan.step, step_assumptions, gpn))
        if offer is not None:
            figures.update(
                _instance(offer, options, a, figures, ckpt, gpus_here, nodes, plan.compute.tokens * bpt, layout.tp)
            )
            if figures["nic_source"] is not None and not scale_out_set:
                figures["nic_source"] = _offer_nic_source(offer, figures["nic_source"])
    used = [
        Assumption(x.name, rate, x.unit, rate_src) if x.name == "failures_per_gpu_hour" else x
        for x in a.items()
        if x.name not in SERVE_ONLY_ASSUMPTIONS
    ]
    used = [
        Assumption(x.name, figures["grid_gco2_per_kwh"], x.unit, "--grid-gco2-per-kwh")
        if x.name == "grid_gco2_per_kwh" and options.grid_gco2_per_kwh is not None
        else x
        for x in used
    ]
    return MachineReport(figures, tuple(used), tuple(notes))


def _offer_nic_source(offer, fallback: str) -> str:
    """Where the network check's NIC figure comes from when the plan runs on an offer."""
    if offer.scale_out_bytes_per_s:
        src = offer.source_for("scale_out_bytes_per_s")
        return (
            f"offer {offer.id}: {offer.scale_out_bytes_per_s * 8 / 1e9:,.0f} Gb/s per node / {offer.gpu_count} GPUs "
            f"({src.title}, {src.date})"
        )
    return f"offer {offer.id} publishes no sustained scale-out bandwidth, so the GPU's figure: {fallback}"


def _instance(
    offer,
    options: MachineOptions,
    a: mx.MachineAssumptions,
    figures: dict,
    ckpt,
    gpus_here: int,
    nodes: int,
    unique_dataset_bytes: float,
    tp: int = 1,
) -> dict:
    """The offer's instance against what one node of the plan needs: vCPUs vs CPU cores, host RAM vs the
    itemized need, (with --storage local-nvme) local NVMe vs the checkpoints kept plus the node's share of
    the dataset (staged once, sharded by node), and (where the offer gives its scale-up domain) the
    tensor-parallel group vs the GPUs the NVLink joins. A figure the offer does not publish is "unknown",
    never 0."""
    cores_needed = figures["cpu_cores_per_node"]
    ram_needed = figures["host_ram_bytes_per_node"]
    checks: dict[str, Any] = {
        "cpu": {
            "needed_cores_per_node": cores_needed,
            "vcpus_per_node": offer.vcpus,
            "status": mx.resource_status(cores_needed, offer.vcpus),
        },
        "host_ram": {
            "needed_bytes_per_node": ram_needed,
            "host_memory_bytes_per_node": offer.host_memory_bytes,
            "status": mx.resource_status(ram_needed, offer.host_memory_bytes),
        },
    }
    warnings: list[str] = []
    name = f"{offer.instance} ({offer.id})"
    if checks["cpu"]["status"] == mx.SHORT:
        warnings.append(
            f"CPU: {name} has {offer.vcpus} vCPUs; the plan needs {cores_needed:g} cores per node "
            f"({figures['cpu_cores_per_gpu']:g} per GPU x {gpus_here} GPUs: the training process and "
            f"{a.loader_workers_per_gpu:g} DataLoader workers each)"
        )
    if checks["host_ram"]["status"] == mx.SHORT:
        warnings.append(
            f"host RAM: {name} has {offer.host_memory_bytes / 1e9:,.0f} GB; the plan needs "
            f"{ram_needed / 1e9:,.0f} GB per node ({_ram_parts(figures)})"
        )
    if options.storage == "local-nvme":
        ckpt_node = mx.node_checkpoint_bytes(ckpt.per_rank_bytes, gpus_here, ckpt.writer_ranks, ckpt.total_bytes)
        staged = unique_dataset_bytes / nodes
        need = mx.local_nvme_need_bytes(ckpt_node, a.local_checkpoints_kept, staged)
        checks["local_nvme"] = {
            "needed_bytes_per_node": need,
            "needed_parts_bytes": {
                "checkpoints_bytes": ckpt_node * a.local_checkpoints_kept,
                "staged_dataset_bytes": staged,
            },
            "local_nvme_bytes_per_node": offer.local_nvme_bytes,
            "status": mx.resource_status(need, offer.local_nvme_bytes),
        }
        if offer.local_nvme_bytes == 0:
            warnings.append(f"local NVMe: {name} has no local instance store; --storage local-nvme needs one")
        elif checks["local_nvme"]["status"] == mx.SHORT:
            warnings.append(
                f"local NVMe: {name} has {offer.local_nvme_bytes / 1e12:,.2f} TB; the plan needs "
                f"{need / 1e12:,.2f} TB per node ({a.local_checkpoints_kept:g} checkpoints of "
                f"{ckpt_node / 1e12:,.2f} TB + {staged / 1e12:,.2f} TB of the dataset)"
            )
    link = _scale_up_check(offer, tp, name)
    if link is not None:
        checks["scale_up"], warning = link
        if warning:
            warnings.append(warning)
    return {"instance": _instance_block(offer), "instance_checks": checks, "warnings": warnings}


def _instance_block(offer) -> dict:
    """The offer's machine as the machine block reports it (None figures drop out of the JSON)."""
    return {
        "offer": offer.id,
        "instance": offer.instance,
        "gpus_per_node": offer.gpu_count,
        "vcpus": offer.vcpus,
        "host_memory_bytes": offer.host_memory_bytes,
        "local_nvme_bytes": offer.local_nvme_bytes,
        "local_nvme_read_bytes_per_s": offer.local_nvme_read_bytes_per_s,
        "local_nvme_write_bytes_per_s": offer.local_nvme_write_bytes_per_s,
        "nic_kind": offer.nic_kind,
        "nic_bytes_per_s_per_gpu": offer.scale_out_bytes_per_s_per_gpu,
        "scale_up": offer.scale_up,
        "scale_up_bytes_per_s_per_gpu": offer.scale_up_bytes_per_s_per_gpu,
        "scale_up_domain_gpus": offer.scale_up_domain_gpus,
        "sources": offer.hardware_sources(),
    }


def _scale_up_check(offer, tp: int, name: str) -> tuple[dict, str | None] | None:
    """Tensor parallelism against the GPUs the instance's NVLink joins, where the offer gives that domain (None
    where it does not: the accelerator's typical link then stands, as the step time takes it). A group wider
    than the domain runs its all-reduces over PCIe (plan.training.offer_accelerator times it so)."""
    domain = offer.scale_up_domain_gpus
    if domain is None:
        return None
    status = mx.resource_status(tp, domain)
    check = {
        "tensor_parallel_gpus": tp,
        "scale_up_domain_gpus": domain,
        "scale_up_bytes_per_s_per_gpu": offer.scale_up_bytes_per_s_per_gpu,
        "status": status,
    }
    warning = None
    if status == mx.SHORT:
        joined = "has no NVLink between its GPUs" if domain == 1 else f"joins {domain} GPUs per NVLink domain"
        warning = (
            f"NVLink: {name} {joined}; tensor parallelism over {tp} GPUs crosses PCIe (the step time counts it so)"
        )
    return check, warning


def _network(model, gpu, layout, job, memory, step, a: StepAssumptions, gpn: int) -> dict:
    """Per-GPU inter-node traffic per step, the bandwidth that hides it, and what shows when it does not.

    Data parallel: the ring all-reduce of the gradients this GPU holds (2(n-1)/n x S; experts' over their
    expert-data-parallel group), split over the NICs of the group's members on one node, as the step-time model
    counts it, overlapped with the last micro-batch's
    backward (two thirds of its compute); ZeRO-3 moves 1.5x (Rajbhandari et al. 2020,
    section 7). Pipeline: 2 x chunks x micro-batches activations of tokens x hidden / tp per step, spread
    over the step.
    """
    from ..estimate.memory import resolve_recipe
    from ..estimate.params import count_params
    from ..estimate.steptime import scale_out

    nic, nic_source = scale_out(gpu, a)
    out = {
        "nic_bytes_per_s_per_gpu": nic,
        "nic_source": nic_source,
        "network_bytes_per_s_per_gpu": 0.0,
        "network_exposed_s_per_step": 0.0,
    }
    if gpu.vendor == "google" or layout.gpus <= gpn:
        return out  # one node (or a TPU slice): no scale-out traffic
    m = step.micro_batches
    compute = sum(step.parts.get(k, 0.0) for k in ("matmul", "attention", "elementwise"))
    window = compute * 2 / 3 / m  # backward is two thirds of forward + backward
    recipe, _ = resolve_recipe(job, layout)
    b = count_params(model)
    # dense gradients over dp x cp; routed experts (split over etp x ep) over expert-DP, as the step time counts them
    dense = (b.total - b.parts.get("experts", 0)) / (layout.tp * layout.pp)
    experts = b.parts.get("experts", 0) / (layout.expert_tp * layout.pp * layout.ep)
    group, expert_group = layout.dp * layout.cp, layout.expert_dp
    per_node = max(1, gpn // (layout.tp * layout.pp))
    expert_per_node = max(1, gpn // (layout.expert_tp * layout.ep * layout.pp))
    dp_bytes = 0.0
    if (group > 1 or expert_group > 1) and job.method == "full":
        dp_bytes = (
            mx.allreduce_bytes_per_rank(dense * recipe.grads, group) / per_node
            + mx.allreduce_bytes_per_rank(experts * recipe.grads, expert_group) / expert_per_node
        )
        if layout.zero >= 3:
            dp_bytes *= 1.5
    pp_bytes = 0.0
    if layout.pp > 1 and layout.tp * layout.pp > gpn:
        send = job.micro_batch * job.seq_len / layout.cp * model.hidden_size * (4 if job.precision == "fp32" else 2)
        pp_bytes = 2 * m * send / layout.tp
    need = (dp_bytes / window if window > 0 else 0.0) + pp_bytes / step.iteration_s
    out.update(
        network_bytes_per_s_per_gpu=need,
        network_exposed_s_per_step=mx.exposed_s(dp_bytes, nic, window) if dp_bytes else 0.0,
        network_dp_bytes_per_step=dp_bytes,
        network_pp_bytes_per_step=pp_bytes,
    )
    return out


def serve_machine(
    gpu: Accelerator,
    layout,
    report,
    *,
    storage: str = DEFAULT_SERVE_STORAGE,
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
    assumptions: mx.MachineAssumptions = mx.MachineAssumptions(),
    qps: float | None = None,
    offer=None,
) -> MachineReport:
    """Cold start of one replica: its weights read from storage into host memory, then copied to each GPU
    over PCIe (in parallel across GPUs); host RAM to stage them; disk to cache the weight files.

    With ``qps`` (a fleet), the scale-up time after a traffic step: bringing one more replica up is node
    provisioning (not modelled: it depends on the provider, the capacity on hand and the image; reported as
    "unknown", never 0) plus the replica's cold start, so the cold start is a lower bound.

    With ``offer`` (serve --offer), a node is the offer's instance (its GPU count replaces ``gpus_per_node``)
    and its host RAM and local disk are checked against what one replica needs on a node (``instance``,
    ``instance_checks``, ``warnings``, as train --offer does): "unknown" where the offer publishes no figure."""
    a = assumptions
    if storage not in mx.STORAGE_CLASSES:
        raise QuantityError(f"--storage must be one of {', '.join(STORAGE_CHOICES)}, got {storage!r}")
    if offer is not None:
        gpus_per_node = offer.gpu_count
    sc = mx.STORAGE_CLASSES[storage]
    per_gpu = float(report.group_bytes("weights"))
    gpus_here = min(layout.gpus_per_replica, max(1, gpus_per_node))
    replica = per_gpu * layout.gpus_per_replica
    per_node = per_gpu * gpus_here
    read_s = mx.transfer_s(per_node, sc.read_bytes_per_s_per_node)
    h2d_s = mx.transfer_s(per_gpu, _host_link_bytes_per_s(gpu, a))
    floor = mx.host_ram_floor_bytes(gpu.memory_bytes, gpus_here, a.host_ram_per_gpu_memory)
    figures = {
        "storage": {"class": storage, "source": sc.source, "read_bytes_per_s_per_node": sc.read_bytes_per_s_per_node},
        "weights_bytes_per_replica": replica,
        "weights_bytes_per_node": per_node,
        "cold_start_s": read_s + h2d_s,
        "cold_start_parts_s": {"storage_read_s": read_s, "host_to_device_s": h2d_s},
        "host_ram_bytes_per_node": max(floor, per_node),
        "host_ram_parts_bytes": {"gpu_memory_floor_bytes": floor, "weight_staging_bytes": per_node},
        "disk_bytes_per_node": replica,
    }
    notes = ["cold start: the weights to the GPUs; the engine's warm-up (graph capture, compilation) comes on top"]
    if qps is not None:
        total_s, known = mx.replica_start_s(figures["cold_start_s"], a.engine_warmup_s, a.instance_boot_s)
        figures["scale_up"] = {
            "node_provisioning": "known" if known else "unknown",
            "instance_boot_s": a.instance_boot_s,
            "cold_start_s": figures["cold_start_s"],
            "engine_warmup_s": a.engine_warmup_s,
            "per_replica_s": total_s if known else None,
            "at_least_s": total_s,
        }
        notes.append(
            "scale-up after a traffic step: per added replica (replicas start in parallel, each on its own node) "
            + ("instance boot + " if known else "node provisioning (unknown: provider, free capacity, image) + ")
            + "cold start + engine warm-up; keep spare replicas for steps faster than that"
        )
    if offer is not None:
        figures.update(_serve_instance(offer, figures))
    keep = {"pcie_efficiency", "host_ram_per_gpu_memory"}
    if qps is not None:  # an unset boot time is unknown: said in the scale-up block and its note, not listed
        keep |= {"engine_warmup_s"} | ({"instance_boot_s"} if a.instance_boot_s is not None else set())
    return MachineReport(figures, tuple(x for x in a.items() if x.name in keep), tuple(notes))


def _serve_instance(offer, figures: dict) -> dict:
    """serve --offer: the instance's host RAM against the RAM one replica needs on a node (the GPU-memory floor,
    or the weights staged for its GPUs there, whichever is more) and its local disk against the replica's weight
    files. A node with no local instance store (a sourced 0) is short: the weights then load from network
    storage. A figure the offer does not publish is "unknown", never 0."""
    name = f"{offer.instance} ({offer.id})"
    ram_need = figures["host_ram_bytes_per_node"]
    disk_need = figures["disk_bytes_per_node"]
    checks: dict[str, Any] = {
        "host_ram": {
            "needed_bytes_per_node": ram_need,
            "host_memory_bytes_per_node": offer.host_memory_bytes,
            "status": mx.resource_status(ram_need, offer.host_memory_bytes),
        },
        "local_disk": {
            "needed_bytes_per_node": disk_need,
            "local_nvme_bytes_per_node": offer.local_nvme_bytes,
            "status": mx.resource_status(disk_need, offer.local_nvme_bytes),
        },
    }
    warnings: list[str] = []
    if checks["host_ram"]["status"] == mx.SHORT:
        warnings.append(
            f"host RAM: {name} has {offer.host_memory_bytes / 1e9:,.0f} GB; one replica needs "
            f"{ram_need / 1e9:,.0f} GB per node to stage its weights ({_ram_parts(figures)})"
        )
    if offer.local_nvme_bytes == 0:
        warnings.append(
            f"local disk: {name} has no local instance store; the {disk_need / 1e9:,.1f} GB of weights load from "
            "network storage (a boot or network disk), at its speed"
        )
    elif checks["local_disk"]["status"] == mx.SHORT:
        warnings.append(
            f"local disk: {name} has {offer.local_nvme_bytes / 1e9:,.0f} GB of local NVMe; the weights of one "
            f"replica take {disk_need / 1e9:,.1f} GB"
        )
    return {"instance": _instance_block(offer), "instance_checks": checks, "warnings": warnings}


def _ram_parts(figures: Mapping[str, Any]) -> str:
    """The non-zero parts of a node's host RAM need, for a warning: "weights 140 GB, loader workers 8 GB"."""
    return ", ".join(
        f"{k.removesuffix('_bytes').replace('_', ' ')} {v / 1e9:,.0f} GB"
        for k, v in figures["host_ram_parts_bytes"].items()
        if v
    )
