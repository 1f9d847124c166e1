"""``engine.memo.cached_call``: the cache for hashable arguments, the plain call otherwise, errors as they are."""

from __future__ import annotations

import functools

import pytest

from conformal_frames.engine.memo import cached_call

CALLS: list[object] = []


@functools.lru_cache(maxsize=8)
def _twice(x: object) -> object:
    CALLS.append(x)
    if x == "bad":
        msg = "unhashable type: a message that must not be read as an unhashable argument"
        raise TypeError(msg)
    return x


def test_hashable_arguments_are_cached_and_unhashable_ones_called_plainly() -> None:
    CALLS.clear()
    assert cached_call(_twice, 1) == 1 and cached_call(_twice, 1) == 1
    assert cached_call(_twice, [1]) == [1] and cached_call(_twice, [1]) == [1]
    assert CALLS == [1, [1], [1]]


def test_a_type_error_of_the_call_itself_propagates_once() -> None:
    CALLS.clear()
    with pytest.raises(TypeError, match="must not be read"):
        cached_call(_twice, "bad")
    assert CALLS == ["bad"]


def test_a_factory_call_that_should_raise_never_gets_an_equal_earlier_result() -> None:
    """1, 1.0 and True are equal keys of a plain cache: cfx's factories keep them apart, as cf's checks do."""
    import conformal_frames as cf
    import conformal_frames.polars as cfx

    first = cfx.ece("y", "p", n_bins=10)
    assert cfx.ece("y", "p", n_bins=10) is first
    for bad in (10.0, True):
        with pytest.raises(TypeError, match="n_bins") as mine:
            cfx.ece("y", "p", n_bins=bad)
        with pytest.raises(TypeError, match="n_bins") as theirs:
            cf.ece("y", "p", n_bins=bad)
        assert str(mine.value) == str(theirs.value)
