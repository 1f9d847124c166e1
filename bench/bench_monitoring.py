"""Monitoring with guarantees: the large simulations of issue 40 (the small ones are in tests/test_monitoring.py).

    python bench/bench_monitoring.py                 # 2000 runs of 60 days x 50 rows
    python bench/bench_monitoring.py --runs 500      # quicker

Each run is a segment of one ``cf.coverage_sequence(..., by="run")`` call
(polars), misses drawn independently at the rate ``1 - coverage``; target
coverage 0.9, significance 0.05, ci_level 0.95, ``n_opt`` 1000 rows.

1. **On target** (miss rate exactly 0.1): the fraction of runs whose
   e-process ever alarms (``correction=None``: one segment's guarantee),
   whose confidence sequence ever excludes the true coverage, and whose
   one-sided binomial test of the cumulative rows, checked every day at 5 %,
   ever rejects ("peeking"; at the last day alone it rejects in about 5 %).
2. **After a drop** (miss rate 0.1 -> 0.15, 0.2, 0.3 on day 20): the
   detection rate by day 60 and the mean delay in rows after the change
   (monitoring from the start, and from the change with ``since=``),
   against an oracle SPRT that knows both rates and the change, checked
   after every row (``log LR >= log(1 / significance)``): the ratio of the
   mean delays; ``_ratio_daily`` against the same SPRT looked at once a day
   (the monitor's looks: a delay is a whole number of days).
3. **Change detection** (``change_detection=True``, monitoring from the
   start, no change point given): the same drops, at significance 0.05
   (average run length to a false alarm >= 20 days) and 0.001 (>= 1000
   days); and on target over ``--arl-days`` days, the fraction of runs with
   a false alarm and the mean run length (censored at the horizon), against
   the theory's bound ``P(alarm by H) <= E[min(run length, H)] significance``.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import polars as pl
from scipy import stats

import conformal_frames as cf

TARGET, SIGNIFICANCE, N_OPT = 0.9, 0.05, 1000


def runs(seed: int, n_runs: int, days: int, per_day: int, rate_after: float, change: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    day = np.tile(np.repeat(np.arange(days), per_day), n_runs)
    run = np.repeat(np.arange(n_runs), days * per_day)
    rate = np.where(day >= change, rate_after, 1 - TARGET)
    return pl.DataFrame({"run": run, "day": day, "m": (rng.random(run.size) < rate).astype(np.int8)})


def sequence(df: pl.DataFrame, method: str, since: int | None = None, **kw: object) -> pl.DataFrame:
    return cf.coverage_sequence(df, miss="m", confidence_level=TARGET, order_by="day", by="run", method=method,
                                correction=None, n_opt=N_OPT, since=since, **kw)  # fmt: skip


def first_alarms(seq: pl.DataFrame) -> np.ndarray:
    return seq.group_by("run").agg(pl.col("alarm_period").first())["alarm_period"].to_numpy().astype(float)


def on_target(args: argparse.Namespace) -> dict[str, float]:
    df = runs(args.seed, args.runs, args.days, args.per_day, 1 - TARGET, args.days)
    out: dict[str, float] = {}
    for method in ("beta_binomial", "normal_mixture"):
        t0 = time.perf_counter()
        seq = sequence(df, method)
        out[f"{method}_seconds"] = round(time.perf_counter() - t0, 2)
        per_run = seq.group_by("run").agg(pl.col("alarm").any(), pl.col("coverage_cs_low").max(),
                                          pl.col("coverage_cs_high").min())  # fmt: skip
        out[f"{method}_ever_alarm"] = float(per_run["alarm"].mean())
        # the band misses the true coverage at some period: its low end above, or its high end below, 0.9
        outside = (seq["coverage_cs_low"] > TARGET) | (seq["coverage_cs_high"] < TARGET)
        out[f"{method}_band_ever_misses_truth"] = float(
            pl.DataFrame({"run": seq["run"], "o": outside}).group_by("run").agg(pl.col("o").any())["o"].mean()
        )
    k = np.round(seq["n"].to_numpy() * (1 - seq["coverage"].to_numpy()))
    p = stats.binom.sf(k - 1, seq["n"].to_numpy(), 1 - TARGET)
    rejected = pl.DataFrame({"run": seq["run"], "day": seq["day"], "r": p <= SIGNIFICANCE})
    out["daily_binomial_ever_rejects"] = float(rejected.group_by("run").agg(pl.col("r").any())["r"].mean())
    out["binomial_last_day_rejects"] = float(rejected.filter(pl.col("day") == args.days - 1)["r"].mean())
    return out


def sprt_delay(rate1: float, rng: np.random.Generator, n: int, per_day: int = 1, sig: float = SIGNIFICANCE) -> float:
    """Mean rows after the change until the oracle SPRT (rate1 vs 0.1) crosses, checked every
    ``per_day`` rows (1: every row; the day's size: the monitor's looks)."""
    rate0 = 1 - TARGET
    up, down = math.log(rate1 / rate0), math.log((1 - rate1) / (1 - rate0))
    delays = []
    for _ in range(n):
        llr = np.cumsum(np.where(rng.random(50_000) < rate1, up, down))
        rows = int(np.argmax(llr >= math.log(1 / sig))) + 1
        delays.append(math.ceil(rows / per_day) * per_day)
    return float(np.mean(delays))


def after_drop(args: argparse.Namespace) -> list[dict[str, float]]:
    change = 20
    rows = []
    for rate in (0.15, 0.2, 0.3):
        df = runs(args.seed + 1, args.runs, args.days, args.per_day, rate, change)
        oracle = sprt_delay(rate, np.random.default_rng(args.seed + 2), 2000)
        daily = sprt_delay(rate, np.random.default_rng(args.seed + 2), 2000, args.per_day)
        row: dict[str, float] = {"miss_rate_after": rate, "coverage_after": 1 - rate, "sprt_rows": round(oracle, 1),
                                 "sprt_daily_rows": round(daily, 1)}  # fmt: skip
        for method in ("beta_binomial", "normal_mixture"):
            for label, since in (("from_start", None), ("since_change", change)):
                seq = sequence(df, method, since)
                first = seq.group_by("run").agg(pl.col("alarm_period").first())["alarm_period"].to_numpy()
                found = first[~np.isnan(first.astype(float))].astype(float) if first.dtype != object else first
                after = found[found >= change]
                delay = float(((after - change + 1) * args.per_day).mean()) if len(after) else float("nan")
                row[f"{method}_{label}_detected"] = round(len(after) / args.runs, 3)
                row[f"{method}_{label}_rows"] = round(delay, 1)
                row[f"{method}_{label}_ratio"] = round(delay / oracle, 2)
                row[f"{method}_{label}_ratio_daily"] = round(delay / daily, 2)
        for sig in (SIGNIFICANCE, 0.001):
            first = first_alarms(sequence(df, "normal_mixture", change_detection=True, significance=sig))
            after = first[first >= change]
            delay = float(((after - change + 1) * args.per_day).mean()) if len(after) else float("nan")
            row[f"detector_{sig}_false_before_change"] = round(float((first < change).mean()), 3)
            row[f"detector_{sig}_detected"] = round(len(after) / args.runs, 3)
            row[f"detector_{sig}_rows"] = round(delay, 1)
            row[f"detector_{sig}_ratio"] = round(delay / oracle, 2)
            row[f"detector_{sig}_ratio_daily"] = round(delay / daily, 2)
            row[f"detector_{sig}_vs_beta_since"] = round(delay / row["beta_binomial_since_change_rows"], 2)
            # the oracle at the same threshold 1 / significance (an SPRT started at the change)
            same = sprt_delay(rate, np.random.default_rng(args.seed + 2), 2000, 1, sig)
            row[f"sprt_rows_threshold_{sig}"] = round(same, 1)
            row[f"detector_{sig}_vs_sprt_same_threshold"] = round(delay / same, 2)
        rows.append(row)
    return rows


def run_length(args: argparse.Namespace) -> dict[str, float]:
    """On target: false alarms of the change detector over ``--arl-days`` days."""
    df = runs(args.seed + 3, args.runs // 4, args.arl_days, args.per_day, 1 - TARGET, args.arl_days)
    out: dict[str, float] = {"runs": args.runs // 4, "horizon_days": args.arl_days}
    for sig in (SIGNIFICANCE, 0.01, 0.001):
        t0 = time.perf_counter()
        first = first_alarms(sequence(df, "normal_mixture", change_detection=True, significance=sig))
        alarmed = ~np.isnan(first)
        mean = float(np.where(alarmed, first + 1, args.arl_days).mean())
        out[f"{sig}_seconds"] = round(time.perf_counter() - t0, 2)
        out[f"{sig}_alarmed_by_horizon"] = round(float(alarmed.mean()), 4)
        out[f"{sig}_mean_first_alarm_day"] = round(float(first[alarmed].mean() + 1), 1) if alarmed.any() else None
        out[f"{sig}_censored_mean_run_length"] = round(mean, 1)
        out[f"{sig}_bound_alarmed_at_most"] = round(min(1.0, mean * sig), 4)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--days", type=int, default=60)
    p.add_argument("--per-day", type=int, default=50)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--arl-days", type=int, default=500)
    args = p.parse_args()
    result = {"on_target": on_target(args), "after_drop": after_drop(args), "run_length": run_length(args)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
