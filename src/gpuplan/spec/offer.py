"""A cloud (or on-premise) offer: an instance of some GPUs at a price, dated and sourced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .accelerator import Source


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
    scale_out_bytes_per_s: float | None = None
    notes: str | None = None
    origin: str = "built-in"

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpu_count

    @property
    def aliases(self) -> tuple[str, ...]:
        return ()

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
            "scale_up": self.scale_up,
            "scale_out_bytes_per_s": self.scale_out_bytes_per_s,
            "usd_per_hour": self.usd_per_hour,
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "pricing": self.pricing,
            "price_date": self.price_date,
            "source": self.source.to_dict(),
            "notes": self.notes,
            "origin": self.origin,
        }
