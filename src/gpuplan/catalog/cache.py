"""A private cache of validated catalog files, so that a catalog file is parsed and validated once.

Every catalog file read (the built-in ones, the user's config folder, ``--catalog``) is stored, once
validated, as a pickle in the user's cache folder (``$XDG_CACHE_HOME/gpuplan/catalog``, else
``~/.cache/gpuplan/catalog``). For a large file this saves the parsing (a catalog of 100,000 entries); for
the small built-in ones it saves importing pydantic and validating, most of a plain command's start-up
(issue #12). An entry is used only while everything it was made from is unchanged:

- the file: its absolute path and its content. A file smaller than :data:`MIN_BYTES` is known by a digest
  of its bytes (so an edit is seen even when the size and the timestamp stay the same, as happens when a
  file is rewritten within one clock tick); a larger one by its device, inode, size, mtime and ctime
  (nanoseconds), as hashing tens of megabytes would cost more than it saves;
- the gpuplan version and the code that turns files into specs (the size and mtime of its modules);
- for offers, the same for the accelerator files their GPU names were checked against.

Entries are written to a fresh temporary file (``O_EXCL``, mode 0600) and renamed into place. The folder
is created private (0700); an entry is read only when the ``gpuplan`` and ``catalog`` folders are real
folders (not symbolic links) that belong to the user and that no one else can write, and the entry itself
is a regular file of the user's, opened without following a symbolic link. Any problem with the cache (an
unwritable folder, a damaged or foreign entry) falls back silently to reading the file. Delete the folder
at any time; nothing else is kept there. ``GPUPLAN_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import contextlib
import copyreg
import io
import os
import pickle
import stat
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import __version__

try:  # blake2b without hashlib, whose OpenSSL binding alone costs ~3 ms of start-up
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - CPython always has it; other interpreters take hashlib's
    from hashlib import blake2b as _blake2b

#: Files smaller than this are known by a digest of their content; larger ones by their stat identity.
MIN_BYTES = 256 * 1024

_FORMAT = 2

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)


def cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/gpuplan/catalog``, else ``~/.cache/gpuplan/catalog``; None when there is no home."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        try:
            home = os.path.expanduser("~")
        except (KeyError, OSError, RuntimeError):
            return None
        if not home or home.startswith("~"):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "gpuplan" / "catalog"


def _enabled() -> bool:
    return os.environ.get("GPUPLAN_NO_CACHE", "") in ("", "0")


def _digest(data: bytes, size: int = 16) -> str:
    return _blake2b(data, digest_size=size).hexdigest()


def file_identity(path: Path) -> tuple[Any, ...] | None:
    """What a cache entry for ``path`` depends on: the absolute path, and the content's digest (a file smaller
    than MIN_BYTES) or the stat identity (a larger one); None when the file is not a readable regular file."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        where = os.path.abspath(path)
        if st.st_size >= MIN_BYTES:
            return (where, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        # non-blocking, and the type checked again on the descriptor: the path may have changed meanwhile
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC | _BINARY)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size >= MIN_BYTES:
            return None
        data = os.read(fd, MIN_BYTES)
        if len(data) != st.st_size:  # written to while being read: not worth keeping
            return None
    except OSError:
        return None
    finally:
        os.close(fd)
    return (where, len(data), _digest(data))


_CODE_KEY: tuple[Any, ...] | None = None


def _code_key() -> tuple[Any, ...]:
    """The gpuplan version and the size and mtime of the modules that turn files into specs."""
    global _CODE_KEY
    if _CODE_KEY is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # plain strings: pathlib is slower here
        parts: list[Any] = [__version__, _FORMAT]
        for folder, only in (("catalog", None), ("spec", None), (".", ("errors.py", "units.py"))):
            try:
                with os.scandir(os.path.join(root, folder)) as it:
                    found = sorted(
                        (e.name, e.stat()) for e in it if e.name.endswith(".py") and (only is None or e.name in only)
                    )
            except OSError:
                found = []
            parts += [(folder, name, st.st_size, st.st_mtime_ns) for name, st in found]
        _CODE_KEY = tuple(parts)
    return _CODE_KEY


def _names(kind: str, ident: tuple[Any, ...], extra: Any) -> tuple[str, str, str]:
    """The entry's file-name prefix (one per path and kind: older entries for the path are replaced), its
    file name, and the marker stored in it (everything the entry depends on, compared in full on reading:
    the names are digests, and two keys could share one)."""
    marker = repr((kind, ident, extra, _code_key()))
    prefix = f"{kind}-{_digest(repr((kind, ident[0])).encode(), 8)}"
    return prefix, f"{prefix}-{_digest(marker.encode())}.pickle", marker


def _trusted(st: os.stat_result) -> bool:
    """Belongs to this user, and no one else can write it."""
    getuid = getattr(os, "getuid", None)
    if getuid is not None and st.st_uid != getuid():
        return False
    return not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _private_folder(d: Path, create: bool) -> bool:
    """Whether ``d`` (``.../gpuplan/catalog``) can hold cache entries: both of its own levels real folders (a
    symbolic link is refused, not followed), the user's, and not writable by others. With ``create``, missing
    levels are made (mode 0700) and a level of the user's that others can read is narrowed to 0700."""
    for level in (d.parent, d):
        try:
            st = os.lstat(level)
        except FileNotFoundError:
            if not create:
                return False
            try:
                os.makedirs(level.parent, exist_ok=True)  # the cache base (~/.cache): ordinary permissions
                with contextlib.suppress(FileExistsError):  # another gpuplan made it meanwhile: checked below
                    os.mkdir(level, 0o700)
                st = os.lstat(level)
            except OSError:
                return False
        if not stat.S_ISDIR(st.st_mode) or not _trusted(st):
            return False
        if create and st.st_mode & 0o077:
            try:
                os.chmod(level, 0o700)  # a real folder (lstat above), so this does not follow a link
            except OSError:
                return False
    return True


def _proxy(mapping: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(mapping)


class _Pickler(pickle.Pickler):
    """Pickles the read-only mappings of the specs (``MappingProxyType``) as the dicts they wrap."""

    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = lambda m: (_proxy, (dict(m),))


def _load(kind: str, ident: tuple[Any, ...] | None, extra: Any) -> Any:
    if not _enabled() or ident is None:
        return None
    d = cache_dir()
    if d is None:
        return None
    try:
        if not _private_folder(d, create=False):
            return None
        _, name, marker = _names(kind, ident, extra)
        fd = os.open(d / name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _BINARY)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _trusted(st):
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                stored = pickle.load(f)
        finally:
            os.close(fd)
        if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == marker):
            return None
        return stored[1]
    except Exception:  # a cache never stops a command
        return None


def _store(kind: str, ident: tuple[Any, ...] | None, value: Any, extra: Any) -> None:
    if not _enabled() or ident is None:
        return
    d = cache_dir()
    if d is None:
        return
    tmp = None
    try:
        if not _private_folder(d, create=True):
            return
        import tempfile

        prefix, name, marker = _names(kind, ident, extra)
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump((marker, value))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".pickle")  # O_EXCL, mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(buf.getbuffer())
        os.replace(tmp, d / name)
        tmp = None
        for old in os.listdir(d):  # entries for an older version of the same file
            if old.startswith(prefix + "-") and old != name:
                with contextlib.suppress(OSError):
                    os.unlink(d / old)
    except Exception:  # a cache never stops a command
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def load(kind: str, path: Path, extra: Any = None) -> Any:
    """The cached value for ``path`` (None when there is none usable)."""
    if not _enabled():
        return None
    return _load(kind, file_identity(path), extra)


def store(kind: str, path: Path, value: Any, extra: Any = None) -> None:
    """Keep ``value`` for ``path`` (silently nothing on any problem)."""
    if not _enabled():
        return
    _store(kind, file_identity(path), value, extra)


def _cached_by(kind: str, identify: Callable[[], Any], build: Callable[[], Any], extra: Any) -> Any:
    """``build()``'s value, from the cache while ``identify()`` names the same files as when it was stored;
    stored after building unless the identity changed while the files were read (the value would then
    belong to neither version)."""
    if not _enabled():
        return build()
    ident = identify()
    value = _load(kind, ident, extra)
    if value is None:
        value = build()
        if ident is not None and identify() == ident:
            _store(kind, ident, value, extra)
    return value


def cached(kind: str, path: Path, build: Callable[[], Any], extra: Any = None) -> Any:
    """``build()``'s value for ``path``, from the cache when the file is unchanged."""
    return _cached_by(kind, lambda: file_identity(path), build, extra)


def _group_identity(paths: list[Path]) -> tuple[Any, ...] | None:
    idents = [file_identity(p) for p in paths]
    known = [i for i in idents if i is not None]
    if not known or len(known) != len(idents):
        return None
    return (os.path.commonpath([i[0] for i in known]), tuple(known))


def cached_group(kind: str, paths: list[Path], build: Callable[[], Any], extra: Any = None) -> Any:
    """``build()``'s value for files that are always read together (the built-in model files), kept as one
    entry: one file to open instead of one per file; used while every file is unchanged (each as
    :func:`file_identity` says)."""
    return _cached_by(kind, lambda: _group_identity(paths), build, extra)


def cached_entries(
    kind: str,
    path: Path,
    read: Callable[..., list[Any]],
    origin: str | None,
    skipped: list[Any] | None,
    *args: Any,
    extra: Any = None,
) -> list[Any]:
    """``read(path, origin, skipped, *args)`` (a catalog file reader) through the cache: the entries read, and in
    lenient mode (``skipped`` a list) the entries it left out, replayed into ``skipped`` from the cache."""
    from ..errors import CatalogError
    from .schema import Skipped

    def build() -> tuple[list[Any], list[tuple[str, tuple[str, ...]]]]:
        noted: list[Skipped] | None = [] if skipped is not None else None
        entries = read(path, origin, noted, *args)
        return entries, [(str(s.error), tuple(s.names)) for s in noted or ()]

    result: tuple[list[Any], list[tuple[str, tuple[str, ...]]]] = cached(
        kind, path, build, (origin, skipped is None, extra)
    )
    entries, notes = result
    if skipped is not None:
        skipped.extend(Skipped(CatalogError(message), names) for message, names in notes)
    return entries
