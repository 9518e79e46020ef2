"""Error bands: a P10-P90 band beside every predicted time, throughput, GPU-hours and cost, from the errors
gpuplan makes on the bundled published figures.

Residuals. ``gpuplan validate`` (:mod:`gpuplan.plan.validate`) runs every bundled record of
``data/validation/`` through ``api.train`` / ``api.serve`` at today's defaults. Each scored value gives one
residual, a ratio ``published / predicted`` of its *family*'s reference quantity:

- ``training_throughput``: tokens/s per GPU of a training step (``training_modern``, ``training_compute``);
- ``ttft``: time to first token (``ttft_s``; ``prompt_tokens_per_s`` counts inverted);
- ``tpot``: time per output token (``tpot_s``, ``request_latency_per_output_token_s`` and the end-to-end
  request latency; ``decode_tokens_per_s_per_user`` and ``total_tokens_per_s_e2e`` inverted);
- ``serving_throughput``: output tokens/s, requests/s and total tokens/s of a deployment.

The residual set itself (record id, source, class, ratio) is written into ``data/bands.json`` beside the
quantiles, so every band can be traced to the published figures it comes from. Peak memory is not banded.

Classes and pooling. A residual's class is (GPU generation, precision, stack, dense/MoE), read from the
report by the same functions (:func:`train_class`, :func:`serve_class`) at validate time and at estimate
time: the GPU's ``architecture``; the training precision without ``-mixed`` or the serving weight format;
the resolved step-time stack (``--stack``: megatron, fsdp2, deepspeed, hf) or serving engine profile; ``moe``
or ``dense``. A band is taken from the first level of :data:`POOLING` whose residuals number at least
:data:`MIN_RESIDUALS` from at least :data:`MIN_SOURCES` sources: the full class, then (stack, dense/MoE),
then dense/MoE, then every residual of the family (always used when nothing finer qualifies). The record
says which class was used (``band_class``: ``generation/precision/stack/architecture`` with ``*`` for a
pooled dimension).

Quantiles. Each *source* (:func:`gpuplan.plan.validate.source_key`: one repository, paper or web page)
weighs 1 in total, split evenly over its residuals, so a source with 25 rows does not outvote four
sources with 3; quantiles are read on the weighted empirical distribution (mid-point plotting positions,
log-linear interpolation). The band is those P10 and P90 as they are. (Until 2026-11-27 they were widened
in log space by ``1 + 1/S``, S the sources pooled, a small-sample inflation; once the step model's large
source-specific errors were explained, that put 88 % of the training values inside their band
leave-one-source-out, above the 75-85 % target, while the plain quantiles give 82 %, and 80 % for serving.)

A band is ``value x [ratio P10, ratio P90]`` for a value that moves with the family's reference quantity
(throughput, MFU; TTFT, TPOT) and ``value / [ratio P90, ratio P10]`` for one that moves against it (time,
GPU-hours and cost of training from throughput; $ per million tokens from serving throughput). A biased
family gives an asymmetric band, and may not contain the value itself; P10 <= P90 always holds.

Calibration. ``gpuplan validate`` reports the coverage (the share of residuals inside their own band)
in sample and leave-one-source-out (the band of a residual built from the other sources' residuals only),
training and inference separately; the target is 75-85 % leave-one-source-out. ``scripts/build_bands.py``
writes the table; a test fails when it is stale, so a model change must re-run the builder.

Estimates never run validate: they look the class up in the precomputed table (read once through
:func:`gpuplan.catalog.bands.load_bands`). A training time from a user's ``--mfu`` gets no band (the
step-time model's residuals do not describe it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

#: The band's nominal levels (``*_p10`` / ``*_p90``).
LEVELS = (0.1, 0.9)
#: The fewest residuals, and sources, a class needs before its own band is used.
MIN_RESIDUALS = 10
MIN_SOURCES = 3
#: The class dimensions, in the order ``band_class`` names them.
DIMS = ("gpu_generation", "precision", "stack", "architecture")
#: Pooling: the dimensions kept at each level, finest first; the last (none kept) always applies.
POOLING: tuple[tuple[str, ...], ...] = (DIMS, ("stack", "architecture"), ("architecture",), ())
#: Bumped when the table's layout or the method changes.
TABLE_VERSION = 1

#: Families: category of the residuals, and the reference quantity the ratio is of.
FAMILIES: Mapping[str, tuple[str, str]] = {
    "training_throughput": ("training", "training tokens/s per GPU"),
    "ttft": ("inference", "time to first token"),
    "tpot": ("inference", "time per output token"),
    "serving_throughput": ("inference", "serving tokens/s (or requests/s)"),
}

#: validate's (category, quantity) -> (family, exponent): the ratio of the family's reference quantity is
#: (published / predicted) ** exponent (-1: the quantity is the inverse of the reference).
QUANTITIES: Mapping[tuple[str, str], tuple[str, int]] = {
    ("training", "tokens_per_s_per_gpu"): ("training_throughput", 1),
    ("inference", "ttft_s"): ("ttft", 1),
    ("inference", "prompt_tokens_per_s"): ("ttft", -1),
    ("inference", "tpot_s"): ("tpot", 1),
    ("inference", "request_latency_per_output_token_s"): ("tpot", 1),
    ("inference", "request_latency_s"): ("tpot", 1),
    ("inference", "decode_tokens_per_s_per_user"): ("tpot", -1),
    ("inference", "total_tokens_per_s_e2e"): ("tpot", -1),
    ("inference", "output_tokens_per_s_total"): ("serving_throughput", 1),
    ("inference", "output_tokens_per_s_per_gpu"): ("serving_throughput", 1),
    ("inference", "requests_per_s_total"): ("serving_throughput", 1),
    ("inference", "total_tokens_per_s_total"): ("serving_throughput", 1),
}

METHOD = (
    "ratio published / predicted per validation value (gpuplan validate, today's defaults); class (GPU "
    "generation, precision, stack, dense/MoE) pooled to (stack, dense/MoE), dense/MoE, then all until it holds "
    f">= {MIN_RESIDUALS} residuals from >= {MIN_SOURCES} sources; the source-weighted P10 and P90 of the "
    "ratios; band = value x ratio quantiles (inverted for times and costs from a throughput)"
)


# ---------------------------------------------------------------------------------------------- classes


def _precision_class(precision: str) -> str:
    return precision.removesuffix("-mixed")


def train_class(gpu: Any, job: Any, step: Any, model: Any) -> dict[str, str]:
    """The band class of a training estimate: GPU generation, precision, resolved stack, dense/MoE."""
    return {
        "gpu_generation": str(gpu.architecture),
        "precision": _precision_class(str(job.precision)),
        # a dated variant of a stack (megatron-2021, deepspeed-2021) shares its stack's class
        "stack": str(getattr(step, "stack", "") or "unknown").removesuffix("-2021"),
        "architecture": "moe" if getattr(model, "moe", None) is not None else "dense",
    }


def serve_class(gpu: Any, job: Any, serving: Any, model: Any, weights: str | None = None) -> dict[str, str]:
    """The band class of a serving estimate: GPU generation, weight format (``weights``, else the job's),
    engine profile, dense/MoE."""
    return {
        "gpu_generation": str(gpu.architecture),
        "precision": str(weights or job.weights),
        "stack": str(getattr(serving, "engine_profile", "") or job.engine),
        "architecture": "moe" if getattr(model, "moe", None) is not None else "dense",
    }


def class_of(call: str, report: Any) -> dict[str, str]:
    """The band class of an ``api.train`` / ``api.serve`` report (what validate records for each row)."""
    if call == "train":
        step = report.plan.step if report.plan is not None else None
        return train_class(report.gpu, report.job, step, report.model)
    return serve_class(report.gpu, report.job, report.serving, report.model)


def class_key(cls: Mapping[str, str], kept: Iterable[str] = DIMS) -> str:
    """``generation/precision/stack/architecture``, ``*`` for each dimension not kept."""
    keep = set(kept)
    return "/".join(cls.get(d, "?") if d in keep else "*" for d in DIMS)


# -------------------------------------------------------------------------------------------- residuals


class Residual(NamedTuple):
    """One validation value as a ratio of its family's reference quantity (published / predicted)."""

    id: str
    source: str
    category: str
    family: str
    ratio: float
    cls: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "family": self.family,
            "class": class_key(self.cls),
            "ratio": _round(self.ratio),
        }


def residuals(rows: Iterable[Any]) -> list[Residual]:
    """The residuals of validate's rows (those of a banded family, with a class recorded)."""
    out: list[Residual] = []
    for r in rows:
        c = r.case
        spec = QUANTITIES.get((c.category, c.quantity))
        cls = getattr(r, "band_class", None)
        if spec is None or not cls or not (r.predicted > 0 and c.published > 0):
            continue
        family, exponent = spec
        out.append(Residual(c.id, c.source, c.category, family, (c.published / r.predicted) ** exponent, dict(cls)))
    return out


def weighted_quantile(points: Sequence[tuple[float, float]], p: float) -> float:
    """The ``p`` quantile of positive values with weights: mid-point plotting positions, log-linear between
    them, clamped to the extremes."""
    pts = sorted(points)
    total = sum(w for _, w in pts)
    xs: list[float] = []
    ps: list[float] = []
    cum = 0.0
    for x, w in pts:
        xs.append(x)
        ps.append((cum + w / 2) / total)
        cum += w
    if p <= ps[0]:
        return xs[0]
    if p >= ps[-1]:
        return xs[-1]
    for i in range(1, len(xs)):
        if ps[i] >= p:
            t = (p - ps[i - 1]) / (ps[i] - ps[i - 1]) if ps[i] > ps[i - 1] else 0.0
            return math.exp(math.log(xs[i - 1]) + t * (math.log(xs[i]) - math.log(xs[i - 1])))
    return xs[-1]  # pragma: no cover


def quantiles(sample: Sequence[Residual]) -> dict[str, Any]:
    """The band of a pool of residuals: count, sources, and the source-weighted ratio P10 / P50 / P90."""
    per_source: dict[str, int] = {}
    for x in sample:
        per_source[x.source] = per_source.get(x.source, 0) + 1
    points = [(x.ratio, 1 / per_source[x.source]) for x in sample]
    return {
        "residuals": len(sample),
        "sources": len(per_source),
        "ratio_p10": weighted_quantile(points, LEVELS[0]),
        "ratio_p50": weighted_quantile(points, 0.5),
        "ratio_p90": weighted_quantile(points, LEVELS[1]),
    }


def _qualifies(sample: Sequence[Residual]) -> bool:
    return len(sample) >= MIN_RESIDUALS and len({x.source for x in sample}) >= MIN_SOURCES


def pick(pool: Sequence[Residual], family: str, cls: Mapping[str, str]) -> tuple[str, dict[str, Any]] | None:
    """The pooled class and its band for ``cls`` in ``family``, from the residuals ``pool`` (None: the family
    has no residual in the pool)."""
    mine = [x for x in pool if x.family == family]
    for kept in POOLING:
        sample = [x for x in mine if all(x.cls.get(d) == cls.get(d) for d in kept)]
        if sample and (_qualifies(sample) or not kept):
            return class_key(cls, kept), quantiles(sample)
    return None


def coverage(res: Sequence[Residual]) -> dict[str, Any]:
    """Per category, the share of residuals inside their own band: in sample (bands from every residual)
    and leave-one-source-out (bands from the other sources' residuals)."""
    out: dict[str, Any] = {}
    for category in sorted({x.category for x in res}):
        mine = [x for x in res if x.category == category]
        block: dict[str, Any] = {}
        for mode in ("in_sample", "loso"):
            covered = counted = 0
            for x in mine:
                pool = res if mode == "in_sample" else [y for y in res if y.source != x.source]
                got = pick(pool, x.family, x.cls)
                if got is None:
                    continue
                counted += 1
                covered += got[1]["ratio_p10"] <= x.ratio <= got[1]["ratio_p90"]
            block[mode] = {"covered": covered, "count": counted, "coverage": covered / counted if counted else None}
        out[category] = block
    return out


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def build_table(rows: Iterable[Any]) -> dict[str, Any]:
    """The bundled table (``data/bands.json``) from validate's rows: every class that qualifies at each
    pooling level, per family, with its band; the residual set; the coverage. Deterministic."""
    res = residuals(rows)
    families: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        mine = [x for x in res if x.family == family]
        table: dict[str, Any] = {}
        for kept in POOLING:
            groups: dict[str, list[Residual]] = {}
            for x in mine:
                groups.setdefault(class_key(x.cls, kept), []).append(x)
            for key, sample in sorted(groups.items()):
                if _qualifies(sample) or not kept:
                    table[key] = {k: _round(v) if isinstance(v, float) else v for k, v in quantiles(sample).items()}
        families[family] = table
    cov = coverage(res)
    return {
        "version": TABLE_VERSION,
        "about": "gpuplan error bands: P10-P90 of published / predicted per class; written by "
        "scripts/build_bands.py from gpuplan validate (re-run it after any model change); method in "
        "gpuplan/plan/bands.py",
        "method": METHOD,
        "levels": list(LEVELS),
        "min_residuals": MIN_RESIDUALS,
        "min_sources": MIN_SOURCES,
        "pooling": ["/".join(d if d in kept else "*" for d in DIMS) for kept in POOLING],
        "family_reference": {k: v[1] for k, v in FAMILIES.items()},
        "coverage": {
            cat: {m: {k: _round(v) if isinstance(v, float) else v for k, v in b.items()} for m, b in block.items()}
            for cat, block in cov.items()
        },
        "families": families,
        "residuals": [x.to_dict() for x in sorted(res, key=lambda r: (r.family, r.id))],
    }


# ------------------------------------------------------------------------------------------ at estimate


class Band(NamedTuple):
    """The band of one family for one estimate: the class used and the ratio quantiles."""

    family: str
    band_class: str
    ratio_p10: float
    ratio_p90: float
    residuals: int
    sources: int

    def interval(self, value: float | None, exponent: int = 1) -> tuple[float | None, float | None]:
        """(p10, p90) of ``value``: ``exponent`` 1 moves with the reference quantity, -1 against it."""
        if value is None or not math.isfinite(value):
            return None, None
        if exponent > 0:
            return value * self.ratio_p10, value * self.ratio_p90
        return value / self.ratio_p90, value / self.ratio_p10

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "band_class": self.band_class,
            "ratio_band": [self.ratio_p10, self.ratio_p90],
            "residuals": self.residuals,
            "sources": self.sources,
        }


#: The bundled table and the bands looked up in it, by family and class: a ranking of 100,000 offers asks
#: for a few classes 100,000 times (a Band is immutable; the answers are dropped if the table is read anew).
_BUNDLED: tuple[Any, dict[tuple[str, tuple[tuple[str, str], ...]], Band | None]] = (None, {})


def lookup(family: str, cls: Mapping[str, str], table: Mapping[str, Any] | None = None) -> Band | None:
    """The band for class ``cls`` from the bundled table (the first pooling level it holds); None without a
    table or a family entry."""
    global _BUNDLED
    if table is None:
        from ..catalog.bands import load_bands

        bundled = load_bands()
        if _BUNDLED[0] is not bundled:
            _BUNDLED = (bundled, {})
        answers, asked = _BUNDLED[1], (family, tuple(cls.items()))
        if asked not in answers:
            answers[asked] = lookup(family, cls, bundled or {})
        return answers[asked]
    if not table:
        return None
    entries = (table.get("families") or {}).get(family) or {}
    for kept in POOLING:
        key = class_key(cls, kept)
        e = entries.get(key)
        if isinstance(e, Mapping):
            return Band(
                family, key, float(e["ratio_p10"]), float(e["ratio_p90"]), int(e["residuals"]), int(e["sources"])
            )
    return None


def training_band(gpu: Any, job: Any, plan: Any, model: Any) -> Band | None:
    """The band of a training plan's time, throughput, GPU-hours and cost; None when the time does not
    come from the step-time model (``--mfu`` given) or without a table."""
    if plan is None or plan.step is None or not str(plan.mfu_source).startswith("predicted"):
        return None
    return lookup("training_throughput", train_class(gpu, job, plan.step, model))


def serving_bands(gpu: Any, job: Any, serving: Any, model: Any, weights: str | None = None) -> dict[str, Band | None]:
    """The bands of a serving estimate: ``ttft``, ``tpot`` and ``serving_throughput``."""
    cls = serve_class(gpu, job, serving, model, weights)
    return {f: lookup(f, cls) for f in ("ttft", "tpot", "serving_throughput")}
