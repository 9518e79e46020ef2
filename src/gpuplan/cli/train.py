"""``gpuplan train``: flags in, one ``gpuplan.train`` call, a table or JSON out (and the --plot chart)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .. import api
from ..spec.choices import (
    AttentionKernel,
    Fp8Recipe,
    MainGrads,
    Method,
    MoeDispatchDtype,
    MoeDispatcher,
    Offload,
    Optimizer,
    OptimizerDtype,
    PipelineSchedule,
    Precision,
    Quant,
    Recipe,
    Recompute,
    Stack,
    values,
)
from ._common import (
    check_output_path,
    checkpoint_options,
    default,
    emit,
    flag_errors,
    gc_paused,
    given,
    json_option,
    like_option,
    number,
    offline_option,
    write_output,
)


def parse_assume(items: tuple[str, ...]) -> dict[str, str]:
    """``--assume NAME=VALUE`` (repeatable) as the API's ``assume`` mapping; the library checks the names."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(
                f"'{item}': use NAME=VALUE (the names are listed under assumptions in the --json output)",
                param_hint="--assume",
            )
        name = name.strip()
        if name in out and out[name].strip() != value.strip():
            # two values for one assumption contradict each other: the first would be silently dropped
            raise click.BadParameter(
                f"{name} given twice ({out[name]} and {value}): give it once", param_hint="--assume"
            )
        out[name] = value
    return out


def _d(name: str) -> Any:
    return default(api.train, name)


@click.command()
@click.argument("model_name", metavar="MODEL")
@click.option("--gpu", required=True, help="Accelerator id or alias (gpuplan gpus list).")
@click.option(
    "--gpus",
    type=number("gpus"),
    help="Number of GPUs [default: tp x pp x cp (more where --ep x --etp needs), or what --deadline needs].",
)
@click.option("--tp", type=number("tp"), default=_d("tp"), show_default=True, help="Tensor-parallel degree.")
@click.option("--pp", type=number("pp"), default=_d("pp"), show_default=True, help="Pipeline-parallel degree.")
@click.option("--cp", type=number("cp"), default=_d("cp"), show_default=True, help="Context-parallel degree.")
@click.option("--ep", type=number("ep"), default=_d("ep"), show_default=True, help="Expert-parallel degree (MoE).")
@click.option(
    "--etp",
    type=number("etp"),
    help="Expert tensor-parallel degree (MoE; Megatron-Core --expert-tensor-parallel-size) [default: --tp]; "
    "ep x etp must divide gpus / pp.",
)
@click.option("--sequence-parallel", is_flag=True, help="Megatron sequence parallelism (needs --tp > 1).")
@click.option("--zero", type=number("zero"), default=_d("zero"), show_default=True, help="ZeRO stage (0-3).")
@click.option("--fsdp", is_flag=True, help="PyTorch FSDP full sharding (ZeRO-3 semantics, FSDP recipe).")
@click.option(
    "--offload",
    type=click.Choice(values(Offload)),
    default=_d("offload"),
    show_default=True,
    help="To CPU memory: ZeRO-Offload of optimizer states (or params too, ZeRO-3), or saved activations.",
)
@click.option(
    "--micro-batch",
    type=number("micro_batch"),
    default=_d("micro_batch"),
    show_default=True,
    help="Sequences per GPU per micro-step.",
)
@click.option(
    "--global-batch", type=number("global_batch"), help="Sequences per optimizer step (gradient accumulation follows)."
)
@click.option(
    "--seq-len", type=number("seq_len"), help="Tokens per sequence [default: 4096, capped at the model's context]."
)
@click.option(
    "--recompute",
    type=click.Choice(values(Recompute)),
    default=_d("recompute"),
    show_default=True,
    help="Activation recomputation: selective (Korthikanti), per-op (torchtitan SAC), partial, full.",
)
@click.option(
    "--recompute-layers",
    type=number("recompute_layers"),
    help="With --recompute partial: decoder layers per pipeline stage fully recomputed (the rest keep all).",
)
@click.option(
    "--recompute-modules",
    help="With --recompute selective: comma list of what re-runs in backward, as Megatron-Core's --recompute-modules: "
    "core_attn (the default), layernorm, mlp, moe, moe_act, shared_experts, mla_up_proj.",
)
@click.option(
    "--offload-layers",
    type=number("offload_layers"),
    help="With --offload activations: decoder layers per stage whose saved activations go to host memory "
    "[default: all].",
)
@click.option("--flash-attention/--no-flash-attention", default=_d("flash_attention"), show_default=True)
@click.option(
    "--dropout/--no-dropout", default=_d("dropout"), show_default=True, help="Dropout layers (masks are saved)."
)
@click.option("--precision", type=click.Choice(values(Precision)), default=_d("precision"), show_default=True)
@click.option(
    "--recipe",
    type=click.Choice(values(Recipe)),
    default=_d("recipe"),
    show_default=True,
    help="Framework accounting of mixed precision (auto picks from the layout).",
)
@click.option(
    "--stack",
    type=click.Choice(values(Stack)),
    default=_d("stack"),
    show_default=True,
    help="Software stack of the step time: megatron (fused kernels), fsdp2 (torchtitan-style eager PyTorch), "
    "deepspeed, hf, jax (XLA-compiled, MaxText-style FSDP); megatron-2021 and deepspeed-2021 as they ran in 2021; "
    "auto is jax on a TPU and follows --recipe elsewhere.",
)
@click.option(
    "--fp8-recipe",
    type=click.Choice(values(Fp8Recipe)),
    default=_d("fp8_recipe"),
    show_default=True,
    help="Low-precision scaling: with --precision fp8-mixed delayed (TE), tensorwise, rowwise, blockwise, mxfp8; "
    "with --precision fp4-mixed nvfp4 (auto).",
)
@click.option("--compile", is_flag=True, help="torch.compile: element-wise kernels fused (as Megatron's are).")
@click.option(
    "--overlap-grad-reduce/--no-overlap-grad-reduce",
    default=None,
    help="Overlap the data-parallel gradient reduction with backward [default: the stack's].",
)
@click.option(
    "--overlap-param-gather/--no-overlap-param-gather",
    default=None,
    help="Overlap the all-gather of updated parameters (ZeRO-1/2, distributed optimizer) with the next forward "
    "[default: off].",
)
@click.option("--tp-comm-overlap", is_flag=True, help="Overlap tensor-parallel collectives with GEMMs (TE/async TP).")
@click.option(
    "--cross-entropy-fusion/--no-cross-entropy-fusion",
    default=None,
    help="The loss over the logits in one fused kernel (Megatron-LM --cross-entropy-loss-fusion) [default: the "
    "stack's: off on megatron, fused under --compile and jax].",
)
@click.option(
    "--ep-comm-overlap",
    is_flag=True,
    help="MoE: run the expert all-to-all beside another micro-batch's compute (Megatron-Core "
    "--overlap-moe-expert-parallel-comm, DualPipe).",
)
@click.option(
    "--moe-dispatch-dtype",
    type=click.Choice(values(MoeDispatchDtype)),
    default="bf16",
    show_default=True,
    help="MoE: dtype of the dispatch all-to-all (fp8: DeepEP's, per-128 scales; the combine stays 16-bit).",
)
@click.option(
    "--moe-dispatcher",
    type=click.Choice(values(MoeDispatcher)),
    default="alltoall",
    show_default=True,
    help="MoE: token dispatcher: alltoall (a copy per routed expert) or deepep (once per destination node over "
    "the network, once per rank over NVLink; Megatron-Core's flex dispatcher).",
)
@click.option(
    "--attention-kernel",
    type=click.Choice(values(AttentionKernel)),
    default="auto",
    show_default=True,
    help="Flash-attention kernels: fa2 (FlashAttention-2; PyTorch SDPA's default up to 2.8), cudnn (cuDNN fused "
    "attention, FlashAttention-3, Transformer Engine; PyTorch SDPA's default on Hopper/Blackwell since 2.9); auto: "
    "the stack's (cudnn; fa2 on deepspeed-2021). Older GPUs run both at the same rate.",
)
@click.option(
    "--main-grads",
    type=click.Choice(values(MainGrads)),
    help="dtype of the data-parallel gradient reduction: the Megatron recipes' gradient buffer (Megatron-LM "
    "--grad-reduce-in-bf16, NeMo grad_sync_dtype) or FSDP's reduce_dtype [default: the recipe's, fp32].",
)
@click.option(
    "--optimizer-dtype",
    type=click.Choice(values(OptimizerDtype)),
    help="Optimizer states and main params, Megatron recipes (Apex DistributedFusedAdam dtype as NeMo sets it, "
    "Megatron-Core --exp-avg-dtype/--main-params-dtype) [default: the recipe's, fp32].",
)
@click.option(
    "--fp8-params",
    is_flag=True,
    help="fp8 weights (Megatron-LM --fp8-param-gather, NeMo fp8_params), with --precision fp8-mixed.",
)
@click.option("--optimizer", type=click.Choice(values(Optimizer)), default=_d("optimizer"), show_default=True)
@click.option("--method", type=click.Choice(values(Method)), default=_d("method"), show_default=True)
@click.option("--lora-rank", type=number("lora_rank"), default=_d("lora_rank"), show_default=True)
@click.option(
    "--lora-targets", default=_d("lora_targets"), show_default=True, help="Comma-separated module names, or all-linear."
)
@click.option("--quant", type=click.Choice(values(Quant)), help="Quantized frozen base (qlora implies nf4).")
@click.option(
    "--assume",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override an assumption, e.g. cuda_context_bytes=1GiB (names in the --json output).",
)
@click.option("--tokens", callback=given, help="Training tokens, e.g. 2T: adds FLOPs, time, GPU-hours and cost.")
@click.option("--epochs", type=number("epochs"), default=_d("epochs"), show_default=True)
@click.option("--mfu", type=number("mfu"), help="Model FLOPs utilization to assume instead of predicting it (0.001-1).")
@click.option("--deadline", callback=given, help="Finish within, e.g. 30d: picks the GPU count (instead of --gpus).")
@click.option("--offer", help="Price with this offer (gpuplan offers list).")
@click.option("--usd-per-gpu-hour", callback=given, help="Price per GPU-hour, e.g. $2.5/h (instead of --offer).")
@click.option(
    "--pipeline-schedule",
    type=click.Choice(values(PipelineSchedule)),
    help="1f1b, or interleaved (needs --virtual-stages N): Megatron-LM's names for the pipeline schedule.",
)
@click.option(
    "--distributed-optimizer",
    is_flag=True,
    help="Megatron-LM --use-distributed-optimizer: optimizer states sharded over data parallelism (= --zero 1).",
)
@click.option(
    "--virtual-stages",
    type=number("virtual_stages"),
    default=_d("virtual_stages"),
    show_default=True,
    help="Interleaved pipeline chunks per GPU (Megatron virtual pipeline).",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A profile from 'gpuplan local bench --save': measured efficiencies replace datasheet ones.",
)
@click.option("--rank", is_flag=True, help="Rank every offer that can run the job by cost and time.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="With --rank: write an HTML chart.")
@click.option(
    "--bytes-per-token",
    help="Stored bytes per training token [default: 2 below 65,500 vocabulary entries (uint16), else 4].",
)
@click.option(
    "--bytes-per-sample",
    help="Stored bytes per training sample, one sequence of --seq-len tokens (images, audio: non-text data); "
    "instead of --bytes-per-token.",
)
@checkpoint_options(api.train)
@click.option("--grid-gco2-per-kwh", help="Grid carbon intensity for CO2eq, g/kWh [default: 480, world 2023 (Ember)].")
@click.option(
    "--require-fit",
    is_flag=True,
    hidden=True,
    expose_value=False,
    help="Kept for old scripts: exit code 3 when the job does not fit is now the default.",
)
@offline_option
@like_option
@json_option
@click.pass_context
def train(
    ctx: click.Context, model_name: str, assume: tuple[str, ...], plot: Path | None, as_json: bool, **options: Any
) -> None:
    """Will training or fine-tuning MODEL fit, how long will it take and what will it cost?

    Memory per GPU, itemized, with the largest micro-batch; with --tokens also FLOPs, predicted step time
    and MFU, time to train, GPU-hours and cost; --deadline picks the GPU count; --rank compares offers.
    """
    if plot is not None:
        if not options["tokens"]:
            raise click.BadParameter(
                "--deadline, --rank, --mfu, --offer, --usd-per-gpu-hour, --plot and --calibration need --tokens",
                param_hint="--tokens",
            )
        if not options["rank"]:
            raise click.BadParameter("--plot draws the --rank comparison; add --rank", param_hint="--plot")
        check_output_path(plot, "--plot")
    with flag_errors():
        report = api.train(model_name, assume=parse_assume(assume), catalog=ctx.obj.catalogs, **options)
    with gc_paused():  # a ranking's record may hold 100,000 rows
        record = report.to_dict()
        if plot is not None:
            from ..render.plot import ranking_html

            write_output(plot, ranking_html(record), "--plot")
        emit(ctx, record, as_json, "offer_ranking" if options["rank"] else "train_report")
    if report.exit_code:
        raise click.exceptions.Exit(report.exit_code)
