"""Clocks, power and throttle reasons sampled while a benchmark runs (NVML), to explain a low result.

A background thread polls every ``interval_s``; ``summary()`` gives min/max SM clock, max power and the
throttle reasons seen (the NVML clocks-event bitmask, named). Without NVML it records nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: nvmlClocksEventReasons bits (NVML API reference, "Clock Event Reasons").
REASONS = {
    0x1: "gpu idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
NOT_A_PROBLEM = {0x1, 0x2, 0x10, 0x100}


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def reasons_reader(nvml: Any) -> Callable[[Any], int] | None:
    """NVML's current clocks-event reasons of a device handle, or None where the binding has neither name.

    The "clocks event" name replaces the deprecated "throttle" one (removed in CUDA 14); the bits are the same.
    The one place both names are looked up (the benchmark sampler here and local watch)."""
    return getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )


class Sampler:
    """Use as a context manager around a benchmark; ``read`` is the seam (index -> (sm_mhz, watts, mask))."""

    def __init__(self, read=None, index: int = 0, interval_s: float = 0.1):
        self._read = read if read is not None else _nvml_reader()
        self.index, self.interval_s = index, interval_s
        self.samples: list[tuple[int, float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Sampler:
        if self._read is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set() and failures < 5:
            try:
                self.samples.append(self._read(self.index))
            except Exception:
                failures += 1  # a transient NVML error should not end the sampling
            self._stop.wait(self.interval_s)

    def summary(self) -> dict | None:
        if not self.samples:
            return None
        clocks = [s[0] for s in self.samples]
        mask = 0
        for s in self.samples:
            mask |= s[2]
        problems = [REASONS[b] for b in REASONS if mask & b and b not in NOT_A_PROBLEM]
        return {
            "samples": len(self.samples),
            "sm_clock_min_mhz": min(clocks),
            "sm_clock_max_mhz": max(clocks),
            "power_max_w": max(s[1] for s in self.samples),
            "throttle_reasons": decode_reasons(mask),
            "throttled": bool(problems),
            "throttled_by": problems,
        }


def _nvml_reader():
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None

    reasons = reasons_reader(pynvml)

    def field(fn, *args, default=0):
        try:
            return fn(*args)
        except Exception:
            return default

    def read(index: int) -> tuple[int, float, int]:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        return (
            field(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
            field(pynvml.nvmlDeviceGetPowerUsage, h) / 1000,
            field(reasons, h) if reasons is not None else 0,
        )

    return read
