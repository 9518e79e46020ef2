"""Named assumptions: the defaults a formula cannot know, each overridable and shown with its source.

An assumption set is a frozen dataclass whose class attribute ``SOURCES`` maps each field to (unit,
source); ``items()`` lists them for the ``assumptions`` part of every record, and ``check_assumptions``
rejects values that make no sense (one line, exit 2).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import Field, dataclass, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Self

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from ..errors import JobError

#: The largest value an assumption may take (bytes, elements, seconds, factors): 1e15, a petabyte.
MAX_ASSUMPTION = 1e15
#: The smallest non-zero fraction (an efficiency, a share): 0.1 %.
MIN_FRACTION = 1e-3


@dataclass(frozen=True)
class Assumption:
    """One named default a formula cannot know: its value, unit and source, as every record lists it."""

    name: str
    value: float | None  # None: derived per call (the record shows the value used where it is known)
    unit: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "source": self.source}


class AssumptionSet:
    """Mixin for the frozen dataclasses of assumptions."""

    SOURCES: ClassVar[Mapping[str, tuple[str, str]]] = MappingProxyType({})
    if TYPE_CHECKING:  # every subclass is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def items(self) -> list[Assumption]:
        return [Assumption(f.name, getattr(self, f.name), *self.SOURCES[f.name]) for f in fields(self)]

    def grid(self, **arrays: Any) -> Self:
        """A copy with the named fields set to arrays, one value per candidate of the planner's grid (an offer's
        network: ``gpus_per_node``, ``scale_out_bytes_per_s_per_gpu``), for the formulas that take scalars or
        arrays (``xp.py``). Each value must come from an assumption set that was checked as usual (``replace``
        runs the checks); the arrays are not checked again."""
        new = copy.copy(self)
        for name, value in arrays.items():
            if name not in self.SOURCES:
                raise AttributeError(f"{type(self).__name__} has no assumption {name!r}")
            object.__setattr__(new, name, value)
        return new


def check_assumptions(
    obj: DataclassInstance,
    fractions: tuple[str, ...] = (),
    ranges: Mapping[str, tuple[float, float]] = MappingProxyType({}),
    positive: tuple[str, ...] = (),
    efficiencies: tuple[str, ...] = (),
) -> None:
    """Every assumption finite, >= 0 and at most MAX_ASSUMPTION; fractions in [0, 1]; ``positive`` ones > 0;
    efficiencies (the ``positive`` fractions, and those named in ``efficiencies``) at least MIN_FRACTION
    unless 0; named ones in range. None means "derive it" and is not checked. Huge values, and the
    subnormal efficiencies that divide a time into inf, are refused here."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value))
            or value < 0
        ):
            wanted = ">= 0"
            if f.name in ranges:
                wanted = f"between {ranges[f.name][0]:g} and {ranges[f.name][1]:g}"
            elif f.name in fractions:
                wanted = "between 0 and 1"
            elif f.name in positive:
                wanted = "more than 0"
            raise JobError(f"assumption {f.name} must be a finite number {wanted}, got {value!r}")
        if value > MAX_ASSUMPTION and f.name not in ranges:  # a named range says its own bounds below
            raise JobError(f"assumption {f.name} must be at most {MAX_ASSUMPTION:g}, got {value:g}")
        if f.name in fractions and value > 1:
            raise JobError(f"assumption {f.name} is a fraction: give a value between 0 and 1, got {value!r}")
        if f.name in positive and value == 0:
            raise JobError(f"assumption {f.name} must be more than 0")
        if f.name in fractions and (f.name in positive or f.name in efficiencies) and 0 < value < MIN_FRACTION:
            raise JobError(
                f"assumption {f.name} must be at least {MIN_FRACTION:g} (0.1 %): a smaller efficiency or "
                f"share is not a usable one, got {value:g}"
            )
        if f.name in ranges:
            lo, hi = ranges[f.name]
            if not lo <= value <= hi:
                raise JobError(f"assumption {f.name} must be between {lo:g} and {hi:g}, got {value!r}")
