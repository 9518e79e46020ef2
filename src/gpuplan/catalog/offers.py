"""The offers catalog: bundled cloud prices plus the user's quotes, validated against the accelerators."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import CatalogError, GpuplanError
from ..spec.accelerator import Accelerator, Source
from ..spec.choices import Pricing, values
from ..spec.offer import Offer
from . import cache
from .paths import DATA_DIR, user_files
from .registry import Registry
from .schema import Skipped, entry_label, read_entries, skip_or_raise, without_gc

if TYPE_CHECKING:
    from .entries import OfferEntry, OfferFile  # noqa: F401 - forwarded by __getattr__

BUNDLED_FILE = DATA_DIR / "offers.toml"
LIST_HINT = "'gpuplan offers list' shows them all"
PRICING = values(Pricing)


def __getattr__(name: str) -> Any:
    # the row schema lives with the other pydantic models (entries.py), imported on first use
    if name in ("OfferEntry", "OfferFile"):
        from . import entries

        return getattr(entries, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_offer_file(
    path: Path, known_gpus: Registry[Accelerator], origin: str | None = None, *, skipped: list[Skipped] | None = None
) -> list[Offer]:
    """Read and check one offers file: valid rows, known GPUs, unique ids, spot never above on-demand.

    Strict by default; with a ``skipped`` list a broken row is noted there and left out (see
    ``read_accelerator_file``).
    """
    return list(_cached_file(path, known_gpus, origin, skipped=skipped))


def _cached_file(
    path: Path, known_gpus: Registry[Accelerator], origin: str | None = None, *, skipped: list[Skipped] | None = None
) -> Sequence[Offer]:
    """``read_offer_file`` as the registry takes it: a large file's entries built when first used."""
    fingerprint = getattr(known_gpus, "fingerprint", None)  # what the GPU names were checked against
    if fingerprint is None:
        return _read_offer_file(Path(path), origin, skipped, known_gpus)
    return cache.cached_entries(
        "offers",
        Path(path),
        _read_offer_file,
        origin,
        skipped,
        known_gpus,
        extra=fingerprint,
        still=lambda: getattr(known_gpus, "fingerprint", None) == fingerprint,  # a deferred registry, once loaded
    )


def _read_offer_file(
    path: Path, origin: str | None, skipped: list[Skipped] | None, known_gpus: Registry[Accelerator]
) -> list[Offer]:
    from .entries import OfferEntry, OfferFile, validate

    data, left_out = read_entries(path, ("offer",), skipped)
    if not isinstance(data, dict):
        raise CatalogError(
            f"{path}: expected a table (object) with an 'offer' list at the top level, "
            f"got {type(data).__name__}; see docs/offers-schema.md"
        )
    doc = validate(OfferFile, data, str(path))
    out: list[Offer] = []
    seen: set[str] = set()
    raws: dict[str, dict[Any, Any]] = {}
    for i, raw in enumerate(doc.offer):
        if i in left_out:
            continue
        where = f"{path}: {entry_label(raw, i, 'offer')}"
        try:
            e = validate(OfferEntry, raw, where)
            if e.id in seen:
                raise CatalogError(f"{path}: offer '{e.id}' appears twice; ids must be unique")
            gpu_id = _gpu_id(known_gpus, e.gpu, where)
        except CatalogError as err:
            skip_or_raise(err, raw, skipped)
            continue
        offer = Offer(
            id=e.id,
            provider=e.provider,
            instance=e.instance,
            region=e.region,
            gpu=gpu_id,
            gpu_count=e.gpu_count,
            usd_per_hour=e.usd_per_hour,
            pricing=e.pricing,
            price_date=e.price_date,
            source=Source(e.source.title, e.source.url, e.source.date),
            vcpus=e.vcpus,
            host_memory_bytes=e.host_memory_bytes,
            scale_up=e.scale_up,
            scale_out_bytes_per_s=e.scale_out_bytes_per_s,
            notes=e.notes,
            origin=origin or str(path),
            local_nvme_bytes=e.local_nvme_bytes,
            local_nvme_read_bytes_per_s=e.local_nvme_read_bytes_per_s,
            local_nvme_write_bytes_per_s=e.local_nvme_write_bytes_per_s,
            nic_kind=e.nic_kind,
            scale_up_bytes_per_s_per_gpu=e.scale_up_bytes_per_s_per_gpu,
            scale_up_domain_gpus=e.scale_up_domain_gpus,
            sources=MappingProxyType({k: Source(v.title, v.url, v.date) for k, v in e.sources.items()})
            if e.sources
            else MappingProxyType({}),
        )
        seen.add(e.id)
        raws[e.id] = raw
        out.append(offer)
    bad: set[str] = set()
    for problem, ids in _consistency_problems(out, path):
        for offer_id in ids:
            if offer_id not in bad:
                skip_or_raise(problem, raws[offer_id], skipped)
                bad.add(offer_id)
    return [o for o in out if o.id not in bad] if bad else out


def _gpu_id(known_gpus: Registry[Accelerator], name: str, where: str) -> str:
    """The canonical id of an offer's accelerator; CatalogError (naming the field) when it is not one."""
    problem = known_gpus.problem_for(name)
    if problem is not None:
        raise CatalogError(f"{where}: field 'gpu': accelerator '{name}' could not be read ({problem})")
    if not known_gpus.matches(name):
        raise CatalogError(f"{where}: field 'gpu': unknown accelerator '{name}' ({known_gpus.list_hint})")
    try:
        return known_gpus.get(name).id
    except GpuplanError as err:  # an alias of several accelerators
        raise CatalogError(f"{where}: field 'gpu': {err}") from None


def _consistency_problems(offers: list[Offer], path: Path) -> list[tuple[CatalogError, list[str]]]:
    """Same instance and region: one GPU count, and spot never above on-demand; no duplicate rows.
    Each problem comes with the ids of the rows it concerns."""
    by_instance: dict[tuple[str, str, str], list[Offer]] = {}
    for o in offers:
        by_instance.setdefault((o.provider, o.instance, o.region), []).append(o)
    problems: list[tuple[CatalogError, list[str]]] = []
    for (provider, instance, region), rows in by_instance.items():
        if len(rows) == 1:
            continue
        counts = {r.gpu_count for r in rows}
        if len(counts) > 1:
            problems.append(
                (
                    CatalogError(
                        f"{path}: {provider} {instance} in {region} is listed with {sorted(counts)} "
                        "GPUs; one instance has one GPU count"
                    ),
                    [r.id for r in rows],
                )
            )
            continue
        first: dict[tuple[str, float, str], str] = {}
        dupes = []
        for r in rows:
            k = (r.pricing, r.usd_per_hour, r.price_date)
            if k in first:
                dupes.append(r.id)
            else:
                first[k] = r.id
        if dupes:
            problems.append(
                (
                    CatalogError(f"{path}: {provider} {instance} in {region} has duplicate rows (offer '{dupes[0]}')"),
                    dupes,
                )
            )
        on_demand = min((r.usd_per_hour for r in rows if r.pricing == "on-demand"), default=None)
        for r in rows:
            if r.pricing == "spot" and on_demand is not None and r.usd_per_hour > on_demand:
                problems.append(
                    (
                        CatalogError(
                            f"{path}: offer '{r.id}': spot ${r.usd_per_hour:g}/h is above on-demand "
                            f"${on_demand:g}/h for the same instance"
                        ),
                        [r.id],
                    )
                )
    return problems


@without_gc
def load_offers(accelerators: Registry[Accelerator], extra_files: Iterable[Path] = ()) -> Registry[Offer]:
    """Bundled offers, then the user's offers.toml/json, then ``extra_files``; later ids override earlier.

    A broken file or row in the user's directory is left out and noted in the registry's ``problems``
    (looking its id up raises its error); a broken ``extra_files`` file raises CatalogError.
    """
    reg: Registry[Offer] = Registry("offer", LIST_HINT)
    if BUNDLED_FILE.is_file():
        reg.add_all(_cached_file(BUNDLED_FILE, accelerators, "built-in"))
    files, problems = user_files("offers.toml", "offers.json")
    extra_files = [Path(p) for p in extra_files]
    reg.add_files(
        lambda path, skipped=None: _cached_file(path, accelerators, skipped=skipped),
        files,
        problems,
        extra_files,
    )
    idents = [cache.file_identity(p) for p in (BUNDLED_FILE, *files, *extra_files)]
    gpus = getattr(accelerators, "fingerprint", None)
    if None not in idents and gpus is not None:
        reg.fingerprint = (tuple(idents), tuple(str(p) for p in problems), len(files), len(extra_files), gpus)
    return reg
