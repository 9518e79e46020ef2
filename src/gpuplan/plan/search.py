"""The planner (``gpuplan plan train`` / ``plan serve``, issue 16, version 1): search hardware x layout for a
training run or a serving load, with every candidate evaluated by the very functions ``train`` and ``serve`` use.

Training (:func:`search_train`). The grid, per accelerator:

- offers: one pricing kind per ranking; offers of the same GPU, instance size, scale-out network and NVLink domain
  (``scale_up_domain_gpus``, ``scale_up_bytes_per_s_per_gpu``) give the same step time, so each such *hardware
  class* is priced with its cheapest offer (the others cost more for the same plan), and timed with the offer's
  interconnect as ``train --offer`` times it (``offer_accelerator``). Multi-GPU plans run on whole multi-GPU
  instances, single-GPU plans on single-GPU offers;
- GPU counts (:func:`gpu_counts`): 1, then whole instances: 1-8 instances, then four counts per doubling
  (x1, x1.25, x1.5, x1.75), up to ``max_gpus`` (or the one ``--gpus``);
- tp in 1, 2, 4, 8 (within the instance and the offer's NVLink domain, dividing the heads; sequence parallelism on
  with tp > 1, as Megatron-LM runs it); pp: the divisors of the layer count and the powers of two (uneven stages, as
  Llama 3 405B's 126 layers on 16 stages), up to 64; virtual stages (interleaved 1F1B) 1, 2, 4, 8 where pp > 1 and
  the busiest stage's layers split evenly (:func:`virtual_stage_choices`); cp 1, 2, 4, 8, 16 dividing the sequence
  from CP_MIN_SEQ_LEN tokens on (:func:`cp_choices`); MoE: ep in EP_CHOICES (1 to 64) dividing the experts, and
  expert tensor parallelism etp: tp and its divisors that split the expert width (:func:`etp_choices`), folded as
  Megatron-Core folds them: ep x etp divides gpus / pp = tp x cp x dp, so ep may exceed dp;
- sharding: pure data parallelism: DDP (zero 0), ZeRO-1/2/3 (DeepSpeed), FSDP2; with tp, pp or cp > 1: Megatron's
  distributed optimizer (zero 1, which is never slower and never larger than zero 0 in the model) or FSDP2;
- micro-batch 1, 2, 4, 8, 16; memory rungs (:func:`sharding_rungs`): recompute none, selective, partial, full, where
  partial recomputes 1/4, 1/2 or 3/4 of each model chunk's layers (:data:`PARTIAL_QUARTERS`: whole quarters of a
  chunk, floored, on every chunk, since Megatron-LM counts --recompute-num-layers per chunk; one layer count per
  candidate, so the rung stays one array over the grid); offload only on a GPU where nothing fits without it
  (:data:`OFFLOAD_ORDER`), in the order of its step-time cost: activations of 1/4, 1/2 or 3/4 of each chunk's
  layers (:data:`OFFLOAD_QUARTERS`, without recompute, as Megatron-Core's CPU offload runs), then the optimizer
  states with ZeRO >= 1 and the parameters too with ZeRO-3, each with the four recomputes;
- the global batch: ``--global-batch``, else the default rule ``train`` uses (``estimate.steptime.
  default_global_batch``), passed explicitly so that memory and step time count the same micro-batches.
- precision: ``--precision`` (one), a comma list, or ``any`` (``spec.training.PLAN_PRECISIONS_ANY``): the grid
  above once per precision, each candidate's job at that precision (``_TrainGrid.set_precision``); the method
  (full, LoRA, QLoRA: ``--method``) is the job's, one per search.

Evaluation: numpy arrays, one GPU at a time (:class:`_TrainGrid`), through the very functions ``train`` uses. The
formulas take plain numbers or arrays (``estimate/xp.py``), so ``estimate.memory.busiest_total_bytes`` (the
``total_bytes`` of ``training_memory``) and ``estimate.steptime.training_step`` run once per group of candidates
that share the discrete choices a formula branches on (sharding, recompute, offload, pipeline or not, tp x pp x cp
> 1, the offer's interconnect; a partial recompute's or activation offload's layer count is an array), on a
:class:`~gpuplan.spec.training.ParallelismGrid` and a :class:`~gpuplan.spec.training.TrainingJobGrid`, with each
offer's network (``offer_network``, as ``plan_training`` does) as arrays of assumptions; ``time_to_train`` gives
the time and the cost follows. An option equals ``gpuplan.train`` on its layout to the last bits
(``tests/test_plan_search.py`` checks random configurations at a relative 1e-12).

Every candidate is counted once, under the first of these that applies (:class:`~gpuplan.spec.choices.PlanPrune`):
the GPU lacks the precision (not_supported); no instance gives the count (no_offer_of_that_size); tp x pp x cp does
not divide the count, ep x etp a stage's GPUs (count / pp), tp the heads, or tp exceeds the instance or the offer's
NVLink domain (layout_does_not_divide); the count misses the deadline even at the MFU ceiling (:func:`mfu_ceiling`:
misses_deadline); the global batch is not whole micro-batch x dp groups (layout_does_not_divide) or micro-batch x dp
is over twice the batch rule (batch_above_rule); memory, offload level by level: no recompute, and where it does
not fit, selective and the chain partial (fewest layers first) -> full; the rungs that do not fit are
does_not_fit_memory, and the rungs after the first that fits are dominated (no recompute is never slower than any
rung; more recomputed layers are never faster; full re-runs every layer whole, so it is never faster than selective
or a partial; same GPUs and price). Selective and partial are not ordered in time (selective re-runs every layer's
attention core, partial N whole layers): where both fit both are timed and the slower is dominated (a tie keeps
selective). Offload is not searched where a candidate of the GPU fits without it (its rungs dominated); a 1/4 of a
chunk under 4 layers floors to 0 layers, the rung without it, and is counted as not fitting; per offer, the cost at
the MFU ceiling is over budget (over_budget); the estimate refuses it (not_supported); the timed plan misses the
deadline or the budget; the rest are options. Every memory and step-time estimate of the grid is computed: no
ordering of memory by count or micro-batch is assumed.

Serving (:func:`search_serve`): GPU x weight format x KV-cache format x tp x engine profile, each through
``estimate.inference.serving_plan`` and ``cost_per_million`` as ``serve`` does, the reported options again under
``--qps`` (``serving_plan(..., qps=)`` and ``fleet_for``, as ``serve --qps``). ``serve --rank`` is each GPU's first
option of the same search.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import GpuplanError, InputError
from ..estimate.memory import MemoryAssumptions, busiest_total_bytes, training_memory, validate_layout
from ..estimate.params import count_params
from ..estimate.steptime import (
    FINETUNE_GLOBAL_BATCH_SEQUENCES,
    StepAssumptions,
    default_global_batch_sequences,
    global_batch_of,
    scale_out_bytes_per_s_per_gpu,
    training_step,
)
from ..estimate.time import peak_for, time_to_train, training_compute
from ..spec.accelerator import Accelerator
from ..spec.choices import Objective, PlanPrune
from ..spec.model import ModelSpec
from ..spec.offer import Offer
from ..spec.training import Parallelism, ParallelismGrid, TrainingJob, TrainingJobGrid
from .training import offer_accelerator, offer_network

R = PlanPrune
TP_CHOICES = (1, 2, 4, 8)
#: Expert parallelism (MoE), searched where it divides the experts and, with the layout's expert tensor parallelism,
#: one pipeline stage's GPUs: ep x etp | gpus / pp (Megatron-Core MoE parallel folding, so ep may exceed dp). Up to
#: 64, DeepSeek-V3's degree (DeepSeek-V3 Technical Report, arXiv:2412.19437, section 3.2: 64-way EP over 8 nodes).
EP_CHOICES = (1, 2, 4, 8, 16, 32, 64)
MICRO_BATCHES = (1, 2, 4, 8, 16)
RECOMPUTE_ORDER = ("none", "selective", "partial", "full")  # the recompute names a rung takes
#: Partial recompute (``train --recompute partial --recompute-layers N``, Megatron-LM's ``--recompute-method
#: block``): N = q/4 of each model chunk's layers, floored, for q in PARTIAL_QUARTERS, times the chunks per rank
#: (a chunk is the busiest stage's layers / virtual stages): a fixed, small set of N per layout, so that a rung
#: is one value per candidate and the candidates that share it are one array. Megatron counts
#: --recompute-num-layers per model chunk, hence whole chunk quarters. A quarter that floors to 0 layers is the
#: same memory as no recompute and is counted as not fitting where that does not fit.
PARTIAL_QUARTERS = (1, 2, 3)
#: Activation offload (``train --offload activations --offload-layers N``; Megatron-Core / Transformer Engine
#: ``--cpu-offloading --cpu-offloading-num-layers``): N = q/4 of each chunk's layers for q in OFFLOAD_QUARTERS,
#: with no recompute. Megatron-Core's TransformerConfig refuses CPU offloading with activation recomputation
#: and with pipeline parallelism, and takes fewer layers than the model has (the last layer's backward starts at
#: once): hence no recompute rungs with it and no 4/4.
OFFLOAD_QUARTERS = (1, 2, 3)
#: What goes to host memory, in the order of its cost in the step-time model: activations (``train`` charges no
#: host time for them: Megatron-Core's cpu_offloading overlaps their PCIe copies with the layers' compute, and the
#: step-time model counts none of it, not even what a copy cannot hide, so their times are lower bounds), then the
#: optimizer states with ZeRO >= 1 (ZeRO-Offload: CPU-Adam and the gradient copies, timed) and the parameters too with
#: ZeRO-3 (ZeRO-Infinity's per-pass fetch, timed). Offload of any kind is searched only on a GPU where no
#: candidate (no count, layout or batch) fits without it: the first level whose rungs fit a candidate is its
#: level, and the later ones are dominated (Ren et al. 2021, ZeRO-Offload, section 1: for when GPU memory cannot
#: hold the model states).
OFFLOAD_ORDER = ("none", "activations", "optimizer", "params")


@dataclass(frozen=True)
class Rung:
    """One memory rung of a candidate: what is offloaded and what is recomputed; ``quarter``: with partial
    recompute the quarters of each chunk's layers recomputed, with activation offload the quarters offloaded."""

    offload: str
    recompute: str
    quarter: int = 0

    def layers(self, layers_per_chunk: Any, chunks: Any) -> Any:
        """``--recompute-layers`` / ``--offload-layers`` of this rung for a stage of ``chunks`` x
        ``layers_per_chunk`` layers (numbers or arrays): whole quarters of a chunk, on every chunk."""
        return self.quarter * layers_per_chunk // 4 * chunks


def rungs_of(offload: str) -> tuple[Rung, ...]:
    """The rungs of one offload level, lighter first. Without offload, or with the optimizer or parameters
    offloaded: no recompute, selective, partial (PARTIAL_QUARTERS), full; with activations offloaded: the
    OFFLOAD_QUARTERS, without recompute."""
    if offload == "activations":
        return tuple(Rung("activations", "none", q) for q in OFFLOAD_QUARTERS)
    partial = tuple(Rung(offload, "partial", q) for q in PARTIAL_QUARTERS)
    return (Rung(offload, "none"), Rung(offload, "selective"), *partial, Rung(offload, "full"))


MAX_PP = 64
#: Interleaved 1F1B: model chunks per pipeline rank (Megatron-LM --num-virtual-stages-per-pipeline-rank, ``train
#: --virtual-stages``), searched where pp > 1 and the chunks are equal (:func:`virtual_stage_choices`).
VIRTUAL_STAGES = (1, 2, 4, 8)
#: Context parallelism (ring attention over the sequence, ``train --cp``), searched where it divides the sequence;
#: up to 16, Llama 3 405B's degree at 131k tokens (Llama 3 paper, Table 4: TP8 CP16 PP16 DP8 on 16,384 H100).
CP_CHOICES = (1, 2, 4, 8, 16)
#: CP is searched from this sequence length on: below it a rank's slice of the sequence (seq / cp tokens) is
#: too short to hide the ring's KV exchange behind its attention, and tp x pp already fit the activations of
#: every model in the catalog at 8k (Megatron-Core's context-parallel guide turns CP on for long-context
#: training, its recipes from 16k-32k tokens; Llama 3 used CP only for its 128k stage, section 3.3.2).
CP_MIN_SEQ_LEN = 16384
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


def virtual_stage_choices(layers: int, pp: int) -> list[int]:
    """Interleaved chunks per pipeline rank: 1 without a pipeline; with pp > 1 every v of VIRTUAL_STAGES that
    splits the busiest (first) stage's layers into v equal chunks. With even stages that is Megatron-LM's rule, the
    layer count divisible by pp x v; with uneven ones it is the busiest stage's count divisible by v (Llama 3 405B
    ran its 126 layers interleaved on 16 stages of 8, the first and last one short: Llama 3 paper, section 3.3.2;
    Megatron-Core's --pipeline-model-parallel-layout places such chunks)."""
    if pp == 1:
        return [1]
    busiest = -(-layers // pp)
    return [v for v in VIRTUAL_STAGES if busiest % v == 0]


def cp_choices(seq_len: int, flash_attention: bool) -> list[int]:
    """Context-parallel degrees: 1, and from CP_MIN_SEQ_LEN on those of CP_CHOICES that divide the sequence
    (``train`` requires an equal slice per rank, and flash attention for the ring)."""
    if seq_len < CP_MIN_SEQ_LEN or not flash_attention:
        return [1]
    return [c for c in CP_CHOICES if seq_len % c == 0]


def etp_choices(model: ModelSpec, tp: int) -> list[int]:
    """Expert tensor parallelism with attention TP ``tp``: tp first (Megatron-Core's default, --expert-tensor-
    parallel-size unset), then the smaller divisors of tp in TP_CHOICES that divide the expert width, down to 1 (no
    expert TP: whole experts, EP folded over the TP ranks; Liu et al. 2025, arXiv:2504.14960, MoE parallel
    folding). A dense model has no experts: tp alone."""
    if model.moe is None:
        return [tp]
    width = model.moe.expert_ffn_size
    return [tp] + [e for e in reversed(TP_CHOICES) if e < tp and tp % e == 0 and width % e == 0]


def offload_choices(sharding: Sharding) -> tuple[str, ...]:
    """The offload kinds ``train`` accepts with a sharding: none and activations with any; the optimizer states
    with ZeRO >= 1; the parameters too with ZeRO-3 / FSDP2 (``spec.training.Parallelism``'s checks)."""
    return OFFLOAD_ORDER[: 2 + (sharding.zero >= 1) + (sharding.zero == 3)]


def sharding_rungs(sharding: Sharding) -> tuple[Rung, ...]:
    """Every memory rung of a sharding, in search order: offload level by level (OFFLOAD_ORDER), each lighter
    first (:func:`rungs_of`)."""
    return tuple(r for o in offload_choices(sharding) for r in rungs_of(o))


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


#: The sharding axis, in search order: pure data parallelism searches all five, tp or pp > 1 two of them.
SHARDINGS = (Sharding(0), Sharding(1), Sharding(2), Sharding(3), Sharding(3, True))


def sharding_choices(model_parallel: int) -> tuple[Sharding, ...]:
    """DDP, ZeRO-1/2/3 and FSDP2 for pure data parallelism; Megatron's distributed optimizer (zero 1) or FSDP2
    with tp, pp or cp > 1 (``model_parallel`` = tp x pp x cp)."""
    if model_parallel == 1:
        return SHARDINGS
    return (SHARDINGS[1], SHARDINGS[4])


@dataclass(frozen=True)
class HardwareClass:
    """Offers of one GPU, instance size, scale-out network and NVLink domain (the offer's
    ``scale_up_domain_gpus`` and ``scale_up_bytes_per_s_per_gpu``): the same plan; priced by the cheapest."""

    gpu: Accelerator
    per_instance: int
    offer: Offer


def hardware_classes(offers: Iterable[Offer], gpu_ids: set[str]) -> dict[str, list[HardwareClass]]:
    """gpu id -> its hardware classes (cheapest offer of each (instance size, scale-out network, NVLink domain and
    bandwidth): what ``train --offer`` takes from an offer for the step time)."""
    best: dict[tuple[str, int, float | None, int | None, float | None], Offer] = {}
    for o in offers:
        if o.gpu not in gpu_ids:
            continue
        key = (o.gpu, o.gpu_count, o.scale_out_bytes_per_s, o.scale_up_domain_gpus, o.scale_up_bytes_per_s_per_gpu)
        cur = best.get(key)
        if cur is None or (o.usd_per_gpu_hour, o.id) < (cur.usd_per_gpu_hour, cur.id):
            best[key] = o
    out: dict[str, list[HardwareClass]] = {}
    for (gid, n, *_), o in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[1].id)):
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
    offload: str = "none"
    cp: int = 1
    #: interleaved pipeline chunks per rank (``train --virtual-stages``)
    virtual_stages: int = 1
    #: the training precision of this candidate (``train --precision``; searched with ``--precision any``)
    precision: str = "bf16-mixed"
    #: with recompute partial: decoder layers per stage fully recomputed (``train --recompute-layers``)
    recompute_layers: int | None = None
    #: with offload activations: decoder layers per stage whose activations go to the host (``--offload-layers``)
    offload_layers: int | None = None
    #: the run with failures, as ``train``'s machine block gives it (:func:`_with_failures`)
    goodput: float | None = None
    wall_time_with_failures_s: float | None = None
    cost_with_failures_usd: float | None = None
    #: expert tensor parallelism (``train --etp``); None: the attention's tp, Megatron-Core's default
    etp: int | None = None

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp * self.cp)

    @property
    def expert_tp(self) -> int:
        return self.tp if self.etp is None else self.etp

    def layout(self) -> Parallelism:
        return Parallelism(
            gpus=self.gpus,
            tp=self.tp,
            pp=self.pp,
            cp=self.cp,
            ep=self.ep,
            etp=self.etp,
            sequence_parallel=self.tp > 1,
            zero=self.sharding.zero,
            offload=self.offload,
            virtual_stages=self.virtual_stages,
        )

    def job(self, base: TrainingJob) -> TrainingJob:
        return replace(
            base,
            micro_batch=self.micro_batch,
            global_batch=self.global_batch,
            recompute=self.recompute,
            recompute_layers=self.recompute_layers,
            offload_layers=self.offload_layers,
            fsdp=self.sharding.fsdp,
            precision=self.precision,
        )

    def train_kwargs(self) -> dict[str, Any]:
        """The ``gpuplan.train`` keywords of this layout (the equivalence test calls train with them)."""
        return dict(
            gpu=self.gpu.id,
            gpus=self.gpus,
            tp=self.tp,
            pp=self.pp,
            cp=self.cp,
            ep=self.ep,
            etp=self.etp,
            virtual_stages=self.virtual_stages,
            sequence_parallel=self.tp > 1,
            zero=self.sharding.zero,
            fsdp=self.sharding.fsdp,
            offload=self.offload,
            micro_batch=self.micro_batch,
            global_batch=self.global_batch,
            recompute=self.recompute,
            recompute_layers=self.recompute_layers,
            offload_layers=self.offload_layers,
            precision=self.precision,
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
    #: the P10-P90 error band of the option's throughput class (``bands.lookup``, as ``train``), None without one
    band: Any = None
    #: whether the model has routed experts (the record's layout.etp is null without them)
    moe: bool = False


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
    #: (name, array) of the objective's sort keys of every feasible candidate, most significant first: where a
    #: layout ranks (``plan/explain.py``); not part of the record
    ranking: Any = field(default=None, repr=False, compare=False)


@dataclass
class _Count:
    pruned: Counter[str] = field(default_factory=Counter)
    searched: int = 0
    evaluated: int = 0

    def add(self, reason: str, n: Any) -> None:
        n = int(n)
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
    machine: Any = None,
    precisions: Sequence[str] | None = None,
) -> TrainSearch:
    """Every candidate of the grid (module docstring), pruned with counts by reason; the top ``top`` by the
    objective among the feasible ones, each flagged when it is on the Pareto front of (time, cost, GPUs). Time and
    cost rank with failures (:func:`_with_failures`); ``machine``: the (MachineOptions, MachineAssumptions) of the
    storage, checkpoints and failure rate (None: ``train``'s defaults). ``precisions``: the precision axis
    (``--precision any`` or a comma list; None: ``base_job.precision`` alone): the whole grid is searched once per
    precision, each candidate with ``base_job`` at that precision, as ``train --precision`` runs it; a GPU without
    the precision's peak (fp8 without an fp8 peak) counts its candidates as not_supported."""
    import numpy as np

    precisions = tuple(precisions) if precisions else (base_job.precision,)

    offers = _offers_of(offers, pricing, providers)
    by_gpu = hardware_classes(offers, {g.id for g in gpus})
    grid = _TrainGrid(
        model, base_job, tokens, fixed_gpus, max_gpus, deadline_s, budget_usd, memory_assumptions, step_assumptions
    )
    classes_of = [[replace(c, gpu=gpu) for c in by_gpu.get(gpu.id, [])] for gpu in gpus]
    blocks = []
    for p_i, precision in enumerate(precisions):
        grid.set_precision(p_i, precision)
        blocks += [b for i, gpu in enumerate(gpus) if (b := grid.search_gpu(i, gpu, classes_of[i])) is not None]
    found = {k: np.concatenate([b[k] for b in blocks]) for k in _FOUND} if blocks else {}
    n = len(found["gpus"]) if found else 0
    if n:
        found.update(_with_failures(model, base_job, found, gpus, classes_of, *(machine or ()), precisions=precisions))
        # the deadline and budget hold for the run as it will go, failures included: the grid pruned on the ideal
        # time and cost (never more than these), so the candidates left are checked again here
        late = found[_TIME] > deadline_s if deadline_s is not None else np.zeros(n, dtype=bool)
        dear = (found[_COST] > budget_usd) & ~late if budget_usd is not None else np.zeros(n, dtype=bool)
        if late.any() or dear.any():
            grid.tally.pruned[R.MISSES_DEADLINE] += int(late.sum())  # already counted as searched
            grid.tally.pruned[R.OVER_BUDGET] += int(dear.sum())
            keep = ~(late | dear)
            found = {k: v[keep] for k, v in found.items()}
            n = int(keep.sum())
    options: tuple[TrainOption, ...] = ()
    front_size = 0
    ranking = tuple((k, found[k]) for k in _objective_axes(objective)) if n else ()
    if n:
        # by the objective's keys, ties in the search order: GPU, precision, layout, sharding, micro-batch, count,
        # offer. The first ``top`` lie at or below the top-th smallest first key, so only those are sorted
        keys = _objective_axes(objective)
        first = found[keys[0]]
        near = np.arange(n)
        if n > top:
            kth = np.partition(first, top - 1)[top - 1]
            if not np.isnan(kth):
                near = np.nonzero(first <= kth)[0]
        ranked = np.lexsort(
            (*(found[k][near] for k in reversed(_SEARCH_ORDER)), *(found[k][near] for k in reversed(keys)))
        )
        best = near[ranked[:top]]
        on_front = _pareto_front_mask(found[_TIME], found[_COST], found["gpus"])
        front_size = int(on_front.sum())
        options = tuple(
            _option(
                model,
                _candidate(found, i, gpus, classes_of, precisions),
                base_job,
                bool(on_front[i]),
                memory_assumptions,
            )
            for i in best
        )
    tally = grid.tally
    record_grid = {
        "gpus": [g.id for g in gpus],
        "pricing": pricing,
        "providers": list(providers) if providers else None,
        "hardware_classes": sum(len(v) for v in by_gpu.values()),
        "gpu_counts": "the --gpus count"
        if fixed_gpus
        else f"whole instances, 1-8 then x1/1.25/1.5/1.75 per doubling, <= {max_gpus}",
        "tp": list(grid.tps),
        "tp_rule": "dividing the heads, within the instance and the offer's NVLink domain (scale_up_domain_gpus)"
        + (
            "; LoRA/QLoRA: data parallel only (tp = pp = 1), the layouts their launchers run"
            if grid.tps == (1,)
            else ""
        ),
        "pp": grid.pps,
        "virtual_stages": {str(pp): virtual_stage_choices(model.layers, pp) for pp in grid.pps if pp > 1},
        "cp": grid.cps,
        "cp_rule": f"dividing the sequence, from {CP_MIN_SEQ_LEN} tokens with flash attention",
        "ep": grid.eps,
        "ep_rule": "dividing the experts, with ep x etp dividing gpus / pp (Megatron-Core MoE parallel folding: ep "
        "may exceed dp)",
        # expert tensor parallelism per tp: tp (Megatron-Core's default) and its divisors that split the experts
        "etp": {str(tp): etp_choices(model, tp) for tp in grid.tps} if model.moe is not None else None,
        "sharding": {
            "pure data parallel": ["zero-0", "zero-1", "zero-2", "zero-3", "fsdp"],
            "tp, pp or cp > 1": ["zero-1", "fsdp"],
        },
        "recompute": list(RECOMPUTE_ORDER),
        "recompute_layers": {
            "partial": [f"{q}/4 of each model chunk's layers (floored) x chunks" for q in PARTIAL_QUARTERS],
            "rule": "no recompute if it fits; else selective, and the first of partial (fewest layers first) or "
            "full that fits; where selective and a partial both fit, both are timed and the slower is dominated",
        },
        "offload": {
            "zero-0": ["none", "activations"],
            "zero-1, zero-2": ["none", "activations", "optimizer"],
            "zero-3, fsdp": ["none", "activations", "optimizer", "params"],
            "rule": "only on a GPU where no candidate fits without offload, in this order, the first kind that fits "
            "(optimizer and params: host work timed, CPU optimizer and PCIe; activations: no host time in the "
            "step-time model, a lower bound)",
        },
        "offload_layers": {
            "activations": [f"{q}/4 of each model chunk's layers (floored) x chunks" for q in OFFLOAD_QUARTERS],
            "rule": "no recompute with it; the fewest layers that fit",
        },
        "micro_batch": list(MICRO_BATCHES),
        "global_batch": base_job.global_batch
        if base_job.global_batch is not None
        else (
            "default rule (tokens per step by model size)"
            if base_job.method == "full"
            else f"default rule ({FINETUNE_GLOBAL_BATCH_SEQUENCES} sequences per step for a fine-tune)"
        ),
        "precision": list(precisions),
        "precision_rule": "each on the GPUs with a peak for it (fp8-mixed: an fp8 peak); the others not_supported",
        "method": base_job.method,
        **(
            {"lora_rank": base_job.lora_rank, "lora_targets": list(base_job.lora_targets), "quant": base_job.quant}
            if base_job.method != "full"
            else {}
        ),
        "seq_len": base_job.seq_len,
    }
    assert tally.searched == sum(tally.pruned.values()) + n, "every candidate is counted once"
    return TrainSearch(
        searched=tally.searched,
        evaluated=tally.evaluated,
        grid=record_grid,
        pruned={r.value: tally.pruned.get(r.value, 0) for r in R if r != R.MISSES_SLO},
        options=options,
        pareto_size=front_size,
        feasible=n,
        ranking=ranking,
    )


#: The arrays of the feasible candidates (_TrainGrid.search_gpu): indices into the grid's axes, then the values.
_FOUND = (
    "gpu",
    "precision",
    "layout",
    "tp",
    "pp",
    "vs",
    "cp",
    "ep",
    "etp",
    "sharding",
    "micro_batch",
    "count",
    "offer",
    "recompute",
    "offload",
    "layers",
    "gpus",
    "global_batch",
    "mfu",
    "step_s",
    "time_s",
    "cost_usd",
)
#: The order the grid is searched in (and ties are broken in): indices into the axes.
_SEARCH_ORDER = ("gpu", "precision", "layout", "sharding", "micro_batch", "count", "offer")


#: Time and cost rank as the run will take them: with failures (expected wall time and its cost, :func:`_with_failures`)
_TIME, _COST = "wall_time_with_failures_s", "cost_with_failures_usd"


def _objective_axes(objective: str) -> tuple[str, str, str]:
    """The sort keys of an objective, most significant first."""
    if objective == Objective.TIME:
        return (_TIME, _COST, "gpus")
    if objective == Objective.GPUS:
        return ("gpus", _COST, _TIME)
    return (_COST, _TIME, "gpus")


def _with_failures(
    model: ModelSpec,
    base_job: TrainingJob,
    found: dict[str, Any],
    gpus: Sequence[Accelerator],
    classes_of: list[list[HardwareClass]],
    options: Any = None,
    assumptions: Any = None,
    *,
    precisions: Sequence[str] = ("bf16-mixed",),
) -> dict[str, Any]:
    """Goodput, expected wall time and cost with failures of every feasible candidate, as arrays, through the
    function of ``train``'s machine block (``plan.machine.checkpointing``): the checkpoint of the layout's recipe
    and sharding written at the storage class (or the offer's local NVMe) by its writing nodes, the cluster MTBF
    of its GPU count at its GPU's failure rate, Daly's interval and wall time, the offer's price. Computed on the
    whole grid, not on a pre-ranked top K: the adjustment grows with the GPU count (the MTBF falls as 1/GPUs) and
    the checkpoint write time, so it can reorder candidates an ideal ranking puts far apart."""
    import numpy as np

    from ..estimate.machine import STORAGE_CLASSES, MachineAssumptions
    from .machine import (
        MachineOptions,
        checkpoint_bytes_per_param,
        checkpointing,
        failure_rate,
        host_link_bytes_per_s,
        nvme_write_per_node,
    )

    options = options if options is not None else MachineOptions()
    a = assumptions if assumptions is not None else MachineAssumptions()
    n = len(found["gpus"])
    flat = [c.offer for classes in classes_of for c in classes]  # every (GPU, class) pair, by GPU
    pair = np.cumsum([0] + [len(c) for c in classes_of])[found["gpu"]] + found["offer"]
    per_gpu = np.array([(host_link_bytes_per_s(g, a), failure_rate(g, options, a)[0]) for g in gpus])
    per_offer = np.array([(o.gpu_count, o.usd_per_gpu_hour, nvme_write_per_node(o, options)) for o in flat])
    tp, pp, cp = found["tp"], found["pp"], found["cp"]
    zero = np.array([s.zero for s in SHARDINGS])[found["sharding"]]
    bytes_per_param = np.empty((3, n))
    tpu = np.array([g.vendor == "google" for g in gpus])[found["gpu"]]  # auto runs the jax stack's recipe there
    recipe_key = ((found["precision"] * len(SHARDINGS) + found["sharding"]) * 2 + (tp * pp * cp > 1)) * 2 + tpu
    for idx in _groups(recipe_key, np.ones(n, dtype=bool)):
        c = _candidate(found, int(idx[0]), gpus, classes_of, precisions)  # the recipe is shared by the group
        bytes_per_param[:, idx] = np.array(checkpoint_bytes_per_param(model, c.job(base_job), c.layout(), c.gpu))[
            :, None
        ]
    trainable: float = count_params(model).total
    if base_job.method != "full":  # LoRA/QLoRA: the adapters (the same for every layout), as train's machine block
        c = _candidate(found, 0, gpus, classes_of, precisions)
        trainable = training_memory(model, c.gpu, c.layout(), c.job(base_job), find_max_batch=False).trainable_params
    ck = checkpointing(
        trainable_params=trainable,
        bytes_per_param=(bytes_per_param[0], bytes_per_param[1], bytes_per_param[2]),
        tp=tp,
        pp=pp,
        data=found["gpus"] // (tp * pp * cp) * cp,
        zero=zero,
        gpus=found["gpus"],
        gpus_per_node=np.maximum(1, per_offer[pair, 0]),
        storage=STORAGE_CLASSES[options.storage],
        storage_write_bytes_per_s=options.storage_write_bytes_per_s,
        nvme_write_bytes_per_s_per_node=per_offer[pair, 2],
        host_link_bytes_per_s=per_gpu[found["gpu"], 0],
        failures_per_gpu_hour=per_gpu[found["gpu"], 1],
        restart_s=a.restart_s,
        asynchronous=options.async_checkpoint,
        solve_s=found["time_s"],
        usd_per_gpu_hour=per_offer[pair, 1],
    )
    assert ck.run is not None  # (computed with the ideal times)
    return {"goodput": ck.run.goodput, _TIME: ck.run.wall_s, _COST: ck.cost_with_failures_usd}


def _job_grid(base: TrainingJob, **arrays: Any) -> TrainingJobGrid:
    """``base`` with some fields replaced by arrays (one value per candidate)."""
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    values.update(arrays)
    return TrainingJobGrid(**values)


class _TrainGrid:
    """One ``plan train`` search: what every GPU shares (the layout axes, the run's FLOPs, the batch rule, the
    constraints and the counts by reason) and the evaluation of one GPU's candidates as numpy arrays."""

    def __init__(
        self,
        model: ModelSpec,
        job: TrainingJob,
        tokens: float,
        fixed_gpus: int | None,
        max_gpus: int,
        deadline_s: float | None,
        budget_usd: float | None,
        mem_a: MemoryAssumptions,
        step_a: StepAssumptions,
    ) -> None:
        import numpy as np

        self.model, self.job, self.mem_a, self.step_a = model, job, mem_a, step_a
        self.precision_i = 0  # the index of job.precision on the search's precision axis
        self.refused: str | None = None  # why the job refuses the precision being searched (set_precision)
        self.fixed_gpus, self.max_gpus, self.deadline_s, self.budget_usd = fixed_gpus, max_gpus, deadline_s, budget_usd
        self.total_flops = training_compute(model, job.seq_len, tokens, method=job.method).total_flops
        self.rule_sequences = default_global_batch_sequences(model, job)  # pretraining, or LoRA/QLoRA's recipes
        # LoRA/QLoRA: data parallel (FSDP/ZeRO) only, the layouts PEFT, torchtune and the HF Trainer run
        # (_finetune_launch); tensor and pipeline parallel fine-tunes have no launcher here
        self.tps = (1,) if job.method != "full" else TP_CHOICES
        self.pps = [1] if job.method != "full" else pp_choices(model.layers)
        self.cps = cp_choices(job.seq_len, job.flash_attention)
        self.eps = [e for e in EP_CHOICES if model.moe is not None and model.moe.experts % e == 0] or [1]
        # expert TP (etp_choices): tp alone for a dense model, whose grid keeps its layouts
        layouts = [
            (tp, pp, vs, cp, ep, etp)
            for tp in self.tps
            for pp in self.pps
            for vs in virtual_stage_choices(model.layers, pp)
            for cp in self.cps
            for ep in self.eps
            for etp in etp_choices(model, tp)
        ]
        self.tp, self.pp, self.vs, self.cp, self.ep, self.etp = (
            np.array(axis, dtype=np.int64) for axis in zip(*layouts, strict=True)
        )
        self.tp_i = np.searchsorted(np.array(TP_CHOICES), self.tp)  # the tp of each layout, as an index
        #: memory rungs (offload x recompute, :func:`sharding_rungs`) of each sharding, and their choices as arrays
        #: [sharding, rung]: the recompute and offload (indices into RECOMPUTE_ORDER / OFFLOAD_ORDER), the quarter
        self.rung_table = [sharding_rungs(sh) for sh in SHARDINGS]
        self.rungs = np.array([len(t) for t in self.rung_table], dtype=np.int64)
        width = int(self.rungs.max())
        self.rung_rc, self.rung_off, self.rung_q = (np.zeros((len(SHARDINGS), width), dtype=np.int64) for _ in "rcq")
        self.rung_at: dict[Rung, Any] = {}  # rung -> its index in each sharding's table (-1: not there)
        for i, table in enumerate(self.rung_table):
            for j, rung in enumerate(table):
                self.rung_rc[i, j] = RECOMPUTE_ORDER.index(rung.recompute)
                self.rung_off[i, j] = OFFLOAD_ORDER.index(rung.offload)
                self.rung_q[i, j] = rung.quarter
                self.rung_at.setdefault(rung, np.full(len(SHARDINGS), -1, dtype=np.int64))[i] = j
        #: candidates of each (tp, pp, vs, cp, ep) at one GPU count and offer: shardings x rungs x micro-batches
        self.per_layout = np.array(
            [
                sum(int(self.rungs[SHARDINGS.index(sh)]) for sh in sharding_choices(tp * pp * cp)) * len(MICRO_BATCHES)
                for tp, pp, _, cp, _, _ in layouts
            ]
        )
        self.block = int(self.per_layout.sum())  # candidates of the layout grid at one GPU count
        self.micro_batches = np.array(MICRO_BATCHES, dtype=np.int64)
        self.mp_shardings = np.array([SHARDINGS.index(s) for s in sharding_choices(2)])
        self.tally = _Count()
        try:  # what training_memory refuses for every layout (the sequence length): nothing fits
            validate_layout(model, Parallelism(), replace(job, micro_batch=1))
            self.memory_checks = True
        except GpuplanError:
            self.memory_checks = False

    def set_precision(self, index: int, precision: str) -> None:
        """Search the next GPUs at ``precision`` (``index`` on the precision axis): the job as ``train
        --precision`` gets it. The run's FLOPs, the batch rule and the layout axes do not depend on it."""
        self.precision_i, self.refused = index, None
        try:
            self.job = replace(self.job, precision=precision)
        except GpuplanError as e:  # the job refuses the precision (QLoRA's 4-bit base at fp8): not_supported
            self.job, self.refused = replace(self.job, precision=self.job.precision), str(e)

    def search_gpu(self, gpu_index: int, gpu: Accelerator, classes: list[HardwareClass]) -> dict[str, Any] | None:
        """Count and evaluate every candidate on ``gpu``; the feasible ones as arrays (``_FOUND``), or None."""
        import numpy as np

        tally, job = self.tally, self.job
        try:
            peak = peak_for(gpu, job.precision)
            if job.precision == "fp8-mixed" and not gpu.supports("fp8"):
                raise InputError("--precision", "no fp8")
        except GpuplanError:
            peak = None
        if self.refused is not None:
            peak = None
        sizes = sorted({c.per_instance for c in classes if c.per_instance > 1}) or [8]
        if self.fixed_gpus is not None:
            counts = [self.fixed_gpus]
        else:
            counts = sorted({1} | {c for n in sizes for c in gpu_counts(n, self.max_gpus)})
        # the offers (hardware classes) at each count: single-GPU offers for 1 GPU, whole instances otherwise
        here = [
            [
                j
                for j, c in enumerate(classes)
                if (c.per_instance == 1 if count == 1 else c.per_instance > 1 and count % c.per_instance == 0)
            ]
            for count in counts
        ]
        if peak is None:
            tally.add(R.NOT_SUPPORTED, self.block * sum(max(1, len(h)) for h in here))
            return None
        tally.add(R.NO_OFFER_OF_THAT_SIZE, self.block * sum(1 for h in here if not h))

        # ---- each offer's interconnect, as train --offer takes it (offer_accelerator): the same for every tp
        # within the offer's NVLink domain, and a TP group stays within the instance and that domain
        linked, variants = [], []  # the accelerator as each class links it; the distinct ones
        for hc in classes:
            a = offer_accelerator(hc.offer, gpu)
            if a not in variants:
                variants.append(a)
            linked.append(variants.index(a))
        variant_of = np.array(linked or [0], dtype=np.int64)
        tp_ok = np.array(
            [
                [
                    tp == 1
                    or (
                        variants[linked[j]].interconnect is not None
                        and tp <= c.per_instance
                        and (c.offer.scale_up_domain_gpus is None or tp <= c.offer.scale_up_domain_gpus)
                    )
                    for j, c in enumerate(classes)
                ]
                for tp in TP_CHOICES
            ],
            dtype=bool,
        ).reshape(len(TP_CHOICES), len(classes))
        # table[k, i, :]: the classes at count i that take tp = TP_CHOICES[k]; width_tp[k, i]: how many
        by_tp = [[[j for j in h if tp_ok[k, j]] for h in here] for k in range(len(TP_CHOICES))]
        width_tp = np.array([[len(h) for h in row] for row in by_tp], dtype=np.int64)
        table = np.zeros((len(TP_CHOICES), len(counts), max(1, len(classes))), dtype=np.int64)
        for k, row in enumerate(by_tp):
            for i, h in enumerate(row):
                table[k, i, : len(h)] = h

        # ---- (tp, pp, vs, cp, ep, etp) x count: the layouts that divide, and the counts that can meet the deadline
        count_axis = np.array(counts, dtype=np.int64)
        width = np.array([len(h) for h in here], dtype=np.int64)  # offers at each count
        tp, pp, cp, c = self.tp[:, None], self.pp[:, None], self.cp[:, None], count_axis[None, :]
        expert_grid = (self.ep * self.etp)[:, None]  # ep x etp: the expert layers' split of one stage's GPUs
        mp = tp * pp * cp
        takes = width_tp[self.tp_i, :]  # offers at each count whose instance and NVLink domain hold the TP group
        # the parallel folding rule (spec.training.Parallelism): ep x etp divides gpus / pp = tp x cp x dp
        divides = (self.model.attention_heads % tp == 0) & (c % mp == 0) & ((c // pp) % expert_grid == 0) & (takes > 0)
        offered = (width > 0)[None, :]
        tally.add(
            R.LAYOUT_DOES_NOT_DIVIDE,
            (self.per_layout[:, None] * (width[None, :] - takes * divides) * offered).sum(),
        )
        weight = self.per_layout[:, None] * takes
        live = divides & offered
        ceiling = mfu_ceiling(gpu, job.precision, self.step_a)
        floor_s = self.total_flops / (count_axis * peak * ceiling)  # no layout of a count is faster
        if self.deadline_s is not None:
            late = live & (floor_s > self.deadline_s)[None, :]
            tally.add(R.MISSES_DEADLINE, (weight * late).sum())
            live &= ~late

        # ---- x sharding x micro-batch: one element per (layout, count, sharding, micro-batch)
        layout_i, count_i = np.nonzero(live)
        n_sh, n_mb = len(SHARDINGS), len(MICRO_BATCHES)
        layout_i = np.repeat(layout_i, n_sh * n_mb)
        count_i = np.repeat(count_i, n_sh * n_mb)
        sharding_i = np.tile(np.repeat(np.arange(n_sh), n_mb), len(layout_i) // (n_sh * n_mb))
        mb_i = np.tile(np.arange(n_mb), len(layout_i) // n_mb)
        pure_dp = self.tp[layout_i] * self.pp[layout_i] * self.cp[layout_i] == 1
        e = _select(
            pure_dp | np.isin(sharding_i, self.mp_shardings),
            layout=layout_i,
            count=count_i,
            sharding=sharding_i,
            micro_batch=mb_i,
        )
        for axis in ("tp", "pp", "vs", "cp", "ep", "etp"):
            e[axis] = getattr(self, axis)[e["layout"]]
        e["gpus"], e["width"] = count_axis[e["count"]], width_tp[self.tp_i[e["layout"]], e["count"]]
        e["mb"] = self.micro_batches[e["micro_batch"]]
        unit = e["mb"] * (e["gpus"] // (e["tp"] * e["pp"] * e["cp"]))  # micro-batch x dp
        rungs = self.rungs[e["sharding"]]  # (offload, recompute) pairs of each element
        if job.global_batch is not None:
            bad = job.global_batch % unit != 0
            tally.add(R.LAYOUT_DOES_NOT_DIVIDE, (rungs * e["width"])[bad].sum())
            e = _select(~bad, **e)
            e["global_batch"] = np.full(len(e["gpus"]), job.global_batch, dtype=np.int64)
        else:
            bad = unit > BATCH_RULE_SLACK * self.rule_sequences
            tally.add(R.BATCH_ABOVE_RULE, (rungs * e["width"])[bad].sum())
            e = _select(~bad, **e)
            # default_global_batch's rounding of the rule's sequences
            e["global_batch"] = np.asarray(global_batch_of(self.rule_sequences, unit[~bad]), dtype=np.int64)

        # ---- memory, offload level by level (OFFLOAD_ORDER; offload only where nothing fits without it): no
        # recompute first (never slower than any rung: it fits, the rest are dominated); else selective, and the
        # chain partial (a quarter, a half, three quarters of each chunk) -> full, the first that fits. Selective
        # and a partial recompute are not ordered in time (selective re-runs every layer's attention core, partial
        # N whole layers), so where both fit both are timed and the slower is dominated after timing; full is
        # never faster than either (it re-runs every layer whole). With activations offloaded: the fewest layers
        # that fit (more only adds PCIe traffic).
        n_el = len(e["gpus"])
        rungs = self.rungs[e["sharding"]]
        chunk = -(-self.model.layers // e["pp"]) // e["vs"]  # a model chunk's layers on the busiest stage
        chosen = np.full(n_el, -1, dtype=np.int64)  # the first timed rung (index in the sharding's table)
        paired = np.full(n_el, -1, dtype=np.int64)  # selective, timed beside a partial recompute that fits
        nofit = np.zeros(n_el, dtype=np.int64)  # rungs evaluated that do not fit
        if self.memory_checks:
            recipe_key = e["sharding"] * 4 + (e["pp"] > 1) * 2 + (e["tp"] * e["pp"] * e["cp"] > 1)  # recipe, stages
            full_i = RECOMPUTE_ORDER.index("full")
            for level in offload_choices(SHARDINGS[-1]):
                if level != "none" and (chosen >= 0).any():
                    break  # offload: only on a GPU where nothing fits without it
                if gpu.vendor == "google" and level in ("optimizer", "params"):
                    continue  # ZeRO-Offload's CPU-Adam runs beside a GPU, not a TPU (train refuses it there)
                selective = np.full(n_el, -1, dtype=np.int64)
                for rung in rungs_of(level):
                    at = self.rung_at[rung][e["sharding"]]
                    todo = (chosen < 0) & (at >= 0)
                    layers = rung.layers(chunk, e["vs"]) if rung.quarter else None
                    if layers is not None:  # 0 layers: no recompute or offload, which did not fit
                        nofit[todo & (layers == 0)] += 1
                        todo &= layers > 0
                    for idx in _groups(recipe_key, todo):
                        try:
                            total = busiest_total_bytes(self.model, gpu, *self._grid(e, idx, rung, layers), self.mem_a)
                        except GpuplanError:
                            nofit[idx] += 1
                            continue
                        ok = total <= gpu.usable_memory_bytes
                        nofit[idx[~ok]] += 1
                        (selective if rung.recompute == "selective" else chosen)[idx[ok]] = at[idx[ok]]
                sel = selective >= 0
                heavy = sel & ((chosen < 0) | (self.rung_rc[e["sharding"], np.maximum(chosen, 0)] == full_i))
                paired = np.where(sel & ~heavy, selective, paired)  # a partial fits: both timed
                chosen = np.where(heavy, selective, chosen)  # nothing lighter than full fits but selective
        else:  # the job's sequence does not fit any layout: every rung is counted as not fitting
            nofit = rungs.copy()
        fits = chosen >= 0
        slots = fits.astype(np.int64) + (paired >= 0)
        tally.add(R.DOES_NOT_FIT_MEMORY, (nofit * e["width"]).sum())
        tally.add(R.DOMINATED, ((rungs - nofit - slots) * e["width"]).sum())
        e["elem"], e["chunk"] = np.arange(n_el), chunk
        first, second = _select(fits, rung=chosen, **e), _select(paired >= 0, rung=paired, **e)
        e = {k: np.concatenate((first[k], second[k])) for k in first}
        e["recompute"] = self.rung_rc[e["sharding"], e["rung"]]
        e["offload"] = self.rung_off[e["sharding"], e["rung"]]
        quarter = self.rung_q[e["sharding"], e["rung"]]
        e["layers"] = quarter * e["chunk"] // 4 * e["vs"]  # --recompute-layers or --offload-layers (0: neither)

        # ---- x offer: every hardware class at the count that holds the TP group, each with its network and price
        if not len(e["gpus"]):
            return None
        rows = np.repeat(np.arange(len(e["gpus"])), e["width"])
        slot = np.arange(len(rows)) - np.repeat(np.cumsum(e["width"]) - e["width"], e["width"])
        e = {k: v[rows] for k, v in e.items()}
        e["offer"] = table[self.tp_i[e["layout"]], e["count"], slot]
        networks = [offer_network(c.offer, self.step_a) for c in classes]
        price = np.array([c.offer.usd_per_gpu_hour for c in classes])[e["offer"]]
        if self.budget_usd is not None:
            over = floor_s[e["count"]] * e["gpus"] / 3600 * price > self.budget_usd
            tally.add(R.OVER_BUDGET, over.sum())
            e, price = _select(~over, **e), price[~over]

        # ---- step time: each candidate through training_step, grouped by recipe, recompute and interconnect
        n = len(e["gpus"])
        tally.evaluated += n
        e["mfu"], e["step_s"] = np.full(n, np.nan), np.full(n, np.nan)
        per_node = np.array([a.gpus_per_node for a in networks])[e["offer"]]
        scale = np.array([scale_out_bytes_per_s_per_gpu(gpu, a) for a in networks])[e["offer"]]
        variant = variant_of[e["offer"]]
        choice = (e["sharding"] * 4 + e["recompute"]) * 4 + e["offload"]
        step_key = (choice * 2 + (e["tp"] * e["pp"] * e["cp"] > 1)) * len(variants) + variant
        for idx in _groups(step_key, np.ones(n, dtype=bool)):
            net = self.step_a.grid(gpus_per_node=per_node[idx], scale_out_bytes_per_s_per_gpu=scale[idx])
            linked_gpu = variants[int(variant[idx[0]])]
            rung = self.rung_table[int(e["sharding"][idx[0]])][int(e["rung"][idx[0]])]
            layout, grid_job = self._grid(e, idx, rung, e["layers"])
            try:
                step = training_step(self.model, linked_gpu, layout, grid_job, net, e["vs"][idx], memory=self.mem_a)
            except GpuplanError:
                continue  # not supported (NaN below)
            e["mfu"][idx], e["step_s"][idx] = step.mfu, step.iteration_s
        mfu = e["mfu"]
        ok = np.isfinite(mfu) & (mfu > 0) & (mfu <= 1)  # time_to_train's check
        tally.add(R.NOT_SUPPORTED, (~ok).sum())
        e, price = _select(ok, **e), price[ok]
        # selective and a partial recompute of one candidate on one offer: the slower is dominated (same GPUs,
        # batch and price; ties keep selective, the lighter)
        pair = e["elem"] * max(1, len(classes)) + e["offer"]
        order = np.lexsort((e["rung"], e["step_s"], pair))
        slower = np.zeros(len(pair), dtype=bool)
        slower[order[1:]] = pair[order[1:]] == pair[order[:-1]]
        tally.add(R.DOMINATED, slower.sum())
        e, price = _select(~slower, **e), price[~slower]
        t = time_to_train(self.total_flops, e["gpus"], peak, e["mfu"])
        e["time_s"], e["cost_usd"] = t.seconds, t.gpu_hours * price
        keep = np.ones(len(price), dtype=bool)
        if self.deadline_s is not None:
            late = e["time_s"] > self.deadline_s
            tally.add(R.MISSES_DEADLINE, late.sum())
            keep &= ~late
        if self.budget_usd is not None:
            over = keep & (e["cost_usd"] > self.budget_usd)
            tally.add(R.OVER_BUDGET, over.sum())
            keep &= ~over
        e = _select(keep, **e)
        tally.searched += len(e["gpus"])
        e["gpu"] = np.full(len(e["gpus"]), gpu_index)
        e["precision"] = np.full(len(e["gpus"]), self.precision_i)
        return {k: e[k] for k in _FOUND}

    def _grid(self, e: dict[str, Any], idx: Any, rung: Rung, layers: Any) -> tuple[ParallelismGrid, TrainingJobGrid]:
        """The layouts and jobs of the elements ``idx`` of ``e`` (one sharding: a ZeRO stage and FSDP or not) at
        ``rung``; ``layers``: the rung's layer count of every element of ``e``."""
        recompute, offload = rung.recompute, rung.offload
        sharding = SHARDINGS[int(e["sharding"][idx[0]])]
        tp = e["tp"][idx]
        layout = ParallelismGrid(
            gpus=e["gpus"][idx],
            tp=tp,
            pp=e["pp"][idx],
            cp=e["cp"][idx],
            ep=e["ep"][idx],
            etp=e["etp"][idx],
            virtual_stages=e["vs"][idx],
            sequence_parallel=tp > 1,
            zero=sharding.zero,
            offload=offload,
        )
        job = _job_grid(
            self.job,
            micro_batch=e["mb"][idx],
            global_batch=e["global_batch"][idx],
            recompute=recompute,
            recompute_layers=layers[idx] if recompute == "partial" else None,
            offload_layers=layers[idx] if offload == "activations" else None,
            fsdp=sharding.fsdp,
        )
        return layout, job


def _select(mask: Any, **arrays: Any) -> dict[str, Any]:
    """The elements of each array where ``mask`` holds."""
    return {k: v[mask] for k, v in arrays.items()}


def _groups(key: Any, mask: Any) -> list[Any]:
    """Indices of the elements where ``mask`` holds, one array per value of ``key``."""
    import numpy as np

    idx = np.nonzero(mask)[0]
    if not len(idx):
        return []
    keys = key[idx]
    order = np.argsort(keys, kind="stable")
    bounds = np.nonzero(np.diff(keys[order]))[0] + 1
    return np.split(idx[order], bounds)


def _candidate(
    found: dict[str, Any],
    i: int,
    gpus: Sequence[Accelerator],
    classes_of: list[list[HardwareClass]],
    precisions: Sequence[str] = ("bf16-mixed",),
):
    """The reported candidate ``i`` of the feasible arrays, in plain numbers (``precisions``: the search's
    precision axis, which ``found["precision"]`` indexes)."""
    g = int(found["gpu"][i])
    ends = _TIME in found and math.isfinite(found[_TIME][i])
    return TrainCandidate(
        gpus[g],
        classes_of[g][int(found["offer"][i])].offer,
        int(found["gpus"][i]),
        int(found["tp"][i]),
        int(found["pp"][i]),
        int(found["ep"][i]),
        SHARDINGS[int(found["sharding"][i])],
        RECOMPUTE_ORDER[int(found["recompute"][i])],
        MICRO_BATCHES[int(found["micro_batch"][i])],
        int(found["global_batch"][i]),
        float(found["mfu"][i]),
        float(found["step_s"][i]),
        float(found["time_s"][i]),
        float(found["cost_usd"][i]),
        offload=OFFLOAD_ORDER[int(found["offload"][i])],
        recompute_layers=int(found["layers"][i]) if RECOMPUTE_ORDER[int(found["recompute"][i])] == "partial" else None,
        offload_layers=int(found["layers"][i]) if OFFLOAD_ORDER[int(found["offload"][i])] == "activations" else None,
        cp=int(found["cp"][i]),
        virtual_stages=int(found["vs"][i]),
        # expert TP equal to tp is Megatron-Core's default: left unset, as train takes it without --etp
        etp=None if int(found["etp"][i]) == int(found["tp"][i]) else int(found["etp"][i]),
        precision=precisions[int(found["precision"][i])],
        # a run expected never to finish (inf wall time, goodput 0) has none: null, never inf or 0
        **{k: float(found[k][i]) if ends else None for k in ("goodput", _TIME, _COST) if k in found},
    )


def mfu_ceiling(gpu: Accelerator, precision: str, a: StepAssumptions) -> float:
    """An upper bound on the step-time model's MFU on this GPU: every part of a step runs at most at the best of
    its kernels' efficiencies (GEMMs at the matmul efficiency, attention at the flash efficiency, both against
    their own peak), and every other part only adds time. Used to set aside deadline and budget misses before
    timing them; tests check it against training_step."""
    from ..estimate.mamf import matmul_efficiency
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


def _pareto_front_mask(*axes: Any) -> Any:
    """Whether each point (one value per axis, lower is better on each) is on the Pareto front: no other point is
    at most as large on every axis. Sorted lexicographically, a point can only be dominated by a distinct point
    before it, one no larger on the second and third axes: a running minimum of the second axis over the points
    at or below each value of the third (GPU counts, a few dozen values). Equal points do not dominate each other
    and are each counted."""
    import numpy as np

    # the distinct points in lexicographic order (np.unique(axis=0) does the same through a row view, several times
    # slower on a million candidates): one lexsort, then a new point wherever any axis changes
    order = np.lexsort(tuple(np.asarray(a, dtype=float) for a in reversed(axes)))
    ranked = [np.asarray(a, dtype=float)[order] for a in axes]
    new = np.zeros(len(order), dtype=bool)
    new[:1] = True
    for a in ranked:
        new[1:] |= a[1:] != a[:-1]
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    second, third = ranked[1][new], ranked[2][new]
    dominated = np.zeros(len(second), dtype=bool)
    for level in np.unique(third):
        below = np.where(third <= level, second, np.inf)
        before = np.minimum.accumulate(np.concatenate(([np.inf], below[:-1])))  # over the earlier points
        dominated |= (third == level) & (before <= second)
    return ~dominated[inverse]


def _option(model: ModelSpec, c: TrainCandidate, base_job: TrainingJob, pareto: bool, mem_a) -> TrainOption:
    """The full option of one reported candidate: its memory (peak and headroom), stack, launch hints and the
    error band ``train`` attaches to the same layout (:func:`option_band`)."""
    from ..estimate.memory import resolve_recipe, stack_job
    from ..estimate.steptime import resolve_stack

    lay, job = c.layout(), c.job(base_job)
    mem = training_memory(model, c.gpu, lay, job, mem_a, find_max_batch=False)
    stack, _ = resolve_stack(job, lay, c.gpu)
    recipe, _ = resolve_recipe(stack_job(job, c.gpu), lay)
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
        option_band(model, c.gpu, job, stack.name),
        model.moe is not None,
    )


def option_band(model: ModelSpec, gpu: Accelerator, job: TrainingJob, stack: str) -> Any:
    """The training-throughput band of a layout: the class ``train`` looks up for it (``bands.train_class``: GPU
    generation, precision, the resolved stack, dense/MoE), from the same memoized table."""
    from types import SimpleNamespace

    from .bands import lookup, train_class

    return lookup("training_throughput", train_class(gpu, job, SimpleNamespace(stack=stack), model))


# ------------------------------------------------------------------------------------------- launch hints


def train_launch(model: ModelSpec, c: TrainCandidate, job: TrainingJob, accumulation: int) -> dict[str, str | None]:
    """Ready-to-copy launch lines for the layout: torchrun + torchtitan flags, Megatron-LM pretrain_gpt.py
    arguments, and a DeepSpeed config (None where DeepSpeed's config cannot express it: pipeline stages live in
    the model code's PipelineModule, and its sequence parallelism is Ulysses, not ring-attention CP)."""
    per_node = c.offer.gpu_count
    nodes = max(1, c.gpus // per_node)
    dp = c.dp
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
    if c.cp > 1:
        tt.append(f"--parallelism.context_parallel_degree {c.cp}")
    if c.ep > 1:
        tt.append(f"--parallelism.expert_parallel_degree {c.ep}")
        if c.tp > 1:  # torchtitan's expert_tensor_parallel_degree defaults to 1 (Megatron-Core's to tp): stated
            tt.append(f"--parallelism.expert_tensor_parallel_degree {c.expert_tp}")
    if shard and c.sharding.zero < 3:
        tt.append("--parallelism.fsdp_reshard_after_forward never")
    host_states = c.offload in ("optimizer", "params")
    if host_states:  # FSDP2's CPUOffloadPolicy: parameters, gradients and optimizer states on the host
        tt.append("--training.enable_cpu_offload")
    if c.pp > 1:
        tt.append(f"--parallelism.pipeline_parallel_microbatch_size {c.micro_batch}")
        if c.virtual_stages > 1:  # torchtitan's looped schedule: virtual_stages stages per rank
            tt.append("--parallelism.pipeline_parallel_schedule Interleaved1F1B")
            per_chunk = -(-model.layers // c.pp) // c.virtual_stages
            tt.append(f"--parallelism.pipeline_parallel_layers_per_stage {per_chunk}")
    tt += [
        f"--training.local_batch_size {local}",
        f"--training.global_batch_size {c.global_batch}",
        f"--training.seq_len {job.seq_len}",
    ]
    stage_layers = -(-model.layers // c.pp)
    titan: str | None = None  # torchtitan cannot express the layout: None
    if c.recompute == "partial":
        # torchtitan's layer-wise SAC checkpoints every p-th block of the rank (selective_ac_option p): the same
        # layers per stage only where they divide the stage
        n = c.recompute_layers or 0
        if n and stage_layers % n == 0:
            tt.append("--activation_checkpoint.mode selective")
            tt.append(f"--activation_checkpoint.selective_ac_option {stage_layers // n}")
            titan = ""
    else:
        tt.append(f"--activation_checkpoint.mode {c.recompute}")
        titan = ""
    if c.offload == "activations":  # no activation offload in torchtitan (FSDP2's CPU offload moves the states)
        titan = None
    if not _torchtitan_folds(c, dp if shard else 1):
        titan = None
    if fp8:
        tt.append("--model.converters float8")
    mg = [
        f"{run} pretrain_gpt.py",
        f"--tensor-model-parallel-size {c.tp}",
        f"--pipeline-model-parallel-size {c.pp}",
    ]
    if c.virtual_stages > 1:
        mg.append(f"--num-virtual-stages-per-pipeline-rank {c.virtual_stages}")
    if c.tp > 1:
        mg.append("--sequence-parallel")
    if c.cp > 1:
        mg.append(f"--context-parallel-size {c.cp}")
    if c.ep > 1:
        mg.append(f"--expert-model-parallel-size {c.ep}")
    if c.etp is not None:  # unset, Megatron-Core's expert TP follows --tensor-model-parallel-size
        mg.append(f"--expert-tensor-parallel-size {c.etp}")
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
    elif c.recompute == "partial":  # the first N layers of each model chunk (Megatron counts per chunk)
        per_chunk = (c.recompute_layers or 0) // c.virtual_stages
        mg.append(f"--recompute-granularity full --recompute-method block --recompute-num-layers {per_chunk}")
    if c.sharding.fsdp:
        mg.append("--use-torch-fsdp2")
    elif c.sharding.zero >= 1:
        mg.append("--use-distributed-optimizer")
    if host_states:  # Megatron-Core's hybrid optimizer: the distributed optimizer's states on the host
        mg.append("--optimizer-cpu-offload --optimizer-offload-fraction 1.0")
    if c.offload == "activations":  # Megatron-Core / Transformer Engine CPU offload of N layers per model chunk
        per_chunk = (c.offload_layers or 0) // c.virtual_stages
        mg.append(f"--cpu-offloading --cpu-offloading-num-layers {per_chunk}")
    ds: str | None = None
    # DeepSpeed's sequence parallelism (Ulysses) is not ring-attention CP; its activation offload (cpu_checkpointing)
    # moves only checkpointed layer inputs, not N layers' saved activations
    if c.pp == 1 and c.cp == 1 and c.offload != "activations":
        config: dict[str, Any] = {
            "train_batch_size": c.global_batch,
            "train_micro_batch_size_per_gpu": c.micro_batch,
            "gradient_accumulation_steps": accumulation,
            "bf16": {"enabled": True},
            "zero_optimization": {"stage": c.sharding.zero},
        }
        if host_states:
            config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
        if c.offload == "params":
            config["zero_optimization"]["offload_param"] = {"device": "cpu"}
        if c.tp > 1:
            config["tensor_parallel"] = {"autotp_size": c.tp}
        if c.recompute != "none":
            config["activation_checkpointing"] = {
                "partition_activations": c.tp > 1,
                "contiguous_memory_optimization": False,
            }
        ds = json.dumps(config, separators=(", ", ": "))
    if job.method != "full":
        return _finetune_launch(model, c, job, accumulation, run, ds)
    # Megatron-Core's CPU offload refuses pipeline parallelism (TransformerConfig: "no support for Pipeline
    # parallelism with CPU offloading") and recomputation (the search offloads activations without it)
    megatron = None if c.offload == "activations" and c.pp > 1 else " ".join(mg)
    return {"torchtitan": None if titan is None else " ".join(tt), "megatron": megatron, "deepspeed": ds}


def _torchtitan_folds(c: TrainCandidate, dp_shard: int) -> bool:
    """Whether torchtitan's device mesh takes the expert layout (torchtitan/distributed/parallel_dims.py,
    ParallelDims._validate): without EP the experts follow tp (its expert_tensor_parallel_degree has no effect);
    with ep > 1, etp is tp (EP borrows all of cp and part of the FSDP shard degree: ep a multiple of cp dividing
    dp_shard x cp) or 1 (EP borrows cp and tp too: a multiple of cp x tp dividing dp_shard x cp x tp). Other
    folds, which Megatron-Core takes, have no torchtitan launch line."""
    etp = c.expert_tp
    if c.ep == 1:
        return etp == c.tp
    if etp == c.tp:
        return c.ep % c.cp == 0 and dp_shard * c.cp % c.ep == 0
    return etp == 1 and c.ep % (c.cp * c.tp) == 0 and dp_shard * c.cp * c.tp % c.ep == 0


#: PEFT's LoRA module names -> torchtune's ``lora_attn_modules`` (torchtune calls the attention output output_proj)
_TORCHTUNE_ATTN = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
_MLP = frozenset({"gate_proj", "up_proj", "down_proj"})


def _finetune_launch(
    model: ModelSpec, c: TrainCandidate, job: TrainingJob, accumulation: int, run: str, ds: str | None
) -> dict[str, str | None]:
    """Launch hints of a LoRA/QLoRA candidate. torchtitan and Megatron-LM's pretrain_gpt.py train every weight (no
    LoRA): None. ``peft``: the Hugging Face PEFT adapter config (and the bitsandbytes 4-bit or 8-bit base of
    QLoRA / --quant), run by the HF Trainer with the DeepSpeed config beside it (data parallel only: tp > 1 has no
    PEFT path here). ``torchtune``: its ``lora_finetune_distributed`` recipe, which shards with FSDP2 over data
    parallel ranks only, so only for a pure data-parallel FSDP / ZeRO-3 layout whose targets it can name (all MLP
    projections or none) and whose recompute it has (none or full); None otherwise."""
    targets = list(job.targets)
    peft = f"LoraConfig(r={job.lora_rank}, target_modules={targets!r})"
    if job.quant == "nf4":
        peft += (
            "; BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4', bnb_4bit_use_double_quant=True, "
            "bnb_4bit_compute_dtype=torch.bfloat16)"
        )
    elif job.quant == "int8":
        peft += "; BitsAndBytesConfig(load_in_8bit=True)"
    pure_dp = c.tp == 1 and c.pp == 1 and c.cp == 1 and c.ep == 1
    mlp = _MLP & set(targets)
    tune: str | None = None
    if pure_dp and c.sharding.zero == 3 and c.offload == "none" and mlp in (set(), _MLP) and c.recompute != "selective":
        attn = [_TORCHTUNE_ATTN[t] for t in targets if t in _TORCHTUNE_ATTN]
        tune = " ".join(
            [
                run.replace("torchrun", "tune run"),
                f"lora_finetune_distributed --config ./{model.id}_{job.method}.yaml",
                f"model.lora_rank={job.lora_rank}",
                f"model.lora_attn_modules=[{','.join(attn)}]",
                f"model.apply_lora_to_mlp={bool(mlp)}",
                f"batch_size={c.micro_batch}",
                f"gradient_accumulation_steps={accumulation}",
                f"enable_activation_checkpointing={c.recompute == 'full'}",
            ]
        )
    return {
        "torchtitan": None,
        "megatron": None,
        "deepspeed": ds if c.tp == 1 else None,
        "peft": peft,
        "torchtune": tune,
    }


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


def train_option_record(o: TrainOption, seq_len: int, method: str = "full") -> dict[str, Any]:
    """One option: the offer (null for owned hardware, priced under the record's ``ownership``), the layout, the
    estimates with their P10-P90 bands (``*_p10`` / ``*_p90``, as ``train`` gives them; null without a band)."""
    from .records import _interval

    c = o.candidate
    owned = c.offer.pricing == "owned"
    mfu_band = _interval(o.band, c.mfu, 1, 1.0)
    time_band = _interval(o.band, c.time_s, -1)
    cost_band = _interval(o.band, c.cost_usd, -1)
    return {
        "gpu": c.gpu.id,
        "gpus": c.gpus,
        "offer": None if owned else _offer_dict(c.offer),
        "pricing": c.offer.pricing,
        "usd_per_gpu_hour": c.offer.usd_per_gpu_hour,
        "layout": {
            "tp": c.tp,
            "pp": c.pp,
            "dp": c.dp,
            "cp": c.cp,
            "virtual_stages": c.virtual_stages,
            "ep": c.ep,
            # expert tensor parallelism, as train's layout gives it: null for a dense model (no experts to split)
            "etp": c.expert_tp if o.moe else None,
            "zero": c.sharding.zero,
            "fsdp": c.sharding.fsdp,
            "sequence_parallel": c.tp > 1,
            "micro_batch": c.micro_batch,
            "global_batch": c.global_batch,
            "grad_accumulation": o.grad_accumulation,
            "seq_len": seq_len,
            "recompute": c.recompute,
            "recompute_layers": c.recompute_layers,
            "offload": c.offload,
            "offload_layers": c.offload_layers,
            "stack": o.stack,
            "recipe": o.recipe,
        },
        "precision": c.precision,
        "method": method,
        "mfu": c.mfu,
        "mfu_p10": mfu_band[0],
        "mfu_p90": mfu_band[1],
        "step_s": c.step_s,
        "time_s": c.time_s,
        "time_s_p10": time_band[0],
        "time_s_p90": time_band[1],
        "cost_usd": c.cost_usd,
        "cost_usd_p10": cost_band[0],
        "cost_usd_p90": cost_band[1],
        "goodput": c.goodput,
        "wall_time_with_failures_s": c.wall_time_with_failures_s,
        "cost_with_failures_usd": c.cost_with_failures_usd,
        "band_class": o.band.band_class if o.band is not None else None,
        "gpu_hours": c.time_s * c.gpus / 3600,
        "peak_memory_bytes": o.peak_memory_bytes,
        "capacity_bytes": o.capacity_bytes,
        "headroom": 1 - o.peak_memory_bytes / o.capacity_bytes,
        "pareto": o.pareto,
        "launch": o.launch,
    }


def train_record(model: ModelSpec, tokens: float, objective: str, constraints: dict[str, Any], s: TrainSearch) -> dict:
    seq_len, method = s.grid["seq_len"], s.grid.get("method", "full")
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
        "options": [train_option_record(o, seq_len, method) for o in s.options],
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
    """The counts obey ``searched == sum(pruned) + feasible`` and ``searched >= evaluated >= feasible >=
    len(options)``: ``searched`` is the whole grid (each candidate counted once, under an option or its first
    pruning reason), ``evaluated`` those planned by ``serving_plan`` (the rest were pruned before it), ``feasible``
    those that fit and meet the targets (``options``: the first ``top`` of them)."""

    searched: int
    evaluated: int
    grid: dict[str, Any]
    pruned: dict[str, int]
    options: tuple[ServeOption, ...]
    pareto_size: int
    feasible: int
    qps: float | None = None
    #: each GPU's first option in the ranking (``serve --rank``; empty unless asked for), ranked as ``options``
    best_per_gpu: tuple[ServeOption, ...] = ()
    #: the pruned counts of each GPU that has no feasible candidate, by reason id
    pruned_per_gpu: dict[str, dict[str, int]] = field(default_factory=dict)


def _format_supported(fmt: str, gpu: Accelerator) -> bool:
    if fmt == "fp8":
        return gpu.supports("fp8")
    if fmt == "nvfp4":
        return gpu.peak("fp4") is not None
    return True


def _serve_order(o: ServeOption) -> tuple[float, float, int]:
    """The ranking of ``plan serve`` and ``serve --rank``: $ per million output tokens, then request latency, then
    fewer GPUs."""
    return (o.usd_per_million_output_tokens, o.report.request_latency_s, o.gpus)


_SERVE_PRUNE_ORDER = (
    R.DOES_NOT_FIT_MEMORY,
    R.LAYOUT_DOES_NOT_DIVIDE,
    R.NO_OFFER_OF_THAT_SIZE,
    R.MISSES_SLO,
    R.NOT_SUPPORTED,
)


def search_serve(
    model: ModelSpec,
    gpus: Sequence[Accelerator],
    offers: Iterable[Offer],
    job: Any,
    qps: float | None,
    *,
    pricing: str = "on-demand",
    providers: Sequence[str] | None = None,
    engines: Sequence[str] = SERVE_ENGINES,
    formats: Sequence[str] = SERVE_FORMATS,
    assumptions: Any = None,
    top: int = 20,
    per_gpu: bool = False,
) -> ServeSearch:
    """GPU x weights x KV cache x tp x engine, each replica planned by ``serving_plan`` (as ``serve``) and priced by
    ``cost_per_million`` with the cheapest offer whose instances hold whole replicas; ranked by $ per million
    output tokens (:func:`_serve_order`), the Pareto front of (cost, request latency) flagged.

    Two passes. Every candidate is planned at its own largest batch that fits and meets --max-tpot/--max-ttft
    (no load: ``serving_plan`` without ``qps``, about 0.2 ms each): memory, the targets and the price per token,
    which the load does not change (``cost_per_million`` prices a replica's capacity). Then, best first, the
    reported ones (the first ``top``, and with ``per_gpu`` each GPU's first) are planned again under ``qps`` as
    ``serve --qps`` plans them (about 1.6 ms each: the fleet for the load within ``max_utilization``, Poisson
    arrivals, the wait for a slot), which gives their replicas and their TTFT/TPOT at the load; one that misses
    the targets even with more replicas is pruned (misses_slo) and the next takes its place. Without ``qps`` an
    option is one replica at its full batch. ``searched`` counts the grid, ``evaluated`` the candidates planned
    by the first pass; the Pareto front is over the first pass's feasible candidates (full-batch latency)."""
    from ..estimate.inference import cost_per_million, fleet_for, serving_plan, weight_bytes
    from ..spec.serving import ServingLayout
    from .training import pareto_front

    offers = _offers_of(offers, pricing, providers)
    tally = _Count()
    by_gpu: dict[str, Counter[str]] = {g.id: Counter() for g in gpus}
    feasible: list[ServeOption] = []

    def prune(gpu: Accelerator, reason: str, n: int) -> None:
        tally.add(reason, n)
        by_gpu[gpu.id][reason] += n

    offers_of: dict[str, list[Offer]] = {}
    for o in offers:
        offers_of.setdefault(o.gpu, []).append(o)
    for gpu in gpus:
        mine = offers_of.get(gpu.id, [])
        for fmt in formats:
            for kv in SERVE_KV:
                n = len(TP_CHOICES) * len(engines)
                if not _format_supported(fmt, gpu) or (kv == "fp8" and not gpu.supports("fp8")):
                    prune(gpu, R.NOT_SUPPORTED, n)
                    continue
                for tp in TP_CHOICES:
                    if model.attention_heads % tp or (tp > 1 and gpu.interconnect is None):
                        prune(gpu, R.LAYOUT_DOES_NOT_DIVIDE, len(engines))
                        continue
                    holding = [o for o in mine if o.gpu_count % tp == 0]
                    if not holding:
                        prune(gpu, R.NO_OFFER_OF_THAT_SIZE, len(engines))
                        continue
                    offer = min(holding, key=lambda o: (o.usd_per_gpu_hour, o.id))
                    layout = ServingLayout(tp=tp)
                    try:
                        w = weight_bytes(model, fmt, layout).total
                    except GpuplanError:
                        prune(gpu, R.NOT_SUPPORTED, len(engines))
                        continue
                    if w > gpu.usable_memory_bytes:  # the weights alone: no engine fits (a lower bound)
                        prune(gpu, R.DOES_NOT_FIT_MEMORY, len(engines))
                        continue
                    for engine in engines:
                        tally.evaluated += 1
                        j = replace(job, weights=fmt, kv_cache=kv, engine=engine)
                        try:
                            r = serving_plan(model, gpu, layout, j, assumptions)
                        except GpuplanError:
                            prune(gpu, R.NOT_SUPPORTED, 1)
                            continue
                        if not r.fits or r.max_concurrent_sequences < 1:
                            prune(gpu, R.DOES_NOT_FIT_MEMORY, 1)
                            continue
                        if r.reasons:
                            prune(gpu, R.MISSES_SLO, 1)
                            continue
                        cost = cost_per_million(r, layout, j, offer.usd_per_gpu_hour)
                        tally.searched += 1
                        feasible.append(ServeOption(gpu, offer, fmt, kv, tp, engine, r, 1, cost))
    feasible.sort(key=_serve_order)

    # second pass: the reported options under the load, best first
    shown: list[tuple[int, ServeOption]] = []  # (index in feasible, the option under the load)
    best: dict[str, tuple[int, ServeOption]] = {}
    wanted = {g.id for g in gpus} if per_gpu else set()
    dropped: set[int] = set()
    kept = Counter(o.gpu.id for o in feasible)  # feasible candidates per GPU, less those the load rules out
    for i, o in enumerate(feasible):
        if len(shown) >= top and not (wanted - best.keys()):
            break
        if len(shown) >= top and o.gpu.id in best:
            continue
        layout = ServingLayout(tp=o.tp)
        j = replace(job, weights=o.weights, kv_cache=o.kv_cache, engine=o.engine)
        r = serving_plan(model, o.gpu, layout, j, assumptions, qps=qps) if qps is not None else o.report
        if r.reasons:  # no fleet meets the targets under the load
            prune(o.gpu, R.MISSES_SLO, 1)
            tally.searched -= 1  # counted once: moved from the feasible candidates to the pruned ones
            dropped.add(i)
            kept[o.gpu.id] -= 1
            continue
        replicas = fleet_for(r, layout, j, qps).replicas if qps is not None else 1
        done = replace(o, report=r, replicas=replicas)
        done = replace(done, launch=serve_launch(model, done, job))
        if len(shown) < top:
            shown.append((i, done))
        best.setdefault(o.gpu.id, (i, done))
    # the front of the feasible candidates the load did not rule out (their full-batch latency and price)
    left = [i for i in range(len(feasible)) if i not in dropped]
    points = [(feasible[i].report.request_latency_s, feasible[i].usd_per_million_output_tokens) for i in left]
    front = {left[k] for k in pareto_front(points)}
    grid = {
        "gpus": [g.id for g in gpus],
        "pricing": pricing,
        "providers": list(providers) if providers else None,
        "weights": list(formats),
        "kv_cache": list(SERVE_KV),
        "tp": list(TP_CHOICES),
        "pp": [1],
        "engine": list(engines),
        "replicas": "the fewest that serve qps within max_utilization and the targets (serve --qps)"
        if qps is not None
        else 1,
    }
    return ServeSearch(
        searched=tally.searched,
        evaluated=tally.evaluated,
        grid=grid,
        pruned={r.value: tally.pruned.get(r.value, 0) for r in _SERVE_PRUNE_ORDER},
        options=tuple(replace(o, pareto=i in front) for i, o in shown),
        pareto_size=len(front),
        feasible=len(left),
        qps=qps,
        best_per_gpu=tuple(replace(o, pareto=i in front) for i, o in best.values()) if per_gpu else (),
        pruned_per_gpu={
            g: {r.value: c[r.value] for r in _SERVE_PRUNE_ORDER if c[r.value]} for g, c in by_gpu.items() if not kept[g]
        },
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
