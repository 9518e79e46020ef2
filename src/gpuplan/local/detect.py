"""What this machine has: GPUs through NVML (nvidia-ml-py), the host through psutil and /sys.

The NVML access sits behind ``GpuBackend`` so the logic (catalog matching, link checks, topology) is
tested with recorded or synthetic readings; ``PynvmlBackend`` is the real one. With no driver or no GPU
the report says so plainly and still describes the host.

When NVML is not there (no nvidia-ml-py, no NVML library, or a ROCm machine) but torch is importable
and ``torch.cuda.is_available()``, the GPUs are read through torch instead (``TorchBackend``): name,
memory, compute capability, multiprocessors, UUID and PCI address; clocks, power, PCIe, NVLink, ECC and
topology are then unknown, and the report says so. torch is imported only on that path, never when
NVML works.

Catalog matching uses the PCI device id and the memory size, never a name substring: an unknown device
is reported as unknown.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, overload

#: NVML topology levels (nvmlGpuTopologyLevel_t) in nvidia-smi topo -m's words.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}

#: NVLink links to probe when the installed nvidia-ml-py has no NVML_NVLINK_MAX_LINKS (Hopper has 18).
_DEFAULT_NVLINK_LINKS = 18

#: Warn when the enforced power limit is below this share of the default limit (or of the catalog TDP).
POWER_CAP_FRACTION = 0.90

#: A GPU counts as busy (its PCIe link should then run at full generation) from this utilization on.
BUSY_UTILIZATION_PERCENT = 10

#: Lowest compute capability with native (tensor-core) BF16 and FP8 math on NVIDIA GPUs; see dtype_support.
BF16_MIN_CC = (8, 0)
FP8_MIN_CC = (8, 9)

#: Where Linux lists PCI devices (the product id of a GPU found through torch is read from here).
SYSFS_PCI_DEVICES = Path("/sys/bus/pci/devices")


@dataclass(frozen=True)
class GpuReading:
    index: int  # NVML index (PCI order); CUDA ordinal when read through torch
    name: str
    pci_device_id: str | None  # "0x2330"; None when it could not be read
    pci_bus_id: str | None  # "00000000:18:00.0"
    memory_total_bytes: int
    memory_free_bytes: int | None
    compute_capability: tuple[int, int] | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    power_limit_w: float | None = None  # enforced limit
    power_default_limit_w: float | None = None  # the board's default limit
    utilization_gpu_percent: int | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    nvlink_active_links: int | None = None
    nvlink_peers: tuple[str, ...] = ()  # PCI bus ids of directly linked GPUs
    nvlink_switch: bool = False  # links go to NVSwitches (HGX/DGX): every switched GPU is a peer
    mig_enabled: bool | None = None
    ecc_uncorrected_errors: int | None = None
    retired_pages: int | None = None
    remapped_rows_pending: bool | None = None  # Ampere and later remap rows instead of retiring pages
    remapped_rows_failed: bool | None = None
    uuid: str | None = None
    multiprocessor_count: int | None = None
    vendor: str = "nvidia"  # "nvidia" or "amd" (a ROCm build of torch)
    source: str = "nvml"  # "nvml" or "torch"


class GpuBackend(Protocol):
    """The GPU seam: real (PynvmlBackend, TorchBackend) or recorded (tests)."""

    def available(self) -> tuple[bool, str]: ...
    def driver_version(self) -> str | None: ...
    def cuda_version(self) -> str | None: ...
    def readings(self) -> list[GpuReading]: ...
    def topology(self, i: int, j: int) -> str: ...  # i, j: NVML indices (GpuReading.index)


@overload
def _text(v: bytes | str) -> str: ...
@overload
def _text(v: None) -> None: ...
def _text(v: bytes | str | None) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


class PynvmlBackend:
    """NVML through nvidia-ml-py; every optional query that a GPU does not support reads as None."""

    def __init__(self) -> None:
        self._nvml: Any = None  # the pynvml module (untyped)
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

    def _q(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    def driver_version(self) -> str | None:
        return _text(self._q(self._nvml.nvmlSystemGetDriverVersion)) if self._nvml else None

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
        nv, q = self._nvml, self._q
        h = nv.nvmlDeviceGetHandleByIndex(i)
        pci = nv.nvmlDeviceGetPciInfo(h)
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        name = nv.nvmlDeviceGetName(h)
        peers: list[str] = []
        links, switch = 0, False
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", _DEFAULT_NVLINK_LINKS)):
            if q(nv.nvmlDeviceGetNvLinkState, h, link) != nv.NVML_FEATURE_ENABLED:
                continue
            links += 1
            if q(nv.nvmlDeviceGetNvLinkRemoteDeviceType, h, link) == nv.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                switch = True
                continue
            remote = q(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            if remote is not None:
                peers.append(_text(remote.busId))
        mig = q(nv.nvmlDeviceGetMigMode, h)
        limit = q(nv.nvmlDeviceGetEnforcedPowerLimit, h)  # milliwatts
        default = q(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)  # milliwatts
        util = q(nv.nvmlDeviceGetUtilizationRates, h)
        retired = q(nv.nvmlDeviceGetRetiredPages, h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        cc = q(nv.nvmlDeviceGetCudaComputeCapability, h)
        remap = q(nv.nvmlDeviceGetRemappedRows, h)  # (corrected, uncorrected, pending, failure)
        return GpuReading(
            index=i,
            name=_text(name),
            pci_device_id=f"0x{pci.pciDeviceId >> 16:04x}",  # upper 16 bits: device, lower: vendor (0x10de)
            pci_bus_id=_text(pci.busId),
            memory_total_bytes=int(mem.total),
            memory_free_bytes=int(mem.free),
            compute_capability=tuple(cc) if cc else None,
            sm_clock_mhz=q(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            sm_clock_max_mhz=q(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            power_limit_w=limit / 1000 if limit else None,
            power_default_limit_w=default / 1000 if default else None,
            utilization_gpu_percent=int(util.gpu) if util is not None else None,
            pcie_gen=q(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_gen_max=q(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
            pcie_width=q(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
            pcie_width_max=q(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
            nvlink_active_links=links,
            nvlink_peers=tuple(peers),
            nvlink_switch=switch,
            mig_enabled=bool(mig[0]) if mig else None,
            ecc_uncorrected_errors=q(
                nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
            ),
            retired_pages=len(retired) if retired is not None else None,
            remapped_rows_pending=bool(remap[2]) if remap else None,
            remapped_rows_failed=bool(remap[3]) if remap else None,
            uuid=_text(q(nv.nvmlDeviceGetUUID, h)),
        )

    def topology(self, i: int, j: int) -> str:
        """nvidia-smi topo -m's word for NVML GPUs ``i`` and ``j`` (NVML indices, not list positions)."""
        nv = self._nvml
        try:
            a, b = nv.nvmlDeviceGetHandleByIndex(i), nv.nvmlDeviceGetHandleByIndex(j)
        except Exception:
            return "?"
        level = self._q(nv.nvmlDeviceGetTopologyCommonAncestor, a, b)
        return TOPOLOGY_LEVELS.get(level, "?") if level is not None else "?"


class TorchBackend:
    """The GPUs as torch sees them (CUDA or ROCm build), for when NVML is unavailable.

    Reads ``torch.cuda.get_device_properties``: name, total memory, compute capability (major, minor),
    ``multi_processor_count``, ``uuid`` and, where the properties have them (torch 2.x: ``pci_domain_id``,
    ``pci_bus_id``, ``pci_device_id``), the PCI address. torch's ``pci_device_id`` is the device (slot)
    number of that address (cudaDeviceProp::pciDeviceID), not the product id: the product id that the
    catalog matches on is read from ``<sysfs>/<address>/device`` (Linux), and stays unknown elsewhere.
    ``torch`` and ``sysfs`` are the seams for tests.
    """

    has_topology = False

    def __init__(self, torch, sysfs: Path = SYSFS_PCI_DEVICES) -> None:
        self._torch, self._sysfs = torch, Path(sysfs)
        self.errors: list[str] = []

    @property
    def vendor(self) -> str:
        return "amd" if getattr(self._torch.version, "hip", None) else "nvidia"

    @property
    def build(self) -> str:
        v = self._torch.version
        runtime = f"ROCm/HIP {v.hip}" if getattr(v, "hip", None) else f"CUDA {getattr(v, 'cuda', None)}"
        return f"torch {getattr(self._torch, '__version__', '?')} built for {runtime}"

    def available(self) -> tuple[bool, str]:
        try:
            return bool(self._torch.cuda.is_available()), ""
        except Exception as e:
            return False, f"torch cannot use a GPU ({type(e).__name__})"

    def driver_version(self) -> str | None:
        return None  # torch knows its own CUDA/ROCm runtime, not the driver's

    def cuda_version(self) -> str | None:
        return None

    def _product_id(self, domain: int, bus: int, device: int) -> str | None:
        try:
            raw = (self._sysfs / f"{domain:04x}:{bus:02x}:{device:02x}.0" / "device").read_text().strip()
            return f"0x{int(raw, 16):04x}"
        except (OSError, ValueError):
            return None

    def readings(self) -> list[GpuReading]:
        cuda = self._torch.cuda
        out = []
        for i in range(cuda.device_count()):
            try:
                p = cuda.get_device_properties(i)
            except Exception as e:  # a GPU torch cannot open: report it and keep going
                self.errors.append(f"GPU {i}: torch could not read it ({type(e).__name__})")
                continue
            addr: list[Any] = [getattr(p, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
            has_addr = all(isinstance(x, int) for x in addr)
            uuid = getattr(p, "uuid", None)
            mp = getattr(p, "multi_processor_count", None)
            out.append(
                GpuReading(
                    index=i,
                    name=str(p.name),
                    pci_device_id=self._product_id(*addr) if has_addr else None,
                    pci_bus_id=f"{addr[0]:08X}:{addr[1]:02X}:{addr[2]:02X}.0" if has_addr else None,
                    memory_total_bytes=int(p.total_memory),
                    memory_free_bytes=None,
                    compute_capability=(int(p.major), int(p.minor)),
                    multiprocessor_count=int(mp) if mp is not None else None,
                    uuid=str(uuid) if uuid is not None and str(uuid) else None,
                    vendor=self.vendor,
                    source="torch",
                )
            )
        return out

    def topology(self, i: int, j: int) -> str:
        return "?"


def gpu_hardware_present(pci_root: Path = Path("/sys/bus/pci/devices"), dev: Path = Path("/dev")) -> bool:
    """Whether this machine may have an NVIDIA or AMD GPU: a device node (/dev/nvidia*, /dev/kfd) or a PCI
    function of vendor 0x10de (NVIDIA) or 0x1002 (AMD) of class display (0x03) or processing accelerator
    (0x12) (PCI-SIG class codes). Where sysfs cannot be read (not Linux), it answers True."""
    if any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists():
        return True
    try:
        devices = list(pci_root.iterdir())
    except OSError:
        return True
    for d in devices:
        try:
            vendor = (d / "vendor").read_text().strip().lower()
            cls = (d / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor in ("0x10de", "0x1002") and cls[:4] in ("0x03", "0x12"):
            return True
    return False


def torch_fallback() -> TorchBackend | None:
    """A TorchBackend when torch is importable and has a usable GPU, else None. Imports torch."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or not gpu_hardware_present():
        return None  # importing torch takes seconds: only where a GPU may be there to find
    try:
        import torch
    except Exception:  # a broken install (missing CUDA libraries...) is no GPU to report
        return None
    backend = TorchBackend(torch)
    return backend if backend.available()[0] else None


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
    numa = len(list(nodes.glob("node[0-9]*"))) if nodes.is_dir() else 1
    disks = []
    for part in psutil.disk_partitions(all=False):
        try:
            use = psutil.disk_usage(part.mountpoint)
        except OSError:
            continue
        disks.append(Disk(part.mountpoint, part.fstype, use.total, use.free))
    return Host(
        hostname=platform.node(),
        os=f"{platform.system()} {platform.release()}",
        cpu_model=_cpu_model(),
        cores_physical=psutil.cpu_count(logical=False),
        cores_logical=psutil.cpu_count(),
        memory_bytes=psutil.virtual_memory().total,
        numa_nodes=max(1, numa),
        disks=tuple(disks),
        python=platform.python_version(),
    )


# ------------------------------------------------------------------------------------------ report


@dataclass(frozen=True)
class GpuFinding:
    reading: GpuReading
    catalog_id: str | None
    match: str
    warnings: tuple[str, ...]
    supports_bf16: bool | None = None  # None: unknown (no compute capability, or not an NVIDIA GPU)
    supports_fp8: bool | None = None
    notes: tuple[str, ...] = ()  # facts worth knowing that are not problems


@dataclass(frozen=True)
class Detection:
    host: Host
    gpu_status: str
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuFinding, ...] = ()
    topology: tuple[tuple[str, ...], ...] = ()
    topology_gpus: tuple[int, ...] = ()  # the NVML index of each row and column of ``topology``
    notes: tuple[str, ...] = field(default=())


def dtype_support(compute_capability: tuple[int, int] | None, vendor: str = "nvidia") -> dict[str, bool | None]:
    """Native BF16 and FP8 tensor-core math on an NVIDIA GPU, from its compute capability (sm_XY).

    - bf16: compute capability >= 8.0. BF16 tensor cores arrived with Ampere (NVIDIA A100 Tensor Core GPU
      Architecture whitepaper, 2020; sm_80); the CUDA C++ Programming Guide / PTX ISA give ``mma`` with
      ``.bf16`` operands from sm_80. Volta (7.0) and Turing (7.5) have FP16 tensor cores only.
    - fp8: compute capability >= 8.9. FP8 (E4M3/E5M2) tensor cores arrived with Ada (NVIDIA Ada GPU
      Architecture whitepaper, 2022; sm_89) and Hopper (NVIDIA H100 Tensor Core GPU Architecture
      whitepaper, 2022; sm_90); PTX ISA ``mma`` with ``.e4m3``/``.e5m2`` needs sm_89. A100 (8.0) and
      the 8.6 Ampere parts have none.
    "No" means no native math: frameworks may still emulate or upcast the dtype, slowly. Unknown (None)
    without a compute capability or for another vendor (ROCm reports gfx numbers in major/minor).
    """
    if compute_capability is None or vendor != "nvidia":
        return {"bf16": None, "fp8": None}
    cc = tuple(compute_capability)
    return {"bf16": cc >= BF16_MIN_CC, "fp8": cc >= FP8_MIN_CC}


def match_catalog(reading: GpuReading, accelerators) -> tuple[str | None, str]:
    """The catalog entry with this PCI device id whose memory matches (within 10 % of what the driver
    reports, or of the marketed size); unknown otherwise, with the reason."""
    if not reading.pci_device_id:
        return None, "PCI device id unknown (NVML unavailable and not readable from /sys): not matched to the catalog"
    candidates = [a for a in accelerators if reading.pci_device_id.lower() in a.pci_device_ids]
    if not candidates:
        return None, f"PCI device id {reading.pci_device_id} is not in the catalog"
    sized = [
        a
        for a in candidates
        if abs(reading.memory_total_bytes / a.usable_memory_bytes - 1) <= 0.10
        or abs(reading.memory_total_bytes / a.memory_bytes - 1) <= 0.10
    ]
    if len(sized) == 1:
        return sized[0].id, f"PCI device id {reading.pci_device_id} and {reading.memory_total_bytes / 2**30:.1f} GiB"
    if not sized:
        return None, (
            f"PCI device id {reading.pci_device_id} matches {', '.join(a.id for a in candidates)} but not "
            f"its memory ({reading.memory_total_bytes / 2**30:.1f} GiB)"
        )
    return None, f"PCI device id {reading.pci_device_id} is shared by {', '.join(a.id for a in sized)}"


def _busy(r: GpuReading) -> bool:
    return r.utilization_gpu_percent is not None and r.utilization_gpu_percent >= BUSY_UTILIZATION_PERCENT


def gpu_warnings(r: GpuReading, tdp_w: float | None = None) -> tuple[str, ...]:
    """What deserves a look: a narrow PCIe link, a slow PCIe generation under load, ECC trouble, MIG, a low
    power cap.

    - PCIe width below the maximum: always a warning (links keep their width at idle; a narrow one is
      downtrained: riser, slot, reseat).
    - PCIe generation below the maximum: a warning only while the GPU is busy (utilization >=
      BUSY_UTILIZATION_PERCENT). An idle GPU drops its link to a lower generation by design (power
      saving), so at idle or with utilization unknown this is a note (``gpu_notes``), not a warning.
    - Power: the enforced limit below POWER_CAP_FRACTION (90 %) of NVML's default limit
      (nvmlDeviceGetPowerManagementDefaultLimit), or of the catalog TDP (``tdp_w``) when the default is
      unknown.
    """
    out = []
    if r.pcie_width and r.pcie_width_max and r.pcie_width < r.pcie_width_max:
        out.append(
            f"PCIe link runs x{r.pcie_width} of x{r.pcie_width_max}: a downtrained link (reseat or check the riser)"
        )
    if r.pcie_gen and r.pcie_gen_max and r.pcie_gen < r.pcie_gen_max and _busy(r):
        out.append(
            f"PCIe Gen {r.pcie_gen} of Gen {r.pcie_gen_max} while the GPU is busy "
            f"({r.utilization_gpu_percent} % utilized): the link did not reach full speed (check the slot, "
            "riser and BIOS PCIe setting; gpuplan local bench pcie)"
        )
    ref, what = (
        (r.power_default_limit_w, "its default limit") if r.power_default_limit_w else (tdp_w, "the catalog TDP")
    )
    if r.power_limit_w and ref and r.power_limit_w < POWER_CAP_FRACTION * ref:
        out.append(
            f"power capped at {r.power_limit_w:.0f} W, {r.power_limit_w / ref:.0%} of {what} ({ref:.0f} W): "
            "clocks drop under load (nvidia-smi -q -d POWER; raise with nvidia-smi -pl)"
        )
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


def gpu_notes(r: GpuReading) -> tuple[str, ...]:
    """Facts that are not problems: an idle (or not known to be busy) GPU's PCIe link below its generation."""
    out = []
    if r.pcie_gen and r.pcie_gen_max and r.pcie_gen < r.pcie_gen_max and not _busy(r):
        state = "idle" if r.utilization_gpu_percent is not None else "utilization unknown"
        out.append(
            f"PCIe Gen {r.pcie_gen} of Gen {r.pcie_gen_max} now ({state}): idle links downshift by design; "
            "check under load with gpuplan local bench pcie"
        )
    return tuple(out)


def _topology(readings: list[GpuReading], backend: GpuBackend) -> tuple[tuple[str, ...], ...]:
    """The nvidia-smi topo -m matrix, one row and column per reading in order, addressed by NVML index.

    Readings may skip indices (NVML could not read a GPU), so NVLink peers and ``backend.topology`` use
    each reading's ``index``, never its position in the list.
    """
    index_by_bus = {r.pci_bus_id.lower(): r.index for r in readings if r.pci_bus_id}
    matrix = []
    for a in readings:
        row = []
        for b in readings:
            if a.index == b.index:
                row.append("X")
                continue
            if a.nvlink_switch and b.nvlink_switch:
                links = min(a.nvlink_active_links or 0, b.nvlink_active_links or 0)
            else:
                links = sum(1 for p in a.nvlink_peers if index_by_bus.get(p.lower()) == b.index)
            row.append(f"NV{links}" if links else backend.topology(a.index, b.index))
        matrix.append(tuple(row))
    return tuple(matrix)


def _findings(readings: list[GpuReading], accelerators) -> tuple[GpuFinding, ...]:
    by_id = {a.id: a for a in accelerators}
    found = []
    for r in readings:
        cid, how = match_catalog(r, accelerators)
        tdp = by_id[cid].tdp_w if cid in by_id else None
        dt = dtype_support(r.compute_capability, r.vendor)
        found.append(GpuFinding(r, cid, how, gpu_warnings(r, tdp), dt["bf16"], dt["fp8"], gpu_notes(r)))
    return tuple(found)


def detect(
    accelerators,
    backend: GpuBackend | None = None,
    host: Host | None = None,
    fallback: Callable[[], GpuBackend | None] | None = None,
) -> Detection:
    """Everything ``gpuplan local detect`` reports; ``backend``, ``host`` and ``fallback`` are the seams.

    ``fallback`` gives the backend to use when ``backend`` is unavailable (or None for none); by default
    it is ``torch_fallback`` when ``backend`` is the real NVML one, and nothing for an injected backend.
    It is called only when NVML is unavailable, so torch is never imported when NVML works.
    """
    if backend is None:
        backend = PynvmlBackend()
        fallback = fallback if fallback is not None else torch_fallback
    host = host if host is not None else probe_host()
    ok, why = backend.available()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not ok:
        alt = fallback() if fallback is not None else None
        readings = alt.readings() if alt is not None else []
        if alt is None or not readings:
            return Detection(
                host=host,
                gpu_status=why,
                driver_version=None,
                cuda_version=None,
                notes=tuple(getattr(alt, "errors", ())),
            )
        n = len(readings)
        build = getattr(alt, "build", "torch")
        notes = (
            tuple(getattr(alt, "errors", ()))
            + (
                f"NVML unavailable ({why}): GPUs read through {build}; clocks, power, PCIe, NVLink, ECC and "
                "topology are unknown",
            )
            + ((f"CUDA_VISIBLE_DEVICES={visible} (torch lists only these GPUs)",) if visible is not None else ())
        )
        vendor = "AMD" if readings[0].vendor == "amd" else "NVIDIA"
        return Detection(
            host=host,
            gpu_status=f"{n} {vendor} GPU{'s' if n > 1 else ''} (through torch; NVML unavailable)",
            driver_version=alt.driver_version(),
            cuda_version=alt.cuda_version(),
            gpus=_findings(readings, accelerators),
            notes=notes,
        )
    readings = backend.readings()
    errors = tuple(getattr(backend, "errors", ()))
    if not readings:
        status = (
            "NVIDIA driver found, but NVML could not read any GPU"
            if errors
            else "NVIDIA driver found, but no GPU is visible (CUDA_VISIBLE_DEVICES?)"
        )
        return Detection(
            host=host,
            gpu_status=status,
            driver_version=backend.driver_version(),
            cuda_version=backend.cuda_version(),
            notes=errors,
        )
    n = len(readings)
    topology = _topology(readings, backend) if getattr(backend, "has_topology", True) else ()
    notes = errors + ((f"CUDA_VISIBLE_DEVICES={visible} (NVML lists every GPU)",) if visible is not None else ())
    return Detection(
        host=host,
        gpu_status=f"{n} NVIDIA GPU{'s' if n > 1 else ''}",
        driver_version=backend.driver_version(),
        cuda_version=backend.cuda_version(),
        gpus=_findings(readings, accelerators),
        topology=topology,
        topology_gpus=tuple(r.index for r in readings) if topology else (),
        notes=notes,
    )


def uuid_key(uuid: object) -> str:
    """A GPU UUID as NVML and torch both give it, in one form: NVML says 'GPU-xxxx', torch 'xxxx' or a UUID
    object; compared lower-case without the prefix."""
    return str(uuid or "").lower().removeprefix("gpu-")


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
        raise GpuplanError(
            f"NVML sees {len(d.gpus)} GPU(s) but torch cannot use CUDA (torch {torch.__version__}, "
            f"built for CUDA {torch.version.cuda}, driver {d.driver_version}): install a CUDA build "
            "of torch that this driver supports"
        )
    uuid = uuid_key(getattr(torch.cuda.get_device_properties(0), "uuid", ""))
    for g in d.gpus:
        if uuid and uuid_key(g.reading.uuid) == uuid:
            return g
    return d.gpus[0]


def torch_gpu_catalog_id(accelerators) -> str | None:
    """The catalog id of the GPU torch uses (matched by PCI id and memory, never by name), or None."""
    found = torch_gpu(detect(accelerators))
    return found.catalog_id if found else None


def detection_dict(d: Detection) -> dict:
    return {
        "host": asdict(d.host),
        "gpu_status": d.gpu_status,
        "driver_version": d.driver_version,
        "cuda_version": d.cuda_version,
        "gpus": [
            {
                **asdict(g.reading),
                "catalog_id": g.catalog_id,
                "match": g.match,
                "supports_bf16": g.supports_bf16,
                "supports_fp8": g.supports_fp8,
                "warnings": list(g.warnings),
                "gpu_notes": list(g.notes),
            }
            for g in d.gpus
        ],
        "topology": [list(r) for r in d.topology],
        "topology_gpus": list(d.topology_gpus),
        "notes": list(d.notes),
    }
