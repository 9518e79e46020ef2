"""Training progress read from a job's own output, for ``local watch --log-regex`` (the job is not changed).

The regex's named groups say what a matching line holds: ``step`` (the step number), ``step_s`` or
``step_ms`` (the time of one step), ``tokens_per_s`` (the job's throughput, all its GPUs) or
``tokens_per_s_per_gpu``. With ``--tokens-per-step N`` (the global batch in tokens) a step time gives
tokens/s; a regex with only ``step`` gives the step time from when the lines arrive. With the model's
training FLOPs per token and the GPUs' dense peak (``MfuReference``, from the estimate layer through the
API), each sample's ``train`` carries the live MFU: achieved model FLOPs / (GPUs x dense peak).

Numbers may carry thousands separators (``12,345``) and a k / M / G suffix (``12.3k``).
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

#: The named groups a --log-regex may use.
GROUPS = ("step", "step_s", "step_ms", "tokens_per_s", "tokens_per_s_per_gpu")
_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}
_NUMBER = re.compile(r"\s*([-+]?(?:\d[\d,_]*)?\.?\d+(?:[eE][-+]?\d+)?)\s*([kKmMgG]?)\s*$")


@dataclass(frozen=True)
class MfuReference:
    """What turns tokens/s into MFU: the model's training FLOPs per token (PaLM appendix B, estimate/flops.py,
    as ``gpuplan train`` counts them) and the dense peak of one GPU for the precision, times the job's GPUs."""

    model: str
    gpu: str
    gpus: int
    seq_len: int
    precision: str
    flops_per_token: float
    peak_flops_per_s: float  # one GPU
    convention: str = ""

    def mfu(self, tokens_per_s: float) -> float:
        return tokens_per_s * self.flops_per_token / (self.gpus * self.peak_flops_per_s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "seq_len": self.seq_len,
            "precision": self.precision,
            "flops_per_token": self.flops_per_token,
            "peak_flops_per_s_per_gpu": self.peak_flops_per_s,
            "convention": self.convention,
        }


def compile_log_regex(text: str, tokens_per_step: float | None = None) -> re.Pattern[str]:
    """The --log-regex, checked: it compiles, names at least one known group and no unknown one."""
    if not text or not text.strip():
        raise InputError("--log-regex", "the regex is empty")
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise InputError("--log-regex", f"not a regular expression: {e}") from None
    names = set(pattern.groupindex)
    unknown = sorted(names - set(GROUPS))
    if unknown:
        raise InputError(
            "--log-regex",
            f"unknown group name {unknown[0]!r}; name groups {', '.join(GROUPS)}, e.g. (?P<step_s>[0-9.]+)",
        )
    if not names:
        raise InputError(
            "--log-regex",
            "name what a group captures: (?P<step_s>...), (?P<step_ms>...), (?P<tokens_per_s>...) or (?P<step>...)",
        )
    if "step_s" in names and "step_ms" in names:
        raise InputError("--log-regex", "give the step time once: (?P<step_s>...) or (?P<step_ms>...)")
    if tokens_per_step is not None and not names & {"step", "step_s", "step_ms"}:
        raise InputError("--tokens-per-step", "needs a step time or step number in --log-regex (?P<step_s>...)")
    return pattern


def read_number(text: str) -> float | None:
    """A logged number: ``1,234.5``, ``12.3k``, ``2e-3``; None when it is not one (or not finite, or negative)."""
    m = _NUMBER.match(text)
    if not m:
        return None
    try:
        v = float(m.group(1).replace(",", "").replace("_", "")) * _SUFFIX[m.group(2)]
    except ValueError:
        return None
    return v if math.isfinite(v) and v >= 0 else None


class Progress:
    """Lines in (``feed``, from the reader threads), one ``train`` record per sample out (``take``)."""

    def __init__(
        self,
        pattern: re.Pattern[str],
        *,
        tokens_per_step: float | None = None,
        reference: MfuReference | None = None,
    ) -> None:
        self.pattern, self.tokens_per_step, self.reference = pattern, tokens_per_step, reference
        self._lock = threading.Lock()
        self._pending: list[dict[str, float]] = []
        self._last_step: tuple[float, float] | None = None  # (step, time of its line)
        self.matches = 0

    def header(self) -> dict[str, Any]:
        h: dict[str, Any] = {"log_regex": self.pattern.pattern, "tokens_per_step": self.tokens_per_step}
        if self.reference is not None:
            h["mfu_reference"] = self.reference.to_dict()
        return h

    def feed(self, line: str, t: float) -> None:
        m = self.pattern.search(line)
        if m is None:
            return
        got = {k: v for k, raw in m.groupdict().items() if raw is not None and (v := read_number(raw)) is not None}
        if not got:
            return
        rec: dict[str, float] = {}
        if "step_ms" in got:
            rec["step_s"] = got["step_ms"] / 1000
        elif "step_s" in got:
            rec["step_s"] = got["step_s"]
        with self._lock:
            if "step" in got:
                step = got["step"]
                rec["step"] = step
                last = self._last_step
                if "step_s" not in rec and last is not None and step > last[0] and t > last[1]:
                    rec["step_s"] = (t - last[1]) / (step - last[0])  # from the lines' arrival times
                self._last_step = (step, t)
            for k in ("tokens_per_s", "tokens_per_s_per_gpu"):
                if k in got:
                    rec[k] = got[k]
            if not rec:
                return
            self.matches += 1
            self._pending.append(rec)

    def take(self) -> dict[str, Any] | None:
        """The progress since the previous call: last step, mean step time, mean tokens/s, MFU; None if none."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return None
        out: dict[str, Any] = {"matched_lines": len(pending)}
        steps = [r["step"] for r in pending if "step" in r]
        if steps:
            out["step"] = int(steps[-1])
        times = [r["step_s"] for r in pending if "step_s" in r and r["step_s"] > 0]
        if times:
            out["step_s"] = sum(times) / len(times)
        tps = [r["tokens_per_s"] for r in pending if "tokens_per_s" in r]
        per_gpu = [r["tokens_per_s_per_gpu"] for r in pending if "tokens_per_s_per_gpu" in r]
        ref = self.reference
        if tps:
            out["tokens_per_s"] = sum(tps) / len(tps)
        elif self.tokens_per_step is not None and "step_s" in out:
            out["tokens_per_s"] = self.tokens_per_step / out["step_s"]
        if per_gpu:
            out["tokens_per_s_per_gpu"] = sum(per_gpu) / len(per_gpu)
            if "tokens_per_s" not in out and ref is not None:
                out["tokens_per_s"] = out["tokens_per_s_per_gpu"] * ref.gpus
        if ref is not None and "tokens_per_s" in out:
            out["mfu"] = round(ref.mfu(out["tokens_per_s"]), 4)
        for k in ("step_s", "tokens_per_s", "tokens_per_s_per_gpu"):
            if k in out:
                out[k] = float(f"{out[k]:.6g}")
        return out


class LineSplitter:
    """Bytes in, complete lines out: ``\\n`` or ``\\r`` ends a line (a progress bar redraws with ``\\r``); a line
    longer than ``limit`` is cut, so a job that never ends a line cannot grow the buffer without bound."""

    def __init__(self, limit: int = 1 << 16) -> None:
        self._buf = b""
        self._limit = limit

    def feed(self, chunk: bytes) -> list[str]:
        data = self._buf + chunk
        parts = re.split(rb"[\r\n]", data)
        self._buf = parts.pop()
        if len(self._buf) > self._limit:
            parts.append(self._buf)
            self._buf = b""
        return [p.decode("utf-8", "replace") for p in parts if p]

    def flush(self) -> list[str]:
        rest, self._buf = self._buf, b""
        return [rest.decode("utf-8", "replace")] if rest else []
