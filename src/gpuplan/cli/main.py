"""The ``gpuplan`` command line: parse, call the library API (:mod:`gpuplan.api`), render. No formulas here.

One module per command group (``catalog.py``: gpus, offers, model; ``train.py``; ``serve.py``; ``plan.py``; ``tco.py``;
``local.py``; ``validate.py``); this one holds the root group and the entry point.
Exit codes: 0 ok; 2 bad input (one line on stderr: what to fix); 3 ran, but nothing fits.
``--json`` on every command prints the API report's ``to_dict()`` (with ``schema_version``) on stdout.
Heavy modules (rich, pydantic, huggingface_hub) are imported inside the commands, so ``gpuplan --help``
starts fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path

import click

from .. import __version__
from ..errors import GpuplanError
from ._common import EXIT_BAD_INPUT, Ctx

#: Each command: (module under gpuplan.cli, attribute, the one-line help --help lists). A command's module is
#: imported only when that command runs (or its own --help is asked for); tests/test_cli.py checks that each
#: line here is the start of the command's own docstring.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "gpus": ("catalog", "gpus", "Accelerators: datasheet specs (dense peaks), with the source of every figure."),
    "offers": (
        "catalog",
        "offers",
        "Cloud offers: instances, GPUs, prices (dated and sourced); add your own quotes with --catalog.",
    ),
    "model": ("catalog", "model", "Models: exact parameter counts, architecture and FLOPs per token."),
    "train": ("train", "train", "Will training or fine-tuning MODEL fit, how long will it take and what will it cost?"),
    "serve": (
        "serve",
        "serve",
        "Serving MODEL: memory, latency (TTFT, TPOT), throughput, GPUs for a load, and $ per million tokens.",
    ),
    "tco": (
        "tco",
        "tco",
        "Rent or buy: yearly cost of owning GPUs against every rental offer, and the break-even utilization.",
    ),
    "plan": (
        "plan",
        "plan",
        "What should I run this on? Search GPUs, counts, layouts and offers for a training run or a serving load.",
    ),
    "local": (
        "local",
        "local",
        "This machine: what it has (detect), achieves (bench), and how a running job does (watch, diagnose).",
    ),
    "validate": ("validate", "validate", "Score gpuplan against every bundled published figure."),
    "ui": (
        "ui",
        "ui",
        "A local web page over the CLI's API: plan, train, serve, compare GPUs, rent vs buy, validate.",
    ),
}


class _LazyCommands(MutableMapping[str, click.Command]):
    """The root group's command table: a command's module is imported on first lookup, so one command does
    not pay for importing all of them."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            module, attr, _ = COMMANDS[name]
            self._loaded[name] = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._loaded]))

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._loaded))


def short_help(name: str, limit: int) -> str:
    """The table's line for command ``name``, shortened as click shortens a command's own help."""
    return click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)


class _LazyGroup(click.Group):
    """A click group whose --help lists the commands from :data:`COMMANDS` without importing them."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands = _LazyCommands()  # a MutableMapping where click declares a dict: click only reads and sets items

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(n) for n in COMMANDS)
        rows = [(name, short_help(name, limit)) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="gpuplan")
@click.option(
    "--catalog",
    "catalog_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Extra catalog file (accelerators TOML/JSON or models JSON) that adds or overrides entries. "
    "Repeatable. Files in ~/.config/gpuplan (or $GPUPLAN_CONFIG_DIR) are read too.",
)
@click.option("--json", "as_json", is_flag=True, help="JSON output for the command (same as its own --json).")
@click.pass_context
def cli(ctx: click.Context, catalog_files: tuple[Path, ...], as_json: bool) -> None:
    """gpuplan: what hardware an LLM job needs, what it costs, and whether your hardware delivers.

    \b
    Examples:
      gpuplan gpus list --min-memory 80GB --dtype fp8
      gpuplan gpus show h100-sxm-80gb
      gpuplan gpus compare a100-sxm-80gb h100-sxm-80gb b200
      gpuplan model show llama-3.1-70b
      gpuplan model show ./my-model/config.json --json
    """
    ctx.obj = Ctx(catalog_files, as_json, warnings=ctx.obj if isinstance(ctx.obj, list) else None)


# ------------------------------------------------------------------------------------------- entry


def _warn(warnings: Sequence[str], covered: str = "") -> None:
    """The warnings met while loading catalogs, once each, on stderr (less the one an error already says)."""
    for w in dict.fromkeys(warnings):
        if w != covered:
            click.echo(f"gpuplan: warning: {_one_line(w)}", err=True)


def _one_line(text: str) -> str:
    """``text`` with control characters (a newline, a record separator from a file's string) escaped, so an
    error or warning that quotes the user's input stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _fail(message: str, warnings: Sequence[str] = ()) -> int:
    _warn(warnings, covered=message)
    click.echo(f"gpuplan: error: {_one_line(message)}", err=True)
    return EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; user errors become one line on stderr and exit code 2, never a traceback. Warnings
    (a broken entry in the user's config folder) come first, one line each."""
    warnings: list[str] = []  # filled by Ctx as catalogs load
    try:
        rv = cli.main(
            args=list(argv) if argv is not None else None, prog_name="gpuplan", standalone_mode=False, obj=warnings
        )
    except GpuplanError as e:
        return _fail(str(e), warnings)
    except click.UsageError as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        return _fail(f"{e.format_message()}{hint}", warnings)
    except click.exceptions.Abort:
        return _fail("aborted", warnings)
    except click.exceptions.Exit as e:
        _warn(warnings)
        return e.exit_code
    except click.ClickException as e:
        return _fail(e.format_message(), warnings)
    except BrokenPipeError:
        return 0
    _warn(warnings)
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
