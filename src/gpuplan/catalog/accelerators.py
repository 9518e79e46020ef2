"""The accelerator catalog: bundled data plus the user's files, validated, with id/alias lookup."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..errors import CatalogError
from ..spec.accelerator import Accelerator, Interconnect, Source
from .paths import DATA_DIR, user_config_dir
from .registry import Registry
from .schema import AcceleratorEntry, AcceleratorFile, entry_label, read_structured, validate

BUNDLED_FILE = DATA_DIR / "accelerators.toml"
LIST_HINT = "'gpuplan gpus list' shows them all"


def _to_spec(e: AcceleratorEntry, origin: str) -> Accelerator:
    return Accelerator(
        id=e.id, name=e.name, vendor=e.vendor, architecture=e.architecture, form_factor=e.form_factor,
        year=e.year, aliases=tuple(e.aliases), memory_bytes=e.memory_bytes,
        memory_reported_bytes=e.memory_reported_bytes, memory_type=e.memory_type,
        memory_bandwidth_bytes_per_s=float(e.memory_bandwidth_bytes_per_s), tdp_w=float(e.tdp_w) if e.tdp_w is not None else None,
        pcie_gen=e.pcie_gen, pci_device_ids=tuple(x.lower() for x in e.pci_device_ids),
        peak_flops_per_s={k: float(v) for k, v in e.peak_flops_per_s.items()},
        interconnect=Interconnect(e.interconnect.kind, float(e.interconnect.bandwidth_bytes_per_s),
                                  e.interconnect.links) if e.interconnect else None,
        sources={k: Source(s.title, s.url, s.date) for k, s in e.sources.items()},
        origin=origin,
    )


def read_accelerator_file(path: Path, origin: str | None = None) -> list[Accelerator]:
    """Read and validate one accelerator file (TOML or JSON, schema in docs/catalog-schema.md)."""
    path = Path(path)
    data = read_structured(path)
    if isinstance(data, dict) and "accelerator" not in data and "accelerators" in data:
        data = {**{k: v for k, v in data.items() if k != "accelerators"}, "accelerator": data["accelerators"]}
    doc = validate(AcceleratorFile, data, str(path))
    out: list[Accelerator] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.accelerator):
        entry = validate(AcceleratorEntry, raw, f"{path}: {entry_label(raw, i, 'accelerator')}")
        if entry.id in seen:
            raise CatalogError(f"{path}: accelerator '{entry.id}' appears twice; ids must be unique")
        seen.add(entry.id)
        out.append(_to_spec(entry, origin or str(path)))
    return out


def user_accelerator_files() -> list[Path]:
    d = user_config_dir()
    return [p for p in (d / "accelerators.toml", d / "accelerators.json") if p.is_file()]


def load_accelerators(extra_files: Iterable[Path] = ()) -> Registry[Accelerator]:
    """Bundled accelerators, then the user's directory, then ``extra_files``; later ids override earlier."""
    reg: Registry[Accelerator] = Registry("accelerator", LIST_HINT, read_accelerator_file(BUNDLED_FILE, "built-in"))
    for path in [*user_accelerator_files(), *map(Path, extra_files)]:
        for acc in read_accelerator_file(path):
            reg.add(acc)
    return reg
