"""Shared test helpers: collect any result to pandas, compare with oracles."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd

RTOL = 1e-12


def to_pandas(result: Any) -> pd.DataFrame:
    """Any native frame (eager or lazy, any backend) as a pandas DataFrame."""
    frame = nw.from_native(result)
    if isinstance(frame, nw.LazyFrame):
        frame = frame.collect()
    out = frame.to_pandas()
    out.columns = [str(c) for c in out.columns]
    return out.reset_index(drop=True)


def assert_close(actual: Any, expected: Any, *, rtol: float = RTOL, atol: float = 0.0, what: str = "") -> None:
    """Element-wise closeness with NaN == NaN (null metrics compare as NaN)."""
    a = np.asarray(pd.to_numeric(pd.Series(np.ravel(np.asarray(actual, dtype=object))), errors="coerce"), dtype=float)
    e = np.asarray(np.ravel(np.asarray(expected, dtype=float)), dtype=float)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def group_dict(keys: np.ndarray) -> dict[Any, np.ndarray]:
    """Row indices of each group, by sorted key."""
    return {k: np.flatnonzero(keys == k) for k in np.unique(keys)}


def random_intervals(seed: int, n: int = 200, n_groups: int = 5) -> dict[str, Any]:
    """Random interval data with tied widths, tied values and tiny groups.

    Groups: ``g0`` .. ``g{n_groups-1}`` with skewed sizes, plus ``one``
    (1 row) and ``two`` (2 rows).  Widths are rounded so that ties occur;
    some ``y`` sit exactly on a bound.
    """
    rng = np.random.default_rng(seed)
    center = rng.normal(size=n) * 3
    w = np.round(rng.gamma(2.0, 1.0, size=n), 1)  # tied widths
    lo = np.round(center - w / 2, 2)
    hi = lo + w
    y = np.round(center + rng.normal(size=n) * 1.5, 2)
    on_bound = rng.random(n) < 0.05
    y[on_bound] = lo[on_bound]
    p = rng.dirichlet(np.ones(n_groups) * 0.7)
    groups = rng.choice([f"g{i}" for i in range(n_groups)], size=n - 3, p=p)
    g = np.concatenate([groups, ["one", "two", "two"]])
    return {"y": y, "lo": lo, "hi": hi, "g": g}


def run(make: Callable[[dict[str, Any]], Any], data: dict[str, Any], metrics: Sequence[Any]) -> pd.DataFrame:
    """``cf.evaluate`` of ``metrics`` on ``make(data)`` by ``g``, as pandas."""
    import conformal_frames as cf

    return to_pandas(cf.evaluate(make(data), *metrics, by="g"))


def compare(actual: pd.DataFrame, expected: pd.DataFrame, *, skip: Sequence[str] = (), what: str = "") -> int:
    """Compare the columns of ``expected`` (but ``skip`` suffixes and ``n``) to 1e-12; returns how many."""
    assert list(actual["g"]) == list(expected["g"]), what
    cols = [c for c in expected.columns if c not in ("g", "n") and not c.endswith(tuple(skip))]
    for c in cols:
        assert_close(actual[c], expected[c], what=f"{what}: {c}")
    return len(cols)


def side_by_side(
    make: Callable[[dict[str, Any]], Any], datas: list[dict[str, Any]], metrics: Sequence[Any]
) -> list[pd.DataFrame]:
    """``run`` of each data set, as one grouped call over their rows (group ``g`` of set i is ``"i g"``)."""
    both = {c: _stack([d[c] for d in datas]) for c in datas[0]}
    both["g"] = np.concatenate([[f"{i} {g}" for g in d["g"]] for i, d in enumerate(datas, 1)])
    out = run(make, both, metrics)
    parts = []
    for i in range(1, len(datas) + 1):
        part = out[out["g"].str.startswith(f"{i} ")].reset_index(drop=True)
        parts.append(part.assign(g=part["g"].str[len(f"{i} ") :]))
    return parts


def _stack(columns: list[Any]) -> Any:
    """The values of one column of several data sets, one after the other (a list column stays a list)."""
    if any(isinstance(v, list) and v and isinstance(v[0], (list, np.ndarray)) for v in columns):
        return [x for v in columns for x in v]
    return np.concatenate([np.asarray(v) for v in columns])
