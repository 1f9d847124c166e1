"""Command line: ``conformal-frames report FILE ...`` and ``conformal-frames demo``.

Exit codes (also in ``conformal-frames --help``):

0
    the report was produced;
1
    unexpected internal error (a bug: please report it);
2
    usage error: unknown option, a column that is not in the file, an invalid
    parameter value;
3
    the input file cannot be read (missing, unsupported format, unreadable);
4
    the report was produced, but rows of the input have invalid values
    (missing, NaN/inf, ``lo > hi``): their groups have null metrics;
5
    ``--fail-on-under-coverage`` was given and some segment is significantly
    under-covered.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INVALID_ROWS = 4
EXIT_UNDER_COVERED = 5

EXIT_CODES = f"""exit codes:
  {EXIT_OK}  the report was produced
  {EXIT_INTERNAL}  unexpected internal error (a bug)
  {EXIT_USAGE}  usage error: unknown option, column not in the file, invalid parameter
  {EXIT_INPUT}  the input file cannot be read (missing, unsupported format, unreadable)
  {EXIT_INVALID_ROWS}  report produced, but some rows have invalid values (missing, NaN/inf, lo > hi)
  {EXIT_UNDER_COVERED}  --fail-on-under-coverage given and a segment is significantly under-covered
"""

#: inputs at least this large get a progress indication on stderr
PROGRESS_BYTES = 64 * 1024 * 1024


class _Progress:
    """Stage messages on stderr, with a live elapsed-time ticker on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.start = time.perf_counter()

    def note(self, message: str) -> None:
        if self.enabled:
            print(f"[conformal-frames] {message}", file=sys.stderr, flush=True)

    @contextmanager
    def stage(self, message: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        t0 = time.perf_counter()
        tty = sys.stderr.isatty()
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(1.0):
                print(
                    f"\r[conformal-frames] {message} ... {time.perf_counter() - t0:.0f} s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )

        ticker = threading.Thread(target=tick, daemon=True) if tty else None
        if ticker is None:
            print(f"[conformal-frames] {message} ...", file=sys.stderr, flush=True)
        else:
            ticker.start()
        try:
            yield
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
                print("\r", end="", file=sys.stderr)
            print(
                f"[conformal-frames] {message}: done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True
            )


class CLIError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _scan(path: str, fmt: str, separator: str) -> Any:
    """A polars LazyFrame over the file (nothing is read yet)."""
    try:
        import polars as pl
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "conformal-frames report reads files with polars: pip install 'conformal-frames[polars]'"
        raise CLIError(msg, EXIT_USAGE) from exc
    p = Path(path)
    if not p.exists() and not any(ch in path for ch in "*?["):
        raise CLIError(f"input file not found: {path}", EXIT_INPUT)
    if fmt == "auto":
        suffix = p.suffix.lower()
        if suffix in (".parquet", ".pq"):
            fmt = "parquet"
        elif suffix in (".csv", ".tsv", ".txt"):
            fmt = "csv"
            if suffix == ".tsv" and separator == ",":
                separator = "\t"
        else:
            msg = f"cannot tell the format of {path!r} from its extension; use --input-format csv|parquet"
            raise CLIError(msg, EXIT_INPUT)
    try:
        if fmt == "parquet":
            lf = pl.scan_parquet(path)
        else:
            lf = pl.scan_csv(path, separator=separator, infer_schema_length=10_000)
        lf.collect_schema()
    except Exception as exc:  # polars raises many kinds on bad files
        raise CLIError(f"cannot read {path!r} as {fmt}: {exc}", EXIT_INPUT) from exc
    return lf


_FLAGS = {"prediction_set": "--set", "level": "--level-col"}


def _cli_names(message: str) -> str:
    """``(hi=)`` in a library message becomes ``(--hi)``."""
    import re

    def flag(m: re.Match[str]) -> str:
        name = m.group(1)
        if name.startswith("by["):
            return "(--by)"
        return f"({_FLAGS.get(name, '--' + name.replace('_', '-'))})"

    return re.sub(r"\(([\w\[\]]+)=\)", flag, message)


def _input_size(path: str) -> int:
    import glob

    total = 0
    for p in glob.glob(path) or [path]:
        with suppress(OSError):
            total += os.path.getsize(p)
    return total


def _physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * 2**30


#: ``--memory auto`` bounds memory for inputs larger than this fraction of RAM
#: (exact mode measured at about 13x the Parquet size: 3.05 GB for 238 MB)
AUTO_BOUNDED_FRACTION = 1 / 32


def _bounded(mode: str, size: int) -> bool:
    if mode == "auto":
        return size > AUTO_BOUNDED_FRACTION * _physical_memory()
    return mode == "bounded"


def _emit(rep: Any, fmt: str) -> None:
    if fmt == "text":
        print(rep)
    elif fmt == "json":
        print(rep.to_json())
    elif fmt == "csv":
        sys.stdout.write(rep.to_csv())
    else:
        sys.stdout.write(rep.to_html(plots=False))


def _write_outputs(rep: Any, out: str, progress: _Progress, plots: bool) -> list[Path]:
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if plots:
        try:
            with progress.stage("drawing plots"):
                written += rep.save_plots(directory)
        except ImportError as exc:
            print(f"warning: {exc}; no plots written", file=sys.stderr)
            plots = False
    path = directory / "report.html"
    rep.to_html(path, plots=plots)
    written.append(path)
    path = directory / "report.json"
    rep.to_json(path)
    written.append(path)
    path = directory / "metrics.csv"
    path.write_text(rep.to_csv(), encoding="utf-8")
    written.append(path)
    return written


def _run_report(args: argparse.Namespace) -> int:
    from conformal_frames.report import report

    size = _input_size(args.file)
    progress = _Progress(enabled=not args.quiet and (args.progress or size >= PROGRESS_BYTES))
    lf = _scan(args.file, args.input_format, args.separator)
    bounded = _bounded(args.memory, size)
    progress.note(
        f"scanning {args.file} ({size / 1e6:,.1f} MB) lazily with polars; "
        + ("bounded memory (no SSC, width quantiles from histograms)" if bounded else "exact SSC and width quantiles")
    )
    by = [c for group in (args.by or []) for item in group for c in item.split(",") if c]
    try:
        with progress.stage("computing metrics per group"):
            rep = report(
                lf,
                y=args.y,
                lo=args.lo,
                hi=args.hi,
                label=args.label,
                score=args.score,
                prediction_set=args.prediction_set,
                classes=_classes(args.classes),
                by=by or None,
                confidence_level=args.confidence_level,
                level=args.level_col,
                num_bins=args.num_bins,
                ssc_bins=args.ssc_bins,
                alpha=args.alpha,
                correction=args.correction,
                bounded_memory=bounded,
            )
    except (ValueError, TypeError) as exc:
        raise CLIError(_cli_names(str(exc)), EXIT_USAGE) from exc
    except Exception as exc:
        if type(exc).__module__.startswith("polars"):  # e.g. a malformed row deep in a CSV
            raise CLIError(f"cannot read {args.file!r}: {exc}", EXIT_INPUT) from exc
        raise
    _emit(rep, args.format)
    if args.out:
        written = _write_outputs(rep, args.out, progress, plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}: {', '.join(p.name for p in written)}", file=sys.stderr)
    if rep.summary.get("invalid_rows"):
        print(
            f"error: {rep.summary['invalid_rows']} rows have invalid values (missing, NaN/inf, lo > hi); "
            "their groups have null metrics",
            file=sys.stderr,
        )
        return EXIT_INVALID_ROWS
    if args.fail_on_under_coverage and rep.summary.get("under_covered"):
        return EXIT_UNDER_COVERED
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from conformal_frames.demo import demo_data
    from conformal_frames.report import report

    data = demo_data(n=args.rows, seed=args.seed)
    try:
        import polars as pl

        frame: Any = pl.DataFrame(data)
    except ImportError:
        try:
            import pandas as pd
        except ImportError:
            print(
                "conformal-frames demo needs polars or pandas: pip install 'conformal-frames[polars]'", file=sys.stderr
            )
            return EXIT_USAGE
        frame = pd.DataFrame(data)
    rep = report(frame, y="y", lo="lo", hi="hi", by="segment", level="level", hsic=True)
    _emit(rep, args.format)
    if args.out:
        written = _write_outputs(rep, args.out, _Progress(False), plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}: {', '.join(p.name for p in written)}", file=sys.stderr)
    return EXIT_OK


def _classes(text: str | None) -> list[Any] | None:
    if text is None:
        return None
    labels = [c.strip() for c in text.split(",") if c.strip()]
    try:
        return [int(c) for c in labels]
    except ValueError:
        return labels


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number strictly between 0 and 1, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _output_options(p: argparse.ArgumentParser) -> None:
    out = p.add_argument_group("output")
    out.add_argument(
        "--format",
        choices=["text", "html", "json", "csv"],
        default="text",
        help="what to print on stdout: text (terminal tables, default), html (the report page, "
        "without plots), json (summary and tables), csv (all metrics in long form)",
    )
    out.add_argument(
        "--out",
        metavar="DIR",
        help="also write report.html (plots embedded), report.json, metrics.csv and one PNG per plot into DIR",
    )
    out.add_argument("--no-plots", action="store_true", help="do not draw plots (no matplotlib needed)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="conformal-frames",
        description="Evaluate conformal prediction and calibration inside DataFrames.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rp = sub.add_parser(
        "report",
        help="evaluate a CSV or Parquet file and print / write the report",
        description=(
            "Evaluate every metric that applies to the given columns, per group, on a CSV or "
            "Parquet file read lazily with polars (only aggregated tables are collected, so files "
            "larger than memory work). Interval metrics need --y --lo --hi; calibration needs "
            "--label --score; prediction sets need --label --set. Segments whose coverage is "
            "significantly below the target (--confidence-level, or the --level-col column) are "
            "listed (one-sided exact binomial test per segment, Holm correction by default)."
        ),
        epilog="example:\n  conformal-frames report preds.parquet --y y --lo lo --hi hi --by region model "
        "--confidence-level 0.9 --out report/\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument(
        "file", metavar="FILE", help="input file: .parquet/.pq or .csv/.tsv (a glob pattern works for Parquet)"
    )
    cols = rp.add_argument_group("columns")
    cols.add_argument("--y", metavar="COL", help="observed value (intervals)")
    cols.add_argument("--lo", metavar="COL", help="lower bound of the prediction interval")
    cols.add_argument("--hi", metavar="COL", help="upper bound of the prediction interval")
    cols.add_argument("--label", metavar="COL", help="binary label (calibration) or true class (prediction sets)")
    cols.add_argument("--score", metavar="COL", help="predicted probability in [0, 1] (calibration)")
    cols.add_argument(
        "--set", dest="prediction_set", metavar="COL", help="list column of predicted labels (prediction sets)"
    )
    cols.add_argument(
        "--classes",
        metavar="LABELS",
        help="comma-separated class labels of the prediction sets (default: the distinct values of --label); "
        "integers when every label parses as one",
    )
    cols.add_argument(
        "--by",
        metavar="COL",
        nargs="+",
        action="append",
        help="group column(s); repeat or separate with commas: --by region model, --by region,model",
    )
    cols.add_argument(
        "--level-col",
        metavar="COL",
        help="column of nominal levels (several levels stacked in long format); a group column and each group's target",
    )
    opts = rp.add_argument_group("metrics")
    opts.add_argument(
        "--confidence-level",
        type=_probability,
        metavar="P",
        help="nominal coverage, e.g. 0.9 (exclusive with --level-col)",
    )
    opts.add_argument(
        "--alpha",
        type=_probability,
        default=0.05,
        metavar="A",
        help="significance of the under-coverage test (default 0.05)",
    )
    opts.add_argument(
        "--correction",
        choices=["holm", "bh", "none"],
        default="holm",
        help="multiplicity correction across segments (default holm)",
    )
    opts.add_argument(
        "--num-bins", type=_positive_int, default=10, metavar="M", help="score bins for calibration (default 10)"
    )
    opts.add_argument(
        "--ssc-bins",
        type=_positive_int,
        default=3,
        metavar="K",
        help="width bins for size-stratified coverage (default 3)",
    )
    opts.add_argument(
        "--memory",
        choices=["auto", "exact", "bounded"],
        default="auto",
        help="exact: size-stratified coverage and exact width quantiles (memory grows with the rows); "
        "bounded: memory independent of the rows (no SSC, width quantiles from 512-bin histograms); "
        f"auto (default): bounded when the input is larger than 1/{round(1 / AUTO_BOUNDED_FRACTION)} of the physical memory",
    )
    inp = rp.add_argument_group("input")
    inp.add_argument(
        "--input-format", choices=["auto", "csv", "parquet"], default="auto", help="default: from the file extension"
    )
    inp.add_argument("--separator", default=",", metavar="CHAR", help="CSV field separator (default ','; tab for .tsv)")
    _output_options(rp)
    run = rp.add_argument_group("run")
    run.add_argument(
        "--fail-on-under-coverage",
        action="store_true",
        help=f"exit with {EXIT_UNDER_COVERED} when a segment is significantly under-covered",
    )
    run.add_argument(
        "--progress",
        action="store_true",
        help=f"progress on stderr even for small inputs (default: inputs >= {PROGRESS_BYTES // 2**20} MiB)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    rp.set_defaults(func=_run_report)

    demo = sub.add_parser(
        "demo",
        help="report on a deterministic synthetic dataset",
        description="Report on a deterministic synthetic dataset: heteroscedastic regression intervals "
        "at levels 0.8 / 0.9 / 0.95 (a level column), five segments, one deliberately under-covered.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--rows", type=_positive_int, default=20_000, help="rows per confidence level (default 20000)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    _output_options(demo)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CLIError as exc:
        print(f"conformal-frames: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:  # pragma: no cover
        return 130
    except BrokenPipeError:  # pragma: no cover - e.g. piped into `head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
