"""The ownership (rent-vs-buy) defaults: purchase prices and cost rates, each with its source."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..errors import CatalogError
from .entries import _Strict, validate
from .paths import DATA_DIR
from .schema import read_structured

BUNDLED_FILE = DATA_DIR / "ownership.toml"
_DATE_OR_ND = r"^(\d{4}(-\d{2}(-\d{2})?)?|n\.d\.)$"


class _Src(_Strict):
    title: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(min_length=1)]
    date: Annotated[str, Field(pattern=_DATE_OR_ND)]
    note: str | None = None


class Purchase(_Strict):
    gpu: Annotated[str, Field(min_length=1)]
    usd_per_gpu: Annotated[float, Field(gt=0, le=1e9)]
    server_usd_per_gpu: Annotated[float, Field(ge=0, le=1e9)] = 0.0
    kind: Literal["list price", "street estimate", "analyst estimate", "launch price"] | str
    date: Annotated[str, Field(pattern=_DATE_OR_ND)]
    source: _Src
    notes: str | None = None


class Defaults(_Strict):
    pue: Annotated[float, Field(ge=1, le=1e3)]
    usd_per_kwh: Annotated[float, Field(ge=0, le=1e9)]
    host_power_factor: Annotated[float, Field(ge=1, le=1e3)]
    server_overhead_fraction: Annotated[float, Field(ge=0, le=1e9)]
    hosting_usd_per_kw_month: Annotated[float, Field(ge=0, le=1e9)]
    depreciation_years: Annotated[float, Field(gt=0, le=1e9)]
    cost_of_capital: Annotated[float, Field(ge=0, le=1e9)]


class OwnershipFile(_Strict):
    schema_version: Literal[1] = 1
    purchase: list[Purchase]
    defaults: Defaults
    defaults_sources: dict[str, _Src]


def load_ownership() -> OwnershipFile:
    doc = validate(OwnershipFile, read_structured(BUNDLED_FILE), str(BUNDLED_FILE))
    missing = set(Defaults.model_fields) - set(doc.defaults_sources)
    if missing:
        raise CatalogError(f"{BUNDLED_FILE}: defaults without a source: {', '.join(sorted(missing))}")
    return doc
