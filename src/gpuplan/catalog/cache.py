"""A private cache of validated catalog files, so a catalog of 100,000 entries is parsed and validated once.

Each large catalog file read (``--catalog`` or the user's config folder; at least :data:`MIN_BYTES`) is
stored, once validated, as a pickle in the user's cache folder (``$XDG_CACHE_HOME/gpuplan/catalog``, else
``~/.cache/gpuplan/catalog``). An entry is used only while everything it was made from is unchanged: the
file's absolute path, device, inode, size, mtime and ctime (nanoseconds), the gpuplan version, the code
that reads catalogs (the size and mtime of its modules) and, for offers, the same for the accelerator
files they were checked against. Entries are written to a fresh temporary file (``O_EXCL``) and renamed
into place; one is read only from a folder and a file that belong to the user and that no one else can
write. Any problem with the cache (unwritable folder, a damaged or foreign entry) falls back silently to
reading the file. Delete the folder at any time; nothing else is kept there. ``GPUPLAN_NO_CACHE=1``
turns the cache off.
"""

from __future__ import annotations

import copyreg
import hashlib
import io
import os
import pickle
import stat
import tempfile
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

from .. import __version__

#: Files smaller than this are read directly (a cache entry would save nothing).
MIN_BYTES = 256 * 1024

_FORMAT = 1


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


def file_identity(path: Path) -> tuple | None:
    """What a cache entry for ``path`` depends on; None when the file cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_CODE_KEY: tuple | None = None


def _code_key() -> tuple:
    """The gpuplan version and the size and mtime of the modules that turn files into specs."""
    global _CODE_KEY
    if _CODE_KEY is None:
        root = Path(__file__).resolve().parent.parent
        parts: list[Any] = [__version__, _FORMAT]
        for folder in ("catalog", "spec"):
            try:
                names = sorted(os.listdir(root / folder))
            except OSError:
                names = []
            for name in names:
                if name.endswith(".py"):
                    try:
                        st = os.stat(root / folder / name)
                        parts.append((folder, name, st.st_size, st.st_mtime_ns))
                    except OSError:
                        pass
        _CODE_KEY = tuple(parts)
    return _CODE_KEY


def _names(kind: str, ident: tuple, extra: Any) -> tuple[str, str]:
    """The entry's file-name prefix (one per path and kind: older entries for the path are replaced) and name."""
    prefix = hashlib.sha256(repr((kind, ident[0])).encode()).hexdigest()[:16]
    key = hashlib.sha256(repr((kind, ident, extra, _code_key())).encode()).hexdigest()[:32]
    return f"{kind}-{prefix}", f"{kind}-{prefix}-{key}.pickle"


def _trusted(st: os.stat_result) -> bool:
    getuid = getattr(os, "getuid", None)
    if getuid is not None and st.st_uid != getuid():
        return False
    return not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _proxy(mapping: dict) -> MappingProxyType:
    return MappingProxyType(mapping)


class _Pickler(pickle.Pickler):
    """Pickles the read-only mappings of the specs (``MappingProxyType``) as the dicts they wrap."""

    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = lambda m: (_proxy, (dict(m),))


def load(kind: str, path: Path, extra: Any = None) -> Any:
    """The cached value for ``path`` (None when there is none usable)."""
    if not _enabled():
        return None
    d = cache_dir()
    ident = file_identity(path)
    if d is None or ident is None or ident[3] < MIN_BYTES:
        return None
    try:
        if not _trusted(os.stat(d)):
            return None
        _, name = _names(kind, ident, extra)
        fd = os.open(d / name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _trusted(st):
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                stored = pickle.load(f)
        finally:
            os.close(fd)
        if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == repr((kind, ident, extra))):
            return None
        return stored[1]
    except Exception:  # noqa: BLE001 - a cache never stops a command
        return None


def store(kind: str, path: Path, value: Any, extra: Any = None) -> None:
    """Keep ``value`` for ``path`` (silently nothing on any problem)."""
    if not _enabled():
        return
    d = cache_dir()
    ident = file_identity(path)
    if d is None or ident is None or ident[3] < MIN_BYTES:
        return
    tmp = None
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _trusted(os.stat(d)):
            return
        prefix, name = _names(kind, ident, extra)
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump((repr((kind, ident, extra)), value))
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".pickle")  # O_EXCL, mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(buf.getbuffer())
        os.replace(tmp, d / name)
        tmp = None
        for old in os.listdir(d):  # entries for an older version of the same file
            if old.startswith(prefix + "-") and old != name:
                try:
                    os.unlink(d / old)
                except OSError:
                    pass
    except Exception:  # noqa: BLE001 - a cache never stops a command
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def cached(kind: str, path: Path, build: Callable[[], Any], extra: Any = None) -> Any:
    """``build()``'s value for ``path``, from the cache when the file is unchanged; stored after building."""
    value = load(kind, path, extra)
    if value is None:
        value = build()
        store(kind, path, value, extra)
    return value


def cached_entries(kind: str, path: Path, read: Callable, origin: str | None, skipped: list | None,
                   *args: Any, extra: Any = None) -> list:
    """``read(path, origin, skipped, *args)`` (a catalog file reader) through the cache: the entries read, and in
    lenient mode (``skipped`` a list) the entries it left out, replayed into ``skipped`` from the cache."""
    from ..errors import CatalogError
    from .schema import Skipped

    def build() -> tuple[list, list]:
        noted: list[Skipped] | None = [] if skipped is not None else None
        entries = read(path, origin, noted, *args)
        return entries, [(str(s.error), tuple(s.names)) for s in noted or ()]

    entries, notes = cached(kind, path, build, (origin, skipped is None, extra))
    if skipped is not None:
        skipped.extend(Skipped(CatalogError(message), names) for message, names in notes)
    return entries
