"""``gpuplan serve``: flags in, one ``gpuplan.serve`` call, a table or JSON out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .. import api
from ..spec.choices import Engine, KvCache, Storage, Weights, values
from ._common import default, given, json_option, like_option, number, offline_option, run
from .train import parse_assume


def _d(name: str) -> Any:
    return default(api.serve, name)


@click.command()
@click.argument("model_name", metavar="MODEL")
@click.option("--gpu", required=True, help="Accelerator id or alias (gpuplan gpus list).")
@click.option("--tp", type=number("tp"), default=_d("tp"), show_default=True, help="Tensor-parallel GPUs per replica.")
@click.option("--pp", type=number("pp"), default=_d("pp"), show_default=True, help="Pipeline stages per replica.")
@click.option(
    "--replicas",
    type=number("replicas"),
    default=_d("replicas"),
    show_default=True,
    help="Replicas (without --qps/--qpm).",
)
@click.option(
    "--weights",
    type=click.Choice(values(Weights)),
    default=_d("weights"),
    show_default=True,
    help="Weight format (bits per parameter with scales: gpuplan's estimate/quant.py).",
)
@click.option("--kv-cache", type=click.Choice(values(KvCache)), default=_d("kv_cache"), show_default=True)
@click.option("--prompt-tokens", type=number("prompt_tokens"), default=_d("prompt_tokens"), show_default=True)
@click.option("--output-tokens", type=number("output_tokens"), default=_d("output_tokens"), show_default=True)
@click.option("--batch", type=number("batch"), help="Static batch: prompts prefilled together, decoded together.")
@click.option("--concurrency", type=number("concurrency"), help="Continuous batching: sequences decoding at once.")
@click.option("--context", type=number("context"), help="KV tokens reserved per sequence [default: prompt + output].")
@click.option(
    "--max-tpot",
    callback=given,
    help="Largest time per output token, e.g. 50ms (picks the largest batch that meets it).",
)
@click.option("--max-ttft", callback=given, help="Largest time to first token, e.g. 2s.")
@click.option("--qps", callback=given, help="Requests per second to serve (sizes the fleet).")
@click.option("--qpm", callback=given, help="Requests per minute to serve (sizes the fleet).")
@click.option("--usd-per-gpu-hour", callback=given, help="GPU price, e.g. $2.5/h, for $ per million tokens.")
@click.option("--offer", help="Price with this offer (gpuplan offers list) instead of --usd-per-gpu-hour.")
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A profile from 'gpuplan local bench --save': measured bandwidth replaces the default efficiency.",
)
@click.option(
    "--engine",
    type=click.Choice(values(Engine)),
    default=_d("engine"),
    show_default=True,
    help="Engine profile: batch cap, token budget per step, step overhead (gpuplan's ENGINE_PROFILES, each "
    "with its source; --assume overrides). vllm, sglang, trtllm, tgi: continuous batching with chunked "
    "prefill; llama.cpp: one slot; compiled: one CUDA-graph stream (gpt-fast-like); server = vllm.",
)
@click.option("--assume", multiple=True, metavar="NAME=VALUE", help="Override an assumption.")
@click.option(
    "--storage",
    type=click.Choice(values(Storage)),
    default=_d("storage"),
    show_default=True,
    help="Where the weights are read from at cold start (sourced default bandwidths).",
)
@click.option(
    "--rank",
    is_flag=True,
    help="Each GPU's best option of 'gpuplan plan serve' (weights, KV cache, TP, engine, replicas for --qps, "
    "batch) under --max-tpot/--max-ttft, cheapest $ per million output tokens first; --engine server (the "
    "default) searches vllm, sglang and trtllm.",
)
@click.option(
    "--require-fit",
    is_flag=True,
    hidden=True,
    expose_value=False,
    help="Kept for old scripts: exit code 3 when it does not fit or misses a target is now the default.",
)
@offline_option
@like_option
@json_option
@click.pass_context
def serve(ctx: click.Context, model_name: str, assume: tuple[str, ...], as_json: bool, **options: Any) -> None:
    """Serving MODEL: memory, latency (TTFT, TPOT), throughput, GPUs for a load, and $ per million tokens.

    With --rank, --gpu names the GPUs to compare (comma-separated, or 'all').
    """
    run(
        ctx,
        api.serve,
        "serve_rank" if options["rank"] else "serve_report",
        as_json,
        model_name,
        assume=parse_assume(assume),
        **options,
    )
