"""``gpuplan local diagnose``: what a ``local watch`` trace says about the job, as ranked verdicts.

Pure: the trace's records in, verdicts out (reading the file is the API's job). Each check gives a verdict
only when its condition holds; every verdict carries the numbers it rests on (value, threshold, where the
threshold comes from), what speaks against it, and advice. ``healthy`` is given only when no other check holds.
A check whose fields are absent from the trace (no GPU, no iowait off Linux) says "no data", never "fine".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from .detect import BUSY_UTILIZATION_PERCENT

JUDGMENT = "judgment (gpuplan's rule of thumb, not a published figure)"
NVML_REASONS = "NVML API reference, nvmlClocksEventReasons (the clocks-event / throttle reason bits)"


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
    "thermal_throttle_fraction": Threshold(
        0.05, "share of samples", JUDGMENT + "; bits 0x8, 0x20, 0x40: " + NVML_REASONS
    ),
    "pcie_down_fraction": Threshold(
        0.5, "share of busy samples", JUDGMENT + " (an idle link may downshift to save power; a busy one should not)"
    ),
    "straggler_clock_ratio": Threshold(0.93, "of the others' median SM clock", JUDGMENT),
    "straggler_util_gap_percent": Threshold(20, "points below the others' median utilization", JUDGMENT),
}

POWER_BITS = 0x4 | 0x80
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

    def to_dict(self) -> dict[str, Any]:
        return {
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
        self.gpu_ids = sorted({g["index"] for s in self.samples for g in s.get("gpus", []) if "index" in g})

    def host(self, key: str) -> list[float]:
        return [s["host"][key] for s in self.samples if key in s.get("host", {})]

    def gpu(self, index: int, key: str) -> list[Any]:
        return [g[key] for s in self.samples for g in s.get("gpus", []) if g.get("index") == index and key in g]

    def gpu_rows(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(sample, gpu) pairs."""
        return [(s, g) for s in self.samples for g in s.get("gpus", [])]


Check = Callable[[_Trace], "tuple[str, Verdict | None, str]"]  # status, verdict, reason


def _mean_util(s: dict[str, Any]) -> float | None:
    us = [g["util_percent"] for g in s.get("gpus", []) if "util_percent" in g]
    return sum(us) / len(us) if us else None


def _input_bound(t: _Trace) -> tuple[str, Verdict | None, str]:
    idle_thr = THRESHOLDS["gpu_idle_util_percent"].value
    rows = [(s, u) for s in t.samples if (u := _mean_util(s)) is not None]
    if not rows:
        return "no data", None, "no GPU utilization in the trace"
    idle = [s for s, u in rows if u < idle_thr]
    cpu_thr, io_thr = THRESHOLDS["cpu_busy_percent"].value, THRESHOLDS["iowait_percent"].value

    def starved(s: dict[str, Any]) -> bool:
        h, p = s.get("host", {}), s.get("proc", {})
        proc_share = p["cpu_percent"] / t.cores if t.cores and "cpu_percent" in p else None
        return (
            h.get("iowait_percent", 0) >= io_thr
            or h.get("cpu_percent", 0) >= cpu_thr
            or (proc_share is not None and proc_share >= cpu_thr)
        )

    hits = [s for s in idle if starved(s)]
    frac = len(hits) / len(rows)
    if frac < THRESHOLDS["idle_fraction"].value:
        return "not held", None, f"GPU idle with a busy CPU or high iowait in {frac:.0%} of samples"
    iowait = [s["host"]["iowait_percent"] for s in hits if "iowait_percent" in s.get("host", {})]
    cpu = [s["host"]["cpu_percent"] for s in hits if "cpu_percent" in s.get("host", {})]
    evidence = [
        _ev("share of samples with GPU idle and the host CPU busy or iowait high", frac, "idle_fraction"),
        _ev(
            "median GPU utilization in those samples (%)",
            median(_mean_util(s) or 0 for s in hits),
            "gpu_idle_util_percent",
        ),
    ]
    if iowait:
        evidence.append(_ev("median iowait in those samples (%)", median(iowait), "iowait_percent"))
    if cpu:
        evidence.append(_ev("median host CPU in those samples (%)", median(cpu), "cpu_busy_percent"))
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
            "Feed the GPU faster: more DataLoader workers (num_workers), pin_memory, prefetching, pre-decoded or "
            "cached data on local NVMe, lighter CPU augmentation or moving it to the GPU (e.g. DALI).",
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
    return (
        "held",
        Verdict(
            "cpu-launch-bound",
            round(frac, 2),
            (
                _ev("share of samples with one thread saturated and the GPU under 70 %", frac, "launch_fraction"),
                _ev(
                    "median busiest-thread CPU (% of one core)",
                    median(s["proc"]["max_thread_cpu_percent"] for s in hits),
                    "thread_busy_percent",
                ),
            ),
            ("GPU utilization only counts time a kernel runs, not how full the GPU is",),
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
        if kind == "thermal":
            temps = [g["temp_c"] for _, g in hits if "temp_c" in g]
            if temps:
                evidence[0]["note"] = evidence[0].get("note", "") + f"; peak {max(temps)} C"
            advice = (
                "Check cooling: fan curves, airflow, inlet temperature, blocked or failing fans; in a "
                "cluster, report the node."
            )
        else:
            power = [g["power_w"] / g["power_limit_w"] for _, g in hits if g.get("power_limit_w") and "power_w" in g]
            if power:
                evidence[0]["note"] = evidence[0].get("note", "") + f"; median power {median(power):.0%} of the limit"
            advice = (
                "The GPU runs at its power limit: check the limit against the default (gpuplan local detect; "
                "nvidia-smi -q -d POWER); a capped limit (nvidia-smi -pl) or a weak PSU lowers clocks."
            )
        return (
            "held",
            Verdict(f"throttled-{kind}", round(min(1.0, 0.5 + frac / 2), 2), tuple(evidence), tuple(counter), advice),
            "",
        )

    return check


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


def _straggler(t: _Trace) -> tuple[str, Verdict | None, str]:
    if len(t.gpu_ids) < 2:
        return "no data", None, "needs two or more GPUs"
    busy = _busy_rows(t)
    clocks = {i: [g["sm_clock_mhz"] for _, g in busy if g["index"] == i and "sm_clock_mhz" in g] for i in t.gpu_ids}
    utils = {i: t.gpu(i, "util_percent") for i in t.gpu_ids}
    evidence = []
    for i in t.gpu_ids:
        others = [median(v) for j, v in clocks.items() if j != i and v]
        if clocks[i] and others:
            ratio = median(clocks[i]) / median(others)
            if ratio < THRESHOLDS["straggler_clock_ratio"].value:
                evidence.append(_ev(f"GPU {i} median SM clock / the others' median", ratio, "straggler_clock_ratio"))
        other_u = [median(v) for j, v in utils.items() if j != i and v]
        if utils[i] and other_u:
            gap = median(other_u) - median(utils[i])
            if gap >= THRESHOLDS["straggler_util_gap_percent"].value:
                evidence.append(
                    _ev(f"GPU {i} median utilization below the others' (points)", gap, "straggler_util_gap_percent")
                )
    if not any(clocks.values()) and not any(utils.values()):
        return "no data", None, "no per-GPU clocks or utilization"
    if not evidence:
        return "not held", None, "the GPUs' clocks and utilization agree"
    slow = len({e["metric"].split()[1] for e in evidence})
    return (
        "held",
        Verdict(
            "straggler",
            0.8 if slow == 1 else 0.5,
            tuple(evidence),
            (() if slow == 1 else (f"{slow} GPUs differ: an uneven layout rather than one slow GPU",)),
            "In synchronous training every step waits for the slowest GPU: check its cooling and power "
            "(throttle reasons), its PCIe link, and what else runs on it (nvidia-smi); exclude the GPU or node.",
        ),
        "",
    )


CHECKS: tuple[tuple[str, Check], ...] = (
    ("input-bound", _input_bound),
    ("cpu-launch-bound", _cpu_launch_bound),
    ("host-swapping", _host_swapping),
    ("near-oom", _near_oom),
    ("throttled-power", _throttle("power", POWER_BITS, "power_throttle_fraction", busy_only=True)),
    ("throttled-thermal", _throttle("thermal", THERMAL_BITS, "thermal_throttle_fraction", busy_only=False)),
    ("pcie-downtrained", _pcie_downtrained),
    ("straggler", _straggler),
)


def diagnose(records: Sequence[dict[str, Any]]) -> Diagnosis:
    """Verdicts on one trace (its parsed JSONL records), the most confident first."""
    t = _Trace(records)
    verdicts: list[Verdict] = []
    checks: list[dict[str, str]] = []
    notes: list[str] = []
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
    if t.samples and not verdicts:
        missing = [c["id"] for c in checks if c["status"] == "no data"]
        verdicts.append(
            Verdict(
                "healthy",
                round(0.9 - 0.5 * len(missing) / len(CHECKS), 2),
                ({"metric": "checks that held", "value": 0, "threshold": 0, "unit": "checks", "source": JUDGMENT},),
                tuple(f"{m}: no data in the trace, not checked" for m in missing),
                "Nothing stands out; to go faster, compare with gpuplan train's predicted step time and MFU.",
            )
        )
    summary = t.summary or {}
    return Diagnosis(
        verdicts=tuple(verdicts),
        checks=tuple(checks),
        samples=len(t.samples),
        duration_s=summary.get("t_s", t.samples[-1]["t_s"] if t.samples else None),
        gpus=len(t.gpu_ids),
        exit_code=summary.get("exit_code"),
        notes=tuple(notes),
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
