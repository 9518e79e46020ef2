"""The published figures gpuplan is scored against, bundled with the package.

``data/validation/*.json`` are verbatim copies of the project's validation set (papers' tables, datasheets,
vendor and framework benchmarks), each record with its ``source`` (title, location, url) and the
confidence of every value; ``data/validation/README.md`` explains the fields. Tests and (later)
``gpuplan validate`` read them from here, so a plain clone or an installed wheel has everything it needs.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ..errors import CatalogError
from .paths import DATA_DIR

VALIDATION_DIR = DATA_DIR / "validation"


def validation_stems() -> tuple[str, ...]:
    """The names of the bundled validation files, without ``.json``."""
    return tuple(sorted(p.stem for p in VALIDATION_DIR.glob("*.json")))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


@functools.cache
def _load(stem: str) -> str:
    path = VALIDATION_DIR / f"{stem}.json"
    if not path.is_file():
        raise CatalogError(f"no bundled validation file '{stem}'; there are: {', '.join(validation_stems())}")
    return path.read_text(encoding="utf-8")


def load_validation(stem: str) -> dict[str, Any]:
    """One validation file by stem (``load_validation("training_compute")``): a fresh dict each call."""
    try:
        data = json.loads(_load(stem), parse_constant=_no_constant)
    except ValueError as e:
        raise CatalogError(f"{VALIDATION_DIR / stem}.json: not valid JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise CatalogError(f"{VALIDATION_DIR / stem}.json: expected an object with a 'records' list")
    return data
