"""An nvidia-smi CSV log as a ``local watch`` trace, for ``local diagnose --from nvidia-smi``.

The log is what ``nvidia-smi --query-gpu=FIELDS --format=csv -l 1`` prints: a header line naming the fields
(with their units, ``utilization.gpu [%]``), then one line per GPU per interval. ``index`` and ``timestamp``
are needed; every other field is optional and maps to the trace field of the same meaning (``FIELDS`` below;
nvidia-smi --help-query-gpu describes them). A value nvidia-smi could not read (``[N/A]``, ``[Not Supported]``)
is left out, never 0. The log has no host or process side: those checks say "no data".

A suggested query line is ``SUGGESTED_QUERY`` (docs/watch.md).
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from typing import Any

from ..errors import GpuplanError
from .log_trace import as_int as _int, median_step_s, mib_as_bytes as _mib, trace_records
from .sampler import decode_reasons

SUGGESTED_QUERY = (
    "timestamp,index,name,uuid,pci.bus_id,utilization.gpu,memory.used,memory.total,power.draw,power.limit,"
    "clocks.sm,clocks.max.sm,temperature.gpu,clocks_event_reasons.active,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max,ecc.errors.corrected.volatile.total,"
    "ecc.errors.uncorrected.volatile.total"
)


def _hex(v: str) -> int:
    return int(v, 16)


#: nvidia-smi field (and its older or newer names) -> (trace field, converter).
FIELDS: dict[str, tuple[str, Any]] = {
    "utilization.gpu": ("util_percent", _int),
    "memory.used": ("mem_used_bytes", _mib),
    "memory.total": ("mem_total_bytes", _mib),
    "power.draw": ("power_w", float),
    "power.draw.instant": ("power_w", float),
    "power.limit": ("power_limit_w", float),
    "enforced.power.limit": ("power_limit_w", float),
    "clocks.sm": ("sm_clock_mhz", _int),
    "clocks.current.sm": ("sm_clock_mhz", _int),
    "clocks.max.sm": ("sm_clock_max_mhz", _int),
    "temperature.gpu": ("temp_c", _int),
    "clocks_event_reasons.active": ("throttle_mask", _hex),
    "clocks_throttle_reasons.active": ("throttle_mask", _hex),
    "pcie.link.gen.current": ("pcie_gen", _int),
    "pcie.link.gen.gpucurrent": ("pcie_gen", _int),
    "pcie.link.gen.max": ("pcie_gen_max", _int),
    "pcie.link.gen.gpumax": ("pcie_gen_max", _int),
    "pcie.link.width.current": ("pcie_width", _int),
    "pcie.link.width.max": ("pcie_width_max", _int),
    "ecc.errors.corrected.volatile.total": ("ecc_corrected_errors", _int),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_errors", _int),
}
_HEADER_FIELDS = {"name": "name", "uuid": "uuid", "pci.bus_id": "pci_bus_id", "gpu_bus_id": "pci_bus_id"}
_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")


def _unread(v: str) -> bool:
    """nvidia-smi's "could not read it": [N/A], [Not Supported], [Unknown Error], [GPU is lost], N/A."""
    return not v or v.startswith("[") or v.upper() == "N/A"


def _number_part(v: str) -> str:
    """``97 %`` -> ``97``, ``250.00 W`` -> ``250.00``, ``0x0000000000000004`` unchanged."""
    return v.split()[0] if v.split() else v


def _time(v: str, where: str) -> datetime:
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(v, fmt)
        except ValueError:
            continue
    raise GpuplanError(f"{where}: can't read the timestamp {v!r} (nvidia-smi writes 2024/01/15 10:23:45.123)")


def parse_nvidia_smi(text: str, name: str = "log") -> tuple[list[dict[str, Any]], list[str]]:
    """The trace records (header, samples, summary) of an nvidia-smi CSV log, and warnings."""
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise GpuplanError(f"{name}: empty; expected nvidia-smi --query-gpu=... --format=csv output")
    columns = [_UNIT.sub("", c).strip().lower() for c in rows[0]]
    if "index" not in columns or "timestamp" not in columns:
        raise GpuplanError(
            f"{name}: the first line names no 'index' and 'timestamp' columns; log with "
            f"nvidia-smi --query-gpu={SUGGESTED_QUERY} --format=csv -l 1 (keep the header: no 'noheader')"
        )
    known = [c for c in columns if c in FIELDS]
    if not known:
        raise GpuplanError(f"{name}: none of the columns is one diagnose reads ({', '.join(sorted(FIELDS))})")
    warnings = []
    ignored = [c for c in columns if c not in FIELDS and c not in _HEADER_FIELDS and c not in ("index", "timestamp")]
    if ignored:
        warnings.append(f"{name}: columns not used by diagnose: {', '.join(ignored)}")
    samples: list[dict[str, Any]] = []
    current: dict[int, dict[str, Any]] = {}
    gpus: dict[int, dict[str, Any]] = {}
    t0: datetime | None = None
    t_cur = 0.0
    header_line = rows[0]

    def flush() -> None:
        if current:
            samples.append({"record": "sample", "t_s": t_cur, "gpus": [current[i] for i in sorted(current)]})

    for n, row in enumerate(rows[1:], 2):
        if row == header_line:  # a log appended to, or -l repeating the header
            continue
        if len(row) != len(columns):
            if n == len(rows):
                warnings.append(f"{name}:{n}: the last line is cut off; skipped")
                continue
            raise GpuplanError(f"{name}:{n}: {len(row)} values for {len(columns)} columns")
        cells = dict(zip(columns, (c.strip() for c in row), strict=True))
        try:
            index = int(cells["index"])
        except ValueError:
            raise GpuplanError(f"{name}:{n}: the index {cells['index']!r} is not a number") from None
        when = _time(cells["timestamp"], f"{name}:{n}")
        if t0 is None:
            t0 = when
        if index in current:  # the next round of GPUs: a new sample
            flush()
            current = {}
        if not current:
            t_cur = round((when - t0).total_seconds(), 3)
        g: dict[str, Any] = {"index": index}
        for col, raw in cells.items():
            if col not in FIELDS or _unread(raw):
                continue
            key, conv = FIELDS[col]
            try:
                g[key] = conv(_number_part(raw))
            except ValueError:
                raise GpuplanError(f"{name}:{n}: can't read {col} {raw!r}") from None
        if "throttle_mask" in g:
            g["throttle_reasons"] = decode_reasons(g["throttle_mask"])
        current[index] = g
        if index not in gpus:
            gpus[index] = {"index": index, "catalog_id": None, "catalog_match": "not matched: an nvidia-smi log"}
            for col, key in _HEADER_FIELDS.items():
                if col in cells and not _unread(cells[col]):
                    gpus[index][key] = cells[col]
    flush()
    records = trace_records(
        samples,
        [gpus[i] for i in sorted(gpus)],
        source="nvidia-smi",
        started_at=t0,
        timespec="seconds",
        interval_s=median_step_s([s["t_s"] for s in samples]),
        host={},
    )
    return records, warnings


def read_nvidia_smi(path: str) -> tuple[list[dict[str, Any]], list[str]]:
    """``parse_nvidia_smi`` of a file (the project's one reader of input files: regular files only, capped)."""
    from pathlib import Path

    from ..catalog.schema import read_file_bytes

    data = read_file_bytes(Path(path), error=GpuplanError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise GpuplanError(f"{path}: not UTF-8 text; is this an nvidia-smi CSV log?") from None
    return parse_nvidia_smi(text, path)
