"""``gpuplan plan train`` and ``gpuplan plan serve``: flags in, one ``gpuplan.plan_train`` / ``plan_serve`` call,
a table or JSON out (exit 3 when nothing meets the constraints, with the pruned counts)."""

from __future__ import annotations

from typing import Any

import click

from .. import api
from ..spec.choices import Method, Objective, PlanPricing, Precision, Pricing, Quant, values
from ._common import checkpoint_options, default, given, json_option, like_option, number, offline_option, run
from .train import parse_assume


@click.group()
def plan() -> None:
    """What should I run this on? Search GPUs, counts, layouts and offers for a training run or a serving load."""


@plan.command("train")
@click.argument("model_name", metavar="MODEL")
@click.option("--tokens", required=True, callback=given, help="Training tokens, e.g. 2T.")
@click.option("--deadline", callback=given, help="Latest time to train, e.g. 30d.")
@click.option("--budget", callback=given, help="Most dollars to spend, e.g. 2M or $2M.")
@click.option("--gpus", type=number("gpus"), help="A fixed GPU count (the cluster one has).")
@click.option(
    "--max-gpus",
    type=number("gpus"),
    default=default(api.plan_train, "max_gpus"),
    show_default=True,
    help="Largest count searched.",
)
@click.option(
    "--gpu",
    default=default(api.plan_train, "gpu"),
    show_default=True,
    help="GPUs to search: ids or aliases, comma-separated, or 'all'.",
)
@click.option("--providers", help="Only these providers' offers, comma-separated (e.g. aws,gcp).")
@click.option(
    "--pricing",
    type=click.Choice(values(PlanPricing)),
    default=default(api.plan_train, "pricing"),
    show_default=True,
    help="Offers of this pricing kind, or 'owned': hardware bought, priced as 'gpuplan tco' prices it.",
)
@click.option(
    "--utilization",
    type=number("utilization"),
    help="With --pricing owned: share of the owned GPUs' hours doing paid work (0.001-1) [default: tco's, 0.7].",
)
@click.option(
    "--explain",
    metavar="LAYOUT",
    help="Where this layout ranks, or why it was pruned, and what it loses to option 1, e.g. "
    "'tp=8,pp=16,dp=128,micro_batch=1,recompute=full,zero=1' (an option's layout keys; gpu=, gpus= too).",
)
@click.option(
    "--objective",
    type=click.Choice(values(Objective)),
    default=default(api.plan_train, "objective"),
    show_default=True,
)
@click.option(
    "--top",
    type=number("top"),
    default=default(api.plan_train, "top"),
    show_default=True,
    help="Options shown, best first.",
)
@click.option("--global-batch", type=number("global_batch"), help="Sequences per step [default: the size rule].")
@click.option("--seq-len", type=number("seq_len"), help="Tokens per sequence [default: 4096 capped at the context].")
@click.option(
    "--precision",
    default=default(api.plan_train, "precision"),
    show_default=True,
    help=f"Precision searched: one of {', '.join(values(Precision))}, a comma list of them, or 'any' "
    "(bf16-mixed and fp8-mixed; fp8 only on GPUs with an fp8 peak).",
)
@click.option(
    "--method",
    type=click.Choice(values(Method)),
    default=default(api.plan_train, "method"),
    show_default=True,
    help="Full training, or a LoRA/QLoRA fine-tune (adapters trained, frozen base) in every candidate.",
)
@click.option("--lora-rank", type=number("lora_rank"), default=default(api.plan_train, "lora_rank"), show_default=True)
@click.option(
    "--lora-targets",
    default=default(api.plan_train, "lora_targets"),
    show_default=True,
    help="Comma-separated module names, or all-linear.",
)
@click.option("--quant", type=click.Choice(values(Quant)), help="Quantized frozen base (qlora implies nf4).")
@checkpoint_options(api.plan_train)
@click.option(
    "--assume", multiple=True, metavar="NAME=VALUE", help="Override a memory, step-time or machine assumption."
)
@offline_option
@like_option
@json_option
@click.pass_context
def plan_train(ctx: click.Context, model_name: str, assume: tuple[str, ...], as_json: bool, **options: Any) -> None:
    """Search GPU x count x layout x offer for training MODEL on --tokens; the best by --objective.

    Every candidate is timed and sized by the same functions as 'gpuplan train'; pruned ones are counted by reason.
    """
    run(ctx, api.plan_train, "plan_train_report", as_json, model_name, assume=parse_assume(assume), **options)


@plan.command("serve")
@click.argument("model_name", metavar="MODEL")
@click.option("--qps", required=True, callback=given, help="Requests per second to serve.")
@click.option(
    "--prompt-tokens", type=number("prompt_tokens"), default=default(api.plan_serve, "prompt_tokens"), show_default=True
)
@click.option(
    "--output-tokens", type=number("output_tokens"), default=default(api.plan_serve, "output_tokens"), show_default=True
)
@click.option("--max-ttft", callback=given, help="Largest time to first token, e.g. 2s.")
@click.option("--max-tpot", callback=given, help="Largest time per output token, e.g. 50ms.")
@click.option(
    "--gpu",
    default=default(api.plan_serve, "gpu"),
    show_default=True,
    help="GPUs to search: ids, comma-separated, or 'all'.",
)
@click.option("--providers", help="Only these providers' offers, comma-separated.")
@click.option(
    "--pricing", type=click.Choice(values(Pricing)), default=default(api.plan_serve, "pricing"), show_default=True
)
@click.option(
    "--engine", default=default(api.plan_serve, "engine"), show_default=True, help="Engine profiles to search."
)
@click.option(
    "--top",
    type=number("top"),
    default=default(api.plan_serve, "top"),
    show_default=True,
    help="Options shown, cheapest first.",
)
@click.option("--assume", multiple=True, metavar="NAME=VALUE", help="Override an inference assumption.")
@offline_option
@like_option
@json_option
@click.pass_context
def plan_serve(ctx: click.Context, model_name: str, assume: tuple[str, ...], as_json: bool, **options: Any) -> None:
    """Search GPU x weight format x tp x engine for serving MODEL at --qps; cheapest $ per million output tokens.

    Each replica is planned by the same functions as 'gpuplan serve'; replicas are added to meet --qps.
    """
    run(ctx, api.plan_serve, "plan_serve_report", as_json, model_name, assume=parse_assume(assume), **options)
