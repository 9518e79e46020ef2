"""What every command module shares: the catalogs of one command, the output (JSON or a table, checked
for non-finite numbers), numeric flag types read through the API's bounds, and safe output files.

Light on purpose: ``gpuplan --help`` imports this module and the command modules, nothing heavy.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ..errors import GpuplanError, InputError
from ..units import BOUNDS, Bound, nonblank

EXIT_BAD_INPUT = 2


class Number(click.ParamType):
    """A numeric flag read through its :class:`~gpuplan.units.Bound` (the API reads the keyword the same
    way): one line naming the range on bad input, exit 2."""

    def __init__(self, bound: Bound):
        self.bound = bound
        self.name = "integer" if bound.integer else "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        flag = (param.opts[0] if param is not None and param.opts else getattr(param, "name", None)) or "value"
        return self.bound.read(value, flag)


def number(name: str) -> Number:
    """The click type of the numeric option ``name`` (its keyword name in the API)."""
    return Number(BOUNDS[name])


def given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A quantity flag given an empty or blank value is an error, not the flag left out (units.nonblank)."""
    return nonblank(value, param.opts[0] if param.opts else str(param.name))


def default(fn: Callable[..., Any], name: str) -> Any:
    """The API function's default for keyword ``name``: the CLI shows and uses the same default."""
    value = (fn.__kwdefaults__ or {})[name]  # every API option is keyword-only
    return value.value if hasattr(value, "value") else value


class Ctx:
    """What every command needs: the output mode and the catalogs of this command (a Catalogs, loaded
    once and passed to the API as ``catalog=``; its warnings are printed by ``main`` when the command ends)."""

    def __init__(self, catalog_files: Sequence[Path], as_json: bool, warnings: list[str] | None = None):
        from ..catalog.session import Catalogs

        self.as_json = as_json
        self.catalogs = Catalogs(catalog_files)
        if warnings is not None:
            self.catalogs.warnings = warnings


@contextmanager
def flag_errors() -> Iterator[None]:
    """An API error that names a flag (InputError) becomes click's bad-parameter line, with the
    command's --help hint, as a flag click checks itself."""
    try:
        yield
    except InputError as e:
        raise click.BadParameter(e.message, param_hint=e.flag) from None


def run(ctx: click.Context, fn: Callable[..., Any], render: str, as_json: bool, *args: Any, **kwargs: Any) -> Any:
    """Call the API, print its report (JSON, or the table ``render.tables.<render>`` draws), exit with its
    code (3: does not fit)."""
    with flag_errors():
        report = fn(*args, catalog=ctx.obj.catalogs, **kwargs)
    with gc_paused():
        listing = report.listing() if hasattr(report, "listing") else None
        if listing is not None and len(getattr(report, listing.key)) > _LARGE_ROWS:
            from ._listing import emit_listing  # a long listing: written from rows made once per catalog

            done = emit_listing(ctx, report, listing, as_json or ctx.obj.as_json, render)
        else:
            done = False
        if not done:
            emit(ctx, report.to_dict(), as_json, render)
    if report.exit_code:
        raise click.exceptions.Exit(report.exit_code)
    return report


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a report is turned into its record and printed: a ranking of
    100,000 offers makes millions of dicts and strings, none in a cycle, and the collector's passes over them
    took about as long as making them (the same reason as ``catalog.schema.without_gc``)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead of a table.")(f)


def like_option(f: Callable) -> Callable:
    """--like, on model show, train and serve (the API's ``like`` keyword)."""
    return click.option(
        "--like",
        metavar="MODEL_TYPE",
        default=None,
        help="Read a config whose model_type gpuplan does not know as this one (e.g. llama, for a config "
        "with Llama's keys); the output notes it.",
    )(f)


def offline_option(f: Callable) -> Callable:
    """--offline, the same on every command that takes a model (the API's ``offline`` keyword)."""
    return click.option(
        "--offline",
        is_flag=True,
        help="Don't contact the Hugging Face Hub: a Hub id (owner/name) is read from the local "
        "Hugging Face cache only, as with HF_HUB_OFFLINE=1.",
    )(f)


def _nonfinite(value: Any, path: str = "") -> str | None:
    """The path of the first float in a record that is nan or inf (None when every number is finite)."""
    if not path:  # the C encoder checks a 100,000-row record in a fraction of a second; walk only to say where
        try:
            json.dumps(value, allow_nan=False)
            return None
        except (ValueError, TypeError):
            pass
    if isinstance(value, float):
        return None if value == value and value not in (float("inf"), float("-inf")) else (path or "result")
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _nonfinite(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def _nonfinite_result(path: str) -> GpuplanError:
    return GpuplanError(
        f"a result ({path}) is not a finite number: an input is out of range (check the "
        "counts, prices, --epochs and the assumptions)"
    )


def nonfinite_error(record: dict) -> GpuplanError | None:
    """The error the CLI raises for a record holding nan or inf (None when every number is finite)."""
    bad = _nonfinite(record)
    return _nonfinite_result(bad) if bad else None


def emit(ctx: click.Context, record: dict, as_json: bool, render: Callable[[dict], Any] | str) -> None:
    """Print a record as JSON or as the table ``render`` draws from it; either way a result that is not a
    finite number (an input far out of range overflowed) is an error, never printed as nan or inf."""
    large = max((len(v) for v in record.values() if isinstance(v, list)), default=0) > _LARGE_ROWS
    to_print = as_json or ctx.obj.as_json
    encoded = _compact_json(record) if large and to_print else None
    # the fast encoder writes NaN / Infinity where json.dumps would refuse: only then is the record walked
    if large and encoded is None and not to_print:
        bad = _nonfinite(record) if _large_nonfinite(record) else None
    else:
        bad = _nonfinite(record) if encoded is None or _has_nonfinite_token(encoded) else None
    if bad:
        raise _nonfinite_result(bad)
    if to_print:
        if encoded is not None:  # a large listing: the same record on one line (indenting it takes seconds)
            write_json_bytes(encoded)
        else:
            click.echo(json.dumps(record, indent=2, allow_nan=False))
        return
    if isinstance(render, str):
        from ..render import tables

        draw = getattr(tables, render)
    else:
        draw = render
    print_table(draw(record), large)


def write_json_bytes(*pieces: bytes) -> None:
    """Print compact JSON (one line; the concatenation of ``pieces``) as ``click.echo`` would, without its copy
    of the whole text to add the newline."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        click.echo(b"".join(pieces))
        return
    sys.stdout.flush()
    for piece in pieces:
        out.write(piece)
    out.write(b"\n")
    out.flush()


def print_table(renderable: Any, large: bool) -> None:
    """Print what ``render.tables`` drew; a ``large`` one (a long listing) as plain text when it can be."""
    from rich.console import Console

    width = None
    if not sys.stdout.isatty():  # piped: rich would assume 80 columns; take $COLUMNS or a wide default
        width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 140
    # catalog and offer strings reach the cells as they are: "[/]" or ":fire:" in a name is text, never markup
    console = Console(width=width, soft_wrap=False, markup=False, emoji=False)
    if large and width is not None and not console.is_terminal:
        lines = _plain_lines(console, renderable, width)
        if lines is not None:
            click.echo("\n".join(lines))
            return
    console.print(renderable)


def _plain_lines(console: Any, renderable: Any, width: int) -> list[str] | None:
    """What rich would print on a console that is not a terminal (each line cropped to the width), without
    its per-segment pass: a long listing table writes itself as text (``plain_text``, render.tables), the
    rest of a group is rendered by rich; None (rich prints it) when a part is not plain ASCII (one
    character, one column)."""
    from rich.console import Group

    lines: list[str] = []
    for part in renderable.renderables if isinstance(renderable, Group) else [renderable]:
        plain = getattr(part, "plain_lines", None)
        drawn = plain(width) if plain is not None else None
        if drawn is not None:
            lines += drawn
            continue
        text = "".join(seg.text for seg in console.render(part, console.options) if not seg.control)
        if not text.isascii():
            return None
        drawn = text.split("\n")
        if drawn[-1] == "":
            drawn.pop()
        lines += [line[:width] for line in drawn]
    return lines


def _large_nonfinite(record: dict) -> bool:
    """Whether a large record may hold a NaN or an infinity, checked a slice of rows at a time (encoding a
    100,000-row listing whole only to check it costs more than drawing its table)."""
    rest = {k: v for k, v in record.items() if not (isinstance(v, list) and len(v) > _LARGE_ROWS)}
    parts: list[Any] = [rest]
    for v in record.values():
        if isinstance(v, list) and len(v) > _LARGE_ROWS:
            parts += [v[i : i + _CHECK_ROWS] for i in range(0, len(v), _CHECK_ROWS)]
    for part in parts:
        encoded = _compact_json(part)
        if encoded is None or _has_nonfinite_token(encoded):
            return True
    return False


#: Rows encoded at a time to check a large record drawn as a table.
_CHECK_ROWS = 2000


def _has_nonfinite_token(encoded: bytes) -> bool:
    """Whether compact JSON from pydantic-core may hold a NaN or an infinity: ``NaN`` / ``Infinity`` as a bare
    value (after ``:`` ``,`` ``[`` or ``-``, before ``,`` ``]`` ``}``). The same characters inside a string only
    cost a walk of the record, which then finds nothing. (bytes.find: a regex takes seconds on 100 MB.)"""
    for token in (b"NaN", b"Infinity"):
        i = encoded.find(token)
        while i > 0:
            end = i + len(token)
            if encoded[i - 1 : i] in (b":", b",", b"[", b"-") and encoded[end : end + 1] in (b",", b"]", b"}"):
                return True
            i = encoded.find(token, end)
    return False


#: Above this many rows a record is encoded by pydantic-core's JSON writer (checked for NaN/inf on the
#: bytes), and ``--json`` prints it compact, on one line: the same content, 10x faster than indenting it.
_LARGE_ROWS = 1000


def _compact_json(record: dict) -> bytes | None:
    """``record`` as compact JSON bytes (pydantic-core), or None when it cannot encode it (json.dumps then)."""
    try:
        from pydantic_core import to_json

        return to_json(record)
    except Exception:  # any failure: an unusual value: the standard encoder handles it, or says what
        return None


def check_output_path(path: Path, flag: str) -> None:
    """An output file must be a regular file (or not exist yet) in an existing folder: never a FIFO, a device
    or a directory, which would block or fail after the work is done."""
    import stat as _stat

    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise click.BadParameter(f"can't write {path}: {e.strerror or e}", param_hint=flag) from None
    if st is not None and not _stat.S_ISREG(st.st_mode):
        raise click.BadParameter(f"can't write {path}: not a regular file; give a file path", param_hint=flag)
    if not path.parent.is_dir():
        raise click.BadParameter(f"can't write {path}: no folder {path.parent}", param_hint=flag)


def write_output(path: Path, text: str, flag: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then an atomic rename."""
    import tempfile

    check_output_path(path, flag)
    tmp = None
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as f:
            tmp = Path(f.name)
            f.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise click.BadParameter(f"can't write {path}: {e.strerror or e}", param_hint=flag) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def checkpoint_options(fn: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--storage, --storage-write, --async-checkpoint, --mtbf-per-gpu-hours: the checkpoint and failure flags of
    ``train`` and ``plan train`` (one definition, so they keep one name and meaning), defaults from ``fn``."""
    from ..spec.choices import Storage, values

    options = (
        click.option(
            "--storage",
            type=click.Choice(values(Storage)),
            default=default(fn, "storage"),
            show_default=True,
            help="Storage class for data and checkpoints (sourced default bandwidths).",
        ),
        click.option(
            "--storage-write", help="Checkpoint write bandwidth of the storage, e.g. 20GB/s (instead of the class's)."
        ),
        click.option(
            "--async-checkpoint/--no-async-checkpoint",
            default=default(fn, "async_checkpoint"),
            show_default=True,
            help="Asynchronous checkpoints: training waits only for the device-to-host copy.",
        ),
        click.option(
            "--mtbf-per-gpu-hours",
            help="Mean time between failures of one GPU, in hours [default: from Llama 3 "
            "(Hopper and later) or Meta's A100 clusters].",
        ),
    )

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate
