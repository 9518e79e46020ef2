"""Id and alias lookup shared by every catalog: exact ids, case-insensitive aliases, near-match hints.

Lookups are O(1) whatever the catalog's size: the alias index is kept up to date as entries are added
(a catalog of 100,000 entries must list and rank in about a second).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from ..errors import AmbiguousIdError, CatalogError, GpuplanError, UnknownIdError


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
        self._by_id: dict[str, T] = {}
        self._order: dict[str, int] = {}  # id key -> position of first insertion (the listing order)
        self._alias_index: dict[str, dict[str, None]] = {}  # alias key -> id keys carrying it (a set, ordered)
        self._broken: dict[str, GpuplanError] = {}
        self.problems: list[GpuplanError] = []
        #: what the entries were read from (file identities), set by the loaders: a cache key for what was
        #: checked against this registry (offers' GPU names); None when unknown
        self.fingerprint: tuple[object, ...] | None = None
        for entry in entries:
            self.add(entry)

    def add(self, entry: T) -> None:
        key = _key(entry.id)
        old = self._by_id.get(key)
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
            for entry in entries:
                self.add(entry)
            for problem in skipped:
                self.add_problem(problem.error, problem.names)
        for path in extra_files:
            for entry in read(Path(path)):
                self.add(entry)

    def __iter__(self) -> Iterator[T]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, name: str) -> bool:
        return bool(self.matches(name))

    def matches(self, name: str) -> list[T]:
        """Every entry that ``name`` names: its id, else the entries that carry it as an alias."""
        key = _key(name)
        if key in self._by_id:
            return [self._by_id[key]]
        ids = self._alias_index.get(key)
        if not ids:
            return []
        if len(ids) == 1:
            return [self._by_id[next(iter(ids))]]
        return [self._by_id[k] for k in sorted(ids, key=self._order.__getitem__)]  # in listing order

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
        import difflib  # only for an unknown name: not part of every command's start-up

        close = difflib.get_close_matches(key, candidates, n=n * 2, cutoff=0.6)
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
            return self._by_id[key].id
        ids = self._alias_index.get(key, {})
        return self._by_id[next(iter(ids))].id if len(ids) == 1 else None
