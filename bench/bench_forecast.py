"""Benchmark of the forecast scores: conformal-frames vs numpy, hand-written polars, scoringrules, utilsforecast.

Not part of the test run.  Needs polars and numpy; scoringrules and
utilsforecast are optional peers (a row says "not installed" when one is
missing): ``pip install -e . polars scoringrules utilsforecast``.

    python bench/bench_forecast.py            # 1e6 rows, 9 quantile levels, 1,000 series
    python bench/bench_forecast.py --quick    # 1e5 rows (smoke run)

Scores: the pinball loss averaged over 9 levels (0.1, ..., 0.9), the WIS of
those quantiles (median and 4 central intervals), the CRPS of a Gaussian
forecast and of a 9-member ensemble (a polars list column; numpy and
scoringrules get the same members as a 2-D array), each ungrouped and by
1,000 series.  Every other side computes the same number (checked to 1e-9
relative before timing); grouped numpy is the per-row score averaged with
``np.bincount``.  utilsforecast's ``evaluate`` groups by series only and
has no WIS: its row is ``mqloss`` (8 quantiles of the 4 central intervals)
+ ``coverage`` (4 levels) against conformal-frames' ``wis`` + ``pinball_loss``
(9 levels) + ``interval_coverage`` (4 levels: coverage with its Wilson
interval, width, Winkler score) in one ``evaluate``.

Each timing is the best of ``--repeat`` runs, all in one process run; the
ratio is conformal-frames' time over the other side's (below 1: faster).
The end prints a markdown table (docs/performance.md).
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from bench_metrics import best_of  # the same timing rule as the metric benchmark
from scipy.special import ndtr

import conformal_frames as cf

LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
Z = {0.1: -1.2815515655446004, 0.2: -0.8416212335729143, 0.3: -0.5244005127080407, 0.4: -0.2533471031357997}
Z |= {0.5: 0.0} | {round(1 - t, 1): -z for t, z in list(Z.items())}
QUANTILES = {t: f"q{round(t * 100)}" for t in LEVELS}
INTERVALS = {round(1 - 2 * t, 1): (QUANTILES[t], QUANTILES[round(1 - t, 1)]) for t in LEVELS if t < 0.5}
M = 9  # ensemble members


def make_data(n: int, n_series: int, seed: int = 0) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 3.0, n)
    sigma = rng.gamma(4.0, 0.25, n) + 0.05
    y = mu + 1.1 * sigma * rng.standard_normal(n)
    members = mu[:, None] + sigma[:, None] * rng.standard_normal((n, M))
    arrays = {"series": rng.integers(0, n_series, n), "y": y, "mu": mu, "sigma": sigma, "members": members}
    arrays |= {c: mu + sigma * Z[t] for t, c in QUANTILES.items()}
    df = pl.DataFrame({k: v for k, v in arrays.items() if k != "members"}).with_columns(
        pl.Series("ens", members.tolist(), dtype=pl.List(pl.Float64)),
        pl.int_range(pl.len()).alias("ds"),
    )
    return df, arrays


# --------------------------------------------------------------------------
# numpy: per-row scores, grouped with np.bincount
# --------------------------------------------------------------------------
def np_pinball(a: dict[str, np.ndarray]) -> np.ndarray:
    y = a["y"]
    total = np.zeros_like(y)
    for t, c in QUANTILES.items():
        d = y - a[c]
        total += np.maximum(t * d, (t - 1.0) * d)
    return total / len(QUANTILES)


def np_wis(a: dict[str, np.ndarray]) -> np.ndarray:
    y = a["y"]
    total = 0.5 * np.abs(y - a[QUANTILES[0.5]])
    for level, (lo, hi) in INTERVALS.items():
        alpha = 1.0 - level
        low, up = a[lo], a[hi]
        total += alpha / 2.0 * ((up - low) + 2.0 / alpha * (np.maximum(low - y, 0.0) + np.maximum(y - up, 0.0)))
    return total / (len(INTERVALS) + 0.5)


def np_crps_gauss(a: dict[str, np.ndarray]) -> np.ndarray:
    z = (a["y"] - a["mu"]) / a["sigma"]
    pdf = np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
    return a["sigma"] * (z * (2.0 * ndtr(z) - 1.0) + 2.0 * pdf - 1.0 / np.sqrt(np.pi))


def np_crps_ensemble(a: dict[str, np.ndarray]) -> np.ndarray:
    x = np.sort(a["members"], axis=1)
    weights = 2.0 * np.arange(1, M + 1) - M - 1
    return np.abs(x - a["y"][:, None]).mean(axis=1) - (x @ weights) / (M * M)


def by_series(a: dict[str, np.ndarray], per_row: np.ndarray) -> np.ndarray:
    codes = a["series"]
    return np.bincount(codes, weights=per_row) / np.bincount(codes)


# --------------------------------------------------------------------------
# hand-written polars
# --------------------------------------------------------------------------
def pl_pinball() -> pl.Expr:
    y = pl.col("y")
    terms = [pl.max_horizontal(t * (y - pl.col(c)), (t - 1.0) * (y - pl.col(c))) for t, c in QUANTILES.items()]
    return pl.sum_horizontal(terms) / len(terms)


def pl_wis() -> pl.Expr:
    y = pl.col("y")
    parts = [0.5 * (y - pl.col(QUANTILES[0.5])).abs()]
    for level, (lo, hi) in INTERVALS.items():
        alpha = 1.0 - level
        lo_c, hi_c = pl.col(lo), pl.col(hi)
        miss = (lo_c - y).clip(lower_bound=0.0) + (y - hi_c).clip(lower_bound=0.0)
        parts.append(alpha / 2.0 * ((hi_c - lo_c) + 2.0 / alpha * miss))
    return pl.sum_horizontal(parts) / (len(INTERVALS) + 0.5)


def pl_crps_gauss() -> pl.Expr:
    z = (pl.col("y") - pl.col("mu")) / pl.col("sigma")
    cdf = z.map_batches(lambda s: pl.Series(ndtr(s.to_numpy())), return_dtype=pl.Float64)
    pdf = (-0.5 * z * z).exp() / np.sqrt(2.0 * np.pi)
    return pl.col("sigma") * (z * (2.0 * cdf - 1.0) + 2.0 * pdf - 1.0 / np.sqrt(np.pi))


def pl_crps_ensemble() -> pl.Expr:
    ens = pl.col("ens")
    spread = ens.list.sort().list.eval(pl.element() * (2 * pl.int_range(pl.len()) + 1 - pl.len())).list.sum()
    return (ens - pl.col("y")).list.eval(pl.element().abs()).list.mean() - spread / ens.list.len().pow(2)


def polars_score(df: pl.DataFrame, expr: pl.Expr, grouped: bool) -> pl.DataFrame:
    if grouped:
        return df.lazy().group_by("series").agg(expr.mean().alias("s")).sort("series").collect()
    return df.lazy().select(expr.mean().alias("s")).collect()


# --------------------------------------------------------------------------
# scoringrules (numpy backend) per row, grouped with np.bincount
# --------------------------------------------------------------------------
def scoringrules_scores(a: dict[str, np.ndarray]) -> dict[str, Callable[[], np.ndarray]] | None:
    try:
        import scoringrules as sr
    except ImportError:
        return None
    y = a["y"]
    q = np.column_stack([a[c] for c in QUANTILES.values()])
    lower = np.column_stack([a[lo] for lo, _ in INTERVALS.values()])
    upper = np.column_stack([a[hi] for _, hi in INTERVALS.values()])
    alpha = np.array([1.0 - level for level in INTERVALS])
    levels = np.array(LEVELS)
    median = a[QUANTILES[0.5]]
    return {
        "pinball": lambda: sr.quantile_score(y[:, None], q, levels).mean(axis=1),
        # scoringrules 0.10's numpy backend adds w_median * median (not |y - median|): its
        # interval part (w_median=0) plus the median term of the definition
        "wis": lambda: (
            sr.weighted_interval_score(y, median, lower, upper, alpha, w_median=0.0)
            + 0.5 * np.abs(y - median) / (len(INTERVALS) + 0.5)
        ),
        "crps_gauss": lambda: sr.crps_normal(y, a["mu"], a["sigma"]),
        "crps_ensemble": lambda: sr.crps_ensemble(y, a["members"]),
    }


# --------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------
class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, float, str, float | None]] = []

    def add(self, score: str, scope: str, ours: float, other: str, t_other: float | None) -> None:
        self.rows.append((score, scope, ours, other, t_other))
        shown = "not installed" if t_other is None else f"{t_other * 1e3:9.1f} ms  ratio {ours / t_other:6.2f}"
        print(f"{score:<34} {scope:<10} ours {ours * 1e3:9.1f} ms  vs {other:<28} {shown}", flush=True)

    def markdown(self) -> str:
        lines = [
            "| score | scope | conformal-frames | other | other's time | ratio (ours / other) |",
            "|---|---|---|---|---|---|",
        ]
        for score, scope, ours, other, t in self.rows:
            their = "not installed" if t is None else f"{t * 1e3:,.0f} ms"
            ratio = "" if t is None else f"{ours / t:.2f}"
            lines.append(f"| {score} | {scope} | {ours * 1e3:,.0f} ms | {other} | {their} | {ratio} |")
        return "\n".join(lines)


def metrics() -> dict[str, Any]:
    return {
        "pinball": cf.pinball_loss("y", quantiles=QUANTILES),
        "wis": cf.wis("y", quantiles=QUANTILES),
        "crps_gauss": cf.crps("y", mean="mu", std="sigma"),
        "crps_ensemble": cf.crps("y", samples="ens"),
    }


NUMPY = {"pinball": np_pinball, "wis": np_wis, "crps_gauss": np_crps_gauss, "crps_ensemble": np_crps_ensemble}
POLARS = {"pinball": pl_pinball, "wis": pl_wis, "crps_gauss": pl_crps_gauss, "crps_ensemble": pl_crps_ensemble}
TITLES = {
    "pinball": "pinball loss (9 levels)",
    "wis": "WIS (median + 4 intervals)",
    "crps_gauss": "CRPS, Gaussian",
    "crps_ensemble": f"CRPS, {M}-member ensemble",
}


def check_agreement(df: pl.DataFrame, a: dict[str, np.ndarray]) -> None:
    for name, metric in metrics().items():
        ours = cf.evaluate(df, metric, by="series").sort("series")[metric.output_name].to_numpy()
        np.testing.assert_allclose(ours, by_series(a, NUMPY[name](a)), rtol=1e-9, err_msg=name)
        theirs = polars_score(df, POLARS[name](), grouped=True)["s"].to_numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, err_msg=name)
    print("agreement: every score equals numpy and hand-written polars to 1e-9 (grouped)", flush=True)


def score_rows(tab: Table, df: pl.DataFrame, a: dict[str, np.ndarray], r: int) -> None:
    peers = scoringrules_scores(a)
    for name, metric in metrics().items():
        title = TITLES[name]
        for grouped in (False, True):
            scope = "by series" if grouped else "ungrouped"
            by = "series" if grouped else None
            ours = best_of(lambda m=metric, b=by: cf.evaluate(df, m, by=b), r)

            def numpy_side(n: str = name, g: bool = grouped) -> Any:
                row = NUMPY[n](a)
                return by_series(a, row) if g else row.mean()

            tab.add(title, scope, ours, "numpy", best_of(numpy_side, r))
            tab.add(
                title,
                scope,
                ours,
                "hand-written polars",
                best_of(lambda n=name, g=grouped: polars_score(df, POLARS[n](), g), r),
            )
            if peers is None:
                tab.add(title, scope, ours, "scoringrules", None)
                continue
            if not grouped:
                np.testing.assert_allclose(peers[name]().mean(), NUMPY[name](a).mean(), rtol=1e-9, err_msg=name)

            def peer_side(n: str = name, g: bool = grouped) -> Any:
                row = peers[n]()
                return by_series(a, row) if g else row.mean()

            tab.add(title, scope, ours, "scoringrules (numpy backend)", best_of(peer_side, r))


def utilsforecast_row(tab: Table, df: pl.DataFrame, r: int) -> None:
    what = "WIS + pinball + coverage"
    ours_metrics = [
        cf.wis("y", quantiles=QUANTILES),
        cf.pinball_loss("y", quantiles=QUANTILES),
        cf.interval_coverage("y", intervals=INTERVALS),
    ]
    ours = best_of(lambda: cf.evaluate(df, *ours_metrics, by="series"), r)
    try:
        from utilsforecast.evaluation import evaluate
        from utilsforecast.losses import coverage, mqloss
    except ImportError:
        tab.add(what, "by series", ours, "utilsforecast evaluate", None)
        return
    levels = [round(level * 100) for level in INTERVALS]
    renamed = df.select(
        "series",
        "ds",
        "y",
        pl.col(QUANTILES[0.5]).alias("model"),
        *[pl.col(lo).alias(f"model-lo-{round(c * 100)}") for c, (lo, _) in INTERVALS.items()],
        *[pl.col(hi).alias(f"model-hi-{round(c * 100)}") for c, (_, hi) in INTERVALS.items()],
    )

    def theirs() -> Any:
        return evaluate(renamed, metrics=[mqloss, coverage], models=["model"], level=levels, id_col="series")

    tab.add(what, "by series", ours, "utilsforecast evaluate (mqloss + coverage)", best_of(theirs, r))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 rows")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--series", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.rows or (100_000 if args.quick else 1_000_000)
    print(
        f"conformal-frames {cf.__version__}, polars {pl.__version__}, numpy {np.__version__}, "
        f"python {platform.python_version()}, {platform.machine()}, {n:,} rows, {args.series:,} series",
        flush=True,
    )
    for peer in ("scoringrules", "utilsforecast"):
        try:
            module = __import__(peer)
            print(f"{peer} {getattr(module, '__version__', '?')}", flush=True)
        except ImportError:
            print(f"{peer}: not installed", flush=True)
    df, a = make_data(n, args.series)
    check_agreement(df, a)
    tab = Table()
    score_rows(tab, df, a, args.repeat)
    utilsforecast_row(tab, df, args.repeat)
    print()
    print(tab.markdown())


if __name__ == "__main__":
    main()
