"""The definition as a value (issue 37): builds per call, the cost of recording, summaries.

    python bench/bench_definition.py             # this checkout
    PYTHONPATH=<other checkout>/src python bench/bench_definition.py   # A/B against another release

Prints, for six mergeable metrics (coverage, width, ks_test, ece, brier, auroc) on 20,000 rows in
60 (day, segment) groups: how often each metric's ``build`` runs in one ``summarize`` and in one
``finalize``, the CPU time of ``summarize`` + ``finalize`` (median of 7), and the CPU time of
``Plan.of`` for 16 metrics (median of 31: the per-call cost of recording a query, paid by every call
the plan caches do not serve).  CPU time (``process_time``), not wall time: the machine is shared.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import polars as pl

import conformal_frames as cf
from conformal_frames.engine import Metric, Plan


def _frame(n: int = 20_000) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    s = rng.uniform(size=n)
    y = rng.normal(size=n)
    return pl.DataFrame(
        {
            "day": rng.integers(0, 30, n),
            "g": rng.choice(["a", "b"], n),
            "y": y,
            "lo": y - 1.5 + rng.normal(size=n).clip(-1, 1),
            "hi": y + 1.5,
            "label": (rng.uniform(size=n) < s).astype(int),
            "score": s,
            "q10": y - 1.3,
            "q50": y,
            "q90": y + 1.3,
        }
    )


def _counted(metrics: list[Metric]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for cls in {type(m) for m in metrics}:
        original = cls.build

        def build(self: Metric, q: Any, _original: Callable[..., Any] = original) -> Any:
            counts[self.output_name] = counts.get(self.output_name, 0) + 1
            return _original(self, q)

        cls.build = build  # type: ignore[method-assign]
    return counts


def _cpu_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    df = _frame()
    metrics = [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.ks_test("label", "score"),
        cf.ece("label", "score"),
        cf.brier("label", "score"),
        cf.auroc("label", "score"),
    ]
    q = {0.1: "q10", 0.5: "q50", 0.9: "q90"}
    many = [
        *metrics,
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.spiegelhalter_test("label", "score"),
        cf.wis("y", quantiles=q),
        cf.pinball_loss("y", quantiles=q),
        cf.mae("y", "q50"),
        cf.rmse("y", "q50"),
        cf.quantile_coverage("y", quantiles=q),
        cf.interval_coverage("y", intervals={0.8: ("q10", "q90")}),
        cf.kupiec_test("y", "lo", "hi", confidence_level=0.9),
        cf.log_loss("label", "score"),
    ]
    schema = dict(nw.from_native(df).collect_schema())
    plan_ms = _cpu_ms(lambda: Plan.of(schema, many, ["g"]), 31)
    both = _cpu_ms(lambda: cf.finalize(cf.summarize(df, *metrics, by=["day", "g"], score_decimals=3), *metrics), 7)
    counts = _counted(metrics)
    stats = cf.summarize(df, *metrics, by=["day", "g"], score_decimals=3)
    in_summarize = dict(counts)
    counts.clear()
    cf.finalize(stats, *metrics, by="g")
    print(f"builds per summarize: {sum(in_summarize.values())} for {len(metrics)} metrics {in_summarize}")
    print(f"builds per finalize:  {sum(counts.values())} for {len(metrics)} metrics {counts}")
    print(f"summarize + finalize: {both:.1f} ms CPU (median of 7)")
    print(f"Plan.of, {len(many)} metrics: {plan_ms:.2f} ms CPU (median of 31)")


if __name__ == "__main__":
    main()
