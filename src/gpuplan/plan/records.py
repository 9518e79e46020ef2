"""The JSON records the library returns and ``--json`` prints; tables are drawn from the same records.

Every record carries ``schema_version`` and ``kind``. Units are in the key names (bytes, FLOP/s, s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import fields
from operator import attrgetter
from typing import Any

from ..estimate.flops import flops_per_token
from ..estimate.params import count_params
from ..spec.accelerator import Accelerator
from ..spec.model import ModelSpec, ParamsOnlyModel

SCHEMA_VERSION = 1

#: Default sequence length for FLOPs per token when none is given: 4096, the Llama 2 pre-training
#: context (Touvron et al. 2023, "Llama 2", section 2.2), capped at the model's own context length.
DEFAULT_SEQ_LEN = 4096


def envelope(kind: str, **body) -> dict:
    return {"schema_version": SCHEMA_VERSION, "kind": kind, **body}


def accelerator_list(accs: Iterable[Accelerator]) -> dict:
    item = accelerator_items()
    return envelope("gpus.list", accelerators=[item(a) for a in accs])


def accelerator_items() -> Callable[[Accelerator], dict]:
    """The record of one accelerator in ``gpus list`` (its ``to_dict()``)."""
    return Accelerator.to_dict


def accelerator_show(acc: Accelerator) -> dict:
    return envelope("gpus.show", accelerator=acc.to_dict())


#: The matrix (tensor-core) dtypes whose matmul ceiling ``gpus compare`` shows beside the dense peak.
MATMUL_DTYPES = ("tf32", "fp16", "bf16", "fp8", "int8", "fp4")


def matmul_ceilings(acc: Accelerator) -> dict[str, dict]:
    """Per matrix dtype with a dense peak: the matmul ceiling the estimates use (fraction of the peak, FLOP/s),
    whether the catalog holds a measurement (MAMF) for that dtype, and the source; a figure that is not a
    measurement for this dtype (another dtype's, or the documented default) is marked "estimated, not
    measured"."""
    from ..estimate.mamf import matmul_efficiency

    out: dict[str, dict] = {}
    for d in MATMUL_DTYPES:
        peak = acc.peak(d)
        if peak is None:
            continue
        fraction, source = matmul_efficiency(acc, d)
        measured = d in acc.matmul_efficiency
        out[d] = {
            "fraction": fraction,
            "flops_per_s": fraction * peak,
            "measured": measured,
            "source": source if measured else f"estimated, not measured: {source}",
        }
    return out


def accelerator_compare(accs: Iterable[Accelerator]) -> dict:
    """``gpus compare``: each accelerator's record plus ``matmul_ceilings`` (measured where the catalog has a
    MAMF figure, else estimated and said so) to read beside the datasheet peaks."""
    return envelope("gpus.compare", accelerators=[{**a.to_dict(), "matmul_ceilings": matmul_ceilings(a)} for a in accs])


def default_seq_len(model: ModelSpec | ParamsOnlyModel) -> int:
    if isinstance(model, ParamsOnlyModel):
        return DEFAULT_SEQ_LEN
    return min(DEFAULT_SEQ_LEN, model.context_length)


#: The fields of a ModelSpec that the parameter count and the FLOPs per token cannot depend on (its names and
#: provenance); every other field, present or added later, tells two architectures apart.
_NOT_ARCHITECTURE = frozenset({"id", "name", "family", "hf_id", "aliases", "source", "notes", "origin"})
_architecture = attrgetter(*(f.name for f in fields(ModelSpec) if f.name not in _NOT_ARCHITECTURE))


def _derived(model: ModelSpec, seq: int, memo: dict | None) -> tuple[dict, dict, int, int]:
    """FLOPs per token (as a record), the parameter breakdown (as a record), total and active parameters;
    with ``memo``, computed once per architecture and sequence length (a listing of 100,000 models holds
    few distinct ones); the records returned are fresh copies either way."""
    key = (_architecture(model), seq) if memo is not None else None
    try:
        found = memo.get(key) if memo is not None else None
    except TypeError:  # a field that cannot be hashed (a hand-made spec): computed, not kept
        memo = found = None
    if found is None:
        b = count_params(model)
        found = (flops_per_token(model, seq).to_dict(), b.to_dict(), b.total, b.active)
        if memo is not None:
            memo[key] = found
    flops, breakdown, total, active = found
    return dict(flops), dict(breakdown), total, active


def model_record(model: ModelSpec | ParamsOnlyModel, seq_len: int | None = None, *, _memo: dict | None = None) -> dict:
    """Everything ``model show`` reports about one model, as plain data."""
    seq = seq_len or default_seq_len(model)
    if isinstance(model, ParamsOnlyModel):
        flops = flops_per_token(model, seq).to_dict()
        return {
            "id": model.id,
            "name": model.name,
            "params": model.params,
            "active_params": model.params,
            "architecture_known": False,
            "flops_per_token": flops,
            "cannot_estimate": ["attention FLOPs", "activation memory", "KV cache", "per-component breakdown"],
        }
    flops, breakdown, total, active = _derived(model, seq, _memo)
    moe = model.moe
    return {
        "id": model.id,
        "name": model.name,
        "family": model.family,
        "model_type": model.model_type,
        "hf_id": model.hf_id,
        "architecture_known": True,
        "params": total,
        "active_params": active,
        "breakdown": breakdown,
        "layers": model.layers,
        "hidden_size": model.hidden_size,
        "attention_heads": model.attention_heads,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "ffn_size": model.ffn_size if model.dense_layers else None,
        "vocab_size": model.vocab_size,
        "context_length": model.context_length,
        "tie_embeddings": model.tie_embeddings,
        "mlp": "gated" if model.mlp_gated else "plain",
        "norm": model.norm,
        "experts": moe.experts if moe else None,
        "experts_per_token": moe.experts_per_token if moe else None,
        "expert_ffn_size": moe.expert_ffn_size if moe else None,
        "moe_layers": moe.layers if moe else None,
        "shared_expert_ffn_size": (moe.shared_ffn_size or None) if moe else None,
        "attention": "mla"
        if model.mla
        else ("mqa" if model.kv_heads == 1 else "gqa" if model.kv_heads < model.attention_heads else "mha"),
        "mla": (
            {
                "q_lora_rank": model.mla.q_lora_rank,
                "kv_lora_rank": model.mla.kv_lora_rank,
                "qk_nope_head_dim": model.mla.qk_nope_head_dim,
                "qk_rope_head_dim": model.mla.qk_rope_head_dim,
                "v_head_dim": model.mla.v_head_dim,
            }
            if model.mla
            else None
        ),
        "sliding_window": model.sliding_window,
        "sliding_window_layers": model.sliding_window_layers or None,
        "flops_per_token": flops,
        "published_params": model.published_params,
        "published_params_rounded": model.published_params_rounded,
        "source": model.source.to_dict() if model.source else None,
        "origin": model.origin,
        "notes": list(model.notes),
    }


def model_show(model: ModelSpec | ParamsOnlyModel, seq_len: int | None = None) -> dict:
    return envelope("model.show", model=model_record(model, seq_len))


def model_list(models: Iterable[ModelSpec]) -> dict:
    item = model_items()
    return envelope("model.list", models=[item(m) for m in models])


def model_items() -> Callable[[ModelSpec], dict]:
    """The record of one model in ``model list`` (``model_record``; the parameter counts and FLOPs computed once
    per architecture for all the calls of the function returned)."""
    memo: dict = {}
    return lambda m: model_record(m, _memo=memo)


def _rule_explanation(job) -> str:
    if job.method == "full":
        return (
            "The seed rule counts 2 B bf16 weights + 4 B fp32 grads + 4 B fp32 master + 8 B Adam = 18 B/param, "
            "adds a flat 25 % for activations and spreads it evenly; the estimate above uses the recipe's real "
            "bytes, the sharding, and activations from the architecture."
        )
    return (
        "The full-training rule (18 B/param) does not apply to LoRA/QLoRA: shown is the weights-only rule "
        "(2 B/param x 1.25); the estimate above adds the adapters' states, the quantized base and activations."
    )


def training_record(model: ModelSpec | ParamsOnlyModel, gpu: Accelerator, layout, job, report, rule) -> dict:
    """``gpuplan train``: memory of the most loaded GPU, itemized, with the rule of thumb beside it."""
    from ..estimate.memory import GROUPS
    from ..estimate.steptime import resolve_stack

    params = count_params(model).total if isinstance(model, ModelSpec) else model.params
    stack, stack_why = resolve_stack(job, layout, gpu)
    moe = getattr(model, "moe", None) is not None  # the MoE settings are null for a dense model
    memory = {f"{g}_bytes": report.group_bytes(g) for g in GROUPS}
    memory.update(
        {
            "total_bytes": report.total_bytes,
            "capacity_bytes": report.capacity_bytes,
            "fits": report.fits,
            "reasons": list(report.reasons),
            "max_micro_batch": report.max_micro_batch,
            "pipeline_stage": report.stage,
            "parts": [{"name": k, "group": report.groups[k], "bytes": round(v)} for k, v in report.parts.items()],
            "cpu_offload_bytes": round(report.cpu_offload_bytes),
        }
    )
    return envelope(
        "train",
        model={"id": model.id, "params": params, "trainable_params": report.trainable_params},
        gpu={"id": gpu.id, "name": gpu.name, "usable_memory_bytes": gpu.usable_memory_bytes},
        layout={
            "gpus": layout.gpus,
            "dp": layout.dp,
            "tp": layout.tp,
            "pp": layout.pp,
            "cp": layout.cp,
            "ep": layout.ep,
            # expert tensor parallelism: a dense model has no experts to split
            "etp": layout.expert_tp if getattr(model, "moe", None) is not None else None,
            "sequence_parallel": layout.sequence_parallel,
            "zero": layout.zero,
            "offload": layout.offload,
            "virtual_stages": layout.virtual_stages,
        },
        job={
            "micro_batch": job.micro_batch,
            "global_batch": job.global_batch,
            # as asked: without --global-batch the batch rule picks it (time.global_batch), so null here
            "grad_accumulation": job.grad_accumulation(layout.dp) if job.global_batch is not None else None,
            "seq_len": job.seq_len,
            "precision": job.precision,
            "optimizer": job.optimizer,
            "method": job.method,
            "lora_rank": job.lora_rank if job.method != "full" else None,
            "lora_targets": list(job.targets) if job.method != "full" else None,
            "quant": job.quant,
            "recompute": job.recompute,
            "recompute_layers": job.recompute_layers,
            # what --recompute selective re-runs (Megatron's default, core_attn, where not given); null otherwise
            "recompute_modules": list(job.selective_modules) if job.recompute == "selective" else None,
            "offload_layers": job.offload_layers,
            "flash_attention": job.flash_attention,
            # as asked (auto: the stack's); time.attention_kernel resolves it; null with materialized attention
            "attention_kernel": job.attention_kernel if job.flash_attention else None,
            "dropout": job.dropout,
            "main_grads": job.main_grads,
            "fp8_params": job.fp8_params,
            # the low-precision recipe as given (auto or a name) with fp8-mixed/fp4-mixed; time.fp8_recipe resolves it
            "fp8_recipe": job.fp8_recipe if job.precision in ("fp8-mixed", "fp4-mixed") else None,
            "optimizer_dtype": job.optimizer_dtype,
            "overlap_param_gather": job.overlap_param_gather,
            # the settings as asked (None: the stack's default); the stack as resolved, with why (auto: from the recipe
            # or the GPU)
            "fsdp": job.fsdp,
            "stack": stack.name,
            "stack_why": stack_why,
            "compile": job.compile,
            "overlap_grad_reduce": job.overlap_grad_reduce,
            "tp_comm_overlap": job.tp_comm_overlap,
            "cross_entropy_fusion": job.cross_entropy_fusion,
            # MoE settings; null for a dense model, where they do not apply
            "ep_comm_overlap": job.ep_comm_overlap if moe else None,
            "moe_dispatch_dtype": job.moe_dispatch_dtype if moe else None,
            "moe_dispatcher": job.moe_dispatcher if moe else None,
        },
        recipe={
            "name": report.recipe.name,
            "title": report.recipe.title,
            "why": report.recipe_reason,
            "source": report.recipe.source,
        },
        memory=memory,
        rule_of_thumb={
            **rule.to_dict(),
            "per_gpu_bytes": rule.total_bytes / layout.gpus,
            "explanation": _rule_explanation(job),
        },
        assumptions=[x.to_dict() for x in report.assumptions],
        notes=list(report.notes),
    )


def serving_record(model, gpu: Accelerator, layout, job, report, fleet, cost, rule, qps) -> dict:
    """``gpuplan serve``: memory per GPU, latency, throughput, fleet and cost of one deployment."""
    from ..estimate.inference import SERVING_GROUPS

    memory = {f"{g}_bytes": report.group_bytes(g) for g in SERVING_GROUPS}
    memory.update(
        {
            "total_bytes": report.total_bytes,
            "capacity_bytes": report.capacity_bytes,
            "planning_bytes": int(report.planning_bytes),
            "fits": report.fits,
            "reasons": list(report.reasons),
            "max_concurrent_sequences": report.max_concurrent_sequences,
            "parts": [{"name": k, "group": report.groups[k], "bytes": round(v)} for k, v in report.parts.items()],
        }
    )
    return envelope(
        "serve",
        model={"id": model.id, "params": count_params(model).total},
        gpu={"id": gpu.id, "name": gpu.name, "usable_memory_bytes": gpu.usable_memory_bytes},
        layout={"tp": layout.tp, "pp": layout.pp, "gpus_per_replica": layout.gpus_per_replica},
        job={
            "weights": job.weights,
            "kv_cache": job.kv_cache,
            "prompt_tokens": job.prompt_tokens,
            "output_tokens": job.output_tokens,
            "batching": "continuous" if job.continuous else "static",
            "batch": report.batch,
            "sequence_tokens": job.sequence_tokens,
            "engine": job.engine,
            "engine_profile": report.engine_profile,
            "running_sequences": report.running_sequences,
            "kv_tokens_per_sequence": report.kv_tokens_per_sequence,
            "prefill_tokens_per_step": report.prefill_tokens_per_step,
            "max_tpot_s": job.max_tpot_s,
            "max_ttft_s": job.max_ttft_s,
        },
        memory=memory,
        latency=_serving_latency(report),
        throughput={
            "tokens_per_s": report.tokens_per_s,
            "requests_per_s": report.requests_per_s,
            "tokens_per_s_per_gpu": report.tokens_per_s / layout.gpus_per_replica,
            "input_tokens_per_s": report.requests_per_s * job.prompt_tokens,
            "prefill_share": report.prefill_share,
        },
        fleet={
            "qps": qps,
            "replicas": fleet.replicas,
            "gpus": fleet.gpus,
            "rule_of_thumb_gpus": fleet.rule_of_thumb_gpus,
        },
        cost=cost,
        rule_of_thumb={
            **rule.to_dict(),
            "explanation": "seed rule: params x 2 B x 1.25 for the weights plus a flat "
            "25 %; the estimate above adds the KV cache of the batch at its context",
        },
        assumptions=[x.to_dict() for x in report.assumptions],
        notes=list(report.notes),
    )


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _serving_latency(report) -> dict:
    """``latency``: the means a request sees (under --qps: at the fleet's load per replica, queue included),
    the replica's own figures (``*_unloaded_s``), the wait for a slot (under --concurrency above the slots: the
    closed loop's, outside ``ttft_s``; ``ttft_with_queue_s`` adds it) and, under load, the utilization and the
    latency percentiles (``*_q90_s``, ``*_q99_s``; ``_p10``/``_p90`` are the error bands). None: unbounded."""
    load = report.load
    return {
        "ttft_s": _finite(report.ttft_s),
        "tpot_s": report.tpot_s,
        "request_latency_s": _finite(report.request_latency_s),
        "decode_bound": report.decode_bound,
        "under_load": load is not None,
        "ttft_unloaded_s": report.ttft_unloaded_s,
        "tpot_unloaded_s": report.tpot_unloaded_s,
        "request_latency_unloaded_s": report.request_latency_unloaded_s,
        "queue_wait_s": _finite(report.queue_wait_s),
        "ttft_with_queue_s": _finite(report.ttft_s + report.queue_wait_s) if load is None else _finite(report.ttft_s),
        "ttft_q90_s": load.ttft_q90_s if load else None,
        "ttft_q99_s": load.ttft_q99_s if load else None,
        "tpot_q90_s": load.tpot_q90_s if load else None,
        "tpot_q99_s": load.tpot_q99_s if load else None,
        "utilization": load.utilization if load else None,
        "max_utilization": load.max_utilization if load else None,
        "requests_per_s_per_replica": load.requests_per_s if load else None,
        "capacity_requests_per_s_per_replica": load.capacity_requests_per_s if load else None,
        "running_sequences": load.running_sequences if load else report.running_sequences,
        "slots": load.slots if load else None,
        "fleet_limited_by": load.limited_by if load else None,
        "model": "Poisson arrivals; Little's law for the running sequences; G/G/c Allen-Cunneen wait with "
        "Sakasegawa's M/M/c term (gpuplan.estimate.queueing)"
        if load
        else None,
    }


#: A GPU without an option is named by the furthest check any of its candidates reached (the search checks support,
#: the layout, an offer of the size, memory, then the targets): "misses_slo" says some fit but none met the targets.
_FURTHEST_FIRST = (
    "misses_slo",
    "does_not_fit_memory",
    "no_offer_of_that_size",
    "layout_does_not_divide",
    "not_supported",
)


def serving_rank(model, job, search) -> dict:
    """``gpuplan serve --rank``: each GPU's best option of the ``plan serve`` search (the same option record, with
    the error bands of its latencies, throughput and price), cheapest first; the GPUs without one, with the counts
    of why."""
    from .search import serve_option_record

    return envelope(
        "serve.rank",
        model={"id": model.id, "params": count_params(model).total},
        job={
            "prompt_tokens": job.prompt_tokens,
            "output_tokens": job.output_tokens,
            "engine": job.engine,
            "max_tpot_s": job.max_tpot_s,
            "max_ttft_s": job.max_ttft_s,
            "batch": job.batch,
            "concurrency": job.concurrency,
            "qps": search.qps,
        },
        searched=search.searched,
        evaluated=search.evaluated,
        feasible=search.feasible,
        grid=search.grid,
        pruned=search.pruned,
        options=[_rank_option_bands(model, job, o, serve_option_record(o)) for o in search.best_per_gpu],
        not_possible=[
            {"gpu": g, "reason": next((r for r in _FURTHEST_FIRST if counts.get(r)), None), "pruned": counts}
            for g, counts in search.pruned_per_gpu.items()
        ],
    )


def _rank_option_bands(model, job, o, record: dict) -> dict:
    """One ``serve --rank`` option: the ``plan serve`` option record, the keys ``serve --rank`` had before (batch,
    $ per GPU-hour, tokens/s per GPU, the KV room), and the error bands of its latencies, throughput and price."""
    from dataclasses import replace

    from .bands import serving_bands

    bands = serving_bands(o.gpu, replace(job, weights=o.weights, kv_cache=o.kv_cache, engine=o.engine), o.report,
                          model, o.weights)  # fmt: skip
    row = {
        **record,
        "batch": o.report.batch,
        "usd_per_gpu_hour": o.offer.usd_per_gpu_hour,
        "tokens_per_s_per_gpu": o.report.tokens_per_s / o.tp,
        "max_concurrent_sequences": o.report.max_concurrent_sequences,
    }
    row = _beside(row, bands["ttft"], (("ttft_s", 1),))
    row["ttft_band_class"] = row.pop("band_class")
    row = _beside(row, bands["tpot"], (("tpot_s", 1),))
    row["tpot_band_class"] = row.pop("band_class")
    return _beside(
        row,
        bands["serving_throughput"],
        (("tokens_per_s", 1), ("tokens_per_s_per_gpu", 1), ("usd_per_million_output_tokens", -1)),
    )


def offer_list(offers) -> dict:
    item = offer_items()
    return envelope("offers.list", offers=[item(o) for o in offers])


def offer_items() -> Callable[[Any], dict]:
    """The record of one offer in ``offers list`` (its ``to_dict()``)."""
    return lambda o: o.to_dict()


def _plan_dict(plan) -> dict:
    step = plan.step
    return {
        "compute": {
            "flops_per_token": plan.compute.flops_per_token,
            "total_flops": plan.compute.total_flops,
            "tokens": plan.compute.tokens,
            "epochs": plan.compute.epochs,
            "convention": plan.compute.convention or "model FLOPs, PaLM appendix B",
        },
        "time": {
            "step_s": step.iteration_s if step else None,
            "mfu": plan.time.mfu,
            "mfu_source": plan.mfu_source,
            "seconds": plan.time.seconds,
            "gpu_hours": plan.time.gpu_hours,
            "gpus": plan.time.gpus,
            "tokens_per_s": step.tokens_per_s if step else None,
            "step_parts_s": dict(step.parts) if step else None,
            "matmul_efficiency": step.matmul_efficiency if step else None,
            "matmul_efficiency_source": step.matmul_efficiency_source if step else None,
            "stack": step.stack if step else None,
            "fp8_recipe": step.fp8_recipe if step else None,
            # the flash-attention kernels priced (fa2 or cudnn; null with materialized attention)
            "attention_kernel": step.attention_kernel if step else None,
            # the loss as priced: one fused kernel, or the stack's unfused passes (job.cross_entropy_fusion: as asked)
            "cross_entropy_fusion": step.cross_entropy_fusion if step else None,
            "global_batch": step.global_batch if step else None,
            "global_batch_source": step.global_batch_source if step else None,
            "peak_flops_per_s": plan.time.peak_flops_per_s,
        },
        "cost": {
            "usd": plan.usd,
            "usd_per_gpu_hour": plan.usd_per_gpu_hour,
            "offer": plan.offer.to_dict() if plan.offer else None,
        },
        "seed_rule": {
            "constant": plan.seed_rule_constant,
            "gpus": plan.seed_rule_gpus,
            "formula": "GPUs = tokens_B x epochs x params_B x C / hours, C = 6e18 / (3600 x peak x MFU)",
        },
    }


def with_training_plan(record: dict, plan, step_assumptions, gpu: Accelerator | None = None) -> dict:
    """``gpuplan train --tokens``: the memory record plus compute, time and cost."""
    out = dict(record)
    out.update(_plan_dict(plan))
    out["notes"] = list(record["notes"]) + list(plan.notes)
    step = [x.to_dict() for x in step_assumptions.items()]
    used = out["time"].get("matmul_efficiency")
    for x in step:  # None means "the GPU's MAMF fraction x model_shape_factor": show the value that was used
        if x["name"] == "matmul_efficiency" and x["value"] is None and used:
            x.update(value=used, source=out["time"]["matmul_efficiency_source"])
        elif x["name"] == "scale_out_bytes_per_s_per_gpu" and x["value"] is None and gpu is not None:
            from ..estimate.steptime import scale_out

            value, source = scale_out(gpu, step_assumptions)
            x.update(value=value, source=source)
        elif x["name"] == "power_limit_w" and x["value"] is None and gpu is not None and gpu.tdp_w:
            x.update(value=gpu.tdp_w, source=f"no cap: the GPU's catalog TDP ({gpu.id})")
    # an assumption still unset (no catalog figure to show in its place) is left out of the list, and one both
    # estimates read (fp4_bf16_tail_fraction: --assume sets both) is listed once, as the memory estimate has it
    listed = {x["name"] for x in record["assumptions"]}
    step = [x for x in step if x["value"] is not None and x["name"] not in listed]
    out["assumptions"] = record["assumptions"] + step
    return out


def with_machine(record: dict, machine) -> dict:
    """The ``machine`` block (storage, checkpoints, failures, host, network, energy; figures that cannot be
    computed are absent), its assumptions with their sources, and its notes."""
    out = dict(record)
    out["machine"] = machine.to_dict()
    out["assumptions"] = list(record["assumptions"]) + [x.to_dict() for x in machine.assumptions]
    out["notes"] = list(record["notes"]) + list(machine.notes)
    return out


def with_calibration(record: dict, calibration) -> dict:
    """``--calibration FILE`` on ``train``/``serve``: what the profile replaced (each figure also cites it as
    its source under ``assumptions``), what an explicit --assume kept, the results not used and why; its
    notes join the record's. ``calibration`` None (no profile given) gives ``"calibration": null``."""
    out = dict(record)
    out["calibration"] = calibration.to_dict() if calibration is not None else None
    if calibration is not None:
        out["notes"] = list(record["notes"]) + list(calibration.notes)
    return out


def offer_ranking(model, layout, job, tokens, epochs, ranked) -> dict:
    """``gpuplan train --rank``: offers that can run the job, cheapest first, and those that cannot."""
    from .bands import training_band
    from .training import pareto_front

    fit = [r for r in ranked if r.fits]
    front = set(pareto_front([(r.plan.time.seconds, r.plan.usd) for r in fit]))
    rows = []
    bands: dict[tuple[int, int, str], Any] = {}  # training_band reads only these (offers share GPUs and steps)
    for i, r in enumerate(fit):
        plan = r.plan
        key = (id(r.gpu), id(plan.step), plan.mfu_source)
        band = bands[key] if key in bands else bands.setdefault(key, training_band(r.gpu, job, plan, model))
        t = plan.time
        # what _beside(_beside(row, band, (("mfu", 1),), cap=1.0), band, (seconds, gpu_hours, usd: -1)) gives,
        # written at once (a ranking may hold 100,000 rows)
        mfu, mfu_band = t.mfu, _interval(band, t.mfu, 1, 1.0)
        seconds, gpu_hours, usd = t.seconds, t.gpu_hours, plan.usd
        seconds_band, hours_band, usd_band = (_interval(band, v, -1) for v in (seconds, gpu_hours, usd))
        rows.append(
            {
                "offer": r.offer.to_dict(),
                "gpu": r.gpu.id,
                "gpus": plan.layout.gpus,
                "mfu": mfu,
                "mfu_p10": mfu_band[0],
                "mfu_p90": mfu_band[1],
                "seconds": seconds,
                "seconds_p10": seconds_band[0],
                "seconds_p90": seconds_band[1],
                "gpu_hours": gpu_hours,
                "gpu_hours_p10": hours_band[0],
                "gpu_hours_p90": hours_band[1],
                "usd": usd,
                "usd_p10": usd_band[0],
                "usd_p90": usd_band[1],
                "pareto": i in front,
                "band_class": band.band_class if band is not None else None,
            }
        )
    return envelope(
        "train.rank",
        model={"id": model.id},
        tokens=tokens,
        epochs=epochs,
        layout={"gpus": layout.gpus, "tp": layout.tp, "pp": layout.pp, "cp": layout.cp, "zero": layout.zero},
        job={"micro_batch": job.micro_batch, "seq_len": job.seq_len, "precision": job.precision, "method": job.method},
        options=rows,
        cannot_run=[{"offer": r.offer.id, "gpu": r.gpu.id, "reason": r.reason} for r in ranked if not r.fits],
    )


def tco_record(gpu, gpus, case, cost, offers, purchase_row, data, period_years: float) -> dict:
    """``gpuplan tco``: owning vs renting ``gpus`` GPUs over ``period_years`` (the purchase paid off over
    ``case.years``, its useful life)."""
    from ..units import MAX_GPUS, check_range

    check_range(gpus, "--gpus", 1, MAX_GPUS)
    check_range(period_years, "--years", 0.0, 1000.0, low_open=True, why="the period compared, in years")
    hours_used = 8760 * case.utilization * period_years * gpus
    owned_total = cost.per_year * period_years * gpus
    rentals = []
    for o in offers:
        u = cost.break_even_utilization(o.usd_per_gpu_hour)
        rentals.append(
            {
                "offer": o.id,
                "provider": o.provider,
                "instance": o.instance,
                "pricing": o.pricing,
                "price_date": o.price_date,
                "usd_per_gpu_hour": o.usd_per_gpu_hour,
                "rent_usd": o.usd_per_gpu_hour * hours_used,
                "owning_saves_usd": o.usd_per_gpu_hour * hours_used - owned_total,
                "break_even_utilization": u,
            }
        )
    sources = {k: v.model_dump() for k, v in data.defaults_sources.items()}
    return envelope(
        "tco",
        gpu={"id": gpu.id, "tdp_w": gpu.tdp_w},
        gpus=gpus,
        period_years=period_years,
        inputs={k: getattr(case, k) for k in case.__dataclass_fields__},
        purchase_source=purchase_row.model_dump() if purchase_row else {"kind": "given"},
        owned={
            "capital_usd_per_gpu_year": cost.capital_per_year,
            "hosting_usd_per_gpu_year": cost.hosting_per_year,
            "staff_usd_per_gpu_year": cost.staff_per_year,
            "energy_usd_per_used_gpu_hour": cost.energy_per_used_hour,
            "usd_per_gpu_year": cost.per_year,
            "usd_per_used_gpu_hour": cost.per_used_hour,
            "total_usd": owned_total,
            "used_gpu_hours": hours_used,
        },
        rentals=rentals,
        sources=sources,
        method="capital recovery factor r/(1-(1+r)^-n) x (GPU + server); energy TDP x host factor x PUE x $/kWh while "
        "busy; colocation $/kW-month on capacity; break-even u* = fixed/(8760 (rent - energy per hour))",
    )


# ------------------------------------------------------------------------------------------ error bands

#: What a missing band means, in the record's ``bands`` block.
_NO_BAND_TABLE = "no error-band table (data/bands.json): run scripts/build_bands.py"
_NO_BAND_MFU = "no band: the time follows the MFU given (--mfu), not the step-time model the bands describe"


def _beside(block: dict, band, specs: tuple[tuple[str, int], ...], cap: float | None = None) -> dict:
    """``block`` with ``KEY_p10`` / ``KEY_p90`` right after each banded ``KEY`` (``None`` when there is no
    band or no value) and ``band_class``; ``specs``: (key, exponent: 1 with the band's reference, -1 against)."""
    out: dict = {}
    banded = dict(specs)
    for key, value in block.items():
        out[key] = value
        if key in banded:
            out[f"{key}_p10"], out[f"{key}_p90"] = _interval(band, value, banded[key], cap)
    out["band_class"] = band.band_class if band is not None else None
    return out


def _interval(band, value, exponent: int, cap: float | None = None) -> tuple[float | None, float | None]:
    """(p10, p90) of ``value`` in ``band`` (``Band.interval``), each at most ``cap``; (None, None) without a band
    or a value."""
    lo, hi = band.interval(value, exponent) if band is not None else (None, None)
    if cap is not None and lo is not None and hi is not None:
        lo, hi = min(lo, cap), min(hi, cap)
    return lo, hi


def _bands_block(bands: dict, why_none: str) -> dict:
    from .bands import LEVELS, METHOD

    return {
        "levels": list(LEVELS),
        "method": METHOD,
        "families": {k: (b.to_dict() if b is not None else None) for k, b in bands.items()},
        "note": None if all(b is not None for b in bands.values()) else why_none,
    }


def with_training_bands(record: dict, band, mfu_given: bool = False) -> dict:
    """``train --tokens``: a P10-P90 error band beside the step time, time to train, GPU-hours, tokens/s, MFU
    (capped at 1) and cost (``*_p10`` / ``*_p90``), the class used (``band_class``) and the ``bands`` block
    (:mod:`gpuplan.plan.bands`)."""
    out = dict(record)
    time = _beside(
        dict(record["time"]), band, (("step_s", -1), ("seconds", -1), ("gpu_hours", -1), ("tokens_per_s", 1))
    )
    out["time"] = _beside(time, band, (("mfu", 1),), cap=1.0)
    out["cost"] = _beside(dict(record["cost"]), band, (("usd", -1),))
    out["bands"] = _bands_block({"training_throughput": band}, _NO_BAND_MFU if mfu_given else _NO_BAND_TABLE)
    return out


def with_serving_bands(record: dict, bands: dict) -> dict:
    """``serve``: P10-P90 error bands beside TTFT, TPOT and request latency, the throughputs and the $ per
    million tokens (``*_p10`` / ``*_p90``), each block's ``band_class``, and the ``bands`` block."""
    out = dict(record)
    lat = _beside(dict(record["latency"]), bands.get("ttft"), (("ttft_s", 1),))
    lat["ttft_band_class"] = lat.pop("band_class")
    lat = _beside(lat, bands.get("tpot"), (("tpot_s", 1), ("request_latency_s", 1)))
    lat["tpot_band_class"] = lat.pop("band_class")
    out["latency"] = lat
    thr = bands.get("serving_throughput")
    out["throughput"] = _beside(
        dict(record["throughput"]),
        thr,
        (("tokens_per_s", 1), ("requests_per_s", 1), ("tokens_per_s_per_gpu", 1), ("input_tokens_per_s", 1)),
    )
    if record.get("cost") is not None:
        out["cost"] = _beside(
            dict(record["cost"]),
            thr,
            (
                ("usd_per_million_output_tokens", -1),
                ("usd_per_million_input_tokens", -1),
                ("usd_per_million_tokens_blended", -1),
            ),
        )
    out["bands"] = _bands_block(bands, _NO_BAND_TABLE)
    return out
