"""What this machine has: GPUs through NVML (nvidia-ml-py), the host through psutil and /sys.

The NVML access sits behind ``GpuBackend`` so the logic (catalog matching, link checks, topology) is
tested with recorded or synthetic readings; ``PynvmlBackend`` is the real one. With no driver or no GPU
the report says so plainly and still describes the host.

Catalog matching uses the PCI device id and the memory size, never a name substring: an unknown device
is reported as unknown.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

#: NVML topology levels (nvmlGpuTopologyLevel_t) in nvidia-smi topo -m's words.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str
    pci_device_id: str          # "0x2330"
    pci_bus_id: str
    memory_total_bytes: int
    memory_free_bytes: int
    compute_capability: tuple[int, int] | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    power_limit_w: float | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    nvlink_active_links: int | None = None
    nvlink_peers: tuple[str, ...] = ()   # PCI bus ids of directly linked GPUs
    nvlink_switch: bool = False          # links go to NVSwitches (HGX/DGX): every switched GPU is a peer
    mig_enabled: bool | None = None
    ecc_uncorrected_errors: int | None = None
    retired_pages: int | None = None
    remapped_rows_pending: bool | None = None   # Ampere and later remap rows instead of retiring pages
    remapped_rows_failed: bool | None = None
    uuid: str | None = None


class GpuBackend(Protocol):
    """The NVML seam: real (PynvmlBackend) or recorded (tests)."""

    def available(self) -> tuple[bool, str]: ...
    def driver_version(self) -> str | None: ...
    def cuda_version(self) -> str | None: ...
    def readings(self) -> list[GpuReading]: ...
    def topology(self, i: int, j: int) -> str: ...


class PynvmlBackend:
    """NVML through nvidia-ml-py; every optional query that a GPU does not support reads as None."""

    def __init__(self) -> None:
        self._nvml = None
        self._error = ""
        self.errors: list[str] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        except ImportError:
            self._error = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self._error = f"no NVIDIA driver found ({type(e).__name__.replace('NVMLError_', '')})"

    def available(self) -> tuple[bool, str]:
        return self._nvml is not None, self._error

    def _q(self, fn, *args):
        try:
            return fn(*args)
        except Exception:
            return None

    def driver_version(self) -> str | None:
        v = self._q(self._nvml.nvmlSystemGetDriverVersion) if self._nvml else None
        return v.decode() if isinstance(v, bytes) else v

    def cuda_version(self) -> str | None:
        v = self._q(self._nvml.nvmlSystemGetCudaDriverVersion_v2) if self._nvml else None
        return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) else None

    def readings(self) -> list[GpuReading]:
        nv = self._nvml
        if nv is None:
            return []
        out = []
        count = self._q(nv.nvmlDeviceGetCount) or 0
        for i in range(count):
            try:
                out.append(self._reading(i))
            except Exception as e:  # a lost GPU, no permission: report it and keep going
                self.errors.append(f"GPU {i}: NVML could not read it ({type(e).__name__.replace('NVMLError_', '')})")
        return out

    def _reading(self, i: int) -> GpuReading:
        nv = self._nvml
        if True:
            h = nv.nvmlDeviceGetHandleByIndex(i)
            pci = nv.nvmlDeviceGetPciInfo(h)
            mem = nv.nvmlDeviceGetMemoryInfo(h)
            name = nv.nvmlDeviceGetName(h)
            peers, links, switch = [], 0, False
            for link in range(18):
                if self._q(nv.nvmlDeviceGetNvLinkState, h, link) == 1:
                    links += 1
                    kind = self._q(nv.nvmlDeviceGetNvLinkRemoteDeviceType, h, link)
                    if kind == 2:  # NVML_NVLINK_DEVICE_TYPE_SWITCH
                        switch = True
                        continue
                    remote = self._q(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
                    if remote is not None:
                        bus = remote.busId.decode() if isinstance(remote.busId, bytes) else remote.busId
                        peers.append(bus)
            mig = self._q(nv.nvmlDeviceGetMigMode, h)
            limit = self._q(nv.nvmlDeviceGetEnforcedPowerLimit, h)
            retired = self._q(nv.nvmlDeviceGetRetiredPages, h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
            cc = self._q(nv.nvmlDeviceGetCudaComputeCapability, h)
            remap = self._q(nv.nvmlDeviceGetRemappedRows, h)  # (corrected, uncorrected, pending, failure)
            uuid = self._q(nv.nvmlDeviceGetUUID, h)
            return (GpuReading(
                index=i, name=name.decode() if isinstance(name, bytes) else name,
                pci_device_id=f"0x{pci.pciDeviceId >> 16:04x}",
                pci_bus_id=pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId,
                memory_total_bytes=int(mem.total), memory_free_bytes=int(mem.free),
                compute_capability=tuple(cc) if cc else None,
                sm_clock_mhz=self._q(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                sm_clock_max_mhz=self._q(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
                power_limit_w=limit / 1000 if limit else None,
                pcie_gen=self._q(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                pcie_gen_max=self._q(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                pcie_width=self._q(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                pcie_width_max=self._q(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                nvlink_active_links=links, nvlink_peers=tuple(peers), nvlink_switch=switch,
                mig_enabled=bool(mig[0]) if mig else None,
                ecc_uncorrected_errors=self._q(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                               nv.NVML_VOLATILE_ECC),
                retired_pages=len(retired) if retired is not None else None,
                remapped_rows_pending=bool(remap[2]) if remap else None,
                remapped_rows_failed=bool(remap[3]) if remap else None,
                uuid=uuid.decode() if isinstance(uuid, bytes) else uuid,
            ))

    def topology(self, i: int, j: int) -> str:
        nv = self._nvml
        try:
            a, b = nv.nvmlDeviceGetHandleByIndex(i), nv.nvmlDeviceGetHandleByIndex(j)
        except Exception:
            return "?"
        level = self._q(nv.nvmlDeviceGetTopologyCommonAncestor, a, b)
        return TOPOLOGY_LEVELS.get(level, "?") if level is not None else "?"


# -------------------------------------------------------------------------------------------- host


@dataclass(frozen=True)
class Disk:
    mount: str
    fstype: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Host:
    hostname: str
    os: str
    cpu_model: str
    cores_physical: int | None
    cores_logical: int | None
    memory_bytes: int
    numa_nodes: int
    disks: tuple[Disk, ...]
    python: str


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def probe_host() -> Host:
    import psutil

    nodes = Path("/sys/devices/system/node")
    numa = len([p for p in nodes.glob("node[0-9]*")]) if nodes.is_dir() else 1
    disks = []
    for part in psutil.disk_partitions(all=False):
        try:
            use = psutil.disk_usage(part.mountpoint)
        except OSError:
            continue
        disks.append(Disk(part.mountpoint, part.fstype, use.total, use.free))
    return Host(hostname=platform.node(), os=f"{platform.system()} {platform.release()}", cpu_model=_cpu_model(),
                cores_physical=psutil.cpu_count(logical=False), cores_logical=psutil.cpu_count(),
                memory_bytes=psutil.virtual_memory().total, numa_nodes=max(1, numa), disks=tuple(disks),
                python=platform.python_version())


# ------------------------------------------------------------------------------------------ report


@dataclass(frozen=True)
class GpuFinding:
    reading: GpuReading
    catalog_id: str | None
    match: str
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Detection:
    host: Host
    gpu_status: str
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuFinding, ...] = ()
    topology: tuple[tuple[str, ...], ...] = ()
    notes: tuple[str, ...] = field(default=())


def match_catalog(reading: GpuReading, accelerators) -> tuple[str | None, str]:
    """The catalog entry with this PCI device id whose memory matches (within 10 % of what the driver
    reports, or of the marketed size); unknown otherwise, with the reason."""
    candidates = [a for a in accelerators if reading.pci_device_id.lower() in a.pci_device_ids]
    if not candidates:
        return None, f"PCI device id {reading.pci_device_id} is not in the catalog"
    sized = [a for a in candidates
             if abs(reading.memory_total_bytes / a.usable_memory_bytes - 1) <= 0.10
             or abs(reading.memory_total_bytes / a.memory_bytes - 1) <= 0.10]
    if len(sized) == 1:
        return sized[0].id, f"PCI device id {reading.pci_device_id} and {reading.memory_total_bytes / 2**30:.1f} GiB"
    if not sized:
        return None, (f"PCI device id {reading.pci_device_id} matches {', '.join(a.id for a in candidates)} but not "
                      f"its memory ({reading.memory_total_bytes / 2**30:.1f} GiB)")
    return None, f"PCI device id {reading.pci_device_id} is shared by {', '.join(a.id for a in sized)}"


def gpu_warnings(r: GpuReading) -> tuple[str, ...]:
    """What deserves a look: a narrow PCIe link, low generation, ECC trouble, MIG, a low power cap."""
    out = []
    if r.pcie_width and r.pcie_width_max and r.pcie_width < r.pcie_width_max:
        out.append(f"PCIe link runs x{r.pcie_width} of x{r.pcie_width_max}: a downtrained link (reseat or check the riser)")
    if r.pcie_gen and r.pcie_gen_max and r.pcie_gen < r.pcie_gen_max:
        out.append(f"PCIe Gen {r.pcie_gen} of Gen {r.pcie_gen_max}: normal at idle (power saving); a problem if it "
                   "stays so under load (gpuplan local bench pcie)")
    if r.ecc_uncorrected_errors:
        out.append(f"{r.ecc_uncorrected_errors} uncorrected ECC errors since the driver loaded")
    if r.retired_pages:
        out.append(f"{r.retired_pages} memory pages retired for double-bit errors")
    if r.remapped_rows_failed:
        out.append("a memory row remapping failed: the GPU needs service")
    elif r.remapped_rows_pending:
        out.append("memory rows are waiting to be remapped: reset the GPU (or reboot) to apply them")
    if r.mig_enabled:
        out.append("MIG is enabled: each instance gets a slice of the GPU")
    return tuple(out)


def detect(accelerators, backend: GpuBackend | None = None, host: Host | None = None) -> Detection:
    """Everything ``gpuplan local detect`` reports; ``backend`` and ``host`` are the seams for tests."""
    backend = backend if backend is not None else PynvmlBackend()
    host = host if host is not None else probe_host()
    ok, why = backend.available()
    if not ok:
        return Detection(host=host, gpu_status=why, driver_version=None, cuda_version=None)
    readings = backend.readings()
    errors = tuple(getattr(backend, "errors", ()))
    if not readings:
        return Detection(host=host, gpu_status="NVIDIA driver found, but no GPU is visible (CUDA_VISIBLE_DEVICES?)",
                         driver_version=backend.driver_version(), cuda_version=backend.cuda_version())
    found = []
    for r in readings:
        cid, how = match_catalog(r, accelerators)
        found.append(GpuFinding(r, cid, how, gpu_warnings(r)))
    n = len(readings)
    by_bus = {r.pci_bus_id.lower(): r.index for r in readings}
    matrix = []
    for i in range(n):
        row = []
        for j in range(n):
            if i == j:
                row.append("X")
                continue
            a, b = readings[i], readings[j]
            if a.nvlink_switch and b.nvlink_switch:
                links = min(a.nvlink_active_links or 0, b.nvlink_active_links or 0)
            else:
                links = sum(1 for p in a.nvlink_peers if by_bus.get(p.lower()) == j)
            row.append(f"NV{links}" if links else backend.topology(i, j))
        matrix.append(tuple(row))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    notes = errors + ((f"CUDA_VISIBLE_DEVICES={visible} (NVML lists every GPU)",) if visible is not None else ())
    return Detection(host=host, gpu_status=f"{n} NVIDIA GPU{'s' if n > 1 else ''}", driver_version=backend.driver_version(),
                     cuda_version=backend.cuda_version(), gpus=tuple(found), topology=tuple(matrix), notes=notes)


def torch_gpu(d: Detection) -> GpuFinding | None:
    """The detected GPU that torch runs on (cuda:0, matched by UUID), or None without a GPU.

    NVML numbers GPUs by PCI order; CUDA by speed or CUDA_VISIBLE_DEVICES, so index 0 can differ.
    Raises when NVML sees GPUs but torch cannot use CUDA (a CPU-only or mismatched build).
    """
    from ..errors import GpuplanError

    if not d.gpus:
        return None
    try:
        import torch
    except ImportError:
        return d.gpus[0]
    if not torch.cuda.is_available():
        raise GpuplanError(f"NVML sees {len(d.gpus)} GPU(s) but torch cannot use CUDA (torch {torch.__version__}, "
                           f"built for CUDA {torch.version.cuda}, driver {d.driver_version}): install a CUDA build "
                           "of torch that this driver supports")
    uuid = str(getattr(torch.cuda.get_device_properties(0), "uuid", "")).lower().removeprefix("gpu-")
    for g in d.gpus:
        if uuid and (g.reading.uuid or "").lower().removeprefix("gpu-") == uuid:
            return g
    return d.gpus[0]


def torch_gpu_catalog_id(accelerators) -> str | None:
    """The catalog id of the GPU torch uses (matched by PCI id and memory, never by name), or None."""
    found = torch_gpu(detect(accelerators))
    return found.catalog_id if found else None


def detection_dict(d: Detection) -> dict:
    return {
        "host": asdict(d.host), "gpu_status": d.gpu_status, "driver_version": d.driver_version,
        "cuda_version": d.cuda_version,
        "gpus": [{**asdict(g.reading), "catalog_id": g.catalog_id, "match": g.match, "warnings": list(g.warnings)}
                 for g in d.gpus],
        "topology": [list(r) for r in d.topology], "notes": list(d.notes),
    }
