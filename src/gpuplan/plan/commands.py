"""What each gpuplan command does, as library calls on parsed, typed inputs; each returns a report.

:mod:`gpuplan.api` reads the user's loose values (``"1T"``, ``"$2.5/h"``, ``{"name": value}``) into the
typed inputs taken here; the CLI and the web page call the API. Nothing here prints or exits: options that
cannot go together raise :class:`~gpuplan.errors.InputError` naming the flag, and "does not fit" is a result
(``report.fits``, ``report.exit_code``), never an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..catalog.session import Catalogs
from ..errors import InputError, JobError
from ..spec.choices import GpuSort, OfferSort
from . import reports

# ----------------------------------------------------------------------------------------------- catalogs

_GPU_SORT_KEYS: dict[str, Callable[[Any], Any]] = {
    GpuSort.ID: lambda a: a.id,
    GpuSort.NAME: lambda a: a.name.lower(),
    GpuSort.VENDOR: lambda a: (a.vendor, a.id),
    GpuSort.MEMORY: lambda a: -a.memory_bytes,
    GpuSort.BANDWIDTH: lambda a: -a.memory_bandwidth_bytes_per_s,
    GpuSort.BF16: lambda a: -(a.peak("bf16") or 0.0),
    GpuSort.FP8: lambda a: -(a.peak("fp8") or 0.0),
    GpuSort.FP4: lambda a: -(a.peak("fp4") or 0.0),
    GpuSort.FP32: lambda a: -(a.peak("fp32") or 0.0),
    GpuSort.TDP: lambda a: -(a.tdp_w or 0.0),
    GpuSort.YEAR: lambda a: (-a.year, a.id),
}

_OFFER_SORT_KEYS: dict[str, Callable[[Any], Any]] = {
    OfferSort.GPU_HOUR: lambda o: o.usd_per_gpu_hour,
    OfferSort.HOUR: lambda o: o.usd_per_hour,
    OfferSort.PROVIDER: lambda o: (o.provider, o.instance),
    OfferSort.GPU: lambda o: (o.gpu, o.usd_per_gpu_hour),
}


def gpus(
    cat: Catalogs, *, vendor: str | None, min_memory_bytes: float | None, dtype: str | None, sort: str
) -> reports.GpusReport:
    """Accelerators, filtered by vendor, memory and dtype support, then sorted."""
    from ..spec.accelerator import DTYPES

    accs = list(cat.accelerators())
    if vendor:
        vendors = sorted({a.vendor for a in accs})
        if vendor.lower() not in vendors:
            raise InputError("--vendor", f"unknown vendor '{vendor}'; choose from {', '.join(vendors)}")
        accs = [a for a in accs if a.vendor == vendor.lower()]
    if min_memory_bytes is not None:
        # the memory a model can be given: a unified-memory Mac's GPU share, not its RAM (Accelerator.gpu_memory_bytes)
        accs = [a for a in accs if a.gpu_memory_bytes >= min_memory_bytes]
    if dtype:
        if dtype.lower() not in DTYPES:
            raise InputError("--dtype", f"unknown dtype '{dtype}'; choose from {', '.join(DTYPES)}")
        accs = [a for a in accs if a.supports(dtype.lower())]
    accs.sort(key=_GPU_SORT_KEYS[sort])
    return reports.GpusReport(tuple(accs), warnings=tuple(cat.warnings))


def offers(
    cat: Catalogs, *, gpu: str | None, provider: str | None, pricing: str | None, sort: str
) -> reports.OffersReport:
    """Offers, filtered by accelerator, provider and pricing, then sorted (cheapest GPU-hour first)."""
    rows = list(cat.offers())
    if gpu:
        gid = cat.accelerators().get(gpu).id
        rows = [o for o in rows if o.gpu == gid]
    if provider:
        providers = sorted({o.provider for o in rows})
        if provider.lower() not in providers:
            raise InputError("--provider", f"no offers from '{provider}'; providers: {', '.join(providers)}")
        rows = [o for o in rows if o.provider == provider.lower()]
    if pricing:
        rows = [o for o in rows if o.pricing == pricing]
    return reports.OffersReport(tuple(sorted(rows, key=_OFFER_SORT_KEYS[sort])), warnings=tuple(cat.warnings))


def models(cat: Catalogs, *, family: str | None) -> reports.ModelsReport:
    """The built-in models (and the user's), optionally of one family."""
    found = list(cat.models())
    if family:
        families = sorted({m.family for m in found})
        chosen = [m for m in found if m.family.lower() == family.lower()]
        if not chosen:
            raise InputError("--family", f"unknown family '{family}'; choose from {', '.join(families)}")
        found = chosen
    return reports.ModelsReport(tuple(found), warnings=tuple(cat.warnings))


# -------------------------------------------------------------------------------------------- assumptions


def parse_assumptions(items: dict[str, Any], base: Any) -> Any:
    """``{"name": value}`` onto an assumptions dataclass; a value may be a number or text (sizes with units:
    ``"1GiB"``). The dataclass checks each range on construction (one line, exit 2)."""
    from ..units import parse_bytes

    names = {f.name: f for f in fields(base)}
    changes: dict[str, Any] = {}
    for name, value in items.items():
        if name not in names:
            raise InputError("--assume", f"'{name}={value}': use NAME=VALUE with NAME one of {', '.join(names)}")
        # a whole-number field: its value is an int, or it is declared ``int | None`` (None: derived per call)
        default = getattr(base, name)
        declared_int = default is None and str(names[name].type).replace(" ", "").startswith("int|")
        whole = (isinstance(default, int) or declared_int) and not name.endswith("_bytes")
        try:
            if name.endswith("_bytes") and isinstance(value, str):
                changes[name] = parse_bytes(value, name)
            elif isinstance(value, bool):
                raise ValueError
            elif whole:
                changes[name] = int(value) if isinstance(value, (int, str)) else _whole_float(value)
            else:
                changes[name] = float(value)
        except (ValueError, OverflowError, TypeError):
            kind = "a whole number" if whole else "a number"
            raise InputError("--assume", f"'{name}={value}': {value!r} is not {kind}") from None
    return replace(base, **changes)


def _whole_float(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(value)


def split_assumptions(assume: dict[str, Any], *groups: frozenset[str]) -> list[dict[str, Any]]:
    """``assume`` split by the names each group knows (a name two sets share, such as the fp4 recipe's bf16 tail
    that both memory and step time read, goes to both); the last list gets the names no group claimed."""
    out: list[dict[str, Any]] = [{} for _ in range(len(groups) + 1)]
    for name, value in assume.items():
        claimed = [k for k, g in enumerate(groups) if name in g] or [len(groups)]
        for i in claimed:
            out[i][name] = value
    return out


def train_assumptions(assume: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``--assume`` of a training command as its memory, machine and step-time assumption sets (a name two sets
    share goes to both; a name none knows is refused with the step set's list)."""
    from ..estimate.machine import MachineAssumptions
    from ..estimate.memory import MemoryAssumptions
    from ..estimate.steptime import StepAssumptions

    mem_items, machine_items, step_known, unknown = split_assumptions(
        assume,
        frozenset(MemoryAssumptions.SOURCES),
        frozenset(MachineAssumptions.SOURCES),
        frozenset(StepAssumptions.SOURCES),
    )
    return (
        parse_assumptions(mem_items, MemoryAssumptions()),
        parse_assumptions(machine_items, MachineAssumptions()),
        parse_assumptions({**step_known, **unknown}, StepAssumptions()),
    )


# ------------------------------------------------------------------------------------------------- train


@dataclass(frozen=True)
class TrainRequest:
    """A ``train`` call, parsed: the model and GPU names, the layout (a Parallelism), the TrainingJob's
    fields (``seq_len`` None: 4096 capped at the model's context), the numbers."""

    model: str
    gpu: str
    layout: Any
    job: dict[str, Any]
    assume: dict[str, Any] = field(default_factory=dict)
    tokens: float | None = None
    epochs: float = 1.0
    mfu: float | None = None
    deadline_s: float | None = None
    offer: str | None = None
    usd_per_gpu_hour: float | None = None
    virtual_stages: int = 1
    calibration: Path | None = None
    rank: bool = False
    machine: Any = None  # MachineOptions
    offline: bool = False
    like: str | None = None


def train(cat: Catalogs, req: TrainRequest) -> reports.TrainReport | reports.TrainRankReport:
    """Memory, and with tokens the time, cost and machine of one training run (or the ranking of offers)."""
    from ..catalog import resolve_model
    from ..catalog.hub import hub_fetcher
    from ..estimate.memory import MemoryAssumptions, training_memory
    from ..estimate.params import count_params
    from ..estimate.rules import inference_rule, training_rule
    from ..spec.model import ModelSpec
    from .machine import MachineOptions, train_machine

    memory_names = frozenset(MemoryAssumptions.SOURCES)
    memory_assumptions, machine_assumptions, step_assumptions = train_assumptions(req.assume)
    needs_tokens = (
        req.deadline_s is not None
        or req.rank
        or req.mfu is not None
        or req.offer
        or req.usd_per_gpu_hour is not None
        or req.calibration
    )
    if needs_tokens and req.tokens is None:
        raise InputError(
            "--tokens", "--deadline, --rank, --mfu, --offer, --usd-per-gpu-hour, --plot and --calibration need --tokens"
        )
    if req.offer and req.usd_per_gpu_hour is not None:
        raise InputError("--offer", "give --offer or --usd-per-gpu-hour, not both")
    if req.rank and req.calibration:
        raise InputError("--calibration", "a calibration profile describes one GPU; --rank compares many")
    from ..spec.training import TrainingJob
    from .records import default_seq_len

    # interleaved stages hold more micro-batches' activations (estimate.memory): the layout carries them
    layout = replace(req.layout, virtual_stages=req.virtual_stages)
    model = resolve_model(req.model, cat.models(), fetch=hub_fetcher(req.offline), like=req.like)
    seq_len = req.job.get("seq_len")
    job = TrainingJob(**{**req.job, "seq_len": seq_len if seq_len is not None else default_seq_len(model)})
    job.check_stack()
    accelerator = cat.accelerators().get(req.gpu)
    if accelerator.vendor == "google":
        # a TPU runs neither bitsandbytes' CUDA kernels nor DeepSpeed's CPU-Adam, whatever --stack says
        if job.bitsandbytes_flag is not None:
            raise JobError(
                f"{job.bitsandbytes_flag} runs bitsandbytes' CUDA kernels, which a TPU lacks: drop it or pick a GPU"
            )
        if layout.offload in ("optimizer", "params"):
            raise JobError(
                f"--offload {layout.offload} is DeepSpeed's ZeRO-Offload (CPU-Adam beside a GPU); TPU training does "
                "not run it: drop --offload or pick a GPU"
            )
    plan = calibrated = None
    if req.tokens is not None:
        from .training import plan_training, rank_offers

        if req.rank:
            ranked = rank_offers(
                model,
                list(cat.offers()),
                cat.accelerators(),
                layout,
                job,
                req.tokens,
                req.epochs,
                mfu=req.mfu,
                deadline_s=req.deadline_s,
                memory_assumptions=memory_assumptions,
                step_assumptions=step_assumptions,
                virtual_stages=req.virtual_stages,
            )
            return reports.TrainRankReport(
                model, layout, job, req.tokens, req.epochs, tuple(ranked), warnings=tuple(cat.warnings)
            )
        if req.calibration:
            from ..local.calibration import apply_to_step, read_profile

            calibrated = apply_to_step(
                read_profile(req.calibration),
                step_assumptions,
                accelerator,
                file=str(req.calibration),
                precision=job.precision,
                model_id=model.id,
                explicit=set(req.assume) - memory_names,
            )
            step_assumptions = calibrated.assumptions
        offer = cat.offers().get(req.offer) if req.offer else None
        if offer is not None and offer.gpu != accelerator.id:
            raise InputError("--offer", f"offer '{offer.id}' is {offer.gpu_count} x {offer.gpu}, not {accelerator.id}")
        plan = plan_training(
            model,
            accelerator,
            layout,
            job,
            req.tokens,
            req.epochs,
            mfu=req.mfu,
            deadline_s=req.deadline_s,
            usd_per_gpu_hour=req.usd_per_gpu_hour,
            offer=offer,
            step_assumptions=step_assumptions,
            virtual_stages=req.virtual_stages,
            memory_assumptions=memory_assumptions,
        )
        layout = plan.layout
    memory = training_memory(model, accelerator, layout, job, memory_assumptions)
    params = count_params(model).total if isinstance(model, ModelSpec) else model.params
    rule = (training_rule if job.method == "full" else inference_rule)(params, accelerator.usable_memory_bytes)
    machine = train_machine(
        model,
        accelerator,
        layout,
        job,
        memory,
        plan,
        step_assumptions=step_assumptions,
        options=req.machine or MachineOptions(),
        assumptions=machine_assumptions,
    )
    advice = None
    if not memory.fits:
        from .advice import training_fit_advice

        advice = training_fit_advice(model, accelerator, layout, job, memory_assumptions)
    return reports.TrainReport(
        model,
        accelerator,
        layout,
        job,
        memory,
        rule,
        machine,
        plan=plan,
        step_assumptions=step_assumptions if plan is not None else None,
        calibration=calibrated,
        fit_advice=advice,
        warnings=tuple(cat.warnings),
    )


# ------------------------------------------------------------------------------------------------- serve

#: The assumption names the machine report of ``serve`` reads (the rest belong to the inference model).
_SERVE_MACHINE_NAMES = frozenset({"pcie_efficiency", "host_ram_per_gpu_memory"})


@dataclass(frozen=True)
class ServeRequest:
    """A ``serve`` call, parsed."""

    model: str
    gpu: str
    layout: Any
    job: Any
    assume: dict[str, Any] = field(default_factory=dict)
    qps: float | None = None
    usd_per_gpu_hour: float | None = None
    offer: str | None = None
    calibration: Path | None = None
    storage: str = "object"
    rank: bool = False
    offline: bool = False
    like: str | None = None


def serve(cat: Catalogs, req: ServeRequest) -> reports.ServeReport | reports.ServeRankReport:
    """Memory, latency, throughput, fleet and cost of one deployment (or the ranking of GPU x format)."""
    from ..catalog import resolve_model
    from ..catalog.hub import hub_fetcher
    from ..estimate.inference import assumptions_for, cost_per_million, fleet_for, serving_plan
    from ..estimate.machine import MachineAssumptions
    from ..estimate.params import count_params
    from ..estimate.rules import inference_rule
    from ..spec.model import ModelSpec
    from .machine import serve_machine

    job, layout = req.job, req.layout
    machine_items, inference_items = split_assumptions(req.assume, _SERVE_MACHINE_NAMES)
    machine_assumptions = parse_assumptions(machine_items, MachineAssumptions())
    assumptions = parse_assumptions(inference_items, assumptions_for(job)) if inference_items else None
    model = resolve_model(req.model, cat.models(), fetch=hub_fetcher(req.offline), like=req.like)
    if req.rank and req.calibration:
        raise InputError("--calibration", "a calibration profile describes one GPU; --rank compares many")
    if req.rank:
        if req.offer or req.usd_per_gpu_hour is not None:
            raise InputError(
                "--offer" if req.offer else "--usd-per-gpu-hour",
                "--rank prices each GPU with its own cheapest on-demand offer; leave out --offer and "
                "--usd-per-gpu-hour",
            )
        if not isinstance(model, ModelSpec):
            raise InputError("MODEL", "--rank needs the architecture; give a model id or config.json")
        return serve_rank(cat, model, req.gpu, job, req.qps, assumptions)
    accelerator = cat.accelerators().get(req.gpu)
    calibrated = None
    if req.calibration:
        from ..local.calibration import apply_to_inference, read_profile

        calibrated = apply_to_inference(
            read_profile(req.calibration),
            assumptions or assumptions_for(job),
            accelerator,
            file=str(req.calibration),
            weights=job.weights,
            model_id=model.id,
            explicit=set(inference_items),
        )
        assumptions = calibrated.assumptions
    if not isinstance(model, ModelSpec):  # serving_plan says the same; checked here so the type is known below
        from ..errors import JobError

        raise JobError("serving estimates need the architecture (KV cache, attention); give a model id or config.json")
    if req.offer and req.usd_per_gpu_hour is not None:  # before the estimate, not after it
        raise InputError("--offer", "give --offer or --usd-per-gpu-hour, not both")
    serving = serving_plan(model, accelerator, layout, job, assumptions, qps=req.qps)
    fleet = fleet_for(serving, layout, job, req.qps if serving.fits else None)
    cost = offer = None
    priced = bool(req.offer or req.usd_per_gpu_hour is not None)
    if serving.fits and req.offer:
        offer = cat.offers().get(req.offer)
        if offer.gpu != accelerator.id:
            raise InputError("--offer", f"offer '{offer.id}' is {offer.gpu_count} x {offer.gpu}, not {accelerator.id}")
        cost = cost_per_million(serving, layout, job, offer.usd_per_gpu_hour) | {"offer": offer.to_dict()}
    elif serving.fits and req.usd_per_gpu_hour is not None:
        cost = cost_per_million(serving, layout, job, req.usd_per_gpu_hour)
    rule = inference_rule(count_params(model).total, accelerator.usable_memory_bytes)
    notes: tuple[str, ...] = ()
    if not serving.fits and (req.qps or priced):
        notes = ("no fleet or cost: one replica does not fit",)
    machine = serve_machine(
        accelerator,
        layout,
        serving,
        storage=req.storage,
        assumptions=machine_assumptions,
        qps=req.qps if serving.fits else None,
        offer=offer,
    )
    advice = None
    if not serving.fits:
        from .advice import serving_fit_advice

        advice = serving_fit_advice(model, accelerator, layout, job, assumptions)
    return reports.ServeReport(
        model,
        accelerator,
        layout,
        job,
        serving,
        fleet,
        rule,
        machine,
        cost=cost,
        qps=req.qps if serving.fits else None,
        calibration=calibrated,
        fit_advice=advice,
        notes=notes,
        warnings=tuple(cat.warnings),
    )


def serve_rank(
    cat: Catalogs, model: Any, gpu: str, job: Any, qps: float | None, assumptions: Any
) -> reports.ServeRankReport:
    """``serve --rank``: a view of the ``plan serve`` search (:func:`~gpuplan.plan.search.search_serve`), each GPU's
    best option (weights, KV cache, tp, engine, replicas, batch) at ``qps`` under the job's targets, ranked as
    ``plan serve`` ranks; on-demand offers only. The job's engine narrows the search to it, except the default
    ``server``, which searches the server engines ``plan serve`` searches (vLLM, SGLang, TensorRT-LLM)."""
    from ..spec.choices import Engine
    from .search import SERVE_ENGINES, search_serve

    registry = cat.accelerators()
    gpus = list(registry) if gpu == "all" else [registry.get(g.strip()) for g in gpu.split(",")]
    gpus = list({g.id: g for g in gpus}.values())  # a GPU named twice (an alias and its id) is searched once
    engines = SERVE_ENGINES if job.engine == Engine.SERVER else (job.engine,)
    search = search_serve(
        model, gpus, list(cat.offers()), job, qps, engines=engines, assumptions=assumptions, top=0, per_gpu=True
    )
    return reports.ServeRankReport(model, job, search, warnings=tuple(cat.warnings))


# --------------------------------------------------------------------------------------------------- tco


def tco(
    cat: Catalogs,
    *,
    gpu: str,
    gpus: int,
    years: float | None,
    life_years: float | None,
    utilization: float,
    purchase_usd_per_gpu: float | None,
    server_usd_per_gpu: float | None,
    pue: float | None,
    usd_per_kwh: float | None,
    hosting_usd_per_kw_month: float | None,
    staff_usd_per_gpu_year: float,
    cost_of_capital: float | None,
) -> reports.TcoReport:
    """Owning ``gpus`` GPUs against every rental offer of the same GPU (``None``: the data file's default)."""
    from ..catalog.ownership import load_ownership
    from ..estimate.tco import ownership_cost
    from .owned import ownership_case

    accelerator = cat.accelerators().get(gpu)
    data = load_ownership()
    case, row = ownership_case(
        accelerator,
        data,
        utilization=utilization,
        purchase_usd_per_gpu=purchase_usd_per_gpu,
        server_usd_per_gpu=server_usd_per_gpu,
        pue=pue,
        usd_per_kwh=usd_per_kwh,
        hosting_usd_per_kw_month=hosting_usd_per_kw_month,
        staff_usd_per_gpu_year=staff_usd_per_gpu_year,
        life_years=life_years,
        cost_of_capital=cost_of_capital,
    )
    cost = ownership_cost(case)
    rentals = sorted((o for o in cat.offers() if o.gpu == accelerator.id), key=lambda o: o.usd_per_gpu_hour)
    period = years if years is not None else case.years
    if period <= 0:
        raise InputError("--years", "must be more than zero")
    return reports.TcoReport(
        accelerator, gpus, case, cost, tuple(rentals), row, data, period, warnings=tuple(cat.warnings)
    )


def model_show(
    cat: Catalogs, model: str, *, seq_len: int | None, offline: bool, like: str | None = None
) -> reports.ModelReport:
    """One model, resolved from an id, a config.json, a Hub id or a bare count."""
    from ..catalog import resolve_model
    from ..catalog.hub import hub_fetcher

    spec = resolve_model(model, cat.models(), fetch=hub_fetcher(offline), like=like)
    return reports.ModelReport(spec, seq_len, warnings=tuple(cat.warnings))


def gpus_named(cat: Catalogs, names: Sequence[str]) -> list[Any]:
    reg = cat.accelerators()
    return [reg.get(n) for n in names]
