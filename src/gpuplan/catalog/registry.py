"""Id and alias lookup shared by every catalog: exact ids, case-insensitive aliases, near-match hints.

Lookups are O(1) whatever the catalog's size: the alias index is kept up to date as entries are added
(a catalog of 100,000 entries must list and rank in about a second).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from ..errors import AmbiguousIdError, CatalogError, GpuplanError, UnknownIdError


def _index_aliases(index: dict[str, dict[str, None]], key: str, aliases: Iterable[str]) -> None:
    """Record in ``index`` (alias key -> the id keys that claim it, in order) the aliases of the entry ``key``."""
    for alias in aliases:
        akey = alias.strip().lower()
        if akey != key:
            ids = index.get(akey)
            if ids is None:
                index[akey] = {key: None}
            else:
                ids[key] = None


class _Entry(Protocol):
    """What a registry holds: anything with an ``id`` (aliases, when it has them, are read with getattr)."""

    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Entry)

#: Above this many names, near-match suggestions look only at names of about the same length that share
#: a character with the query's start (difflib over everything would take seconds).
_SUGGEST_ALL_BELOW = 5000


def _key(name: str) -> str:
    return name.strip().lower()


class Registry(Generic[T]):
    """Entries by canonical id, plus aliases. An alias naming several entries is ambiguous, not an error
    at load time: looking it up lists the choices. Later entries with the same id replace earlier ones
    (that is how a user's file overrides the bundled one).

    ``problems`` lists what was skipped while loading (a broken entry or file in the user's config
    folder): the CLI prints them as warnings. Looking up the id or alias of a skipped entry raises its
    error instead of "unknown id".
    """

    def __init__(self, kind: str, list_hint: str, entries: Iterable[T] = ()):
        self.kind = kind
        self.list_hint = list_hint
        # an entry, or where to build it: a slot (packed, index) for an entry of a large cached file (a
        # cache.PackedEntries), built when first used
        self._by_id: dict[str, T | tuple[Any, int]] = {}
        self._lazy = False  # whether _by_id may hold a slot
        self._order: dict[str, int] = {}  # id key -> position of first insertion (the listing order)
        self._alias_index: dict[str, dict[str, None]] = {}  # alias key -> id keys carrying it (a set, ordered)
        self._broken: dict[str, GpuplanError] = {}
        self.problems: list[GpuplanError] = []
        #: what the entries were read from (file identities), set by the loaders once every file is read: a
        #: cache key for what was checked against this registry (offers' GPU names) and for what is derived
        #: from it (a listing's rows); None when unknown, and again once an entry is added
        self.fingerprint: tuple[object, ...] | None = None
        self.add_all(entries)

    def add(self, entry: T) -> None:
        self.fingerprint = None  # the entries are no longer just what the files hold
        key = _key(entry.id)
        old = self._entry(key) if key in self._by_id else None
        if old is not None:
            for alias in getattr(old, "aliases", ()):
                ids = self._alias_index.get(_key(alias))
                if ids is not None:
                    ids.pop(key, None)
                    if not ids:
                        del self._alias_index[_key(alias)]
        else:
            self._order[key] = len(self._order)
        self._by_id[key] = entry
        for alias in getattr(entry, "aliases", ()):
            akey = _key(alias)
            if akey != key:
                self._alias_index.setdefault(akey, {})[key] = None

    def add_all(self, entries: Iterable[T]) -> None:
        """``add`` each of ``entries``, in order (the same result, with the common case inlined: an id
        not seen before, whose aliases are all new; a catalog file of 100,000 entries in ~0.1 s). The entries
        of a large cached file (``cache.PackedEntries``) are indexed by their ids and aliases, and built when
        first used."""
        from .cache import PackedEntries

        self.fingerprint = None  # set by the loaders once every file is in
        if isinstance(entries, PackedEntries):
            self._add_packed(entries)
            return
        by_id, order, index = self._by_id, self._order, self._alias_index
        for entry in entries:
            key = entry.id.strip().lower()
            if key in by_id:
                self.add(entry)
                continue
            order[key] = len(order)
            by_id[key] = entry
            _index_aliases(index, key, getattr(entry, "aliases", ()))

    def _add_packed(self, packed: Any) -> None:
        """``add_all`` of a ``cache.PackedEntries``: each id key mapped to a slot, ``(packed, index)``, in bulk."""
        keys = list(map(str.lower, map(str.strip, packed.ids)))
        by_id, order, index = self._by_id, self._order, self._alias_index
        if len(set(keys)) != len(keys) or not by_id.keys().isdisjoint(keys):  # an id given again: add's way
            for entry in packed:
                self.add(entry)
            return
        start = len(order)
        order.update(zip(keys, range(start, start + len(keys)), strict=True))
        by_id.update(zip(keys, zip(repeat(packed), range(len(keys))), strict=True))
        self._lazy = True
        for key, aliases in zip(keys, packed.aliases, strict=True):
            _index_aliases(index, key, aliases)

    def _entry(self, key: str) -> T:
        """The entry of id key ``key``, built if it was not yet."""
        value = self._by_id[key]
        if type(value) is tuple:
            packed, i = value
            value = self._by_id[key] = packed[i]
        return value  # type: ignore[return-value]

    def add_problem(self, error: GpuplanError, names: Iterable[str] = ()) -> None:
        """Record something skipped while loading; ``names`` (the entry's id and aliases) then raise ``error``
        when looked up and nothing valid carries them."""
        self.problems.append(error)
        for name in names:
            if isinstance(name, str) and name.strip():
                self._broken.setdefault(_key(name), error)

    def add_files(
        self,
        read: Callable[..., Iterable[T]],
        user_files: Iterable[Path],
        user_problems: Iterable[GpuplanError],
        extra_files: Iterable[Path],
    ) -> None:
        """The user's folder leniently, then ``--catalog``-style extra files strictly; later ids override.

        ``read(path, skipped=...)`` is a catalog reader: with a list it notes broken entries there instead of
        raising. A broken user file or entry becomes one of ``problems`` (its id then raises when looked up);
        a broken extra file raises its CatalogError.
        """
        for problem in user_problems:
            self.add_problem(problem)
        for path in user_files:
            skipped: list[Any] = []
            try:
                entries = read(path, skipped=skipped)
            except CatalogError as e:
                self.add_problem(e)
                continue
            self.add_all(entries)
            for problem in skipped:
                self.add_problem(problem.error, problem.names)
        for path in extra_files:
            self.add_all(read(Path(path)))

    def __iter__(self) -> Iterator[T]:
        if self._lazy:
            by_id = self._by_id
            built: dict[int, list[T]] = {}  # each packed file's entries, built whole
            for key, value in by_id.items():  # values replaced, keys kept: safe while iterating
                if type(value) is tuple:
                    packed, i = value
                    entries = built.get(id(packed))
                    if entries is None:
                        entries = built[id(packed)] = list(packed)
                    by_id[key] = entries[i]
            self._lazy = False
        return iter(self._by_id.values())  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, name: str) -> bool:
        return bool(self.matches(name))

    def matches(self, name: str) -> list[T]:
        """Every entry that ``name`` names: its id, else the entries that carry it as an alias."""
        key = _key(name)
        if key in self._by_id:
            return [self._entry(key)]
        ids = self._alias_index.get(key)
        if not ids:
            return []
        if len(ids) == 1:
            return [self._entry(next(iter(ids)))]
        return [self._entry(k) for k in sorted(ids, key=self._order.__getitem__)]  # in listing order

    def problem_for(self, name: str) -> GpuplanError | None:
        """The error of a skipped entry that ``name`` names (None when a valid entry has it, or none does)."""
        if not self._broken or self.matches(name):
            return None
        return self._broken.get(_key(name))

    def get(self, name: str) -> T:
        """The one entry ``name`` names; raises UnknownIdError (with suggestions) or AmbiguousIdError, or the
        error of the skipped entry that ``name`` names."""
        found = self.matches(name)
        if len(found) == 1:
            return found[0]
        if found:
            raise AmbiguousIdError(self.kind, name, tuple(e.id for e in found))
        problem = self._broken.get(_key(name))
        if problem is not None:
            raise problem
        raise UnknownIdError(self.kind, name, self.suggest(name), self.list_hint)

    def suggest(self, name: str, n: int = 3) -> tuple[str, ...]:
        """Near matches among ids and aliases, mapped back to canonical ids."""
        key = _key(name)
        if not key:
            return ()
        names = dict.fromkeys(self._by_id)
        names.update((alias, None) for alias, ids in self._alias_index.items() if len(ids) == 1)
        candidates = list(names)
        if len(candidates) > _SUGGEST_ALL_BELOW:  # difflib's ratio >= 0.6 needs close lengths and shared letters
            lo, hi, start = len(key) * 0.4, len(key) * 2.5 + 1, set(key[:3])
            candidates = [c for c in candidates if lo <= len(c) <= hi and c[:1] in start]
        close = close_matches(key, candidates, n=n * 2, cutoff=0.6)
        out: list[str] = []
        for c in close + [k for k in names if key in k]:
            canonical = self._canonical(c)
            if canonical is not None and canonical not in out:
                out.append(canonical)
            if len(out) >= n:
                break
        return tuple(out[:n])

    def _canonical(self, key: str) -> str | None:
        if key in self._by_id:
            return self._id_of(key)
        ids = self._alias_index.get(key, {})
        return self._id_of(next(iter(ids))) if len(ids) == 1 else None

    def _id_of(self, key: str) -> str:
        """The id (as spelled) of id key ``key``, without building its entry."""
        value = self._by_id[key]
        return value[0].ids[value[1]] if type(value) is tuple else value.id  # type: ignore[union-attr]


def close_matches(word: str, possibilities: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """``difflib.get_close_matches(word, possibilities, n, cutoff)``, the same list, without computing the
    similarity ratio of every possibility: they are taken by decreasing upper bound of their ratio
    (``real_quick_ratio``, 2 min(len) / (sum of lens), from the lengths alone), and the search stops once the
    bound is below the n-th best ratio found (a later one can then neither pass it nor tie it). Over 100,000
    names like ``scale-gpu-123`` it computes ~1,000 ratios, not 100,000 (~1.5 s)."""
    import heapq
    from difflib import SequenceMatcher  # only for an unknown name: not part of every command's start-up

    if n <= 0:
        raise ValueError(f"n must be > 0: {n!r}")
    if not 0.0 <= cutoff <= 1.0:
        raise ValueError(f"cutoff must be in [0.0, 1.0]: {cutoff!r}")
    size = len(word)
    bounded = [(2.0 * min(size, len(x)) / (size + len(x)) if size + len(x) else 1.0, x) for x in possibilities]
    bounded.sort(key=lambda item: item[0], reverse=True)
    s = SequenceMatcher()
    s.set_seq2(word)
    best: list[tuple[float, str]] = []  # the n largest (ratio, possibility) so far, a min-heap
    for bound, x in bounded:
        if bound < cutoff or (len(best) == n and bound < best[0][0]):
            break
        s.set_seq1(x)
        if s.quick_ratio() >= cutoff and s.ratio() >= cutoff:
            if len(best) < n:
                heapq.heappush(best, (s.ratio(), x))
            else:
                heapq.heappushpop(best, (s.ratio(), x))
    return [x for _, x in sorted(best, reverse=True)]


class DeferredRegistry(Generic[T]):
    """A registry loaded on first use (any attribute but ``fingerprint``), whose ``fingerprint`` is known
    before: offers are checked against the accelerators, and once checked and cached need only know which
    accelerator files they were checked against, not the 100,000 accelerators those files may hold."""

    def __init__(self, load: Callable[[], Registry[T]], fingerprint: tuple[object, ...] | None):
        self._load = load
        self._registry: Registry[T] | None = None
        self._fingerprint = fingerprint

    @property
    def fingerprint(self) -> tuple[object, ...] | None:
        """The loaded registry's, once loaded (the files may have changed since the first was taken)."""
        return self._registry.fingerprint if self._registry is not None else self._fingerprint

    def loaded(self) -> Registry[T]:
        if self._registry is None:
            self._registry = self._load()
        return self._registry

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loaded(), name)

    def __iter__(self) -> Iterator[T]:
        return iter(self.loaded())

    def __len__(self) -> int:
        return len(self.loaded())

    def __contains__(self, name: str) -> bool:
        return name in self.loaded()
