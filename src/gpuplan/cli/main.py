"""The ``gpuplan`` command line: parse, call the library, render. No formulas here.

Exit codes: 0 ok; 2 bad input (one line on stderr: what to fix); 3 ran, but nothing fits.
``--json`` on every command prints the library's record (with ``schema_version``) on stdout.
Heavy modules (rich, pydantic, huggingface_hub) are imported inside the commands, so ``gpuplan --help``
starts fast.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from .. import __version__
from ..errors import CatalogError, GpuplanError
from ..units import MAX_BATCH, MAX_GPUS, MAX_LORA_RANK, MAX_SEQ_TOKENS

EXIT_BAD_INPUT = 2


class _Number(click.ParamType):
    """A numeric flag: a whole number (``integer``) or a finite float, within [low, high] ((low, high] with
    ``low_open``). nan, inf, overflow and huge integers are refused before any arithmetic (exit 2, one
    line that names the range and ``why``); -0 reads as 0. The bounds live in ``units.py``."""

    def __init__(self, low: float, high: float, *, integer: bool = False, low_open: bool = False, why: str = ""):
        self.low, self.high, self.integer, self.low_open, self.why = low, high, integer, low_open, why
        self.name = "integer" if integer else "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        from ..errors import QuantityError

        flag = (param.opts[0] if param is not None and param.opts else getattr(param, "name", None)) or "value"
        kind = "a whole number" if self.integer else "a finite number"
        low, high = (f"{self.low:,}", f"{self.high:,}") if self.integer else (f"{self.low:g}", f"{self.high:g}")
        lower = f"> {low}" if self.low_open else f">= {low}"
        expected = f"{flag} must be {kind} {lower} and <= {high}" + (f" ({self.why})" if self.why else "")
        if isinstance(value, bool):
            raise QuantityError(f"{expected}, got {value!r}")
        if isinstance(value, (int, float)):
            number: float | int = value
        else:
            text = str(value).strip().replace("_", "")
            if self.integer:
                if not text.isascii() or not text.lstrip("+-").isdigit() or len(text) > 30:
                    raise QuantityError(f"{expected}, got {value!r}")
                number = int(text)
            else:
                try:
                    number = float(text) if len(text) <= 400 else math.inf
                except ValueError:
                    raise QuantityError(f"{expected}, got {value!r}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise QuantityError(f"{expected}, got {value!r} (not a finite number)")
        if self.integer and isinstance(number, float):
            if not number.is_integer():
                raise QuantityError(f"{expected}, got {value!r}")
            number = int(number)
        if number > self.high or number < self.low or (self.low_open and number == self.low):
            raise QuantityError(f"{expected}, got {value}")
        return number + 0 if isinstance(number, int) else number + 0.0


def _given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A quantity flag given an empty or blank value is an error, not the flag left out."""
    if value is not None and not value.strip():
        from ..errors import QuantityError

        raise QuantityError(f"{param.opts[0] if param.opts else param.name} is empty; give a value (see --help)")
    return value


def _whole(low: int, high: int, why: str = "") -> _Number:
    return _Number(low, high, integer=True, why=why)


def _real(low: float, high: float, *, low_open: bool = False, why: str = "") -> _Number:
    return _Number(low, high, low_open=low_open, why=why)


# the ranges of the numeric flags, documented in units.py (a light module: math and re)
_GPUS, _SEQ, _BATCH, _LORA = MAX_GPUS, MAX_SEQ_TOKENS, MAX_BATCH, MAX_LORA_RANK


class Ctx:
    """What every command needs: the extra catalog files, the output mode, the catalogs (loaded once per
    command) and the warnings met loading them (broken entries of the user's config folder), which
    ``main`` prints on stderr when the command ends."""

    def __init__(self, catalog_files: Sequence[Path], as_json: bool, warnings: list[str] | None = None):
        self.catalog_files = tuple(catalog_files)
        self.as_json = as_json
        self.warnings: list[str] = warnings if warnings is not None else []
        self._split: tuple[list[Path], list[Path], list[Path]] | None = None
        self._loaded: dict[str, Any] = {}

    def _files(self) -> tuple[list[Path], list[Path], list[Path]]:
        if self._split is None:
            from ..catalog import cache
            from ..catalog.schema import read_structured

            split: dict[str, list[Path]] = {"accelerators": [], "models": [], "offers": []}
            for path in self.catalog_files:
                kind = cache.load("kind", path)  # a large file seen before: no need to parse it to sort it
                if kind not in split:
                    data = read_structured(path, keep=True)  # the loader takes the parsed document from here
                    if isinstance(data, dict) and ("accelerator" in data or "accelerators" in data):
                        kind = "accelerators"
                    elif isinstance(data, dict) and "models" in data:
                        kind = "models"
                    elif isinstance(data, dict) and "offer" in data:
                        kind = "offers"
                    else:
                        raise CatalogError(f"{path}: not a gpuplan catalog: expected an 'accelerator' list (accelerators), "
                                           "a 'models' list or an 'offer' list; see docs/catalog-schema.md")
                    cache.store("kind", path, kind)
                split[kind].append(path)
            self._split = (split["accelerators"], split["models"], split["offers"])
        return self._split

    def _once(self, kind: str, load: Callable[[], Any]) -> Any:
        if kind not in self._loaded:
            registry = load()
            self._loaded[kind] = registry
            if len(getattr(registry, "_by_id", ())) > 10_000:
                import gc

                gc.freeze()  # a huge catalog lives as long as the command: later collections need not walk it
            for problem in getattr(registry, "problems", ()):
                if str(problem) not in self.warnings:
                    self.warnings.append(str(problem))
        return self._loaded[kind]

    def accelerators(self):
        from ..catalog import load_accelerators

        return self._once("accelerators", lambda: load_accelerators(self._files()[0]))

    def models(self):
        from ..catalog import load_models

        return self._once("models", lambda: load_models(self._files()[1]))

    def offers(self):
        from ..catalog.offers import load_offers

        return self._once("offers", lambda: load_offers(self.accelerators(), self._files()[2]))


def _json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead of a table.")(f)


def _offline_option(f: Callable) -> Callable:
    """--offline, the same on every command that takes a model; the command reads it with _hub_fetch(ctx)."""
    def remember(ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value:
            ctx.meta["gpuplan.offline"] = True

    return click.option("--offline", is_flag=True, expose_value=False, callback=remember,
                        help="Don't contact the Hugging Face Hub: a Hub id (owner/name) is read from the local "
                             "Hugging Face cache only, as with HF_HUB_OFFLINE=1.")(f)


def _hub_fetch(ctx: click.Context):
    """How resolve_model reads a Hub id for this command: cache only under --offline."""
    from ..catalog.hub import hub_fetcher

    return hub_fetcher(bool(ctx.meta.get("gpuplan.offline")))


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


def _emit(ctx: click.Context, record: dict, as_json: bool, render: Callable[[dict], Any]) -> None:
    """Print a record as JSON or as the table ``render`` draws from it; either way a result that is not a
    finite number (an input far out of range overflowed) is an error, never printed as nan or inf."""
    large = max((len(v) for v in record.values() if isinstance(v, list)), default=0) > _LARGE_ROWS
    encoded = _compact_json(record) if large else None
    # the fast encoder writes NaN / Infinity where json.dumps would refuse: only then is the record walked
    bad = _nonfinite(record) if encoded is None or _has_nonfinite_token(encoded) else None
    if bad:
        raise GpuplanError(f"a result ({bad}) is not a finite number: an input is out of range (check the "
                           "counts, prices, --epochs and the assumptions)")
    if as_json or ctx.obj.as_json:
        if encoded is not None:  # a large listing: the same record on one line (indenting it takes seconds)
            click.echo(encoded)
        else:
            click.echo(json.dumps(record, indent=2, allow_nan=False))
        return
    from rich.console import Console

    width = None
    if not sys.stdout.isatty():  # piped: rich would assume 80 columns; take $COLUMNS or a wide default
        width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 140
    # catalog and offer strings reach the cells as they are: "[/]" or ":fire:" in a name is text, never markup
    console = Console(width=width, soft_wrap=False, markup=False, emoji=False)
    renderable = render(record)
    if large and width is not None and not console.is_terminal:
        # what rich would print (each line cropped to the width), without its per-segment pass: taken only
        # when the text is plain ASCII (one character, one column)
        text = "".join(seg.text for seg in console.render(renderable, console.options) if not seg.control)
        if text.isascii():
            lines = text.split("\n")
            if lines[-1] == "":
                lines.pop()
            click.echo("\n".join(line[:width] for line in lines))
            return
    console.print(renderable)


def _has_nonfinite_token(encoded: bytes) -> bool:
    """Whether compact JSON from pydantic-core may hold a NaN or an infinity: ``NaN`` / ``Infinity`` as a bare
    value (after ``:`` ``,`` ``[`` or ``-``, before ``,`` ``]`` ``}``). The same characters inside a string only
    cost a walk of the record, which then finds nothing. (bytes.find: a regex takes seconds on 100 MB.)"""
    for token in (b"NaN", b"Infinity"):
        i = encoded.find(token)
        while i > 0:
            end = i + len(token)
            if encoded[i - 1:i] in (b":", b",", b"[", b"-") and encoded[end:end + 1] in (b",", b"]", b"}"):
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
    except Exception:  # noqa: BLE001 - an unusual value: the standard encoder handles it, or says what
        return None


def _check_output_path(path: Path, flag: str) -> None:
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


def _write_output(path: Path, text: str, flag: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then an atomic rename."""
    import tempfile

    _check_output_path(path, flag)
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp", delete=False) as f:
            tmp = Path(f.name)
            f.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise click.BadParameter(f"can't write {path}: {e.strerror or e}", param_hint=flag) from None
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="gpuplan")
@click.option("--catalog", "catalog_files", multiple=True, type=click.Path(path_type=Path),
              help="Extra catalog file (accelerators TOML/JSON or models JSON) that adds or overrides entries. "
                   "Repeatable. Files in ~/.config/gpuplan (or $GPUPLAN_CONFIG_DIR) are read too.")
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


# ----------------------------------------------------------------------------------------------- gpus

@cli.group()
def gpus() -> None:
    """Accelerators: datasheet specs (dense peaks), with the source of every figure."""


_SORT_KEYS: dict[str, Callable[[Any], Any]] = {
    "id": lambda a: a.id,
    "name": lambda a: a.name.lower(),
    "vendor": lambda a: (a.vendor, a.id),
    "memory": lambda a: -a.memory_bytes,
    "bandwidth": lambda a: -a.memory_bandwidth_bytes_per_s,
    "bf16": lambda a: -(a.peak("bf16") or 0.0),
    "fp8": lambda a: -(a.peak("fp8") or 0.0),
    "fp4": lambda a: -(a.peak("fp4") or 0.0),
    "fp32": lambda a: -(a.peak("fp32") or 0.0),
    "tdp": lambda a: -(a.tdp_w or 0.0),
    "year": lambda a: (-a.year, a.id),
}


@gpus.command("list")
@click.option("--vendor", help="Only this vendor (nvidia, amd, intel, google).")
@click.option("--min-memory", callback=_given, help="Only devices with at least this much memory, e.g. 40GB or 80GiB.")
@click.option("--dtype", help="Only devices with a peak for this dtype: fp64 fp32 tf32 fp16 bf16 fp8 int8 fp4.")
@click.option("--sort", "sort_key", type=click.Choice(sorted(_SORT_KEYS)), default="vendor", show_default=True,
              help="Order (numbers: largest first).")
@_json_option
@click.pass_context
def gpus_list(ctx: click.Context, vendor: str | None, min_memory: str | None, dtype: str | None,
              sort_key: str, as_json: bool) -> None:
    """List accelerators, filtered and sorted."""
    from ..render import records, tables
    from ..spec.accelerator import DTYPES
    from ..units import parse_bytes

    accs = list(ctx.obj.accelerators())
    if vendor:
        vendors = sorted({a.vendor for a in accs})
        if vendor.lower() not in vendors:
            raise click.BadParameter(f"unknown vendor '{vendor}'; choose from {', '.join(vendors)}",
                                     param_hint="--vendor")
        accs = [a for a in accs if a.vendor == vendor.lower()]
    if min_memory is not None:
        floor = parse_bytes(min_memory, "--min-memory")
        accs = [a for a in accs if a.memory_bytes >= floor]
    if dtype:
        if dtype.lower() not in DTYPES:
            raise click.BadParameter(f"unknown dtype '{dtype}'; choose from {', '.join(DTYPES)}", param_hint="--dtype")
        accs = [a for a in accs if a.supports(dtype.lower())]
    accs.sort(key=_SORT_KEYS[sort_key])
    _emit(ctx, records.accelerator_list(accs), as_json, tables.gpus_table)


@gpus.command("show")
@click.argument("gpu")
@_json_option
@click.pass_context
def gpus_show(ctx: click.Context, gpu: str, as_json: bool) -> None:
    """Show one accelerator in full, with the source and date of each figure."""
    from ..render import records, tables

    _emit(ctx, records.accelerator_show(ctx.obj.accelerators().get(gpu)), as_json, tables.gpu_show)


@gpus.command("compare")
@click.argument("gpus", nargs=-1, required=True)
@_json_option
@click.pass_context
def gpus_compare(ctx: click.Context, gpus: tuple[str, ...], as_json: bool) -> None:
    """Compare accelerators side by side."""
    from ..render import records, tables

    reg = ctx.obj.accelerators()
    _emit(ctx, records.accelerator_compare([reg.get(g) for g in gpus]), as_json, tables.gpus_compare)


# --------------------------------------------------------------------------------------------- offers

@cli.group()
def offers() -> None:
    """Cloud offers: instances, GPUs, prices (dated and sourced); add your own quotes with --catalog."""


@offers.command("list")
@click.option("--gpu", "gpu_name", help="Only offers of this accelerator (id or alias).")
@click.option("--provider", help="Only this provider (aws, azure, gcp, lambda, ...).")
@click.option("--pricing", type=click.Choice(["on-demand", "spot", "reserved-1y", "reserved-3y", "subscription", "quote"]),
              help="Only this pricing.")
@click.option("--sort", "sort_key", type=click.Choice(["gpu-hour", "hour", "provider", "gpu"]), default="gpu-hour",
              show_default=True)
@_json_option
@click.pass_context
def offers_list(ctx: click.Context, gpu_name: str | None, provider: str | None, pricing: str | None, sort_key: str,
                as_json: bool) -> None:
    """List offers, cheapest GPU-hour first."""
    from ..render import records, tables

    rows = list(ctx.obj.offers())
    if gpu_name:
        gid = ctx.obj.accelerators().get(gpu_name).id
        rows = [o for o in rows if o.gpu == gid]
    if provider:
        providers = sorted({o.provider for o in rows})
        if provider.lower() not in providers:
            raise click.BadParameter(f"no offers from '{provider}'; providers: {', '.join(providers)}",
                                     param_hint="--provider")
        rows = [o for o in rows if o.provider == provider.lower()]
    if pricing:
        rows = [o for o in rows if o.pricing == pricing]
    key = {"gpu-hour": lambda o: o.usd_per_gpu_hour, "hour": lambda o: o.usd_per_hour,
           "provider": lambda o: (o.provider, o.instance), "gpu": lambda o: (o.gpu, o.usd_per_gpu_hour)}[sort_key]
    _emit(ctx, records.offer_list(sorted(rows, key=key)), as_json, tables.offers_table)


# ---------------------------------------------------------------------------------------------- model

@cli.group()
def model() -> None:
    """Models: exact parameter counts, architecture and FLOPs per token."""


@model.command("list")
@click.option("--family", help="Only models of this family (e.g. llama, qwen, deepseek).")
@_json_option
@click.pass_context
def model_list(ctx: click.Context, family: str | None, as_json: bool) -> None:
    """List the built-in models (and any from your catalog files)."""
    from ..render import records, tables

    models = list(ctx.obj.models())
    if family:
        families = sorted({m.family for m in models})
        chosen = [m for m in models if m.family.lower() == family.lower()]
        if not chosen:
            raise click.BadParameter(f"unknown family '{family}'; choose from {', '.join(families)}",
                                     param_hint="--family")
        models = chosen
    _emit(ctx, records.model_list(models), as_json, tables.models_table)


@model.command("show")
@click.argument("model_name", metavar="MODEL")
@click.option("--seq-len", type=_whole(1, _SEQ), help="Sequence length for FLOPs per token "
              "[default: 4096, capped at the model's context].")
@_offline_option
@_json_option
@click.pass_context
def model_show(ctx: click.Context, model_name: str, seq_len: int | None, as_json: bool) -> None:
    """Show one model: MODEL is a built-in id, a config.json (or its folder), a Hub id, or a count like 7B."""
    from ..catalog import resolve_model
    from ..render import records, tables

    spec = resolve_model(model_name, ctx.obj.models(), fetch=_hub_fetch(ctx))
    _emit(ctx, records.model_show(spec, seq_len), as_json, tables.model_show)


# -------------------------------------------------------------------------------------------- train

EXIT_DOES_NOT_FIT = 3
#: The storage classes of estimate/machine.py (kept here so --help does not import the estimate package).
_STORAGE_CHOICES = ("local-nvme", "nfs", "lustre", "object")


def _parse_assumptions(items: tuple[str, ...], base=None):
    """--assume NAME=VALUE pairs onto an assumptions dataclass (sizes accept units: 1GiB)."""
    from dataclasses import fields, replace

    from ..estimate.memory import MemoryAssumptions
    from ..units import parse_bytes

    base = base if base is not None else MemoryAssumptions()
    names = {f.name: f for f in fields(base)}
    changes = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in names:
            raise click.BadParameter(f"'{item}': use NAME=VALUE with NAME one of {', '.join(names)}",
                                     param_hint="--assume")
        try:
            changes[name] = parse_bytes(value, name) if name.endswith("_bytes") else (
                int(value) if isinstance(getattr(base, name), int) else float(value))
        except (ValueError, OverflowError):
            kind = "a whole number" if isinstance(getattr(base, name), int) and not name.endswith("_bytes") \
                else "a number"
            raise click.BadParameter(f"'{item}': {value!r} is not {kind}", param_hint="--assume") from None
    return replace(base, **changes)  # the assumptions class checks ranges (one line, exit 2)


@cli.command()
@click.argument("model_name", metavar="MODEL")
@click.option("--gpu", "gpu_name", required=True, help="Accelerator id or alias (gpuplan gpus list).")
@click.option("--gpus", type=_whole(1, _GPUS), help="Number of GPUs [default: tp x pp x cp, or what --deadline needs].")
@click.option("--tp", type=_whole(1, _GPUS), default=1, show_default=True, help="Tensor-parallel degree.")
@click.option("--pp", type=_whole(1, _GPUS), default=1, show_default=True, help="Pipeline-parallel degree.")
@click.option("--cp", type=_whole(1, _GPUS), default=1, show_default=True, help="Context-parallel degree.")
@click.option("--ep", type=_whole(1, _GPUS), default=1, show_default=True, help="Expert-parallel degree (MoE).")
@click.option("--sequence-parallel", is_flag=True, help="Megatron sequence parallelism (needs --tp > 1).")
@click.option("--zero", type=click.IntRange(0, 3), default=0, show_default=True, help="ZeRO stage.")
@click.option("--fsdp", is_flag=True, help="PyTorch FSDP full sharding (ZeRO-3 semantics, FSDP recipe).")
@click.option("--offload", type=click.Choice(["none", "optimizer", "params"]), default="none", show_default=True,
              help="ZeRO-Offload of optimizer states (or params too, ZeRO-3) to CPU memory.")
@click.option("--micro-batch", type=_whole(1, _BATCH), default=1, show_default=True,
              help="Sequences per GPU per micro-step.")
@click.option("--global-batch", type=_whole(1, _BATCH),
              help="Sequences per optimizer step (gradient accumulation follows).")
@click.option("--seq-len", type=_whole(1, _SEQ), help="Tokens per sequence [default: 4096, capped at the model's "
              "context].")
@click.option("--recompute", type=click.Choice(["none", "selective", "full"]), default="none", show_default=True,
              help="Activation recomputation.")
@click.option("--flash-attention/--no-flash-attention", default=True, show_default=True)
@click.option("--dropout/--no-dropout", default=False, show_default=True, help="Dropout layers (masks are saved).")
@click.option("--precision", type=click.Choice(["fp32", "fp16-mixed", "bf16-mixed", "bf16", "fp8-mixed"]),
              default="bf16-mixed", show_default=True)
@click.option("--recipe", type=click.Choice(["auto", "amp", "megatron", "deepspeed", "fsdp", "zero"]), default="auto",
              show_default=True, help="Framework accounting of mixed precision (auto picks from the layout).")
@click.option("--optimizer", type=click.Choice(["adamw", "adamw-8bit", "sgd", "adafactor", "lion"]), default="adamw",
              show_default=True)
@click.option("--method", type=click.Choice(["full", "lora", "qlora"]), default="full", show_default=True)
@click.option("--lora-rank", type=_whole(1, _LORA), default=16, show_default=True)
@click.option("--lora-targets", default="q_proj,k_proj,v_proj,o_proj", show_default=True,
              help="Comma-separated module names, or all-linear.")
@click.option("--quant", type=click.Choice(["nf4", "int8"]), help="Quantized frozen base (qlora implies nf4).")
@click.option("--assume", "assume", multiple=True, metavar="NAME=VALUE",
              help="Override an assumption, e.g. cuda_context_bytes=1GiB (names in the --json output).")
@click.option("--tokens", callback=_given, help="Training tokens, e.g. 2T: adds FLOPs, time, GPU-hours and cost.")
@click.option("--epochs", type=_real(0, 1e6, low_open=True), default=1.0, show_default=True)
@click.option("--mfu", type=_real(0.001, 1, why="a fraction of the dense peak; below 0.001 (0.1 %) the GPUs would "
              "idle, measured MFUs are 0.2-0.6"),
              help="Model FLOPs utilization to assume instead of predicting it (0.001-1).")
@click.option("--deadline", callback=_given, help="Finish within, e.g. 30d: picks the GPU count (instead of --gpus).")
@click.option("--offer", "offer_id", help="Price with this offer (gpuplan offers list).")
@click.option("--usd-per-gpu-hour", "price", callback=_given, help="Price per GPU-hour, e.g. $2.5/h (instead of --offer).")
@click.option("--virtual-stages", type=_whole(1, 1024), default=1, show_default=True,
              help="Interleaved pipeline chunks per GPU (Megatron virtual pipeline).")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path),
              help="A profile from 'gpuplan local bench --save': measured efficiencies replace datasheet ones.")
@click.option("--rank", is_flag=True, help="Rank every offer that can run the job by cost and time.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), help="With --rank: write an HTML chart.")
@click.option("--bytes-per-token", help="Stored bytes per training token [default: 2 below 65,500 vocabulary entries "
              "(uint16), else 4].")
@click.option("--storage", type=click.Choice(_STORAGE_CHOICES), default="lustre", show_default=True,
              help="Storage class for data and checkpoints (sourced default bandwidths).")
@click.option("--storage-write", help="Checkpoint write bandwidth of the storage, e.g. 20GB/s (instead of the class's).")
@click.option("--async-checkpoint/--no-async-checkpoint", default=False, show_default=True,
              help="Asynchronous checkpoints: training waits only for the device-to-host copy.")
@click.option("--mtbf-per-gpu-hours", help="Mean time between failures of one GPU, in hours [default: from Llama 3 "
              "(Hopper and later) or Meta's A100 clusters].")
@click.option("--grid-gco2-per-kwh", help="Grid carbon intensity for CO2eq, g/kWh [default: 480, world 2023 (Ember)].")
@click.option("--require-fit", is_flag=True, hidden=True,
              help="Kept for old scripts: exit code 3 when the job does not fit is now the default.")
@_offline_option
@_json_option
@click.pass_context
def train(ctx: click.Context, model_name: str, gpu_name: str, gpus: int, tp: int, pp: int, cp: int, ep: int,
          sequence_parallel: bool, zero: int, fsdp: bool, offload: str, micro_batch: int, global_batch: int | None,
          seq_len: int | None, recompute: str, flash_attention: bool, dropout: bool, precision: str, recipe: str,
          optimizer: str, method: str, lora_rank: int, lora_targets: str, quant: str | None,
          assume: tuple[str, ...], tokens: str | None, epochs: float, mfu: float | None, deadline: str | None,
          offer_id: str | None, price: str | None, virtual_stages: int, calibration: Path | None, rank: bool,
          plot: Path | None, bytes_per_token: str | None, storage: str, storage_write: str | None,
          async_checkpoint: bool, mtbf_per_gpu_hours: str | None, grid_gco2_per_kwh: str | None,
          require_fit: bool, as_json: bool) -> None:
    """Will training or fine-tuning MODEL fit, how long will it take and what will it cost?

    Memory per GPU, itemized, with the largest micro-batch; with --tokens also FLOPs, predicted step time
    and MFU, time to train, GPU-hours and cost; --deadline picks the GPU count; --rank compares offers.
    """
    from ..catalog import resolve_model
    from ..estimate.memory import training_memory
    from ..estimate.params import count_params
    from ..estimate.rules import inference_rule, training_rule
    from ..render import records, tables
    from ..spec.model import ModelSpec
    from ..spec.training import Parallelism, TrainingJob

    from ..estimate.memory import MemoryAssumptions
    from ..estimate.steptime import StepAssumptions
    from ..units import parse_duration, parse_tokens, parse_usd_per_hour

    from ..estimate.machine import MachineAssumptions
    from ..plan.machine import MachineOptions

    memory_names = set(MemoryAssumptions.SOURCES)
    machine_names = set(MachineAssumptions.SOURCES)
    assumptions = _parse_assumptions(tuple(x for x in assume if x.partition("=")[0] in memory_names))
    machine_assumptions = _parse_assumptions(tuple(x for x in assume if x.partition("=")[0] in machine_names),
                                             MachineAssumptions())
    step_assumptions = _parse_assumptions(tuple(x for x in assume if x.partition("=")[0] not in
                                                memory_names | machine_names), StepAssumptions())
    machine_options = MachineOptions.from_flags(storage, storage_write, bytes_per_token, async_checkpoint,
                                                mtbf_per_gpu_hours, grid_gco2_per_kwh)
    if (deadline or rank or mfu is not None or offer_id or price or plot or calibration) and not tokens:
        raise click.BadParameter("--deadline, --rank, --mfu, --offer, --usd-per-gpu-hour, --plot and --calibration "
                                 "need --tokens",
                                 param_hint="--tokens")
    if deadline and gpus is not None:
        raise click.BadParameter("give --gpus or --deadline (which picks the GPU count), not both", param_hint="--deadline")
    if offer_id and price:
        raise click.BadParameter("give --offer or --usd-per-gpu-hour, not both", param_hint="--offer")
    if plot and not rank:
        raise click.BadParameter("--plot draws the --rank comparison; add --rank", param_hint="--plot")
    if plot:
        _check_output_path(plot, "--plot")
    if rank and calibration:
        raise click.BadParameter("a calibration profile describes one GPU; --rank compares many", param_hint="--calibration")
    if mfu is not None and not 0 < mfu <= 1:
        raise click.BadParameter(f"{mfu} is not a fraction in (0, 1]", param_hint="--mfu")
    if virtual_stages < 1:
        raise click.BadParameter("must be 1 or more", param_hint="--virtual-stages")
    gpus = gpus if gpus is not None else tp * pp * cp
    if fsdp:
        if zero not in (0, 3):
            raise click.BadParameter("--fsdp is ZeRO-3 sharding; drop --zero or use --zero 3", param_hint="--fsdp")
        zero = 3
    layout = Parallelism(gpus=gpus, tp=tp, pp=pp, cp=cp, ep=ep, sequence_parallel=sequence_parallel, zero=zero,
                         offload=offload)
    model = resolve_model(model_name, ctx.obj.models(), fetch=_hub_fetch(ctx))
    seq_len = seq_len if seq_len is not None else records.default_seq_len(model)
    job = TrainingJob(micro_batch=micro_batch, seq_len=seq_len, global_batch=global_batch, precision=precision,
                      recipe=recipe, optimizer=optimizer, method=method, lora_rank=lora_rank,
                      lora_targets=tuple(t.strip() for t in lora_targets.split(",") if t.strip()), quant=quant,
                      recompute=recompute, flash_attention=flash_attention, dropout=dropout, fsdp=fsdp)
    accelerator = ctx.obj.accelerators().get(gpu_name)
    plan = None
    if tokens:
        from ..plan.training import plan_training, rank_offers

        n_tokens = parse_tokens(tokens)
        deadline_s = parse_duration(deadline, "--deadline") if deadline else None
        if rank:
            ranked = rank_offers(model, [o for o in ctx.obj.offers()], ctx.obj.accelerators(), layout, job, n_tokens,
                                 epochs, mfu=mfu, deadline_s=deadline_s, memory_assumptions=assumptions,
                                 step_assumptions=step_assumptions, virtual_stages=virtual_stages)
            record = records.offer_ranking(model, layout, job, n_tokens, epochs, ranked)
            if plot:
                from ..render.plot import ranking_html

                _write_output(plot, ranking_html(record), "--plot")
            _emit(ctx, record, as_json, tables.offer_ranking)
            if not any(r.fits for r in ranked):
                raise click.exceptions.Exit(EXIT_DOES_NOT_FIT)
            return
        calibrated = None
        if calibration:
            from ..local.calibration import apply_to_step, read_profile

            calibrated = apply_to_step(read_profile(calibration), step_assumptions, accelerator, file=str(calibration),
                                       precision=job.precision, model_id=model.id,
                                       explicit={x.partition("=")[0] for x in assume} - memory_names)
            step_assumptions = calibrated.assumptions
        offer = ctx.obj.offers().get(offer_id) if offer_id else None
        if offer is not None and offer.gpu != accelerator.id:
            raise click.BadParameter(f"offer '{offer.id}' is {offer.gpu_count} x {offer.gpu}, not {accelerator.id}",
                                     param_hint="--offer")
        plan = plan_training(model, accelerator, layout, job, n_tokens, epochs, mfu=mfu, deadline_s=deadline_s,
                             usd_per_gpu_hour=parse_usd_per_hour(price, "--usd-per-gpu-hour") if price else None,
                             offer=offer, step_assumptions=step_assumptions, virtual_stages=virtual_stages)
        layout = plan.layout
    report = training_memory(model, accelerator, layout, job, assumptions)
    params = count_params(model).total if isinstance(model, ModelSpec) else model.params
    rule = (training_rule if job.method == "full" else inference_rule)(params, accelerator.usable_memory_bytes)
    record = records.training_record(model, accelerator, layout, job, report, rule)
    if plan is not None:
        record = records.with_training_plan(record, plan, step_assumptions)
        record = records.with_calibration(record, calibrated)
    from ..plan.machine import train_machine

    record = records.with_machine(record, train_machine(model, accelerator, layout, job, report, plan,
                                                        step_assumptions=step_assumptions, options=machine_options,
                                                        assumptions=machine_assumptions))
    if not report.fits:
        from ..plan.advice import training_fit_advice

        advice = training_fit_advice(model, accelerator, layout, job, assumptions)
        record["fit_advice"] = advice.to_dict() if advice else None
    _emit(ctx, record, as_json, tables.train_report)
    if not report.fits:
        raise click.exceptions.Exit(EXIT_DOES_NOT_FIT)


# -------------------------------------------------------------------------------------------- serve

@cli.command()
@click.argument("model_name", metavar="MODEL")
@click.option("--gpu", "gpu_name", required=True, help="Accelerator id or alias (gpuplan gpus list).")
@click.option("--tp", type=_whole(1, _GPUS), default=1, show_default=True, help="Tensor-parallel GPUs per replica.")
@click.option("--pp", type=_whole(1, _GPUS), default=1, show_default=True, help="Pipeline stages per replica.")
@click.option("--replicas", type=_whole(1, _GPUS), default=1, show_default=True,
              help="Replicas (without --qps/--qpm).")
@click.option("--weights", default="bf16", show_default=True,
              help="bf16 fp16 fp8 int8 int4-g32 int4-awq int4-gptq gguf-q8_0 gguf-q6_k gguf-q5_k_m gguf-q4_k_m gguf-q4_0")
@click.option("--kv-cache", default="bf16", show_default=True, help="bf16 fp16 fp8 int8")
@click.option("--prompt-tokens", type=_whole(1, _SEQ), default=512, show_default=True)
@click.option("--output-tokens", type=_whole(1, _SEQ), default=256, show_default=True)
@click.option("--batch", type=_whole(1, _BATCH), help="Static batch: prompts prefilled together, decoded together.")
@click.option("--concurrency", type=_whole(1, _BATCH), help="Continuous batching: sequences decoding at once.")
@click.option("--context", type=_whole(1, _SEQ), help="KV tokens reserved per sequence [default: prompt + output].")
@click.option("--max-tpot", callback=_given, help="Largest time per output token, e.g. 50ms (picks the largest batch that meets it).")
@click.option("--max-ttft", callback=_given, help="Largest time to first token, e.g. 2s.")
@click.option("--qps", callback=_given, help="Requests per second to serve (sizes the fleet).")
@click.option("--qpm", callback=_given, help="Requests per minute to serve (sizes the fleet).")
@click.option("--usd-per-gpu-hour", "price", callback=_given, help="GPU price, e.g. $2.5/h, for $ per million tokens.")
@click.option("--offer", "offer_id", help="Price with this offer (gpuplan offers list) instead of --usd-per-gpu-hour.")
@click.option("--calibration", type=click.Path(dir_okay=False, path_type=Path),
              help="A profile from 'gpuplan local bench --save': measured bandwidth replaces the default efficiency.")
@click.option("--engine", type=click.Choice(["server", "compiled"]), default="server", show_default=True,
              help="server: continuous-batching engine (vLLM-like); compiled: one CUDA-graph stream (gpt-fast-like).")
@click.option("--assume", "assume", multiple=True, metavar="NAME=VALUE", help="Override an assumption.")
@click.option("--storage", type=click.Choice(_STORAGE_CHOICES), default="object", show_default=True,
              help="Where the weights are read from at cold start (sourced default bandwidths).")
@click.option("--rank", is_flag=True, help="Compare every GPU x weight format (bf16, fp8, int8, int4-awq) on the "
              "smallest TP group that fits, by $ per million output tokens (then tokens/s per GPU).")
@click.option("--require-fit", is_flag=True, hidden=True,
              help="Kept for old scripts: exit code 3 when it does not fit or misses a target is now the default.")
@_offline_option
@_json_option
@click.pass_context
def serve(ctx: click.Context, model_name: str, gpu_name: str, tp: int, pp: int, replicas: int, weights: str,
          kv_cache: str, prompt_tokens: int, output_tokens: int, batch: int | None, concurrency: int | None,
          context: int | None, max_tpot: str | None, max_ttft: str | None, qps: str | None, qpm: str | None,
          price: str | None, offer_id: str | None, calibration: Path | None, engine: str, assume: tuple[str, ...],
          storage: str, rank: bool, require_fit: bool, as_json: bool) -> None:
    """Serving MODEL: memory, latency (TTFT, TPOT), throughput, GPUs for a load, and $ per million tokens.

    With --rank, --gpu names the GPUs to compare (comma-separated, or 'all').
    """
    from ..catalog import resolve_model
    from ..estimate.inference import assumptions_for, cost_per_million, fleet_for, serving_plan
    from ..estimate.params import count_params
    from ..estimate.rules import inference_rule
    from ..render import records, tables
    from ..spec.serving import ServingJob, ServingLayout
    from ..units import parse_count, parse_duration, parse_usd_per_hour

    if qps and qpm:
        raise click.BadParameter("give --qps or --qpm, not both", param_hint="--qps")
    from ..units import MAX_QPS, MIN_QPS, check_range

    rate = None
    if qps:
        rate = check_range(parse_count(qps, "--qps"), "--qps", MIN_QPS, MAX_QPS, why="requests per second")
    elif qpm:
        rate = check_range(parse_count(qpm, "--qpm"), "--qpm", 60 * MIN_QPS, 60 * MAX_QPS,
                           why="requests per minute") / 60
    job = ServingJob(weights=weights, kv_cache=kv_cache, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                     batch=batch, concurrency=concurrency, context=context,
                     max_tpot_s=parse_duration(max_tpot, "--max-tpot") if max_tpot else None,
                     max_ttft_s=parse_duration(max_ttft, "--max-ttft") if max_ttft else None, engine=engine)
    layout = ServingLayout(tp=tp, pp=pp, replicas=replicas)
    from ..estimate.machine import MachineAssumptions

    machine_assume = tuple(x for x in assume if x.partition("=")[0] in ("pcie_efficiency", "host_ram_per_gpu_memory"))
    assume = tuple(x for x in assume if x not in machine_assume)
    machine_assumptions = _parse_assumptions(machine_assume, MachineAssumptions())
    assumptions = _parse_assumptions(assume, assumptions_for(job)) if assume else None
    model = resolve_model(model_name, ctx.obj.models(), fetch=_hub_fetch(ctx))
    if rank and calibration:
        raise click.BadParameter("a calibration profile describes one GPU; --rank compares many", param_hint="--calibration")
    if rank:
        from ..plan.serving import cheapest_on_demand, rank_serving
        from ..spec.model import ModelSpec

        if not isinstance(model, ModelSpec):
            raise click.BadParameter("--rank needs the architecture; give a model id or config.json", param_hint="MODEL")
        registry = ctx.obj.accelerators()
        gpus = list(registry) if gpu_name == "all" else [registry.get(g.strip()) for g in gpu_name.split(",")]
        options, skipped = rank_serving(model, gpus, job, assumptions=assumptions,
                                        prices=cheapest_on_demand(ctx.obj.offers()))
        _emit(ctx, records.serving_rank(model, job, options, skipped), as_json, tables.serve_rank)
        if not options:
            raise click.exceptions.Exit(EXIT_DOES_NOT_FIT)
        return
    accelerator = ctx.obj.accelerators().get(gpu_name)
    calibrated = None
    if calibration:
        from ..local.calibration import apply_to_inference, read_profile

        calibrated = apply_to_inference(read_profile(calibration), assumptions or assumptions_for(job), accelerator,
                                        file=str(calibration), weights=job.weights, model_id=model.id,
                                        explicit={x.partition("=")[0] for x in assume})
        assumptions = calibrated.assumptions
    report = serving_plan(model, accelerator, layout, job, assumptions)
    fleet = fleet_for(report, layout, job, rate if report.fits else None)
    if offer_id and price:
        raise click.BadParameter("give --offer or --usd-per-gpu-hour, not both", param_hint="--offer")
    cost = None
    offer_id_given = bool(offer_id or price)
    if not report.fits:
        offer_id = price = None  # no fleet or cost for a replica that does not fit
    if offer_id:
        offer = ctx.obj.offers().get(offer_id)
        if offer.gpu != accelerator.id:
            raise click.BadParameter(f"offer '{offer.id}' is {offer.gpu_count} x {offer.gpu}, not {accelerator.id}",
                                     param_hint="--offer")
        cost = cost_per_million(report, layout, job, offer.usd_per_gpu_hour) | {"offer": offer.to_dict()}
    elif price:
        cost = cost_per_million(report, layout, job, parse_usd_per_hour(price, "--usd-per-gpu-hour"))
    rule = inference_rule(count_params(model).total, accelerator.usable_memory_bytes)
    record = records.serving_record(model, accelerator, layout, job, report, fleet, cost, rule,
                                    rate if report.fits else None)
    if not report.fits and (rate or price or offer_id_given):
        record["notes"].append("no fleet or cost: one replica does not fit")
    record = records.with_calibration(record, calibrated)
    from ..plan.machine import serve_machine

    record = records.with_machine(record, serve_machine(accelerator, layout, report, storage=storage,
                                                        assumptions=machine_assumptions))
    if not report.fits:
        from ..plan.advice import serving_fit_advice

        advice = serving_fit_advice(model, accelerator, layout, job, assumptions)
        record["fit_advice"] = advice.to_dict() if advice else None
    _emit(ctx, record, as_json, tables.serve_report)
    if report.reasons:
        raise click.exceptions.Exit(EXIT_DOES_NOT_FIT)


# ---------------------------------------------------------------------------------------------- tco

@cli.command()
@click.option("--gpu", "gpu_name", required=True, help="Accelerator id or alias.")
@click.option("--gpus", type=_whole(1, _GPUS), default=8, show_default=True, help="GPUs bought (and rented instead).")
@click.option("--years", type=_real(0, 1000, low_open=True), help="Period compared [default: the useful life].")
@click.option("--life-years", type=_real(0.01, 100), help="Useful life the purchase is paid off over [default: data "
              "file, 5].")
@click.option("--utilization", type=_real(0.001, 1, why="a fraction of the hours; below 0.001 (9 hours a year) the "
              "cost per used hour is meaningless"), default=0.7, show_default=True,
              help="Share of the hours the GPUs do paid work (0.001-1).")
@click.option("--purchase-usd-per-gpu", "purchase", callback=_given, help="GPU price, e.g. 30000 [default: the data file's estimate].")
@click.option("--server-usd-per-gpu", "server", callback=_given, help="Server share per GPU [default: data file, or the overhead fraction].")
@click.option("--pue", type=_real(1, 10, why="facility power over IT power; 1.1-1.6 in practice"),
              help="Power usage effectiveness of the facility.")
@click.option("--usd-per-kwh", type=_real(0, 100), help="Electricity price.")
@click.option("--hosting-usd-per-kw-month", "hosting", type=_real(0, 1e6), help="Colocation price per kW of IT load.")
@click.option("--staff-usd-per-gpu-year", "staff", type=_real(0, 1e12), default=0.0, show_default=True,
              help="Operations staff per GPU per year (no sourced default: 0 unless given).")
@click.option("--cost-of-capital", type=_real(0, 1, why="an annual rate: 0.08 is 8 %"),
              help="Annual interest rate on the purchase (0.08 = 8 %).")
@_json_option
@click.pass_context
def tco(ctx: click.Context, gpu_name: str, gpus: int, years: float | None, life_years: float | None,
        utilization: float, purchase: str | None,
        server: str | None, pue: float | None, usd_per_kwh: float | None, hosting: float | None, staff: float,
        cost_of_capital: float | None, as_json: bool) -> None:
    """Rent or buy: yearly cost of owning GPUs against every rental offer, and the break-even utilization."""
    from ..catalog.ownership import load_ownership
    from ..estimate.tco import Ownership, ownership_cost
    from ..render import records, tables
    from ..units import parse_usd

    if gpus < 1:
        raise click.BadParameter("must be 1 or more", param_hint="--gpus")
    accelerator = ctx.obj.accelerators().get(gpu_name)
    data = load_ownership()
    d = data.defaults
    row = next((p for p in data.purchase if p.gpu == accelerator.id), None)
    if purchase is None and row is None:
        raise click.BadParameter(f"no purchase price on file for {accelerator.id}; give --purchase-usd-per-gpu",
                                 param_hint="--purchase-usd-per-gpu")
    if accelerator.tdp_w is None:
        raise click.BadParameter(f"{accelerator.id} has no published TDP; its power cost cannot be estimated",
                                 param_hint="--gpu")
    price = parse_usd(purchase, "--purchase-usd-per-gpu") if purchase else row.usd_per_gpu
    if server is not None:
        server_usd = parse_usd(server, "--server-usd-per-gpu")
    elif row is not None and row.server_usd_per_gpu and purchase is None:
        server_usd = row.server_usd_per_gpu - row.usd_per_gpu  # the server price per GPU includes the GPU
    else:
        server_usd = price * d.server_overhead_fraction
    case = Ownership(purchase_usd=price, server_usd=max(0.0, server_usd), tdp_w=accelerator.tdp_w,
                     host_power_factor=d.host_power_factor, pue=pue if pue is not None else d.pue,
                     usd_per_kwh=usd_per_kwh if usd_per_kwh is not None else d.usd_per_kwh,
                     hosting_usd_per_kw_month=hosting if hosting is not None else d.hosting_usd_per_kw_month,
                     staff_usd_per_year=staff, years=life_years if life_years is not None else d.depreciation_years,
                     cost_of_capital=cost_of_capital if cost_of_capital is not None else d.cost_of_capital,
                     utilization=utilization)
    cost = ownership_cost(case)
    offers = sorted((o for o in ctx.obj.offers() if o.gpu == accelerator.id), key=lambda o: o.usd_per_gpu_hour)
    period = years if years is not None else case.years
    if period <= 0:
        raise click.BadParameter("must be more than zero", param_hint="--years")
    _emit(ctx, records.tco_record(accelerator, gpus, case, cost, offers, row, data, period), as_json, tables.tco_report)


# -------------------------------------------------------------------------------------------- local

@cli.group()
def local() -> None:
    """This machine: what it has (detect) and what it really achieves (bench)."""


@local.command("detect")
@_json_option
@click.pass_context
def local_detect(ctx: click.Context, as_json: bool) -> None:
    """GPUs (NVML), links, topology, driver; CPU cores, RAM, NUMA nodes and disks. Works without a GPU."""
    from ..local.detect import detect, detection_dict
    from ..render import records, tables

    d = detect(ctx.obj.accelerators())
    _emit(ctx, records.envelope("local.detect", **detection_dict(d)), as_json, tables.detect_report)


@local.command("bench")
@click.argument("which", type=click.Choice(["matmul", "memory", "pcie", "allreduce", "disk", "all"]), default="all")
@click.option("--quick/--full", default=True, show_default=True, help="Fewer shapes and iterations, or the full runs.")
@click.option("--dtype", "dtypes", multiple=True, type=click.Choice(["bf16", "fp16", "fp8", "tf32", "fp32"]),
              help="Matmul dtypes [default: bf16, fp16, fp8, tf32, each where the GPU supports it].")
@click.option("--path", "disk_path", type=click.Path(path_type=Path), default=Path("."), show_default=True,
              help="Disk: folder on the disk to test; the files go in a private subfolder, removed afterwards.")
@click.option("--writers", type=click.IntRange(min=1, max=256), default=4, show_default=True,
              help="Disk: files written (and read) at once, like ranks saving a checkpoint.")
@click.option("--file-size", "file_size", help="Disk: size of each file, e.g. 4GiB [default: 256MiB quick, 2GiB full].")
@click.option("--payload", "payloads", multiple=True,
              help="Collectives: payload size, repeatable, e.g. --payload 64MiB [default: 1, 16, 256 MiB; --full: "
                   "64 KiB to 1 GiB].")
@click.option("--model", "model_name", help="Benchmark the GEMM shapes of this model (4096 tokens x each linear layer).")
@click.option("--save", type=click.Path(dir_okay=False, path_type=Path), help="Write a calibration profile (JSON).")
@_offline_option
@_json_option
@click.pass_context
def local_bench(ctx: click.Context, which: str, quick: bool, dtypes: tuple[str, ...], disk_path: Path, writers: int,
                file_size: str | None, payloads: tuple[str, ...], model_name: str | None, save: Path | None,
                as_json: bool) -> None:
    """Measure what this machine achieves, beside the datasheet; --save a profile for --calibration.

    Collectives run across ranks: torchrun --nproc-per-node 8 -m gpuplan local bench allreduce
    """
    import json as _json
    import sys as _sys

    from .. import __version__
    from ..local import bench
    from ..local.calibration import make_profile
    from ..local.detect import detect, detection_dict, torch_gpu, uuid_key
    from ..render import tables
    from ..spec.accelerator import pcie_bytes_per_s

    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1 and which not in ("allreduce", "all"):
        raise click.BadParameter(f"under torchrun only the collectives run (every rank would share the {which} "
                                 "benchmark); run it once without torchrun", param_hint="WHICH")
    todo = (["allreduce"] if world > 1 else ["matmul", "memory", "pcie", "allreduce", "disk"]) if which == "all" \
        else [which]
    from ..units import parse_bytes

    file_bytes = None
    if file_size is not None:
        file_bytes = parse_bytes(file_size, "--file-size")
        if file_bytes <= 0:
            raise click.BadParameter("must be more than zero", param_hint="--file-size")
    if "disk" in todo:  # a folder, and room for the files: refused now, not after the GPU benchmarks
        bench.check_disk(disk_path, writers, file_bytes, quick)
    payload_bytes = [parse_bytes(p, "--payload") for p in payloads] or None
    if payload_bytes and min(payload_bytes) < 4:
        raise click.BadParameter("must be at least 4 bytes (one fp32 element)", param_hint="--payload")
    shapes = None
    model_id = None
    if model_name:
        from ..catalog import resolve_model
        from ..estimate.params import linear_shapes
        from ..spec.model import ModelSpec

        model = resolve_model(model_name, ctx.obj.models(), fetch=_hub_fetch(ctx))
        if not isinstance(model, ModelSpec):
            raise click.BadParameter("needs an architecture (a model id or config.json)", param_hint="--model")
        model_id = model.id
        counts: dict[tuple[int, int, int], int] = {}
        for din, dout, count in linear_shapes(model).values():  # 4096 tokens through each weight matrix
            counts[(4096, dout, din)] = counts.get((4096, dout, din), 0) + count
        shapes = sorted((m, n, k, c) for (m, n, k), c in counts.items())
    if save is not None:
        _check_output_path(save, "--save")   # before any benchmark runs
    det = detect(ctx.obj.accelerators())
    gpu_benches = any(n in todo for n in ("matmul", "memory", "pcie", "allreduce"))
    gpu0 = torch_gpu(det) if gpu_benches else None
    acc = ctx.obj.accelerators().get(gpu0.catalog_id) if gpu0 and gpu0.catalog_id else None
    links = {uuid_key(g.reading.uuid): pcie_bytes_per_s(g.reading.pcie_gen_max, g.reading.pcie_width)
             for g in det.gpus if g.reading.pcie_gen_max in range(1, 7) and g.reading.pcie_width}
    from dataclasses import replace as _replace

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..local.sampler import Sampler

    results = []
    skipped: list[str] = []
    started = time.perf_counter()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True,
                  disable=not _sys.stderr.isatty() or int(os.environ.get("RANK", 0)) != 0) as progress:
        for name in todo:
            if name == "matmul":
                jobs = [("matmul " + d, d) for d in (dtypes or bench.MATMUL_DTYPES)]
            else:
                jobs = [(name, None)]
            for label, dtype in jobs:
                task = progress.add_task(label, total=None)

                def advance(done: int, total: int, task=task) -> None:
                    progress.update(task, completed=done, total=total)

                try:
                    with Sampler(index=gpu0.reading.index if gpu0 else 0) as sampler:
                        if name == "matmul":
                            new = [bench.bench_matmul(dtype, quick, acc.peak(dtype) if acc else None, shapes=shapes,
                                                      model=model_id, progress=advance)]
                        elif name == "memory":
                            new = [bench.bench_memory(quick, acc.memory_bandwidth_bytes_per_s if acc else None)]
                        elif name == "pcie":
                            new = bench.bench_pcie(quick, links)
                        elif name == "allreduce":
                            new = bench.bench_collectives(quick, payload_bytes, link_bytes_per_s=acc.scale_up_bytes_per_s
                                                          if acc else None, progress=advance)
                        else:
                            new = bench.bench_disk(disk_path, writers, file_bytes, quick, progress=advance)
                    clocks = sampler.summary()
                    results += [_replace(r, detail={**r.detail, "clocks": clocks}) if clocks else r for r in new]
                except bench.BenchUnavailable as e:
                    if which != "all" and not (name == "matmul" and not dtypes):
                        raise
                    skipped.append(f"{label}: {e}")
                except (RuntimeError, AssertionError) as e:  # CUDA failures: no kernel image, out of memory, busy GPU
                    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    if which != "all":
                        raise GpuplanError(f"{label} benchmark failed: {first}") from None
                    skipped.append(f"{label}: failed: {first}")
                progress.remove_task(task)
    if int(os.environ.get("RANK", 0)) != 0:
        return  # under torchrun: rank 0 reports and saves
    if not results:
        raise GpuplanError("no benchmark could run here: " + "; ".join(skipped))
    versions = {"gpuplan": __version__}
    try:
        import torch as _t

        versions.update({"torch": _t.__version__, "cuda": _t.version.cuda})
    except ImportError:
        pass
    gpu_info = None
    if gpu0:
        r = gpu0.reading
        gpu_info = {"name": r.name, "catalog_id": gpu0.catalog_id, "pci_device_id": r.pci_device_id,
                    "memory_total_bytes": r.memory_total_bytes, "uuid": r.uuid,
                    "compute_capability": list(r.compute_capability) if r.compute_capability else None,
                    "driver": det.driver_version, "cuda": det.cuda_version, "count": len(det.gpus)}
    profile = make_profile([r.to_dict() for r in results], gpu_info, detection_dict(det)["host"], versions)
    profile.update(mode="quick" if quick else "full", skipped=skipped, seconds=time.perf_counter() - started)
    if save:
        _write_output(save, _json.dumps(profile, indent=2) + "\n", "--save")
        click.echo(f"gpuplan: saved calibration profile to {save}", err=True)
    _emit(ctx, profile, as_json, tables.bench_report)  # the profile is the record (kind "calibration")


# ------------------------------------------------------------------------------------------- entry

def _warn(warnings: Sequence[str], covered: str = "") -> None:
    """The warnings met while loading catalogs, once each, on stderr (less the one an error already says)."""
    for w in dict.fromkeys(warnings):
        if w != covered:
            click.echo(f"gpuplan: warning: {w}", err=True)


def _fail(message: str, warnings: Sequence[str] = ()) -> int:
    _warn(warnings, covered=message)
    click.echo(f"gpuplan: error: {message}", err=True)
    return EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; user errors become one line on stderr and exit code 2, never a traceback. Warnings
    (a broken entry in the user's config folder) come first, one line each."""
    warnings: list[str] = []  # filled by Ctx as catalogs load
    try:
        rv = cli.main(args=list(argv) if argv is not None else None, prog_name="gpuplan", standalone_mode=False,
                      obj=warnings)
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
