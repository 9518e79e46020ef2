"""An accelerator as the catalog describes it: capacities, dense peaks, links, and where each came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")

#: Data types with a peak rate in the catalog, in display order. ``int8`` is in ops/s.
DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")


#: What a source's title starts with when its figure is not printed by the vendor nor measured: every output
#: that cites the source (``gpus show``, the assumptions of ``train`` / ``serve``) says so.
ESTIMATED = "estimated, not measured"


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: a document's title, its URL and its date (YYYY-MM or YYYY-MM-DD).

    ``derivation`` is set where the figure is neither printed by the vendor nor measured on this device (a
    rule, another device's measurement, arithmetic on other figures): it says how the figure was derived, and
    the catalog reader puts :data:`ESTIMATED` and the derivation in front of the title."""

    title: str
    url: str
    date: str
    derivation: str | None = None

    @property
    def estimated(self) -> bool:
        return self.derivation is not None

    def to_dict(self) -> dict[str, str]:
        out = {"title": self.title, "url": self.url, "date": self.date}
        if self.derivation is not None:
            out["derivation"] = self.derivation
        return out


@dataclass(frozen=True)
class Interconnect:
    """The scale-up link of one device: its kind and bandwidth per device, per direction."""

    kind: str
    bandwidth_bytes_per_s: float
    links: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "links": self.links}


def _frozen(mapping: Mapping[_K, _V]) -> Mapping[_K, _V]:
    return MappingProxyType(dict(mapping))


#: PCIe bandwidth per lane and direction after line coding, in bytes/s, by generation (PCI-SIG base
#: specifications: 2.5 and 5 GT/s with 8b/10b; 8, 16 and 32 GT/s with 128b/130b; 64 GT/s PAM4 for Gen 6,
#: quoted as 126 GB/s per direction at x16). x16: 4 / 8 / 15.75 / 31.5 / 63 / 126 GB/s for Gen 1-6.
PCIE_LANE_BYTES_PER_S: Mapping[int, float] = {
    1: 0.25e9,
    2: 0.5e9,
    3: 15.75e9 / 16,
    4: 31.5e9 / 16,
    5: 63e9 / 16,
    6: 126e9 / 16,
}


def pcie_bytes_per_s(gen: int, lanes: int = 16) -> float:
    """Theoretical one-direction PCIe bandwidth of a link of ``lanes`` lanes at generation ``gen``, in bytes/s
    (PCI-SIG rates above); real transfers reach ~80-90 % of it (TLP headers, flow control)."""
    if gen not in PCIE_LANE_BYTES_PER_S:
        raise ValueError(f"unknown PCIe generation {gen} (1-6)")
    if lanes <= 0:
        raise ValueError(f"PCIe lanes must be positive, got {lanes}")
    return PCIE_LANE_BYTES_PER_S[gen] * lanes


#: Figure keys by shape (see Accelerator._figure_keys): a listing of 100,000 devices has a handful of shapes.
_FIGURE_KEYS: dict[tuple[Any, ...], tuple[str, ...]] = {}


@dataclass(frozen=True)
class Accelerator:
    """One accelerator model. Peaks are dense (no structured sparsity), in FLOP/s (int8: ops/s).

    Besides the datasheet, the catalog holds the measured or software-defined facts the estimates need, each
    optional (None / empty where the catalog has no figure; the estimate then uses its documented default and
    says so) and each with its own source:

    - ``matmul_efficiency``: per dtype, the fraction of the dense peak a plain matmul reaches on the best GEMM
      shape (MAMF, Bekman's ml-engineering table), in (0, 1];
    - ``cublas_workspace_bytes``: the cuBLAS workspace PyTorch allocates per handle on this device when
      CUBLAS_WORKSPACE_CONFIG is unset (aten/src/ATen/cuda/CublasHandlePool.cpp), bytes;
    - ``scale_out_bytes_per_s_per_gpu``: the inter-node (scale-out) network bandwidth per GPU and direction
      of the usual server for this device (one NIC per GPU), bytes/s;
    - ``fp8_gemm_any_layout``: True where the fp8 GEMMs take any operand layout, False where they take only
      "TN" (A transposed, B not: cuBLASLt on compute capability 8.9 and 9.0), which makes Transformer Engine
      keep a transposed fp8 copy of each weight;
    - ``attention_flops_per_s``: the flash-attention forward + backward rate measured on this device (FLOP/s as
      the flash-attention benchmark counts them, backward 2.5x the forward), where its kernels stay well below
      the share of the peak the A100 kernels reach: a cap on the training step's attention rate;
    - ``low_power_rating``: (watts, fraction): the vendor's rating of the same GPU at a lower power, its dense
      tensor peak there as a fraction of ``peak_flops_per_s`` (HGX B100 at 700 W against HGX B200 at 1000 W), which
      a power cap between the two interpolates (``estimate.steptime.power_clock_factor``);
    - ``fp16_accumulate_factor``: the dense fp16 tensor rate with FP16 accumulation as a multiple of
      ``peak_flops_per_s["fp16"]`` (FP32 accumulation), dimensionless: 2 on GeForce cards, whose tensor cores
      accumulate in fp32 at half rate (NVIDIA GA102 / AD102 / GB202 whitepapers); absent where both run at one
      rate (data-centre and workstation parts);
    - ``tensor_flops_per_clock_per_sm`` and ``exp2_per_clock_per_sm``: the dense 16-bit tensor FLOPs (FP32
      accumulate) and the special-function unit's exponentials (MUFU.EX2) one SM completes per clock: their ratio
      sets how much of a flash-attention kernel's time its softmax takes (``estimate.steptime``); absent where they
      are Hopper's (4096 and 16);
    - ``host_link_bytes_per_s``: the link between the GPU and its host CPU, per GPU and direction, where it is
      not the PCIe slot ``pcie_gen`` gives (a Grace superchip's NVLink-C2C), bytes/s: offload and checkpoint copies;
    - ``sm_count``: streaming multiprocessors (NVIDIA) or compute units (AMD) the device exposes;
    - ``scale_up_domain_gpus``: how many devices share the scale-up link at its full bandwidth (an HGX board's
      8 over NVSwitch, an NVL72 rack's 72, an NVL pair's 2, a TPU pod's chips over ICI);
    - ``unified_memory``: True where the memory is the host's (Apple M-series): ``memory_bytes`` is the
      machine's RAM, shared with the CPU and the operating system, and ``memory_reported_bytes`` what the GPU
      may use of it by default (Metal's recommendedMaxWorkingSetSize).

    Memory: ``memory_bytes`` holds the bytes the vendor means (a GeForce card's "24 GB" of GDDR is 24 GiB;
    an HBM part's "80 GB" is 80e9), ``memory_reported_bytes`` what the driver reports where known.
    """

    id: str
    name: str
    vendor: str
    architecture: str
    form_factor: str
    year: int
    memory_bytes: int
    memory_type: str
    memory_bandwidth_bytes_per_s: float
    tdp_w: float | None
    peak_flops_per_s: Mapping[str, float]
    sources: Mapping[str, Source]
    aliases: tuple[str, ...] = ()
    memory_reported_bytes: int | None = None
    interconnect: Interconnect | None = None
    pcie_gen: int | None = None
    pci_device_ids: tuple[str, ...] = ()
    matmul_efficiency: Mapping[str, float] = field(default_factory=dict)
    cublas_workspace_bytes: int | None = None
    scale_out_bytes_per_s_per_gpu: float | None = None
    fp8_gemm_any_layout: bool | None = None
    attention_flops_per_s: float | None = None
    low_power_rating: tuple[float, float] | None = None
    fp16_accumulate_factor: float | None = None
    tensor_flops_per_clock_per_sm: float | None = None
    exp2_per_clock_per_sm: float | None = None
    host_link_bytes_per_s: float | None = None
    sm_count: int | None = None
    scale_up_domain_gpus: int | None = None
    unified_memory: bool | None = None
    origin: str = field(default="built-in", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "peak_flops_per_s", _frozen(self.peak_flops_per_s))
        object.__setattr__(self, "matmul_efficiency", _frozen(self.matmul_efficiency))
        object.__setattr__(self, "sources", _frozen(self.sources))

    @property
    def gpu_memory_bytes(self) -> int:
        """The memory a model on this device can be given, bytes, as ``gpus list --min-memory`` compares it.

        A discrete card's whole memory is the GPU's: its marketed bytes (the driver's total, known for some
        entries only, is within a few per cent of it and would make the filter depend on which entries record
        it). A unified-memory part (Apple M-series) shares its RAM with the CPU and the OS, and Metal lets the GPU
        use ``memory_reported_bytes`` of it by default (75 % above 36 GB): that share, not the RAM."""
        if self.unified_memory and self.memory_reported_bytes is not None:
            return self.memory_reported_bytes
        return self.memory_bytes

    @property
    def usable_memory_bytes(self) -> int:
        """Capacity a process can plan with: what the driver reports where known, else as marketed."""
        return self.memory_reported_bytes if self.memory_reported_bytes is not None else self.memory_bytes

    @property
    def scale_up_bytes_per_s(self) -> float:
        """Per-direction bandwidth to the other GPUs of a node: the scale-up link, else PCIe x16 of the
        card's generation (PCI-SIG: ~15.75 / 31.5 / 63 / 126 GB/s per direction for Gen 3 / 4 / 5 / 6; Gen 4 when
        unknown)."""
        if self.interconnect:
            return self.interconnect.bandwidth_bytes_per_s
        return pcie_bytes_per_s(self.pcie_gen or 4)

    @property
    def host_bytes_per_s(self) -> float:
        """Per-direction bandwidth between the GPU and its host CPU: the catalog's ``host_link_bytes_per_s`` (a Grace
        superchip's NVLink-C2C), else PCIe x16 of the card's generation (Gen 4 when unknown)."""
        if self.host_link_bytes_per_s is not None:
            return self.host_link_bytes_per_s
        return pcie_bytes_per_s(self.pcie_gen or 4)

    def supports(self, dtype: str) -> bool:
        return dtype in self.peak_flops_per_s

    def peak(self, dtype: str) -> float | None:
        """Dense peak rate for ``dtype`` in FLOP/s, or None where the device has no such path."""
        return self.peak_flops_per_s.get(dtype)

    def source_for(self, field_name: str) -> Source:
        """The source of one figure: its own entry, else its group's (``peak_flops_per_s``), else default."""
        if field_name in self.sources:
            return self.sources[field_name]
        group = field_name.split(".", 1)[0]
        if group in self.sources:
            return self.sources[group]
        return self.sources["default"]

    def figures(self) -> list[tuple[str, object]]:
        """Every figure as (field name, value), in display order; the keys are what ``source_for`` takes."""
        out: list[tuple[str, object]] = [
            ("memory_bytes", self.memory_bytes),
            ("memory_reported_bytes", self.memory_reported_bytes),
            ("memory_type", self.memory_type),
            ("memory_bandwidth_bytes_per_s", self.memory_bandwidth_bytes_per_s),
            ("unified_memory", self.unified_memory),
            ("sm_count", self.sm_count),
        ]
        out += [(f"peak_flops_per_s.{d}", self.peak_flops_per_s[d]) for d in DTYPES if d in self.peak_flops_per_s]
        out += [(f"matmul_efficiency.{d}", self.matmul_efficiency[d]) for d in DTYPES if d in self.matmul_efficiency]
        out += [
            ("fp16_accumulate_factor", self.fp16_accumulate_factor),
            ("attention_flops_per_s", self.attention_flops_per_s),
            ("low_power_rating", self.low_power_rating),
            ("tensor_flops_per_clock_per_sm", self.tensor_flops_per_clock_per_sm),
            ("exp2_per_clock_per_sm", self.exp2_per_clock_per_sm),
            ("interconnect", self.interconnect),
            ("host_link_bytes_per_s", self.host_link_bytes_per_s),
            ("scale_up_domain_gpus", self.scale_up_domain_gpus),
            ("scale_out_bytes_per_s_per_gpu", self.scale_out_bytes_per_s_per_gpu),
            ("pcie_gen", self.pcie_gen),
            ("cublas_workspace_bytes", self.cublas_workspace_bytes),
            ("fp8_gemm_any_layout", self.fp8_gemm_any_layout),
            ("tdp_w", self.tdp_w),
            ("year", self.year),
        ]
        return [(k, v) for k, v in out if v is not None]

    def _figure_sources(self) -> dict[str, dict[str, str]]:
        """``source_for`` of every figure, as dicts (one dict per distinct source: a catalog of 100,000
        devices lists in well under a second)."""
        sources = self.sources
        if len(sources) == 1 and "default" in sources:  # the usual user entry: every figure has one source
            return dict.fromkeys(self._figure_keys(), sources["default"].to_dict())
        made: dict[int, dict[str, str]] = {}
        out = {}
        for k in self._figure_keys():
            s = self.source_for(k)
            d = made.get(id(s))
            if d is None:
                d = made[id(s)] = s.to_dict()
            out[k] = d
        return out

    def _figure_keys(self) -> tuple[str, ...]:
        """The keys of :meth:`figures`, in its order (kept per shape: which figures the device has)."""
        missing = (
            self.memory_bytes is None,
            self.memory_reported_bytes is None,
            self.memory_type is None,
            self.memory_bandwidth_bytes_per_s is None,
            self.unified_memory is None,
            self.sm_count is None,
            self.interconnect is None,
            self.scale_up_domain_gpus is None,
            self.scale_out_bytes_per_s_per_gpu is None,
            self.pcie_gen is None,
            self.cublas_workspace_bytes is None,
            self.fp8_gemm_any_layout is None,
            self.attention_flops_per_s is None,
            self.low_power_rating is None,
            self.fp16_accumulate_factor is None,
            self.tensor_flops_per_clock_per_sm is None,
            self.exp2_per_clock_per_sm is None,
            self.host_link_bytes_per_s is None,
            self.tdp_w is None,
            self.year is None,
        )
        shape = (tuple(self.peak_flops_per_s), tuple(self.matmul_efficiency), missing)
        keys = _FIGURE_KEYS.get(shape)
        if keys is None:
            keys = _FIGURE_KEYS[shape] = tuple(k for k, _ in self.figures())
        return keys

    def to_dict(self) -> dict[str, Any]:
        """The JSON record (bytes, bytes/s, FLOP/s; every figure's source under ``sources``)."""
        return {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "architecture": self.architecture,
            "form_factor": self.form_factor,
            "year": self.year,
            "aliases": list(self.aliases),
            "memory_bytes": self.memory_bytes,
            "memory_reported_bytes": self.memory_reported_bytes,
            "usable_memory_bytes": self.usable_memory_bytes,
            "memory_type": self.memory_type,
            "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
            "peak_flops_per_s": {d: self.peak_flops_per_s.get(d) for d in DTYPES},
            "matmul_efficiency": {d: self.matmul_efficiency[d] for d in DTYPES if d in self.matmul_efficiency},
            "interconnect": self.interconnect.to_dict() if self.interconnect else None,
            "scale_out_bytes_per_s_per_gpu": self.scale_out_bytes_per_s_per_gpu,
            "pcie_gen": self.pcie_gen,
            "pci_device_ids": list(self.pci_device_ids),
            "cublas_workspace_bytes": self.cublas_workspace_bytes,
            "fp8_gemm_any_layout": self.fp8_gemm_any_layout,
            "attention_flops_per_s": self.attention_flops_per_s,
            "low_power_rating": None
            if self.low_power_rating is None
            else {"power_w": self.low_power_rating[0], "peak_fraction": self.low_power_rating[1]},
            "fp16_accumulate_factor": self.fp16_accumulate_factor,
            "tensor_flops_per_clock_per_sm": self.tensor_flops_per_clock_per_sm,
            "exp2_per_clock_per_sm": self.exp2_per_clock_per_sm,
            "host_link_bytes_per_s": self.host_link_bytes_per_s,
            "sm_count": self.sm_count,
            "scale_up_domain_gpus": self.scale_up_domain_gpus,
            "unified_memory": self.unified_memory,
            "tdp_w": self.tdp_w,
            "origin": self.origin,
            "sources": self._figure_sources(),
        }
