"""Issue 39 item 3: ``evaluate`` on polars through today's route vs forced through the compiled expression.

    python bench/bench_routing.py             # 1e3, 1e5 and 1e6 rows (a few minutes)
    python bench/bench_routing.py --sizes 1000
    python bench/bench_routing.py --sorts --sizes 1000 1000000 5000000   # ungrouped sort-based

For eager and lazy polars frames, grouped (100 groups) and ungrouped, with one
metric (coverage), the 8 single-pass metrics and a sort-based one (ks_test):
"narwhals" is ``evaluate`` kept on the narwhals path (the kept plans of eager
frames, engine/_plan_cache; the one-sort ordered cells), "compiled" the same
call with the limits of ``engine._polars_native`` lifted (every call the
compiler accepts runs the compiled expression).  Times are process CPU time
(all threads), the least of the rounds, variants interleaved within a round;
the column "route" says which path the call takes under the shipped limits.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
from bench_polars_expr import frame

import conformal_frames as cf
from conformal_frames.engine import _polars_native


@contextlib.contextmanager
def narwhals_only() -> Iterator[None]:
    kept, _polars_native.MAX_METRICS = _polars_native.MAX_METRICS, 0
    try:
        yield
    finally:
        _polars_native.MAX_METRICS = kept


@contextlib.contextmanager
def forced() -> Iterator[None]:
    kept = (_polars_native.MIN_EAGER_ROWS, _polars_native.MAX_METRICS, _polars_native._SORTS_UNGROUPED)
    _polars_native.MIN_EAGER_ROWS, _polars_native.MAX_METRICS, _polars_native._SORTS_UNGROUPED = 0, 100, True
    try:
        yield
    finally:
        _polars_native.MIN_EAGER_ROWS, _polars_native.MAX_METRICS, _polars_native._SORTS_UNGROUPED = kept


def takes_compiled(call: Callable[[], Any]) -> bool:
    """Whether ``call()`` ran evaluate through the compiled expression."""
    real, seen = _polars_native.run, []

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        seen.append(out is not None)
        return out

    _polars_native.run = spy  # type: ignore[assignment]
    try:
        call()
    finally:
        _polars_native.run = real  # type: ignore[assignment]
    return any(seen)


def metric_sets() -> dict[str, list[Any]]:
    eight = [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.winkler("y", "lo", "hi", confidence_level=0.9),
        cf.cwc("y", "lo", "hi", eta=1.0, confidence_level=0.9),
        cf.ece("label", "score", n_bins=10),
        cf.mce("label", "score", n_bins=10),
        cf.brier("label", "score"),
        cf.spiegelhalter_test("label", "score"),
    ]
    return {"coverage": eight[:1], "8 single-pass": eight, "ks_test": [cf.ks_test("label", "score")]}


def sort_sets() -> dict[str, list[Any]]:
    """The sort-based metrics (``--sorts``): the ones whose ungrouped route changed."""
    return {
        "ks_test": [cf.ks_test("label", "score")],
        "kuiper_test": [cf.kuiper_test("label", "score")],
        "ssc (3 bins)": [cf.ssc("y", "lo", "hi", n_bins=3)],
        "auroc": [cf.auroc("label", "score")],
    }


def schedule(n: int) -> tuple[int, int]:
    """(rounds, calls per round) for ``n`` rows."""
    return (15, 20) if n <= 1_000 else (7, 2) if n <= 100_000 else (3, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--sorts", action="store_true", help="ungrouped sort-based metrics only")
    args = parser.parse_args()
    sets = sort_sets if args.sorts else metric_sets
    print("| rows | by | frame | metrics | route | narwhals (ms) | compiled (ms) | compiled/narwhals |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        df = frame(n, 100)
        for by in (None,) if args.sorts else (None, "g"):
            for kind in ("eager", "lazy"):
                data: pl.DataFrame | pl.LazyFrame = df if kind == "eager" else df.lazy()
                calls: dict[str, Callable[[], Any]] = {}
                for label, ms in sets().items():
                    if kind == "eager":
                        calls[label] = lambda ms=ms, data=data, by=by: cf.evaluate(data, *ms, by=by)
                    else:
                        calls[label] = lambda ms=ms, data=data, by=by: cf.evaluate(data, *ms, by=by).collect()
                variants: dict[tuple[str, str], Callable[[], Any]] = {}
                for label, call in calls.items():

                    def on_narwhals(call: Callable[[], Any] = call) -> Any:
                        with narwhals_only():
                            return call()

                    def under_force(call: Callable[[], Any] = call) -> Any:
                        with forced():
                            return call()

                    variants[(label, "narwhals")] = on_narwhals
                    variants[(label, "compiled")] = under_force
                rounds, per = schedule(n)
                times: dict[tuple[str, str], float] = {}
                for fn in variants.values():
                    fn()
                for _ in range(rounds):
                    for key, fn in variants.items():
                        start = time.process_time()
                        for _ in range(per):
                            fn()
                        took = (time.process_time() - start) / per * 1e3
                        times[key] = min(times.get(key, float("inf")), took)
                for label, call in calls.items():
                    route = "compiled" if takes_compiled(call) else "narwhals"
                    with forced():
                        assert takes_compiled(call), (label, kind, by)
                    nws, comp = times[(label, "narwhals")], times[(label, "compiled")]
                    print(
                        f"| {n:.0e} | {by or '-'} | {kind} | {label} | {route} | {nws:.2f} | {comp:.2f} |"
                        f" {comp / nws:.2f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
