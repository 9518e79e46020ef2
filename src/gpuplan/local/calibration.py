"""Calibration profiles: saved benchmark results, and what the planner takes from them.

A profile is JSON (schema_version 1, kind "calibration") with the host, the GPU, software versions, a
timestamp and the benchmark results. The planner replaces datasheet-derived efficiencies with measured
ones: the best-shape matmul fraction (the step-time model then applies its model-shape factor) and the
achieved share of memory bandwidth (training element-wise traffic and inference weight streaming).
"""

from __future__ import annotations

import json
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
    if not isinstance(data.get("results"), list):
        raise CatalogError(f"{path}: field 'results': expected a list of benchmark results")
    return data


def _fraction(profile: dict, name: str) -> float | None:
    for r in profile["results"]:
        if r.get("name") == name and isinstance(r.get("fraction_of_datasheet"), (int, float)):
            return float(r["fraction_of_datasheet"])
    return None


def apply_to_step(profile: dict, a, gpu_id: str):
    """StepAssumptions with the measured matmul (bf16) and memory fractions; plus what was replaced."""
    _check_gpu(profile, gpu_id)
    used = []
    mm = _fraction(profile, "matmul bf16")
    if mm:
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
