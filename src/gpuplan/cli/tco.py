"""``gpuplan tco``: rent or buy, one ``gpuplan.tco`` call."""

from __future__ import annotations

from typing import Any

import click

from .. import api
from ._common import default, given, json_option, number, run


def _d(name: str) -> Any:
    return default(api.tco, name)


@click.command()
@click.option("--gpu", required=True, help="Accelerator id or alias.")
@click.option(
    "--gpus", type=number("gpus"), default=_d("gpus"), show_default=True, help="GPUs bought (and rented instead)."
)
@click.option("--years", type=number("years"), help="Period compared [default: the useful life].")
@click.option(
    "--life-years", type=number("life_years"), help="Useful life the purchase is paid off over [default: data file, 5]."
)
@click.option(
    "--utilization",
    type=number("utilization"),
    default=_d("utilization"),
    show_default=True,
    help="Share of the hours the GPUs do paid work (0.001-1).",
)
@click.option(
    "--purchase-usd-per-gpu", callback=given, help="GPU price, e.g. 30000 [default: the data file's estimate]."
)
@click.option(
    "--server-usd-per-gpu", callback=given, help="Server share per GPU [default: data file, or the overhead fraction]."
)
@click.option("--pue", type=number("pue"), help="Power usage effectiveness of the facility.")
@click.option("--usd-per-kwh", type=number("usd_per_kwh"), help="Electricity price.")
@click.option(
    "--hosting-usd-per-kw-month", type=number("hosting_usd_per_kw_month"), help="Colocation price per kW of IT load."
)
@click.option(
    "--staff-usd-per-gpu-year",
    type=number("staff_usd_per_gpu_year"),
    default=_d("staff_usd_per_gpu_year"),
    show_default=True,
    help="Operations staff per GPU per year (no sourced default: 0 unless given).",
)
@click.option(
    "--cost-of-capital", type=number("cost_of_capital"), help="Annual interest rate on the purchase (0.08 = 8 %)."
)
@json_option
@click.pass_context
def tco(ctx: click.Context, as_json: bool, **options: Any) -> None:
    """Rent or buy: yearly cost of owning GPUs against every rental offer, and the break-even utilization."""
    run(ctx, api.tco, "tco_report", as_json, **options)
