"""``gpuplan validate``: one ``gpuplan.validate`` call; a table, JSON, or an HTML page out."""

from __future__ import annotations

from pathlib import Path

import click

from .. import api
from ..spec.choices import ValidateCategory, values
from ._common import check_output_path, emit, flag_errors, json_option, write_output


@click.command()
@click.option(
    "--category",
    type=click.Choice(values(ValidateCategory)),
    help="Score only training throughput, inference latency/throughput, or memory [default: all].",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the results as a static HTML page.",
)
@json_option
@click.pass_context
def validate(ctx: click.Context, category: str | None, html_path: Path | None, as_json: bool) -> None:
    """Score gpuplan against every bundled published figure.

    Every record of data/validation goes through the same code path as train and serve: predicted vs
    published with the signed error, a summary by GPU generation,
    precision, stack and dense/MoE, the records not mapped yet (with the reason), and the
    leave-one-source-out error of the fitted constants.
    """
    if html_path is not None:
        check_output_path(html_path, "--html")
    with flag_errors():
        report = api.validate(category=category, catalog=ctx.obj.catalogs)
    record = report.to_dict()
    if html_path is not None:
        from ..render.validate import validate_html

        write_output(html_path, validate_html(record), "--html")
    emit(ctx, record, as_json, "validate_report")
    if report.exit_code:
        raise click.exceptions.Exit(report.exit_code)
