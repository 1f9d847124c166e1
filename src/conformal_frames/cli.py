"""Command line: ``conformal-frames demo``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    import conformal_frames as cf
    from conformal_frames.demo import demo_data

    data = demo_data(n=args.rows, seed=args.seed)
    metrics = [
        cf.coverage("y", "lo", "hi"),
        cf.width("lo", "hi"),
        cf.ssc_score("y", "lo", "hi", num_bins=3),
        cf.hsic("y", "lo", "hi"),
    ]
    try:
        import polars as pl
    except ImportError:
        try:
            import pandas as pd
        except ImportError:
            print("conformal-frames demo needs polars or pandas: pip install 'conformal-frames[polars]'", file=sys.stderr)
            return 2
        import pandas as pd

        table = cf.evaluate(pd.DataFrame(data), *metrics, by=["segment", "level"])
        with pd.option_context("display.max_rows", None, "display.width", 200, "display.precision", 4):
            print(table)
        return 0
    table = cf.evaluate(pl.DataFrame(data), *metrics, by=["segment", "level"])
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=4, tbl_width_chars=200):
        print(table)
    under = table.filter(pl.col("coverage_ci_high") < pl.col("level"))
    print("segments whose Wilson interval lies below the nominal level:",
          ", ".join(sorted(set(under["segment"].to_list()))) or "none")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformal-frames",
        description="Evaluate conformal prediction and calibration inside DataFrames.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="evaluate a deterministic synthetic dataset and print the grouped table")
    demo.add_argument("--rows", type=int, default=20_000, help="rows per confidence level (default 20000)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
