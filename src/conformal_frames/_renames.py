"""Keyword arguments renamed in 0.2: the old name fails with a clear TypeError."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: the release that renamed the keywords
SINCE = "0.2"


def renamed(**old_to_new: str | tuple[str, str]) -> Callable[[F], F]:
    """Decorate a factory whose keywords ``old`` are now called ``new``.

    A value ``(new, note)`` appends ``"; note"`` to the message (e.g. when the
    meaning changed along with the name).

    Passing an old keyword raises ``TypeError("<f>() got an unexpected keyword
    argument 'ci'; it is called 'ci_level' since 0.2")``; the decorated
    function keeps its name, signature and docstring.  The mapping is kept on
    the wrapper as ``__renamed__``.

    Examples
    --------
    >>> @renamed(ci="ci_level")
    ... def coverage(*, ci_level=0.95):
    ...     return ci_level
    >>> coverage(ci=0.9)
    Traceback (most recent call last):
    ...
    TypeError: coverage() got an unexpected keyword argument 'ci'; it is called 'ci_level' since 0.2
    """

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    name, note = (new, "") if isinstance(new, str) else new
                    msg = (
                        f"{fn.__name__}() got an unexpected keyword argument {old!r}; "
                        f"it is called {name!r} since {SINCE}{'; ' + note if note else ''}"
                    )
                    raise TypeError(msg)
            return fn(*args, **kwargs)

        wrapper.__renamed__ = dict(old_to_new)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
