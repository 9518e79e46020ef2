"""Calibration profiles: saved benchmark results, and what the planner takes from them.

A profile is JSON (schema_version 1, kind "calibration") with the host, the GPU, software versions, a
timestamp and the benchmark results. The planner replaces datasheet-derived efficiencies with measured
ones: the best-shape matmul fraction (the step-time model then applies its model-shape factor) and the
achieved share of memory bandwidth (training element-wise traffic and inference weight streaming).
"""

from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import replace
from pathlib import Path

from ..errors import CatalogError

SCHEMA_VERSION = 1


def make_profile(results: list[dict], gpu: dict | None, host: dict, versions: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "kind": "calibration",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": host, "gpu": gpu, "versions": versions,
            "python": platform.python_version(), "results": results}


def read_profile(path: Path) -> dict:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CatalogError(f"{path}: can't read the calibration file ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise CatalogError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict) or data.get("kind") != "calibration" or data.get("schema_version") != SCHEMA_VERSION:
        raise CatalogError(f"{path}: not a gpuplan calibration profile (write one with gpuplan local bench --save)")
    if not isinstance(data.get("results"), list) or not all(isinstance(r, dict) for r in data["results"]):
        raise CatalogError(f"{path}: field 'results': expected a list of benchmark results (objects)")
    if data.get("gpu") is not None and not isinstance(data["gpu"], dict):
        raise CatalogError(f"{path}: field 'gpu': expected an object or null")
    for i, r in enumerate(data["results"]):
        f = r.get("fraction_of_datasheet")
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f)
                              or not 0 < f <= 1.5):
            raise CatalogError(f"{path}: results[{i}].fraction_of_datasheet must be a number in (0, 1.5], got {f!r}")
    return data


def _result(profile: dict, name: str) -> dict | None:
    return next((r for r in profile["results"] if r.get("name") == name
                 and isinstance(r.get("fraction_of_datasheet"), (int, float))), None)


def _fraction(profile: dict, name: str) -> float | None:
    r = _result(profile, name)
    return float(r["fraction_of_datasheet"]) if r else None


def apply_to_step(profile: dict, a, gpu_id: str):
    """StepAssumptions with the measured matmul (bf16) and memory fractions; plus what was replaced."""
    _check_gpu(profile, gpu_id)
    used = []
    mm = _fraction(profile, "matmul bf16")
    if mm:
        if (_result(profile, "matmul bf16").get("detail") or {}).get("model_shapes"):
            # measured on the model's own GEMMs: the shape factor is already in the number
            a = replace(a, matmul_efficiency=min(1.0, mm))
            used.append(f"matmul: measured {mm:.1%} of bf16 peak on the model's own GEMM shapes")
        else:
            a = replace(a, matmul_efficiency=min(1.0, mm * a.model_shape_factor))
            used.append(f"matmul: measured {mm:.1%} of bf16 peak (x model_shape_factor {a.model_shape_factor:g})")
    mem = _fraction(profile, "memory copy")
    if mem:
        a = replace(a, hbm_efficiency=min(1.0, mem))
        used.append(f"memory bandwidth: measured {mem:.1%} of datasheet")
    return a, used


def apply_to_inference(profile: dict, a, gpu_id: str):
    """InferenceAssumptions with the measured memory-bandwidth fraction; plus what was replaced."""
    _check_gpu(profile, gpu_id)
    used = []
    mem = _fraction(profile, "memory copy")
    if mem:
        a = replace(a, memory_bandwidth_efficiency=min(1.0, mem))
        used.append(f"memory bandwidth: measured {mem:.1%} of datasheet")
    return a, used


def _check_gpu(profile: dict, gpu_id: str) -> None:
    measured = (profile.get("gpu") or {}).get("catalog_id")
    if measured and measured != gpu_id:
        raise CatalogError(f"the calibration profile was measured on {measured}, not {gpu_id}; plan for {measured} "
                           "or measure this GPU")
