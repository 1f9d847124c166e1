"""Keyword arguments: a name renamed in 0.2 fails with its new name, a misspelt one with "did you mean"."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
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


def check_keywords(fn_name: str, kwargs: Mapping[str, Any], allowed: Iterable[str], skip: Iterable[str] = ()) -> None:
    """Raise ``TypeError`` for a keyword not in ``allowed``, with the closest allowed name.

    ``"ece() got an unexpected keyword argument 'n_bin'; did you mean 'n_bins'?"``
    (the same words as Python's own error, plus the suggestion).  Names in
    ``skip`` (renamed keywords, which fail with their new name) are left to
    the function.
    """
    names = list(allowed)
    unknown = [k for k in kwargs if k not in names and k not in skip]
    if unknown:
        close = difflib.get_close_matches(unknown[0], names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; its keywords are {', '.join(map(repr, names))}"
        msg = f"{fn_name}() got an unexpected keyword argument {unknown[0]!r}{hint}"
        raise TypeError(msg)


def keyword_names(fn: Callable[..., Any]) -> list[str] | None:
    """The keywords ``fn`` accepts (``None`` when it takes ``**kwargs``)."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params if p.kind in kinds]


def passed_on(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Keywords ``fn`` answers with its own message: renamed ones, and ``weights=`` of a metric without them."""
    return (*getattr(fn, "__renamed__", ()), *getattr(fn, "__handled_keywords__", ()))


def keywords_checked(fn: F) -> F:
    """``fn`` with a "did you mean" for a misspelt keyword (:func:`check_keywords`).

    The wrapper keeps the name, signature, docstring and ``__renamed__``
    of ``fn``; a function taking ``**kwargs`` is returned as it is.

    Examples
    --------
    >>> def ece(y, score, *, n_bins=10):
    ...     return n_bins
    >>> keywords_checked(ece)("y", "p", n_bin=5)
    Traceback (most recent call last):
    ...
    TypeError: ece() got an unexpected keyword argument 'n_bin'; did you mean 'n_bins'?
    """
    names = keyword_names(fn)
    if names is None or getattr(fn, "__keywords_checked__", False):
        return fn
    skip = passed_on(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            check_keywords(fn.__name__, kwargs, names, skip)
        return fn(*args, **kwargs)

    wrapper.__keywords_checked__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
