"""Calibration profiles: saved benchmark results, and what the planner takes from them.

A profile is JSON (schema_version 1, kind "calibration") with the host, the GPU, software versions, a
timestamp and the benchmark results. The planner replaces datasheet-derived efficiencies with measured
ones, each only where the profile measured it on a GPU, and never one the user set with ``--assume``:

- matmuls, in the dtype the plan's matmuls run in (``train``: ``estimate.time.training_dtype`` of the
  precision; ``serve``: ``estimate.inference.compute_dtype`` of the weight format). A rate measured on the
  planned model's own GEMM shapes (``detail.model`` equal to the model's id, with ``detail.model_shapes``)
  is used as is; any other rate (the best shape, or another model's shapes) is a best-shape figure that
  the step-time model's ``model_shape_factor`` scales down to a model's shapes. ``train`` sets
  ``matmul_efficiency``; ``serve`` sets ``compute_efficiency`` (its default, 0.45, is a fraction of the
  dense peak too, fitted to served prefill).
- ``memory copy`` (read + write bandwidth over the datasheet HBM bandwidth): ``train``'s ``hbm_efficiency``
  (element-wise traffic) and ``serve``'s ``memory_bandwidth_efficiency`` (weight and KV streaming).
- an intra-node ``all_reduce`` on 2 or more ranks (bus bandwidth over the catalog's per-direction scale-up
  bandwidth), at the largest payload measured: ``link_efficiency`` of both models.

Each replaced figure cites the profile as its source through the assumption set's own ``SOURCES``
registry (what ``items()`` puts in every record's ``assumptions``). Results that were not used are
listed with the reason.
"""

from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TypeGuard

from ..errors import CatalogError

SCHEMA_VERSION = 1

#: Collectives the bench measures; the planner's models time theirs as all-reduces.
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter")


def make_profile(results: list[dict], gpu: dict | None, host: dict, versions: dict) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "calibration",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": host,
        "gpu": gpu,
        "versions": versions,
        "python": platform.python_version(),
        "results": results,
    }


# ------------------------------------------------------------------------------------------ reading


def _number(x: object) -> TypeGuard[float]:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _check_result(path: Path, i: int, r: dict) -> None:
    """One result's fields, and the detail fields the planner relies on: one line naming the field."""
    where = f"{path}: results[{i}]"
    if not isinstance(r.get("name"), str) or not r["name"]:
        raise CatalogError(f"{where}.name must be a non-empty string, got {r.get('name')!r}")
    if r.get("value") is not None and not _number(r["value"]):
        raise CatalogError(f"{where}.value must be a number, got {r['value']!r}")
    if r.get("unit") is not None and not isinstance(r["unit"], str):
        raise CatalogError(f"{where}.unit must be a string, got {r['unit']!r}")
    f = r.get("fraction_of_datasheet")
    if f is not None and (not _number(f) or not 0 < f <= 1.5):
        raise CatalogError(f"{where}.fraction_of_datasheet must be a number in (0, 1.5], got {f!r}")
    d = r.get("detail")
    if d is None:
        return
    if not isinstance(d, dict):
        raise CatalogError(f"{where}.detail must be an object, got {d!r}")
    for key in ("device", "dtype", "model", "op"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise CatalogError(f"{where}.detail.{key} must be a string, got {d[key]!r}")
    for key in ("model_shapes", "best_shape_mnk"):
        if d.get(key) is not None and not isinstance(d[key], list):
            raise CatalogError(f"{where}.detail.{key} must be a list, got {d[key]!r}")
    for key in ("ranks", "nodes", "bytes"):
        v = d.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise CatalogError(f"{where}.detail.{key} must be an integer >= 1, got {v!r}")
    for key in ("median_tflops", "algbw_bytes_per_s", "busbw_bytes_per_s"):
        v = d.get(key)
        if v is not None and (not _number(v) or v < 0):
            raise CatalogError(f"{where}.detail.{key} must be a number >= 0, got {v!r}")


def read_profile(path: Path) -> dict:
    from ..catalog.schema import read_structured

    path = Path(path)
    data = read_structured(path)  # one-line errors for an unreadable file or bad JSON, as for catalog files
    if not isinstance(data, dict) or data.get("kind") != "calibration" or data.get("schema_version") != SCHEMA_VERSION:
        raise CatalogError(f"{path}: not a gpuplan calibration profile (write one with gpuplan local bench --save)")
    if not isinstance(data.get("results"), list) or not all(isinstance(r, dict) for r in data["results"]):
        raise CatalogError(f"{path}: field 'results': expected a list of benchmark results (objects)")
    if data.get("gpu") is not None and not isinstance(data["gpu"], dict):
        raise CatalogError(f"{path}: field 'gpu': expected an object or null")
    for key in ("name", "catalog_id"):
        v = (data.get("gpu") or {}).get(key)
        if v is not None and not isinstance(v, str):
            raise CatalogError(f"{path}: field 'gpu.{key}' must be a string, got {v!r}")
    if data.get("created") is not None and not isinstance(data["created"], str):
        raise CatalogError(f"{path}: field 'created' must be a string, got {data['created']!r}")
    for i, r in enumerate(data["results"]):
        _check_result(path, i, r)
    return data


# ------------------------------------------------------------------------------------------ applying


@dataclass(frozen=True)
class Calibration:
    """What a profile changed in one plan: the assumption set (measured figures, each citing the profile),
    one line per replacement, the figures an explicit --assume kept, and the results not used, with why."""

    file: str
    measured_on: str
    created: str
    assumptions: object
    replaced: tuple[str, ...] = ()
    overridden: tuple[str, ...] = ()
    not_applied: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    nothing_applicable: str | None = None

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "measured_on": self.measured_on,
            "created": self.created,
            "replaced": list(self.replaced),
            "overridden": list(self.overridden),
            "not_applied": [{"result": n, "why": w} for n, w in self.not_applied],
            "notes": list(self.notes),
            "nothing_applicable": self.nothing_applicable,
        }


def cite(a, sources: dict[str, str]):
    """A copy of assumption set ``a`` whose ``SOURCES`` cite ``sources`` for the named assumptions.

    The override lives on the set's class (a subclass with its own ``SOURCES``), which is what
    ``AssumptionSet.items()`` reads and what ``dataclasses.replace`` keeps.
    """
    if not sources:
        return a
    base = type(a)
    merged = MappingProxyType({k: (unit, sources.get(k, src)) for k, (unit, src) in base.SOURCES.items()})
    cls = type(
        base.__name__,
        (base,),
        {"SOURCES": merged, "__module__": base.__module__, "__qualname__": base.__qualname__, "__doc__": base.__doc__},
    )
    return cls(**{f.name: getattr(a, f.name) for f in fields(a)})


def _detail(r: dict) -> dict:
    return r.get("detail") or {}


def _on_cpu(r: dict) -> bool:
    return _detail(r).get("device") == "cpu" or r["name"].endswith("(cpu)")


def _fraction(r: dict) -> float | None:
    f = r.get("fraction_of_datasheet")
    return float(f) if _number(f) else None


def _known_fraction(r: dict) -> float:
    """``_fraction`` of a result already checked to have one."""
    f = _fraction(r)
    assert f is not None
    return f


def _matmul_dtype(r: dict) -> str | None:
    """The dtype of a matmul result: ``detail.dtype``, else the name ("matmul bf16", older profiles)."""
    parts = r["name"].split()
    if not parts or parts[0] != "matmul":
        return None
    dtype = _detail(r).get("dtype")
    return dtype if isinstance(dtype, str) else (parts[1] if len(parts) == 2 else None)


def _shapes(r: dict) -> str:
    """Where a matmul rate was measured: the best shape, or a model's GEMM shapes."""
    d = _detail(r)
    if not d.get("model_shapes"):
        return "on the best GEMM shape found"
    return f"on {d['model']}'s GEMM shapes" if d.get("model") else "on the GEMM shapes of an unnamed model"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n:,} bytes"


class _Applier:
    """Collects the replacements of one plan; ``done`` builds the Calibration."""

    def __init__(self, profile: dict, a, file: str, explicit, kind: str) -> None:
        gpu = profile.get("gpu") or {}
        self.profile, self.a, self.file, self.explicit, self.kind = profile, a, file, frozenset(explicit), kind
        self.gpu_name = gpu.get("name") or gpu.get("catalog_id") or "an unnamed GPU"
        self.created = profile.get("created") or "undated"
        self.results = profile["results"]
        self.changes: dict[str, float] = {}
        self.sources: dict[str, str] = {}
        self.replaced: list[str] = []
        self.overridden: list[str] = []
        self.notes: list[str] = []
        self.why: dict[int, str] = {}
        self.used: set[int] = set()
        self.dtype: str | None = None

    def measured(self, r: dict) -> str:
        value = f"{r['value']:,.4g} {r.get('unit') or ''}".rstrip() if _number(r.get("value")) else r["name"]
        return (
            f"calibration {self.file}: measured {value} = {_fraction(r):.1%} of datasheet on {self.gpu_name} "
            f"({self.created})"
        )

    def set(self, name: str, value: float, i: int, how: str) -> None:
        """Replace assumption ``name`` with ``value`` from result ``i`` (unless --assume set it)."""
        r = self.results[i]
        self.used.add(i)
        capped = value > 1
        value = min(1.0, value)
        if name in self.explicit:
            mine = getattr(self.a, name)
            self.overridden.append(
                f"--assume overrides the calibration for {name}: {mine:g} kept, {r['name']} measured {value:.3g}"
            )
            self.sources[name] = (
                f"--assume {name}={mine:g} (overrides calibration {self.file}, which measured "
                f"{value:.3g} from {r['name']})"
            )
            return
        self.changes[name] = value
        how = f"{r['name']} {how}" + ("; capped at 1" if capped else "")
        self.sources[name] = f"{self.measured(r)}; {how}"
        self.replaced.append(f"{name} = {value:.3g}: {how}")

    def matmul(
        self, name: str, dtype: str, model_id: str | None, factor: float, factor_why: str, default_why: str
    ) -> None:
        """``name`` from the matmul result in ``dtype``: on the model's own shapes as is, else x ``factor``."""
        found = [
            (i, r)
            for i, r in enumerate(self.results)
            if _matmul_dtype(r) == dtype and _fraction(r) is not None and not _on_cpu(r)
        ]
        # preference: the planned model's own shapes, then the best shape, then another model's shapes
        own = [
            (i, r)
            for i, r in found
            if _detail(r).get("model_shapes") and model_id is not None and _detail(r).get("model") == model_id
        ]
        best = [(i, r) for i, r in found if not _detail(r).get("model_shapes")]
        taken = {i for i, _ in own + best}
        other = [(i, r) for i, r in found if i not in taken]
        if own:
            i, r = own[0]
            self.set(
                name,
                _known_fraction(r),
                i,
                f"on {model_id}'s own GEMM shapes, used as is (no model_shape_factor); {default_why}",
            )
        elif best or other:
            i, r = (best or other)[0]
            where = _shapes(r) + (f", not {model_id}'s" if _detail(r).get("model") else "")
            self.set(
                name,
                _known_fraction(r) * factor,
                i,
                f"{where}, x model_shape_factor {factor:g} ({factor_why}); {default_why}",
            )
        elif name not in self.explicit and not all(_on_cpu(r) for r in self.results):
            self.notes.append(f"calibration has no {dtype} matmul measurement: {name} keeps its default")
        chosen = next((_shapes(r) for i, r in found if i in self.used), None)
        for i, r in found:
            if i not in self.used:
                self.why[i] = f"measured {_shapes(r)}; the {dtype} result {chosen} is used"
        self.dtype = dtype

    def memory(self, name: str, how: str) -> None:
        for i, r in enumerate(self.results):
            if r["name"] == "memory copy" and _fraction(r) is not None and not _on_cpu(r):
                self.set(name, _known_fraction(r), i, how)
                return

    def link(self, default_why: str) -> None:
        """link_efficiency from the intra-node all-reduce (2+ ranks) at the largest payload."""
        ok = []
        for i, r in enumerate(self.results):
            d = _detail(r)
            if d.get("op") != "all_reduce" or _fraction(r) is None or _on_cpu(r):
                continue
            if (d.get("ranks") or 0) < 2:
                self.why[i] = "fewer than 2 ranks"
            elif (d.get("nodes") or 1) > 1:
                self.why[i] = "measured across nodes (the fraction is of the intra-node link)"
            elif not d.get("bytes"):
                self.why[i] = "no payload size (detail.bytes)"
            else:
                ok.append((d["bytes"], i))
        if not ok:
            return
        _, i = max(ok)
        d = _detail(self.results[i])
        self.set(
            "link_efficiency",
            _known_fraction(self.results[i]),
            i,
            f"(bus bandwidth at the largest payload measured, {_mib(d['bytes'])} on {d['ranks']} ranks of one "
            f"node, over the catalog's per-direction scale-up bandwidth); {default_why}",
        )
        for _, j in ok:
            if j != i:
                self.why[j] = f"a smaller payload than {self.results[i]['name']}, which is used"

    def done(self) -> Calibration:
        not_applied = []
        for i, r in enumerate(self.results):
            if i in self.used:
                continue
            d = _detail(r)
            if _on_cpu(r):
                why = "measured on a CPU"
            elif i in self.why:
                why = self.why[i]
            elif _fraction(r) is None:
                why = "no fraction of a datasheet figure"
            elif _matmul_dtype(r) is not None and self.dtype:
                why = f"measured in {_matmul_dtype(r)}; the plan's matmuls run in {self.dtype}"
            elif d.get("op") in COLLECTIVE_OPS:
                why = "the planner times its collectives as all-reduces"
            else:
                why = f"not an input of the {self.kind} model"
            not_applied.append((r["name"], why))
        nothing = None
        if not self.replaced and not self.overridden:
            on_cpu = self.results and all(_on_cpu(r) for r in self.results)
            nothing = (
                "measured on a CPU"
                if on_cpu
                else ("the profile has no results" if not self.results else "no result measures what the plan assumes")
            )
        a = cite(replace(self.a, **self.changes), self.sources)
        return Calibration(
            self.file,
            self.gpu_name,
            self.created,
            a,
            tuple(self.replaced),
            tuple(self.overridden),
            tuple(not_applied),
            tuple(self.notes),
            nothing,
        )


def _matmul_dtype_for_training(precision: str, gpu) -> str:
    from ..estimate.time import training_dtype

    dtype = training_dtype(precision)
    return "fp32" if dtype == "tf32" and not gpu.supports("tf32") else dtype  # peak_for's fallback


def apply_to_step(
    profile: dict, a, gpu, *, file: str, precision: str = "bf16-mixed", model_id: str | None = None, explicit=()
) -> Calibration:
    """StepAssumptions with the measured figures of ``profile`` (see the module docstring); ``explicit``
    names the assumptions the user set with --assume, which the profile does not replace."""
    _check_gpu(profile, gpu.id)
    c = _Applier(profile, a, file, explicit, "training step-time")
    c.matmul(
        "matmul_efficiency",
        _matmul_dtype_for_training(precision, gpu),
        model_id,
        a.model_shape_factor,
        "a model's GEMMs run below the best shape",
        "replaces the MAMF table's fraction x model_shape_factor",
    )
    c.memory(
        "hbm_efficiency",
        "(memory bandwidth, read + write, over the datasheet HBM bandwidth); replaces the "
        "device-copy literature figure for element-wise kernels",
    )
    c.link("replaces the nccl-tests figure for DGX A100/H100")
    return c.done()


def apply_to_inference(
    profile: dict, a, gpu, *, file: str, weights: str = "bf16", model_id: str | None = None, explicit=()
) -> Calibration:
    """InferenceAssumptions with the measured figures of ``profile`` (see the module docstring)."""
    from ..estimate.inference import compute_dtype
    from ..estimate.steptime import StepAssumptions

    _check_gpu(profile, gpu.id)
    c = _Applier(profile, a, file, explicit, "inference")
    factor = StepAssumptions().model_shape_factor
    c.matmul(
        "compute_efficiency",
        compute_dtype(weights, gpu),
        model_id,
        factor,
        "the step-time model's factor for a model's GEMMs against the best shape",
        "replaces the default 0.45, a fraction of dense peak fitted to served prefill (Databricks, A100)",
    )
    c.memory(
        "memory_bandwidth_efficiency",
        "(memory bandwidth, read + write, over the datasheet HBM bandwidth); "
        "replaces gpt-fast's empirical 0.83 for weight and KV streaming",
    )
    c.link("replaces the nccl-tests ring figure for DGX A100/H100")
    return c.done()


def _check_gpu(profile: dict, gpu_id: str) -> None:
    measured = (profile.get("gpu") or {}).get("catalog_id")
    if measured and measured != gpu_id:
        raise CatalogError(
            f"the calibration profile was measured on {measured}, not {gpu_id}; plan for {measured} or measure this GPU"
        )
