"""Issue 39 item 3: which ``evaluate`` calls on polars run the compiled expression (engine/_polars_native).

The routing under the shipped limits, as measured in bench/bench_routing.py
(docs/performance.md, "Which evaluate calls run the compiled expression"): the
compiled path where it was at parity or faster, the narwhals path (with the
kept plans of eager frames and the one-sort ordered cells) where it was slower.
A widened call gives the narwhals path's numbers (1e-12).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import conformal_frames as cf
from conformal_frames.engine import _polars_native
from conformal_frames.engine.execute import _collect_options
from conformal_frames.engine.plan import to_lazy


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(7)
    n = 60
    y = rng.normal(size=n).round(1)  # ties
    score = rng.integers(0, 12, n) / 12  # tied scores
    return pl.DataFrame(
        {
            "g": rng.integers(0, 3, n),
            "y": y,
            "lo": y - 1.0 + rng.normal(size=n).round(1) * 0.5,
            "hi": y + 1.0 + rng.normal(size=n).round(1) * 0.5,
            "label": (rng.random(n) < score).astype(float),
            "score": score,
        }
    ).with_columns(pl.min_horizontal("lo", "hi").alias("lo"), pl.max_horizontal("lo", "hi").alias("hi"))


FRAME = _frame()
EIGHT = [
    cf.coverage("y", "lo", "hi"),
    cf.width("lo", "hi"),
    cf.winkler("y", "lo", "hi", confidence_level=0.9),
    cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
    cf.ece("label", "score", n_bins=10),
    cf.mce("label", "score", n_bins=10),
    cf.brier("label", "score"),
    cf.spiegelhalter_test("label", "score"),
]
SORTS = {
    "ks_test": cf.ks_test("label", "score"),
    "kuiper_test": cf.kuiper_test("label", "score"),
    "ssc": cf.ssc("y", "lo", "hi", n_bins=3),
    "auroc": cf.auroc("label", "score"),
}

# (what, metrics, lazy, by, compiled under the shipped limits)
ROUTES = [
    ("coverage", [EIGHT[0]], True, None, True),
    ("coverage", [EIGHT[0]], False, None, False),  # small eager: the kept plan (engine/_plan_cache)
    ("8 single-pass", EIGHT, True, None, False),  # fused: slower compiled from 1e6 rows
    ("8 single-pass", EIGHT, False, "g", False),
    ("ks_test", [SORTS["ks_test"]], True, None, True),  # widened by item 3
    ("kuiper_test", [SORTS["kuiper_test"]], True, None, False),  # 1.03-1.20x from 1e6 rows
    ("ks_test", [SORTS["ks_test"]], True, "g", True),
    ("ssc", [SORTS["ssc"]], True, None, False),  # 1.3x slower compiled from 1e6 rows
    ("auroc", [SORTS["auroc"]], True, None, False),
]


def _taken(monkeypatch: pytest.MonkeyPatch, metrics: list[Any], lazy: bool, by: Any, *, native: bool) -> Any:
    real, taken = _polars_native.run, []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs) if native else None
        taken.append(out is not None)
        return out

    monkeypatch.setattr(_polars_native, "run", spy)
    out = cf.evaluate(FRAME.lazy() if lazy else FRAME, *metrics, by=by)
    return (out.collect() if lazy else out), any(taken)


@pytest.mark.parametrize(
    ("what", "metrics", "lazy", "by", "compiled"),
    ROUTES,
    ids=[f"{r[0]}-{'lazy' if r[2] else 'eager'}-{r[3]}" for r in ROUTES],
)
def test_the_route_and_its_numbers(
    monkeypatch: pytest.MonkeyPatch, what: str, metrics: list[Any], lazy: bool, by: Any, compiled: bool
) -> None:
    got, taken = _taken(monkeypatch, metrics, lazy, by, native=True)
    assert taken is compiled, what
    if compiled:  # the narwhals path's frame, to 1e-12
        expected, _ = _taken(monkeypatch, metrics, lazy, by, native=False)
        assert_frame_equal(got, expected, check_dtypes=True, rel_tol=1e-12, abs_tol=1e-12)


def test_an_eager_ungrouped_sort_keeps_the_narwhals_path_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_polars_native, "MIN_EAGER_ROWS", 0)  # as if the frame were large
    lf, _ = to_lazy(FRAME)
    for metric in SORTS.values():
        assert _polars_native.run(FRAME, lf, [metric], [], "null", eager=True, collect_options=_collect_options) is None
    assert set(_polars_native.LAZY_UNGROUPED_SORTS) <= set(SORTS)
