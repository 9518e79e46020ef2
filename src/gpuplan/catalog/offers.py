"""The offers catalog: bundled cloud prices plus the user's quotes, validated against the accelerators."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Iterable, Literal

from pydantic import Field

from ..errors import CatalogError
from ..spec.accelerator import Source
from ..spec.offer import Offer
from .paths import DATA_DIR, user_config_dir
from .registry import Registry
from .schema import _DATE, _ID, SourceEntry, _Strict, entry_label, read_structured, validate

BUNDLED_FILE = DATA_DIR / "offers.toml"
LIST_HINT = "'gpuplan offers list' shows them all"
PRICING = ("on-demand", "spot", "reserved-1y", "reserved-3y", "subscription", "quote")


class OfferEntry(_Strict):
    id: Annotated[str, Field(pattern=_ID)]
    provider: Annotated[str, Field(min_length=1)]
    instance: Annotated[str, Field(min_length=1)]
    region: Annotated[str, Field(min_length=1)]
    gpu: Annotated[str, Field(min_length=1)]
    gpu_count: Annotated[int, Field(gt=0)]
    vcpus: Annotated[int, Field(gt=0)] | None = None
    host_memory_bytes: Annotated[int, Field(gt=0)] | None = None
    scale_up: str | None = None
    scale_out_bytes_per_s: Annotated[float, Field(gt=0)] | None = None
    usd_per_hour: Annotated[float, Field(gt=0)]
    pricing: Literal[PRICING]  # type: ignore[valid-type]
    price_date: Annotated[str, Field(pattern=_DATE)]
    source: SourceEntry
    notes: str | None = None


class OfferFile(_Strict):
    schema_version: Literal[1] = 1
    offer: list[dict]


def read_offer_file(path: Path, known_gpus: Registry, origin: str | None = None) -> list[Offer]:
    """Read and check one offers file: valid rows, known GPUs, unique ids, spot never above on-demand."""
    path = Path(path)
    doc = validate(OfferFile, read_structured(path), str(path))
    out: list[Offer] = []
    seen: dict[str, Offer] = {}
    for i, raw in enumerate(doc.offer):
        where = f"{path}: {entry_label(raw, i, 'offer')}"
        e = validate(OfferEntry, raw, where)
        if e.id in seen:
            raise CatalogError(f"{path}: offer '{e.id}' appears twice; ids must be unique")
        if not known_gpus.matches(e.gpu):
            raise CatalogError(f"{where}: field 'gpu': unknown accelerator '{e.gpu}' ({known_gpus.list_hint})")
        gpu_id = known_gpus.get(e.gpu).id
        offer = Offer(id=e.id, provider=e.provider, instance=e.instance, region=e.region, gpu=gpu_id,
                      gpu_count=e.gpu_count, usd_per_hour=e.usd_per_hour, pricing=e.pricing, price_date=e.price_date,
                      source=Source(e.source.title, e.source.url, e.source.date), vcpus=e.vcpus,
                      host_memory_bytes=e.host_memory_bytes, scale_up=e.scale_up,
                      scale_out_bytes_per_s=e.scale_out_bytes_per_s, notes=e.notes, origin=origin or str(path))
        seen[e.id] = offer
        out.append(offer)
    _check_consistency(out, path)
    return out


def _check_consistency(offers: list[Offer], path: Path) -> None:
    """Same instance and region: one GPU count, and spot never above on-demand; no duplicate rows."""
    by_instance: dict[tuple[str, str, str], list[Offer]] = {}
    for o in offers:
        by_instance.setdefault((o.provider, o.instance, o.region), []).append(o)
    for (provider, instance, region), rows in by_instance.items():
        counts = {r.gpu_count for r in rows}
        if len(counts) > 1:
            raise CatalogError(f"{path}: {provider} {instance} in {region} is listed with {sorted(counts)} GPUs; "
                               "one instance has one GPU count")
        keys = [(r.pricing, r.usd_per_hour, r.price_date) for r in rows]
        if len(keys) != len(set(keys)):
            raise CatalogError(f"{path}: {provider} {instance} in {region} has duplicate rows")
        on_demand = [r.usd_per_hour for r in rows if r.pricing == "on-demand"]
        for r in rows:
            if r.pricing == "spot" and on_demand and r.usd_per_hour > min(on_demand):
                raise CatalogError(f"{path}: offer '{r.id}': spot ${r.usd_per_hour:g}/h is above on-demand "
                                   f"${min(on_demand):g}/h for the same instance")


def load_offers(accelerators: Registry, extra_files: Iterable[Path] = ()) -> Registry[Offer]:
    """Bundled offers, then the user's offers.toml/json, then ``extra_files``; later ids override earlier."""
    reg: Registry[Offer] = Registry("offer", LIST_HINT)
    if BUNDLED_FILE.is_file():
        for o in read_offer_file(BUNDLED_FILE, accelerators, "built-in"):
            reg.add(o)
    d = user_config_dir()
    for path in [p for p in (d / "offers.toml", d / "offers.json") if p.is_file()] + list(map(Path, extra_files)):
        for o in read_offer_file(path, accelerators):
            reg.add(o)
    return reg
