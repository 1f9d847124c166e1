"""Memoized calls whose arguments may be unhashable (a metric with a list parameter)."""

from __future__ import annotations

import math
from typing import Any, Protocol, TypeVar

T_co = TypeVar("T_co", covariant=True)

__all__ = ["cached_call", "kinds"]


class _Cached(Protocol[T_co]):
    """A function wrapped by :func:`functools.lru_cache` (``__wrapped__`` is the plain one)."""

    def __call__(self, *args: Any) -> T_co: ...

    @property
    def __wrapped__(self) -> Any: ...


def cached_call(fn: _Cached[T_co], *args: Any) -> T_co:
    """``fn(*args)`` through its cache when every argument hashes, else the uncached function.

    Asked of the arguments up front, so a ``TypeError`` raised by the call
    itself is never taken for an unhashable argument.
    """
    try:
        hash(args)
    except TypeError:
        result: T_co = fn.__wrapped__(*args)
        return result
    return fn(*args)


def kinds(value: Any) -> Any:
    """What equality does not tell apart in ``value``: the type of every element, and the sign of a zero.

    A cache keyed on arguments takes ``1``, ``1.0`` and ``True`` (and ``0.0``
    and ``-0.0``) for the same key; passing ``kinds(args)`` beside them keeps
    a call that should raise (``n_bins=10.0``) from getting an earlier result.

    >>> kinds((1, 1.0, True)) == kinds((1, 1, 1))
    False
    >>> kinds(("a", -0.0)) == kinds(("b", 0.0))
    False
    """
    if isinstance(value, (tuple, list)):
        return type(value), tuple(kinds(v) for v in value)
    if isinstance(value, frozenset):
        return type(value), frozenset(kinds(v) for v in value)
    if isinstance(value, float) and value == 0.0:
        return float, math.copysign(1.0, value)
    return type(value)
