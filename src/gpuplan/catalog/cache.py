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

A file of many entries (at least :data:`SHARE_MIN`) is stored with equal parts shared: one object for all the
equal strings, source lists, links and the like of its entries, so that loading it builds each once (a
100,000-entry file loads in about half the time). Beside the entries, :func:`cached_value` keeps values derived
from a whole catalog (the rows of a long listing, ready to print), keyed by its files' identities as above and
by the code that derives them.

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
import gc
import io
import os
import pickle
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, overload

from .. import __version__

try:  # blake2b without hashlib, whose OpenSSL binding alone costs ~3 ms of start-up
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - CPython always has it; other interpreters take hashlib's
    from hashlib import blake2b as _blake2b

#: Files smaller than this are known by a digest of their content; larger ones by their stat identity.
MIN_BYTES = 256 * 1024

_FORMAT = 3

#: Files with at least this many entries are stored with their equal parts shared (:func:`shared_copies`), in
#: parts of :data:`PART` entries built when first used (:class:`PackedEntries`).
SHARE_MIN = 1000

#: Entries per separately stored part of a large file: looking one entry up builds its part only.
PART = 1000

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


def enabled() -> bool:
    """Whether the cache is on (``GPUPLAN_NO_CACHE`` unset, empty or 0)."""
    return os.environ.get("GPUPLAN_NO_CACHE", "") in ("", "0")


_enabled = enabled


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


def _modules_key(root: str, folders: tuple[tuple[str, tuple[str, ...] | None], ...]) -> list[Any]:
    """(folder, name, size, mtime) of the Python modules in ``folders`` of ``root`` (each with the names
    to take, or None for every ``.py`` file)."""
    parts: list[Any] = []
    for folder, only in folders:
        try:
            with os.scandir(os.path.join(root, folder)) as it:
                found = sorted(
                    (e.name, e.stat()) for e in it if e.name.endswith(".py") and (only is None or e.name in only)
                )
        except OSError:
            found = []
        parts += [(folder, name, st.st_size, st.st_mtime_ns) for name, st in found]
    return parts


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # plain strings: pathlib is slower here


def _code_key() -> tuple[Any, ...]:
    """The gpuplan version and the size and mtime of the modules that turn files into specs."""
    global _CODE_KEY
    if _CODE_KEY is None:
        folders = (("catalog", None), ("spec", None), (".", ("errors.py", "units.py")))
        _CODE_KEY = (__version__, _FORMAT, *_modules_key(_ROOT, folders))
    return _CODE_KEY


_DERIVED_KEY: tuple[Any, ...] | None = None


def derived_code_key() -> tuple[Any, ...]:
    """What a value derived from the specs also depends on: the size and mtime of the modules that make the
    records and tables (plan, render, estimate, cli) and of pydantic-core, which encodes large records."""
    global _DERIVED_KEY
    if _DERIVED_KEY is None:
        parts = _modules_key(_ROOT, tuple((f, None) for f in ("plan", "render", "estimate", "cli")))
        try:  # found, not imported: importing it costs more than the whole lookup
            from importlib.util import find_spec

            spec = find_spec("pydantic_core")
            where = os.path.dirname(spec.origin) if spec is not None and spec.origin else None
        except (ImportError, ValueError):
            where = None
        if where is not None:
            with contextlib.suppress(OSError), os.scandir(where) as it:
                parts += sorted(("pydantic_core", e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in it)
        _DERIVED_KEY = tuple(parts)
    return _DERIVED_KEY


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


class PackedEntries(Sequence[Any]):
    """The entries of a large catalog file as the cache keeps them: their ids and aliases at hand, and the
    entries themselves built a part (:data:`PART` entries, one pickle each) at a time, when first used. A
    registry indexes the names without building anything (``Registry.add_all``): a command that looks up a
    few of 100,000 models builds one part, not 100,000 models. When the entries are frozen dataclass
    instances of one class ``cls`` (as a catalog reader gives), a part holds their field dicts, each made the
    ``__dict__`` of a new instance: a third faster to build than unpickling the instances, which sets every
    field of every one anew."""

    __slots__ = ("_built", "_digest", "_parts", "aliases", "cls", "ids")

    def __init__(
        self, ids: list[str], aliases: list[tuple[str, ...]], parts: list[bytes], digest: str, cls: type | None
    ):
        # the parts are checked whole here, as the entry is loaded: a damaged one makes the entry unusable (the
        # file is read instead), never a failure later in the command
        if len(ids) != len(aliases) or len(parts) != -(-len(ids) // PART) or digest != self._digest_of(parts):
            raise ValueError("damaged catalog cache entry")
        if cls is not None and not _shareable(cls):
            raise ValueError("catalog cache entry of an unexpected class")
        self.ids = ids
        self.aliases = aliases
        self._parts = parts
        self._digest = digest
        self.cls = cls
        self._built: list[list[Any] | None] = [None] * len(parts)

    @staticmethod
    def _digest_of(parts: list[bytes]) -> str:
        h = _blake2b(digest_size=16)
        for part in parts:
            h.update(part)
        return h.hexdigest()

    @classmethod
    def pack(cls, entries: list[Any]) -> PackedEntries:
        shared = shared_copies(entries)
        one = type(shared[0]) if shared and shared is not entries else None  # copies: plain dataclass instances
        if one is not None and any(type(e) is not one for e in shared):
            one = None
        parts = []
        for start in range(0, len(shared), PART):
            buf = io.BytesIO()
            chunk = shared[start : start + PART]
            _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(chunk if one is None else [vars(e) for e in chunk])
            parts.append(buf.getvalue())
        ids = [e.id for e in entries]
        return cls(ids, [tuple(getattr(e, "aliases", ())) for e in entries], parts, cls._digest_of(parts), one)

    def __reduce__(self) -> tuple[Any, ...]:
        return (PackedEntries, (self.ids, self.aliases, self._parts, self._digest, self.cls))

    def _part(self, k: int) -> list[Any]:
        built = self._built[k]
        if built is None:
            was_enabled = gc.isenabled()
            gc.disable()  # thousands of new objects, none in a cycle (see schema.without_gc)
            try:
                built = pickle.loads(self._parts[k])
                if self.cls is not None:
                    new, cls, set_dict = object.__new__, self.cls, object.__setattr__
                    objects = []
                    for fields in built:
                        entry: Any = new(cls)
                        set_dict(entry, "__dict__", fields)
                        objects.append(entry)
                    built = objects
                self._built[k] = built
            finally:
                if was_enabled:
                    gc.enable()
        return built

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, i: int) -> Any: ...

    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        if i < 0:
            i += len(self.ids)
        if not 0 <= i < len(self.ids):
            raise IndexError(i)
        return self._part(i // PART)[i % PART]

    def __iter__(self) -> Iterator[Any]:
        for k in range(len(self._parts)):
            yield from self._part(k)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedEntries | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


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


def _cached_by(
    kind: str,
    identify: Callable[[], Any],
    build: Callable[[], Any],
    extra: Any,
    pack: Callable[[Any], Any] | None = None,
    still: Callable[[], bool] | None = None,
) -> Any:
    """``build()``'s value, from the cache while ``identify()`` names the same files as when it was stored;
    stored after building (as ``pack(value)``, an equal value, when given) unless the identity changed while
    the files were read, or ``still()`` says ``extra`` no longer holds (the value would then belong to
    neither version)."""
    if not _enabled():
        return build()
    ident = identify()
    value = _load(kind, ident, extra)
    if value is None:
        value = build()
        if ident is not None and identify() == ident and (still is None or still()):
            _store(kind, ident, value if pack is None else pack(value), extra)
    return value


#: Values never worth sharing: small, or one object per value anyway.
_PLAIN = frozenset({int, float, bool, complex, bytes, type(None)})

#: Read-only containers whose ``repr`` shows all of their content (with the ``repr`` of each item).
_CONTAINERS = frozenset({tuple, frozenset, MappingProxyType})


def _shareable(t: type) -> bool:
    """Whether values of type ``t`` are told apart by ``(type, repr)``: the builtin containers above, and the
    frozen dataclasses of ``gpuplan.spec`` (their generated ``repr`` shows every field)."""
    if t in _CONTAINERS:
        return True
    params = getattr(t, "__dataclass_params__", None)
    fields = getattr(t, "__dataclass_fields__", None)
    return bool(
        params is not None
        and params.frozen
        and t.__module__.startswith("gpuplan.spec")
        and all(f.repr for f in (fields or {}).values())
    )


def shared_copies(entries: list[Any]) -> list[Any]:
    """Copies of ``entries`` (frozen dataclass instances) in which equal field values are one object: equal
    strings, and equal tuples, mappings and spec values (sources, links, ...) told apart by type and ``repr``
    (which shows every field; ``-0.0`` and ``0.0`` differ). Equal to the entries, and pickled with each
    shared value once, so loading them builds far fewer objects. ``entries`` itself is returned when an entry
    is not a plain frozen dataclass instance."""
    seen: dict[Any, Any] = {}
    shareable: dict[type, bool] = {}
    out = []
    for e in entries:
        t = type(e)
        if t not in shareable:
            shareable[t] = _shareable(t) and not hasattr(t, "__slots__")
        if not shareable[t]:
            return entries
        fields: dict[str, Any] = {}
        for name, v in vars(e).items():
            vt = type(v)
            if vt is str:
                v = seen.setdefault(v, v)
            elif vt not in _PLAIN:
                if vt not in shareable:
                    shareable[vt] = _shareable(vt)
                if shareable[vt]:
                    v = seen.setdefault((vt, repr(v)), v)
            fields[name] = v
        copy = object.__new__(t)
        copy.__dict__.update(fields)
        out.append(copy)
    return out


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
    still: Callable[[], bool] | None = None,
) -> Sequence[Any]:
    """``read(path, origin, skipped, *args)`` (a catalog file reader) through the cache: the entries read, and in
    lenient mode (``skipped`` a list) the entries it left out, replayed into ``skipped`` from the cache. From the
    cache, a large file's entries are a :class:`PackedEntries` (built when used), else a list.
    ``extra`` is part of the key (what else the entries depend on); with ``still``, they are kept only if
    ``still()`` is true once they are read (``extra`` still describes what they were read against)."""
    from ..errors import CatalogError
    from .schema import Skipped

    def build() -> tuple[list[Any], list[tuple[str, tuple[str, ...]]]]:
        noted: list[Skipped] | None = [] if skipped is not None else None
        entries = read(path, origin, noted, *args)
        return entries, [(str(s.error), tuple(s.names)) for s in noted or ()]

    def pack(value: tuple[list[Any], Any]) -> tuple[Sequence[Any], Any]:
        entries, notes = value
        return (PackedEntries.pack(entries) if len(entries) >= SHARE_MIN else entries), notes

    result: tuple[Sequence[Any], list[tuple[str, tuple[str, ...]]]] = _cached_by(
        kind, lambda: file_identity(path), build, (origin, skipped is None, extra), pack, still
    )
    entries, notes = result
    if skipped is not None:
        skipped.extend(Skipped(CatalogError(message), names) for message, names in notes)
    return entries


def fingerprint_files(fingerprint: Any) -> tuple[str, ...]:
    """The files a registry's ``fingerprint`` names (its first item holds their identities, each starting with
    the file's path): the first half of a :func:`cached_value` key."""
    return tuple(ident[0] for ident in fingerprint[0])


def cached_value(kind: str, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()``'s value for a whole catalog, kept while ``key`` is the same: ``key[0]`` names the files (an
    older entry for the same files is replaced), ``key[1]`` says what they were (their identities, as
    ``Registry.fingerprint``). The value must not depend on anything else but the code in
    :func:`derived_code_key`, which is part of the key."""
    return _cached_by(kind, lambda: key, build, derived_code_key())
