"""The bundled error-band table (``data/bands.json``), read once per process.

The table is written by ``scripts/build_bands.py`` from the validation residuals (``gpuplan validate``);
:mod:`gpuplan.plan.bands` documents the method and looks bands up in it. Reading it is the only I/O of the
bands, kept here so ``plan/`` stays free of files. A missing or unreadable table gives ``None`` (every band
is then ``null`` in the records, with a note), never an error: the estimate itself does not depend on it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from .paths import DATA_DIR

BANDS_PATH = DATA_DIR / "bands.json"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


@functools.cache
def load_bands() -> dict[str, Any] | None:
    """The parsed ``data/bands.json`` (cached; treat it as read-only), or None when absent or unreadable."""
    try:
        data = json.loads(BANDS_PATH.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("families"), dict) else None
