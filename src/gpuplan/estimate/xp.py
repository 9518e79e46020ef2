"""Scalar-or-array arithmetic: the few operations the formulas need beyond + - * / // and comparisons.

The training formulas (``steptime.py``, ``memory.py``, ``time.py``) are written once and evaluated two ways:
on plain numbers for one layout (``gpuplan train``), and on numpy arrays for a whole grid of layouts at once
(``gpuplan plan train``, ``plan/search.py``). Arithmetic and comparisons work on both; a branch on a value
that may be an array goes through :func:`where`, :func:`maximum`, :func:`minimum` or :func:`ceil`, which
take Python's own operations on plain numbers (so one estimate never imports numpy) and numpy's on arrays,
with the same IEEE-754 results element by element. A branch that cannot be written that way (a different
recipe, stack or pipeline stage) asks :func:`same` for the one truth value its inputs share: the planner
groups candidates by that choice and evaluates each group as one array.

The annotations describe plain numbers, the interface of one estimate; an array passes wherever a number does.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

N = TypeVar("N", int, float)


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array of more than zero dimensions (numpy's 0-d values count as plain numbers)."""
    return getattr(x, "ndim", 0) > 0


def _np() -> Any:
    import numpy

    return numpy


def where(cond: bool, a: N, b: N) -> N:
    """``a`` where ``cond`` holds, else ``b``: ``a if cond else b`` on a plain condition, ``numpy.where``
    element by element on an array of them."""
    if not is_array(cond):
        return a if cond else b
    return _np().where(cond, a, b)  # type: ignore[no-any-return]


def maximum(a: N, b: N) -> N:
    """The larger of ``a`` and ``b`` (``max`` on numbers, ``numpy.maximum`` element by element on arrays)."""
    if is_array(a) or is_array(b):
        return _np().maximum(a, b)  # type: ignore[no-any-return]
    return max(a, b)


def minimum(a: N, b: N) -> N:
    """The smaller of ``a`` and ``b`` (``min`` on numbers, ``numpy.minimum`` element by element on arrays)."""
    if is_array(a) or is_array(b):
        return _np().minimum(a, b)  # type: ignore[no-any-return]
    return min(a, b)


def ceil(x: float) -> int:
    """The smallest whole number >= ``x`` (an int from ``math.ceil``; a float array from ``numpy.ceil``)."""
    if is_array(x):
        return _np().ceil(x)  # type: ignore[no-any-return]
    return math.ceil(x)


def rint(x: float) -> int:
    """``x`` rounded to the nearest whole number, halves to even (Python's ``round``, ``numpy.rint``)."""
    if is_array(x):
        return _np().rint(x)  # type: ignore[no-any-return]
    return round(x)


def isfinite(x: float) -> bool:
    """Whether ``x`` is finite, element by element."""
    if is_array(x):
        return _np().isfinite(x)  # type: ignore[no-any-return]
    return math.isfinite(x)


def all_true(cond: bool) -> bool:
    """Whether ``cond`` holds everywhere (a plain condition, or every element of an array of them)."""
    values: Any = cond
    return bool(values.all()) if is_array(values) else bool(values)


def nonzero(x: float) -> bool:
    """Whether ``x`` is non-zero anywhere: a part that is zero everywhere is left out of an itemized result."""
    values: Any = x
    return bool(values.any()) if is_array(values) else bool(values)


def same(cond: bool) -> bool:
    """The truth value ``cond`` has everywhere, for a branch that is not arithmetic (a recipe, a stack, a
    pipeline stage): the caller evaluates one group of candidates that share it. ValueError when they differ."""
    values: Any = cond
    if not is_array(values):
        return bool(values)
    if values.all():
        return True
    if not values.any():
        return False
    raise ValueError("candidates of one group differ in a discrete choice; group them by it")
