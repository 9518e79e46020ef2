"""local watch's NVML counters (GPM activity, NVLink throughput, XID events, ECC counts, throttle reasons) through
the real NvmlWatchBackend over a fake ``pynvml`` module installed in sys.modules, as tests/test_local_detect.py
does. The GPM and field-value structures are nvidia-ml-py's own ctypes types, so the code's assignments to them
are checked for real; the values are synthetic (no GPU was used for these tests)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

import gpuplan
from gpuplan.local import sampler
from gpuplan.local.watch import NvmlWatchBackend

pynvml = pytest.importorskip("pynvml")  # a dependency of gpuplan; its ctypes structures are used below


class FakeNVMLError(Exception):
    pass


def _err(reason: str) -> FakeNVMLError:
    return type(f"NVMLError_{reason}", (FakeNVMLError,), {})()


class Handle:
    def __init__(self, index: int):
        self.index = index


H100 = {
    "name": "NVIDIA H100 80GB HBM3",
    "pci_device_id": 0x233010DE,
    "memory_total": 81559 * 2**20,
    "gpm": True,
    # GPM metrics in percent (NVML's unit) and NVLink in MiB/s
    "gpm_values": {2: 92.0, 3: 40.0, 5: 61.0, 10: 35.0, 60: 20_000.0, 61: 21_000.0},
    "nvlink_links": 18,
    "ecc": (0, 0),  # corrected, uncorrected
    "events": True,
}
A100 = {
    **H100,
    "name": "NVIDIA A100-SXM4-80GB",
    "pci_device_id": 0x20B210DE,
    "memory_total": 81920 * 2**20,
    "gpm": False,
    "nvlink_links": 12,
}


class FakeWatchPynvml:
    """nvidia-ml-py's ``pynvml`` as NvmlWatchBackend uses it; any other nvml function raises NotSupported."""

    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_GPM_METRIC_SM_UTIL = 2
    NVML_GPM_METRIC_SM_OCCUPANCY = 3
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10
    NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60
    NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
    nvmlEventTypeXidCriticalError = 0x8
    NVMLError = FakeNVMLError
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(self, devices, *, old_binding=False, events_fail=False):
        self.devices = [dict(d) for d in devices]
        self.calls: list[str] = []
        self.events: list[tuple[int, int]] = []  # (gpu index, XID code) waiting in the event set
        self.kib = [[0, 0] for _ in devices]  # cumulative NVLink rx, tx KiB per GPU (all links)
        self.gpm_fail = False
        self.freed = 0
        self.old_binding, self.events_fail = old_binding, events_fail

    def __getattr__(self, name):
        if name.startswith("nvml") and not self._hidden(name):

            def unsupported(*args):
                raise _err("NotSupported")

            return unsupported
        raise AttributeError(name)

    def _hidden(self, name):
        """What an nvidia-ml-py from before GPM and before the "clocks event" rename lacks."""
        old = object.__getattribute__(self, "__dict__").get("old_binding")
        return bool(old) and (
            name.startswith("nvmlGpm") or name in ("c_nvmlGpmMetricsGet_t", "nvmlDeviceGetCurrentClocksEventReasons")
        )

    def __getattribute__(self, name):
        if name.startswith(("nvml", "c_nvml")) and object.__getattribute__(self, "_hidden")(name):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    # the basics (detect's readings and watch's per-sample queries)
    def nvmlInit(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return "570.124.06"

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return Handle(i)

    def nvmlDeviceGetIndex(self, h):
        return h.index

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(
            busId=f"00000000:{h.index + 0x18:02X}:00.0", pciDeviceId=self.devices[h.index]["pci_device_id"]
        )

    def nvmlDeviceGetMemoryInfo(self, h):
        total = self.devices[h.index]["memory_total"]
        return SimpleNamespace(total=total, used=total // 2, free=total - total // 2)

    def nvmlDeviceGetName(self, h):
        return self.devices[h.index]["name"]

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h.index}"

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=97, memory=40)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self.calls.append("event reasons")
        return 0x4

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        self.calls.append("throttle reasons")
        return 0x4

    # NVLink
    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= 18:
            raise _err("InvalidArgument")
        return 1 if link < self.devices[h.index]["nvlink_links"] else 0

    def nvmlDeviceGetFieldValues(self, h, field_ids):
        self.kib[h.index][0] += 1000 * 1024  # each read: 1000 MiB more each way, spread over the links
        self.kib[h.index][1] += 1000 * 1024
        links = self.devices[h.index]["nvlink_links"]
        out = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for k, (fid, scope) in enumerate(field_ids):
            out[k].fieldId, out[k].scopeId = fid, scope
            out[k].valueType, out[k].nvmlReturn = 3, 0  # unsigned long long, success
            total = self.kib[h.index][0 if fid == self.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX else 1]
            out[k].value.ullVal = total // links
        return out

    # ECC
    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter):
        return self.devices[h.index]["ecc"][error_type]

    # GPM
    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(version=1, isSupportedDevice=int(self.devices[h.index]["gpm"]))

    def nvmlGpmSampleAlloc(self):
        return pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleFree(self, sample):
        self.freed += 1

    def nvmlGpmSampleGet(self, h, sample):
        if self.gpm_fail:
            raise _err("GpuIsLost")
        self._last_gpm_device = h.index
        return sample

    def nvmlGpmMetricsGet(self, mg):
        assert mg.version == 1 and 0 < mg.numMetrics <= len(mg.metrics)
        values = self.devices[self._last_gpm_device]["gpm_values"]
        for i in range(mg.numMetrics):
            m = mg.metrics[i]
            if m.metricId in values:
                m.value, m.nvmlReturn = values[m.metricId], 0
            else:
                m.value, m.nvmlReturn = 0.0, 3  # NotSupported
        return mg

    # XID events
    def nvmlEventSetCreate(self):
        if self.events_fail:
            raise _err("NoPermission")
        return object()

    def nvmlDeviceGetSupportedEventTypes(self, h):
        return 0x8 | 0x1 if self.devices[h.index]["events"] else 0x1

    def nvmlDeviceRegisterEvents(self, h, kinds, event_set):
        self.calls.append(f"register {h.index}")

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        assert timeout_ms == 0  # never blocks the sampling loop
        if not self.events:
            raise _err("Timeout")
        index, code = self.events.pop(0)
        return SimpleNamespace(device=Handle(index), eventType=0x8, eventData=code)

    def nvmlEventSetFree(self, event_set):
        self.calls.append("event set freed")


def _backend(monkeypatch, fake) -> NvmlWatchBackend:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return NvmlWatchBackend()


def test_fake_constants_match_nvidia_ml_py():
    for name in [n for n in vars(FakeWatchPynvml) if n.startswith(("NVML_", "nvmlEventType"))]:
        assert getattr(pynvml, name) == getattr(FakeWatchPynvml, name), name


def test_gpm_activity_nvlink_ecc_and_xid_on_hopper(monkeypatch):
    fake = FakeWatchPynvml([H100, H100])
    b = _backend(monkeypatch, fake)
    counters = b.counters()
    assert counters[0] == {"gpm": "ok", "nvlink": "ok", "xid": "ok", "ecc": "ok"}
    first = b.sample()
    assert "sm_active" not in first[0]  # GPM needs two samples: the first only primes
    assert first[0]["xid_errors"] == [] and first[0]["ecc_uncorrected_errors"] == 0
    fake.events.append((1, 79))
    second = b.sample()
    g0, g1 = second
    assert (g0["sm_active"], g0["sm_occupancy"], g0["tensor_active"], g0["dram_active"]) == (0.92, 0.4, 0.61, 0.35)
    assert all(0 <= g0[k] <= 1 for k in ("sm_active", "tensor_active", "dram_active"))
    assert g0["nvlink_rx_bytes_per_s"] == 20_000 * 2**20 and g0["nvlink_tx_bytes_per_s"] == 21_000 * 2**20  # GPM's
    assert g0["xid_errors"] == [] and g1["xid_errors"] == [79]
    assert b.sample()[1]["xid_errors"] == []  # codes since the previous sample only
    b.close()
    assert fake.freed == 4 and "event set freed" in fake.calls


def test_no_gpm_before_hopper_says_why_and_nvlink_from_field_counters(monkeypatch):
    fake = FakeWatchPynvml([A100])
    b = _backend(monkeypatch, fake)
    assert "Hopper" in b.counters()[0]["gpm"]
    first, second = b.sample()[0], b.sample()[0]
    assert not {"sm_active", "tensor_active", "dram_active"} & (first.keys() | second.keys())  # absent, never 0
    assert "nvlink_rx_bytes_per_s" not in first  # the first read primes the cumulative counters
    assert second["nvlink_rx_bytes_per_s"] > 0 and second["nvlink_tx_bytes_per_s"] > 0


def test_old_binding_without_gpm_api_and_with_only_the_throttle_name(monkeypatch):
    fake = FakeWatchPynvml([H100], old_binding=True)
    b = _backend(monkeypatch, fake)
    assert "no GPM API" in b.counters()[0]["gpm"]
    g = b.sample()[0]
    assert g["throttle_mask"] == 0x4 and "throttle reasons" in fake.calls and "event reasons" not in fake.calls
    assert sampler.reasons_reader(fake) == fake.nvmlDeviceGetCurrentClocksThrottleReasons


def test_one_throttle_reason_lookup_for_watch_and_the_bench_sampler():
    new = SimpleNamespace(nvmlDeviceGetCurrentClocksEventReasons=1, nvmlDeviceGetCurrentClocksThrottleReasons=2)
    assert sampler.reasons_reader(new) == 1  # the current name wins
    assert sampler.reasons_reader(SimpleNamespace(nvmlDeviceGetCurrentClocksThrottleReasons=2)) == 2
    assert sampler.reasons_reader(SimpleNamespace()) is None
    import inspect

    from gpuplan.local import watch

    for module in (watch, sampler):  # neither spells the two names out itself any more
        src = inspect.getsource(module).replace(inspect.getsource(sampler.reasons_reader), "")
        assert "ClocksThrottleReasons" not in src, module.__name__


def test_gpm_failing_mid_run_leaves_the_fields_out(monkeypatch):
    fake = FakeWatchPynvml([H100])
    b = _backend(monkeypatch, fake)
    b.sample()
    assert "sm_active" in b.sample()[0]
    fake.gpm_fail = True
    g = b.sample()[0]
    assert "sm_active" not in g and g["util_percent"] == 97  # the rest of the sample is still read
    fake.gpm_fail = False
    assert "sm_active" not in b.sample()[0]  # primes again after a failure
    assert "sm_active" in b.sample()[0]


def test_xid_events_unavailable_says_why(monkeypatch):
    b = _backend(monkeypatch, FakeWatchPynvml([H100], events_fail=True))
    assert "NoPermission" in b.counters()[0]["xid"]
    assert "xid_errors" not in b.sample()[0]  # not watched: absent, not an empty list
    b2 = _backend(monkeypatch, FakeWatchPynvml([{**H100, "events": False}]))
    assert "not supported" in b2.counters()[0]["xid"]


def test_ecc_off_is_absent(monkeypatch):
    fake = FakeWatchPynvml([H100])
    fake.nvmlDeviceGetTotalEccErrors = lambda *a: (_ for _ in ()).throw(_err("NotSupported"))
    b = _backend(monkeypatch, fake)
    assert "NotSupported" in b.counters()[0]["ecc"]
    assert "ecc_uncorrected_errors" not in b.sample()[0]


def test_watch_end_to_end_with_the_fake_nvml(monkeypatch, tmp_path):
    """The API's default backend (NvmlWatchBackend) over the fake: the header says which counters work, the
    samples carry them, an XID raised mid-run lands in a sample, and diagnose names it."""
    fake = FakeWatchPynvml([H100, A100])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    fake.events.append((1, 48))
    out = tmp_path / "run.jsonl"
    r = gpuplan.local_watch([sys.executable, "-c", "import time; time.sleep(0.5)"], interval="50ms", out=out)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    head, samples = recs[0], recs[1:-1]
    assert r.exit_code == 0 and head["gpu_status"] == "ok"
    assert head["gpus"][0]["counters"]["gpm"] == "ok" and "Hopper" in head["gpus"][1]["counters"]["gpm"]
    assert head["gpus"][0]["catalog_id"] == "h100-sxm-80gb"
    assert head["gpus"][0]["nvlink_bytes_per_s_max"] > 0  # the catalog's NVLink figure, for diagnose
    assert any("sm_active" in s["gpus"][0] for s in samples)
    assert not any("sm_active" in s["gpus"][1] for s in samples)
    assert [c for s in samples for c in s["gpus"][1]["xid_errors"]] == [48]
    assert fake.freed == 2  # watch closed the backend
    d = gpuplan.local_diagnose(out).to_dict()
    hw = next(v for v in d["verdicts"] if v["id"] == "hardware-errors")
    assert "48" in hw["evidence"][0]["note"] and not hw["counter_evidence"]
