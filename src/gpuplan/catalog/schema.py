"""The file schemas of the catalogs, validated with pydantic at the boundary, and the readers of every file.

Every problem in a file becomes one :class:`~gpuplan.errors.CatalogError` line naming the file, the
entry and the field. The formats are documented in docs/catalog-schema.md.

The pydantic models themselves (``AcceleratorEntry``, ``ModelEntry``, ``validate``...) live in
:mod:`gpuplan.catalog.entries` and are imported from there on first use, through this module's
``__getattr__``: importing pydantic costs about 50 ms, and a command whose catalogs come from the catalog
cache never validates anything (issue #12, start-up time).
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, ParamSpec, TypeVar

from ..errors import CatalogError

_P = ParamSpec("_P")
_R = TypeVar("_R")
#: A place in a parsed document: keys and list indices from the top down (pydantic's ``loc``).
Loc = tuple[str | int, ...]

SCHEMA_VERSION = 1

_DATE = r"^\d{4}(-\d{2}(-\d{2})?)?$"
_ID = r"^[a-z0-9][a-z0-9._\-]*$"


#: Upper bounds that keep every figure a finite float and a 64-bit integer downstream (a 1e400 or a
#: 400-digit integer in a file is a typo, not hardware), far above anything real: a million devices, an exabyte,
#: 1e24 FLOP/s.
MAX_COUNT = 10**6
MAX_BYTES = 10**18
MAX_RATE = 1e24

#: The names of entries.py that this module hands out (importing pydantic then).
_ENTRIES = frozenset(
    {
        "_Strict",
        "Count",
        "Bytes",
        "Rate",
        "SourceEntry",
        "InterconnectEntry",
        "OWN_SOURCE_FIELDS",
        "AcceleratorEntry",
        "AcceleratorFile",
        "ModelEntry",
        "ModelFile",
        "explain",
        "validate",
    }
)

if TYPE_CHECKING:
    from .entries import (  # noqa: F401 - forwarded by __getattr__
        OWN_SOURCE_FIELDS,
        AcceleratorEntry,
        AcceleratorFile,
        Bytes,
        Count,
        InterconnectEntry,
        ModelEntry,
        ModelFile,
        Rate,
        SourceEntry,
        _Strict,
        explain,
        validate,
    )


def __getattr__(name: str) -> Any:
    if name in _ENTRIES:
        from . import entries

        return getattr(entries, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The largest file any gpuplan reader takes (catalogs, calibration profiles, config.json). A 100,000-entry
#: JSON catalog is about 60 MB; anything larger is a mistake (a log, a dataset, /dev/zero) not to slurp.
MAX_FILE_BYTES = 256 * 2**20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def read_file_bytes(path: Path, *, error: type[Exception] = CatalogError, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of one regular file, at most ``max_bytes`` of them: the one way gpuplan reads an input file.

    A directory, FIFO, socket or device (``/dev/zero``, a pipe behind ``/dev/stdin``) is refused before
    it is opened, so nothing blocks or reads without end; the check is repeated on the open descriptor
    (opened non-blocking) in case the path changed in between. Problems raise ``error`` (one line).
    """
    path = Path(path)
    try:
        kind = _not_regular(os.stat(path).st_mode)
    except OSError as e:
        raise error(f"{path}: can't read the file ({e.strerror or e})") from None
    except ValueError as e:  # an embedded NUL byte in the name
        raise error(f"{path!r}: not a usable file name ({e})") from None
    if kind:
        raise error(f"{path}: is {kind}, not a regular file; give the path of a file")
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
        )
    except OSError as e:
        raise error(f"{path}: can't read the file ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        kind = _not_regular(st.st_mode)
        if kind:
            raise error(f"{path}: is {kind}, not a regular file; give the path of a file")
        if st.st_size > max_bytes:
            raise error(
                f"{path}: the file is {st.st_size:,} bytes; gpuplan reads files of at most {max_bytes:,} bytes "
                f"({max_bytes / 2**20:g} MiB)"
            )
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise error(f"{path}: can't read the file ({e.strerror or e})") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise error(f"{path}: the file grew past {max_bytes:,} bytes ({max_bytes / 2**20:g} MiB) while being read")
    return b"".join(chunks)


class _Bad:
    """Stands in for a number that cannot be used (NaN, an infinity, an integer too long to read), so the
    slow path can say where in the document it was."""

    def __init__(self, text: str, why: str = "is not a finite number"):
        self.text = text
        self.why = why


#: Python refuses to read integers of more than 4300 digits; no figure in any gpuplan file needs them.
_MAX_INT_DIGITS = 4000


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a finite number")


def _float_or_bad(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _Bad(text)


def _int_or_bad(text: str) -> Any:
    return int(text) if len(text) <= _MAX_INT_DIGITS else _Bad(text, f"has more than {_MAX_INT_DIGITS} digits")


class NumberError(CatalogError):
    """A file whose numbers are not all finite (or too long to read). ``document`` is the parsed file with
    stand-ins for those numbers and ``found`` their locations, so a lenient reader can leave out just the
    entries that hold one."""

    def __init__(self, message: str, document: Any, found: list[tuple[Loc, CatalogError]]):
        super().__init__(message)
        self.document = document
        self.found = found


def _find_bad(data: Any) -> list[tuple[Loc, _Bad]]:
    """The locations of every :class:`_Bad` in a parsed document, in document order (iterative: any depth)."""
    out: list[tuple[Loc, _Bad]] = []
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, _Bad):
            out.append((loc, node))
            continue
        if isinstance(node, dict):
            stack.extend((loc + (k,), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((loc + (i,), v) for i, v in reversed(list(enumerate(node))))
    return out


#: The entry lists of gpuplan's files, and what one entry is called in messages.
_ENTRY_KINDS = {
    "accelerator": "accelerator",
    "accelerators": "accelerator",
    "models": "model",
    "offer": "offer",
    "purchase": "purchase",
    "results": "result",
}


def describe_location(data: Any, loc: Loc) -> str:
    """Where ``loc`` is, in words: ``accelerator 'x1': field 'peak_flops_per_s.bf16'``, else ``field 'a.b[2]'``."""
    if len(loc) >= 2 and isinstance(loc[1], int) and isinstance(data, dict) and str(loc[0]) in _ENTRY_KINDS:
        entries = data.get(loc[0])
        entry = entries[loc[1]] if isinstance(entries, list) and 0 <= loc[1] < len(entries) else None
        label = entry_label(entry, loc[1], _ENTRY_KINDS[str(loc[0])])
        return f"{label}: field '{_field_path(loc[2:])}'" if loc[2:] else label
    return f"field '{_field_path(loc)}'" if loc else "the top level"


def _short(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


#: Documents parsed with ``keep=True``, by file identity, handed to the next reader of the same file (once):
#: the CLI sorts --catalog files by their content, and a 60 MB catalog should not be parsed twice.
_KEPT: dict[tuple[object, ...], Any] = {}


def _identity(path: Path, fmt: str | None) -> tuple[object, ...] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (os.path.abspath(path), fmt, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_structured(path: Path, fmt: Literal["TOML", "JSON"] | None = None, *, keep: bool = False) -> Any:
    """Parse a TOML or JSON file (``fmt``, else by extension: JSON for anything not .toml), read with
    :func:`read_file_bytes`. With ``keep``, the document is also handed to the next call for the same
    unchanged file, which then does not parse it again (treat a kept document as read-only).

    Only finite numbers are accepted: JSON's ``NaN`` / ``Infinity``, TOML's ``nan`` / ``inf`` and literals
    that overflow a float (``1e400``) are an error naming the file and the field, as are an integer too
    long to read and a document nested too deeply.
    """
    path = Path(path)
    ident = _identity(path, fmt) if (keep or _KEPT) else None
    if ident is not None and ident in _KEPT:
        return _KEPT[ident] if keep else _KEPT.pop(ident)
    data = _parse_structured(path, fmt)
    if keep and ident is not None:
        _KEPT[ident] = data
    return data


def _parse_structured(path: Path, fmt: str | None) -> Any:
    import tomllib  # its regular expressions take milliseconds to compile: only when a file is parsed

    raw = read_file_bytes(path)
    is_toml = fmt == "TOML" if fmt else path.suffix.lower() == ".toml"
    fmt = "TOML" if is_toml else "JSON"
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CatalogError(f"{path}: not valid {fmt}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        if is_toml:
            return tomllib.loads(text, parse_float=_finite_float)
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise CatalogError(f"{path}: not valid {fmt}: {e}") from None
    except RecursionError:
        raise CatalogError(f"{path}: not valid {fmt}: nested too deeply to read") from None
    except ValueError:
        pass  # a number that is not finite, or an integer too long: parse again to say where
    try:
        if is_toml:
            data = tomllib.loads(text, parse_float=_float_or_bad)
        else:
            data = json.loads(text, parse_constant=_Bad, parse_float=_float_or_bad, parse_int=_int_or_bad)
    except ValueError as e:  # TOML: an integer of more than 4300 digits (tomllib has no hook for integers)
        raise CatalogError(f"{path}: not valid {fmt}: {str(e).split(';')[0]}") from None
    found = [
        (
            loc,
            CatalogError(f"{path}: {describe_location(data, loc)}: {_short(bad.text)} {bad.why}; give a finite number"),
        )
        for loc, bad in _find_bad(data)
    ]
    if not found:  # pragma: no cover - only stand-ins fail the first parse with a plain ValueError
        raise CatalogError(f"{path}: not valid {fmt}: a number is out of range")
    raise NumberError(str(found[0][1]), data, found)


def read_entries(path: Path, keys: tuple[str, ...], skipped: list[Skipped] | None) -> tuple[Any, set[int]]:
    """``read_structured`` for a file of entries listed under one of ``keys``: with a ``skipped`` list (a
    lenient reader), an entry holding a number that is not finite is noted there, and its index returned to be
    left out; anything else wrong with the numbers raises."""
    try:
        return read_structured(path), set()
    except NumberError as e:
        if skipped is None:
            raise
        data, left_out = e.document, set()
        for loc, err in e.found:
            if len(loc) < 2 or loc[0] not in keys or not isinstance(loc[1], int):
                raise err from None
            if loc[1] not in left_out:
                left_out.add(loc[1])
                skipped.append(Skipped(err, entry_names(data[loc[0]][loc[1]])))
        return data, left_out


def _field_path(loc: Loc) -> str:
    return ".".join(str(p) for p in loc)


def entry_label(raw: Any, index: int, kind: str) -> str:
    ident = raw.get("id") if isinstance(raw, dict) else None
    return f"{kind} '{ident}'" if isinstance(ident, str) else f"{kind} #{index + 1}"


def without_gc(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``func`` with the cyclic garbage collector paused: reading a 100,000-entry catalog makes millions
    of objects, none in a cycle, and the collector's full passes over them cost more than the reading."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return wrapper


def entry_names(raw: Any) -> tuple[str, ...]:
    """The id and aliases a raw entry claims (strings only), for lookups of an entry that was skipped."""
    if not isinstance(raw, dict):
        return ()
    names = [raw.get("id")]
    if isinstance(raw.get("aliases"), list):
        names += raw["aliases"]
    return tuple(n for n in names if isinstance(n, str) and n.strip())


class Skipped(NamedTuple):
    """An entry (or a whole file) of the user's config folder that was left out, and why."""

    error: CatalogError
    names: tuple[str, ...] = ()


def skip_or_raise(error: CatalogError, raw: Any, skipped: list[Skipped] | None) -> None:
    """Strict readers (``skipped`` None) raise; lenient ones note the entry and go on."""
    if skipped is None:
        raise error
    skipped.append(Skipped(error, entry_names(raw)))
