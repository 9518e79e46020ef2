"""Pure formulas: they take frozen specs and return frozen breakdowns; no I/O, no printing.

The names below are imported from their modules on first use (PEP 562): ``from gpuplan.estimate import
machine`` or ``gpuplan.estimate.inference`` then loads only what it needs (issue #12, start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "FlopsPerToken": "flops",
    "flops_per_token": "flops",
    "matmul_params": "flops",
    "ParamBreakdown": "params",
    "count_params": "params",
}

__all__ = ["FlopsPerToken", "ParamBreakdown", "count_params", "flops_per_token", "matmul_params"]

if TYPE_CHECKING:
    from .flops import FlopsPerToken, flops_per_token, matmul_params
    from .params import ParamBreakdown, count_params


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value
