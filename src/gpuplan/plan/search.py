"""The planner (``gpuplan plan train`` / ``plan serve``, issue 16, version 1): search hardware x layout for a
training run or a serving load, with every candidate evaluated by the very functions ``train`` and ``serve`` use.

Training (:func:`search_train`). The grid, per accelerator:

- offers: one pricing kind per ranking; offers of the same GPU, instance size and scale-out network give the same
  step time, so each such *hardware class* is priced with its cheapest offer (the others cost more for the same
  plan). Multi-GPU plans run on whole multi-GPU instances, single-GPU plans on single-GPU offers;
- GPU counts (:func:`gpu_counts`): 1, then whole instances: 1-8 instances, then four counts per doubling
  (x1, x1.25, x1.5, x1.75), up to ``max_gpus`` (or the one ``--gpus``);
- tp in 1, 2, 4, 8 (within the instance, dividing the heads; sequence parallelism on with tp > 1, as
  Megatron-LM runs it); pp: the divisors of the layer count and the powers of two (uneven stages, as Llama 3
  405B's 126 layers on 16 stages), up to 64; ep (MoE): 1, 2, 4, 8 dividing the experts; cp = 1;
- sharding: pure data parallelism: DDP (zero 0), ZeRO-1/2/3 (DeepSpeed), FSDP2; with tp or pp > 1: Megatron's
  distributed optimizer (zero 1, which is never slower and never larger than zero 0 in the model) or FSDP2;
- recompute none, selective, full; micro-batch 1, 2, 4, 8, 16;
- the global batch: ``--global-batch``, else the default rule ``train`` uses (``estimate.steptime.
  default_global_batch``), passed explicitly so that memory and step time count the same micro-batches.

Pruning, with exact counts by reason (:class:`~gpuplan.spec.choices.PlanPrune`): whole blocks that cannot divide or
have no offer are counted without evaluation; memory is non-increasing in the GPU count (ZeRO shards over dp, fewer
micro-batches in flight) and in recomputation, and non-decreasing in the micro-batch, so the smallest count that
fits is found by bisection and a micro-batch that fits nowhere ends the micro-batch loop; at a count where a
lighter recompute fits, the heavier ones are ``dominated`` (never faster in the step-time model, same GPUs and
price). Every candidate left is timed with ``estimate.steptime.training_step`` (with the offer's network, as
``plan_training`` does) and ``estimate.time.time_to_train``: the option equals ``gpuplan.train`` on that layout.

Serving (:func:`search_serve`): GPU x weight format x KV-cache format x tp x engine profile, each through
``estimate.inference.serving_plan``, ``fleet_for`` and ``cost_per_million`` as ``serve`` does.
"""

from __future__ import annotations

import bisect
import heapq
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import GpuplanError, InputError
from ..estimate.memory import MemoryAssumptions, training_memory
from ..estimate.steptime import StepAssumptions, default_global_batch_tokens, global_batch_of, training_step
from ..estimate.time import peak_for, time_to_train, training_compute
from ..spec.accelerator import Accelerator
from ..spec.choices import Objective, PlanPrune
from ..spec.model import ModelSpec
from ..spec.offer import Offer
from ..spec.training import Parallelism, TrainingJob
from .training import offer_network

R = PlanPrune
TP_CHOICES = (1, 2, 4, 8)
EP_CHOICES = (1, 2, 4, 8)
MICRO_BATCHES = (1, 2, 4, 8, 16)
RECOMPUTE_ORDER = ("none", "selective", "full")  # lighter first: never slower, never smaller in memory
MAX_PP = 64
#: Without --global-batch, a layout whose micro-batch x dp alone exceeds this multiple of the rule's batch is set
#: aside (batch_above_rule): training at many times the published batch is not the same run.
BATCH_RULE_SLACK = 2.0
#: Whole instances of a count grid: 1-8, then four per doubling.
_STEPS = (4, 5, 6, 7)


def _offers_of(offers: Iterable[Any], pricing: str, providers: Sequence[str] | None) -> list[Any]:
    """The offers of one pricing kind from the named providers; a provider with no offer at all is a typo
    (one line, exit 2), not an empty search."""
    offers = list(offers)
    if providers:
        known = sorted({o.provider for o in offers})
        unknown = [p for p in providers if p not in known]
        if unknown:
            raise InputError("--providers", f"no offers from {', '.join(unknown)}; providers: {', '.join(known)}")
    return [o for o in offers if o.pricing == pricing and (not providers or o.provider in providers)]


def gpu_counts(per_instance: int, max_gpus: int) -> list[int]:
    """Whole-instance GPU counts up to ``max_gpus``: 1-8 instances, then x1, x1.25, x1.5, x1.75 per doubling."""
    ks = set(range(1, 9))
    k = 1
    while per_instance * k * 8 <= max_gpus * 2:
        ks.update(s * k * 2 for s in _STEPS)
        k *= 2
    return sorted(per_instance * k for k in ks if per_instance * k <= max_gpus)


def pp_choices(layers: int) -> list[int]:
    """Pipeline degrees: divisors of the layer count and powers of two (uneven stages), up to MAX_PP."""
    out = {d for d in range(1, min(layers, MAX_PP) + 1) if layers % d == 0}
    p = 1
    while p <= min(layers, MAX_PP):
        out.add(p)
        p *= 2
    return sorted(out)


@dataclass(frozen=True)
class Sharding:
    """One value of the sharding axis: the ZeRO stage and whether it is FSDP2."""

    zero: int
    fsdp: bool = False

    @property
    def name(self) -> str:
        return "fsdp" if self.fsdp else f"zero-{self.zero}"


def sharding_choices(model_parallel: int) -> tuple[Sharding, ...]:
    if model_parallel == 1:
        return (Sharding(0), Sharding(1), Sharding(2), Sharding(3), Sharding(3, True))
    return (Sharding(1), Sharding(3, True))


@dataclass(frozen=True)
class HardwareClass:
    """Offers of one GPU, instance size and scale-out network: the same plan; priced by the cheapest."""

    gpu: Accelerator
    per_instance: int
    offer: Offer


def hardware_classes(offers: Iterable[Offer], gpu_ids: set[str]) -> dict[str, list[HardwareClass]]:
    """gpu id -> its hardware classes (cheapest offer of each (instance size, network))."""
    best: dict[tuple[str, int, float | None], Offer] = {}
    for o in offers:
        if o.gpu not in gpu_ids:
            continue
        key = (o.gpu, o.gpu_count, o.scale_out_bytes_per_s)
        cur = best.get(key)
        if cur is None or (o.usd_per_gpu_hour, o.id) < (cur.usd_per_gpu_hour, cur.id):
            best[key] = o
    out: dict[str, list[HardwareClass]] = {}
    for (gid, n, _), o in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[1].id)):
        out.setdefault(gid, []).append(HardwareClass(None, n, o))  # type: ignore[arg-type]
    return out


# --------------------------------------------------------------------------------------------------- train


@dataclass(frozen=True)
class TrainCandidate:
    """One evaluated, feasible candidate (light: the full option is built only for the ones reported)."""

    gpu: Accelerator
    offer: Offer
    gpus: int
    tp: int
    pp: int
    ep: int
    sharding: Sharding
    recompute: str
    micro_batch: int
    global_batch: int
    mfu: float
    step_s: float
    time_s: float
    cost_usd: float

    def layout(self) -> Parallelism:
        return Parallelism(
            gpus=self.gpus,
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            sequence_parallel=self.tp > 1,
            zero=self.sharding.zero,
        )

    def job(self, base: TrainingJob) -> TrainingJob:
        return replace(
            base,
            micro_batch=self.micro_batch,
            global_batch=self.global_batch,
            recompute=self.recompute,
            fsdp=self.sharding.fsdp,
        )

    def train_kwargs(self) -> dict[str, Any]:
        """The ``gpuplan.train`` keywords of this layout (the equivalence test calls train with them)."""
        return dict(
            gpu=self.gpu.id,
            gpus=self.gpus,
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            sequence_parallel=self.tp > 1,
            zero=self.sharding.zero,
            fsdp=self.sharding.fsdp,
            micro_batch=self.micro_batch,
            global_batch=self.global_batch,
            recompute=self.recompute,
            offer=self.offer.id,
        )


@dataclass(frozen=True)
class TrainOption:
    candidate: TrainCandidate
    peak_memory_bytes: float
    capacity_bytes: int
    stack: str
    recipe: str
    grad_accumulation: int
    pareto: bool
    launch: dict[str, str | None]


@dataclass(frozen=True)
class TrainSearch:
    searched: int
    evaluated: int
    grid: dict[str, Any]
    pruned: dict[str, int]
    options: tuple[TrainOption, ...]
    pareto_size: int
    feasible: int
    notes: tuple[str, ...] = ()


@dataclass
class _Count:
    pruned: Counter[str] = field(default_factory=Counter)
    searched: int = 0
    evaluated: int = 0

    def add(self, reason: str, n: int) -> None:
        if n:
            self.pruned[reason] += n
            self.searched += n


def search_train(
    model: ModelSpec,
    gpus: Sequence[Accelerator],
    offers: Iterable[Offer],
    tokens: float,
    base_job: TrainingJob,
    *,
    pricing: str = "on-demand",
    providers: Sequence[str] | None = None,
    fixed_gpus: int | None = None,
    max_gpus: int = 16384,
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    objective: str = Objective.COST,
    top: int = 20,
    memory_assumptions: MemoryAssumptions = MemoryAssumptions(),
    step_assumptions: StepAssumptions = StepAssumptions(),
) -> TrainSearch:
    """Every candidate of the grid (module docstring), pruned with counts by reason; the top ``top`` by the
    objective among the feasible ones, each flagged when it is on the Pareto front of (time, cost, GPUs)."""
    offers = _offers_of(offers, pricing, providers)
    by_gpu = hardware_classes(offers, {g.id for g in gpus})
    compute = training_compute(model, base_job.seq_len, tokens)
    rule_sequences = default_global_batch_tokens(_params(model)) / base_job.seq_len
    tally = _Count()
    feasible: list[TrainCandidate] = []
    heads = model.attention_heads
    pps = pp_choices(model.layers)
    eps = [e for e in EP_CHOICES if model.moe is not None and model.moe.experts % e == 0] or [1]
    mem_cache: dict[tuple, bool] = {}
    for gpu in gpus:
        classes = [replace(c, gpu=gpu) for c in by_gpu.get(gpu.id, [])]
        try:
            peak = peak_for(gpu, base_job.precision)
            if base_job.precision == "fp8-mixed" and not gpu.supports("fp8"):
                raise InputError("--precision", "no fp8")
        except GpuplanError:
            peak = None
        sizes = sorted({c.per_instance for c in classes if c.per_instance > 1}) or [8]
        if fixed_gpus is not None:
            counts = [fixed_gpus]
        else:
            counts = sorted({1} | {c for n in sizes for c in gpu_counts(n, max_gpus)})
        node = max(sizes)
        for count in counts:
            here = [
                c
                for c in classes
                if (c.per_instance == 1 if count == 1 else c.per_instance > 1 and count % c.per_instance == 0)
            ]
            block = _grid_size(count, pps, eps)
            if peak is None:
                tally.add(R.NOT_SUPPORTED, block * max(1, len(here)))
                continue
            if not here:
                tally.add(R.NO_OFFER_OF_THAT_SIZE, block)
        # the evaluated part: layouts over the counts that have offers
        for tp in TP_CHOICES:
            for pp in pps:
                for ep in eps:
                    per_layout = len(sharding_choices(tp * pp)) * len(RECOMPUTE_ORDER) * len(MICRO_BATCHES)
                    valid: list[tuple[int, list[HardwareClass]]] = []
                    for count in counts:
                        here = [
                            c
                            for c in classes
                            if (
                                c.per_instance == 1
                                if count == 1
                                else c.per_instance > 1 and count % c.per_instance == 0
                            )
                        ]
                        if peak is None or not here:
                            continue
                        mp = tp * pp
                        ok = (
                            heads % tp == 0
                            and (tp == 1 or (gpu.interconnect is not None and tp <= min(node, count)))
                            and count % mp == 0
                            and (count // mp) % ep == 0
                            and all(tp <= c.per_instance or count == 1 for c in here)
                        )
                        if not ok:
                            tally.add(R.LAYOUT_DOES_NOT_DIVIDE, per_layout * len(here))
                        else:
                            valid.append((count, here))
                    if valid:
                        _search_layout(
                            model,
                            gpu,
                            tp,
                            pp,
                            ep,
                            valid,
                            base_job,
                            compute.total_flops,
                            peak,
                            rule_sequences,
                            deadline_s,
                            budget_usd,
                            memory_assumptions,
                            step_assumptions,
                            tally,
                            feasible,
                            mem_cache,
                        )
    key = _objective_key(objective)
    best = heapq.nsmallest(top, feasible, key=key)
    flags, front_size = _pareto_flags(best, feasible)
    options = tuple(_option(model, c, base_job, flags[i], memory_assumptions) for i, c in enumerate(best))
    grid = {
        "gpus": [g.id for g in gpus],
        "pricing": pricing,
        "providers": list(providers) if providers else None,
        "hardware_classes": sum(len(v) for v in by_gpu.values()),
        "gpu_counts": "the --gpus count"
        if fixed_gpus
        else f"whole instances, 1-8 then x1/1.25/1.5/1.75 per doubling, <= {max_gpus}",
        "tp": list(TP_CHOICES),
        "pp": pps,
        "cp": [1],
        "ep": eps,
        "sharding": {
            "pure data parallel": ["zero-0", "zero-1", "zero-2", "zero-3", "fsdp"],
            "tp or pp > 1": ["zero-1", "fsdp"],
        },
        "recompute": list(RECOMPUTE_ORDER),
        "micro_batch": list(MICRO_BATCHES),
        "global_batch": base_job.global_batch
        if base_job.global_batch is not None
        else "default rule (tokens per step by model size)",
        "precision": base_job.precision,
        "seq_len": base_job.seq_len,
    }
    assert tally.searched == sum(tally.pruned.values()) + len(feasible), "every candidate is counted once"
    return TrainSearch(
        searched=tally.searched,
        evaluated=tally.evaluated,
        grid=grid,
        pruned={r.value: tally.pruned.get(r.value, 0) for r in R if r != R.MISSES_SLO},
        options=options,
        pareto_size=front_size,
        feasible=len(feasible),
    )


def _params(model: ModelSpec) -> float:
    from ..estimate.params import count_params

    return count_params(model).total


def _grid_size(count: int, pps: Sequence[int], eps: Sequence[int]) -> int:
    """Candidates of the layout grid at one GPU count (for blocks counted without evaluation)."""
    return sum(
        len(sharding_choices(tp * pp)) * len(RECOMPUTE_ORDER) * len(MICRO_BATCHES) * len(eps)
        for tp in TP_CHOICES
        for pp in pps
    )


def _search_layout(
    model,
    gpu,
    tp,
    pp,
    ep,
    valid,
    base_job,
    total_flops,
    peak,
    rule_sequences,
    deadline_s,
    budget_usd,
    mem_a,
    step_a,
    tally,
    feasible,
    mem_cache,
) -> None:
    """All shardings, recomputes and micro-batches of one (GPU, tp, pp, ep) over the counts in ``valid``."""
    ceiling = mfu_ceiling(gpu, base_job.precision, step_a)
    networks: dict[str, StepAssumptions] = {}
    if deadline_s is not None:  # counts that cannot meet the deadline at the ceiling: no memory search either
        for count, here in valid:
            if total_flops / (count * peak * ceiling) > deadline_s:
                tally.add(
                    R.MISSES_DEADLINE,
                    len(sharding_choices(tp * pp)) * len(RECOMPUTE_ORDER) * len(MICRO_BATCHES) * len(here),
                )
        valid = [(c, h) for c, h in valid if total_flops / (c * peak * ceiling) <= deadline_s]
        if not valid:
            return
    counts = [c for c, _ in valid]
    width = [len(h) for _, h in valid]  # hardware classes at each count
    mp = tp * pp
    for sharding in sharding_choices(mp):
        dead = False  # a micro-batch that fits at no count: larger ones do not either
        prev_first: dict[str, int] = {}  # recompute -> index in counts of the first fit at the previous micro-batch
        for mb in MICRO_BATCHES:
            block = len(RECOMPUTE_ORDER)
            if dead:
                tally.add(R.DOES_NOT_FIT_MEMORY, block * sum(width))
                continue
            # the global batch of each count; counts it rules out are counted here
            gbs: list[int | None] = []
            for count in counts:
                lay = Parallelism(gpus=count, tp=tp, pp=pp, ep=ep, sequence_parallel=tp > 1, zero=sharding.zero)
                if base_job.global_batch is not None:
                    gbs.append(base_job.global_batch if base_job.global_batch % (mb * lay.dp) == 0 else None)
                elif mb * lay.dp > BATCH_RULE_SLACK * rule_sequences:
                    gbs.append(-1)
                else:
                    # default_global_batch's rounding of the rule's sequences (computed once per search)
                    gbs.append(global_batch_of(rule_sequences, mb * lay.dp))
            live = [i for i, g in enumerate(gbs) if g is not None and g > 0]
            for i, g in enumerate(gbs):
                if g is None:
                    tally.add(R.LAYOUT_DOES_NOT_DIVIDE, block * width[i])
                elif g < 0:
                    tally.add(R.BATCH_ABOVE_RULE, block * width[i])
            if not live:
                continue

            def fits(idx: int, recompute: str, sharding=sharding, mb=mb, gbs=gbs) -> bool:
                count = counts[idx]
                key = (gpu.id, count, tp, pp, ep, sharding, recompute, mb, gbs[idx])
                hit = mem_cache.get(key)
                if hit is None:
                    lay = Parallelism(gpus=count, tp=tp, pp=pp, ep=ep, sequence_parallel=tp > 1, zero=sharding.zero)
                    job = replace(
                        base_job, micro_batch=mb, global_batch=gbs[idx], recompute=recompute, fsdp=sharding.fsdp
                    )
                    try:
                        hit = training_memory(model, gpu, lay, job, mem_a, find_max_batch=False).fits
                    except GpuplanError:
                        hit = False
                    mem_cache[key] = hit
                return hit

            # the first live index where each recompute fits (memory falls with the count): full first
            # memory grows with the micro-batch: the previous micro-batch's first fitting count is a floor
            bound: dict[str, int] = {}
            lo = 0
            for r in reversed(RECOMPUTE_ORDER):
                floor = bisect.bisect_left(live, prev_first.get(r, 0))
                bound[r] = lo = _first_fit(live, max(lo, floor), lambda i, r=r: fits(i, r))
                prev_first[r] = live[bound[r]] if bound[r] < len(live) else len(counts)
            if bound["full"] == len(live):
                dead = True
            for j, i in enumerate(live):
                if j < bound["full"]:
                    tally.add(R.DOES_NOT_FIT_MEMORY, block * width[i])
                    continue
                chosen = next(r for r in RECOMPUTE_ORDER if j >= bound[r])
                k = RECOMPUTE_ORDER.index(chosen)
                tally.add(R.DOES_NOT_FIT_MEMORY, k * width[i])
                tally.add(R.DOMINATED, (len(RECOMPUTE_ORDER) - k - 1) * width[i])
                count, gb = counts[i], gbs[i]
                assert gb is not None
                lay = Parallelism(gpus=count, tp=tp, pp=pp, ep=ep, sequence_parallel=tp > 1, zero=sharding.zero)
                job = replace(base_job, micro_batch=mb, global_batch=gb, recompute=chosen, fsdp=sharding.fsdp)
                floor_s = total_flops / (count * peak * ceiling)  # no layout of this count is faster
                for hw in valid[i][1]:
                    if deadline_s is not None and floor_s > deadline_s:
                        tally.add(R.MISSES_DEADLINE, 1)
                        continue
                    if budget_usd is not None and floor_s * count / 3600 * hw.offer.usd_per_gpu_hour > budget_usd:
                        tally.add(R.OVER_BUDGET, 1)
                        continue
                    tally.evaluated += 1
                    try:
                        net = networks.get(hw.offer.id)
                        if net is None:
                            net = networks[hw.offer.id] = offer_network(hw.offer, step_a)
                        step = training_step(model, gpu, lay, job, net)
                        t = time_to_train(total_flops, count, peak, step.mfu)
                    except GpuplanError:
                        tally.add(R.NOT_SUPPORTED, 1)
                        continue
                    cost = t.gpu_hours * hw.offer.usd_per_gpu_hour
                    if deadline_s is not None and t.seconds > deadline_s:
                        tally.add(R.MISSES_DEADLINE, 1)
                    elif budget_usd is not None and cost > budget_usd:
                        tally.add(R.OVER_BUDGET, 1)
                    else:
                        tally.searched += 1
                        feasible.append(
                            TrainCandidate(
                                gpu,
                                hw.offer,
                                count,
                                tp,
                                pp,
                                ep,
                                sharding,
                                chosen,
                                mb,
                                gb,
                                step.mfu,
                                step.iteration_s,
                                t.seconds,
                                cost,
                            )
                        )


def mfu_ceiling(gpu: Accelerator, precision: str, a: StepAssumptions) -> float:
    """An upper bound on the step-time model's MFU on this GPU: every part of a step runs at most at the best of
    its kernels' efficiencies (GEMMs at the matmul efficiency, attention at the flash efficiency, both against
    their own peak), and every other part only adds time. Used to set aside deadline and budget misses before
    timing them; tests check it against training_step."""
    from ..estimate.steptime import matmul_efficiency
    from ..estimate.time import training_dtype

    peak = peak_for(gpu, precision)
    peak16 = peak_for(gpu, "bf16-mixed") if precision == "fp8-mixed" else peak
    if a.matmul_efficiency is not None:
        mm = a.matmul_efficiency
        mm16 = a.matmul_efficiency
    else:
        mm = matmul_efficiency(gpu, training_dtype(precision))[0] * a.model_shape_factor
        mm16 = matmul_efficiency(gpu, "bf16")[0] * a.model_shape_factor
    attn = max(a.flash_attention_efficiency, a.fa2_on_hopper_efficiency)
    return min(1.0, max(mm, mm16 * peak16 / peak, attn * peak16 / peak))


def _first_fit(live: list[int], lo: int, fits) -> int:
    """The first position j >= lo in ``live`` whose index fits (memory non-increasing along it), else len(live)."""
    hi = len(live)
    if lo >= hi or not fits(live[hi - 1]):
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(live[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _objective_key(objective: str):
    if objective == Objective.TIME:
        return lambda c: (c.time_s, c.cost_usd, c.gpus)
    if objective == Objective.GPUS:
        return lambda c: (c.gpus, c.cost_usd, c.time_s)
    return lambda c: (c.cost_usd, c.time_s, c.gpus)


def _pareto_flags(
    best: Sequence[Any], feasible: Sequence[Any], axes=("time_s", "cost_usd", "gpus")
) -> tuple[list[bool], int]:
    """Whether each of ``best`` is on the Pareto front of ``feasible`` (lower is better on every axis), and the
    front's size. One sweep in lexicographic order: a point can only be dominated by one before it, and a
    point dominated by anything is dominated by a point of the front, so it is checked against the front
    kept so far (a few dozen points). Pure Python: numpy is not a dependency of the package."""
    if not feasible:
        return [], 0

    def dominates(q: tuple[float, ...], p: tuple[float, ...]) -> bool:
        return q != p and all(a <= b for a, b in zip(q, p, strict=True))

    front: list[tuple[float, ...]] = []
    for p in sorted(tuple(getattr(c, a) for a in axes) for c in feasible):
        if not any(dominates(q, p) for q in front):
            front.append(p)
    flags = [not any(dominates(q, tuple(getattr(c, a) for a in axes)) for q in front) for c in best]
    return flags, len(front)


def _option(model: ModelSpec, c: TrainCandidate, base_job: TrainingJob, pareto: bool, mem_a) -> TrainOption:
    """The full option of one reported candidate: its memory (peak and headroom), stack and launch hints."""
    from ..estimate.memory import resolve_recipe
    from ..estimate.steptime import resolve_stack

    lay, job = c.layout(), c.job(base_job)
    mem = training_memory(model, c.gpu, lay, job, mem_a, find_max_batch=False)
    stack, _ = resolve_stack(job, lay)
    recipe, _ = resolve_recipe(job, lay)
    accumulation = job.grad_accumulation(lay.dp)
    return TrainOption(
        c,
        mem.total_bytes,
        mem.capacity_bytes,
        stack.name,
        recipe.name,
        accumulation,
        pareto,
        train_launch(model, c, job, accumulation),
    )


# ------------------------------------------------------------------------------------------- launch hints


def train_launch(model: ModelSpec, c: TrainCandidate, job: TrainingJob, accumulation: int) -> dict[str, str | None]:
    """Ready-to-copy launch lines for the layout: torchrun + torchtitan flags, Megatron-LM pretrain_gpt.py
    arguments, and a DeepSpeed config (None where DeepSpeed's config cannot express it: pipeline stages live in
    the model code's PipelineModule)."""
    per_node = c.offer.gpu_count
    nodes = max(1, c.gpus // per_node)
    dp = c.gpus // (c.tp * c.pp)
    fp8 = job.precision == "fp8-mixed"
    run = f"torchrun --nnodes {nodes} --nproc_per_node {min(per_node, c.gpus)}"
    # torchtitan: FSDP2 shards over dp (ZeRO-3); ZeRO-1/2 are nearest to FSDP2 without resharding after forward;
    # zero 0 is replication (DDP). With pp, local_batch_size is the per-rank batch split into micro-batches
    shard = c.sharding.zero > 0
    local = c.micro_batch * (accumulation if c.pp > 1 else 1)
    tt = [
        f"{run} -m torchtitan.train --job.config_file ./{model.id}.toml",
        f"--parallelism.tensor_parallel_degree {c.tp}",
        f"--parallelism.pipeline_parallel_degree {c.pp}",
        f"--parallelism.data_parallel_shard_degree {dp if shard else 1}",
        f"--parallelism.data_parallel_replicate_degree {1 if shard else dp}",
    ]
    if c.ep > 1:
        tt.append(f"--parallelism.expert_parallel_degree {c.ep}")
    if shard and c.sharding.zero < 3:
        tt.append("--parallelism.fsdp_reshard_after_forward never")
    if c.pp > 1:
        tt.append(f"--parallelism.pipeline_parallel_microbatch_size {c.micro_batch}")
    tt += [
        f"--training.local_batch_size {local}",
        f"--training.global_batch_size {c.global_batch}",
        f"--training.seq_len {job.seq_len}",
        f"--activation_checkpoint.mode {c.recompute}",
    ]
    if fp8:
        tt.append("--model.converters float8")
    mg = [
        f"{run} pretrain_gpt.py",
        f"--tensor-model-parallel-size {c.tp}",
        f"--pipeline-model-parallel-size {c.pp}",
    ]
    if c.tp > 1:
        mg.append("--sequence-parallel")
    if c.ep > 1:
        mg.append(f"--expert-model-parallel-size {c.ep}")
    mg += [
        f"--micro-batch-size {c.micro_batch}",
        f"--global-batch-size {c.global_batch}",
        f"--seq-length {job.seq_len}",
        f"--num-layers {model.layers}",
        "--fp8-format hybrid --bf16" if fp8 else "--bf16",
    ]
    if c.recompute == "selective":
        mg.append("--recompute-granularity selective")
    elif c.recompute == "full":
        mg.append("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
    if c.sharding.fsdp:
        mg.append("--use-torch-fsdp2")
    elif c.sharding.zero >= 1:
        mg.append("--use-distributed-optimizer")
    ds: str | None = None
    if c.pp == 1:
        config: dict[str, Any] = {
            "train_batch_size": c.global_batch,
            "train_micro_batch_size_per_gpu": c.micro_batch,
            "gradient_accumulation_steps": accumulation,
            "bf16": {"enabled": True},
            "zero_optimization": {"stage": c.sharding.zero},
        }
        if c.tp > 1:
            config["tensor_parallel"] = {"autotp_size": c.tp}
        if c.recompute != "none":
            config["activation_checkpointing"] = {
                "partition_activations": c.tp > 1,
                "contiguous_memory_optimization": False,
            }
        ds = json.dumps(config, separators=(", ", ": "))
    return {"torchtitan": " ".join(tt), "megatron": " ".join(mg), "deepspeed": ds}


# ------------------------------------------------------------------------------------------------ records


def _offer_dict(o: Offer) -> dict[str, Any]:
    return {
        "id": o.id,
        "provider": o.provider,
        "instance": o.instance,
        "region": o.region,
        "gpus_per_instance": o.gpu_count,
        "pricing": o.pricing,
        "price": o.usd_per_gpu_hour,
        "usd_per_gpu_hour": o.usd_per_gpu_hour,
        "usd_per_hour": o.usd_per_hour,
        "price_date": o.price_date,
    }


def train_option_record(o: TrainOption, seq_len: int, precision: str) -> dict[str, Any]:
    c = o.candidate
    return {
        "gpu": c.gpu.id,
        "gpus": c.gpus,
        "offer": _offer_dict(c.offer),
        "layout": {
            "tp": c.tp,
            "pp": c.pp,
            "dp": c.gpus // (c.tp * c.pp),
            "cp": 1,
            "ep": c.ep,
            "zero": c.sharding.zero,
            "fsdp": c.sharding.fsdp,
            "sequence_parallel": c.tp > 1,
            "micro_batch": c.micro_batch,
            "global_batch": c.global_batch,
            "grad_accumulation": o.grad_accumulation,
            "seq_len": seq_len,
            "recompute": c.recompute,
            "stack": o.stack,
            "recipe": o.recipe,
        },
        "precision": precision,
        "mfu": c.mfu,
        "step_s": c.step_s,
        "time_s": c.time_s,
        "cost_usd": c.cost_usd,
        "gpu_hours": c.time_s * c.gpus / 3600,
        "peak_memory_bytes": o.peak_memory_bytes,
        "capacity_bytes": o.capacity_bytes,
        "headroom": 1 - o.peak_memory_bytes / o.capacity_bytes,
        "pareto": o.pareto,
        "launch": o.launch,
    }


def train_record(model: ModelSpec, tokens: float, objective: str, constraints: dict[str, Any], s: TrainSearch) -> dict:
    seq_len, precision = s.grid["seq_len"], s.grid["precision"]
    return {
        "model": {"id": model.id},
        "tokens": tokens,
        "objective": objective,
        "constraints": constraints,
        "searched": s.searched,
        "evaluated": s.evaluated,
        "feasible": s.feasible,
        "pareto_size": s.pareto_size,
        "grid": s.grid,
        "pruned": s.pruned,
        "options": [train_option_record(o, seq_len, precision) for o in s.options],
        "notes": list(s.notes),
    }


# --------------------------------------------------------------------------------------------------- serve

SERVE_FORMATS = ("bf16", "fp8", "int8", "int4-awq", "nvfp4")
SERVE_KV = ("bf16", "fp8")
SERVE_ENGINES = ("vllm", "sglang", "trtllm")


@dataclass(frozen=True)
class ServeOption:
    gpu: Accelerator
    offer: Offer
    weights: str
    kv_cache: str
    tp: int
    engine: str
    report: Any  # estimate.inference.ServingReport
    replicas: int
    cost: dict[str, Any]
    pareto: bool = False
    launch: dict[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.replicas * self.tp

    @property
    def usd_per_million_output_tokens(self) -> float:
        return float(self.cost["usd_per_million_output_tokens"])

    def serve_kwargs(self) -> dict[str, Any]:
        """The ``gpuplan.serve`` keywords of this option (the equivalence test calls serve with them)."""
        return dict(
            gpu=self.gpu.id, tp=self.tp, weights=self.weights, kv_cache=self.kv_cache, engine=self.engine,
            offer=self.offer.id,
        )  # fmt: skip


@dataclass(frozen=True)
class ServeSearch:
    searched: int
    evaluated: int
    grid: dict[str, Any]
    pruned: dict[str, int]
    options: tuple[ServeOption, ...]
    pareto_size: int
    feasible: int


def _format_supported(fmt: str, gpu: Accelerator) -> bool:
    if fmt == "fp8":
        return gpu.supports("fp8")
    if fmt == "nvfp4":
        return gpu.peak("fp4") is not None
    return True


def search_serve(
    model: ModelSpec,
    gpus: Sequence[Accelerator],
    offers: Iterable[Offer],
    job: Any,
    qps: float,
    *,
    pricing: str = "on-demand",
    providers: Sequence[str] | None = None,
    engines: Sequence[str] = SERVE_ENGINES,
    formats: Sequence[str] = SERVE_FORMATS,
    assumptions: Any = None,
    top: int = 20,
) -> ServeSearch:
    """GPU x weights x KV cache x tp x engine, each replica planned by ``serving_plan`` (as ``serve``), the fleet
    for ``qps`` by ``fleet_for``, the price by ``cost_per_million`` with the cheapest offer whose instances hold
    whole replicas; ranked by $ per million output tokens, the Pareto front of (cost, request latency) flagged."""
    from ..estimate.inference import cost_per_million, fleet_for, serving_plan, weight_bytes
    from ..spec.serving import ServingLayout
    from .training import pareto_front

    offers = _offers_of(offers, pricing, providers)
    tally = _Count()
    feasible: list[ServeOption] = []
    for gpu in gpus:
        mine = [o for o in offers if o.gpu == gpu.id]
        for fmt in formats:
            for kv in SERVE_KV:
                n = len(TP_CHOICES) * len(engines)
                if not _format_supported(fmt, gpu) or (kv == "fp8" and not gpu.supports("fp8")):
                    tally.add(R.NOT_SUPPORTED, n)
                    continue
                for tp in TP_CHOICES:
                    if model.attention_heads % tp or (tp > 1 and gpu.interconnect is None):
                        tally.add(R.LAYOUT_DOES_NOT_DIVIDE, len(engines))
                        continue
                    holding = [o for o in mine if o.gpu_count % tp == 0]
                    if not holding:
                        tally.add(R.NO_OFFER_OF_THAT_SIZE, len(engines))
                        continue
                    offer = min(holding, key=lambda o: (o.usd_per_gpu_hour, o.id))
                    layout = ServingLayout(tp=tp)
                    try:
                        w = weight_bytes(model, fmt, layout).total
                    except GpuplanError:
                        tally.add(R.NOT_SUPPORTED, len(engines))
                        continue
                    if w > gpu.usable_memory_bytes:  # the weights alone: no engine fits (a lower bound)
                        tally.add(R.DOES_NOT_FIT_MEMORY, len(engines))
                        continue
                    for engine in engines:
                        tally.evaluated += 1
                        j = replace(job, weights=fmt, kv_cache=kv, engine=engine)
                        try:
                            r = serving_plan(model, gpu, layout, j, assumptions)
                        except GpuplanError:
                            tally.add(R.NOT_SUPPORTED, 1)
                            continue
                        if not r.fits or r.max_concurrent_sequences < 1:
                            tally.add(R.DOES_NOT_FIT_MEMORY, 1)
                            continue
                        if r.reasons:
                            tally.add(R.MISSES_SLO, 1)
                            continue
                        fleet = fleet_for(r, layout, j, qps)
                        cost = cost_per_million(r, layout, j, offer.usd_per_gpu_hour)
                        tally.searched += 1
                        feasible.append(ServeOption(gpu, offer, fmt, kv, tp, engine, r, fleet.replicas, cost))
    feasible.sort(key=lambda o: (o.usd_per_million_output_tokens, o.report.request_latency_s, o.gpus))
    front = set(pareto_front([(o.report.request_latency_s, o.usd_per_million_output_tokens) for o in feasible]))
    options = tuple(
        replace(o, pareto=i in front, launch=serve_launch(model, o, job)) for i, o in enumerate(feasible[:top])
    )
    grid = {
        "gpus": [g.id for g in gpus],
        "pricing": pricing,
        "providers": list(providers) if providers else None,
        "weights": list(formats),
        "kv_cache": list(SERVE_KV),
        "tp": list(TP_CHOICES),
        "pp": [1],
        "engine": list(engines),
        "replicas": "ceil(qps / requests per second of one replica)",
    }
    return ServeSearch(
        searched=tally.searched,
        evaluated=tally.evaluated,
        grid=grid,
        pruned={
            r.value: tally.pruned.get(r.value, 0)
            for r in (
                R.DOES_NOT_FIT_MEMORY,
                R.LAYOUT_DOES_NOT_DIVIDE,
                R.NO_OFFER_OF_THAT_SIZE,
                R.MISSES_SLO,
                R.NOT_SUPPORTED,
            )
        },
        options=options,
        pareto_size=len(front),
        feasible=len(feasible),
    )


_VLLM_QUANT = {"fp8": "fp8", "int8": "compressed-tensors", "int4-awq": "awq", "nvfp4": "modelopt_fp4"}
_SGLANG_QUANT = {"fp8": "fp8", "int8": "w8a8_int8", "int4-awq": "awq", "nvfp4": "modelopt_fp4"}


def serve_launch(model: ModelSpec, o: ServeOption, job: Any) -> dict[str, str]:
    """Engine command lines for one replica: vLLM, SGLang and TensorRT-LLM (int8, int4-awq and nvfp4 need a
    checkpoint quantized to that format; fp8 is quantized on load by vLLM and SGLang)."""
    name = getattr(model, "hf_id", None) or model.id
    batch = o.report.batch
    seq = job.context or (job.prompt_tokens + job.output_tokens)
    vllm = [f"vllm serve {name}", f"--tensor-parallel-size {o.tp}", f"--max-num-seqs {batch}", f"--max-model-len {seq}"]
    sg = [f"python -m sglang.launch_server --model-path {name}", f"--tp {o.tp}", f"--max-running-requests {batch}"]
    if o.weights in _VLLM_QUANT:
        vllm.append(f"--quantization {_VLLM_QUANT[o.weights]}")
        sg.append(f"--quantization {_SGLANG_QUANT[o.weights]}")
    if o.kv_cache == "fp8":
        vllm.append("--kv-cache-dtype fp8")
        sg.append("--kv-cache-dtype fp8_e4m3")
    trt = [f"trtllm-serve {name}", f"--tp_size {o.tp}", f"--max_batch_size {batch}", f"--max_seq_len {seq}"]
    return {"vllm": " ".join(vllm), "sglang": " ".join(sg), "trtllm": " ".join(trt)}


def serve_option_record(o: ServeOption) -> dict[str, Any]:
    r = o.report
    return {
        "gpu": o.gpu.id,
        "gpus": o.gpus,
        "instances": math.ceil(o.gpus / o.offer.gpu_count),
        "offer": _offer_dict(o.offer),
        "weights": o.weights,
        "kv_cache": o.kv_cache,
        "tp": o.tp,
        "pp": 1,
        "replicas": o.replicas,
        "max_batch": r.batch,
        "engine": o.engine,
        "ttft_s": r.ttft_s,
        "tpot_s": r.tpot_s,
        "request_latency_s": r.request_latency_s,
        "tokens_per_s": r.tokens_per_s,
        "requests_per_s_per_replica": r.requests_per_s,
        "usd_per_million_tokens": o.cost["usd_per_million_tokens_blended"],
        "usd_per_million_output_tokens": o.usd_per_million_output_tokens,
        "usd_per_million_input_tokens": o.cost["usd_per_million_input_tokens"],
        "usd_per_hour": o.cost["usd_per_hour"] * o.replicas,
        "peak_memory_bytes": r.total_bytes,
        "meets_slo": not r.reasons,
        "pareto": o.pareto,
        "launch": o.launch,
    }


def serve_record(model: ModelSpec, job: Any, qps: float, s: ServeSearch) -> dict[str, Any]:
    return {
        "model": {"id": model.id},
        "qps": qps,
        "request": {
            "prompt_tokens": job.prompt_tokens,
            "output_tokens": job.output_tokens,
            "max_ttft_s": job.max_ttft_s,
            "max_tpot_s": job.max_tpot_s,
        },
        "searched": s.searched,
        "evaluated": s.evaluated,
        "feasible": s.feasible,
        "pareto_size": s.pareto_size,
        "grid": s.grid,
        "pruned": s.pruned,
        "options": [serve_option_record(o) for o in s.options],
    }
