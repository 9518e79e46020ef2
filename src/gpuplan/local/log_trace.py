"""What the importers of other tools' GPU logs (``dcgm_import``, ``smi_import``) share: reading a logged number
in the trace's units, and wrapping the samples they read in the header and summary records ``local watch`` writes
(the trace format of docs/watch.md), so that an imported log reads like a watched one."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from statistics import median
from typing import Any

from ..units import MiB
from .sampler import REASONS


def as_int(v: str) -> int:
    """A logged count, percent or MHz (``"87"``, ``"87.0"``) as a whole number."""
    return int(float(v))


def mib_as_bytes(v: str) -> int:
    """A memory size the tools log in MiB (nvidia-smi's ``[MiB]``, DCGM's FB fields) in bytes."""
    return round(float(v) * MiB)


def median_step_s(starts_s: list[float]) -> float | None:
    """The median time between rounds from the rounds' start times (s); None with fewer than two rising ones."""
    steps = [b - a for a, b in pairwise(starts_s) if b > a]
    return median(steps) if steps else None


def trace_records(
    samples: list[dict[str, Any]],
    gpus: list[dict[str, Any]],
    *,
    source: str,
    started_at: datetime | None,
    timespec: str,
    interval_s: float | None,
    host: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Header, samples and summary as ``local watch`` writes them. ``started_at``: the first round's wall-clock
    time when the log has one (written to ``timespec``), ``extra``: source-specific header keys, placed before
    the throttle-reason legend. The summary's end is the last sample's time (0 s with no sample)."""
    header = {
        "record": "header",
        "kind": "local.watch",
        "schema_version": 1,
        "source": source,
        "started_at": started_at.isoformat(timespec=timespec) if started_at else None,
        "interval_s": interval_s,
        "host": host,
        "gpu_status": "ok",
        "gpus": gpus,
        **(extra or {}),
        "throttle_reason_bits": {f"0x{bit:x}": reason for bit, reason in REASONS.items()},
    }
    end_s = samples[-1]["t_s"] if samples else 0.0
    summary = {"record": "summary", "t_s": end_s, "samples": len(samples), "exit_code": None}
    return [header, *samples, summary]
