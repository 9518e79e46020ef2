"""The base of the itemized reports (training memory, serving memory): totals derived from named parts.

In a module of its own so that the serving estimate (``inference.py``) does not import the training-memory
model (``memory.py``, its dataclasses and ``spec.training``) just for this base class (issue #12, start-up
time). ``memory.Itemized`` remains the same class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from . import xp


class Itemized:
    """Reports that name their parts: ``parts`` (name -> bytes) and ``groups`` (name -> group); the
    per-group and total bytes derive from them, in the order of ``group_order``."""

    group_order: ClassVar[tuple[str, ...]] = ()
    parts: Mapping[str, float]
    groups: Mapping[str, str]

    def group_bytes(self, group: str) -> int:
        """The group's bytes, rounded to whole bytes (element by element on a grid of estimates, ``xp.py``)."""
        return xp.rint(sum(v for k, v in self.parts.items() if self.groups[k] == group))

    @property
    def total_bytes(self) -> int:
        return sum(self.group_bytes(g) for g in self.group_order)
