"""The file schemas of the catalogs, validated with pydantic at the boundary.

Every problem in a file becomes one :class:`~gpuplan.errors.CatalogError` line naming the file, the
entry and the field. The formats are documented in docs/catalog-schema.md.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import CatalogError
from ..spec.accelerator import DTYPES

SCHEMA_VERSION = 1

_DATE = r"^\d{4}(-\d{2}(-\d{2})?)?$"
_ID = r"^[a-z0-9][a-z0-9._\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceEntry(_Strict):
    title: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(min_length=1)]
    date: Annotated[str, Field(pattern=_DATE)]


class InterconnectEntry(_Strict):
    kind: Annotated[str, Field(min_length=1)]
    bandwidth_bytes_per_s: Annotated[float, Field(gt=0)]
    links: Annotated[int, Field(gt=0)] | None = None


class AcceleratorEntry(_Strict):
    id: Annotated[str, Field(pattern=_ID)]
    name: Annotated[str, Field(min_length=1)]
    vendor: Literal["nvidia", "amd", "intel", "google", "other"]
    architecture: Annotated[str, Field(min_length=1)]
    form_factor: Annotated[str, Field(min_length=1)]
    year: Annotated[int, Field(ge=1990, le=2100)]
    aliases: list[Annotated[str, Field(min_length=1)]] = []
    memory_bytes: Annotated[int, Field(gt=0)]
    memory_reported_bytes: Annotated[int, Field(gt=0)] | None = None
    memory_type: Annotated[str, Field(min_length=1)]
    memory_bandwidth_bytes_per_s: Annotated[float, Field(gt=0)]
    tdp_w: Annotated[float, Field(gt=0)] | None = None  # Google publishes none for recent TPUs
    pcie_gen: Annotated[int, Field(ge=1, le=8)] | None = None
    pci_device_ids: list[Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{4}$")]] = []
    peak_flops_per_s: dict[Literal[DTYPES], Annotated[float, Field(gt=0)]]  # type: ignore[valid-type]
    interconnect: InterconnectEntry | None = None
    sources: dict[str, SourceEntry]
    notes: str | None = None

    @field_validator("peak_flops_per_s")
    @classmethod
    def _some_peak(cls, v: dict) -> dict:
        if not v:
            raise ValueError("give at least one dtype's dense peak, e.g. bf16 = 989.5e12")
        return v

    @model_validator(mode="after")
    def _sources(self) -> "AcceleratorEntry":
        if "default" not in self.sources:
            raise ValueError("sources needs a 'default' entry (title, url, date)")
        return self


class AcceleratorFile(_Strict):
    schema_version: Literal[1] = 1
    accelerator: list[dict[str, Any]]


class ModelEntry(_Strict):
    id: Annotated[str, Field(pattern=_ID)]
    name: Annotated[str, Field(min_length=1)]
    family: str = ""
    aliases: list[Annotated[str, Field(min_length=1)]] = []
    hf_id: str | None = None
    source: SourceEntry | None = None
    config_source: SourceEntry | None = None  # where `config` was copied from, when not `source`
    published_params: Annotated[int, Field(gt=0)] | None = None
    published_params_source: str | None = None
    published_params_rounded: bool = False
    published_active_params: Annotated[int, Field(gt=0)] | None = None
    published_active_params_rounded: bool = False
    published_active_params_source: str | None = None
    # parameters counted in published_params that the causal-LM model does not hold (a vision tower)
    published_params_excluded: dict[str, Annotated[int, Field(ge=0)]] | None = None
    # the Hub's safetensors total when it differs from the model (stored tied copies, MTP modules)
    hub_safetensors_params: Annotated[int, Field(gt=0)] | None = None
    transformers_params: Annotated[int, Field(gt=0)] | None = None
    notes: str | list[str] | None = None
    config: dict[str, Any]


class ModelFile(_Strict):
    schema_version: Literal[1] = 1
    models: list[dict[str, Any]]


def read_structured(path: Path) -> Any:
    """Parse a TOML or JSON file (by extension; JSON for anything not .toml)."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise CatalogError(f"{path}: can't read the file ({e.strerror or e})") from None
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(raw.decode("utf-8"))
        return json.loads(raw)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CatalogError(f"{path}: not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}: {e}") from None


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc)


def explain(err: ValidationError, where: str) -> CatalogError:
    """One line for the first problem pydantic found (and how many more there are)."""
    errors = err.errors()
    first = errors[0]
    loc = _field_path(first["loc"])
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field (check the spelling against docs/catalog-schema.md)"
    elif first["type"] == "missing":
        msg = "required field is missing"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    field = f" field '{loc}':" if loc else ""
    return CatalogError(f"{where}:{field} {msg}{more}")


def entry_label(raw: Any, index: int, kind: str) -> str:
    ident = raw.get("id") if isinstance(raw, dict) else None
    return f"{kind} '{ident}'" if isinstance(ident, str) else f"{kind} #{index + 1}"


def validate(model: type[BaseModel], data: Any, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise explain(e, where) from None
