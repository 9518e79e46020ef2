"""A cloud (or on-premise) offer: an instance of some GPUs at a price, dated and sourced.

Besides the price, an offer may describe the machine around the GPUs: host vCPUs and RAM, local NVMe (size and,
where published, bandwidth), the scale-out NICs (kind and the node's total bandwidth) and the scale-up link
(NVLink / NVSwitch, in words; and in numbers, ``scale_up_bytes_per_s_per_gpu`` and ``scale_up_domain_gpus``, where
the instance's link differs from the accelerator's typical one: a PCIe-only server of SXM-class GPUs, NVLink
pairs). Each of those figures is optional: absent means "not published in a source read",
never zero, and the machine block reports it as unknown. ``local_nvme_bytes = 0`` is a sourced figure (the
instance has no local instance store, e.g. AWS "EBS only"). Each figure names its source
(:meth:`Offer.source_for`): its own ``sources`` entry, else ``sources["hardware"]``, else the price's source.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from .accelerator import Source

#: The kinds of scale-out network an offer's ``nic_kind`` may name: AWS Elastic Fabric Adapter, InfiniBand,
#: RDMA over Converged Ethernet, Google's GPUDirect-TCPX (A3 High) and -TCPXO (A3 Mega), plain Ethernet
#: (TCP, no GPU-direct RDMA).
NIC_KINDS = ("efa", "infiniband", "roce", "gpudirect-tcpx", "gpudirect-tcpxo", "ethernet")

#: The hardware figures of an offer that carry a source of their own (``sources`` keys; "hardware" covers all).
HARDWARE_FIELDS = (
    "vcpus",
    "host_memory_bytes",
    "local_nvme_bytes",
    "local_nvme_read_bytes_per_s",
    "local_nvme_write_bytes_per_s",
    "nic_kind",
    "scale_out_bytes_per_s",
    "scale_up",
    "scale_up_bytes_per_s_per_gpu",
    "scale_up_domain_gpus",
)

_NO_SOURCES: Mapping[str, Source] = MappingProxyType({})
_hardware_values = attrgetter(*HARDWARE_FIELDS)


@dataclass(frozen=True)
class Offer:
    """One dated, sourced price: an instance of ``gpu_count`` GPUs from a provider in a region."""

    id: str
    provider: str
    instance: str
    region: str
    gpu: str
    gpu_count: int
    usd_per_hour: float
    pricing: str
    price_date: str
    source: Source
    vcpus: int | None = None
    host_memory_bytes: int | None = None
    scale_up: str | None = None
    scale_out_bytes_per_s: float | None = None  # the node's total scale-out bandwidth (all NICs), bytes/s
    notes: str | None = None
    origin: str = "built-in"
    local_nvme_bytes: int | None = None  # 0: no local instance store (sourced); None: not known
    local_nvme_read_bytes_per_s: float | None = None  # the node's local NVMe, all drives, where published
    local_nvme_write_bytes_per_s: float | None = None
    nic_kind: str | None = None  # one of NIC_KINDS
    # the GPU-to-GPU link inside the instance, where it differs from the accelerator's typical one: per GPU and
    # direction, bytes/s (NVLink / NVSwitch, Infinity Fabric), and how many GPUs share it at that bandwidth
    # (1: no such link, the GPUs reach each other over PCIe)
    scale_up_bytes_per_s_per_gpu: float | None = None
    scale_up_domain_gpus: int | None = None
    sources: Mapping[str, Source] = field(default_factory=lambda: _NO_SOURCES)

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpu_count

    @property
    def scale_out_bytes_per_s_per_gpu(self) -> float | None:
        """The NIC bandwidth per GPU: the node's total over its GPUs (what the step-time model takes; None
        when the node's figure is not known)."""
        return self.scale_out_bytes_per_s / self.gpu_count if self.scale_out_bytes_per_s else None

    @property
    def aliases(self) -> tuple[str, ...]:
        return ()

    def source_for(self, field_name: str) -> Source:
        """The source of one hardware figure: its own ``sources`` entry, else ``sources["hardware"]``, else the
        price's source."""
        return self.sources.get(field_name) or self.sources.get("hardware") or self.source

    def hardware_sources(self) -> dict[str, dict[str, str]]:
        """The source of each hardware figure the offer gives (field name -> title, url, date)."""
        values = _hardware_values(self)
        if values.count(None) == len(values):  # the usual quote: no hardware figures
            return {}
        return {
            name: self.source_for(name).to_dict()
            for name, v in zip(HARDWARE_FIELDS, values, strict=True)
            if v is not None
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "instance": self.instance,
            "region": self.region,
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "vcpus": self.vcpus,
            "host_memory_bytes": self.host_memory_bytes,
            "local_nvme_bytes": self.local_nvme_bytes,
            "local_nvme_read_bytes_per_s": self.local_nvme_read_bytes_per_s,
            "local_nvme_write_bytes_per_s": self.local_nvme_write_bytes_per_s,
            "nic_kind": self.nic_kind,
            "scale_up": self.scale_up,
            "scale_up_bytes_per_s_per_gpu": self.scale_up_bytes_per_s_per_gpu,
            "scale_up_domain_gpus": self.scale_up_domain_gpus,
            "scale_out_bytes_per_s": self.scale_out_bytes_per_s,
            "scale_out_bytes_per_s_per_gpu": self.scale_out_bytes_per_s_per_gpu,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "pricing": self.pricing,
            "price_date": self.price_date,
            "source": self.source.to_dict(),
            "hardware_sources": self.hardware_sources(),
            "notes": self.notes,
            "origin": self.origin,
        }
