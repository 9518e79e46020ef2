"""``plan train --explain "tp=8,pp=16,dp=128,micro_batch=1,recompute=full,zero=1"``: where one layout stands in a
search, and what it loses to the best option, term by term.

The layout is written with the keys of an option's ``layout`` in the JSON (plus ``gpu``, ``gpus`` and
``precision``, the option's own keys); the GPU and count come from those keys, else from ``--gpu`` (one GPU) and
``--gpus``, else from tp x pp x cp x dp; the precision from ``precision=``, else the first one ``--precision``
searched (a precision the search did not take is estimated and listed under ``outside_grid``). It is then put
through the search's own steps for one candidate, in the search's order (``plan/search.py``), on every hardware
class of its GPU at its count:

1. whether the grid holds it (``in_grid``; what lies outside is listed under ``outside_grid``: a layout outside the
   grid is still estimated, and ranked where it *would* rank);
2. the first pruning reason that applies (:class:`~gpuplan.spec.choices.PlanPrune`, the same fixed ids);
3. the estimate itself, by the functions ``gpuplan train`` calls (``training_memory``, ``training_step``,
   ``time_to_train``), with the error band of its class;
4. its rank: one more than the feasible candidates better on the objective's keys (the search keeps those keys,
   ``TrainSearch.ranking``);
5. against option 1: the time to train split by the step-time model's parts (each part's share of a step times
   the time to train, so that layouts with different batches compare), the memory of the busiest GPU by group,
   GPU-hours, the price of a GPU-hour and the cost. ``difference`` is this layout minus the best (positive: it
   loses).

Pure: the catalogs come in as values.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..errors import GpuplanError, InputError
from ..estimate.machine import MachineAssumptions
from ..estimate.memory import MemoryAssumptions, busiest_total_bytes, training_memory, validate_layout
from ..estimate.steptime import (
    StepAssumptions,
    default_global_batch_sequences,
    global_batch_of,
    resolve_stack,
    training_step,
)
from ..estimate.time import peak_for, time_to_train, training_compute
from ..spec.accelerator import Accelerator
from ..spec.choices import Offload, PlanPrune, Precision, Recipe, Recompute, Stack, values
from ..spec.model import ModelSpec
from ..spec.offer import Offer
from ..spec.training import Parallelism, TrainingJob, megatron_2021_conflict, stack_conflict
from . import search as S
from .machine import MachineOptions, layout_failures
from .training import offer_accelerator, offer_network

FLAG = "--explain"
_INT_KEYS = (
    "gpus", "tp", "pp", "dp", "cp", "virtual_stages", "ep", "etp", "zero", "micro_batch", "global_batch",
    "grad_accumulation", "seq_len", "recompute_layers", "offload_layers",
)  # fmt: skip
_BOOL_KEYS = ("fsdp", "sequence_parallel")
_TEXT_KEYS = ("gpu", "recompute", "stack", "recipe", "offload", "precision")
KEYS = _INT_KEYS + _BOOL_KEYS + _TEXT_KEYS
#: The text keys whose value is one of a flag's choices.
_CHOICE_KEYS: dict[str, type] = {
    "recompute": Recompute,
    "precision": Precision,
    "stack": Stack,
    "recipe": Recipe,
    "offload": Offload,
}
#: Relative tolerance of "as good as" when ranking: the search's arrays and one layout's plain numbers agree to
#: 1e-12 (tests/test_plan_search.py), so a candidate does not outrank itself.
_TIE = 1e-9


def parse_explain(text: str) -> dict[str, Any]:
    """``key=value,key=value`` into typed values; an unknown key or a bad value is one InputError."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(FLAG, "give a layout, e.g. tp=8,pp=16,dp=128,micro_batch=1,recompute=full,zero=1")
    out: dict[str, Any] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key or not raw:
            raise InputError(FLAG, f"{item.strip()!r} is not KEY=VALUE")
        if key not in KEYS:
            raise InputError(FLAG, f"unknown key {key!r}; keys: {', '.join(KEYS)}")
        if key in out:
            raise InputError(FLAG, f"{key} given twice")
        if key in _INT_KEYS:
            try:
                value: Any = int(raw)
            except ValueError:
                raise InputError(FLAG, f"{key} must be a whole number, got {raw!r}") from None
            low = 0 if key == "zero" else 1
            if value < low or (key == "zero" and value > 3) or value > 1 << 40:
                raise InputError(FLAG, f"{key} out of range, got {value}" + (" (0-3)" if key == "zero" else ""))
        elif key in _BOOL_KEYS:
            low_raw = raw.lower()
            if low_raw not in ("true", "false", "1", "0", "yes", "no"):
                raise InputError(FLAG, f"{key} must be true or false, got {raw!r}")
            value = low_raw in ("true", "1", "yes")
        else:
            value = raw.lower() if key != "gpu" else raw
            choices = _CHOICE_KEYS.get(key)
            if choices is not None and value not in values(choices):
                raise InputError(FLAG, f"{key} must be one of {', '.join(values(choices))}, got {raw!r}")
            if key == "precision" and value == "fp4-mixed":
                raise InputError(FLAG, "plan train does not search fp4-mixed; price an fp4 layout with gpuplan train")
        out[key] = value
    if not out:
        raise InputError(FLAG, "give a layout, e.g. tp=8,pp=16,dp=128")
    return out


def resolve_count(spec: dict[str, Any], fixed_gpus: int | None) -> int:
    """The layout's GPU count: ``gpus=``, else ``--gpus``, else tp x pp x cp x dp (each must agree)."""
    mp = spec.get("tp", 1) * spec.get("pp", 1) * spec.get("cp", 1)
    from_dp = mp * spec["dp"] if "dp" in spec else None
    count = spec.get("gpus", fixed_gpus)
    if count is None:
        if from_dp is None:
            raise InputError(FLAG, "give dp= (or gpus=, or --gpus): the GPU count")
        return from_dp
    if fixed_gpus is not None and count != fixed_gpus:
        raise InputError(FLAG, f"gpus={count} differs from --gpus {fixed_gpus}")
    if from_dp is not None and from_dp != count:
        raise InputError(FLAG, f"tp x pp x cp x dp = {from_dp} differs from the {count} GPUs")
    return int(count)


def explain_layout(
    spec: dict[str, Any], registry: Any, searched_gpus: list[Accelerator], fixed_gpus: int | None, **kwargs: Any
) -> dict[str, Any]:
    """The GPU (``gpu=``, else the one ``--gpu``) and count (:func:`resolve_count`) of ``spec``; then
    :func:`explain`."""
    if "gpu" in spec:
        gpu = registry.get(spec["gpu"])
    elif len(searched_gpus) == 1:
        gpu = searched_gpus[0]
    else:
        raise InputError(FLAG, "name the GPU: gpu=ID in --explain, or one --gpu")
    return explain(spec, gpu, resolve_count(spec, fixed_gpus), fixed_gpus=fixed_gpus, **kwargs)


def explain(
    spec: dict[str, Any],
    gpu: Accelerator,
    count: int,
    *,
    model: ModelSpec,
    offers: list[Offer],
    pricing: str,
    providers: Any,
    tokens: float,
    base_job: TrainingJob,
    fixed_gpus: int | None,
    max_gpus: int,
    deadline_s: float | None,
    budget_usd: float | None,
    objective: str,
    mem_a: MemoryAssumptions,
    step_a: StepAssumptions,
    search: Any,
    machine: Any = None,
) -> dict[str, Any]:
    """The ``explain`` record of one layout (module docstring)."""
    if "seq_len" in spec and spec["seq_len"] != base_job.seq_len:
        raise InputError(FLAG, f"seq_len={spec['seq_len']} differs from the run's {base_job.seq_len} (--seq-len)")
    # the layout's precision: precision=, else the first one searched (base_job's: --precision's first)
    searched_precisions = list(search.grid.get("precision") or [base_job.precision])
    precision = str(spec.get("precision", searched_precisions[0]))
    base_job = replace(base_job, precision=precision)
    tp, pp, cp, ep = (int(spec.get(k, 1)) for k in ("tp", "pp", "cp", "ep"))
    etp = int(spec.get("etp", tp))  # expert tensor parallelism; unset: tp, Megatron-Core's default
    fsdp = bool(spec.get("fsdp", False))
    zero = int(spec.get("zero", 3 if fsdp else (1 if tp * pp * cp > 1 else 0)))
    offload = str(spec.get("offload", "none"))
    if fsdp and zero != 3:
        raise InputError(FLAG, f"fsdp=true shards as ZeRO-3; zero={zero} contradicts it")
    # the stack= a layout names is checked against it as train checks --stack (train refuses the same pairs)
    named = str(spec.get("stack", "auto"))
    clash = stack_conflict(named, fsdp=fsdp, offload=offload)
    conflict = megatron_2021_conflict(named, precision=precision, fsdp=fsdp, zero=zero, cp=cp, ep=ep)
    conflict = conflict or (clash[1] if clash else None)
    if conflict:
        raise InputError(FLAG, f"stack={spec['stack']}: {conflict}")
    mb = int(spec.get("micro_batch", 1))
    vs = int(spec.get("virtual_stages", 1))
    seq_par = bool(spec.get("sequence_parallel", tp > 1))
    dp = count // (tp * pp * cp) if count % (tp * pp * cp) == 0 else None

    outside: list[str] = []
    grid = search.grid
    if gpu.id not in grid["gpus"]:
        outside.append(f"gpu {gpu.id} was not searched (--gpu)")
    for key, value, axis in (("tp", tp, grid["tp"]), ("pp", pp, grid["pp"]), ("cp", cp, grid.get("cp", [1]))):
        if value not in axis:
            outside.append(f"{key}={value} is not searched ({', '.join(map(str, axis))})")
    vs_axis = (grid.get("virtual_stages") or {}).get(str(pp), [1]) if pp > 1 else [1]
    if vs not in vs_axis:
        outside.append(f"virtual_stages={vs} is not searched with pp={pp} ({', '.join(map(str, vs_axis))})")
    if ep not in grid["ep"]:
        outside.append(f"ep={ep} is not searched ({', '.join(map(str, grid['ep']))})")
    etp_axis = (grid.get("etp") or {}).get(str(tp), [tp])
    if etp not in etp_axis:
        outside.append(f"etp={etp} is not searched with tp={tp} ({', '.join(map(str, etp_axis))})")
    if mb not in grid["micro_batch"]:
        outside.append(f"micro_batch={mb} is not searched ({', '.join(map(str, grid['micro_batch']))})")
    sharding = S.Sharding(zero, fsdp)
    allowed = S.sharding_choices(tp * pp * cp)
    if sharding not in allowed:
        outside.append(
            f"{sharding.name} is not searched with tp x pp x cp = {tp * pp * cp} ({', '.join(s.name for s in allowed)})"
        )
    if offload != "none" and any(
        o.candidate.gpu.id == gpu.id and o.candidate.offload == "none" for o in search.options
    ):
        outside.append(f"offload={offload} is searched only where no candidate fits without offload")
    if seq_par != (tp > 1):
        outside.append(f"sequence_parallel={str(seq_par).lower()}: the search turns it on exactly when tp > 1")
    if precision not in searched_precisions:
        outside.append(f"precision={precision} is not searched ({', '.join(searched_precisions)}; --precision)")

    mine = S.hardware_classes(S._offers_of(offers, pricing, providers), {gpu.id}).get(gpu.id, [])
    classes = [replace(c, gpu=gpu) for c in mine]
    sizes = sorted({c.per_instance for c in classes if c.per_instance > 1}) or [8]
    counts = (
        [fixed_gpus] if fixed_gpus is not None else sorted({1} | {c for n in sizes for c in S.gpu_counts(n, max_gpus)})
    )
    if count not in counts:
        outside.append(f"{count} GPUs is not a searched count")

    # ---- the batch: --global-batch, else the default rule rounded to micro-batch x dp (as the search): the
    # pretraining rule, or LoRA/QLoRA's fine-tuning batch (default_global_batch_sequences)
    rule_sequences = default_global_batch_sequences(model, base_job)
    unit = mb * dp if dp else None
    reason: str | None = None
    why = ""
    if base_job.global_batch is not None:
        gb = base_job.global_batch
    elif unit:
        gb = int(global_batch_of(rule_sequences, unit))
    else:
        gb = None
    if "global_batch" in spec and spec["global_batch"] != gb:
        outside.append(f"global_batch={spec['global_batch']}: the search runs {gb if gb else 'the batch rule'}")
        gb = spec["global_batch"]

    # ---- the search's pruning order, for one candidate
    try:
        peak = peak_for(gpu, base_job.precision)
        if base_job.precision == "fp8-mixed" and not gpu.supports("fp8"):
            raise InputError("--precision", "no fp8")
    except GpuplanError:
        peak = None
    here = [
        c
        for c in classes
        if (c.per_instance == 1 if count == 1 else c.per_instance > 1 and count % c.per_instance == 0)
    ]
    # an offer takes the TP group when its instance and its NVLink domain hold it (as train --offer links it)
    takes = [
        c
        for c in here
        if tp == 1
        or (
            offer_accelerator(c.offer, gpu).interconnect is not None
            and tp <= c.per_instance
            and (c.offer.scale_up_domain_gpus is None or tp <= c.offer.scale_up_domain_gpus)
        )
    ]
    mp = tp * pp * cp
    if peak is None:
        reason, why = PlanPrune.NOT_SUPPORTED, f"{gpu.id} lacks {base_job.precision}"
    elif not here:
        reason, why = (
            PlanPrune.NO_OFFER_OF_THAT_SIZE,
            f"no {pricing} instance gives {count} {gpu.id} in whole instances",
        )
    elif model.attention_heads % tp or count % mp or (count // pp) % (ep * etp) or not takes:
        reason, why = (
            PlanPrune.LAYOUT_DOES_NOT_DIVIDE,
            (
                f"tp x pp x cp must divide {count}, ep x etp the {count} / pp GPUs of a stage, tp the "
                f"{model.attention_heads} heads, and an instance's NVLink domain hold the tp group"
            ),
        )
    total_flops = training_compute(model, base_job.seq_len, tokens, method=base_job.method).total_flops
    floor_s = total_flops / (count * peak * S.mfu_ceiling(gpu, base_job.precision, step_a)) if peak else None
    if reason is None and deadline_s is not None and floor_s is not None and floor_s > deadline_s:
        reason, why = PlanPrune.MISSES_DEADLINE, "even at the step-time model's MFU ceiling"
    if reason is None and unit:
        if base_job.global_batch is not None or "global_batch" in spec:
            if gb is None or gb % unit:
                reason, why = (
                    PlanPrune.LAYOUT_DOES_NOT_DIVIDE,
                    f"global batch {gb} is not whole micro_batch x dp = {unit}",
                )
        elif unit > S.BATCH_RULE_SLACK * rule_sequences:
            reason, why = (
                PlanPrune.BATCH_ABOVE_RULE,
                (
                    f"micro_batch x dp = {unit} is over {S.BATCH_RULE_SLACK:g} x the rule's "
                    f"{rule_sequences:,.0f} sequences"
                ),
            )

    # ---- memory: the search's rungs of the layout's offload level (search.rungs_of), in its order: no recompute;
    # else selective and the first partial (fewest layers) or full that fits, both timed where selective and a
    # partial fit; with activations offloaded, the fewest layers that fit. A given rung the search would not time
    # is dominated, one that does not fit does_not_fit_memory
    lay = job = None
    total_by: dict[S.Rung, float] = {}  # the busiest GPU's bytes by rung
    refused = ""
    chunk = -(-model.layers // max(1, pp)) // max(1, vs)  # a model chunk's layers on the busiest stage

    def job_at(rung: S.Rung, layers: int | None = None) -> TrainingJob:
        n = rung.layers(chunk, vs) if layers is None else layers
        return replace(
            base_job,
            micro_batch=mb,
            global_batch=gb,
            recompute=rung.recompute,
            recompute_layers=n if rung.recompute == "partial" else None,
            offload_layers=n if rung.offload == "activations" else None,
            fsdp=fsdp,
        )

    rungs = S.rungs_of(offload) if offload in S.OFFLOAD_ORDER else ()
    try:
        lay = Parallelism(
            gpus=count,
            tp=tp,
            pp=pp,
            cp=cp,
            ep=ep,
            etp=None if etp == tp else etp,
            sequence_parallel=seq_par,
            zero=zero,
            virtual_stages=vs,
            offload=offload,
        )
        for rung in rungs:
            try:
                j = job_at(rung)
                validate_layout(model, lay, j)  # what training_memory refuses (the grid never holds it)
                total_by[rung] = float(busiest_total_bytes(model, gpu, lay, j, mem_a))
            except GpuplanError as err:
                refused = str(err)
    except GpuplanError as err:
        if reason is None:
            reason, why = PlanPrune.LAYOUT_DOES_NOT_DIVIDE, str(err)
    usable = gpu.usable_memory_bytes
    fitting = [r for r in rungs if total_by.get(r, math.inf) <= usable]
    selective = next((r for r in fitting if r.recompute == "selective"), None)
    if fitting and fitting[0].recompute == "none" and not fitting[0].quarter:
        timed = [fitting[0]]  # no recompute fits: every other rung is dominated
    else:
        chain = next((r for r in fitting if r.recompute in ("partial", "full") or r.offload == "activations"), None)
        if selective is not None and (chain is None or chain.recompute == "full"):
            timed = [selective]
        else:
            timed = [r for r in (selective, chain) if r is not None]
    lightest = timed[0] if timed else None
    # the layout's own rung: recompute= (else the lightest the search times), with its layer counts
    rc = spec.get("recompute") or (lightest or (rungs[-1] if rungs else S.Rung("none", "full"))).recompute
    layers_given = spec.get("recompute_layers") if rc == "partial" else spec.get("offload_layers")
    if spec.get("recompute_layers") is not None and rc != "partial":
        raise InputError(FLAG, "recompute_layers goes with recompute=partial")
    if spec.get("offload_layers") is not None and offload != "activations":
        raise InputError(FLAG, "offload_layers goes with offload=activations")
    if offload == "activations" and rc != "none":
        outside.append(f"recompute={rc} with offload=activations is not searched (no recompute with it)")
    # a quarter of a chunk shorter than 4 layers can be 0 layers: the same as without it (the search counts such a
    # rung as not fitting, or as dominated where no recompute fits); a given count picks its rung, else the one the
    # search times, else the fewest layers above 0
    same = [r for r in rungs if r.recompute == rc]
    if layers_given is not None:
        same = [r for r in same if r.quarter and r.layers(chunk, vs) == layers_given]
    elif any(r.quarter for r in same):
        same = [r for r in same if r in timed] or [r for r in same if r.layers(chunk, vs) > 0] or same
    given = same[0] if same else None
    layers_of = layers_given if layers_given is not None else (given.layers(chunk, vs) if given else None)
    if given is None and lay is not None:  # not a rung of the grid: estimated all the same
        quarters = ", ".join(map(str, sorted({r.layers(chunk, vs) for r in rungs if r.quarter})))
        if rc == "partial":
            outside.append(f"recompute_layers={layers_given} is not searched here ({quarters}: quarters of a chunk)")
        elif offload == "activations" and rc == "none":
            outside.append(f"offload_layers={layers_given} is not searched here ({quarters}: quarters of a chunk)")
        elif rc not in S.RECOMPUTE_ORDER:
            outside.append(f"recompute={rc} is not searched ({', '.join(S.RECOMPUTE_ORDER)})")
        given = S.Rung(offload, rc, 0)
        try:
            j = job_at(given, layers_of)
            validate_layout(model, lay, j)
            total_by[given] = float(busiest_total_bytes(model, gpu, lay, j, mem_a))
        except GpuplanError as err:
            refused = str(err)
    if reason is None and lay is not None and given not in total_by:
        reason, why = PlanPrune.NOT_SUPPORTED, refused
    if reason is None and lay is not None and given is not None:
        label = f"recompute {rc}" + (f" of {layers_of} layers" if rc == "partial" else "")
        if offload == "activations":
            label += f", {layers_of} layers' activations offloaded"
        if total_by[given] > usable:
            reason, why = (
                PlanPrune.DOES_NOT_FIT_MEMORY,
                f"{total_by[given] / 2**30:,.1f} GiB on the busiest GPU > {usable / 2**30:,.1f} GiB usable, "
                f"with {label}",
            )
        elif given in rungs and given not in timed and lightest is not None:
            lighter = f"recompute {lightest.recompute}" + (
                f" of {lightest.layers(chunk, vs)} layers" if lightest.recompute == "partial" else ""
            )
            if lightest.offload == "activations":
                lighter = f"{lightest.layers(chunk, vs)} layers' activations offloaded"
            reason, why = PlanPrune.DOMINATED, f"{lighter} fits too and is never slower"
    recompute = rc
    rival = None  # selective and a partial recompute both fit: the search times both, the slower is dominated
    if lay is not None and given is not None:
        job = job_at(given, layers_of)
        if reason is None and len(timed) == 2 and given in timed:
            other = timed[1 - timed.index(given)]
            rival = (job_at(other), timed.index(other) < timed.index(given), other)

    # ---- each hardware class at the count: budget at the ceiling, the estimate, the timed constraints, the rank
    tried = []
    for c in takes or here[:1] or classes[:1]:
        tried.append(_on_offer(c.offer, reason, why, model, gpu, lay, job, mem_a, step_a, total_flops, peak,
                               floor_s, count, deadline_s, budget_usd, search, machine, rival))  # fmt: skip
    ranked = [t for t in tried if t["pruned"] is None and t["rank"] is not None]
    chosen = min(ranked, key=lambda t: t["rank"]) if ranked else (tried[0] if tried else None)

    best = search.options[0] if search.options else None
    best_est = _estimate(model, best.candidate.gpu, best.candidate.layout(), best.candidate.job(base_job),
                         best.candidate.offer, mem_a, step_a, total_flops,
                         machine) if best is not None else None  # fmt: skip
    this = chosen["estimate"] if chosen else None
    pruned = chosen["pruned"] if chosen else reason
    record: dict[str, Any] = {
        "query": dict(spec),
        "gpu": gpu.id,
        "gpus": count,
        "layout": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "virtual_stages": vs,
            "ep": ep,
            "etp": etp if model.moe is not None else None,
            "zero": zero,
            "fsdp": fsdp,
            "sequence_parallel": seq_par,
            "micro_batch": mb,
            "global_batch": gb,
            "seq_len": base_job.seq_len,
            "recompute": recompute,
            "recompute_layers": job.recompute_layers if job is not None else spec.get("recompute_layers"),
            "offload": offload,
            "offload_layers": job.offload_layers if job is not None else spec.get("offload_layers"),
            "precision": precision,
        },
        "offer": S._offer_dict(chosen["offer"]) if chosen and chosen["offer"].pricing != "owned" else None,
        "in_grid": not outside,
        "outside_grid": outside,
        "status": "pruned" if pruned else ("option" if not outside else "outside_grid"),
        "pruned": str(pruned) if pruned else None,
        "pruned_why": (chosen["why"] if chosen else why) or None,
        "rank": chosen["rank"] if chosen and not pruned else None,
        "feasible": search.feasible,
        "shown": bool(chosen and not pruned and not outside and chosen["rank"] <= len(search.options)),
        "estimate": this,
        "best": best_est,
        "versus_best": _versus(this, best_est) if this and best_est else None,
    }
    for key in ("grad_accumulation", "stack", "recipe"):
        if key in spec and this is not None and spec[key] != this[key]:
            record["outside_grid"].append(f"{key}={spec[key]}: the layout gives {this[key]}")
            record["in_grid"] = False
    return record


def _on_offer(offer, reason, why, model, gpu, lay, job, mem_a, step_a, total_flops, peak, floor_s, count,
              deadline_s, budget_usd, search, machine=None, rival=None) -> dict[str, Any]:  # fmt: skip
    """The candidate on one hardware class: its reason (the earlier one, else budget, estimate, timed checks), its
    estimate and rank. ``rival``: (job, whether it comes first in the search's order, its rung) of the other rung
    the search times beside this one (selective and a partial recompute): the slower of the two on this offer is
    dominated, a tie going to the first."""
    price = offer.usd_per_gpu_hour
    if (
        reason is None
        and budget_usd is not None
        and floor_s is not None
        and floor_s * count / 3600 * price > budget_usd
    ):
        reason, why = PlanPrune.OVER_BUDGET, "even at the step-time model's MFU ceiling"
    est = None
    if lay is not None and job is not None and peak is not None:
        try:
            est = _estimate(model, gpu, lay, job, offer, mem_a, step_a, total_flops, machine)
        except GpuplanError as e:
            if reason is None:
                reason, why = PlanPrune.NOT_SUPPORTED, str(e)
        if est is not None and not (math.isfinite(est["mfu"]) and 0 < est["mfu"] <= 1):  # time_to_train's check
            est = None
    if est is None and reason is None:
        reason, why = PlanPrune.NOT_SUPPORTED, "the estimate refused the layout"
    if reason is None and est is not None and rival is not None:
        rival_job, first, rung = rival
        linked = offer_accelerator(offer, gpu, lay.tp)
        try:
            rival_s = training_step(
                model, linked, lay, rival_job, offer_network(offer, step_a), lay.virtual_stages, memory=mem_a
            )
        except GpuplanError:
            rival_s = None
        if rival_s is not None and (
            rival_s.iteration_s < est["step_s"] or (first and rival_s.iteration_s == est["step_s"])
        ):
            name = f"recompute {rung.recompute}" + (f" of {rival_job.recompute_layers} layers" if rung.quarter else "")
            reason, why = PlanPrune.DOMINATED, f"{name} fits too and is faster here"
    if reason is None and est is not None:
        # as the search: the run with failures must meet the deadline and the budget
        wall, dear = est["wall_time_with_failures_s"], est["cost_with_failures_usd"]
        if deadline_s is not None and wall > deadline_s:
            reason, why = PlanPrune.MISSES_DEADLINE, f"{wall / 86400:,.1f} days with failures"
        elif budget_usd is not None and dear > budget_usd:
            reason, why = PlanPrune.OVER_BUDGET, f"${dear:,.0f} with failures"
    rank = _rank(search.ranking, est, search.feasible) if est is not None else None
    return {"offer": offer, "pruned": reason, "why": why, "estimate": est, "rank": rank}


def _rank(ranking: Any, est: dict[str, Any], feasible: int) -> int:
    """One more than the feasible candidates strictly better on the objective's keys, most significant first
    (values within a relative _TIE count as equal)."""
    import numpy as np

    if not ranking or not feasible:
        return 1
    better = np.zeros(feasible, dtype=bool)
    equal = np.ones(feasible, dtype=bool)
    for name, axis in ranking:
        v = float(est[name])
        close = np.abs(axis - v) <= _TIE * np.maximum(np.abs(axis), abs(v))
        better |= equal & ~close & (axis < v)
        equal &= close
    return int(better.sum()) + 1


def _pair(this: float, best: float) -> dict[str, float]:
    return {"this": this, "best": best, "difference": this - best}


def _versus(this: dict[str, Any], best: dict[str, Any]) -> dict[str, Any]:
    """This layout against option 1: the time to train by step part (the part's share of a step x the time), the
    memory of the busiest GPU by group, GPU-hours, the price of a GPU-hour and the cost (difference: this - best)."""
    parts = list(dict.fromkeys([*best["step_parts_s"], *this["step_parts_s"]]))

    def run_s(e: dict[str, Any], part: str) -> float:
        return e["step_parts_s"].get(part, 0.0) / e["step_s"] * e["time_s"]

    return {
        "time_s": _pair(this["time_s"], best["time_s"]),
        "time_by_part_s": {p: _pair(run_s(this, p), run_s(best, p)) for p in parts},
        "step_s": _pair(this["step_s"], best["step_s"]),
        "mfu": _pair(this["mfu"], best["mfu"]),
        "gpus": _pair(this["gpus"], best["gpus"]),
        "gpu_hours": _pair(this["gpu_hours"], best["gpu_hours"]),
        "usd_per_gpu_hour": _pair(this["usd_per_gpu_hour"], best["usd_per_gpu_hour"]),
        "cost_usd": _pair(this["cost_usd"], best["cost_usd"]),
        "peak_memory_bytes": _pair(this["peak_memory_bytes"], best["peak_memory_bytes"]),
        "memory_bytes": {g: _pair(this["memory_bytes"][g], best["memory_bytes"][g]) for g in this["memory_bytes"]},
    }


def _estimate(model, gpu, lay, job, offer, mem_a, step_a, total_flops, machine=None) -> dict[str, Any]:
    """The layout through ``train``'s functions on one offer: memory by group, step parts, time, cost, band;
    ``machine``: the search's (MachineOptions, MachineAssumptions), None for ``train``'s defaults."""
    mem = training_memory(model, gpu, lay, job, mem_a, find_max_batch=False)
    linked = offer_accelerator(offer, gpu, lay.tp)
    step = training_step(model, linked, lay, job, offer_network(offer, step_a), lay.virtual_stages, memory=mem_a)
    peak = peak_for(gpu, job.precision)
    t = time_to_train(total_flops, lay.gpus, peak, step.mfu)
    cost = t.gpu_hours * offer.usd_per_gpu_hour
    stack, _ = resolve_stack(job, lay, gpu)
    band = S.option_band(model, gpu, job, stack.name)
    lo, hi = band.interval(t.seconds, -1) if band is not None else (None, None)
    clo, chi = band.interval(cost, -1) if band is not None else (None, None)
    # the search ranks time and cost with failures: the same checkpoint and failure model on this layout
    options, assumptions = machine if machine is not None else (MachineOptions(), MachineAssumptions())
    run = layout_failures(model, gpu, offer, lay, job, t.seconds, options=options, assumptions=assumptions)
    assert run.run is not None  # (computed with the ideal time)
    return {
        "stack": stack.name,
        "recipe": mem.recipe.name,
        "grad_accumulation": job.grad_accumulation(lay.dp),
        "mfu": step.mfu,
        "step_s": step.iteration_s,
        "step_parts_s": {k: float(v) for k, v in step.parts.items()},
        "steps": t.seconds / step.iteration_s,
        "time_s": t.seconds,
        "time_s_p10": lo,
        "time_s_p90": hi,
        "gpu_hours": t.gpu_hours,
        "usd_per_gpu_hour": offer.usd_per_gpu_hour,
        "cost_usd": cost,
        "cost_usd_p10": clo,
        "cost_usd_p90": chi,
        "goodput": run.run.goodput,
        "wall_time_with_failures_s": run.run.wall_s,
        "cost_with_failures_usd": run.cost_with_failures_usd,
        "peak_memory_bytes": mem.total_bytes,
        "capacity_bytes": mem.capacity_bytes,
        "memory_bytes": {g: mem.group_bytes(g) for g in mem.group_order},
        "gpus": lay.gpus,
    }
