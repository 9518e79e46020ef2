"""Frozen value types shared by every layer: accelerators, models, sources.

The names below are imported from their modules on first use (PEP 562), so that importing one light module
of the package (``gpuplan.spec.choices``, which the CLI reads to build ``--help``) does not build every
dataclass of the others: each costs about half a millisecond of start-up (issue #12).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "DTYPES": "accelerator",
    "Accelerator": "accelerator",
    "Interconnect": "accelerator",
    "Source": "accelerator",
    "ModelSpec": "model",
    "ParamsOnlyModel": "model",
}

__all__ = ["DTYPES", "Accelerator", "Interconnect", "ModelSpec", "ParamsOnlyModel", "Source"]

if TYPE_CHECKING:
    from .accelerator import DTYPES, Accelerator, Interconnect, Source
    from .model import ModelSpec, ParamsOnlyModel


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value
