"""``gpuplan local detect`` and ``gpuplan local bench``: this machine, through the API; the progress bars
and the --save file are drawn and written here."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from .. import api
from ..spec.choices import BenchDtype, BenchSuite, values
from ._common import check_output_path, emit, flag_errors, json_option, number, offline_option, run, write_output


@click.group()
def local() -> None:
    """This machine: what it has (detect) and what it really achieves (bench)."""


@local.command("detect")
@json_option
@click.pass_context
def local_detect(ctx: click.Context, as_json: bool) -> None:
    """GPUs (NVML), links, topology, driver; CPU cores, RAM, NUMA nodes and disks. Works without a GPU."""
    run(ctx, api.local_detect, "detect_report", as_json)


@local.command("bench")
@click.argument("which", type=click.Choice(values(BenchSuite)), default=BenchSuite.ALL.value)
@click.option("--quick/--full", default=True, show_default=True, help="Fewer shapes and iterations, or the full runs.")
@click.option(
    "--dtype",
    multiple=True,
    type=click.Choice(values(BenchDtype)),
    help="Matmul dtypes [default: bf16, fp16, fp8, tf32, each where the GPU supports it].",
)
@click.option(
    "--path",
    type=click.Path(path_type=Path),
    default=Path("."),
    show_default=True,
    help="Disk: folder on the disk to test; the files go in a private subfolder, removed afterwards.",
)
@click.option(
    "--writers",
    type=number("writers"),
    default=4,
    show_default=True,
    help="Disk: files written (and read) at once, like ranks saving a checkpoint.",
)
@click.option("--file-size", help="Disk: size of each file, e.g. 4GiB [default: 256MiB quick, 2GiB full].")
@click.option(
    "--payload",
    multiple=True,
    help="Collectives: payload size, repeatable, e.g. --payload 64MiB [default: 1, 16, 256 MiB; --full: "
    "64 KiB to 1 GiB].",
)
@click.option("--model", help="Benchmark the GEMM shapes of this model (4096 tokens x each linear layer).")
@click.option("--save", type=click.Path(dir_okay=False, path_type=Path), help="Write a calibration profile (JSON).")
@offline_option
@json_option
@click.pass_context
def local_bench(ctx: click.Context, save: Path | None, as_json: bool, **options: Any) -> None:
    """Measure what this machine achieves, beside the datasheet; --save a profile for --calibration.

    Collectives run across ranks: torchrun --nproc-per-node 8 -m gpuplan local bench allreduce
    """
    if save is not None:
        check_output_path(save, "--save")  # before any benchmark runs
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not sys.stderr.isatty() or int(os.environ.get("RANK", 0)) != 0,
    ) as bars:

        @contextmanager
        def progress(label: str) -> Iterator[Callable[[int, int], None]]:
            task = bars.add_task(label, total=None)
            try:
                yield lambda done, total: bars.update(task, completed=done, total=total)
            finally:
                bars.remove_task(task)

        with flag_errors():
            report = api.local_bench(options.pop("which"), progress=progress, catalog=ctx.obj.catalogs, **options)
    if report is None:
        return  # under torchrun: rank 0 reports and saves
    if save:
        write_output(save, json.dumps(report.to_dict(), indent=2) + "\n", "--save")
        click.echo(f"gpuplan: saved calibration profile to {save}", err=True)
    emit(ctx, report.to_dict(), as_json, "bench_report")  # the profile is the record (kind "calibration")
