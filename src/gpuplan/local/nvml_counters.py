"""The NVML counters ``local watch`` reads beyond the basic ones: GPM activity (Hopper and newer), NVLink
throughput, XID events and ECC error counts. Each reader is set up once per GPU and says why it cannot read
("ok" or the reason, for the trace's header); a reading that fails leaves its fields out, never 0.

- GPM (GPU Performance Monitoring, NVML 12.x on Hopper and newer; NVML API reference, "GPM"): the activity of
  the SMs, tensor cores and DRAM between two GPM samples, read as percentages and written as fractions:
  ``sm_active`` (NVML_GPM_METRIC_SM_UTIL: the share of SMs busy, DCGM's SM_ACTIVE), ``sm_occupancy``
  (NVML_GPM_METRIC_SM_OCCUPANCY: resident warps over the maximum), ``tensor_active``
  (NVML_GPM_METRIC_ANY_TENSOR_UTIL) and ``dram_active`` (NVML_GPM_METRIC_DRAM_BW_UTIL: DRAM bandwidth used over
  its maximum); and NVLink rx/tx (NVML_GPM_METRIC_NVLINK_TOTAL_{RX,TX}_PER_SEC, MiB/s).
- NVLink without GPM: the cumulative data counters NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_{RX,TX} (KiB, per link,
  nvmlDeviceGetFieldValues with the link as scopeId), summed over the active links and differenced.
- XID: an event set registered for nvmlEventTypeXidCriticalError, drained (timeout 0) at each sample.
- ECC: the volatile (since the driver loaded) corrected and uncorrected totals, nvmlDeviceGetTotalEccErrors.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

from ..units import KiB, MiB

OK = "ok"

#: (field, NVML constant, scale): GPM metrics in percent, written as fractions in [0, 1].
GPM_FRACTIONS = (
    ("sm_active", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor_active", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_active", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)
#: GPM NVLink throughput, MiB/s (pynvml's comment: "NvLink read bandwidth for all links in MiB/sec").
GPM_NVLINK = (
    ("nvlink_rx_bytes_per_s", "NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC"),
    ("nvlink_tx_bytes_per_s", "NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC"),
)
_GPM_API = (
    "nvmlGpmQueryDeviceSupport",
    "nvmlGpmSampleAlloc",
    "nvmlGpmSampleGet",
    "nvmlGpmMetricsGet",
    "nvmlGpmSampleFree",
    "c_nvmlGpmMetricsGet_t",
    "NVML_GPM_METRICS_GET_VERSION",
)
#: The most XID events taken from the event set in one sample (a flood of one code must not stall sampling).
MAX_EVENTS_PER_SAMPLE = 256


def nvml_reason(e: BaseException) -> str:
    """``NVMLError_NotSupported`` -> ``NotSupported``."""
    return type(e).__name__.replace("NVMLError_", "")


def _value(field: Any) -> float | None:
    """The number in an nvmlFieldValue_t, by its valueType (NVML_VALUE_TYPE_*: double, uint, ulong, ull, sll,
    int, ushort); None where NVML did not answer it."""
    if getattr(field, "nvmlReturn", 1) != 0:
        return None
    attr = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
    t = getattr(field, "valueType", 3)
    v = getattr(field.value, attr[t] if 0 <= t < len(attr) else "ullVal")
    return float(v)


class Gpm:
    """GPM metrics of one GPU between consecutive ``read()`` calls (the first call only primes)."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self._nv, self._h = nv, handle
        self._samples: list[Any] = []
        self._primed = False
        self.status = OK
        missing = [n for n in _GPM_API if not hasattr(nv, n)]
        if missing:
            self.status = "this nvidia-ml-py has no GPM API (upgrade nvidia-ml-py)"
            return
        try:
            support = nv.nvmlGpmQueryDeviceSupport(handle)
        except Exception as e:
            self.status = f"GPM query failed ({nvml_reason(e)}): a driver before R525, or a container that hides it"
            return
        if not getattr(support, "isSupportedDevice", 0):
            self.status = "GPM not supported on this GPU (Hopper and newer) or in this MIG/vGPU setup"
            return
        try:
            self._samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
        except Exception as e:
            self.status = f"GPM sample allocation failed ({nvml_reason(e)})"

    def read(self) -> dict[str, float]:
        if self.status != OK:
            return {}
        nv = self._nv
        prev, cur = self._samples
        try:
            nv.nvmlGpmSampleGet(self._h, cur)
        except Exception:
            self._primed = False
            return {}
        if not self._primed:
            self._primed = True
            self._samples = [cur, prev]
            return {}
        wanted = [(k, getattr(nv, c), True) for k, c in GPM_FRACTIONS if hasattr(nv, c)]
        wanted += [(k, getattr(nv, c), False) for k, c in GPM_NVLINK if hasattr(nv, c)]
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(wanted)
        mg.sample1, mg.sample2 = prev, cur
        for i, (_, metric_id, _) in enumerate(wanted):
            mg.metrics[i].metricId = metric_id
        self._samples = [cur, prev]  # the newest becomes the next interval's start
        try:
            nv.nvmlGpmMetricsGet(mg)
        except Exception:
            return {}
        out: dict[str, float] = {}
        for i, (key, _, percent) in enumerate(wanted):
            m = mg.metrics[i]
            v = float(m.value)
            if m.nvmlReturn != 0 or not math.isfinite(v) or v < 0:
                continue  # e.g. NVLink metrics on a GPU without NVLink: NotSupported
            out[key] = round(min(1.0, v / 100), 4) if percent else v * MiB
        return out

    def close(self) -> None:
        for s in self._samples:
            with contextlib.suppress(Exception):
                self._nv.nvmlGpmSampleFree(s)
        self._samples, self.status = [], "closed"


class NvlinkCounters:
    """NVLink rx/tx bytes/s of one GPU from the cumulative per-link data counters (the first read primes)."""

    def __init__(self, nv: Any, handle: Any, max_links: int = 18) -> None:
        self._nv, self._h = nv, handle
        self._prev: tuple[float, float, float] | None = None
        self._fields: list[tuple[int, int]] = []
        self.status = OK
        rx = getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX", None)
        tx = getattr(nv, "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", None)
        if rx is None or tx is None or not hasattr(nv, "nvmlDeviceGetFieldValues"):
            self.status = "this nvidia-ml-py has no NVLink throughput fields"
            return
        links = []
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", max_links)):
            try:
                state = nv.nvmlDeviceGetNvLinkState(handle, link)
            except Exception:
                continue  # past the GPU's links, or NVLink not supported
            if state == getattr(nv, "NVML_FEATURE_ENABLED", 1):
                links.append(link)
        if not links:
            self.status = "no active NVLink links"
            return
        self._fields = [(rx, link) for link in links] + [(tx, link) for link in links]
        self.links = len(links)

    def read(self) -> dict[str, float]:
        if self.status != OK:
            return {}
        try:
            values = self._nv.nvmlDeviceGetFieldValues(self._h, self._fields)
        except Exception:
            self._prev = None
            return {}
        nums = [_value(v) for v in values]
        n = len(nums) // 2
        if any(x is None for x in nums):
            self._prev = None
            return {}
        now = time.monotonic()
        rx = sum(x for x in nums[:n] if x is not None) * KiB
        tx = sum(x for x in nums[n:] if x is not None) * KiB
        prev, self._prev = self._prev, (now, rx, tx)
        if prev is None or now <= prev[0] or rx < prev[1] or tx < prev[2]:  # first read, or a counter reset
            return {}
        dt = now - prev[0]
        return {"nvlink_rx_bytes_per_s": (rx - prev[1]) / dt, "nvlink_tx_bytes_per_s": (tx - prev[2]) / dt}


class Ecc:
    """Volatile ECC error totals (since the driver loaded) of one GPU."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self._nv, self._h = nv, handle
        self.status = OK
        try:
            self._read_both()
        except Exception as e:
            self.status = f"ECC counts not readable ({nvml_reason(e)}): ECC off, or not on this GPU"

    def _read_both(self) -> dict[str, int]:
        nv = self._nv
        return {
            "ecc_corrected_errors": int(
                nv.nvmlDeviceGetTotalEccErrors(self._h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC)
            ),
            "ecc_uncorrected_errors": int(
                nv.nvmlDeviceGetTotalEccErrors(self._h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
            ),
        }

    def read(self) -> dict[str, int]:
        if self.status != OK:
            return {}
        try:
            return self._read_both()
        except Exception:
            return {}


class XidEvents:
    """One NVML event set for XID critical errors on every GPU that supports them; ``drain()`` returns the XID
    codes seen per GPU index since the previous call (an empty list: watched, none seen)."""

    def __init__(self, nv: Any, handles: dict[int, Any]) -> None:
        self._nv = nv
        self._set: Any = None
        self.status: dict[int, str] = {}
        self.error: str | None = None
        kind = getattr(nv, "nvmlEventTypeXidCriticalError", None)
        if kind is None or not hasattr(nv, "nvmlEventSetCreate"):
            self.status = dict.fromkeys(handles, "this nvidia-ml-py has no event API")
            return
        try:
            self._set = nv.nvmlEventSetCreate()
        except Exception as e:
            self.status = {i: f"NVML event set not created ({nvml_reason(e)})" for i in handles}
            return
        for i, h in handles.items():
            try:
                if not nv.nvmlDeviceGetSupportedEventTypes(h) & kind:
                    self.status[i] = "XID events not supported on this GPU"
                    continue
                nv.nvmlDeviceRegisterEvents(h, kind, self._set)
                self.status[i] = OK
            except Exception as e:
                self.status[i] = f"XID events not registered ({nvml_reason(e)})"
        self._kind = kind

    def watched(self) -> list[int]:
        return [i for i, s in self.status.items() if s == OK]

    def drain(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {i: [] for i in self.watched()}
        if not out:
            return out
        nv = self._nv
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or nv.nvmlEventSetWait
        for _ in range(MAX_EVENTS_PER_SAMPLE):
            try:
                data = wait(self._set, 0)
            except Exception as e:
                if nvml_reason(e) != "Timeout":  # Timeout: no event waiting, the normal end
                    self.error = f"XID events: {nvml_reason(e)}"
                break
            if not data.eventType & self._kind:
                continue
            try:
                index = int(nv.nvmlDeviceGetIndex(data.device))
            except Exception:
                continue
            if index in out:
                out[index].append(int(data.eventData))
        return out

    def close(self) -> None:
        if self._set is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlEventSetFree(self._set)
            self._set = None
