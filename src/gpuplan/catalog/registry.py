"""Id and alias lookup shared by every catalog: exact ids, case-insensitive aliases, near-match hints."""

from __future__ import annotations

import difflib
from typing import Generic, Iterable, Iterator, TypeVar

from ..errors import AmbiguousIdError, UnknownIdError

T = TypeVar("T")


def _key(name: str) -> str:
    return name.strip().lower()


class Registry(Generic[T]):
    """Entries by canonical id, plus aliases. An alias naming several entries is ambiguous, not an error
    at load time: looking it up lists the choices. Later entries with the same id replace earlier ones
    (that is how a user's file overrides the bundled one)."""

    def __init__(self, kind: str, list_hint: str, entries: Iterable[T] = ()):
        self.kind = kind
        self.list_hint = list_hint
        self._by_id: dict[str, T] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: T) -> None:
        self._by_id[_key(entry.id)] = entry  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[T]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, name: str) -> bool:
        return bool(self.matches(name))

    def _aliases(self) -> dict[str, list[str]]:
        index: dict[str, list[str]] = {}
        for key, entry in self._by_id.items():
            for alias in getattr(entry, "aliases", ()):
                ids = index.setdefault(_key(alias), [])
                if key not in ids and _key(alias) != key:
                    ids.append(key)
        return index

    def matches(self, name: str) -> list[T]:
        """Every entry that ``name`` names: its id, else the entries that carry it as an alias."""
        key = _key(name)
        if key in self._by_id:
            return [self._by_id[key]]
        return [self._by_id[k] for k in self._aliases().get(key, [])]

    def get(self, name: str) -> T:
        """The one entry ``name`` names; raises UnknownIdError (with suggestions) or AmbiguousIdError."""
        found = self.matches(name)
        if len(found) == 1:
            return found[0]
        if found:
            raise AmbiguousIdError(self.kind, name, tuple(e.id for e in found))  # type: ignore[attr-defined]
        raise UnknownIdError(self.kind, name, self.suggest(name), self.list_hint)

    def suggest(self, name: str, n: int = 3) -> tuple[str, ...]:
        """Near matches among ids and aliases, mapped back to canonical ids."""
        names = {k: k for k in self._by_id}
        for alias, ids in self._aliases().items():
            if len(ids) == 1:
                names.setdefault(alias, ids[0])
        key = _key(name)
        close = difflib.get_close_matches(key, list(names), n=n * 2, cutoff=0.6)
        close += [k for k in names if key and key in k and k not in close]
        out: list[str] = []
        for c in close:
            canonical = self._by_id[names[c]].id  # type: ignore[attr-defined]
            if canonical not in out:
                out.append(canonical)
        return tuple(out[:n])
