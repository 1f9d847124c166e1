"""Benchmark of the point and scaled errors: conformal-frames vs utilsforecast's ``evaluate``.

Not part of the test run.  Needs polars, numpy and utilsforecast
(``pip install utilsforecast``).

    python bench/bench_point.py            # 1e6 forecast rows, 1,000 series
    python bench/bench_point.py --quick    # 1e5 rows (smoke run)

The same numbers on both sides (checked to 1e-9 relative before timing),
grouped by series, on eager polars frames:

- ``point``: mae, mse, rmse, mape, smape (utilsforecast's smape is half the
  M4 one: compared after the factor 2);
- ``scaled``: mase and rmsse with season 1, scales from a training frame of
  the same size (utilsforecast computes the naive scales inside
  ``evaluate(train_df=...)``; conformal-frames with ``naive_scale``, a join
  and ``evaluate``, all timed);
- ``all``: both in one call.

Each timing is the best of ``--repeat`` runs; the ratio is conformal-frames'
time over utilsforecast's (below 1: faster).
"""

from __future__ import annotations

import argparse
import platform
from functools import partial
from typing import Any

import numpy as np
import polars as pl
from bench_metrics import best_of

import conformal_frames as cf


def make_data(n: int, n_series: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    per = n // n_series
    series = np.repeat(np.arange(n_series), per)
    t = np.tile(np.arange(per), n_series)
    level = rng.normal(50.0, 10.0, n_series)[series]
    train_y = level + np.cumsum(rng.normal(size=(n_series, per)), axis=1).ravel()
    y = level + rng.normal(size=series.size) * 2.0
    f = y + rng.normal(size=series.size)
    train = pl.DataFrame({"unique_id": series, "ds": t, "y": train_y})
    test = pl.DataFrame({"unique_id": series, "ds": t + per, "y": y, "f": f})
    return train, test


def ours_point(test: pl.DataFrame) -> pl.DataFrame:
    return cf.evaluate(
        test,
        cf.mae("y", "f"),
        cf.mse("y", "f"),
        cf.rmse("y", "f"),
        cf.mape("y", "f"),
        cf.smape("y", "f"),
        by="unique_id",
    )


def ours_scaled(test: pl.DataFrame, train: pl.DataFrame) -> pl.DataFrame:
    scales = cf.naive_scale(train, "y", by="unique_id", order_by="ds").drop("n")
    joined = test.join(scales, on="unique_id")
    metrics = [cf.mase("y", "f", scale="naive_mae"), cf.rmsse("y", "f", scale="naive_mse")]
    return cf.evaluate(joined, *metrics, by="unique_id")


def ours_all(test: pl.DataFrame, train: pl.DataFrame) -> pl.DataFrame:
    scales = cf.naive_scale(train, "y", by="unique_id", order_by="ds").drop("n")
    joined = test.join(scales, on="unique_id")
    metrics = [
        cf.mae("y", "f"),
        cf.mse("y", "f"),
        cf.rmse("y", "f"),
        cf.mape("y", "f"),
        cf.smape("y", "f"),
        cf.mase("y", "f", scale="naive_mae"),
        cf.rmsse("y", "f", scale="naive_mse"),
    ]
    return cf.evaluate(joined, *metrics, by="unique_id")


def theirs(test: pl.DataFrame, train: pl.DataFrame | None, names: list[str]) -> pl.DataFrame:
    from utilsforecast import losses
    from utilsforecast.evaluation import evaluate

    fns: dict[str, Any] = {
        "mae": losses.mae,
        "mse": losses.mse,
        "rmse": losses.rmse,
        "mape": losses.mape,
        "smape": losses.smape,
        "mase": partial(losses.mase, seasonality=1),
        "rmsse": partial(losses.rmsse, seasonality=1),
    }
    metrics = []
    for name in names:
        fn = fns[name]
        if isinstance(fn, partial):
            fn.__name__ = name  # type: ignore[attr-defined]
        metrics.append(fn)
    return evaluate(test, metrics=metrics, models=["f"], train_df=train)


def check(ours: pl.DataFrame, other: pl.DataFrame, names: list[str]) -> None:
    wide = other.pivot(on="metric", index="unique_id", values="f").sort("unique_id")
    mine = ours.sort("unique_id")
    for name in names:
        factor = 2.0 if name == "smape" else 1.0
        a, b = mine[name].to_numpy(), factor * wide[name].to_numpy()
        np.testing.assert_allclose(a, b, rtol=1e-9, err_msg=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 rows instead of 1e6")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.rows or (100_000 if args.quick else 1_000_000)
    train, test = make_data(n, args.series)
    point = ["mae", "mse", "rmse", "mape", "smape"]
    scaled = ["mase", "rmsse"]
    cases = {
        "point": (lambda: ours_point(test), lambda: theirs(test, None, point), point),
        "scaled": (lambda: ours_scaled(test, train), lambda: theirs(test, train, scaled), scaled),
        "all": (lambda: ours_all(test, train), lambda: theirs(test, train, point + scaled), point + scaled),
    }
    print(f"# {test.height:,} forecast rows, {train.height:,} training rows, {args.series:,} series")
    print(f"# python {platform.python_version()}, polars {pl.__version__}, best of {args.repeat}")
    print("| case | conformal-frames (s) | utilsforecast (s) | ratio |")
    print("|---|---|---|---|")
    for name, (mine, other, names) in cases.items():
        check(mine(), other(), names)
        a, b = best_of(mine, args.repeat), best_of(other, args.repeat)
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
