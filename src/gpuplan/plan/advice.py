"""The smallest change that makes a plan fit: what a user should try first when a plan does not fit.

No formula of its own: it re-runs the memory estimates (``estimate.memory.training_memory``,
``estimate.inference.serving_plan``) over a short, ordered list of changes and returns the first that fits.
"Smallest" follows what each change costs the user, cheapest first:

Training (same GPU count first, then more GPUs):
  1. one knob at a time, in this order: recompute selective, recompute full, ZeRO 1/2/3 (only with data
     parallelism), sequence parallelism (with tp > 1), a smaller micro-batch (the largest that fits, else 1),
     tensor parallelism x2 (up to 8, within a node, dividing the heads), pipeline stages x2 (dividing the
     layers), optimizer offload;
  2. the same knobs applied cumulatively in that order (the first prefix that fits);
  3. more GPUs: the fewest whole multiples of the model-parallel group, with ZeRO-3 and full recompute,
     up to 2**20 GPUs (a binary search; memory per GPU never grows with more data-parallel ranks under ZeRO-3).
Serving: tensor parallelism x2 (up to 8, dividing the heads), then smaller weight formats (fp8 where the GPU
has it, int8, int4-awq), then an fp8/int8 KV cache, each alone and then together with the tp found.

Every call is a pure function of its inputs; the caller prints the advice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..errors import GpuplanError
from ..estimate.memory import MemoryAssumptions, training_memory
from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..spec.serving import ServingJob, ServingLayout
from ..spec.training import Parallelism, TrainingJob

MAX_GPUS_SEARCHED = 2**20
#: The largest tensor-parallel degree the advice proposes, on every GPU. A software rule, not a hardware fact:
#: Megatron-LM practice keeps tensor parallelism within one 8-GPU HGX/DGX server (Narayanan et al. 2021,
#: "Takeaway #1": tensor parallelism up to the g GPUs of a server; Table 1 never exceeds t = 8). The advice
#: applies it alike to PCIe cards, TPUs and GB200 NVL72 (a 72-GPU NVLink domain): the catalog has no scale-up
#: domain size to take it from.
MAX_ADVISED_TP = 8


@dataclass(frozen=True)
class FitAdvice:
    """A change that makes the plan fit: the flags to add, and the memory it then needs per GPU."""

    changes: dict[str, Any]  # flag name (without --) -> new value
    total_bytes: float  # memory per GPU with the change
    capacity_bytes: float  # what is available per GPU

    @property
    def flags(self) -> str:
        return " ".join(f"--{k}" if v is True else f"--{k} {v}" for k, v in self.changes.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "flags": self.flags,
            "changes": dict(self.changes),
            "total_bytes": self.total_bytes,
            "capacity_bytes": self.capacity_bytes,
        }


# ----------------------------------------------------------------------------------------------- training


def _training_steps(
    model: ModelSpec | ParamsOnlyModel,
    layout: Parallelism,
    job: TrainingJob,
    fits: Callable[[Parallelism, TrainingJob], bool] | None = None,
):
    """(flag changes, layout, job) for each single knob, cheapest first; each applies to the given state. ``fits``
    (whether a candidate fits) lets the micro-batch knob pick the largest smaller micro-batch that fits."""
    steps: list[Callable[[Parallelism, TrainingJob], tuple[dict, Parallelism, TrainingJob] | None]] = []
    arch = isinstance(model, ModelSpec)

    def recompute(mode):
        def f(lay, jb):
            order = ("none", "selective", "per-op", "partial", "full")  # less kept, left to right
            if order.index(jb.recompute) >= order.index(mode):
                return None
            return {"recompute": mode}, lay, replace(jb, recompute=mode, recompute_layers=None, recompute_modules=None)

        return f

    def zero(stage):
        def f(lay, jb):
            if lay.dp < 2 or lay.zero >= stage or jb.fsdp:
                return None
            return {"zero": stage}, replace(lay, zero=stage), jb

        return f

    def sequence_parallel(lay, jb):
        if lay.tp < 2 or lay.sequence_parallel:
            return None
        return {"sequence-parallel": True}, replace(lay, sequence_parallel=True), jb

    def micro_batch_down(lay, jb):
        # memory grows with the micro-batch: bisect for the largest below the current that fits (the global batch
        # set aside, its divisibility is not monotonic), then walk down to one that divides the global batch; else 1
        if jb.micro_batch == 1:
            return None
        lo, hi = 1, jb.micro_batch  # the bound lies in [lo, hi): hi does not fit
        while fits is not None and hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(lay, replace(jb, micro_batch=mid, global_batch=None)):
                lo = mid
            else:
                hi = mid
        for mb in range(lo, max(1, lo - 256), -1):
            if fits is not None and fits(lay, replace(jb, micro_batch=mb)):
                return {"micro-batch": mb}, lay, replace(jb, micro_batch=mb)
        return {"micro-batch": 1}, lay, replace(jb, micro_batch=1)

    def tp_double(lay, jb):
        tp = lay.tp * 2
        if (
            tp > MAX_ADVISED_TP
            or lay.gpus % (tp * lay.pp * lay.cp)
            or not isinstance(model, ModelSpec)
            or model.attention_heads % tp
        ):
            return None
        return {"tp": tp}, _refold(lay, tp=tp, pp=lay.pp), jb

    def pp_double(lay, jb):
        pp = lay.pp * 2
        if lay.gpus % (lay.tp * pp * lay.cp) or not isinstance(model, ModelSpec) or model.layers % pp:
            return None
        return {"pp": pp}, _refold(lay, tp=lay.tp, pp=pp), jb

    def offload(lay, jb):
        if lay.offload != "none" or lay.zero == 0:
            return None
        return {"offload": "optimizer"}, replace(lay, offload="optimizer"), jb

    if arch:
        steps += [recompute("selective"), recompute("full")]
    steps += [zero(1), zero(2), zero(3), sequence_parallel]
    if arch:
        steps += [micro_batch_down, tp_double, pp_double]
    steps += [offload]
    return steps


_LAYOUT_FLAGS = {
    "zero": "zero",
    "sequence-parallel": "sequence_parallel",
    "tp": "tp",
    "pp": "pp",
    "offload": "offload",
    "gpus": "gpus",
}
_JOB_FLAGS = {"recompute": "recompute", "micro-batch": "micro_batch"}


def _refold(lay: Parallelism, tp: int, pp: int) -> Parallelism:
    """``lay`` at a new tp or pp, keeping ep and an explicit etp while ep x etp still divides gpus / pp (the
    rule of :class:`Parallelism`), else without expert parallelism (and with etp back at its default)."""
    per_stage = lay.gpus // pp
    etp = tp if lay.etp is None else lay.etp
    if per_stage % (lay.ep * etp) == 0:
        return replace(lay, tp=tp, pp=pp)
    return replace(lay, tp=tp, pp=pp, ep=1, etp=lay.etp if per_stage % etp == 0 else None)


def _apply(layout: Parallelism, job: TrainingJob, changes: dict[str, Any]) -> tuple[Parallelism, TrainingJob] | None:
    """(layout, job) with the flag changes applied, or None when that combination is not a valid layout."""
    try:
        lay = replace(layout, **{_LAYOUT_FLAGS[k]: v for k, v in changes.items() if k in _LAYOUT_FLAGS})
        jb = replace(job, **{_JOB_FLAGS[k]: v for k, v in changes.items() if k in _JOB_FLAGS})
    except GpuplanError:
        return None
    return lay, jb


def _prune(model, gpu, layout, job, assumptions, changes: dict[str, Any]) -> dict[str, Any]:
    """Drop every change (last first) that the plan still fits without; the GPU count is kept."""
    kept = dict(changes)
    for key in reversed(list(changes)):
        if key == "gpus":
            continue
        trial = {k: v for k, v in kept.items() if k != key}
        applied = _apply(layout, job, trial)
        res = applied and _train_total(model, gpu, *applied, assumptions)
        if res and res[0]:
            kept = trial
    return kept


def _train_total(model, gpu, layout, job, assumptions) -> tuple[bool, float] | None:
    """(fits, bytes per GPU) for one candidate, or None when the candidate itself is not a valid plan."""
    try:
        r = training_memory(model, gpu, layout, job, assumptions, find_max_batch=False)
    except GpuplanError:
        return None
    return r.fits, float(r.total_bytes)


def training_fit_advice(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    assumptions: MemoryAssumptions = MemoryAssumptions(),
) -> FitAdvice | None:
    """The cheapest change (see the module docstring) under which ``training_memory`` fits, or None."""
    capacity = float(gpu.usable_memory_bytes)

    def fits(lay: Parallelism, jb: TrainingJob) -> bool:
        res = _train_total(model, gpu, lay, jb, assumptions)
        return bool(res and res[0])

    steps = _training_steps(model, layout, job, fits)
    # 1. one knob alone
    for step in steps:
        got = step(layout, job)
        if got is None:
            continue
        changes, lay, jb = got
        res = _train_total(model, gpu, lay, jb, assumptions)
        if res and res[0]:
            return FitAdvice(changes, res[1], capacity)
    # 2. knobs together, in order
    changes_all: dict[str, Any] = {}
    lay, jb = layout, job
    for step in steps:
        got = step(lay, jb)
        if got is None:
            continue
        changes, cand_lay, cand_jb = got
        res = _train_total(model, gpu, cand_lay, cand_jb, assumptions)
        if res is None:  # not a valid plan: skip this knob
            continue
        changes_all.update(changes)
        lay, jb = cand_lay, cand_jb
        if res[0]:
            return _advice(model, gpu, layout, job, assumptions, changes_all, capacity)
    # 3. more GPUs: whole multiples of tp x pp x cp x ep, with ZeRO-3 once there is data parallelism. The search
    # drops --global-batch (memory does not depend on it beyond the micro-batches in flight), so the count is
    # the memory bound; a global batch that does not divide is reported by the plan itself.
    unit = lay.tp * lay.pp * lay.cp * lay.ep
    if lay.etp is not None:  # also a multiple of pp x ep x etp, so that ep x etp divides gpus / pp
        unit = math.lcm(unit, lay.pp * lay.ep * lay.etp)
    search_job = replace(jb, global_batch=None)

    def at(k: int):
        cand = replace(lay, gpus=unit * k, zero=3 if unit * k // (lay.tp * lay.pp * lay.cp) > 1 else lay.zero)
        return cand, _train_total(model, gpu, cand, search_job, assumptions)

    hi = 1
    while True:
        if unit * hi > MAX_GPUS_SEARCHED:
            return None
        cand, res = at(hi)
        if res and res[0]:
            break
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:  # the smallest fitting multiple between lo (does not fit) and hi (fits)
        mid = (lo + hi) // 2
        if (r := at(mid)[1]) and r[0]:
            hi = mid
        else:
            lo = mid
    cand, res = at(hi)
    if cand.gpus <= layout.gpus or not res or not res[0]:
        return None
    out = dict(changes_all)
    out["gpus"] = cand.gpus
    if cand.zero != lay.zero:
        out["zero"] = cand.zero
    return _advice(model, gpu, layout, replace(job, global_batch=None), assumptions, out, capacity)


def _advice(model, gpu, layout, job, assumptions, changes, capacity) -> FitAdvice | None:
    kept = _prune(model, gpu, layout, job, assumptions, changes)
    applied = _apply(layout, job, kept)
    res = applied and _train_total(model, gpu, *applied, assumptions)
    return FitAdvice(kept, res[1], capacity) if res and res[0] else None


# ----------------------------------------------------------------------------------------------- serving


def serving_fit_advice(
    model: ModelSpec, gpu: Accelerator, layout: ServingLayout, job: ServingJob, assumptions=None
) -> FitAdvice | None:
    """The cheapest change under which one replica's memory fits (``serving_plan(...).fits``), or None."""
    from ..estimate.inference import serving_plan

    def fits(lay: ServingLayout, jb: ServingJob):
        try:
            r = serving_plan(model, gpu, lay, jb, assumptions)
        except GpuplanError:
            return None
        return r if r.fits else None

    tps = [
        t
        for t in (2**k for k in range(1, MAX_ADVISED_TP.bit_length()))
        if t > layout.tp and not model.attention_heads % t
    ]
    formats = [f for f in ("fp8", "int8", "int4-awq") if f != job.weights and (f != "fp8" or gpu.supports("fp8"))]
    kv = [k for k in ("fp8", "int8") if k != job.kv_cache]
    candidates: list[tuple[dict[str, Any], ServingLayout, ServingJob]] = []
    candidates += [({"tp": t}, replace(layout, tp=t), job) for t in tps]
    candidates += [({"weights": f}, layout, replace(job, weights=f)) for f in formats]
    candidates += [({"kv-cache": k}, layout, replace(job, kv_cache=k)) for k in kv[:1]]
    for t in tps:  # a larger TP group together with a smaller format
        candidates += [({"tp": t, "weights": f}, replace(layout, tp=t), replace(job, weights=f)) for f in formats]
    for changes, lay, jb in candidates:
        r = fits(lay, jb)
        if r is not None:
            return FitAdvice(changes, float(r.total_bytes), float(r.planning_bytes))
    return None
