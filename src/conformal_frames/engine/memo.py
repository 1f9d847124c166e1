"""Memoized calls whose arguments may be unhashable (a metric with a list parameter)."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

T_co = TypeVar("T_co", covariant=True)

__all__ = ["cached_call"]


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
