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
from ..spec.choices import BenchDtype, BenchSuite, TraceSource, values
from ._common import (
    check_output_path,
    default,
    emit,
    flag_errors,
    json_option,
    number,
    offline_option,
    run,
    write_output,
)


@click.group()
def local() -> None:
    """This machine: what it has (detect), achieves (bench), and how a running job does (watch, diagnose)."""


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


def _mfu_options(f: Callable) -> Callable:
    """--gpu, --gpus, --seq-len, --precision, --offline: what turns tokens/s into MFU (watch and diagnose)."""
    from ..spec.choices import Precision

    for option in reversed(
        (
            click.option("--gpu", help="Accelerator id of the MFU's peak [default: the GPU the trace / NVML names]."),
            click.option(
                "--gpus", type=number("gpus"), help="GPUs the job's tokens/s is over [default: the GPUs seen]."
            ),
            click.option("--seq-len", type=number("seq_len"), help="The job's sequence length [default: as train]."),
            click.option(
                "--precision",
                type=click.Choice(values(Precision)),
                default=default(api.local_diagnose, "precision"),
                show_default=True,
                help="The peak's precision, as gpuplan train.",
            ),
            offline_option,
        )
    ):
        f = option(f)
    return f


@local.command("watch", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--interval", default="1s", show_default=True, help="Time between samples, e.g. 500ms, 2s.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The JSONL trace (docs/watch.md); {host} becomes the host name [default: watch-YYYYmmdd-HHMMSS.jsonl here].",
)
@click.option("--pid", type=int, help="Follow this running process (never signalled) instead of running a command.")
@click.option(
    "--pid-of", help="Follow the one running process tree with this name or command-line word (e.g. under srun)."
)
@click.option(
    "--log-regex",
    help="Training progress from the job's output (shown as usual), by named groups: step, step_s, step_ms, "
    "tokens_per_s, tokens_per_s_per_gpu; e.g. 'step (?P<step>\\d+).*?(?P<step_ms>[\\d.]+) ?ms'.",
)
@click.option("--tokens-per-step", help="Tokens in one step (global batch x sequence), for tokens/s from step times.")
@click.option("--model", help="With --log-regex: the live MFU of this model (FLOPs per token as gpuplan train counts).")
@click.option(
    "--live",
    is_flag=True,
    help="Also show the latest sample per GPU as a table redrawn each interval (only when stdout is a terminal).",
)
@_mfu_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def local_watch(ctx: click.Context, out: Path | None, command: tuple[str, ...], live: bool, **options: Any) -> None:
    """Sample host, job and GPUs while a job runs: gpuplan local watch --out run.jsonl -- python train.py

    The command runs as a child (Ctrl-C and SIGTERM are forwarded to it) and watch exits with its exit code;
    with --pid N a running process is followed until it ends. Then: gpuplan local diagnose run.jsonl
    """
    if out is not None:
        from ..local.watch import expand_out

        out = Path(expand_out(str(out)))
        check_output_path(out, "--out")
    if live and not sys.stdout.isatty():
        click.echo("gpuplan: --live needs a terminal on stdout; the trace is written as usual", err=True)
        live = False
    with flag_errors(), _live_view(live) as on_record:
        report = api.local_watch(command, out=out, catalog=ctx.obj.catalogs, on_record=on_record, **options)
    r = report.to_dict()
    ended = f"signal {r['signal']}" if r["signal"] else f"exit code {r['job_exit_code']}"
    click.echo(
        f"gpuplan: {r['samples']} samples in {r['duration_s']:.1f} s written to {r['out']}"
        + (f"; the job ended with {ended}" if r["mode"] == "command" else "; the process ended"),
        err=True,
    )
    if report.exit_code:
        raise click.exceptions.Exit(report.exit_code)


@contextmanager
def _live_view(enabled: bool) -> Iterator[Callable[[dict[str, Any]], None] | None]:
    """``--live``: a rich Live table on stdout, redrawn once per sample from the watch's own records (no
    refresh thread: nothing runs between samples). Yields the record callback, or None when off."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.live import Live

    state: dict[str, Any] = {"header": {}, "train": None}
    with Live(console=Console(), auto_refresh=False, redirect_stdout=False, redirect_stderr=False) as view:

        def on_record(record: dict[str, Any]) -> None:
            kind = record.get("record")
            if kind == "header":
                state["header"] = record
            elif kind == "sample":
                if isinstance(record.get("train"), dict):
                    state["train"] = record["train"]
                view.update(live_table(state["header"], record, state["train"]), refresh=True)

        yield on_record


def _cell(value: Any, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


#: --live columns: title and width (the last, throttle reasons, takes what is left of the line)
_LIVE_COLUMNS = (
    ("GPU", 14),
    ("util%", 6),
    ("SMact", 6),
    ("tensor", 7),
    ("DRAM", 6),
    ("mem GiB", 12),
    ("power W", 11),
    ("SM MHz", 12),
    ("temp", 5),
    ("throttle", 0),
)


def live_table(header: dict[str, Any], sample: dict[str, Any], train: dict[str, Any] | None = None) -> Any:
    """The --live view of one sample: a row per GPU (a field the sample lacks shows "-", never 0), the host
    and job CPU below, and the last training progress (step, tokens/s, MFU) when --log-regex gives it.

    Plain fixed-width text, not a rich Table: a Table measures every cell on each redraw (about 8 ms for 8
    GPUs on the project's VM, more than watch's whole 1 % budget); formatted text redraws in about 0.3 ms."""
    from rich.text import Text

    from ..units import GiB

    def row(cells: list[str]) -> str:
        return "".join(
            c.ljust(w) if i == 0 or w == 0 else c.rjust(w - 1) + " "
            for i, (c, (_, w)) in enumerate(zip(cells, _LIVE_COLUMNS, strict=True))
        ).rstrip()

    names = {g.get("index"): g.get("catalog_id") or g.get("name") for g in header.get("gpus") or []}
    out = Text(f"gpuplan local watch  t = {sample.get('t_s', 0):.1f} s\n", style="bold")
    out.append(row([t for t, _ in _LIVE_COLUMNS]) + "\n", style="bold")
    for g in sample.get("gpus") or []:
        mem = "-"
        if "mem_used_bytes" in g:
            mem = f"{g['mem_used_bytes'] / GiB:.1f}" + (
                f"/{g['mem_total_bytes'] / GiB:.0f}" if "mem_total_bytes" in g else ""
            )
        power = _cell(g.get("power_w")) + (f"/{g['power_limit_w']:.0f}" if "power_limit_w" in g else "")
        clock = _cell(g.get("sm_clock_mhz")) + (f"/{g['sm_clock_max_mhz']}" if "sm_clock_max_mhz" in g else "")
        reasons = [r for r in g.get("throttle_reasons") or [] if r != "GPU idle"]
        label = f"{g.get('index')} {names.get(g.get('index')) or ''}".strip()[:13]
        cells = [
            label,
            _cell(g.get("util_percent")),
            _cell(g.get("sm_active"), "{:.2f}"),
            _cell(g.get("tensor_active"), "{:.2f}"),
            _cell(g.get("dram_active"), "{:.2f}"),
            mem,
            power,
            clock,
            _cell(g.get("temp_c")),
            ", ".join(reasons) or "-",
        ]
        out.append(row(cells) + "\n", style="yellow" if reasons else "")
    if "gpu_error" in sample:
        out.append(f"NVML: {str(sample['gpu_error'])[:100]}\n", style="red")
    elif not sample.get("gpus"):
        out.append(f"no GPU sampled: {header.get('gpu_status') or 'no GPU'}\n")
    host, proc = sample.get("host") or {}, sample.get("proc") or {}
    caption = [f"host CPU {_cell(host.get('cpu_percent'))} %"]
    if "iowait_percent" in host:
        caption.append(f"iowait {host['iowait_percent']:.0f} %")
    if proc:
        caption.append(
            f"job CPU {_cell(proc.get('cpu_percent'))} % ({_cell(proc.get('num_procs'))} procs, busiest thread "
            f"{_cell(proc.get('max_thread_cpu_percent'))} %)"
        )
    out.append("  ".join(caption), style="dim")
    if train:
        part = [f"step {train['step']}" if "step" in train else None]
        part.append(f"{train['tokens_per_s']:,.0f} tokens/s" if "tokens_per_s" in train else None)
        part.append(f"MFU {train['mfu']:.1%}" if "mfu" in train else None)
        out.append("\ntrain: " + ", ".join(p for p in part if p), style="bold")
    return out


@local.command("diagnose")
@click.argument("run_file", metavar="RUN...", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--from",
    "from_",
    type=click.Choice(values(TraceSource)),
    default="watch",
    show_default=True,
    help="RUN is a local watch trace, an nvidia-smi --query-gpu=... --format=csv -l 1 log, or a DCGM log: dcgmi "
    "dmon -e ... output or DCGM exporter scrapes (docs/watch.md).",
)
@click.option(
    "--interval",
    help="--from dcgm: the time between the log's rounds (dmon's -d, or between scrapes), e.g. 500ms, for a "
    "log without time stamps [default: 1s, dmon's default].",
)
@click.option("--model", help="Compare the observed MFU (the trace's training progress) with this model's.")
@_mfu_options
@click.option("--tp", type=number("tp"), help="The job's tensor-parallel degree (for the predicted MFU).")
@click.option("--pp", type=number("pp"), help="The job's pipeline-parallel degree (for the predicted MFU).")
@click.option("--zero", type=number("zero"), help="The job's ZeRO stage (for the predicted MFU).")
@click.option("--fsdp", is_flag=True, help="The job uses FSDP full sharding (for the predicted MFU).")
@click.option("--micro-batch", type=number("micro_batch"), help="The job's micro-batch (for the predicted MFU).")
@click.option("--global-batch", type=number("global_batch"), help="The job's global batch (for the predicted MFU).")
@json_option
@click.pass_context
def local_diagnose(ctx: click.Context, run_file: tuple[Path, ...], as_json: bool, **options: Any) -> None:
    """Why a watched job is slow: ranked verdicts (input-bound, memory-bound, throttled, ...) on a watch trace.

    Several traces (one per node: watch --out 'run-{host}.jsonl') are aligned in time and their GPUs compared
    (straggler node). With --model, the observed MFU beside gpuplan's prediction (give the job's layout).
    """
    with flag_errors():
        report = api.local_diagnose(
            run_file[0] if len(run_file) == 1 else run_file, catalog=ctx.obj.catalogs, **options
        )
    for w in report.warnings:
        click.echo(f"warning: {w}", err=True)
    emit(ctx, report.to_dict(), as_json, _diagnose_table)


def _diagnose_table(record: dict) -> Any:
    from rich.console import Group
    from rich.text import Text

    t = record["trace"]
    parts: list[Any] = [
        Text(
            f"{t['path']}: {t['samples']} samples, {t['gpus']} GPU(s)"
            + (f", {t['duration_s']:.1f} s" if t["duration_s"] is not None else "")
            + (f", job exit code {t['exit_code']}" if t["exit_code"] is not None else "")
        )
    ]
    for v in record["verdicts"]:
        parts.append(Text(f"\n{v['id']}  (confidence {v['confidence']:.2f})", style="bold"))
        for e in v["evidence"]:
            note = f" ({e['note']})" if e.get("note") else ""
            parts.append(Text(f"  + {e['metric']}: {e['value']:g} vs {e['threshold']:g} {e['unit']}{note}"))
        for c in v["counter_evidence"]:
            parts.append(Text(f"  - {c}"))
        parts.append(Text(f"  advice: {v['advice']}"))
    mfu = record.get("mfu")
    if mfu:
        ref = mfu.get("reference") or {}
        line = "\nMFU"
        if "observed" in mfu:
            line += f": observed {mfu['observed']:.1%}"
        if "predicted" in mfu:
            p = mfu["predicted"]
            line += f", predicted {p['mfu']:.1%} ({p['layout']}{'' if p['fits'] else ', does not fit'})"
        line += f"  [{ref.get('model')} on {ref.get('gpus')} x {ref.get('gpu')}, {ref.get('precision')}]"
        parts.append(Text(line, style="bold"))
        if mfu.get("explained_by"):
            parts.append(Text(f"  the gap: {', '.join(mfu['explained_by'])}"))
    skipped = [c for c in record["checks"] if c["status"] == "no data"]
    if skipped:
        parts.append(Text("\nnot checked (no data): " + ", ".join(f"{c['id']} ({c['reason']})" for c in skipped)))
    for n in record["notes"]:
        parts.append(Text(f"note: {n}"))
    return Group(*parts)
