"""``gpuplan gpus``, ``gpuplan offers`` and ``gpuplan model``: the catalogs, each command one API call."""

from __future__ import annotations

import click

from .. import api
from ..spec.choices import GpuSort, OfferSort, Pricing, values
from ._common import default, given, json_option, like_option, number, offline_option, run


@click.group()
def gpus() -> None:
    """Accelerators: datasheet specs (dense peaks), with the source of every figure."""


@gpus.command("list")
@click.option("--vendor", help="Only this vendor (nvidia, amd, intel, google, apple, other).")
@click.option(
    "--min-memory",
    callback=given,
    help="Only devices with at least this much memory for a model, e.g. 40GB or 80GiB: a card's marketed memory; "
    "on a unified-memory Mac the GPU's default share of the RAM, not the RAM.",
)
@click.option("--dtype", help="Only devices with a peak for this dtype: fp64 fp32 tf32 fp16 bf16 fp8 int8 fp4.")
@click.option(
    "--sort",
    type=click.Choice(values(GpuSort)),
    default=default(api.gpus, "sort"),
    show_default=True,
    help="Order (numbers: largest first).",
)
@json_option
@click.pass_context
def gpus_list(ctx: click.Context, as_json: bool, **options: object) -> None:
    """List accelerators, filtered and sorted."""
    run(ctx, api.gpus, "gpus_table", as_json, **options)


@gpus.command("show")
@click.argument("gpu")
@json_option
@click.pass_context
def gpus_show(ctx: click.Context, gpu: str, as_json: bool) -> None:
    """Show one accelerator in full, with the source and date of each figure."""
    run(ctx, api.gpu, "gpu_show", as_json, gpu)


@gpus.command("compare")
@click.argument("gpus", nargs=-1, required=True)
@json_option
@click.pass_context
def gpus_compare(ctx: click.Context, gpus: tuple[str, ...], as_json: bool) -> None:
    """Compare accelerators side by side."""
    run(ctx, api.compare_gpus, "gpus_compare", as_json, gpus)


@click.group()
def offers() -> None:
    """Cloud offers: instances, GPUs, prices (dated and sourced); add your own quotes with --catalog."""


@offers.command("list")
@click.option("--gpu", help="Only offers of this accelerator (id or alias).")
@click.option("--provider", help="Only this provider (aws, azure, gcp, lambda, ...).")
@click.option("--pricing", type=click.Choice(values(Pricing)), help="Only this pricing.")
@click.option("--sort", type=click.Choice(values(OfferSort)), default=default(api.offers, "sort"), show_default=True)
@json_option
@click.pass_context
def offers_list(ctx: click.Context, as_json: bool, **options: object) -> None:
    """List offers, cheapest GPU-hour first."""
    run(ctx, api.offers, "offers_table", as_json, **options)


@click.group()
def model() -> None:
    """Models: exact parameter counts, architecture and FLOPs per token."""


@model.command("list")
@click.option("--family", help="Only models of this family (e.g. llama, qwen, deepseek).")
@json_option
@click.pass_context
def model_list(ctx: click.Context, as_json: bool, **options: object) -> None:
    """List the built-in models (and any from your catalog files)."""
    run(ctx, api.models, "models_table", as_json, **options)


@model.command("show")
@click.argument("model_name", metavar="MODEL")
@click.option(
    "--seq-len",
    type=number("seq_len"),
    help="Sequence length for FLOPs per token [default: 4096, capped at the model's context].",
)
@offline_option
@like_option
@json_option
@click.pass_context
def model_show(ctx: click.Context, model_name: str, as_json: bool, **options: object) -> None:
    """Show one model: MODEL is a built-in id, a config.json (or its folder), a Hub id, or a count like 7B."""
    run(ctx, api.model, "model_show", as_json, model_name, **options)
