"""The public Python API: one function per command, keyword names equal to the CLI's flags (underscores
for dashes), each returning a typed report whose ``to_dict()`` is exactly the command's ``--json``.

>>> import gpuplan
>>> r = gpuplan.train("llama-3.1-8b", gpu="h100", gpus=8, zero=3, recompute="full")
>>> r.fits, r.to_dict()["kind"]
(True, 'train')

Values may be numbers or the text the CLI takes (``tokens="1T"`` or ``tokens=1e12``, ``deadline="30d"``,
``usd_per_gpu_hour="$2.5/h"``); ``assume`` is a dict ``{"name": value}``; ``catalog`` adds catalog files
(or shares a :class:`~gpuplan.catalog.session.Catalogs` between calls). Bad input raises a
:class:`~gpuplan.errors.GpuplanError` whose message is the CLI's error line. Heavy modules load on the first
call, so ``import gpuplan`` stays cheap.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .spec import choices as C
from .units import BOUNDS, nonblank

if TYPE_CHECKING:
    from .catalog.session import Catalogs
    from .plan import reports

Number = int | float | str
T = TypeVar("T")


def _catalogs(catalog: Any) -> Catalogs:
    from .catalog.session import Catalogs

    if isinstance(catalog, Catalogs):
        return catalog
    if isinstance(catalog, (str, os.PathLike)):
        return Catalogs((catalog,))
    return Catalogs(catalog or ())


def _modules(value: Any) -> tuple[str, ...] | None:
    """``recompute_modules`` as a tuple of names (a comma list or an iterable), None when not given; anything else
    is handed on for TrainingJob to refuse with its one line."""
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(m.strip() for m in value.split(",") if m.strip())
    if isinstance(value, Iterable):
        return tuple(value)
    return value


def _num(name: str, value: Any) -> Any:
    """A numeric keyword read through its bound (None stays None: "derive it")."""
    return None if value is None else BOUNDS[name].read(value, "--" + name.replace("_", "-"))


def _text(name: str, value: T) -> T:
    """A quantity given as text must not be blank (the CLI's flags check the same, see units.nonblank)."""
    return nonblank(value, "--" + name.replace("_", "-"))


def _assume(assume: Mapping[str, Any] | None) -> dict[str, Any]:
    from .errors import InputError

    if assume is None:
        return {}
    if not isinstance(assume, Mapping):
        raise InputError("--assume", "give a mapping of assumption names to values, e.g. {'mfu': 0.4}")
    return dict(assume)


# ---------------------------------------------------------------------------------------------- catalogs


def gpus(
    *,
    vendor: str | None = None,
    min_memory: Number | None = None,
    dtype: str | None = None,
    sort: str = C.GpuSort.VENDOR,
    catalog: Any = (),
) -> reports.GpusReport:
    """``gpuplan gpus list``: accelerators filtered by vendor, memory (``"80GB"``) and dtype, sorted."""
    from .plan import commands
    from .units import parse_bytes

    floor = parse_bytes(_text("min_memory", min_memory), "--min-memory") if min_memory is not None else None
    return commands.gpus(
        _catalogs(catalog), vendor=vendor, min_memory_bytes=floor, dtype=dtype, sort=C.check(C.GpuSort, sort, "--sort")
    )


def gpu(gpu: str, *, catalog: Any = ()) -> reports.GpuReport:
    """``gpuplan gpus show GPU``: one accelerator, every figure with its source and date."""
    from .plan import reports

    cat = _catalogs(catalog)
    return reports.GpuReport(cat.accelerators().get(gpu), warnings=tuple(cat.warnings))


def compare_gpus(gpus: Iterable[str], *, catalog: Any = ()) -> reports.GpusReport:
    """``gpuplan gpus compare GPU...``: accelerators side by side."""
    from .plan import commands, reports

    cat = _catalogs(catalog)
    return reports.GpusReport(tuple(commands.gpus_named(cat, list(gpus))), compare=True, warnings=tuple(cat.warnings))


def offers(
    *,
    gpu: str | None = None,
    provider: str | None = None,
    pricing: str | None = None,
    sort: str = C.OfferSort.GPU_HOUR,
    catalog: Any = (),
) -> reports.OffersReport:
    """``gpuplan offers list``: cloud offers, filtered, cheapest GPU-hour first."""
    from .plan import commands

    return commands.offers(
        _catalogs(catalog),
        gpu=gpu,
        provider=provider,
        pricing=C.check(C.Pricing, pricing, "--pricing") if pricing is not None else None,
        sort=C.check(C.OfferSort, sort, "--sort"),
    )


def models(*, family: str | None = None, catalog: Any = ()) -> reports.ModelsReport:
    """``gpuplan model list``: the built-in models (and the user's)."""
    from .plan import commands

    return commands.models(_catalogs(catalog), family=family)


def model(
    model: str, *, seq_len: int | None = None, offline: bool = False, like: str | None = None, catalog: Any = ()
) -> reports.ModelReport:
    """``gpuplan model show MODEL``: a catalog id, a config.json (or its folder), a Hub id or a count (``7B``).

    ``like``: read a config whose model_type gpuplan does not know as this one (``like="llama"``)."""
    from .plan import commands

    return commands.model_show(_catalogs(catalog), model, seq_len=_num("seq_len", seq_len), offline=offline, like=like)


# ------------------------------------------------------------------------------------------------- train


def train(
    model: str,
    *,
    gpu: str,
    gpus: int | None = None,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    ep: int = 1,
    etp: int | None = None,
    sequence_parallel: bool = False,
    zero: int = 0,
    fsdp: bool = False,
    offload: str = C.Offload.NONE,
    micro_batch: int = 1,
    global_batch: int | None = None,
    seq_len: int | None = None,
    recompute: str = C.Recompute.NONE,
    recompute_layers: int | None = None,
    recompute_modules: str | Iterable[str] | None = None,
    offload_layers: int | None = None,
    flash_attention: bool = True,
    dropout: bool = False,
    precision: str = C.Precision.BF16_MIXED,
    recipe: str = C.Recipe.AUTO,
    stack: str = C.Stack.AUTO,
    fp8_recipe: str = C.Fp8Recipe.AUTO,
    compile: bool = False,
    overlap_grad_reduce: bool | None = None,
    overlap_param_gather: bool | None = None,
    tp_comm_overlap: bool = False,
    cross_entropy_fusion: bool | None = None,
    ep_comm_overlap: bool = False,
    moe_dispatch_dtype: str = "bf16",
    moe_dispatcher: str = C.MoeDispatcher.ALLTOALL,
    attention_kernel: str = C.AttentionKernel.AUTO,
    main_grads: str | None = None,
    fp8_params: bool = False,
    optimizer_dtype: str | None = None,
    optimizer: str = C.Optimizer.ADAMW,
    method: str = C.Method.FULL,
    lora_rank: int = 16,
    lora_targets: str | Iterable[str] = "q_proj,k_proj,v_proj,o_proj",
    quant: str | None = None,
    assume: Mapping[str, Any] | None = None,
    tokens: Number | None = None,
    epochs: float = 1.0,
    mfu: float | None = None,
    deadline: Number | None = None,
    offer: str | None = None,
    usd_per_gpu_hour: Number | None = None,
    virtual_stages: int = 1,
    pipeline_schedule: str | None = None,
    distributed_optimizer: bool = False,
    calibration: str | os.PathLike[str] | None = None,
    rank: bool = False,
    bytes_per_token: Number | None = None,
    bytes_per_sample: Number | None = None,
    storage: str = C.TRAIN_STORAGE_DEFAULT,
    storage_write: Number | None = None,
    async_checkpoint: bool = False,
    mtbf_per_gpu_hours: Number | None = None,
    grid_gco2_per_kwh: Number | None = None,
    offline: bool = False,
    like: str | None = None,
    catalog: Any = (),
) -> reports.TrainReport | reports.TrainRankReport:
    """``gpuplan train MODEL``: memory per GPU, itemized; with ``tokens`` the FLOPs, step time, MFU, time,
    GPU-hours, cost and the whole machine; ``deadline`` picks the GPU count; ``rank=True`` compares offers."""
    from pathlib import Path

    from .errors import InputError
    from .plan import commands
    from .plan.machine import MachineOptions
    from .spec.training import Parallelism, megatron_2021_conflict, stack_conflict
    from .units import parse_duration, parse_tokens, parse_usd_per_hour

    tp, pp, cp, ep, etp = (_num(n, v) for n, v in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("etp", etp)))
    gpus, zero, virtual_stages = _num("gpus", gpus), _num("zero", zero), _num("virtual_stages", virtual_stages)
    from .errors import JobError

    if pipeline_schedule is not None:
        # Megatron-LM's names for what --virtual-stages already says: interleaved 1F1B needs chunks, 1F1B has one
        schedule = C.check(C.PipelineSchedule, pipeline_schedule, "--pipeline-schedule")
        if schedule == "interleaved" and virtual_stages < 2:
            raise JobError("--pipeline-schedule interleaved needs --virtual-stages N (2 or more model chunks per GPU)")
        if schedule == "1f1b" and virtual_stages != 1:
            raise JobError(f"--pipeline-schedule 1f1b runs one chunk per GPU; drop --virtual-stages {virtual_stages}")
    if distributed_optimizer:
        # Megatron-LM --use-distributed-optimizer shards the optimizer states over data parallelism: ZeRO-1
        if zero not in (0, 1):
            raise JobError(f"--distributed-optimizer is --zero 1 (optimizer states sharded); got --zero {zero}")
        zero = 1
    mfu, epochs = _num("mfu", mfu), _num("epochs", epochs)
    machine = MachineOptions.from_flags(
        C.check(C.Storage, storage, "--storage"),
        _text("storage_write", storage_write),
        _text("bytes_per_token", bytes_per_token),
        async_checkpoint,
        _text("mtbf_per_gpu_hours", mtbf_per_gpu_hours),
        _text("grid_gco2_per_kwh", grid_gco2_per_kwh),
        bytes_per_sample=_text("bytes_per_sample", bytes_per_sample),
    )
    if deadline is not None and gpus is not None:
        raise InputError("--deadline", "give --gpus or --deadline (which picks the GPU count), not both")
    if fsdp:
        if zero not in (0, 3):
            raise InputError("--fsdp", "--fsdp is ZeRO-3 sharding; drop --zero or use --zero 3")
        zero = 3
    clash = stack_conflict(stack, fsdp=fsdp, offload=offload)
    if clash:
        raise InputError(*clash)
    conflict = megatron_2021_conflict(
        stack,
        precision=precision,
        tp_comm_overlap=tp_comm_overlap,
        fsdp=fsdp,
        zero=zero,
        cp=cp,
        ep=ep,
        compile=compile,
        cross_entropy_fusion=cross_entropy_fusion,
        ep_comm_overlap=ep_comm_overlap,
        moe_dispatch_dtype=moe_dispatch_dtype,
    )
    if conflict:
        raise InputError("--stack", conflict)
    if ep_comm_overlap and recompute in (C.Recompute.FULL, C.Recompute.PARTIAL):
        # --recompute partial is Megatron's --recompute-granularity full with --recompute-method block, which
        # Megatron-Core refuses beside --overlap-moe-expert-parallel-comm as it refuses full recompute
        raise InputError(
            "--ep-comm-overlap",
            f"--ep-comm-overlap pairs one micro-batch's forward with another's backward, which --recompute {recompute} "
            "re-runs (Megatron-Core refuses the pair): use --recompute selective or per-op",
        )
    layout = Parallelism(
        # unset: the fewest GPUs the layout divides, with ep x etp folded into each pipeline stage
        gpus=gpus if gpus is not None else pp * math.lcm(tp * cp, ep * (tp if etp is None else etp)),
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        etp=etp,
        sequence_parallel=sequence_parallel,
        zero=zero,
        offload=offload,
    )
    targets = lora_targets.split(",") if isinstance(lora_targets, str) else list(lora_targets)
    modules = _modules(recompute_modules)
    job = dict(
        micro_batch=_num("micro_batch", micro_batch),
        seq_len=_num("seq_len", seq_len),
        global_batch=_num("global_batch", global_batch),
        precision=precision,
        recipe=recipe,
        stack=stack,
        fp8_recipe=fp8_recipe,
        compile=compile,
        overlap_grad_reduce=overlap_grad_reduce,
        overlap_param_gather=overlap_param_gather,
        tp_comm_overlap=tp_comm_overlap,
        cross_entropy_fusion=cross_entropy_fusion,
        ep_comm_overlap=ep_comm_overlap,
        moe_dispatch_dtype=moe_dispatch_dtype,
        moe_dispatcher=moe_dispatcher,
        attention_kernel=attention_kernel,
        main_grads=main_grads,
        fp8_params=fp8_params,
        optimizer_dtype=optimizer_dtype,
        optimizer=optimizer,
        method=method,
        lora_rank=_num("lora_rank", lora_rank),
        lora_targets=tuple(t.strip() for t in targets if t.strip()),
        quant=quant,
        recompute=recompute,
        recompute_layers=_num("recompute_layers", recompute_layers),
        recompute_modules=modules,
        offload_layers=_num("offload_layers", offload_layers),
        flash_attention=flash_attention,
        dropout=dropout,
        fsdp=fsdp,
    )
    req = commands.TrainRequest(
        model=model,
        gpu=gpu,
        layout=layout,
        job=job,
        assume=_assume(assume),
        tokens=parse_tokens(_text("tokens", tokens)) if tokens is not None else None,
        epochs=epochs,
        mfu=mfu,
        deadline_s=parse_duration(_text("deadline", deadline), "--deadline") if deadline is not None else None,
        offer=offer,
        usd_per_gpu_hour=parse_usd_per_hour(_text("usd_per_gpu_hour", usd_per_gpu_hour), "--usd-per-gpu-hour")
        if usd_per_gpu_hour is not None
        else None,
        virtual_stages=virtual_stages,
        calibration=Path(calibration) if calibration is not None else None,
        rank=rank,
        machine=machine,
        offline=offline,
        like=like,
    )
    return commands.train(_catalogs(catalog), req)


# ------------------------------------------------------------------------------------------------- serve


def serve(
    model: str,
    *,
    gpu: str,
    tp: int = 1,
    pp: int = 1,
    replicas: int = 1,
    weights: str = C.Weights.BF16,
    kv_cache: str = C.KvCache.BF16,
    prompt_tokens: int = 512,
    output_tokens: int = 256,
    batch: int | None = None,
    concurrency: int | None = None,
    context: int | None = None,
    max_tpot: Number | None = None,
    max_ttft: Number | None = None,
    qps: Number | None = None,
    qpm: Number | None = None,
    usd_per_gpu_hour: Number | None = None,
    offer: str | None = None,
    calibration: str | os.PathLike[str] | None = None,
    engine: str = C.Engine.SERVER,
    assume: Mapping[str, Any] | None = None,
    storage: str = C.SERVE_STORAGE_DEFAULT,
    rank: bool = False,
    offline: bool = False,
    like: str | None = None,
    catalog: Any = (),
) -> reports.ServeReport | reports.ServeRankReport:
    """``gpuplan serve MODEL``: memory, TTFT and TPOT, throughput, the fleet for ``qps`` (or ``qpm``) and
    $ per million tokens; ``rank=True``: each GPU's (``gpu="all"`` or a comma list) best option of the
    ``plan_serve`` search at ``qps`` (weights, KV cache, tp, engine, replicas, batch), cheapest first."""
    from pathlib import Path

    from .errors import InputError
    from .plan import commands
    from .spec.serving import ServingJob, ServingLayout
    from .units import MAX_QPS, MIN_QPS, check_range, parse_count, parse_duration, parse_usd_per_hour

    if qps is not None and qpm is not None:
        raise InputError("--qps", "give --qps or --qpm, not both")
    rate = None
    if qps is not None:
        rate = check_range(
            parse_count(_text("qps", qps), "--qps"), "--qps", MIN_QPS, MAX_QPS, why="requests per second"
        )
    elif qpm is not None:
        rate = (
            check_range(
                parse_count(_text("qpm", qpm), "--qpm"), "--qpm", 60 * MIN_QPS, 60 * MAX_QPS, why="requests per minute"
            )
            / 60
        )
    job = ServingJob(
        weights=weights,
        kv_cache=kv_cache,
        prompt_tokens=_num("prompt_tokens", prompt_tokens),
        output_tokens=_num("output_tokens", output_tokens),
        batch=_num("batch", batch),
        concurrency=_num("concurrency", concurrency),
        context=_num("context", context),
        max_tpot_s=parse_duration(_text("max_tpot", max_tpot), "--max-tpot") if max_tpot is not None else None,
        max_ttft_s=parse_duration(_text("max_ttft", max_ttft), "--max-ttft") if max_ttft is not None else None,
        engine=engine,
    )
    layout = ServingLayout(tp=_num("tp", tp), pp=_num("pp", pp), replicas=_num("replicas", replicas))
    req = commands.ServeRequest(
        model=model,
        gpu=gpu,
        layout=layout,
        job=job,
        assume=_assume(assume),
        qps=rate,
        usd_per_gpu_hour=parse_usd_per_hour(_text("usd_per_gpu_hour", usd_per_gpu_hour), "--usd-per-gpu-hour")
        if usd_per_gpu_hour is not None
        else None,
        offer=offer,
        calibration=Path(calibration) if calibration is not None else None,
        storage=C.check(C.Storage, storage, "--storage"),
        rank=rank,
        offline=offline,
        like=like,
    )
    return commands.serve(_catalogs(catalog), req)


# -------------------------------------------------------------------------------------------------- plan


def _plan_gpus(cat: Catalogs, gpu: str | Iterable[str], pricing: str | None) -> list[Any]:
    """``gpu="all"``: every GPU with an offer of the pricing kind; else the named ones (comma list)."""
    registry = cat.accelerators()
    names = [g.strip() for g in gpu.split(",")] if isinstance(gpu, str) else [str(g).strip() for g in gpu]
    if names == ["all"]:
        ids = sorted({o.gpu for o in cat.offers() if pricing is None or o.pricing == pricing})
        return [registry.get(i) for i in ids]
    if not [n for n in names if n]:
        from .errors import InputError

        raise InputError("--gpu", "name at least one GPU (gpuplan gpus list), or 'all'")
    return list({a.id: a for a in (registry.get(n) for n in names if n)}.values())


def _providers(providers: str | Iterable[str] | None) -> tuple[str, ...] | None:
    if providers is None:
        return None
    items = providers.split(",") if isinstance(providers, str) else list(providers)
    return tuple(p.strip().lower() for p in items if p.strip()) or None


def plan_train(
    model: str,
    *,
    tokens: Number,
    deadline: Number | None = None,
    budget: Number | None = None,
    gpus: int | None = None,
    max_gpus: int = 16384,
    gpu: str | Iterable[str] = "all",
    providers: str | Iterable[str] | None = None,
    pricing: str = C.Pricing.ON_DEMAND,
    objective: str = C.Objective.COST,
    top: int = 20,
    global_batch: int | None = None,
    seq_len: int | None = None,
    precision: str | Iterable[str] = C.Precision.BF16_MIXED,
    method: str = C.Method.FULL,
    lora_rank: int = 16,
    lora_targets: str | Iterable[str] = "q_proj,k_proj,v_proj,o_proj",
    quant: str | None = None,
    assume: Mapping[str, Any] | None = None,
    explain: str | None = None,
    utilization: float | None = None,
    storage: str = C.TRAIN_STORAGE_DEFAULT,
    storage_write: Number | None = None,
    async_checkpoint: bool = False,
    mtbf_per_gpu_hours: Number | None = None,
    offline: bool = False,
    like: str | None = None,
    catalog: Any = (),
) -> reports.PlanTrainReport:
    """``gpuplan plan train MODEL``: search GPU x count x layout (tp, pp, ep, sharding, recompute, micro-batch)
    over the offers of one pricing kind, or owned hardware (``pricing="owned"``: priced as ``tco`` prices it at
    ``utilization``, default tco's); the top ``top`` by ``objective`` with the Pareto front of (time, cost, GPUs)
    flagged, P10-P90 bands, the pruned candidates counted by reason, and launch hints for each option.
    ``explain``: a layout ``"tp=8,pp=16,dp=128,..."`` (an option's layout keys): where it ranks or why it was
    pruned, and what it loses to option 1 (``plan/explain.py``). ``storage``, ``storage_write``,
    ``async_checkpoint``, ``mtbf_per_gpu_hours``: as ``train``'s, for the failure-adjusted time and cost that rank
    the options (checkpoints, failures: plan/machine.py). ``precision``: one precision, a comma list, or ``"any"``
    (bf16-mixed and fp8-mixed): the precision axis of the grid. ``method``, ``lora_rank``, ``lora_targets``,
    ``quant``: the fine-tuning method of every candidate, as ``train``'s (LoRA/QLoRA: adapters trained, frozen
    base)."""
    from dataclasses import replace

    from .catalog import resolve_model
    from .catalog.hub import hub_fetcher
    from .errors import InputError
    from .plan import reports
    from .plan.commands import train_assumptions
    from .plan.machine import MachineOptions
    from .plan.records import default_seq_len
    from .plan.search import search_train
    from .spec.model import ModelSpec
    from .spec.training import TrainingJob
    from .units import parse_duration, parse_tokens, parse_usd

    cat = _catalogs(catalog)
    if gpus is not None and max_gpus != 16384:
        raise InputError("--gpus", "give --gpus (a fixed count) or --max-gpus, not both")
    fixed = _num("gpus", gpus)
    most = int(BOUNDS["gpus"].read(max_gpus, "--max-gpus"))
    k = int(BOUNDS["top"].read(top, "--top"))
    chosen_pricing = C.check(C.PlanPricing, pricing, "--pricing")
    owned = chosen_pricing == C.PlanPricing.OWNED
    if utilization is not None and not owned:
        raise InputError("--utilization", "prices owned hardware: give it with --pricing owned")
    share = _num("utilization", utilization) if utilization is not None else 0.7  # tco's default
    chosen_objective = C.check(C.Objective, objective, "--objective")
    from .spec.training import parse_precisions

    precisions = parse_precisions(precision)
    C.check(C.Method, method, "--method")
    if quant is not None:
        C.check(C.Quant, quant, "--quant")
    n_tokens = parse_tokens(_text("tokens", tokens))
    deadline_s = parse_duration(_text("deadline", deadline), "--deadline") if deadline is not None else None
    budget_usd = None
    if budget is not None:
        text = _text("budget", budget)
        budget_usd = parse_usd(text.strip().rstrip("$") if isinstance(text, str) else text, "--budget")
    mem_a, machine_a, step_a = train_assumptions(_assume(assume))
    machine_options = MachineOptions.from_flags(
        C.check(C.Storage, storage, "--storage"),
        _text("storage_write", storage_write),
        None,
        async_checkpoint,
        _text("mtbf_per_gpu_hours", mtbf_per_gpu_hours),
    )
    spec = resolve_model(model, cat.models(), fetch=hub_fetcher(offline), like=like)
    if not isinstance(spec, ModelSpec):
        raise InputError("MODEL", "plan train needs the architecture; give a model id or config.json")
    seq = _num("seq_len", seq_len)
    targets = lora_targets.split(",") if isinstance(lora_targets, str) else list(lora_targets)
    job = TrainingJob(
        seq_len=seq if seq is not None else default_seq_len(spec),
        global_batch=_num("global_batch", global_batch),
        precision=precisions[0],
        method=method,
        lora_rank=_num("lora_rank", lora_rank),
        lora_targets=tuple(t.strip() for t in targets if t.strip()),
        quant=quant,
    )
    wanted = None
    if explain is not None:
        from .plan.explain import parse_explain

        wanted = parse_explain(explain)
    chosen_providers = _providers(providers)
    offers = list(cat.offers())
    ownership = None
    notes: list[str] = []
    if owned:
        from .catalog.ownership import load_ownership
        from .plan.owned import owned_offers, owned_prices

        if chosen_providers:
            raise InputError("--providers", "owned hardware has no provider: give --providers or --pricing owned")
        data = load_ownership()
        every = isinstance(gpu, str) and gpu.strip() == "all"
        registry = cat.accelerators()
        candidates = (
            [registry.get(i) for i in sorted({p.gpu for p in data.purchase})] if every else _plan_gpus(cat, gpu, None)
        )
        prices, notes = owned_prices(candidates, data, share)
        if not prices:
            raise InputError(
                "--gpu",
                "no purchase price and TDP on file (data/ownership.toml) for "
                + ", ".join(g.id for g in candidates)
                + "; --pricing owned needs them (gpuplan tco lists the sourced prices)",
            )
        accelerators = [g for g in candidates if g.id in prices] if every else candidates
        if every:
            notes = []
        offers = owned_offers(accelerators, prices, step_a.gpus_per_node)
        ownership = {gid: p.to_dict(data) for gid, p in prices.items()}
        notes.append("owned prices exclude staff (no sourced default; gpuplan tco --staff-usd-per-gpu-year adds it)")
    else:
        accelerators = _plan_gpus(cat, gpu, chosen_pricing)

    from .plan.training import power_limit_note

    for g in accelerators:  # the cap train refuses on a GPU is refused for a search over it
        power_limit_note(g, step_a.power_limit_w)

    def run_search(**given: Any) -> Any:
        """The search over this model, GPUs, offers and job; ``given``: the constraints and the objective."""
        return search_train(
            spec,
            accelerators,
            offers,
            n_tokens,
            job,
            pricing=chosen_pricing,
            providers=chosen_providers,
            fixed_gpus=fixed,
            max_gpus=most,
            memory_assumptions=mem_a,
            step_assumptions=step_a,
            machine=(machine_options, machine_a),
            precisions=precisions,
            **given,
        )

    search = run_search(deadline_s=deadline_s, budget_usd=budget_usd, objective=chosen_objective, top=k)
    constraints = {
        "deadline_s": deadline_s,
        "budget_usd": budget_usd,
        "gpus": fixed,
        "max_gpus": None if fixed is not None else most,
        "gpu": [a.id for a in accelerators],
        "providers": list(chosen_providers) if chosen_providers else None,
        "pricing": chosen_pricing,
        "global_batch": job.global_batch,
        "seq_len": job.seq_len,
        "precision": list(precisions),
        "method": job.method,
    }
    if owned:
        constraints["utilization"] = share
    if not search.options and (deadline_s is not None or budget_usd is not None):
        notes += _plan_relaxed(run_search, deadline_s, budget_usd)
    if notes:
        search = replace(search, notes=(*search.notes, *notes))
    explained = None
    if wanted is not None:
        from .plan.explain import explain_layout

        explained = explain_layout(
            wanted,
            cat.accelerators(),
            accelerators,
            fixed,
            model=spec,
            offers=offers,
            pricing=chosen_pricing,
            providers=chosen_providers,
            tokens=n_tokens,
            base_job=job,
            max_gpus=most,
            deadline_s=deadline_s,
            budget_usd=budget_usd,
            objective=chosen_objective,
            mem_a=mem_a,
            step_a=step_a,
            machine=(machine_options, machine_a),
            search=search,
        )
    return reports.PlanTrainReport(
        spec,
        n_tokens,
        chosen_objective,
        constraints,
        search,
        warnings=tuple(cat.warnings),
        ownership=ownership,
        explain=explained,
    )


def _plan_relaxed(run_search: Any, deadline_s: float | None, budget_usd: float | None) -> list[str]:
    """When nothing meets --deadline or --budget: the smallest change that does, from the same search
    (``run_search``) without that constraint (the fastest run with failures for a deadline, the cheapest for a
    budget), as note lines."""
    import math

    def as_flag(seconds: float) -> str:  # a --deadline value rounded up: whole days, else whole hours
        return f"{math.ceil(seconds / 86400)}d" if seconds >= 86400 else f"{math.ceil(seconds / 3600)}h"

    out: list[str] = []
    # (the constraint, the search without it, what the best option of that search gives)
    for given, objective, kept in (
        (deadline_s, C.Objective.TIME, {"budget_usd": budget_usd}),
        (budget_usd, C.Objective.COST, {"deadline_s": deadline_s}),
    ):
        best = run_search(objective=objective, top=1, **kept).options if given is not None else ()
        if not best:
            continue
        o = best[0].candidate
        if objective == C.Objective.TIME:
            wall = o.wall_time_with_failures_s if o.wall_time_with_failures_s is not None else o.time_s
            out.append(
                f"the fastest plan ({o.gpus:,} x {o.gpu.id}) takes {wall / 86400:,.1f} days with failures: "
                f"--deadline {as_flag(wall)} or more has an answer"
            )
        else:
            dear = o.cost_with_failures_usd if o.cost_with_failures_usd is not None else o.cost_usd
            out.append(
                f"the cheapest plan ({o.gpus:,} x {o.gpu.id}) costs ${dear:,.0f} with failures: "
                f"--budget {math.ceil(dear * 1.001)} or more has an answer"
            )
    return out


def plan_serve(
    model: str,
    *,
    qps: Number,
    prompt_tokens: int = 512,
    output_tokens: int = 256,
    max_ttft: Number | None = None,
    max_tpot: Number | None = None,
    gpu: str | Iterable[str] = "all",
    providers: str | Iterable[str] | None = None,
    pricing: str = C.Pricing.ON_DEMAND,
    engine: str | Iterable[str] = "vllm,sglang,trtllm",
    top: int = 20,
    assume: Mapping[str, Any] | None = None,
    offline: bool = False,
    like: str | None = None,
    catalog: Any = (),
) -> reports.PlanServeReport:
    """``gpuplan plan serve MODEL``: search GPU x weight format x KV cache x tp x engine for ``qps`` requests/s
    under ``max_ttft`` / ``max_tpot``, by $ per million output tokens, with replicas, the Pareto front of cost and
    latency, pruned counts and engine launch lines."""
    from .catalog import resolve_model
    from .catalog.hub import hub_fetcher
    from .errors import InputError
    from .estimate.inference import assumptions_for
    from .plan import reports
    from .plan.commands import parse_assumptions
    from .plan.search import search_serve
    from .spec.model import ModelSpec
    from .spec.serving import ServingJob
    from .units import MAX_QPS, MIN_QPS, check_range, parse_count, parse_duration

    cat = _catalogs(catalog)
    rate = check_range(parse_count(_text("qps", qps), "--qps"), "--qps", MIN_QPS, MAX_QPS, why="requests per second")
    k = int(BOUNDS["top"].read(top, "--top"))
    chosen_pricing = C.check(C.Pricing, pricing, "--pricing")
    names = engine.split(",") if isinstance(engine, str) else list(engine)
    engines = tuple(dict.fromkeys(C.check(C.Engine, e.strip(), "--engine") for e in names if e.strip()))
    if not engines:
        raise InputError("--engine", "name at least one engine")
    job = ServingJob(
        prompt_tokens=_num("prompt_tokens", prompt_tokens),
        output_tokens=_num("output_tokens", output_tokens),
        max_tpot_s=parse_duration(_text("max_tpot", max_tpot), "--max-tpot") if max_tpot is not None else None,
        max_ttft_s=parse_duration(_text("max_ttft", max_ttft), "--max-ttft") if max_ttft is not None else None,
    )
    items = _assume(assume)
    assumptions = parse_assumptions(items, assumptions_for(job)) if items else None
    spec = resolve_model(model, cat.models(), fetch=hub_fetcher(offline), like=like)
    if not isinstance(spec, ModelSpec):
        raise InputError("MODEL", "plan serve needs the architecture; give a model id or config.json")
    search = search_serve(
        spec,
        _plan_gpus(cat, gpu, chosen_pricing),
        list(cat.offers()),
        job,
        rate,
        pricing=chosen_pricing,
        providers=_providers(providers),
        engines=engines,
        assumptions=assumptions,
        top=k,
    )
    return reports.PlanServeReport(spec, job, rate, search, warnings=tuple(cat.warnings))


# --------------------------------------------------------------------------------------------------- tco


def tco(
    *,
    gpu: str,
    gpus: int = 8,
    years: float | None = None,
    life_years: float | None = None,
    utilization: float = 0.7,
    purchase_usd_per_gpu: Number | None = None,
    server_usd_per_gpu: Number | None = None,
    pue: float | None = None,
    usd_per_kwh: float | None = None,
    hosting_usd_per_kw_month: float | None = None,
    staff_usd_per_gpu_year: float = 0.0,
    cost_of_capital: float | None = None,
    catalog: Any = (),
) -> reports.TcoReport:
    """``gpuplan tco``: the yearly cost of owning ``gpus`` GPUs against every rental offer, and the
    break-even utilization (``None``: the sourced default of the ownership data file)."""
    from .plan import commands
    from .units import parse_usd

    return commands.tco(
        _catalogs(catalog),
        gpu=gpu,
        gpus=_num("gpus", gpus),
        years=_num("years", years),
        life_years=_num("life_years", life_years),
        utilization=_num("utilization", utilization),
        purchase_usd_per_gpu=parse_usd(_text("purchase_usd_per_gpu", purchase_usd_per_gpu), "--purchase-usd-per-gpu")
        if purchase_usd_per_gpu is not None
        else None,
        server_usd_per_gpu=parse_usd(_text("server_usd_per_gpu", server_usd_per_gpu), "--server-usd-per-gpu")
        if server_usd_per_gpu is not None
        else None,
        pue=_num("pue", pue),
        usd_per_kwh=_num("usd_per_kwh", usd_per_kwh),
        hosting_usd_per_kw_month=_num("hosting_usd_per_kw_month", hosting_usd_per_kw_month),
        staff_usd_per_gpu_year=_num("staff_usd_per_gpu_year", staff_usd_per_gpu_year),
        cost_of_capital=_num("cost_of_capital", cost_of_capital),
    )


# ---------------------------------------------------------------------------------------------- validate


def validate(*, category: str | None = None, catalog: Any = ()) -> Any:
    """``gpuplan validate``: every bundled published figure (``data/validation/*.json``) run through
    :func:`train` / :func:`serve` with the record's configuration, the signed error of each, a summary by
    category, GPU generation, precision, stack and dense/MoE, the skipped records with their reasons, and
    the leave-one-source-out figures of the fitted constants (``plan/validate.py``). ``category``:
    ``training``, ``inference`` or ``memory`` (None: all). Models built from a record's architecture are added
    to ``catalog``'s model registry as ``validation:<record id>``. Returns a ``plan.validate.ValidateReport``."""
    from .plan import validate as v

    cat = _catalogs(catalog)
    chosen = C.check(C.ValidateCategory, category, "--category") if category is not None else None

    def run(call: str, kwargs: Mapping[str, Any], assume: Mapping[str, Any]) -> Any:
        fn = train if call == "train" else serve
        # a record's own assumptions (its power cap) first, the harness's refitted constants over them
        own = {k: v for k, v in kwargs.items() if k != "assume"}
        return fn(**own, assume={**kwargs.get("assume", {}), **assume}, offline=True, catalog=cat)

    return v.validate(cat, run, category=chosen)


# ------------------------------------------------------------------------------------------------- local


def local_detect(*, catalog: Any = ()) -> Any:
    """``gpuplan local detect``: GPUs (NVML), links, topology and driver; CPU, RAM, NUMA nodes and disks."""
    from .local.suite import detect_report

    return detect_report(_catalogs(catalog).accelerators())


def local_bench(
    which: str = C.BenchSuite.ALL,
    *,
    quick: bool = True,
    dtype: Iterable[str] = (),
    path: str | os.PathLike[str] = ".",
    writers: int = 4,
    file_size: Number | None = None,
    payload: Iterable[Number] = (),
    model: str | None = None,
    offline: bool = False,
    progress: Any = None,
    catalog: Any = (),
) -> Any:
    """``gpuplan local bench``: measure this machine (matmul per dtype, memory copy, PCIe, collectives, disk)
    beside the datasheet; returns the calibration profile (``to_dict()``), or None on a torchrun rank > 0."""
    from pathlib import Path

    from .catalog import resolve_model
    from .catalog.hub import hub_fetcher
    from .errors import InputError
    from .local.suite import run_bench
    from .spec.model import ModelSpec
    from .units import parse_bytes

    cat = _catalogs(catalog)
    which = C.check(C.BenchSuite, which, "WHICH")
    dtypes = tuple(C.check(C.BenchDtype, d, "--dtype") for d in dtype)
    file_bytes = parse_bytes(_text("file_size", file_size), "--file-size") if file_size is not None else None
    payload_bytes = [parse_bytes(p, "--payload") for p in payload] or None
    spec = None
    if model:
        spec = resolve_model(model, cat.models(), fetch=hub_fetcher(offline))
        if not isinstance(spec, ModelSpec):
            raise InputError("--model", "needs an architecture (a model id or config.json)")
    return run_bench(
        cat.accelerators(),
        which,
        quick=quick,
        dtypes=dtypes,
        disk_path=Path(path),
        writers=_num("writers", writers),
        file_bytes=file_bytes,
        payload_bytes=payload_bytes,
        model=spec,
        progress=progress,
    )


def local_watch(
    command: Iterable[str] = (),
    *,
    pid: int | None = None,
    pid_of: str | None = None,
    interval: Number = "1s",
    out: str | os.PathLike[str] | None = None,
    log_regex: str | None = None,
    tokens_per_step: Number | None = None,
    model: str | None = None,
    gpu: str | None = None,
    gpus: int | None = None,
    seq_len: int | None = None,
    precision: str = C.Precision.BF16_MIXED,
    offline: bool = False,
    catalog: Any = (),
    gpu_backend: Any = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> Any:
    """``gpuplan local watch``: run ``command`` (or follow process ``pid``, or the one process tree named
    ``pid_of``) and sample the host, the job's process tree and the GPUs every ``interval`` into the JSONL
    trace ``out`` (``{host}`` becomes the host name; docs/watch.md); returns a report whose ``exit_code`` is
    the job's. ``log_regex``: read training progress from the job's output (named groups step, step_s,
    step_ms, tokens_per_s, tokens_per_s_per_gpu; ``tokens_per_step`` turns step times into tokens/s); with
    ``model`` (and ``gpu``, ``gpus``: default what NVML sees) each sample's progress carries the live MFU.
    ``gpu_backend``: the NVML seam (default: NVML when present). ``on_record``: called with each trace record
    (header, samples, summary) as it is written, e.g. to draw a live view (the CLI's --live)."""
    import contextlib
    from datetime import datetime

    from .errors import InputError
    from .local.progress import Progress, compile_log_regex
    from .local.watch import MIN_INTERVAL_S, NvmlWatchBackend, WatchReport, expand_out, find_pid, watch
    from .units import parse_duration

    interval_s = parse_duration(_text("interval", interval), "--interval")
    if interval_s < MIN_INTERVAL_S:
        raise InputError("--interval", f"{interval} is below the shortest interval, {MIN_INTERVAL_S * 1000:.0f}ms")
    cmd = list(command)
    if pid_of is not None:
        if pid is not None or cmd:
            raise InputError("--pid-of", "give one of a command (after --), --pid or --pid-of")
        pid = find_pid(pid_of)
    if cmd and pid is not None:
        raise InputError("--pid", "give a command (after --) or --pid, not both")
    if not cmd and pid is None:
        raise InputError("--pid", "give a command to run (after --) or --pid of a running process")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0):
        raise InputError("--pid", f"{pid!r} is not a process id")
    if log_regex is None:
        for flag, value in (("--tokens-per-step", tokens_per_step), ("--model", model)):
            if value is not None:
                raise InputError(flag, "reads the job's progress: give --log-regex too")
    elif pid is not None:
        raise InputError("--log-regex", "reads the job's output: run the job under watch (-- CMD), not --pid")
    path = expand_out(os.fspath(out)) if out is not None else f"watch-{datetime.now():%Y%m%d-%H%M%S}.jsonl"
    try:
        accelerators = _catalogs(catalog).accelerators()
    except Exception:  # a broken user catalog must not stop the watch: GPUs are then unmatched
        accelerators = None
    backend = gpu_backend if gpu_backend is not None else NvmlWatchBackend()
    progress = None
    if log_regex is not None:
        tps = _tokens_per_step(tokens_per_step)
        pattern = compile_log_regex(log_regex, tps)
        reference = None
        if model is not None:
            names = set(pattern.groupindex)
            if tps is None and not names & {"tokens_per_s", "tokens_per_s_per_gpu"}:
                raise InputError(
                    "--model",
                    "MFU needs tokens/s: a (?P<tokens_per_s>...) group, or --tokens-per-step with the step time",
                )
            gpu_id, count = gpu, gpus
            if gpu_id is None or count is None:
                seen = _watched_gpus(backend, accelerators)
                if gpu_id is None:
                    if not seen or seen[0] is None:
                        raise InputError("--gpu", "no GPU matched to the catalog here: give --gpu for the MFU's peak")
                    gpu_id = seen[0]
                count = count if count is not None else max(1, len(seen))
            reference, _ = _mfu_reference(model, gpu_id, count, seq_len, precision, catalog, offline=offline)
        progress = Progress(pattern, tokens_per_step=tps, reference=reference)
    try:
        f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as e:
        raise InputError("--out", f"can't write {path}: {e.strerror or e}") from None
    try:
        result = watch(
            f,
            path,
            command=cmd or None,
            pid=pid,
            interval_s=interval_s,
            gpu=backend,
            accelerators=accelerators,
            progress=progress,
            on_record=on_record,
        )
    finally:
        with contextlib.suppress(OSError):  # a full disk: the error is watch's, not a second one from close
            f.close()
    return WatchReport(result)


def _tokens_per_step(value: Number | None) -> float | None:
    from .errors import GpuplanError, InputError
    from .units import parse_count

    if value is None:
        return None
    try:
        return parse_count(_text("tokens_per_step", value), "tokens per step")
    except GpuplanError as e:
        raise InputError("--tokens-per-step", str(e)) from None


def _watched_gpus(backend: Any, accelerators: Any) -> list[str | None]:
    """The catalog ids of the GPUs the backend sees (None where not matched)."""
    from .local.detect import match_catalog

    if accelerators is None or not backend.available()[0]:
        return []
    return [match_catalog(r, accelerators)[0] for r in backend.readings()]


def _mfu_reference(
    model: str,
    gpu: str,
    gpus: int,
    seq_len: int | None,
    precision: str,
    catalog: Any,
    layout: Mapping[str, Any] | None = None,
    offline: bool = False,
) -> tuple[Any, dict[str, Any] | None]:
    """The MFU's denominator and numerator per token, as ``gpuplan train`` counts them (its FLOPs per token and
    the GPU's dense peak for the precision); with ``layout`` (tp, pp, zero, ...) also its predicted MFU."""
    from .errors import InputError
    from .local.progress import MfuReference
    from .plan import reports

    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InputError("--gpus", f"{gpus!r} is not a GPU count")
    report = train(
        model,
        gpu=gpu,
        gpus=gpus,
        seq_len=seq_len,
        precision=precision,
        tokens="1B",
        catalog=catalog,
        offline=offline,
        **(layout or {}),
    )
    plan = getattr(report, "plan", None)
    if not isinstance(report, reports.TrainReport) or plan is None:
        raise InputError("--model", f"gpuplan train {model} --gpu {gpu} gave no plan to take the FLOPs from")
    reference = MfuReference(
        model=model,
        gpu=report.gpu.id,
        gpus=gpus,
        seq_len=report.job.seq_len,
        precision=str(precision),
        flops_per_token=plan.compute.flops_per_token,
        peak_flops_per_s=plan.time.peak_flops_per_s,
        convention=plan.compute.convention,
    )
    predicted = None
    if layout:
        predicted = {
            "mfu": round(plan.time.mfu, 4),
            "source": plan.mfu_source,
            "layout": report.layout.describe(),
            "fits": bool(report.fits),
        }
    return reference, predicted


def local_diagnose(
    run: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    from_: str = "watch",
    interval: Number | None = None,
    model: str | None = None,
    gpu: str | None = None,
    gpus: int | None = None,
    seq_len: int | None = None,
    precision: str = C.Precision.BF16_MIXED,
    offline: bool = False,
    tp: int | None = None,
    pp: int | None = None,
    zero: int | None = None,
    fsdp: bool = False,
    micro_batch: int | None = None,
    global_batch: int | None = None,
    catalog: Any = (),
) -> Any:
    """``gpuplan local diagnose``: ranked verdicts (input-bound, throttled, near-OOM, memory-bound, ...) on a
    ``local watch`` trace (or, ``from_="nvidia-smi"``, an nvidia-smi --query-gpu CSV log; ``from_="dcgm"``, a
    ``dcgmi dmon`` log or DCGM exporter scrapes, whose rounds are ``interval`` apart where the log has no time
    stamps: dmon's -d, default 1s), each with its
    evidence, counter-evidence and advice. ``run`` may be several traces (one per node): they are aligned in
    time and their GPUs compared as one job's (``host:index``). With ``model``: the observed MFU (from the
    trace's training progress) beside gpuplan's predicted MFU when a layout (tp, pp, zero, fsdp, micro_batch,
    global_batch) is given; ``gpu`` and ``gpus`` default to the trace's."""
    from .errors import InputError
    from .local.diagnose import DiagnoseReport, diagnose, merge_traces
    from .local.watch import read_trace

    paths = [os.fspath(run)] if isinstance(run, (str, os.PathLike)) else [os.fspath(p) for p in run]
    if not paths:
        raise InputError("RUN", "give a trace file")
    if interval is not None and from_ != C.TraceSource.DCGM:
        raise InputError("--interval", "is the time between a dcgmi dmon log's rounds: only with --from dcgm")
    read: Callable[[str], tuple[list[dict[str, Any]], list[str]]]
    if from_ == C.TraceSource.WATCH:
        read = read_trace
    elif from_ == C.TraceSource.NVIDIA_SMI:
        from .local.smi_import import read_nvidia_smi as read
    elif from_ == C.TraceSource.DCGM:
        from .local.dcgm_import import DEFAULT_DELAY_S, read_dcgm
        from .units import parse_duration

        delay_s = DEFAULT_DELAY_S if interval is None else parse_duration(_text("interval", interval), "--interval")
        if not delay_s > 0:
            raise InputError("--interval", f"{interval} is not a positive time")

        def read(p: str) -> tuple[list[dict[str, Any]], list[str]]:
            return read_dcgm(p, delay_s)
    else:
        raise InputError("--from", f"{from_!r}: choose {', '.join(C.values(C.TraceSource))}")
    warnings: list[str] = []
    traces = []
    for p in paths:
        recs, warned = read(p)
        traces.append((p, recs))
        warnings += warned
    notes: list[str] = []
    if len(traces) == 1:
        records = traces[0][1]
    else:
        records, notes = merge_traces(traces)
    path = ", ".join(paths)
    reference = predicted = None
    if model is not None:
        head = records[0] if records else {}
        gpu_id = gpu or next((g.get("catalog_id") for g in head.get("gpus") or [] if g.get("catalog_id")), None)
        if gpu_id is None:
            raise InputError("--gpu", "the trace names no catalog GPU: give --gpu for the MFU's peak")
        count = gpus if gpus is not None else max(1, len(head.get("gpus") or []))
        given = {"tp": tp, "pp": pp, "zero": zero, "micro_batch": micro_batch, "global_batch": global_batch}
        layout: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if fsdp:
            layout["fsdp"] = True
        reference, predicted = _mfu_reference(model, gpu_id, count, seq_len, precision, catalog, layout, offline)
    diagnosis = diagnose(records, reference=reference, predicted=predicted, notes=notes)
    return DiagnoseReport(diagnosis, path, tuple(warnings))


# ------------------------------------------------------------------- saved profiles and traces (read only)

#: At most this many files of each kind are read for a listing (the newest by name order's end are kept).
SAVED_MAX_FILES = 200


class SavedReport:
    """A listing of files saved in the user's gpuplan folder: ``to_dict()`` is its record, ``exit_code`` 0."""

    exit_code = 0
    fits = True

    def __init__(self, kind: str, body: dict[str, Any]) -> None:
        self.kind = kind
        self._body = body

    def to_dict(self) -> dict[str, Any]:
        from .plan.records import envelope

        return envelope(self.kind, **self._body)


def _saved_files(sub: str, pattern: str) -> tuple[str | None, list[Any], list[str]]:
    """The user's ``<gpuplan folder>/<sub>/`` (None without a home folder), its files matching ``pattern`` in name
    order (at most SAVED_MAX_FILES, the last ones), and notes on what could not be listed."""
    import fnmatch

    from .catalog.paths import user_config_dir

    top = user_config_dir()
    if top is None:
        return None, [], ["no home folder ($HOME is not set): set GPUPLAN_CONFIG_DIR to use one"]
    folder = top / sub
    try:
        names = sorted(n for n in os.listdir(folder) if fnmatch.fnmatchcase(n, pattern))
    except FileNotFoundError:
        return str(folder), [], []
    except (OSError, ValueError) as e:
        return str(folder), [], [f"{folder}: can't read the folder ({getattr(e, 'strerror', None) or e})"]
    notes = []
    if len(names) > SAVED_MAX_FILES:
        notes.append(f"{len(names)} files; the last {SAVED_MAX_FILES} by name are listed")
        names = names[-SAVED_MAX_FILES:]
    return str(folder), [folder / n for n in names], notes


def _modified(path: Any) -> str | None:
    import datetime as _dt

    try:
        return _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OSError, ValueError, OverflowError):
        return None


def local_profiles(*, catalog: Any = ()) -> SavedReport:
    """The calibration profiles saved in the user's gpuplan folder (``profiles/*.json`` under
    ``catalog.paths.user_config_dir()``; ``gpuplan local bench --save <that folder>/NAME.json`` writes one there).
    Each is listed by file name with when and on what GPU it was measured and its results beside the datasheet
    (``fraction_of_datasheet``, as the bench wrote them); a file that is not a readable profile is listed with the
    one-line reason. Reads those files only: it takes no path, so a caller cannot point it anywhere else
    (``catalog`` is taken for the same signature as the other calls, and not used)."""
    from .errors import GpuplanError
    from .local.calibration import read_profile

    folder, paths, notes = _saved_files("profiles", "*.json")
    profiles = []
    for p in paths:
        item: dict[str, Any] = {"file": p.name, "modified_utc": _modified(p)}
        try:
            data = read_profile(p)
        except GpuplanError as e:
            profiles.append({**item, "error": str(e).splitlines()[0] if str(e) else type(e).__name__})
            continue
        gpu = data.get("gpu") or {}
        host: dict[str, Any] = data["host"] if isinstance(data.get("host"), dict) else {}
        profiles.append(
            {
                **item,
                "created": data.get("created"),
                "gpu_name": gpu.get("name"),
                "gpu_catalog_id": gpu.get("catalog_id"),
                "hostname": host.get("hostname") if isinstance(host.get("hostname"), str) else None,
                "results": [
                    {k: r.get(k) for k in ("name", "value", "unit", "fraction_of_datasheet")} for r in data["results"]
                ],
            }
        )
    return SavedReport(
        "local.profiles",
        {
            "folder": folder,
            "save_with": None if folder is None else f"gpuplan local bench --save {folder}/NAME.json",
            "profiles": profiles,
            "notes": notes,
        },
    )


def local_runs(*, catalog: Any = ()) -> SavedReport:
    """The ``local watch`` traces saved in the user's gpuplan folder (``watch/*.jsonl`` under
    ``catalog.paths.user_config_dir()``; ``gpuplan local watch --out <that folder>/NAME.jsonl -- CMD`` writes one
    there), each with its diagnosis: the record ``gpuplan local diagnose FILE --json`` prints (no ``--model``, so
    no predicted MFU), or the one-line reason it could not be read. Reads those files only; takes no path."""
    from .errors import GpuplanError

    folder, paths, notes = _saved_files("watch", "*.jsonl")
    runs = []
    for p in paths:
        item: dict[str, Any] = {"file": p.name, "modified_utc": _modified(p)}
        try:
            runs.append({**item, "diagnosis": local_diagnose(p, offline=True, catalog=catalog).to_dict()})
        except GpuplanError as e:
            runs.append({**item, "error": str(e).splitlines()[0] if str(e) else type(e).__name__})
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # a header that parsed, samples that don't
            runs.append({**item, "error": f"{p.name}: not a trace diagnose can read ({type(e).__name__}: {e})"})
    return SavedReport(
        "local.runs",
        {
            "folder": folder,
            "watch_with": None if folder is None else f"gpuplan local watch --out {folder}/NAME.jsonl -- CMD",
            "runs": runs,
            "notes": notes,
        },
    )
