"""gpuplan: plan and check the hardware for large-language-model training and inference.

The public API is re-exported here lazily, so ``import gpuplan`` (and the CLI's start-up) stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

_API = (
    "train",
    "serve",
    "tco",
    "gpus",
    "gpu",
    "compare_gpus",
    "offers",
    "models",
    "model",
    "local_detect",
    "local_bench",
    "local_watch",
    "local_diagnose",
    "validate",
    "plan_train",
    "plan_serve",
)

_EXPORTS = {
    **dict.fromkeys(_API, "gpuplan.api"),
    "Catalogs": "gpuplan.catalog.session",
    "GpuplanError": "gpuplan.errors",
    "Accelerator": "gpuplan.spec",
    "ModelSpec": "gpuplan.spec",
    "ParamsOnlyModel": "gpuplan.spec",
    "load_accelerators": "gpuplan.catalog",
    "load_models": "gpuplan.catalog",
    "resolve_model": "gpuplan.catalog",
    "count_params": "gpuplan.estimate",
    "flops_per_token": "gpuplan.estimate",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gpuplan' has no attribute {name!r}")
