"""`gpuplan local detect`: matching, warnings and topology on synthetic NVML readings (the seam), and the
real no-GPU path of this machine. The readings below are built from public facts (PCI ids from pci.ids,
the 81,559 MiB an H100 SXM reports, an 8-GPU HGX board on NVSwitch); they are not a recording: no GPU was
lent to the session that wrote them. Recorded readings belong in docs/measurements/ when a GPU is lent.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuplan.catalog import load_accelerators
from gpuplan.local.detect import Disk, GpuReading, Host, detect, detection_dict, gpu_warnings, match_catalog

ACCS = load_accelerators()
HOST = Host("node1", "Linux 6.8", "Intel Xeon Platinum 8480+", 112, 224, 2 * 1024**4, 2,
            (Disk("/", "ext4", 2 * 10**12, 10**12),), "3.11.7")
H100 = GpuReading(index=0, name="NVIDIA H100 80GB HBM3", pci_device_id="0x2330", pci_bus_id="00000000:18:00.0",
                  memory_total_bytes=81559 * 2**20, memory_free_bytes=80000 * 2**20, compute_capability=(9, 0),
                  sm_clock_mhz=1980, sm_clock_max_mhz=1980, power_limit_w=700, pcie_gen=5, pcie_gen_max=5,
                  pcie_width=16, pcie_width_max=16, nvlink_active_links=18, nvlink_switch=True, mig_enabled=False,
                  ecc_uncorrected_errors=0, retired_pages=0)


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
    w = gpu_warnings(replace(H100, pcie_width=8, pcie_gen=3, ecc_uncorrected_errors=2, retired_pages=1,
                             mig_enabled=True))
    text = " ".join(w)
    assert "x8 of x16" in text and "Gen 3 of Gen 5" in text and "2 uncorrected ECC" in text
    assert "retired" in text and "MIG" in text


def test_direct_nvlink_peers_and_pcie_topology():
    a = replace(H100, index=0, pci_bus_id="00000000:01:00.0", nvlink_switch=False, nvlink_active_links=4,
                nvlink_peers=("00000000:02:00.0",) * 4)
    b = replace(H100, index=1, pci_bus_id="00000000:02:00.0", nvlink_switch=False, nvlink_active_links=4,
                nvlink_peers=("00000000:01:00.0",) * 4)
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
        errors = ["GPU 1: NVML could not read it (GpuIsLost)"]

    d = detect(ACCS, HalfBroken([H100]), HOST)
    assert len(d.gpus) == 1 and "GpuIsLost" in d.notes[0]


def test_remapped_rows_warnings():
    assert "needs service" in " ".join(gpu_warnings(replace(H100, remapped_rows_failed=True)))
    assert "reset the GPU" in " ".join(gpu_warnings(replace(H100, remapped_rows_pending=True)))
