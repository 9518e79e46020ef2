"""A DCGM log as a ``local watch`` trace, for ``local diagnose --from dcgm``: a ``dcgmi dmon`` text log, or a
log of DCGM exporter scrapes (``parse_dcgm_exporter``; ``parse_dcgm`` tells them apart).

The log is what ``dcgmi dmon -e FIELD_IDS [-d MS] > gpu.log`` prints (DCGM's command-line monitor;
``SUGGESTED_FIELDS`` below is the field list to ask for). Its format, from DCGM's dcgmi/DeviceMonitor.cpp:

* a header line ``#Entity`` followed by each field's short name (``GRACT SMACT ... POWER TMPTR``), then a
  line ``ID`` followed by the units (``W``, ``C``, or nothing); both are printed again every 14 rounds;
* one line per entity per round: ``GPU 0`` (or ``GPU-I 1``, ``GPU-CI 2`` under MIG; those are skipped) and one
  value per field, ``N/A`` where DCGM had none (left out here, never 0). Ratios are printed with 3 decimals;
* no time stamps: round ``k`` is taken to be at ``k x interval`` (dmon's ``-d``, default 1000 ms: give the
  same ``--interval`` to diagnose). A log piped through ``ts '%Y-%m-%dT%H:%M:%.S'`` (moreutils) carries a
  time stamp at the start of each line; it is then used, and several nodes' logs can be aligned in time.

The short names are matched, not the field ids (the log names only the short names). ``FIELDS`` maps each
to its DCGM field id and symbol and to the trace field of the same meaning; the meanings and units are
DCGM's (dcgmlib/dcgm_fields.h, the field-identifier reference, and the DCGM user guide's profiling-metrics
table). The log has no host or process side: those checks say "no data".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import GpuplanError
from .log_trace import as_int as _int, median_step_s, mib_as_bytes as _mib, trace_records
from .sampler import decode_reasons

#: The ``-e`` list to log with: utilization, the profiling (DCP) activities, PCIe / NVLink bytes, power and
#: its limit, temperature, SM clock and its maximum, memory, clock-event reasons, XID, PCIe link, ECC.
SUGGESTED_FIELDS = (
    "203,1001,1002,1003,1004,1005,1009,1010,1011,1012,155,164,150,100,113,252,250,112,230,237,238,235,236,310,311"
)

#: dmon's default ``-d`` (delay between rounds): 1000 ms (dcgmi dmon --help).
DEFAULT_DELAY_S = 1.0

#: DCGM's printed ratios are in [0, 1]; a value above this is a percent or a different tool's log.
_RATIO_MAX = 1.5


def _ratio(v: str) -> float:
    x = float(v)
    if not 0.0 <= x <= _RATIO_MAX:
        raise ValueError(f"{v} is not a ratio in [0, 1]")
    return min(x, 1.0)


def _mask(v: str) -> int:
    try:
        return int(v, 0)  # dmon prints the bits as an integer; 0x... also read
    except ValueError:
        return int(float(v))  # the exporter may print 4.000000


@dataclass(frozen=True)
class DcgmField:
    """One dmon column: its DCGM field id and symbol, the trace field it fills, and the conversion."""

    field_id: int
    symbol: str
    key: str
    convert: Callable[[str], Any]
    meaning: str


#: dmon short name -> the field (dcgmlib/src/dcgm_fields.cpp gives the short names; dcgm_fields.h the ids).
_TABLE: tuple[tuple[str, DcgmField], ...] = (
    ("GPUTL", DcgmField(203, "DCGM_FI_DEV_GPU_UTIL", "util_percent", _int, "GPU utilization, %")),
    (
        "GRACT",
        DcgmField(
            1001,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "gr_engine_active",
            _ratio,
            "ratio of time the graphics/compute engine is busy",
        ),
    ),
    (
        "SMACT",
        DcgmField(1002, "DCGM_FI_PROF_SM_ACTIVE", "sm_active", _ratio, "ratio of cycles an SM has a warp"),
    ),
    (
        "SMOCC",
        DcgmField(1003, "DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy", _ratio, "resident warps / the maximum, per cycle"),
    ),
    (
        "TENSO",
        DcgmField(
            1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", _ratio, "ratio of cycles a tensor pipe is busy"
        ),
    ),
    (
        "DRAMA",
        DcgmField(
            1005, "DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", _ratio, "ratio of cycles the DRAM interface is busy"
        ),
    ),
    (
        "PCITX",
        DcgmField(1009, "DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes_per_s", _int, "PCIe bytes sent per second"),
    ),
    (
        "PCIRX",
        DcgmField(1010, "DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes_per_s", _int, "PCIe bytes received per second"),
    ),
    (
        "NVLTX",
        DcgmField(1011, "DCGM_FI_PROF_NVLINK_TX_BYTES", "nvlink_tx_bytes_per_s", _int, "NVLink bytes sent per second"),
    ),
    (
        "NVLRX",
        DcgmField(
            1012, "DCGM_FI_PROF_NVLINK_RX_BYTES", "nvlink_rx_bytes_per_s", _int, "NVLink bytes received per second"
        ),
    ),
    ("POWER", DcgmField(155, "DCGM_FI_DEV_POWER_USAGE", "power_w", float, "board power, W")),
    ("POWINST", DcgmField(157, "DCGM_FI_DEV_POWER_USAGE_INSTANT", "power_w", float, "instant board power, W")),
    ("EPLMT", DcgmField(164, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "power_limit_w", float, "enforced limit, W")),
    ("PMLMT", DcgmField(160, "DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_limit_w", float, "power management limit, W")),
    ("TMPTR", DcgmField(150, "DCGM_FI_DEV_GPU_TEMP", "temp_c", _int, "GPU temperature, C")),
    ("SMCLK", DcgmField(100, "DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", _int, "SM clock, MHz")),
    ("SMMAX", DcgmField(113, "DCGM_FI_DEV_MAX_SM_CLOCK", "sm_clock_max_mhz", _int, "maximum SM clock, MHz")),
    ("FBUSD", DcgmField(252, "DCGM_FI_DEV_FB_USED", "mem_used_bytes", _mib, "frame buffer used, MB (MiB)")),
    ("FBTTL", DcgmField(250, "DCGM_FI_DEV_FB_TOTAL", "mem_total_bytes", _mib, "frame buffer total, MB (MiB)")),
    ("FBFRE", DcgmField(251, "DCGM_FI_DEV_FB_FREE", "mem_free_bytes", _mib, "frame buffer free, MB (MiB)")),
    ("FBRSV", DcgmField(253, "DCGM_FI_DEV_FB_RESERVED", "mem_reserved_bytes", _mib, "frame buffer reserved, MiB")),
    (
        "DVCCTR",
        DcgmField(
            112,
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "throttle_mask",
            _mask,
            "clock-event (throttle) reason bits, NVML's",
        ),
    ),
    ("XIDER", DcgmField(230, "DCGM_FI_DEV_XID_ERRORS", "xid_last", _int, "the last XID error's code")),
    ("PCILG", DcgmField(237, "DCGM_FI_DEV_PCIE_LINK_GEN", "pcie_gen", _int, "PCIe link generation")),
    ("PCILW", DcgmField(238, "DCGM_FI_DEV_PCIE_LINK_WIDTH", "pcie_width", _int, "PCIe link width")),
    ("PCIMG", DcgmField(235, "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "pcie_gen_max", _int, "PCIe maximum generation")),
    ("PCIMW", DcgmField(236, "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "pcie_width_max", _int, "PCIe maximum width")),
    (
        "ESVTL",
        DcgmField(
            310, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_corrected_errors", _int, "single-bit (corrected), volatile"
        ),
    ),
    (
        "EDVTL",
        DcgmField(
            311,
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "ecc_uncorrected_errors",
            _int,
            "double-bit (uncorrected), volatile",
        ),
    ),
)
FIELDS: dict[str, DcgmField] = dict(_TABLE)

#: Entity kinds dmon prints (DeviceMonitor.cpp); only whole GPUs become trace GPUs.
_ENTITIES = ("GPU", "GPU-I", "GPU-CI", "vGPU", "Switch", "Link", "CPU", "Core", "ConnectX", "UNKNOWN")
_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?)\s(.*)$")
#: keys used while reading, not written to the trace
_WORKING = ("xid_last", "mem_free_bytes", "mem_reserved_bytes")


def _columns(header: str) -> tuple[list[str], list[int]]:
    """The short names of a ``#Entity`` line and where each column starts."""
    names, starts = [], []
    for m in re.finditer(r"\S+", header):
        if m.group() == "#Entity":
            continue
        names.append(m.group())
        starts.append(m.start())
    return names, starts


def _cells(body: str, names: list[str], starts: list[int]) -> list[str] | None:
    """The value cells of one entity line: split on blanks, or, where a value has blanks, by the header's
    column positions (dmon aligns every line on them)."""
    tokens = body.split()
    if len(tokens) == len(names) + 2:
        return tokens[2:]
    if not starts or len(body) <= starts[-1] or len(body[: starts[0]].split()) != 2:
        return None  # cut off before the last column, or the entity is not "GPU n"
    if any(body[s - 1] != " " for s in starts):
        return None  # a value runs into the next column: not dmon's alignment
    ends = [*starts[1:], None]
    return [body[a:b].strip() for a, b in zip(starts, ends, strict=True)]


def parse_dcgm_dmon(
    text: str, name: str = "log", interval_s: float = DEFAULT_DELAY_S
) -> tuple[list[dict[str, Any]], list[str]]:
    """The trace records (header, samples, summary) of a ``dcgmi dmon`` log, and warnings. ``interval_s``:
    dmon's ``-d`` (seconds between rounds), for a log without time stamps."""
    if not interval_s > 0:
        raise GpuplanError(f"{name}: the interval must be positive")
    names: list[str] | None = None
    starts: list[int] = []
    warnings: list[str] = []
    samples: list[dict[str, Any]] = []
    current: dict[int, dict[str, Any]] = {}
    gpus: dict[int, dict[str, Any]] = {}
    last_xid: dict[int, int] = {}
    skipped_entities: set[str] = set()
    other_lines: list[int] = []
    t0: datetime | None = None
    stamped = False
    t_cur = 0.0
    rounds = 0
    lines = text.splitlines()

    def flush() -> None:
        if current:
            samples.append({"record": "sample", "t_s": t_cur, "gpus": [current[i] for i in sorted(current)]})

    for n, raw in enumerate(lines, 1):
        body = raw.rstrip()
        when: datetime | None = None
        if m := _STAMP.match(body):
            when = datetime.fromisoformat(m.group(1).replace(" ", "T"))
            body = m.group(2)
        word = body.split()[0] if body.split() else ""
        if not word:
            continue
        if word == "#Entity":
            found, positions = _columns(body)
            if names is not None and found != names:
                raise GpuplanError(f"{name}:{n}: the columns change mid-log ({' '.join(found)}); log one dmon run")
            names, starts = found, positions
            continue
        if word == "ID" and names is not None:
            continue  # the units line under the header
        if word not in _ENTITIES or names is None:
            other_lines.append(n)
            continue
        if word != "GPU":
            skipped_entities.add(word)
            continue
        cells = _cells(body, names, starts)
        if cells is None or len(cells) != len(names):
            if n == len(lines):
                warnings.append(f"{name}:{n}: the last line is cut off; skipped")
                continue
            raise GpuplanError(f"{name}:{n}: {len(body.split()) - 2} values for {len(names)} columns")
        try:
            index = int(body.split()[1])
        except ValueError:
            raise GpuplanError(f"{name}:{n}: the GPU id {body.split()[1]!r} is not a number") from None
        if index in current:  # the next round
            flush()
            current = {}
            rounds += 1
        if not current:
            if when is not None:
                stamped = True
                t0 = t0 or when
                t_cur = round((when - t0).total_seconds(), 3)
            else:
                t_cur = round(rounds * interval_s, 3)
        current[index] = _gpu(index, zip(names, cells, strict=True), f"{name}:{n}", last_xid)
        gpus.setdefault(index, {"index": index, "catalog_id": None, "catalog_match": "not matched: a dcgmi log"})
    flush()
    if names is None:
        raise GpuplanError(
            f"{name}: no '#Entity' header line; log with dcgmi dmon -e {SUGGESTED_FIELDS} (keep the header lines)"
        )
    known = [c for c in names if c in FIELDS]
    if not known:
        raise GpuplanError(f"{name}: none of the columns is one diagnose reads ({', '.join(FIELDS)})")
    ignored = [c for c in names if c not in FIELDS]
    if ignored:
        warnings.append(f"{name}: columns not used by diagnose: {', '.join(ignored)}")
    if skipped_entities:
        warnings.append(f"{name}: {', '.join(sorted(skipped_entities))} lines skipped (whole GPUs only)")
    if other_lines:
        first = lines[other_lines[0] - 1].strip()
        warnings.append(f"{name}: {len(other_lines)} line(s) not read, the first ({other_lines[0]}): {first[:80]!r}")
    return _records(samples, gpus, known, t0 if stamped else None, interval_s, {}), warnings


def _gpu(index: int, cells: Any, where: str, last_xid: dict[int, int]) -> dict[str, Any]:
    """One GPU's trace entry from (short name, printed value) pairs: ``N/A`` and unknown columns left out."""
    g: dict[str, Any] = {"index": index}
    for col, cell in cells:
        f = FIELDS.get(col)
        if f is None or not cell or cell.upper() in ("N/A", "NAN"):
            continue
        try:
            value = f.convert(cell)
        except ValueError:
            raise GpuplanError(f"{where}: can't read {col} (field {f.field_id}) {cell!r}") from None
        g.setdefault(f.key, value)  # the first of two columns for one key wins (POWER before POWINST)
    _finish(g, last_xid)
    return g


def _records(
    samples: list[dict[str, Any]],
    gpus: dict[int, dict[str, Any]],
    known: list[str],
    t0: datetime | None,
    interval_s: float,
    host: dict[str, Any],
) -> list[dict[str, Any]]:
    """Header, samples and summary, as watch writes them; ``t0``: the first round's wall-clock time, when
    the log has time stamps (then the interval is the median step between rounds)."""
    extra: dict[str, Any] = {
        "dcgm_fields": {c: {"field_id": FIELDS[c].field_id, "symbol": FIELDS[c].symbol} for c in known},
    }
    records = trace_records(
        samples,
        [{**gpus[i], "counters": _counters(known)} for i in sorted(gpus)],
        source="dcgm",
        started_at=t0,
        timespec="milliseconds",
        interval_s=median_step_s([s["t_s"] for s in samples]) if t0 else interval_s,
        host=host,
        extra=extra,
    )
    if "GPUTL" not in known and "GRACT" in known:
        records[0]["util_source"] = "GRACT (field 1001) x 100: the log has no GPUTL (field 203)"
    return records


#: One metric line of a DCGM exporter's Prometheus text: name, {labels}, value, an optional time stamp (ms).
_METRIC = re.compile(r"^(DCGM_FI_[A-Z0-9_]+)(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
#: exporter metric name -> dmon short name (the same fields; older names of a renamed field too)
_SHORT_OF = {f.symbol: short for short, f in _TABLE} | {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DVCCTR"}


def parse_dcgm_exporter(
    text: str, name: str = "log", interval_s: float = DEFAULT_DELAY_S
) -> tuple[list[dict[str, Any]], list[str]]:
    """The trace records of a log of DCGM exporter scrapes (dcgm-exporter's ``/metrics`` page, Prometheus text
    format, fetched once per interval into one file), and warnings. One GPU is the ``gpu`` label; MIG
    instances (a non-empty ``GPU_I_ID``) are skipped; a scrape starts again when a GPU's metric repeats. A
    sample's trailing time stamp (ms since 1970) is used when present, else scrape k is at k x ``interval_s``."""
    if not interval_s > 0:
        raise GpuplanError(f"{name}: the interval must be positive")
    warnings: list[str] = []
    rounds: list[tuple[float | None, dict[int, list[tuple[str, str]]]]] = []
    current: dict[int, list[tuple[str, str]]] = {}
    seen: dict[int, set[str]] = {}
    stamp: float | None = None
    gpus: dict[int, dict[str, Any]] = {}
    host: dict[str, Any] = {}
    unused: set[str] = set()
    mig = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _METRIC.match(line)
        if m is None:
            continue
        labels = dict(_LABEL.findall(m.group(2) or ""))
        if labels.get("GPU_I_ID"):
            mig += 1
            continue
        try:
            index = int(labels["gpu"])
        except (KeyError, ValueError):
            continue
        short = _SHORT_OF.get(m.group(1))
        if short is None:
            unused.add(m.group(1))
            continue
        if m.group(1) in seen.get(index, set()):  # the next scrape
            rounds.append((stamp, current))
            current, seen, stamp = {}, {}, None
        seen.setdefault(index, set()).add(m.group(1))
        current.setdefault(index, []).append((short, m.group(3)))
        if m.group(4) and stamp is None:
            stamp = int(m.group(4)) / 1000
        if index not in gpus:
            gpus[index] = {"index": index, "catalog_id": None, "catalog_match": "not matched: a DCGM exporter log"}
            for label, key in (("modelName", "name"), ("UUID", "uuid"), ("pci_bus_id", "pci_bus_id")):
                if labels.get(label):
                    gpus[index][key] = labels[label]
        if labels.get("Hostname") and not host:
            host = {"hostname": labels["Hostname"]}
    if current:
        rounds.append((stamp, current))
    if not rounds:
        raise GpuplanError(
            f"{name}: no DCGM_FI_... metric with a gpu label; log the exporter's /metrics page once per interval"
        )
    known = sorted({short for _, r in rounds for cells in r.values() for short, _ in cells}, key=list(FIELDS).index)
    stamped = all(st is not None for st, _ in rounds)
    t0 = datetime.fromtimestamp(rounds[0][0], UTC) if stamped and rounds[0][0] is not None else None
    last_xid: dict[int, int] = {}
    samples = []
    for k, (st, r) in enumerate(rounds):
        t_s = round(st - rounds[0][0], 3) if t0 is not None and st is not None and rounds[0][0] is not None else None
        where = f"{name}: scrape {k + 1}"
        samples.append(
            {
                "record": "sample",
                "t_s": t_s if t_s is not None else round(k * interval_s, 3),
                "gpus": [_gpu(i, r[i], where, last_xid) for i in sorted(r)],
            }
        )
    if unused:
        warnings.append(f"{name}: metrics not used by diagnose: {', '.join(sorted(unused))}")
    if mig:
        warnings.append(f"{name}: {mig} MIG instance values skipped (whole GPUs only)")
    return _records(samples, gpus, known, t0, interval_s, host), warnings


def parse_dcgm(
    text: str, name: str = "log", interval_s: float = DEFAULT_DELAY_S
) -> tuple[list[dict[str, Any]], list[str]]:
    """A DCGM log of either kind: exporter scrapes (lines ``DCGM_FI_...{gpu="0",...} value``) or ``dcgmi dmon``."""
    if re.search(r"^\s*DCGM_FI_[A-Z0-9_]+\{", text, re.MULTILINE):
        return parse_dcgm_exporter(text, name, interval_s)
    return parse_dcgm_dmon(text, name, interval_s)


def _finish(g: dict[str, Any], last_xid: dict[int, int]) -> None:
    """Derived trace fields of one GPU line: utilization from GRACT when GPUTL is absent, the total memory
    from used + free (+ reserved), XID events from the last-XID field, throttle reason names."""
    index = g["index"]
    if "util_percent" not in g and "gr_engine_active" in g:
        g["util_percent"] = round(100 * g["gr_engine_active"], 1)
    if "mem_total_bytes" not in g and "mem_used_bytes" in g and "mem_free_bytes" in g:
        g["mem_total_bytes"] = g["mem_used_bytes"] + g["mem_free_bytes"] + g.get("mem_reserved_bytes", 0)
    if "xid_last" in g:
        # the field holds the code of the latest XID: a change to a non-zero code is a new event (the same code
        # twice in a row is seen once)
        code = g["xid_last"]
        g["xid_errors"] = [code] if code and code != last_xid.get(index, 0) else []
        last_xid[index] = code
    if "throttle_mask" in g:
        g["throttle_reasons"] = decode_reasons(g["throttle_mask"])
    for k in _WORKING:
        g.pop(k, None)


def _counters(known: list[str]) -> dict[str, str]:
    """The header's ``counters``, as watch writes them: ``ok`` or why those fields are absent."""

    def has(*cols: str) -> str:
        if any(c in known for c in cols):
            return "ok"
        ids = ", ".join(str(FIELDS[c].field_id) for c in cols)
        return f"not in the dcgmi dmon log (fields {ids})"

    return {
        "gpm": has("SMACT", "TENSO", "DRAMA"),
        "nvlink": has("NVLTX", "NVLRX"),
        "xid": has("XIDER"),
        "ecc": has("EDVTL", "ESVTL"),
    }


def read_dcgm(path: str, interval_s: float = DEFAULT_DELAY_S) -> tuple[list[dict[str, Any]], list[str]]:
    """``parse_dcgm`` of a file (through the project's one reader of input files: regular, capped)."""
    from pathlib import Path

    from ..catalog.schema import read_file_bytes

    data = read_file_bytes(Path(path), error=GpuplanError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GpuplanError(f"{path}: not UTF-8 text; is this a dcgmi dmon or DCGM exporter log?") from None
    return parse_dcgm(text, path, interval_s)
