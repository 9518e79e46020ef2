"""Catalogs: bundled data files plus the user's own, validated at load, looked up by id or alias.

The names below are imported from their modules on first use (PEP 562), so that ``gpuplan.catalog.cache``
or ``gpuplan.catalog.session`` can be imported alone (issue #12, start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "load_accelerators": "accelerators",
    "read_accelerator_file": "accelerators",
    "load_models": "models",
    "read_config_path": "models",
    "read_model_file": "models",
    "resolve_model": "models",
    "Registry": "registry",
}

__all__ = [
    "Registry",
    "load_accelerators",
    "load_models",
    "read_accelerator_file",
    "read_config_path",
    "read_model_file",
    "resolve_model",
]

if TYPE_CHECKING:
    from .accelerators import load_accelerators, read_accelerator_file
    from .models import load_models, read_config_path, read_model_file, resolve_model
    from .registry import Registry


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value
