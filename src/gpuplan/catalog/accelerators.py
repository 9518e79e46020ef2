"""The accelerator catalog: bundled data plus the user's files, validated, with id/alias lookup."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CatalogError
from ..spec.accelerator import ESTIMATED, Accelerator, Interconnect, Source
from . import cache
from .paths import DATA_DIR, user_files
from .registry import Registry
from .schema import Skipped, entry_label, read_entries, skip_or_raise, without_gc

if TYPE_CHECKING:
    from .entries import AcceleratorEntry, SourceEntry

BUNDLED_FILE = DATA_DIR / "accelerators.toml"
LIST_HINT = "'gpuplan gpus list' shows them all"


def _source(s: SourceEntry) -> Source:
    """A source as outputs cite it: a derived figure's title says "estimated, not measured" and how."""
    if s.derivation is None:
        return Source(s.title, s.url, s.date)
    return Source(f"{ESTIMATED} ({s.derivation}); after: {s.title}", s.url, s.date, s.derivation)


def _to_spec(e: AcceleratorEntry, origin: str) -> Accelerator:
    return Accelerator(
        id=e.id,
        name=e.name,
        vendor=e.vendor,
        architecture=e.architecture,
        form_factor=e.form_factor,
        year=e.year,
        aliases=tuple(e.aliases),
        memory_bytes=e.memory_bytes,
        memory_reported_bytes=e.memory_reported_bytes,
        memory_type=e.memory_type,
        memory_bandwidth_bytes_per_s=float(e.memory_bandwidth_bytes_per_s),
        tdp_w=float(e.tdp_w) if e.tdp_w is not None else None,
        pcie_gen=e.pcie_gen,
        pci_device_ids=tuple(x.lower() for x in e.pci_device_ids),
        peak_flops_per_s={k: float(v) for k, v in e.peak_flops_per_s.items()},
        interconnect=Interconnect(
            e.interconnect.kind, float(e.interconnect.bandwidth_bytes_per_s), e.interconnect.links
        )
        if e.interconnect
        else None,
        matmul_efficiency={k: float(v) for k, v in e.matmul_efficiency.items()},
        cublas_workspace_bytes=e.cublas_workspace_bytes,
        scale_out_bytes_per_s_per_gpu=float(e.scale_out_bytes_per_s_per_gpu)
        if e.scale_out_bytes_per_s_per_gpu is not None
        else None,
        fp8_gemm_any_layout=e.fp8_gemm_any_layout,
        attention_flops_per_s=float(e.attention_flops_per_s) if e.attention_flops_per_s is not None else None,
        low_power_rating=(float(e.low_power_rating.power_w), float(e.low_power_rating.peak_fraction))
        if e.low_power_rating is not None
        else None,
        fp16_accumulate_factor=float(e.fp16_accumulate_factor) if e.fp16_accumulate_factor is not None else None,
        tensor_flops_per_clock_per_sm=float(e.tensor_flops_per_clock_per_sm)
        if e.tensor_flops_per_clock_per_sm is not None
        else None,
        exp2_per_clock_per_sm=float(e.exp2_per_clock_per_sm) if e.exp2_per_clock_per_sm is not None else None,
        host_link_bytes_per_s=float(e.host_link_bytes_per_s) if e.host_link_bytes_per_s is not None else None,
        sm_count=e.sm_count,
        scale_up_domain_gpus=e.scale_up_domain_gpus,
        unified_memory=e.unified_memory,
        sources={k: _source(s) for k, s in e.sources.items()},
        origin=origin,
    )


def read_accelerator_file(
    path: Path, origin: str | None = None, *, skipped: list[Skipped] | None = None
) -> list[Accelerator]:
    """Read and validate one accelerator file (TOML or JSON, schema in docs/catalog-schema.md).

    Strict by default: the first problem raises CatalogError. With a ``skipped`` list, a broken entry is
    noted there and left out instead (the user's config folder must not stop every command); a file that
    cannot be read at all still raises. The result is kept in the catalog cache (cache.py).
    """
    return list(_cached_file(path, origin, skipped=skipped))


def _cached_file(
    path: Path, origin: str | None = None, *, skipped: list[Skipped] | None = None
) -> Sequence[Accelerator]:
    """``read_accelerator_file`` as the registry takes it: a large file's entries built when first used."""
    return cache.cached_entries("accelerators", Path(path), _read_accelerator_file, origin, skipped)


def _read_accelerator_file(path: Path, origin: str | None, skipped: list[Skipped] | None) -> list[Accelerator]:
    from .entries import AcceleratorEntry, AcceleratorFile, validate  # pydantic: only when a file is validated

    data, left_out = read_entries(path, ("accelerator", "accelerators"), skipped)
    if isinstance(data, dict) and "accelerator" not in data and "accelerators" in data:
        data = {**{k: v for k, v in data.items() if k != "accelerators"}, "accelerator": data["accelerators"]}
    if not isinstance(data, dict):
        raise CatalogError(
            f"{path}: expected a table (object) with an 'accelerator' list at the top level, "
            f"got {type(data).__name__}; see docs/catalog-schema.md"
        )
    doc = validate(AcceleratorFile, data, str(path))
    out: list[Accelerator] = []
    seen: set[str] = set()
    where_origin = origin or str(path)
    for i, raw in enumerate(doc.accelerator):
        if i in left_out:
            continue
        try:
            entry = validate(AcceleratorEntry, raw, f"{path}: {entry_label(raw, i, 'accelerator')}")
            if entry.id in seen:
                raise CatalogError(f"{path}: accelerator '{entry.id}' appears twice; ids must be unique")
        except CatalogError as e:
            skip_or_raise(e, raw, skipped)
            continue
        seen.add(entry.id)
        out.append(_to_spec(entry, where_origin))
    return out


@without_gc
def load_accelerators(extra_files: Iterable[Path] = ()) -> Registry[Accelerator]:
    """Bundled accelerators, then the user's directory, then ``extra_files``; later ids override earlier.

    A broken file or entry in the user's directory is left out and noted in the registry's ``problems``
    (and looking its id up raises its error); a broken ``extra_files`` file raises CatalogError.
    """
    reg: Registry[Accelerator] = Registry("accelerator", LIST_HINT, read_accelerator_file(BUNDLED_FILE, "built-in"))
    files, problems = user_files("accelerators.toml", "accelerators.json")
    extra_files = [Path(p) for p in extra_files]
    reg.add_files(_cached_file, files, problems, extra_files)
    reg.fingerprint = _fingerprint(files, problems, extra_files)
    return reg


def _fingerprint(files: list[Path], problems: list[CatalogError], extra_files: list[Path]) -> tuple[object, ...] | None:
    idents = [cache.file_identity(p) for p in (BUNDLED_FILE, *files, *extra_files)]
    if None in idents:
        return None
    return (tuple(idents), tuple(str(p) for p in problems), len(files), len(extra_files))


def accelerators_fingerprint(extra_files: Iterable[Path] = ()) -> tuple[object, ...] | None:
    """The ``fingerprint`` that ``load_accelerators(extra_files)`` would give its registry, from the files'
    identities alone (nothing is read): what offers were checked against, known without loading 100,000
    accelerators to list offers."""
    files, problems = user_files("accelerators.toml", "accelerators.json")
    return _fingerprint(files, problems, [Path(p) for p in extra_files])
