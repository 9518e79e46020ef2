"""Plan a training run: step time and MFU (predicted from the layout, or given), time to train,
GPUs for a deadline, GPU-hours and cost; and the ranking of offers that can run it. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..errors import GpuplanError, JobError
from ..estimate.memory import MemoryAssumptions, training_memory
from ..estimate.steptime import StepAssumptions, StepTime, training_step
from ..estimate.time import (
    TrainingCompute,
    TrainingTime,
    gpus_for_deadline,
    peak_for,
    seed_rule_constant,
    seed_rule_gpus,
    time_to_train,
    training_compute,
)
from ..spec.accelerator import Accelerator, Interconnect
from ..spec.model import ModelSpec, ParamsOnlyModel
from ..spec.offer import Offer
from ..spec.training import Parallelism, TrainingJob
from ..units import MAX_DURATION_S, MAX_GPUS, MAX_USD_PER_HOUR, MIN_MFU, check_range


@dataclass(frozen=True)
class TrainingPlan:
    compute: TrainingCompute
    step: StepTime | None
    time: TrainingTime
    mfu_source: str
    layout: Parallelism
    usd_per_gpu_hour: float | None
    offer: Offer | None
    seed_rule_constant: float
    seed_rule_gpus: float | None
    notes: tuple[str, ...] = ()

    @property
    def usd(self) -> float | None:
        return None if self.usd_per_gpu_hour is None else self.time.gpu_hours * self.usd_per_gpu_hour


#: the lowest --assume power_limit_w train prices, as a share of the GPU's TDP (the cube-root clock rule is meant for
#: the caps GPUs run at: NVIDIA's H100 NVL at 400 of the SXM's 700 W, HGX B100 at 700 of 1,000 W)
POWER_LIMIT_MIN_FRACTION = 0.1


def power_limit_note(gpu: Accelerator, cap: float | None) -> str | None:
    """``--assume power_limit_w`` against ``gpu``'s TDP: refused below :data:`POWER_LIMIT_MIN_FRACTION` of it (a cap
    of a few watts is no GPU's operating point; the clock rule scales from the TDP down); the note to print where
    the cap changes nothing (above the TDP, or no TDP in the catalog), else None."""
    if cap is None:
        return None
    if not gpu.tdp_w:
        return f"power_limit_w={cap:g} W: {gpu.id} has no TDP in the catalog to cap from; no cap applied"
    if cap < POWER_LIMIT_MIN_FRACTION * gpu.tdp_w:
        raise JobError(
            f"assumption power_limit_w={cap:g} W is below {POWER_LIMIT_MIN_FRACTION:.0%} of {gpu.id}'s "
            f"{gpu.tdp_w:g} W TDP, where no GPU runs: give a cap between "
            f"{POWER_LIMIT_MIN_FRACTION * gpu.tdp_w:g} and {gpu.tdp_w:g} W"
        )
    if cap > gpu.tdp_w:
        return (
            f"power_limit_w={cap:g} W is above {gpu.id}'s {gpu.tdp_w:g} W TDP: no cap (the step and the energy use "
            "the TDP)"
        )
    return None


def offer_accelerator(offer: Offer, gpu: Accelerator, tp: int = 1) -> Accelerator:
    """The accelerator as the offer's instance links it: its ``scale_up_bytes_per_s_per_gpu`` replaces the
    accelerator's typical scale-up bandwidth; where the instance has no GPU-to-GPU link
    (``scale_up_domain_gpus = 1``) or a tensor-parallel group spans more GPUs than the link joins, the group's
    collectives cross PCIe, so the step time takes the card's PCIe figure (``Accelerator.scale_up_bytes_per_s``
    without an interconnect). An offer that gives neither figure leaves the accelerator as it is."""
    domain, bw = offer.scale_up_domain_gpus, offer.scale_up_bytes_per_s_per_gpu
    if domain is None and bw is None:
        return gpu
    if domain is not None and (domain == 1 or tp > domain):
        return replace(gpu, interconnect=None) if gpu.interconnect is not None else gpu
    if bw is None:
        return gpu
    kind = gpu.interconnect.kind if gpu.interconnect is not None else "scale-up link"
    return replace(gpu, interconnect=Interconnect(f"{kind} ({offer.instance})", bw))


def offer_network(offer: Offer, a: StepAssumptions) -> StepAssumptions:
    """The offer's node size and, where it publishes one, its scale-out bandwidth per GPU."""
    changes: dict[str, Any] = {"gpus_per_node": offer.gpu_count}
    if offer.scale_out_bytes_per_s and a.scale_out_bytes_per_s_per_gpu is None:
        changes["scale_out_bytes_per_s_per_gpu"] = offer.scale_out_bytes_per_s / offer.gpu_count
    return replace(a, **changes)


def predict_mfu(
    model,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    a: StepAssumptions,
    virtual_stages: int = 1,
    memory: MemoryAssumptions | None = None,
) -> tuple[float, StepTime | None, str]:
    """MFU from the step-time model (needs the architecture); a bare count gets no prediction."""
    if not isinstance(model, ModelSpec):
        raise JobError("predicting MFU needs the architecture; give a model id or config.json, or pass --mfu")
    step = training_step(model, gpu, layout, job, a, virtual_stages, memory=memory)
    if not (math.isfinite(step.mfu) and 0 < step.mfu <= 1):
        # the numerator and the step time count the same FLOPs (flops.py, causal) at efficiencies <= 1:
        # an MFU outside (0, 1] is a bug in the model, not the user's input, and must stay visible
        raise ArithmeticError(
            f"step-time model predicted MFU {step.mfu!r} for {layout.describe()} (parts {dict(step.parts)})"
        )
    return step.mfu, step, "predicted from the layout (step-time model)"


def plan_training(
    model: ModelSpec | ParamsOnlyModel,
    gpu: Accelerator,
    layout: Parallelism,
    job: TrainingJob,
    tokens: float,
    epochs: float = 1.0,
    *,
    mfu: float | None = None,
    deadline_s: float | None = None,
    usd_per_gpu_hour: float | None = None,
    offer: Offer | None = None,
    step_assumptions: StepAssumptions = StepAssumptions(),
    virtual_stages: int = 1,
    memory_assumptions: MemoryAssumptions | None = None,
) -> TrainingPlan:
    """Time and cost of training ``tokens`` x ``epochs``; with ``deadline_s`` the GPU count is chosen
    (data parallelism grows over the layout's model-parallel group, in whole offers/nodes). ``memory_assumptions``
    reach the step's parts that move what the memory estimate counts (activation offload)."""
    compute = training_compute(model, job.seq_len, tokens, epochs, method=job.method)
    if mfu is not None:
        check_range(
            mfu,
            "--mfu",
            MIN_MFU,
            1.0,
            why="a fraction of the dense peak; below 0.1 % the GPUs would sit idle, measured MFUs are 20-60 %",
        )
    if deadline_s is not None:
        check_range(deadline_s, "--deadline", 1.0, MAX_DURATION_S, why="seconds, from 1 s to 1000 years")
    if usd_per_gpu_hour is not None:
        check_range(usd_per_gpu_hour, "--usd-per-gpu-hour", 0.0, MAX_USD_PER_HOUR)
    peak = peak_for(gpu, job.precision)
    notes: list[str] = []
    note = power_limit_note(gpu, step_assumptions.power_limit_w)
    if note:
        notes.append(note)
    if offer is not None:
        usd_per_gpu_hour = offer.usd_per_gpu_hour
        step_assumptions = offer_network(offer, step_assumptions)
        gpu = offer_accelerator(offer, gpu, layout.tp)
        unit = math.lcm(layout.tp * layout.pp * layout.cp, offer.gpu_count)
        if deadline_s is None and layout.gpus % unit:
            rounded = math.ceil(layout.gpus / unit) * unit
            notes.append(
                f"{layout.gpus} GPUs rounded up to {rounded}: whole {offer.instance} instances of "
                f"{offer.gpu_count} (and whole model-parallel groups)"
            )
            layout = replace(layout, gpus=rounded)
    if deadline_s is not None:
        layout = _layout_for_deadline(
            model,
            gpu,
            layout,
            job,
            compute.total_flops,
            deadline_s,
            peak,
            mfu,
            offer,
            step_assumptions,
            virtual_stages,
            memory=memory_assumptions,
        )
    if mfu is not None:
        step, source = None, "given (--mfu)"
        if isinstance(model, ModelSpec):
            step = training_step(model, gpu, layout, job, step_assumptions, virtual_stages, memory=memory_assumptions)
    else:
        mfu, step, source = predict_mfu(
            model, gpu, layout, job, step_assumptions, virtual_stages, memory=memory_assumptions
        )
    t = time_to_train(compute.total_flops, layout.gpus, peak, mfu)
    if isinstance(model, ParamsOnlyModel):
        params = model.params
    else:
        from ..estimate.params import count_params

        params = count_params(model).total
    rule = seed_rule_gpus(params, tokens, epochs, deadline_s / 3600, peak, mfu) if deadline_s else None
    if step is not None and compute.tokens * compute.epochs < step.tokens_per_iteration:
        raise JobError(
            f"the run ({compute.tokens * compute.epochs:.3g} tokens) is shorter than one step of this layout "
            f"({step.tokens_per_iteration:.3g} tokens); use fewer GPUs, a smaller --global-batch, or a "
            "longer --deadline"
        )
    if deadline_s is not None and job.global_batch is None and layout.dp > 1:
        notes.append(
            f"no --global-batch: it grows with data parallelism (micro-batch x dp = "
            f"{job.micro_batch * layout.dp * max(1, layout.pp)} sequences per step)"
        )
    if step is not None and job.global_batch is None and deadline_s is None:
        notes.append(f"global batch {step.global_batch} sequences per step ({step.global_batch_source})")
    if step is not None and step.fp8_recipe is not None and job.precision == "fp4-mixed":
        from ..estimate.memory import fp4_bf16_tail_layers

        frac = step_assumptions.fp4_bf16_tail_fraction
        tail = fp4_bf16_tail_layers(model.layers, frac) if isinstance(model, ModelSpec) else 0
        notes.append(
            f"fp4 ({step.fp8_recipe}): the linear layers' GEMMs at the fp4 ceiling except the last {tail} decoder "
            "layers (fp4_bf16_tail_fraction), attention, the LM head and those layers at 16 bits, quantization as "
            "memory traffic (fp4_cast)"
        )
    elif step is not None and step.fp8_recipe is not None:
        notes.append(
            f"fp8 ({step.fp8_recipe} scaling): the linear layers' GEMMs at the fp8 ceiling, attention and the LM "
            "head at 16 bits, quantization as memory traffic (fp8_cast)"
        )
    if step is not None and step.attention_flops_share > 0.1:
        from ..estimate.flops import flops_per_token

        full = flops_per_token(model, job.seq_len).step_flops(job.method) / compute.flops_per_token
        notes.append(
            f"MFU is computed counting attention as executed by causal kernels (half the scores, as "
            f"FlashAttention counts them): attention is {step.attention_flops_share:.0%} of the model FLOPs "
            f"here; without causal halving, as PaLM appendix B and most published MFUs count it, MFU "
            f"would read {t.mfu * full:.1%}"
        )
    return TrainingPlan(
        compute, step, t, source, layout, usd_per_gpu_hour, offer, seed_rule_constant(peak, mfu), rule, tuple(notes)
    )


def _layout_for_deadline(
    model, gpu, layout, job, total_flops, deadline_s, peak, mfu, offer, a, virtual_stages, memory=None
):
    """The smallest data-parallel degree that meets the deadline: a multiple of whole instances, and a
    divisor of --global-batch / --micro-batch when a global batch is given. MFU falls as data parallelism
    grows, so each candidate is checked with its own predicted MFU."""
    from ..estimate.memory import _divisors

    group = layout.tp * layout.pp * layout.cp
    # dp a multiple of this, so that ep x etp divides each pipeline stage's tp x cp x dp GPUs
    fold = layout.ep * layout.expert_tp // math.gcd(layout.ep * layout.expert_tp, layout.tp * layout.cp)
    max_dp = MAX_GPUS // group
    per_instance = offer.gpu_count if offer else 1
    if job.global_batch is not None:
        if job.global_batch % job.micro_batch:
            raise JobError(f"--global-batch {job.global_batch} is not divisible by --micro-batch {job.micro_batch}")
        candidates = [d for d in _divisors(job.global_batch // job.micro_batch) if d <= max_dp]
    else:
        candidates = None
    dp = 1
    for _ in range(256):
        if candidates is not None:
            fitting = [d for d in candidates if d >= dp and (d * group) % per_instance == 0 and d % fold == 0]
            if not fitting:
                raise JobError(
                    f"the deadline needs data parallelism >= {dp}, but --global-batch {job.global_batch} / "
                    f"--micro-batch {job.micro_batch} allows no such degree in whole instances; raise "
                    "--global-batch, or give more time"
                )
            dp = fitting[0]
        else:
            step = math.lcm(fold, per_instance // math.gcd(per_instance, group))  # dp in whole instances and folds
            dp = math.ceil(dp / step) * step
        if dp > max_dp:
            raise JobError(
                f"the deadline needs more than {MAX_GPUS:,} GPUs (data parallelism {dp} x {group}); "
                "give more time or train on fewer tokens"
            )
        trial = replace(layout, gpus=dp * group)
        m = mfu if mfu is not None else predict_mfu(model, gpu, trial, job, a, virtual_stages, memory=memory)[0]
        need = gpus_for_deadline(total_flops, deadline_s, peak, m)
        if need <= trial.gpus:
            return trial
        dp = max(dp + 1, math.ceil(need / group))
    raise JobError("no GPU count meets the deadline (the search did not converge); give more time")


@dataclass(frozen=True)
class RankedOffer:
    offer: Offer
    gpu: Accelerator
    plan: TrainingPlan | None
    fits: bool
    reason: str


def rank_offers(
    model,
    offers: Iterable[Offer],
    accelerators,
    layout: Parallelism,
    job: TrainingJob,
    tokens: float,
    epochs: float = 1.0,
    *,
    mfu: float | None = None,
    deadline_s: float | None = None,
    memory_assumptions: MemoryAssumptions = MemoryAssumptions(),
    step_assumptions: StepAssumptions = StepAssumptions(),
    virtual_stages: int = 1,
) -> list[RankedOffer]:
    """Every offer that can run the job on ``layout`` (GPU count rounded to whole instances), by cost;
    those whose GPU cannot hold it come last with the reason.

    Offers of the same GPU, GPU count, scale-out network and scale-up link get the same plan but for the price
    (the plan reads nothing else of the offer: no rounding note can arise, the count is already whole
    instances), so it is worked out once per (GPU, count, network, link) and re-priced for each offer: 100,000
    offers rank in about a second."""
    out: list[RankedOffer] = []
    gpus_of: dict[str, Accelerator] = {}
    done: dict[tuple, tuple[TrainingPlan | None, str]] = {}  # (gpu, count, network, link) -> (plan, reason)
    for offer in offers:
        gpu = gpus_of.get(offer.gpu)
        if gpu is None:
            gpu = gpus_of[offer.gpu] = accelerators.get(offer.gpu)
        key = (
            gpu.id,
            offer.gpu_count,
            offer.scale_out_bytes_per_s,
            offer.scale_up_bytes_per_s_per_gpu,
            offer.scale_up_domain_gpus,
        )
        if key not in done:
            done[key] = _plan_for_offer(
                model,
                gpu,
                offer,
                layout,
                job,
                tokens,
                epochs,
                mfu,
                deadline_s,
                memory_assumptions,
                step_assumptions,
                virtual_stages,
            )
        plan, reason = done[key]
        if plan is None:
            out.append(RankedOffer(offer, gpu, None, False, reason))
        else:
            if plan.offer is not offer:  # the same plan at this offer's price (a shallow copy: replace() is slow)
                priced = object.__new__(TrainingPlan)
                priced.__dict__.update(plan.__dict__, offer=offer, usd_per_gpu_hour=offer.usd_per_gpu_hour)
                plan = priced
            out.append(RankedOffer(offer, gpu, plan, True, ""))
    out.sort(key=lambda r: (not r.fits, r.plan.usd if r.plan and r.plan.usd is not None else math.inf))
    return out


def _plan_for_offer(
    model,
    gpu: Accelerator,
    offer: Offer,
    layout: Parallelism,
    job: TrainingJob,
    tokens: float,
    epochs: float,
    mfu: float | None,
    deadline_s: float | None,
    memory_assumptions: MemoryAssumptions,
    step_assumptions: StepAssumptions,
    virtual_stages: int,
) -> tuple[TrainingPlan | None, str]:
    """The plan of one offer on ``layout`` rounded to whole instances, or None and why it cannot run."""
    unit = math.lcm(layout.tp * layout.pp * layout.cp, offer.gpu_count)  # whole instances and groups
    gpus = math.ceil(layout.gpus / unit) * unit
    try:
        lay = replace(layout, gpus=gpus)
        mem = training_memory(model, gpu, lay, job, memory_assumptions, find_max_batch=False)
        if not mem.fits:
            return None, mem.reasons[0]
        return plan_training(
            model,
            gpu,
            lay,
            job,
            tokens,
            epochs,
            mfu=mfu,
            deadline_s=deadline_s,
            offer=offer,
            memory_assumptions=memory_assumptions,
            step_assumptions=step_assumptions,
            virtual_stages=virtual_stages,
        ), ""
    except GpuplanError as e:
        return None, str(e)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both (time, cost), lower being better: sorted by
    time (then cost), a point is on the front when it is cheaper than every faster one, or equal to a
    front point. O(n log n)."""
    front, best_cost, last = [], math.inf, None
    for i in sorted(range(len(points)), key=lambda k: points[k]):
        if points[i][1] < best_cost or points[i] == last:  # exact ties of a front point are on it too
            front.append(i)
            best_cost, last = points[i][1], points[i]
    return sorted(front)
