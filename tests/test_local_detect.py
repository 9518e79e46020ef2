"""`gpuplan local detect`: matching, warnings and topology on synthetic NVML readings (the seam), and the
real no-GPU path of this machine. The readings below are built from public facts (PCI ids from pci.ids,
the 81,559 MiB an H100 SXM reports, an 8-GPU HGX board on NVSwitch); they are not a recording: no GPU was
lent to the session that wrote them. Recorded readings belong in docs/measurements/ when a GPU is lent.
"""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import BUNDLED_ACCELERATORS
from gpuplan.local.detect import (
    TOPOLOGY_LEVELS,
    Disk,
    GpuReading,
    Host,
    TorchBackend,
    detect,
    detection_dict,
    dtype_support,
    gpu_notes,
    gpu_warnings,
    match_catalog,
    torch_fallback,
)

ACCS = BUNDLED_ACCELERATORS
HOST = Host(
    "node1",
    "Linux 6.8",
    "Intel Xeon Platinum 8480+",
    112,
    224,
    2 * 1024**4,
    2,
    (Disk("/", "ext4", 2 * 10**12, 10**12),),
    "3.11.7",
)
H100 = GpuReading(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    pci_device_id="0x2330",
    pci_bus_id="00000000:18:00.0",
    memory_total_bytes=81559 * 2**20,
    memory_free_bytes=80000 * 2**20,
    compute_capability=(9, 0),
    sm_clock_mhz=1980,
    sm_clock_max_mhz=1980,
    power_limit_w=700,
    pcie_gen=5,
    pcie_gen_max=5,
    pcie_width=16,
    pcie_width_max=16,
    nvlink_active_links=18,
    nvlink_switch=True,
    mig_enabled=False,
    ecc_uncorrected_errors=0,
    retired_pages=0,
)


class FakeBackend:
    def __init__(self, readings, ok=True, why=""):
        self._r, self._ok, self._why = readings, ok, why

    def available(self):
        return self._ok, self._why

    def driver_version(self):
        return "570.124.06"

    def cuda_version(self):
        return "12.8"

    def readings(self):
        return self._r

    def topology(self, i, j):
        return "SYS"


def test_hgx_h100_board():
    gpus = [replace(H100, index=i, pci_bus_id=f"00000000:{0x18 + i:02x}:00.0") for i in range(8)]
    d = detect(ACCS, FakeBackend(gpus), HOST)
    assert d.gpu_status == "8 NVIDIA GPUs" and all(g.catalog_id == "h100-sxm-80gb" for g in d.gpus)
    assert d.topology[0][0] == "X" and d.topology[0][1] == "NV18" and d.topology[7][3] == "NV18"
    assert not any(g.warnings for g in d.gpus)
    rec = detection_dict(d)
    assert json.loads(json.dumps(rec))["gpus"][0]["catalog_id"] == "h100-sxm-80gb"


def test_unknown_device_is_unknown_not_an_a100():
    odd = replace(H100, name="NVIDIA Future GPU", pci_device_id="0xffff")
    cid, why = match_catalog(odd, ACCS)
    assert cid is None and "not in the catalog" in why
    wrong_size = replace(H100, memory_total_bytes=40 * 2**30)  # an H100 id with half the memory
    cid, why = match_catalog(wrong_size, ACCS)
    assert cid is None and "not its memory" in why


def test_a100_sizes_are_told_apart_by_memory():
    a40 = replace(H100, pci_device_id="0x20b0", memory_total_bytes=40960 * 2**20)
    assert match_catalog(a40, ACCS)[0] == "a100-sxm-40gb"


def test_warnings():
    w = gpu_warnings(
        replace(
            H100,
            pcie_width=8,
            pcie_gen=3,
            utilization_gpu_percent=97,
            ecc_uncorrected_errors=2,
            retired_pages=1,
            mig_enabled=True,
        )
    )
    text = " ".join(w)
    assert "x8 of x16" in text and "Gen 3 of Gen 5 while the GPU is busy" in text and "2 uncorrected ECC" in text
    assert "retired" in text and "MIG" in text


def test_direct_nvlink_peers_and_pcie_topology():
    a = replace(
        H100,
        index=0,
        pci_bus_id="00000000:01:00.0",
        nvlink_switch=False,
        nvlink_active_links=4,
        nvlink_peers=("00000000:02:00.0",) * 4,
    )
    b = replace(
        H100,
        index=1,
        pci_bus_id="00000000:02:00.0",
        nvlink_switch=False,
        nvlink_active_links=4,
        nvlink_peers=("00000000:01:00.0",) * 4,
    )
    c = replace(H100, index=2, pci_bus_id="00000000:03:00.0", nvlink_switch=False, nvlink_active_links=0)
    d = detect(ACCS, FakeBackend([a, b, c]), HOST)
    assert d.topology[0][1] == "NV4" and d.topology[1][0] == "NV4" and d.topology[0][2] == "SYS"


def test_no_driver_still_reports_the_host():
    d = detect(ACCS, FakeBackend([], ok=False, why="no NVIDIA driver found (LibraryNotFound)"), HOST)
    assert d.gpus == () and "no NVIDIA driver" in d.gpu_status and d.host.cores_logical == 224


def test_cli_on_this_machine(run):
    """CI has no GPU: the real backend must say so and still describe the host (exit 0)."""
    code, out, err = run("local", "detect", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["kind"] == "local.detect" and rec["host"]["cores_logical"] >= 1 and rec["host"]["memory_bytes"] > 0
    if not rec["gpus"]:
        assert rec["gpu_status"]
    code, out, _ = run("local", "detect")
    assert code == 0 and "memory" in out


@pytest.mark.gpu
def test_detect_on_a_real_gpu(run):
    pytest.importorskip("pynvml")
    from gpuplan.local.detect import PynvmlBackend

    if not PynvmlBackend().available()[0]:
        pytest.skip("no NVIDIA GPU or driver here")
    rec = json.loads(run("local", "detect", "--json")[1])
    assert rec["gpus"] and all(g["memory_total_bytes"] > 0 for g in rec["gpus"])


def test_every_nvml_name_used_exists_in_nvidia_ml_py():
    """The real backend is not exercised without a GPU, so check its API names against pynvml itself."""
    import re
    from pathlib import Path

    pynvml = pytest.importorskip("pynvml")
    src = Path(__file__).resolve().parent.parent / "src" / "gpuplan" / "local"
    names = set()
    for f in ("detect.py", "sampler.py"):
        names |= set(re.findall(r"\b(?:nv|pynvml)\.(nvml\w+|NVML_\w+)", (src / f).read_text()))
    assert len(names) > 15
    missing = sorted(n for n in names if not hasattr(pynvml, n))
    assert not missing, missing


def test_a_gpu_nvml_cannot_read_is_reported_not_fatal():
    class HalfBroken(FakeBackend):
        errors = ("GPU 1: NVML could not read it (GpuIsLost)",)

    d = detect(ACCS, HalfBroken([H100]), HOST)
    assert len(d.gpus) == 1 and "GpuIsLost" in d.notes[0]


def test_remapped_rows_warnings():
    assert "needs service" in " ".join(gpu_warnings(replace(H100, remapped_rows_failed=True)))
    assert "reset the GPU" in " ".join(gpu_warnings(replace(H100, remapped_rows_pending=True)))


# ------------------------------------------------------------------ compute capability -> dtypes


@pytest.mark.parametrize(
    "cc, bf16, fp8",
    [
        ((7, 0), False, False),  # V100: FP16 tensor cores only
        ((7, 5), False, False),  # T4
        ((8, 0), True, False),  # A100: BF16, no FP8
        ((8, 6), True, False),  # A10, RTX 30xx
        ((8, 9), True, True),  # L4, L40S, RTX 40xx (Ada): FP8
        ((9, 0), True, True),  # H100, H200
        ((10, 0), True, True),  # B200
        ((12, 0), True, True),  # RTX 50xx
    ],
)
def test_bf16_and_fp8_support_follow_compute_capability(cc, bf16, fp8):
    assert dtype_support(cc) == {"bf16": bf16, "fp8": fp8}


def test_dtype_support_is_unknown_without_a_compute_capability_or_for_rocm():
    assert dtype_support(None) == {"bf16": None, "fp8": None}
    assert dtype_support((9, 4), vendor="amd") == {"bf16": None, "fp8": None}  # gfx942 is not sm_94


def test_detect_reports_dtype_support_in_json_and_table():
    v100 = replace(
        H100,
        index=1,
        pci_bus_id="00000000:19:00.0",
        name="Tesla V100-SXM2-32GB",
        pci_device_id="0x1db5",
        memory_total_bytes=32510 * 2**20,
        compute_capability=(7, 0),
        nvlink_switch=False,
    )
    rec = detection_dict(detect(ACCS, FakeBackend([H100, v100]), HOST))
    assert [(g["supports_bf16"], g["supports_fp8"]) for g in rec["gpus"]] == [(True, True), (False, False)]
    header, rows = _table_rows(_render(rec), "catalog id")
    col = header.index("bf16")
    assert rows[0][col : col + 2] == ["yes", "yes"] and rows[1][col : col + 2] == ["no", "no"]


# ------------------------------------------------------------------------------------ rendering


def _render(rec: dict) -> str:
    from rich.console import Console

    from gpuplan.render import tables

    console = Console(width=240, record=True, file=io.StringIO())
    console.print(tables.detect_report(rec))
    return console.export_text()


def _table_rows(text: str, header_word: str) -> tuple[list[str], list[list[str]]]:
    """Split the rendered table whose header holds ``header_word`` into cells (two or more spaces apart)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if header_word in line)
    split = lambda line: [c for c in re.split(r"\s{2,}", line.strip()) if c]  # noqa: E731
    rows = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        rows.append(split(line))
    return split(lines[start]), rows


def test_table_prints_question_marks_for_unknown_pcie_fields():
    odd = replace(H100, pcie_gen=4, pcie_gen_max=None, pcie_width=None, pcie_width_max=None)
    text = _render(detection_dict(detect(ACCS, FakeBackend([odd]), HOST)))
    assert "Gen4/? x?/?" in text and "None" not in text
    none = replace(H100, pcie_gen=None, pcie_gen_max=None, pcie_width=None, pcie_width_max=None)
    header, rows = _table_rows(_render(detection_dict(detect(ACCS, FakeBackend([none]), HOST))), "catalog id")
    assert rows[0][header.index("PCIe")] == "?"


# ------------------------------------------------------------------ topology with a missing GPU


class RecordingBackend(FakeBackend):
    """Answers topology by NVML index from a table, and records what it was asked."""

    def __init__(self, readings, levels):
        super().__init__(readings)
        self.levels, self.asked = levels, []

    def topology(self, i, j):
        self.asked.append((i, j))
        return self.levels[frozenset((i, j))]


def test_topology_uses_nvml_indices_when_a_gpu_is_missing():
    """Regression: readings for NVML indices 0, 2 and 3 only (GPU 1 unreadable). NVLink peers and the PCIe
    levels must be looked up by NVML index, not by position in the list, and the matrix must be symmetric."""
    bus = {i: f"00000000:{0x18 + i:02x}:00.0" for i in range(4)}
    g0 = replace(
        H100, index=0, pci_bus_id=bus[0], nvlink_switch=False, nvlink_active_links=4, nvlink_peers=(bus[1],) * 4
    )
    g2 = replace(
        H100, index=2, pci_bus_id=bus[2], nvlink_switch=False, nvlink_active_links=4, nvlink_peers=(bus[3],) * 4
    )
    g3 = replace(
        H100, index=3, pci_bus_id=bus[3], nvlink_switch=False, nvlink_active_links=4, nvlink_peers=(bus[2],) * 4
    )
    backend = RecordingBackend([g0, g2, g3], {frozenset((0, 2)): "NODE", frozenset((0, 3)): "SYS"})
    d = detect(ACCS, backend, HOST)
    assert d.topology_gpus == (0, 2, 3)
    assert d.topology == (("X", "NODE", "SYS"), ("NODE", "X", "NV4"), ("SYS", "NV4", "X"))
    assert all(d.topology[i][j] == d.topology[j][i] for i in range(3) for j in range(3))
    assert set(backend.asked) == {(0, 2), (2, 0), (0, 3), (3, 0)}
    rec = detection_dict(d)
    assert rec["topology_gpus"] == [0, 2, 3]
    header, rows = _table_rows(_render(rec), "GPU0")
    assert header == ["GPU0", "GPU2", "GPU3"] and [r[0] for r in rows] == ["GPU0", "GPU2", "GPU3"]


# ---------------------------------------------------------------------- power cap and PCIe gen


def test_low_power_cap_warns_against_the_default_limit_or_the_catalog_tdp():
    capped = replace(H100, power_limit_w=500, power_default_limit_w=700)
    assert "power capped at 500 W, 71% of its default limit (700 W)" in " ".join(gpu_warnings(capped))
    assert not gpu_warnings(replace(H100, power_limit_w=650, power_default_limit_w=700))  # 93 %: fine
    # no NVML default limit: the catalog TDP (h100-sxm-80gb: 700 W) is the reference
    d = detect(ACCS, FakeBackend([replace(H100, power_limit_w=400, power_default_limit_w=None)]), HOST)
    assert "57% of the catalog TDP (700 W)" in " ".join(d.gpus[0].warnings)
    assert not gpu_warnings(replace(H100, power_limit_w=400, power_default_limit_w=None))  # nothing to compare


def test_idle_pcie_generation_is_a_note_not_a_warning_but_width_always_warns():
    idle = replace(H100, pcie_gen=1, utilization_gpu_percent=0)
    assert not gpu_warnings(idle)
    assert "idle links downshift" in " ".join(gpu_notes(idle))
    unknown = replace(H100, pcie_gen=1, utilization_gpu_percent=None)
    assert not gpu_warnings(unknown) and "utilization unknown" in gpu_notes(unknown)[0]
    busy = replace(H100, pcie_gen=3, utilization_gpu_percent=98)
    assert "Gen 3 of Gen 5 while the GPU is busy (98 % utilized)" in " ".join(gpu_warnings(busy))
    assert not gpu_notes(busy)
    narrow_idle = replace(H100, pcie_width=8, utilization_gpu_percent=0)
    assert "x8 of x16" in " ".join(gpu_warnings(narrow_idle))


def test_table_shows_notes_and_warnings():
    rec = detection_dict(
        detect(
            ACCS,
            FakeBackend(
                [replace(H100, pcie_gen=1, utilization_gpu_percent=0, power_limit_w=350, power_default_limit_w=700)]
            ),
            HOST,
        )
    )
    assert rec["gpus"][0]["gpu_notes"] and rec["gpus"][0]["warnings"]
    text = _render(rec)
    assert "idle links downshift" in text and "power capped at 350 W" in text


# --------------------------------------------------------------------------------- catalog ids


def test_h100_nvl_and_gh200_are_matched_by_pci_id():
    # memory sizes: synthetic, near what the driver reports for these boards (94 GB and 96 GB HBM3)
    nvl = replace(H100, name="NVIDIA H100 NVL", pci_device_id="0x2321", memory_total_bytes=95830 * 2**20)
    gh200 = replace(H100, name="NVIDIA GH200 480GB", pci_device_id="0x2342", memory_total_bytes=97871 * 2**20)
    assert match_catalog(nvl, ACCS)[0] == "h100-nvl-94gb"
    assert match_catalog(gh200, ACCS)[0] == "gh200"


# ------------------------------------------------------------- the real PynvmlBackend, fake pynvml


NVML_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "nvml" / "hgx_h100_sxm_8gpu_synthetic.json"


class FakeNVMLError(Exception):
    """Stands for pynvml.NVMLError; subclasses are named NVMLError_<Reason> as in nvidia-ml-py."""


def _nvml_error(reason: str) -> type[FakeNVMLError]:
    return type(f"NVMLError_{reason}", (FakeNVMLError,), {})


class FakeHandle:
    def __init__(self, index: int):
        self.index = index


class FakePynvml:
    """A stand-in for nvidia-ml-py's ``pynvml`` module with exactly the functions detect.py calls, returning
    what nvidia-ml-py returns (str for names/versions/UUIDs, ints, ctypes-like structures with the same
    attribute names, lists/tuples), and raising NVMLError_<Reason> where NVML fails. Readings come from a
    JSON fixture (synthetic: see its _comment). ``calls`` records every function used."""

    # constants, as in nvidia-ml-py (checked against it in test_fake_pynvml_constants_match_nvidia_ml_py)
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_CLOCK_SM = 1
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVMLError = FakeNVMLError
    HARDWARE_LINKS = 18  # NVLink links an H100 has; NVML answers InvalidArgument beyond them

    def __init__(
        self,
        fixture: dict,
        *,
        init_error: str | None = None,
        lost: tuple[int, ...] = (),
        overrides: dict[int, dict] | None = None,
    ):
        self.fx, self.init_error, self.lost = fixture, init_error, set(lost)
        self.devices = [
            {**fixture["device_defaults"], **d, **(overrides or {}).get(d["index"], {})} for d in fixture["devices"]
        ]
        self.calls: set[str] = set()

    def __getattribute__(self, name):
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").add(name)
        return object.__getattribute__(self, name)

    def _v(self, h: FakeHandle, key: str):
        v = self.devices[h.index][key]
        if isinstance(v, dict) and "nvml_error" in v:
            raise _nvml_error(v["nvml_error"])()
        return v

    def nvmlInit(self):
        if self.init_error:
            raise _nvml_error(self.init_error)()

    def nvmlSystemGetDriverVersion(self):
        return self.fx["system"]["driver_version"]

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.fx["system"]["cuda_driver_version"]

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < len(self.devices):
            raise _nvml_error("InvalidArgument")()
        if i in self.lost:
            raise _nvml_error("GpuIsLost")()
        return FakeHandle(i)

    def nvmlDeviceGetPciInfo(self, h):
        bus_id = self._v(h, "bus_id")
        return SimpleNamespace(
            busId=bus_id,
            pciDeviceId=int(self._v(h, "pci_device_id"), 16),
            domain=int(bus_id[:8], 16),
            bus=int(bus_id[9:11], 16),
            device=int(bus_id[12:14], 16),
        )

    def nvmlDeviceGetMemoryInfo(self, h):
        total, used = self._v(h, "memory_total_bytes"), self._v(h, "memory_used_bytes")
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetName(self, h):
        return self._v(h, "name")

    def nvmlDeviceGetUUID(self, h):
        return self._v(h, "uuid")

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return tuple(self._v(h, "cuda_compute_capability"))

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= self.HARDWARE_LINKS:
            raise _nvml_error("InvalidArgument")()
        return 1 if link < self._v(h, "nvlink_links_active") else 0

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        kind = self._v(h, "nvlink_remote_device_type")
        return self.NVML_NVLINK_DEVICE_TYPE_SWITCH if kind == "switch" else self.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        peer = self.devices[self._v(h, "nvlink_peer")]
        return SimpleNamespace(busId=peer["bus_id"], pciDeviceId=int(peer["pci_device_id"], 16))

    def nvmlDeviceGetMigMode(self, h):
        return list(self._v(h, "mig_mode"))

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._v(h, "enforced_power_limit_mw")

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return self._v(h, "power_default_limit_mw")

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self._v(h, "utilization_gpu_percent"), memory=0)

    def nvmlDeviceGetRetiredPages(self, h, cause):
        return list(self._v(h, "retired_pages_double_bit"))

    def nvmlDeviceGetRemappedRows(self, h):
        return tuple(self._v(h, "remapped_rows"))

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._v(h, "clock_sm_mhz")

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self._v(h, "max_clock_sm_mhz")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self._v(h, "pcie_link_gen")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self._v(h, "pcie_link_gen_max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._v(h, "pcie_link_width")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self._v(h, "pcie_link_width_max")

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter_type):
        return self._v(h, "ecc_uncorrected_volatile")

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self.fx["topology_common_ancestor"][a.index][b.index]


@pytest.fixture
def nvml_fixture() -> dict:
    return json.loads(NVML_FIXTURE.read_text())


def _install(monkeypatch, fake) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake)


def _no_fallback():
    pytest.fail("the torch fallback must not run (nor import torch) when NVML works")


def test_nvml_fixture_is_labelled_synthetic(nvml_fixture):
    assert "SYNTHETIC" in nvml_fixture["_comment"] and "not recorded" in nvml_fixture["_comment"].lower()
    assert "real GPU" in nvml_fixture["_comment"]


def test_real_backend_on_a_synthetic_hgx_h100_node(monkeypatch, nvml_fixture):
    fake = FakePynvml(nvml_fixture)
    _install(monkeypatch, fake)
    d = detect(ACCS, host=HOST, fallback=_no_fallback)
    assert d.gpu_status == "8 NVIDIA GPUs" and d.driver_version == "570.124.06" and d.cuda_version == "12.8"
    assert [g.catalog_id for g in d.gpus] == ["h100-sxm-80gb"] * 8
    r = d.gpus[0].reading
    assert (r.pci_device_id, r.pci_bus_id, r.memory_total_bytes) == ("0x2330", "00000000:18:00.0", 85520809984)
    assert (r.compute_capability, r.sm_clock_max_mhz, r.power_limit_w, r.power_default_limit_w) == (
        (9, 0),
        1980,
        700,
        700,
    )
    assert (r.pcie_gen, r.pcie_gen_max, r.pcie_width, r.pcie_width_max) == (5, 5, 16, 16)
    assert r.nvlink_active_links == 18 and r.nvlink_switch and r.nvlink_peers == ()
    assert r.retired_pages is None and r.remapped_rows_pending is False and r.mig_enabled is False
    assert r.ecc_uncorrected_errors == 0 and r.uuid.startswith("GPU-") and r.source == "nvml"
    assert all(g.supports_bf16 and g.supports_fp8 and not g.warnings and not g.notes for g in d.gpus)
    assert d.topology_gpus == tuple(range(8))
    assert all(d.topology[i][j] == ("X" if i == j else "NV18") for i in range(8) for j in range(8))
    rec = json.loads(json.dumps(detection_dict(d)))
    assert rec["driver_version"] == "570.124.06" and rec["cuda_version"] == "12.8"
    text = _render(rec)
    for fact in (
        "8 NVIDIA GPUs",
        "driver 570.124.06, CUDA 12.8",
        "NVIDIA H100 80GB HBM3",
        "h100-sxm-80gb",
        "79.6",
        "9.0",
        "1980/1980",
        "700",
        "Gen5/5 x16/16",
        "NV18",
        "GPU7",
        "PCI device id 0x2330 and 79.6 GiB",
    ):
        assert fact in text, fact
    header, rows = _table_rows(text, "catalog id")
    assert len(rows) == 8 and all(row[header.index("NVLink")] == "18" for row in rows)
    assert "None" not in text


def test_fake_pynvml_offers_exactly_the_functions_detect_calls(monkeypatch, nvml_fixture):
    """The fake must not let detect.py call something it lacks (nor carry functions nobody calls)."""
    src = (Path(__file__).resolve().parent.parent / "src" / "gpuplan" / "local" / "detect.py").read_text()
    used = set(re.findall(r"\b(?:nv|_nvml|pynvml)\.(nvml\w+)", src))
    offered = {n for n in dir(FakePynvml) if n.startswith("nvml")}
    assert used | {"nvmlInit"} == offered
    fake = FakePynvml(nvml_fixture, overrides={0: {"nvlink_remote_device_type": "gpu", "nvlink_peer": 1}})
    _install(monkeypatch, fake)
    detect(ACCS, host=HOST, fallback=_no_fallback)
    fake.nvmlDeviceGetTopologyCommonAncestor(FakeHandle(0), FakeHandle(1))  # asked only without NVLink
    assert fake.calls == offered


def test_fake_pynvml_constants_match_nvidia_ml_py():
    pynvml = pytest.importorskip("pynvml")
    for name in [n for n in vars(FakePynvml) if n.startswith("NVML_")]:
        assert getattr(pynvml, name) == getattr(FakePynvml, name), name


def test_real_backend_with_a_lost_gpu_and_direct_links(monkeypatch, nvml_fixture):
    """GPUs in NVLink pairs (0-1, 2-3, ...) and NVML index 1 lost: the matrix is labelled 0, 2, 3, ... and GPU 0
    (whose peer is gone) gets the PCIe level of the right NVML pair."""
    pairs = {i: {"nvlink_remote_device_type": "gpu", "nvlink_peer": i ^ 1} for i in range(8)}
    fake = FakePynvml(nvml_fixture, lost=(1,), overrides=pairs)
    _install(monkeypatch, fake)
    d = detect(ACCS, host=HOST, fallback=_no_fallback)
    assert d.topology_gpus == (0, 2, 3, 4, 5, 6, 7) and len(d.gpus) == 7
    assert "GPU 1: NVML could not read it (GpuIsLost)" in d.notes
    pos = {idx: k for k, idx in enumerate(d.topology_gpus)}
    levels = nvml_fixture["topology_common_ancestor"]
    for a in d.topology_gpus:
        for b in d.topology_gpus:
            got = d.topology[pos[a]][pos[b]]
            want = "X" if a == b else "NV18" if a ^ 1 == b else TOPOLOGY_LEVELS[levels[a][b]]
            assert got == want, (a, b, got, want)
    header, _rows = _table_rows(_render(detection_dict(d)), "GPU0")
    assert header == ["GPU0", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6", "GPU7"]


def test_real_backend_unknown_pci_id_is_unknown_never_an_a100(monkeypatch, nvml_fixture):
    assert not any("0x20ff" in a.pci_device_ids for a in ACCS)
    odd = {i: {"name": "NVIDIA A100-SXM4-80GB", "pci_device_id": "0x20FF10DE"} for i in range(8)}
    _install(monkeypatch, FakePynvml(nvml_fixture, overrides=odd))
    d = detect(ACCS, host=HOST, fallback=_no_fallback)
    assert all(g.catalog_id is None and "0x20ff is not in the catalog" in g.match for g in d.gpus)
    header, rows = _table_rows(_render(detection_dict(d)), "catalog id")
    assert all(row[header.index("catalog id")] == "unknown" for row in rows)


def test_real_backend_power_cap_and_idle_link(monkeypatch, nvml_fixture):
    over = {
        0: {"enforced_power_limit_mw": 450000},
        1: {"pcie_link_gen": 1, "utilization_gpu_percent": 0},
        2: {"pcie_link_gen": 3, "utilization_gpu_percent": 95},
    }
    _install(monkeypatch, FakePynvml(nvml_fixture, overrides=over))
    g = detect(ACCS, host=HOST, fallback=_no_fallback).gpus
    assert "power capped at 450 W, 64% of its default limit (700 W)" in g[0].warnings[0]
    assert not g[1].warnings and "idle links downshift" in g[1].notes[0]
    assert "Gen 3 of Gen 5 while the GPU is busy" in g[2].warnings[0]


def test_nvml_works_so_torch_is_not_asked(monkeypatch, nvml_fixture):
    """With the default fallback: torch_fallback (which imports torch) must not run when NVML works."""
    from gpuplan.local import detect as detect_mod

    _install(monkeypatch, FakePynvml(nvml_fixture))
    monkeypatch.setattr(detect_mod, "torch_fallback", _no_fallback)
    assert len(detect_mod.detect(ACCS, host=HOST).gpus) == 8


# ------------------------------------------------------------------------- torch fallback (fake)


class FakeTorch:
    """A torch-like object: ``cuda.is_available/device_count/get_device_properties`` and ``version``."""

    def __init__(self, props, available=True, hip=None):
        self.__version__ = "2.13.0"
        self.version = SimpleNamespace(cuda=None if hip else "12.8", hip=hip)
        self.cuda = SimpleNamespace(
            is_available=lambda: available, device_count=lambda: len(props), get_device_properties=lambda i: props[i]
        )


def _h100_props(bus: int) -> SimpleNamespace:
    # synthetic, shaped like torch 2.x _CudaDeviceProperties on an H100 SXM (81559 MiB, 132 SMs, sm_90)
    return SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        total_memory=85520809984,
        major=9,
        minor=0,
        multi_processor_count=132,
        uuid=f"5a47e71c-0000-4000-8000-0000000000{bus:02x}",
        pci_domain_id=0,
        pci_bus_id=bus,
        pci_device_id=0,
    )


def _sysfs(tmp_path, buses, product="0x2330"):
    for bus in buses:
        dev = tmp_path / f"0000:{bus:02x}:00.0"
        dev.mkdir()
        (dev / "device").write_text(product + "\n")
    return tmp_path


def test_torch_fallback_when_nvml_init_fails(monkeypatch, nvml_fixture, tmp_path):
    _install(monkeypatch, FakePynvml(nvml_fixture, init_error="DriverNotLoaded"))
    torch = FakeTorch([_h100_props(0x18), _h100_props(0x2A)])
    d = detect(ACCS, host=HOST, fallback=lambda: TorchBackend(torch, sysfs=_sysfs(tmp_path, (0x18, 0x2A))))
    assert d.gpu_status == "2 NVIDIA GPUs (through torch; NVML unavailable)"
    assert [g.catalog_id for g in d.gpus] == ["h100-sxm-80gb"] * 2
    r = d.gpus[1].reading
    assert (r.source, r.pci_device_id, r.pci_bus_id, r.multiprocessor_count) == (
        "torch",
        "0x2330",
        "00000000:2A:00.0",
        132,
    )
    assert (
        r.pcie_gen is None and r.sm_clock_mhz is None and r.nvlink_active_links is None and r.memory_free_bytes is None
    )
    assert d.gpus[0].supports_bf16 and d.gpus[0].supports_fp8 and d.topology == ()
    note = " ".join(d.notes)
    assert (
        "NVML unavailable (no NVIDIA driver found (DriverNotLoaded))" in note
        and "torch 2.13.0 built for CUDA 12.8" in note
    )
    assert "clocks, power, PCIe, NVLink, ECC and topology are unknown" in note
    text = _render(detection_dict(d))
    assert "h100-sxm-80gb" in text and "None" not in text
    header, rows = _table_rows(text, "catalog id")
    assert [rows[0][header.index(c)] for c in ("free GiB", "SM MHz", "power W", "PCIe", "NVLink")] == ["?"] * 5


def test_torch_fallback_without_nvidia_ml_py_and_without_sysfs(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    torch = FakeTorch([_h100_props(0x18)])
    d = detect(ACCS, host=HOST, fallback=lambda: TorchBackend(torch, sysfs=tmp_path / "absent"))
    g = d.gpus[0]
    assert g.catalog_id is None and "PCI device id unknown" in g.match and g.reading.pci_bus_id == "00000000:18:00.0"
    assert "nvidia-ml-py is not installed" in " ".join(d.notes)


def test_torch_fallback_with_old_properties_lacking_pci_fields(monkeypatch, nvml_fixture, tmp_path):
    _install(monkeypatch, FakePynvml(nvml_fixture, init_error="LibraryNotFound"))
    props = SimpleNamespace(
        name="NVIDIA A100-SXM4-80GB", total_memory=81920 * 2**20, major=8, minor=0, multi_processor_count=108
    )
    d = detect(ACCS, host=HOST, fallback=lambda: TorchBackend(FakeTorch([props]), sysfs=tmp_path))
    r = d.gpus[0].reading
    assert r.pci_device_id is None and r.pci_bus_id is None and r.uuid is None
    assert d.gpus[0].catalog_id is None  # never matched by name
    assert d.gpus[0].supports_bf16 is True and d.gpus[0].supports_fp8 is False


def test_torch_fallback_on_rocm(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    props = SimpleNamespace(
        name="AMD Instinct MI300X",
        total_memory=192 * 2**30,
        major=9,
        minor=4,
        multi_processor_count=304,
        uuid="",
        pci_domain_id=0,
        pci_bus_id=0x11,
        pci_device_id=0,
    )
    torch = FakeTorch([props], hip="6.2.41133")
    d = detect(ACCS, host=HOST, fallback=lambda: TorchBackend(torch, sysfs=_sysfs(tmp_path, (0x11,), "0x74a1")))
    assert d.gpu_status.startswith("1 AMD GPU") and d.gpus[0].reading.vendor == "amd"
    assert d.gpus[0].supports_bf16 is None and d.gpus[0].supports_fp8 is None
    assert "ROCm/HIP 6.2.41133" in " ".join(d.notes)


def test_torch_without_a_usable_gpu_is_no_fallback(monkeypatch, nvml_fixture):
    _install(monkeypatch, FakePynvml(nvml_fixture, init_error="LibraryNotFound"))
    backend = TorchBackend(FakeTorch([_h100_props(0x18)], available=False))
    assert not backend.available()[0]
    d = detect(ACCS, host=HOST, fallback=lambda: None)
    assert d.gpus == () and d.gpu_status == "no NVIDIA driver found (LibraryNotFound)"


def test_default_torch_fallback_needs_a_gpu():
    """On this machine: torch_fallback() is a TorchBackend only if torch can use a GPU."""
    got = torch_fallback()
    if got is not None:
        assert got.available()[0]


def test_gpu_hardware_present_reads_pci_vendor_and_class(tmp_path):
    from gpuplan.local.detect import gpu_hardware_present

    pci, dev = tmp_path / "pci", tmp_path / "dev"
    dev.mkdir()
    (pci / "0000:00:01.0").mkdir(parents=True)
    (pci / "0000:00:01.0" / "vendor").write_text("0x8086\n")
    (pci / "0000:00:01.0" / "class").write_text("0x030000\n")  # an Intel display controller: not ours
    assert gpu_hardware_present(pci, dev) is False
    (pci / "0000:18:00.0").mkdir()
    (pci / "0000:18:00.0" / "vendor").write_text("0x10de\n")
    (pci / "0000:18:00.0" / "class").write_text("0x030200\n")  # NVIDIA 3D controller (H100)
    assert gpu_hardware_present(pci, dev) is True
    assert gpu_hardware_present(tmp_path / "missing", dev) is True  # no sysfs: can't tell, so look
    (dev / "kfd").touch()
    assert gpu_hardware_present(pci / "0000:00:01.0", dev) is True
