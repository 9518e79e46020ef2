"""``gpuplan local diagnose``: what a ``local watch`` trace says about the job, as ranked verdicts.

Pure: the trace's records in, verdicts out (reading the file is the API's job). Each check gives a verdict
only when its condition holds; every verdict carries the numbers it rests on (value, threshold, where the
threshold comes from), what speaks against it, and advice. ``healthy`` is given only when no other check holds.
A check whose fields are absent from the trace (no GPU, no iowait off Linux) says "no data", never "fine".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from statistics import median
from typing import Any

from .detect import BUSY_UTILIZATION_PERCENT, POWER_CAP_FRACTION
from .progress import MfuReference

JUDGMENT = "judgment (gpuplan's rule of thumb, not a published figure)"
NVML_REASONS = "NVML API reference, nvmlClocksEventReasons (the clocks-event / throttle reason bits)"
#: What the power bits mean, from NVML's nvmlClocksEventReasons (nvml.h): 0x4, SW power cap: "the SW power
#: scaling algorithm is reducing the clocks below requested clocks" to hold the board at its power limit
#: (nvmlDeviceGetPowerManagementLimit); 0x80, HW power brake: clocks cut by a factor of 2 or more on an external
#: power-brake assertion (e.g. by the system's power supply). 0x4 is how a GPU runs a dense job at its TDP; it
#: is a finding only when the limit was lowered or the clocks fall far.
NVML_POWER_BITS = NVML_REASONS + ": 0x4 SW power cap holds the board at its power limit, 0x80 HW power brake"
DCGM_SM_ACTIVE = (
    "DCGM user guide, profiling metrics: SM_ACTIVE (GPM SM utilization) averages over all SMs, so a kernel of "
    "one block on one SM gives 1/#SMs, while NVML's GPU utilization counts the time any kernel runs"
)
DCGM_DRAM = (
    "DCGM user guide, profiling metrics (DRAM_ACTIVE: about 0.8 is the most reached in practice), so 0.6 is "
    "three quarters of the achievable; the cut itself is judgment"
)
XID_GUIDE = "NVIDIA XID Errors guide (docs.nvidia.com/deploy/xid-errors): every XID is a GPU error the driver logged"
#: XIDs the XID guide lists as possibly caused by the application (illegal access, page fault, stopped GPU,
#: preemptive cleanup): a user-code bug before a hardware fault.
APPLICATION_XIDS = frozenset({13, 31, 43, 45})


@dataclass(frozen=True)
class Threshold:
    value: float
    unit: str
    source: str


#: Every threshold a check uses, with its source; docs/watch.md lists them.
THRESHOLDS: dict[str, Threshold] = {
    "gpu_idle_util_percent": Threshold(50, "%", JUDGMENT + ": below half busy, the GPU waits more than it works"),
    "gpu_busy_util_percent": Threshold(
        BUSY_UTILIZATION_PERCENT, "%", "as local detect: a link or clock is judged only on a busy GPU"
    ),
    "idle_fraction": Threshold(0.3, "share of samples", JUDGMENT),
    "iowait_percent": Threshold(10, "%", JUDGMENT + " (sustained iowait is a saturation sign, USE method)"),
    "cpu_busy_percent": Threshold(90, "% of all cores", JUDGMENT),
    "thread_busy_percent": Threshold(90, "% of one core", JUDGMENT + ": one thread (the Python launcher) saturated"),
    "launch_fraction": Threshold(0.5, "share of samples", JUDGMENT),
    "swap_rate_bytes_per_s": Threshold(
        1 << 20, "B/s", JUDGMENT + " (sustained si/so in vmstat means the working set does not fit RAM)"
    ),
    "swap_growth_bytes": Threshold(256 << 20, "B", JUDGMENT),
    "swap_fraction": Threshold(0.1, "share of samples", JUDGMENT),
    "gpu_mem_fraction": Threshold(
        0.95, "of GPU memory", JUDGMENT + ": the caching allocator needs headroom for fragmentation"
    ),
    "host_mem_fraction": Threshold(0.95, "of RAM", JUDGMENT),
    "power_throttle_fraction": Threshold(0.1, "share of busy samples", JUDGMENT + "; bits 0x4, 0x80: " + NVML_REASONS),
    "power_limit_default_fraction": Threshold(
        POWER_CAP_FRACTION,
        "of the default power limit",
        "as local detect: an enforced limit below this share of NVML's default "
        "(nvmlDeviceGetPowerManagementDefaultLimit) was lowered on purpose (nvidia-smi -pl)",
    ),
    "power_cap_clock_ratio": Threshold(
        0.85,
        "of the maximum SM clock",
        JUDGMENT + "; a GPU at its power limit trades clock for power (" + NVML_POWER_BITS + "): a few percent "
        "below the maximum boost clock is how a dense job runs at TDP, more than 15 % is lost speed",
    ),
    "thermal_throttle_fraction": Threshold(
        0.05, "share of samples", JUDGMENT + "; bits 0x8, 0x20, 0x40: " + NVML_REASONS
    ),
    "pcie_down_fraction": Threshold(
        0.5, "share of busy samples", JUDGMENT + " (an idle link may downshift to save power; a busy one should not)"
    ),
    "straggler_clock_ratio": Threshold(0.93, "of the others' median SM clock", JUDGMENT),
    "straggler_util_gap_percent": Threshold(20, "points below the others' median utilization", JUDGMENT),
    "dram_active_high": Threshold(0.6, "fraction of DRAM cycles active (GPM)", DCGM_DRAM),
    "tensor_active_low": Threshold(
        0.2, "fraction of cycles a tensor pipe was active (GPM)", JUDGMENT + ": dense training keeps it near 0.5+"
    ),
    "memory_bound_fraction": Threshold(0.5, "share of busy samples", JUDGMENT),
    "link_busy_fraction": Threshold(
        0.5,
        "of the link's bandwidth per direction",
        JUDGMENT + "; NVLink: the catalog's figure for this GPU; PCIe: PCI-SIG's rate of the current gen and width",
    ),
    "sm_waiting": Threshold(0.5, "fraction of SMs active (GPM), below which the SMs mostly wait", JUDGMENT),
    "kernel_sm_fill_low": Threshold(
        0.25,
        "share of the SMs",
        "the SMs the running kernels fill: sum of GPM sm_active / sum of NVML utilization. "
        + DCGM_SM_ACTIVE
        + "; below it the kernels are tiny (launch overhead), above it they are real work the GPU "
        "waits between (input); the cut is judgment",
    ),
    "comm_fraction": Threshold(0.3, "share of busy samples", JUDGMENT),
    "xid_events": Threshold(1, "XID events", XID_GUIDE),
    "ecc_uncorrected_growth": Threshold(
        1,
        "uncorrected ECC errors",
        "NVML API reference, nvmlDeviceGetTotalEccErrors (volatile count): an uncorrected error is corrupted data",
    ),
    "checkpoint_write_bytes_per_s": Threshold(64 << 20, "B/s written", JUDGMENT + ": a burst, not logging"),
    "checkpoint_stall_fraction": Threshold(0.05, "share of samples", JUDGMENT),
    "checkpoint_episodes": Threshold(2, "separate write bursts with the GPUs idle", JUDGMENT + ": periodic"),
}

THERMAL_BITS = 0x8 | 0x20 | 0x40


@dataclass(frozen=True)
class Verdict:
    id: str
    confidence: float
    evidence: tuple[dict[str, Any], ...]
    counter_evidence: tuple[str, ...]
    advice: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "confidence": self.confidence,
            "evidence": list(self.evidence),
            "counter_evidence": list(self.counter_evidence),
            "advice": self.advice,
        }


@dataclass(frozen=True)
class Diagnosis:
    verdicts: tuple[Verdict, ...]
    checks: tuple[dict[str, str], ...]  # every check: id, status ("held", "not held", "no data"), reason
    samples: int
    duration_s: float | None
    gpus: int
    exit_code: int | None
    notes: tuple[str, ...] = field(default=())
    mfu: dict[str, Any] | None = None  # observed vs predicted, when the trace or --model allow it

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "trace": {
                "samples": self.samples,
                "duration_s": self.duration_s,
                "gpus": self.gpus,
                "exit_code": self.exit_code,
            },
            "verdicts": [v.to_dict() for v in self.verdicts],
            "checks": list(self.checks),
            "thresholds": {k: {"value": t.value, "unit": t.unit, "source": t.source} for k, t in THRESHOLDS.items()},
            "notes": list(self.notes),
        }
        if self.mfu is not None:
            d["mfu"] = self.mfu
        return d


def _ev(metric: str, value: float, threshold: str, note: str = "") -> dict[str, Any]:
    t = THRESHOLDS[threshold]
    e: dict[str, Any] = {
        "metric": metric,
        "value": round(value, 4),
        "threshold": t.value,
        "threshold_name": threshold,
        "unit": t.unit,
        "source": t.source,
    }
    if note:
        e["note"] = note
    return e


class _Trace:
    def __init__(self, records: Sequence[dict[str, Any]]):
        self.header = next((r for r in records if r.get("record") == "header"), {})
        self.samples = [r for r in records if r.get("record") == "sample"]
        self.summary = next((r for r in records if r.get("record") == "summary"), None)
        host = self.header.get("host") or {}
        self.cores = host.get("cpu_count_logical") or None
        self._by_gpu: dict[Any, list[dict[str, Any]]] = {}
        for s in self.samples:
            for g in s.get("gpus", []):
                if "index" in g:
                    self._by_gpu.setdefault(g["index"], []).append(g)
        # GPU ids: NVML indices, or "host:index" labels in a merged trace of several nodes
        self.gpu_ids = sorted(self._by_gpu, key=lambda i: (str(type(i)), i))

    def host(self, key: str) -> list[float]:
        return [s["host"][key] for s in self.samples if key in s.get("host", {})]

    def gpu(self, index: Any, key: str) -> list[Any]:
        return [g[key] for g in self._by_gpu.get(index, []) if key in g]

    def gpu_rows(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(sample, gpu) pairs."""
        return [(s, g) for s in self.samples for g in s.get("gpus", [])]


Check = Callable[[_Trace], "tuple[str, Verdict | None, str]"]  # status, verdict, reason


def _mean_util(s: dict[str, Any]) -> float | None:
    us = [g["util_percent"] for g in s.get("gpus", []) if "util_percent" in g]
    return sum(us) / len(us) if us else None


def _kernel_fill(samples: Sequence[dict[str, Any]]) -> float | None:
    """How full the GPU's SMs are while a kernel runs: the sum of GPM ``sm_active`` (the share of SMs busy,
    averaged over all SMs and the interval) over the sum of NVML utilization / 100 (the share of the interval any
    kernel ran), over every GPU row of ``samples`` that has both (DCGM user guide, SM_ACTIVE vs. GPU
    utilization). Summed rather than averaged per sample: NVML's utilization and GPM cover slightly different
    windows, which a single near-idle sample magnifies. A stream of tiny kernels (a launch-bound loop) keeps
    utilization up with almost no SM busy (fill near 0); real work the GPU waits for between steps fills the SMs
    when it runs (fill near 1) however idle the GPU is on average. None: no GPM, or no kernel ran."""
    active = busy = 0.0
    for s in samples:
        for g in s.get("gpus", []):
            if "sm_active" in g and "util_percent" in g:
                active += g["sm_active"]
                busy += g["util_percent"] / 100
    return active / busy if busy > 0 else None


def _thread_saturated(s: dict[str, Any]) -> bool:
    return bool(s.get("proc", {}).get("max_thread_cpu_percent", 0) >= THRESHOLDS["thread_busy_percent"].value)


def _input_bound(t: _Trace) -> tuple[str, Verdict | None, str]:
    idle_thr = THRESHOLDS["gpu_idle_util_percent"].value
    rows = [(s, u) for s in t.samples if (u := _mean_util(s)) is not None]
    if not rows:
        return "no data", None, "no GPU utilization in the trace"
    idle = [s for s, u in rows if u < idle_thr]
    cpu_thr, io_thr = THRESHOLDS["cpu_busy_percent"].value, THRESHOLDS["iowait_percent"].value
    # One saturated thread with an idle GPU is either a launch-bound loop or a data pipeline in the main
    # process (DataLoader num_workers=0): how full the SMs are when a kernel does run tells them apart.
    fill = _kernel_fill([s for s in idle if _thread_saturated(s)])
    main_thread_loader = fill is not None and fill >= THRESHOLDS["kernel_sm_fill_low"].value

    def starved(s: dict[str, Any]) -> bool:
        h, p = s.get("host", {}), s.get("proc", {})
        proc_share = p["cpu_percent"] / t.cores if t.cores and "cpu_percent" in p else None
        return (
            h.get("iowait_percent", 0) >= io_thr
            or h.get("cpu_percent", 0) >= cpu_thr
            or (proc_share is not None and proc_share >= cpu_thr)
            or (main_thread_loader and _thread_saturated(s))
        )

    hits = [s for s in idle if starved(s)]
    frac = len(hits) / len(rows)
    if frac < THRESHOLDS["idle_fraction"].value:
        return "not held", None, f"GPU idle with a busy CPU, input thread or high iowait in {frac:.0%} of samples"
    iowait = [s["host"]["iowait_percent"] for s in hits if "iowait_percent" in s.get("host", {})]
    cpu = [s["host"]["cpu_percent"] for s in hits if "cpu_percent" in s.get("host", {})]
    evidence = [
        _ev(
            "share of samples with the GPU idle while the CPU side is busy (host CPU, the job's CPU, or one thread "
            "preparing full-size GPU work) or iowait is high",
            frac,
            "idle_fraction",
        ),
        _ev(
            "median GPU utilization in those samples (%)",
            median(_mean_util(s) or 0 for s in hits),
            "gpu_idle_util_percent",
        ),
    ]
    if iowait:
        evidence.append(_ev("median iowait in those samples (%)", median(iowait), "iowait_percent"))
    if cpu and not (main_thread_loader and median(cpu) < cpu_thr):  # one busy thread is not a busy host
        evidence.append(_ev("median host CPU in those samples (%)", median(cpu), "cpu_busy_percent"))
    one_thread = [s for s in hits if _thread_saturated(s)]
    if main_thread_loader and fill is not None and one_thread:
        evidence.append(
            _ev(
                "median busiest-thread CPU in those samples (% of one core)",
                median(s["proc"]["max_thread_cpu_percent"] for s in one_thread),
                "thread_busy_percent",
                "one thread is the whole input pipeline: the data is prepared in the main process",
            )
        )
        evidence.append(
            _ev(
                "share of the SMs the kernels fill when they run",
                fill,
                "kernel_sm_fill_low",
                "the GPU's work is real (not a stream of tiny launches); it waits between steps",
            )
        )
    counter = []
    if iowait and median(iowait) < io_thr:
        counter.append("iowait stays low: the loader is CPU-bound (decoding, augmentation), not disk-bound")
    return (
        "held",
        Verdict(
            "input-bound",
            round(min(1.0, frac / 0.6), 2),
            tuple(evidence),
            tuple(counter),
            "Feed the GPU faster: more DataLoader workers (num_workers > 0, so batches are built beside the "
            "training loop, not in it), pin_memory=True with non_blocking copies, prefetching (prefetch_factor), "
            "pre-decoded or cached data on local NVMe, lighter CPU augmentation or moving it to the GPU (e.g. DALI).",
        ),
        "",
    )


def _cpu_launch_bound(t: _Trace) -> tuple[str, Verdict | None, str]:
    rows = [
        (s, u) for s in t.samples if (u := _mean_util(s)) is not None and "max_thread_cpu_percent" in s.get("proc", {})
    ]
    if not rows:
        return "no data", None, "needs GPU utilization and the job's per-thread CPU"
    util_thr = THRESHOLDS["gpu_idle_util_percent"].value + 20  # partly idle, not starved
    thr = THRESHOLDS["thread_busy_percent"].value
    hits = [
        s
        for s, u in rows
        if u < util_thr
        and s["proc"]["max_thread_cpu_percent"] >= thr
        and s.get("host", {}).get("iowait_percent", 0) < THRESHOLDS["iowait_percent"].value
        and s.get("host", {}).get("cpu_percent", 0) < THRESHOLDS["cpu_busy_percent"].value
    ]
    frac = len(hits) / len(rows)
    if frac < THRESHOLDS["launch_fraction"].value:
        return "not held", None, f"one saturated thread with an underused GPU in {frac:.0%} of samples"
    fill, low = _kernel_fill(hits), THRESHOLDS["kernel_sm_fill_low"].value
    if fill is not None and fill >= low:
        return (
            "not held",
            None,
            f"one thread saturated with an underused GPU in {frac:.0%} of samples, but the kernels fill "
            f"{fill:.0%} of the SMs when they run: the thread prepares work (input-bound), it does not launch it",
        )
    evidence = [
        _ev("share of samples with one thread saturated and the GPU under 70 %", frac, "launch_fraction"),
        _ev(
            "median busiest-thread CPU (% of one core)",
            median(s["proc"]["max_thread_cpu_percent"] for s in hits),
            "thread_busy_percent",
        ),
    ]
    counter = ["GPU utilization only counts time a kernel runs, not how full the GPU is"]
    if fill is not None:
        evidence.append(
            _ev("share of the SMs the kernels fill when they run", fill, "kernel_sm_fill_low", "tiny kernels")
        )
    else:
        counter.append(
            "no GPM SM activity in the trace: a data pipeline in the main process (DataLoader num_workers=0) "
            "looks the same; GPM (Hopper and newer) tells them apart"
        )
    return (
        "held",
        Verdict(
            "cpu-launch-bound",
            round(frac, 2),
            tuple(evidence),
            tuple(counter),
            "The Python thread launching kernels is the bottleneck: larger batches or fused kernels, CUDA graphs "
            "(torch.compile mode='reduce-overhead'), fewer host syncs (.item(), .cpu()) in the loop.",
        ),
        "",
    )


def _host_swapping(t: _Trace) -> tuple[str, Verdict | None, str]:
    rates = [
        s["host"].get("swap_in_bytes_per_s", 0) + s["host"].get("swap_out_bytes_per_s", 0)
        for s in t.samples
        if "swap_in_bytes_per_s" in s.get("host", {}) or "swap_out_bytes_per_s" in s.get("host", {})
    ]
    used = t.host("swap_used_bytes")
    if not rates and not used:
        return "no data", None, "no swap counters in the trace"
    thr = THRESHOLDS["swap_rate_bytes_per_s"].value
    frac = sum(r >= thr for r in rates) / len(rates) if rates else 0.0
    growth = (max(used) - used[0]) if used else 0
    evidence = []
    if frac >= THRESHOLDS["swap_fraction"].value:
        evidence.append(_ev("share of samples swapping", frac, "swap_fraction"))
        evidence.append(_ev("peak swap in+out (B/s)", max(rates), "swap_rate_bytes_per_s"))
    if growth >= THRESHOLDS["swap_growth_bytes"].value:
        evidence.append(_ev("swap used growth during the run (B)", growth, "swap_growth_bytes"))
    if not evidence:
        return "not held", None, f"swapping in {frac:.0%} of samples, swap grew {growth / 2**20:.0f} MiB"
    mem = [
        s["host"]["mem_used_bytes"] / s["host"]["mem_total_bytes"]
        for s in t.samples
        if "mem_total_bytes" in s.get("host", {})
    ]
    counter = []
    if mem and max(mem) < 0.8:
        counter.append(f"RAM peaked at {max(mem):.0%}: the swapping may come from another process")
    return (
        "held",
        Verdict(
            "host-swapping",
            round(min(1.0, 0.5 + frac), 2) if frac else 0.6,
            tuple(evidence),
            tuple(counter),
            "The host is out of RAM: fewer DataLoader workers or a smaller prefetch, memory-mapped datasets, no "
            "full dataset copies per worker, or a machine with more memory.",
        ),
        "",
    )


def _near_oom(t: _Trace) -> tuple[str, Verdict | None, str]:
    evidence = []
    have = False
    for i in t.gpu_ids:
        used, total = t.gpu(i, "mem_used_bytes"), t.gpu(i, "mem_total_bytes")
        if used and total:
            have = True
            peak = max(used) / total[0]
            if peak >= THRESHOLDS["gpu_mem_fraction"].value:
                evidence.append(_ev(f"GPU {i} peak memory used (share)", peak, "gpu_mem_fraction"))
    hosts = [
        s["host"]["mem_used_bytes"] / s["host"]["mem_total_bytes"]
        for s in t.samples
        if "mem_total_bytes" in s.get("host", {})
    ]
    if hosts:
        have = True
        if max(hosts) >= THRESHOLDS["host_mem_fraction"].value:
            evidence.append(_ev("host peak memory used (share)", max(hosts), "host_mem_fraction"))
    if not have:
        return "no data", None, "no memory figures in the trace"
    if not evidence:
        return "not held", None, "memory peaks below the thresholds"
    return (
        "held",
        Verdict(
            "near-oom",
            0.8,
            tuple(evidence),
            (
                "PyTorch's caching allocator keeps freed blocks: NVML's used memory can sit near full without a real "
                "shortage",
            ),
            "Leave headroom: smaller micro-batch, activation checkpointing, ZeRO/FSDP sharding, "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; check with gpuplan train what should fit.",
        ),
        "",
    )


def _busy_rows(t: _Trace) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    thr = THRESHOLDS["gpu_busy_util_percent"].value
    return [(s, g) for s, g in t.gpu_rows() if g.get("util_percent", 0) >= thr]


def _throttle(kind: str, bits: int, frac_name: str, busy_only: bool) -> Check:
    """The thermal check (the power bits need the limit and clocks beside them: _throttled_power)."""

    def check(t: _Trace) -> tuple[str, Verdict | None, str]:
        rows = _busy_rows(t) if busy_only else t.gpu_rows()
        rows = [(s, g) for s, g in rows if "throttle_mask" in g]
        if not rows:
            return (
                "no data",
                None,
                "no throttle reasons in the trace" + (" while the GPU was busy" if busy_only else ""),
            )
        hits = [(s, g) for s, g in rows if g["throttle_mask"] & bits]
        frac = len(hits) / len(rows)
        if frac < THRESHOLDS[frac_name].value:
            return "not held", None, f"{kind} throttle reasons in {frac:.0%} of samples"
        names = sorted({n for _, g in hits for n in g.get("throttle_reasons", [])})
        evidence = [_ev(f"share of samples with {kind} throttle reasons ({', '.join(names)})", frac, frac_name)]
        clocks = [
            g["sm_clock_mhz"] / g["sm_clock_max_mhz"]
            for _, g in hits
            if g.get("sm_clock_max_mhz") and "sm_clock_mhz" in g
        ]
        counter = []
        if clocks:
            evidence[0]["note"] = f"median SM clock then {median(clocks):.0%} of its maximum"
            if median(clocks) > 0.95:
                counter.append("the SM clock stayed within 5 % of its maximum: the throttling cost little")
        temps = [g["temp_c"] for _, g in hits if "temp_c" in g]
        if temps:
            evidence[0]["note"] = evidence[0].get("note", "") + f"; peak {max(temps)} C"
        advice = (
            "Check cooling: fan curves, airflow, inlet temperature, blocked or failing fans; in a cluster, report "
            "the node."
        )
        return (
            "held",
            Verdict(f"throttled-{kind}", round(min(1.0, 0.5 + frac / 2), 2), tuple(evidence), tuple(counter), advice),
            "",
        )

    return check


def _default_limits(t: _Trace) -> dict[Any, float]:
    """Each GPU's default power limit (W) as the header records it; samples may carry their own."""
    return {
        g.get("index"): float(g["power_limit_default_w"])
        for g in t.header.get("gpus") or []
        if g.get("power_limit_default_w")
    }


@dataclass(frozen=True)
class _PowerRows:
    """The busy samples' power bits, sorted by what they mean (NVML nvmlClocksEventReasons)."""

    rows: int  # busy GPU samples with a reason mask
    capped: list[dict[str, Any]]  # 0x4 with the enforced limit below the default's share
    slow: list[dict[str, Any]]  # 0x4 with the SM clock below its share of the maximum
    brake: list[dict[str, Any]]  # 0x80
    unjudged: list[dict[str, Any]]  # 0x4 with neither the default limit nor the clocks to judge it by
    at_limit: list[dict[str, Any]]  # 0x4 otherwise: power management at the limit the GPU ships with
    default_known: bool


def _clock_ratio(g: dict[str, Any]) -> float | None:
    return g["sm_clock_mhz"] / g["sm_clock_max_mhz"] if g.get("sm_clock_max_mhz") and "sm_clock_mhz" in g else None


def _power_rows(t: _Trace) -> _PowerRows | None:
    rows = [g for _, g in _busy_rows(t) if "throttle_mask" in g]
    if not rows:
        return None
    defaults = _default_limits(t)
    cap_share = THRESHOLDS["power_limit_default_fraction"].value
    clock_share = THRESHOLDS["power_cap_clock_ratio"].value
    capped, slow, brake, unjudged, at_limit = [], [], [], [], []
    known = False
    for g in rows:
        mask = g["throttle_mask"]
        if mask & 0x80:
            brake.append(g)
        if not mask & 0x4:
            continue
        default = g.get("power_limit_default_w") or defaults.get(g.get("index"))
        known = known or bool(default)
        ratio = _clock_ratio(g)
        if default and g.get("power_limit_w") and g["power_limit_w"] < cap_share * default:
            capped.append(g)
        elif ratio is not None and ratio < clock_share:
            slow.append(g)
        elif mask & 0x80:
            continue
        elif ratio is None and not default:
            unjudged.append(g)
        else:
            at_limit.append(g)
    return _PowerRows(len(rows), capped, slow, brake, unjudged, at_limit, known)


def _throttled_power(t: _Trace) -> tuple[str, Verdict | None, str]:
    """A finding only when the power cap costs speed the GPU is built to have: a limit lowered below the
    default, clocks far below the maximum at the limit, or the hardware power brake. The SW power cap bit alone
    is how a GPU runs a dense job at its TDP (NVML: the power scaling keeps the board at its limit)."""
    p = _power_rows(t)
    if p is None:
        return "no data", None, "no throttle reasons in the trace while the GPU was busy"
    judged = {id(g) for g in p.capped + p.slow}
    found = p.capped + p.slow + p.unjudged + [g for g in p.brake if id(g) not in judged]
    frac = len(found) / p.rows
    if frac < THRESHOLDS["power_throttle_fraction"].value:
        reason = f"a lowered limit, far-down clocks or the power brake in {frac:.0%} of busy samples"
        if note := _power_note(t, p):
            reason += "; " + note
        return "not held", None, reason
    names = sorted({n for g in found for n in g.get("throttle_reasons", [])})
    evidence = [_ev(f"share of busy samples throttled by power ({', '.join(names)})", frac, "power_throttle_fraction")]
    counter = []
    advice = []
    if p.capped:
        limit = median(g["power_limit_w"] for g in p.capped)
        default = median(g.get("power_limit_default_w") or _default_limits(t)[g.get("index")] for g in p.capped)
        evidence.append(
            _ev(
                "enforced power limit / the default limit",
                limit / default,
                "power_limit_default_fraction",
                f"{limit:.0f} W of {default:.0f} W",
            )
        )
        advice.append(
            f"The power limit was lowered to {limit:.0f} W of the default {default:.0f} W: raise it back "
            "(nvidia-smi -pl, or ask who set it: a site power budget, a datacenter cap)."
        )
    slow_or_all = p.slow or p.capped
    clocks = [r for g in slow_or_all if (r := _clock_ratio(g)) is not None]
    if clocks:
        evidence.append(
            _ev("median SM clock / its maximum then", median(clocks), "power_cap_clock_ratio", "at the power limit")
        )
    if p.slow and not p.capped:
        if p.default_known:
            counter.append(
                "the limit is the GPU's default: a dense job can be power-bound at its TDP by design; compare the "
                "clocks with another GPU of the same model on the same job"
            )
        else:
            counter.append(
                "the trace does not record the default power limit (local watch writes power_limit_default_w): "
                "judged by the clocks alone; check nvidia-smi -q -d POWER"
            )
        advice.append(
            "The GPU loses clock at its power limit: check the limit against the default (gpuplan local detect; "
            "nvidia-smi -q -d POWER,PERFORMANCE), the node's power delivery and cooling (hot GPUs draw more)."
        )
    if p.unjudged:
        counter.append(
            "the trace has neither the default power limit nor the maximum SM clock: a lowered cap cannot be told "
            "from a GPU at its TDP (where the SW power cap reason is normal)"
        )
        advice.append(
            "The GPU ran at its power limit: check that limit against the default (gpuplan local detect; "
            "nvidia-smi -q -d POWER); a lowered limit (nvidia-smi -pl) or a weak PSU costs clock."
        )
    if p.brake:
        evidence.append(
            _ev(
                "share of busy samples with the HW power brake (0x80)",
                len(p.brake) / p.rows,
                "power_throttle_fraction",
                "NVML: clocks cut by 2x or more on an external power-brake signal",
            )
        )
        advice.append(
            "The hardware power brake fired: the system (power supply, chassis power budget) told the GPU to slow "
            "down; check PSU redundancy and the node's power budget, and report the node."
        )
    confidence = min(1.0, 0.5 + frac / 2)
    if not (p.capped or p.slow or p.brake):
        confidence = min(confidence, 0.6)  # only the bit, nothing to judge it by
    return (
        "held",
        Verdict("throttled-power", round(confidence, 2), tuple(evidence), tuple(counter), " ".join(advice)),
        "",
    )


def _power_note(t: _Trace, p: _PowerRows | None = None) -> str | None:
    """Information, not a finding: the SW power cap bit set on a busy GPU at its own limit with clocks near the
    maximum (NVML: the power scaling holding the board at its limit, as at TDP)."""
    p = p if p is not None else _power_rows(t)
    if p is None or len(p.at_limit) / p.rows < THRESHOLDS["power_throttle_fraction"].value:
        return None
    limits = [g["power_limit_w"] for g in p.at_limit if g.get("power_limit_w")]
    clocks = [r for g in p.at_limit if (r := _clock_ratio(g)) is not None]
    power = [g["power_w"] for g in p.at_limit if "power_w" in g]
    parts = [f"SW power cap reason in {len(p.at_limit) / p.rows:.0%} of busy samples"]
    if limits:
        parts.append(f"at a {median(limits):.0f} W limit" + (" (the default)" if p.default_known else ""))
    if power:
        parts.append(f"drawing {median(power):.0f} W")
    if clocks:
        parts.append(f"SM clock {median(clocks):.0%} of its maximum")
    return (
        ", ".join(parts)
        + ": the GPU holding its power limit, as a dense job at TDP does; not a finding"
        + ("" if p.default_known else " (the trace has no default limit to check the limit against)")
    )


def _pcie_downtrained(t: _Trace) -> tuple[str, Verdict | None, str]:
    rows = [(s, g) for s, g in _busy_rows(t) if "pcie_gen" in g and "pcie_gen_max" in g]
    if not rows:
        return "no data", None, "no PCIe link figures while a GPU was busy"
    evidence = []
    for i in sorted({g["index"] for _, g in rows}):
        mine = [g for _, g in rows if g["index"] == i]
        down = [
            g
            for g in mine
            if g["pcie_gen"] < g["pcie_gen_max"]
            or ("pcie_width" in g and "pcie_width_max" in g and g["pcie_width"] < g["pcie_width_max"])
        ]
        frac = len(down) / len(mine)
        if frac >= THRESHOLDS["pcie_down_fraction"].value:
            g = down[0]
            evidence.append(
                _ev(
                    f"GPU {i}: share of busy samples with the link below its maximum",
                    frac,
                    "pcie_down_fraction",
                    f"gen {g['pcie_gen']} x{g.get('pcie_width', '?')} of gen {g['pcie_gen_max']} "
                    f"x{g.get('pcie_width_max', '?')}",
                )
            )
    if not evidence:
        return "not held", None, "every busy link at its maximum generation and width"
    return (
        "held",
        Verdict(
            "pcie-downtrained",
            0.9,
            tuple(evidence),
            ("the maximum is the GPU's: a slot or riser of a lower generation caps the link without a fault",),
            "Reseat the GPU or riser, check the slot's generation in the BIOS, compare with gpuplan local bench pcie.",
        ),
        "",
    )


def _others_median(values: dict[Any, float], i: Any) -> float | None:
    """The median of every GPU's value but ``i``'s."""
    rest = [v for j, v in values.items() if j != i]
    return median(rest) if rest else None


def _straggler(t: _Trace) -> tuple[str, Verdict | None, str]:
    if len(t.gpu_ids) < 2:
        return "no data", None, "needs two or more GPUs"
    busy_thr = THRESHOLDS["gpu_busy_util_percent"].value
    clocks: dict[Any, float] = {}
    utils: dict[Any, float] = {}
    for i in t.gpu_ids:  # each GPU's medians once: a merged trace may hold hundreds of GPUs
        busy = [g["sm_clock_mhz"] for g in t._by_gpu[i] if g.get("util_percent", 0) >= busy_thr and "sm_clock_mhz" in g]
        if busy:
            clocks[i] = median(busy)
        if u := t.gpu(i, "util_percent"):
            utils[i] = median(u)
    if not clocks and not utils:
        return "no data", None, "no per-GPU clocks or utilization"
    evidence = []
    slow_ids = []
    for i in t.gpu_ids:
        found = False
        if i in clocks and (others := _others_median(clocks, i)):
            ratio = clocks[i] / others
            if ratio < THRESHOLDS["straggler_clock_ratio"].value:
                evidence.append(_ev(f"GPU {i} median SM clock / the others' median", ratio, "straggler_clock_ratio"))
                found = True
        if i in utils and (other_u := _others_median(utils, i)) is not None:
            gap = other_u - utils[i]
            if gap >= THRESHOLDS["straggler_util_gap_percent"].value:
                evidence.append(
                    _ev(f"GPU {i} median utilization below the others' (points)", gap, "straggler_util_gap_percent")
                )
                found = True
        if found:
            slow_ids.append(i)
    if not evidence:
        return "not held", None, "the GPUs' clocks and utilization agree"
    slow = len(slow_ids)
    counter: tuple[str, ...] = ()
    hosts = {str(i).rsplit(":", 1)[0] for i in slow_ids if isinstance(i, str)}
    all_hosts = {str(i).rsplit(":", 1)[0] for i in t.gpu_ids if isinstance(i, str)}
    if len(hosts) == 1 and len(all_hosts) > 1 and slow > 1:
        evidence[0]["note"] = f"all {slow} slow GPUs are on {hosts.pop()}: the node, not one GPU"
    elif slow > 1:
        counter = (f"{slow} GPUs differ: an uneven layout rather than one slow GPU",)
    return (
        "held",
        Verdict(
            "straggler",
            0.8 if slow == 1 or "note" in evidence[0] else 0.5,
            tuple(evidence),
            counter,
            "In synchronous training every step waits for the slowest GPU: check its cooling and power "
            "(throttle reasons), its PCIe link, and what else runs on it (nvidia-smi); exclude the GPU or node.",
        ),
        "",
    )


def _memory_bound(t: _Trace) -> tuple[str, Verdict | None, str]:
    rows = [(s, g) for s, g in _busy_rows(t) if "dram_active" in g and "tensor_active" in g]
    if not rows:
        return "no data", None, "needs GPM dram_active and tensor_active (Hopper and newer; see the header's counters)"
    hi, lo = THRESHOLDS["dram_active_high"].value, THRESHOLDS["tensor_active_low"].value
    hits = [g for _, g in rows if g["dram_active"] >= hi and g["tensor_active"] < lo]
    frac = len(hits) / len(rows)
    if frac < THRESHOLDS["memory_bound_fraction"].value:
        return "not held", None, f"DRAM busy with idle tensor cores in {frac:.0%} of busy samples"
    evidence = (
        _ev("share of busy samples with DRAM busy and tensor cores idle", frac, "memory_bound_fraction"),
        _ev("median dram_active then", median(g["dram_active"] for g in hits), "dram_active_high"),
        _ev("median tensor_active then", median(g["tensor_active"] for g in hits), "tensor_active_low"),
    )
    counter = []
    sm = [g["sm_active"] for g in hits if "sm_active" in g]
    if sm and median(sm) < THRESHOLDS["sm_waiting"].value:
        counter.append(
            f"the SMs were mostly idle too (median sm_active {median(sm):.2f}): small kernels, not bandwidth"
        )
    return (
        "held",
        Verdict(
            "memory-bound",
            round(min(1.0, 0.4 + frac / 2), 2),
            evidence,
            tuple(counter),
            "The kernels move more bytes than they compute on: larger micro-batches or longer sequences per kernel "
            "(more arithmetic per byte), fused elementwise ops (torch.compile), FlashAttention, bf16/fp8 "
            "activations; in inference decoding this is expected: batch more requests.",
        ),
        "",
    )


def _link_load(g: dict[str, Any], nvlink_max: float | None) -> tuple[str, float] | None:
    """The busiest link of one GPU sample as a share of its bandwidth per direction: ("NVLink" | "PCIe", share)."""
    loads = []
    if nvlink_max and ("nvlink_rx_bytes_per_s" in g or "nvlink_tx_bytes_per_s" in g):
        top = max(g.get("nvlink_rx_bytes_per_s", 0.0), g.get("nvlink_tx_bytes_per_s", 0.0))
        loads.append(("NVLink", top / nvlink_max))
    if "pcie_gen" in g and "pcie_width" in g and ("pcie_rx_bytes_per_s" in g or "pcie_tx_bytes_per_s" in g):
        from ..spec.accelerator import pcie_bytes_per_s

        try:
            cap = pcie_bytes_per_s(int(g["pcie_gen"]), int(g["pcie_width"]))
        except ValueError:
            cap = 0.0
        if cap:
            top = max(g.get("pcie_rx_bytes_per_s", 0.0), g.get("pcie_tx_bytes_per_s", 0.0))
            loads.append(("PCIe", top / cap))
    return max(loads, key=lambda x: x[1]) if loads else None


def _communication_bound(t: _Trace) -> tuple[str, Verdict | None, str]:
    nvlink_max = {g.get("index"): g.get("nvlink_bytes_per_s_max") for g in t.header.get("gpus") or []}
    loaded = [(g, load) for _, g in _busy_rows(t) if (load := _link_load(g, nvlink_max.get(g.get("index"))))]
    if not loaded:
        return "no data", None, "no NVLink or PCIe throughput (with a known link bandwidth) while a GPU was busy"
    busy_thr = THRESHOLDS["link_busy_fraction"].value
    waiting = [(g, load) for g, load in loaded if "sm_active" in g or "tensor_active" in g]
    busy_links = [(g, load) for g, load in loaded if load[1] >= busy_thr]
    if not waiting:
        share = len(busy_links) / len(loaded)
        return (
            "no data",
            None,
            f"links busy in {share:.0%} of busy samples, but without GPM SM / tensor activity the trace can't tell "
            "waiting from compute overlapped with the transfers",
        )

    def idle(g: dict[str, Any]) -> bool:
        if "tensor_active" in g:
            return bool(g["tensor_active"] < THRESHOLDS["tensor_active_low"].value)
        return bool(g["sm_active"] < THRESHOLDS["sm_waiting"].value)

    hits = [(g, load) for g, load in waiting if load[1] >= busy_thr and idle(g)]
    frac = len(hits) / len(waiting)
    if frac < THRESHOLDS["comm_fraction"].value:
        return "not held", None, f"links busy while the SMs wait in {frac:.0%} of busy samples"
    kinds = sorted({load[0] for _, load in hits})
    evidence = [
        _ev(
            f"share of busy samples with a busy link ({', '.join(kinds)}) and idle tensor cores / SMs",
            frac,
            "comm_fraction",
        ),
        _ev(
            "median link load then (share of its bandwidth)", median(load[1] for _, load in hits), "link_busy_fraction"
        ),
    ]
    tensor = [g["tensor_active"] for g, _ in hits if "tensor_active" in g]
    if tensor:
        evidence.append(_ev("median tensor_active then", median(tensor), "tensor_active_low"))
    counter = []
    if kinds == ["PCIe"]:
        counter.append("the busy link is PCIe: host-to-device copies (data, offload) look the same as collectives")
    return (
        "held",
        Verdict(
            "communication-bound",
            round(min(1.0, 0.4 + frac), 2),
            tuple(evidence),
            tuple(counter),
            "The GPUs wait on transfers: overlap communication with compute (DDP bucket sizes, FSDP prefetch, "
            "--overlap-grad-reduce, tp_comm_overlap), less tensor parallelism across slow links, keep TP inside "
            "the NVLink domain, larger micro-batches per collective; compare with gpuplan train's comm time.",
        ),
        "",
    )


def _hardware_errors(t: _Trace) -> tuple[str, Verdict | None, str]:
    xid_rows = [(s, g) for s, g in t.gpu_rows() if "xid_errors" in g]
    ecc_ids = [i for i in t.gpu_ids if t.gpu(i, "ecc_uncorrected_errors")]
    if not xid_rows and not ecc_ids:
        return "no data", None, "no XID events or ECC counts in the trace (see the header's counters)"
    evidence = []
    codes: set[int] = set()
    for i in t.gpu_ids:
        mine = [c for s, g in xid_rows if g.get("index") == i for c in g["xid_errors"]]
        if len(mine) >= THRESHOLDS["xid_events"].value:
            codes |= set(mine)
            first = next(s["t_s"] for s, g in xid_rows if g.get("index") == i and g["xid_errors"])
            evidence.append(
                _ev(
                    f"GPU {i}: XID events",
                    len(mine),
                    "xid_events",
                    f"codes {', '.join(str(c) for c in sorted(set(mine)))}; first at t = {first:g} s",
                )
            )
    before = False
    for i in ecc_ids:
        counts = t.gpu(i, "ecc_uncorrected_errors")
        growth = max(counts) - counts[0]
        if growth >= THRESHOLDS["ecc_uncorrected_growth"].value:
            evidence.append(_ev(f"GPU {i}: uncorrected ECC errors during the run", growth, "ecc_uncorrected_growth"))
        elif counts[0] >= THRESHOLDS["ecc_uncorrected_growth"].value:
            before = True
            evidence.append(
                _ev(
                    f"GPU {i}: uncorrected ECC errors since the driver loaded",
                    counts[0],
                    "ecc_uncorrected_growth",
                    "all before this run",
                )
            )
    if not evidence:
        return "not held", None, "no XID event and no uncorrected ECC error"
    counter = []
    if codes and codes <= APPLICATION_XIDS:
        counter.append(
            f"XID {', '.join(str(c) for c in sorted(codes))} can come from the application (an illegal memory "
            "access, a page fault) rather than the hardware: check the job's own errors first"
        )
    if before and not codes and len(evidence) == sum("since the driver" in e["metric"] for e in evidence):
        counter.append("the uncorrected ECC errors all predate this run")
    confidence = 0.95 if not counter else 0.6
    return (
        "held",
        Verdict(
            "hardware-errors",
            confidence,
            tuple(evidence),
            tuple(counter),
            "Look the codes up in NVIDIA's XID guide (79: fallen off the bus; 48, 63, 64, 94, 95: memory errors and "
            "row remapping; 74: NVLink); nvidia-smi -q -d ECC,ROW_REMAPPER; drain the node and report the GPU "
            "(its UUID is in the trace's header) before the job is restarted on it.",
        ),
        "",
    )


def _write_rate(s: dict[str, Any]) -> tuple[str, float] | None:
    """The job's own write rate, else the host's disk writes: (which, B/s)."""
    p, h = s.get("proc", {}), s.get("host", {})
    if "write_bytes_per_s" in p:
        return "job", float(p["write_bytes_per_s"])
    if "disk_write_bytes_per_s" in h:
        return "host disk", float(h["disk_write_bytes_per_s"])
    return None


def _checkpoint_stall(t: _Trace) -> tuple[str, Verdict | None, str]:
    rows = [(s, u, w) for s in t.samples if (u := _mean_util(s)) is not None and (w := _write_rate(s)) is not None]
    if not rows:
        return "no data", None, "needs GPU utilization and write rates (the job's or the host's disks)"
    idle_thr, burst = THRESHOLDS["gpu_idle_util_percent"].value, THRESHOLDS["checkpoint_write_bytes_per_s"].value
    stalled = [u < idle_thr and w[1] >= burst for _, u, w in rows]
    episodes: list[int] = []  # the row index where each run of stalled samples starts
    for k, hit in enumerate(stalled):
        if hit and (k == 0 or not stalled[k - 1]):
            episodes.append(k)
    frac = sum(stalled) / len(rows)
    if frac < THRESHOLDS["checkpoint_stall_fraction"].value or len(episodes) < THRESHOLDS["checkpoint_episodes"].value:
        return (
            "not held",
            None,
            f"write bursts with the GPUs idle in {frac:.0%} of samples, {len(episodes)} separate burst(s)",
        )
    hits = [w[1] for (_, _, w), hit in zip(rows, stalled, strict=True) if hit]
    starts = [rows[k][0]["t_s"] for k in episodes]
    period = median(b - a for a, b in pairwise(starts))
    evidence = (
        _ev("share of samples writing in a burst with the GPUs idle", frac, "checkpoint_stall_fraction"),
        _ev("separate bursts", len(episodes), "checkpoint_episodes", f"about every {period:g} s"),
        _ev("median write rate in those samples (B/s)", median(hits), "checkpoint_write_bytes_per_s"),
    )
    counter = []
    if {w[0] for _, _, w in rows} == {"host disk"}:
        counter.append("the writes are the host's disks, not the job's own: another process may be writing")
    return (
        "held",
        Verdict(
            "checkpoint-stall",
            round(min(1.0, 0.5 + frac * 2), 2),
            evidence,
            tuple(counter),
            "Saving checkpoints stops training: save asynchronously (torch.distributed.checkpoint.async_save, "
            "Megatron --async-save), shard the save across ranks, write to local NVMe and copy off in the "
            "background, or save less often (gpuplan train --async-checkpoint prices the difference).",
        ),
        "",
    )


CHECKS: tuple[tuple[str, Check], ...] = (
    ("input-bound", _input_bound),
    ("cpu-launch-bound", _cpu_launch_bound),
    ("host-swapping", _host_swapping),
    ("near-oom", _near_oom),
    ("throttled-power", _throttled_power),
    ("throttled-thermal", _throttle("thermal", THERMAL_BITS, "thermal_throttle_fraction", busy_only=False)),
    ("pcie-downtrained", _pcie_downtrained),
    ("straggler", _straggler),
    ("memory-bound", _memory_bound),
    ("communication-bound", _communication_bound),
    ("hardware-errors", _hardware_errors),
    ("checkpoint-stall", _checkpoint_stall),
)


def _mfu(
    t: _Trace, reference: MfuReference | None, predicted: dict[str, Any] | None, held: list[str]
) -> tuple[dict[str, Any] | None, list[str]]:
    """Observed MFU (the median over the samples with training progress) beside gpuplan's prediction, and what
    the verdicts that held say about the gap. ``reference``: --model's FLOPs per token and peak; without it, the
    live MFU watch wrote (its header's reference)."""
    notes: list[str] = []
    trains = [s["train"] for s in t.samples if isinstance(s.get("train"), dict)]
    header_ref = (t.header.get("train_progress") or {}).get("mfu_reference")
    if reference is None and header_ref is None:
        return None, notes
    out: dict[str, Any] = {}
    if reference is not None:
        out["reference"] = reference.to_dict()
        tps = [x["tokens_per_s"] for x in trains if "tokens_per_s" in x]
        per_gpu = [x["tokens_per_s_per_gpu"] for x in trains if "tokens_per_s_per_gpu" in x]
        if tps:
            out["tokens_per_s"] = median(tps)
            out["observed"] = round(reference.mfu(median(tps)), 4)
        elif per_gpu:
            out["tokens_per_s"] = median(per_gpu) * reference.gpus
            out["observed"] = round(reference.mfu(out["tokens_per_s"]), 4)
    else:
        out["reference"] = header_ref
        live = [x["mfu"] for x in trains if "mfu" in x]
        if live:
            out["observed"] = round(median(live), 4)
    if "observed" in out:
        out["observed_source"] = "median over the samples with training progress (--log-regex)"
    else:
        notes.append(
            "no training throughput in the trace: run local watch with --log-regex (and --tokens-per-step) "
            "to compare the observed MFU with the predicted one"
        )
    if predicted is not None:
        out["predicted"] = predicted
        if "observed" in out:
            out["gap"] = round(predicted["mfu"] - out["observed"], 4)
    if "gap" in out and out["gap"] > 0:
        out["explained_by"] = held or []
        if not held:
            notes.append(
                "the observed MFU is below the prediction and no verdict explains it: check the layout given "
                "against the job's, and the job's own timing (a profiler) for kernels slower than the model assumes"
            )
    return out, notes


def _start(header: dict[str, Any]) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(header["started_at"])).timestamp()
    except (KeyError, ValueError, TypeError):
        return None


def merge_traces(traces: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Several nodes' traces (name, records) as one trace: each GPU labelled ``host:index``, only the samples
    inside the time window every trace covers (wall clock: the header's ``started_at`` + ``t_s``), ``t_s`` from
    that window's start. Each node's samples stay together, in order. Pure; notes say what could not be aligned."""
    notes: list[str] = []
    nodes = []
    seen: set[str] = set()
    for name, records in traces:
        head = next((r for r in records if r.get("record") == "header"), {})
        samples = [r for r in records if r.get("record") == "sample"]
        label = str((head.get("host") or {}).get("hostname") or name)
        if label in seen:
            label = name  # two traces from one host: tell them apart by file
        seen.add(label)
        nodes.append((label, head, samples, _start(head)))
    lo, hi = None, None
    spans = [(st + s[0]["t_s"], st + s[-1]["t_s"]) for _, _, s, st in nodes if st is not None and s]
    if len(spans) == len(nodes) and spans:
        lo, hi = max(a for a, _ in spans), min(b for _, b in spans)
        if lo >= hi:
            notes.append("the traces do not overlap in time: compared over their whole lengths, not aligned")
            lo = hi = None
    else:
        notes.append("a trace has no start time or no samples: compared over whole lengths, not aligned in time")
    merged_gpus = [
        {**g, "index": f"{label}:{g.get('index')}"} for label, head, _, _ in nodes for g in head.get("gpus") or []
    ]
    first = nodes[0][1] if nodes else {}
    header = {
        "record": "header",
        "kind": "local.watch",
        "schema_version": first.get("schema_version"),
        "host": first.get("host") or {},
        "gpus": merged_gpus,
        "nodes": [label for label, *_ in nodes],
    }
    if "train_progress" in first:
        header["train_progress"] = first["train_progress"]
    out: list[dict[str, Any]] = [header]
    kept = 0
    for label, _, samples, st in nodes:
        for s in samples:
            t = s.get("t_s", 0.0)
            if lo is not None and hi is not None and st is not None:
                if not lo <= st + t <= hi:
                    continue
                t = round(st + t - lo, 3)
            rec = {**s, "t_s": t, "node": label}
            if "gpus" in s:
                rec["gpus"] = [{**g, "index": f"{label}:{g.get('index')}"} for g in s["gpus"]]
            out.append(rec)
            kept += 1
    if lo is not None and hi is not None:
        notes.append(f"{len(nodes)} traces aligned on the {hi - lo:.0f} s they all cover ({kept} samples)")
    out.append({"record": "summary", "t_s": round(hi - lo, 3) if lo is not None and hi is not None else None})
    return out, notes


def diagnose(
    records: Sequence[dict[str, Any]],
    *,
    reference: MfuReference | None = None,
    predicted: dict[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> Diagnosis:
    """Verdicts on one trace (its parsed JSONL records), the most confident first. ``reference`` (the model's
    FLOPs per token and the GPUs' peak) and ``predicted`` ({"mfu", "layout", ...}, gpuplan train's figure) add
    the observed-vs-predicted MFU."""
    t = _Trace(records)
    verdicts: list[Verdict] = []
    checks: list[dict[str, str]] = []
    notes = list(notes)
    if not t.samples:
        notes.append("the trace has no samples: the job ended before the first one (lower --interval)")
    for cid, check in CHECKS:
        if not t.samples:
            checks.append({"id": cid, "status": "no data", "reason": "no samples"})
            continue
        status, verdict, reason = check(t)
        checks.append({"id": cid, "status": status, "reason": reason or "condition met"})
        if verdict is not None:
            verdicts.append(verdict)
    verdicts.sort(key=lambda v: -v.confidence)
    if t.samples and "throttled-power" not in [v.id for v in verdicts] and (note := _power_note(t)):
        notes.append(note)
    missing = [c["id"] for c in checks if c["status"] == "no data"]
    if t.samples and not verdicts and len(missing) == len(CHECKS):
        # nothing could be checked (no GPU fields, no host fields): no verdict, rather than a hollow "healthy"
        notes.append("no check had data in the trace (no GPU or host fields): no verdict; see checks")
    elif t.samples and not verdicts:
        verdicts.append(
            Verdict(
                "healthy",
                round(0.9 - 0.5 * len(missing) / len(CHECKS), 2),
                (
                    {
                        "metric": "checks with data that found nothing",
                        "value": len(CHECKS) - len(missing),
                        "threshold": 1,
                        "unit": "checks",
                        "source": JUDGMENT,
                    },
                ),
                tuple(f"{m}: no data in the trace, not checked" for m in missing),
                "Nothing stands out; to go faster, compare with gpuplan train's predicted step time and MFU.",
            )
        )
    mfu, mfu_notes = _mfu(t, reference, predicted, [v.id for v in verdicts if v.id != "healthy"])
    summary = t.summary or {}
    return Diagnosis(
        verdicts=tuple(verdicts),
        checks=tuple(checks),
        samples=len(t.samples),
        duration_s=summary.get("t_s", t.samples[-1]["t_s"] if t.samples else None),
        gpus=len(t.gpu_ids),
        exit_code=summary.get("exit_code"),
        notes=tuple(notes + mfu_notes),
        mfu=mfu,
    )


@dataclass(frozen=True)
class DiagnoseReport:
    """``local diagnose``: the verdicts on one trace, ranked, with every check's status and the thresholds."""

    diagnosis: Diagnosis
    path: str
    warnings: tuple[str, ...] = ()
    kind = "local.diagnose"
    exit_code = 0
    fits = True

    def to_dict(self) -> dict[str, Any]:
        from ..plan.records import envelope

        d = self.diagnosis.to_dict()
        d["trace"] = {"path": self.path, **d["trace"]}
        return envelope(self.kind, **d, warnings=list(self.warnings))
