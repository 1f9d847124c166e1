"""Command line: ``conformal-frames report FILE ...`` and ``conformal-frames demo``.

``python -m conformal_frames`` runs the same command line; ``conformal-frames --version``
prints the version.

Every failure caused by the user (options, columns, files, data) is one line
``conformal-frames: error: ...`` on stderr and one of these exit codes (also
in ``conformal-frames --help``):

0
    the report was produced;
1
    unexpected internal error (a bug: please report it);
2
    usage error: unknown option, a column that is not in the file, an invalid
    parameter value;
3
    a file cannot be read or written: the input is missing, unreadable or of
    an unsupported format, or ``--out`` cannot be written (an existing file,
    a directory without write permission);
4
    rows of the input have invalid values (missing, NaN/inf, ``lo > hi``,
    labels or scores out of range): with ``--invalid null`` (the default)
    the report was produced and their groups have null metrics; with
    ``--invalid raise`` nothing was produced;
5
    ``--fail-on-under-coverage`` was given and some segment is significantly
    under-covered;
6
    ``--fail-on-under-coverage`` was given and some group could not be tested
    (invalid rows with ``--invalid null``) while no tested group is
    under-covered: the check cannot pass.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

from conformal_frames._version import __version__

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_IO = 3
EXIT_INPUT = EXIT_IO  # the 0.1 name
EXIT_INVALID_ROWS = 4
EXIT_UNDER_COVERED = 5
EXIT_UNTESTED = 6
EXIT_ALARM = 7  # issue 40: --fail-on-alarm with --order-by

EXIT_CODES = f"""exit codes:
  {EXIT_OK}  the report was produced
  {EXIT_INTERNAL}  unexpected internal error (a bug)
  {EXIT_USAGE}  usage error: unknown option, column not in the file, invalid parameter
  {EXIT_IO}  a file cannot be read or written (input missing/unreadable/unsupported, --out not writable)
  {EXIT_INVALID_ROWS}  rows with invalid values (--invalid null: report produced, their groups null; raise: no report)
  {EXIT_UNDER_COVERED}  --fail-on-under-coverage given and a segment is significantly under-covered
  {EXIT_UNTESTED}  --fail-on-under-coverage given and a group could not be tested (invalid rows)
  {EXIT_ALARM}  --fail-on-alarm given and the monitoring (--order-by) raised an alarm in a segment
"""

#: inputs at least this large get a progress indication on stderr
PROGRESS_BYTES = 64 * 1024 * 1024

#: ``--memory auto`` bounds memory for inputs larger than this fraction of RAM
#: (exact mode measured at about 13x the Parquet size: 3.05 GB for 238 MB)
AUTO_BOUNDED_FRACTION = 1 / 32

#: 0.1 options and their 0.2 names
RENAMED_OPTIONS = {
    "--label": "--y (or --score-y)",
    "--set": "--sets",
    "--level-col": "--confidence-level COLUMN",
    "--alpha": "--significance",
    "--num-bins": "--n-bins",
    "--ssc-bins": "--ssc-n-bins",
}


#: every keyword of :func:`conformal_frames.report` and its CLI spelling (a test checks the two agree;
#: a new report option gets its flag here and in the parser)
REPORT_OPTIONS = {
    "y": "--y",
    "lo": "--lo",
    "hi": "--hi",
    "score": "--score",
    "score_y": "--score-y",
    "sets": "--sets",
    "classes": "--classes",
    "by": "--by",
    "confidence_level": "--confidence-level",
    "n_bins": "--n-bins",
    "ssc_n_bins": "--ssc-n-bins",
    "ci_level": "--ci-level",
    "significance": "--significance",
    "correction": "--correction",
    "n_calibration": "--n-calibration",
    "hsic": "--hsic",
    "bounded_memory": "--memory",
    "invalid": "--invalid",
    "max_rows": "--max-rows",
    "max_segments": "--max-segments",
    "quantiles": "--quantiles",
    "intervals": "--intervals",
    "mean": "--mean",
    "std": "--std",
    "crossing": "--crossing",
    "point": "--point",
    "baseline": "--baseline",
    "horizon": "--horizon",
    "order_by": "--order-by",
    "progress": "--progress",
}


class CLIError(Exception):
    """A user error: printed as one line with the program prefix, exit ``code``."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _fail(message: str, code: int) -> NoReturn:
    raise CLIError(message, code)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``conformal-frames: error: ...``, exit 2, from :func:`main`)."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(f"{message} (see {self.prog} --help)", EXIT_USAGE)


class _Renamed(argparse.Action):
    """A 0.1 option: fails with its new name."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(f"{self.option_strings[0]} is called {RENAMED_OPTIONS[self.option_strings[0]]} since 0.2")


class _Progress:
    """Stage messages on stderr, with a live elapsed-time ticker on a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def note(self, message: str) -> None:
        if self.enabled:
            print(f"[conformal-frames] {message}", file=sys.stderr, flush=True)

    @contextmanager
    def stage(self, message: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        t0 = time.perf_counter()
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(1.0):
                elapsed = f"\r[conformal-frames] {message} ... {time.perf_counter() - t0:.0f} s"
                print(elapsed, end="", file=sys.stderr, flush=True)

        ticker = threading.Thread(target=tick, daemon=True) if sys.stderr.isatty() else None
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
            done = f"[conformal-frames] {message}: done in {time.perf_counter() - t0:.1f} s"
            print(done, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# input and output files
# ---------------------------------------------------------------------------
def _format_of(path: str, fmt: str, separator: str) -> tuple[str, str]:
    if fmt != "auto":
        return fmt, separator
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet", separator
    if suffix in (".csv", ".tsv", ".txt"):
        return "csv", "\t" if suffix == ".tsv" and separator == "," else separator
    _fail(f"cannot tell the format of {path!r} from its extension; use --input-format csv|parquet", EXIT_IO)


def _scan(args: argparse.Namespace) -> tuple[Any, str]:
    """A polars LazyFrame over the file (nothing is read yet) and its format."""
    try:
        import polars as pl
    except ImportError:  # pragma: no cover - depends on the environment
        _fail("conformal-frames report reads files with polars: pip install 'conformal-frames[polars]'", EXIT_USAGE)
    path = args.file
    if not Path(path).exists() and not any(ch in path for ch in "*?["):
        _fail(f"input file not found: {path}", EXIT_IO)
    fmt, separator = _format_of(path, args.input_format, args.separator)
    try:
        if fmt == "parquet":
            lf = _ordered_categories(pl.scan_parquet(path), path)
        else:
            nulls = [v for v in args.null_values.split(",")] if args.null_values is not None else None
            lf = pl.scan_csv(
                path,
                separator=separator,
                infer_schema_length=10_000,
                null_values=nulls,
                decimal_comma=args.decimal_comma,
            )
        lf.collect_schema()
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError, ValueError) as exc:  # bad files
        _fail(f"cannot read {path!r} as {fmt}: {_one_line(exc)}", EXIT_IO)
    return lf, fmt


def _ordered_categories(lf: Any, path: str) -> Any:
    """Ordered categorical columns of a Parquet file (a pandas ``Categorical(ordered=True)``)
    as polars ``Enum`` of the same categories, so groups keep their order, as in Python.

    Polars reads such a column as ``Categorical``, which sorts as strings.  Needs pyarrow
    (to read the dictionaries of those columns only); without it the columns stay as read.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        return lf
    import glob

    import polars as pl

    files = sorted(glob.glob(path)) if any(ch in path for ch in "*?[") else [path]
    if not files:
        return lf
    schema = pq.read_schema(files[0])
    ordered = [f.name for f in schema if getattr(f.type, "ordered", False)]
    casts = []
    for name in ordered:
        categories: dict[Any, None] = {}
        for file in files:
            column = pq.read_table(file, columns=[name]).column(name)
            for chunk in column.chunks:
                categories.update(dict.fromkeys(chunk.dictionary.to_pylist()))
        values = [c for c in categories if c is not None]
        if values and all(isinstance(c, str) for c in values):
            casts.append(pl.col(name).cast(pl.Enum(values)))
    return lf.with_columns(*casts) if casts else lf


def _check_out(out: str) -> Path:
    """The output directory, created now: a failure stops before any work is done."""
    directory = Path(out)
    if directory.exists() and not directory.is_dir():
        _fail(f"--out {out!r} is an existing file, not a directory", EXIT_IO)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"--out {out!r} cannot be created: {exc.strerror or exc}", EXIT_IO)
    if not os.access(directory, os.W_OK | os.X_OK):
        _fail(f"--out {out!r} is not writable", EXIT_IO)
    return directory


def _write_outputs(rep: Any, directory: Path, progress: _Progress, plots: bool) -> list[Path]:
    written: list[Path] = []
    try:
        if plots:
            try:
                with progress.stage("drawing plots"):
                    written += rep.save_plots(directory)
            except ImportError as exc:
                print(f"conformal-frames: warning: {exc}; no plots written", file=sys.stderr)
                plots = False
        for name, write in (("report.html", lambda p: rep.to_html(p, plots=plots)), ("report.json", rep.to_json)):
            write(directory / name)
            written.append(directory / name)
        (directory / "metrics.csv").write_text(rep.to_csv(), encoding="utf-8")
        written.append(directory / "metrics.csv")
    except OSError as exc:
        _fail(f"cannot write into --out {str(directory)!r}: {exc.strerror or exc}", EXIT_IO)
    return written


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


def _bounded(mode: str, size: int) -> bool:
    if mode == "auto":
        return size > AUTO_BOUNDED_FRACTION * _physical_memory()
    return mode == "bounded"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---------------------------------------------------------------------------
# the report command
# ---------------------------------------------------------------------------
def _flag(role: str) -> str:
    """The CLI spelling of a report argument: ``score_y`` -> ``--score-y``."""
    if role.startswith("by"):
        return "--by"
    return REPORT_OPTIONS.get(role, "--" + role.replace("_", "-"))


def _cli_words(message: str) -> str:
    """A message of the Python API in CLI words: ``confidence_level=`` -> ``--confidence-level``."""
    message = message.replace("bounded_memory=True", "--memory bounded").replace("hsic=True", "--hsic")
    for keyword, flag in REPORT_OPTIONS.items():
        message = re.sub(rf"(?<![\w-]){keyword}=(?![\w'\"(\[{{])", flag, message)
    return message


def _target_note(args: argparse.Namespace) -> None:
    """Without ``--confidence-level``: which tables the report leaves out (a note on stderr, after a success)."""
    if args.confidence_level is not None or (args.lo is None and args.sets is None):
        return
    skipped = [
        *(["the Winkler score"] if isinstance(args.lo, str) else []),  # (none with several outputs)
        "the coverage tests (target, p-values, under- and over-covered segments)",
    ]
    print(
        f"conformal-frames: note: no --confidence-level: the report leaves out {' and '.join(skipped)}; "
        "give the nominal coverage (e.g. --confidence-level 0.9) or the column of levels",
        file=sys.stderr,
    )


def _check_arguments(args: argparse.Namespace, schema: Any, by: list[str]) -> None:
    """Roles and columns, in the CLI's own words (before any work is done)."""
    from conformal_frames.reporting import plan

    try:
        forecast = {"quantiles": args.quantiles, "intervals": args.intervals, "mean": args.mean, "std": args.std}
        forecast |= {"point": args.point, "baseline": args.baseline}
        plan.check_roles(args.y, args.lo, args.hi, args.score, args.score_y, args.sets, spell=_flag, forecast=forecast)
        others = {k: getattr(args, k) for k in ("score", "score_y", "sets", "quantiles", "intervals", "mean", "std")}
        plan.check_joint_roles(args.y, args.lo, args.hi, others | {"point": args.point}, spell=_flag)
        level = args.confidence_level if isinstance(args.confidence_level, str) else None
        roles = {k: getattr(args, k) for k in ("y", "lo", "hi", "score", "score_y", "sets", "mean", "std", "point")}
        for k in ("y", "lo", "hi"):  # several outputs: each column by its position
            if isinstance(roles[k], list):
                roles |= {f"{k}[{i}]": c for i, c in enumerate(roles.pop(k))}
        roles["baseline"] = args.baseline
        roles |= {f"quantiles {lv:g}": c for lv, c in (args.quantiles or {}).items()}
        for lv, (lo, hi) in (args.intervals or {}).items():
            roles |= {f"intervals {lv:g} lo": lo, f"intervals {lv:g} hi": hi}
        horizon = plan.check_horizon(args.horizon, by, level, spell=_flag)
        names = roles | {"confidence_level": level, "horizon": horizon} | {f"by[{i}]": k for i, k in enumerate(by)}
        plan.check_schema(schema, names, spell=_flag)
    except (ValueError, TypeError) as exc:  # TypeError: lists of outputs that do not match
        _fail(_cli_words(str(exc)), EXIT_USAGE)
    if args.fail_on_under_coverage and args.confidence_level is None:
        _fail("--fail-on-under-coverage needs a target: --confidence-level", EXIT_USAGE)
    if args.hsic and args.memory == "bounded":
        _fail("--hsic needs all rows of each group; it cannot run with --memory bounded", EXIT_USAGE)


def _text_columns_hint(schema: Any, args: argparse.Namespace, fmt: str) -> str:
    """For CSV input: which role columns were read as text, and the options that fix it."""
    import narwhals.stable.v2 as nw

    roles = [getattr(args, k) for k in ("y", "lo", "hi", "score", "score_y")]
    roles = [c for r in roles for c in (r if isinstance(r, list) else [r])]  # several outputs: each column
    text = [c for c in roles if c is not None and schema.get(c) == nw.String]
    if fmt != "csv" or not text:
        return ""
    return (
        f" (column(s) {', '.join(map(repr, text))} were read as text: for tokens such as NA give "
        "--null-values NA, for decimal commas --decimal-comma)"
    )


def _evaluate(args: argparse.Namespace, lf: Any, fmt: str, by: list[str], bounded: bool) -> Any:
    import narwhals.stable.v2 as nw
    import polars as pl

    from conformal_frames.errors import InvalidRowsError
    from conformal_frames.reporting import report

    try:
        return report(
            lf,
            y=args.y,
            lo=args.lo,
            hi=args.hi,
            score=args.score,
            score_y=args.score_y,
            sets=args.sets,
            classes=_classes(args.classes),
            by=by or None,
            confidence_level=args.confidence_level,
            progress=False if getattr(args, "quiet", False) else None,  # a bar on a terminal
            n_bins=args.n_bins,
            ssc_n_bins=args.ssc_n_bins,
            significance=args.significance,
            correction=args.correction,
            ci_level=args.ci_level,
            n_calibration=args.n_calibration,
            hsic=args.hsic,
            bounded_memory=bounded,
            invalid=args.invalid,
            max_rows=args.max_rows,
            max_segments=args.max_segments,
            quantiles=args.quantiles,
            intervals=args.intervals,
            mean=args.mean,
            std=args.std,
            crossing=args.crossing,
            point=args.point,
            baseline=args.baseline,
            horizon=args.horizon,
            order_by=args.order_by,
        )
    except (ValueError, TypeError) as exc:
        code = EXIT_INVALID_ROWS if isinstance(exc, InvalidRowsError) else EXIT_USAGE  # the data, not the options
        _fail(_cli_words(_one_line(exc)) + _text_columns_hint(nw.from_native(lf).collect_schema(), args, fmt), code)
    except pl.exceptions.PolarsError as exc:  # e.g. a malformed row deep in a CSV
        _fail(f"cannot read {args.file!r}: {_one_line(exc)}", EXIT_IO)


def _groups_text(groups: list[dict[str, Any]], limit: int = 5) -> str:
    from conformal_frames.reporting.render import label

    names = "; ".join(label(g["group"]) for g in groups[:limit])
    return names + (f"; and {len(groups) - limit:,} more" if len(groups) > limit else "")


def _verdict(rep: Any, args: argparse.Namespace) -> int:
    """The exit code, with one ``conformal-frames: error:`` line when it is not 0."""
    from conformal_frames.reporting.render import plural

    s = rep.summary
    untested, bad = s.get("untested") or [], s.get("invalid_rows", 0)
    causes = "; ".join(s.get("invalid_causes") or []) or "missing, NaN/inf or out-of-range values"
    if args.fail_on_under_coverage and s.get("under_covered"):
        return EXIT_UNDER_COVERED
    if getattr(args, "fail_on_alarm", False) and s.get("alarms"):
        return EXIT_ALARM
    if args.fail_on_under_coverage and untested:
        print(
            f"conformal-frames: error: {plural(len(untested), 'group')} could not be tested "
            f"({_groups_text(untested)}: {plural(bad, 'row')} with invalid values: {causes}); "
            "--fail-on-under-coverage cannot pass",
            file=sys.stderr,
        )
        return EXIT_UNTESTED
    if bad:
        where = f"; {plural(len(untested), 'group')} with null metrics: {_groups_text(untested)}" if untested else ""
        print(f"conformal-frames: error: {plural(bad, 'row')} with invalid values ({causes}){where}", file=sys.stderr)
        return EXIT_INVALID_ROWS
    if s.get("dropped_rows"):
        note = f"conformal-frames: note: {plural(s['dropped_rows'], 'row')} with invalid values dropped ({causes})"
        print(note, file=sys.stderr)
    _target_note(args)  # notes only when the report succeeded: a failure stays one line
    return EXIT_OK


def _emit(rep: Any, fmt: str) -> None:
    if fmt == "text":
        print(rep)
    elif fmt == "json":
        print(rep.to_json())
    elif fmt == "csv":
        sys.stdout.write(rep.to_csv())
    else:
        sys.stdout.write(rep.to_html(plots=False))


def _run_report(args: argparse.Namespace) -> int:
    import narwhals.stable.v2 as nw

    size = _input_size(args.file)
    progress = _Progress(enabled=not args.quiet and (args.progress or size >= PROGRESS_BYTES))
    lf, fmt = _scan(args)
    for role in ("y", "lo", "hi"):  # several outputs: repeated or comma-separated; one column stays a string
        columns = [c for item in getattr(args, role) or [] for c in item.split(",") if c]
        setattr(args, role, None if not columns else columns[0] if len(columns) == 1 else columns)
    by = [c for group in (args.by or []) for item in group for c in item.split(",") if c]
    _check_arguments(args, nw.from_native(lf).collect_schema(), by)
    directory = _check_out(args.out) if args.out else None
    bounded = _bounded(args.memory, size) and not (args.hsic and args.memory == "auto")  # --hsic needs the rows
    progress.note(
        f"scanning {args.file} ({size / 1e6:,.1f} MB) lazily with polars; "
        + ("bounded memory (no SSC, width quantiles from histograms)" if bounded else "exact SSC and width quantiles")
    )
    with progress.stage("computing metrics per group"):
        rep = _evaluate(args, lf, fmt, by, bounded)
    _emit(rep, args.format)
    if directory is not None:
        written = _write_outputs(rep, directory, progress, plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}: {', '.join(p.name for p in written)}", file=sys.stderr)
    return _verdict(rep, args)


def _demo(args: argparse.Namespace) -> int:
    from conformal_frames.demo import demo_data
    from conformal_frames.reporting import report

    data = demo_data(n=args.rows, seed=args.seed)
    try:
        import polars as pl

        frame: Any = pl.DataFrame(data)
    except ImportError:
        try:
            import pandas as pd
        except ImportError:
            _fail("conformal-frames demo needs polars or pandas: pip install 'conformal-frames[polars]'", EXIT_USAGE)
        frame = pd.DataFrame(data)
    directory = _check_out(args.out) if args.out else None
    rep = report(frame, y="y", lo="lo", hi="hi", by="segment", confidence_level="level", hsic=True)
    rep.max_rows, rep.max_segments = args.max_rows, args.max_segments
    _emit(rep, args.format)
    if directory is not None:
        written = _write_outputs(rep, directory, _Progress(False), plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}: {', '.join(p.name for p in written)}", file=sys.stderr)
    return EXIT_OK


# ---------------------------------------------------------------------------
# option parsing
# ---------------------------------------------------------------------------
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


def _level(text: str) -> float | str:
    """A number strictly between 0 and 1, or the name of a column of levels."""
    try:
        float(text)
    except ValueError:
        return text
    return _probability(text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _cap(text: str) -> int | None:
    """A positive integer, or ``all``."""
    return None if text.lower() == "all" else _positive_int(text)


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
        help="also write report.html (plots embedded), report.json, metrics.csv and one PNG per plot into DIR "
        "(created if needed; checked before any work is done)",
    )
    out.add_argument("--no-plots", action="store_true", help="do not draw plots (no matplotlib needed)")
    out.add_argument(
        "--max-rows",
        type=_cap,
        default=50,
        metavar="N",
        help="groups shown in the text/HTML tables, the most important first, with a count of the rest "
        "(default 50; 'all' for every group; json/csv always hold every group)",
    )
    out.add_argument(
        "--max-segments",
        type=_cap,
        default=50,
        metavar="N",
        help="segments drawn per plot: the lowest by the test, plus a grey row for the rest (default 50; 'all')",
    )


def _column_options(p: argparse.ArgumentParser) -> None:
    cols = p.add_argument_group("columns")
    several = "; several outputs (joint coverage): repeat the flag or separate the columns by commas"
    cols.add_argument(
        "--y",
        metavar="COL",
        action="append",
        help="observed value (intervals), 0/1 outcome (calibration), true label (sets)" + several,
    )
    cols.add_argument("--lo", metavar="COL", action="append", help="lower bound of the prediction interval" + several)
    cols.add_argument("--hi", metavar="COL", action="append", help="upper bound of the prediction interval" + several)
    cols.add_argument("--score", metavar="COL", help="predicted probability in [0, 1] of the 0/1 outcome (calibration)")
    cols.add_argument(
        "--score-y",
        metavar="COL",
        help="the 0/1 outcome of --score when --y is an interval target (one file, two families; default: --y)",
    )
    cols.add_argument("--sets", metavar="COL", help="list column of predicted labels (prediction sets), with --y")
    cols.add_argument(
        "--classes",
        metavar="LABELS",
        help="comma-separated class labels of the prediction sets (default: the labels come from the sets); "
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
        "--quantiles",
        metavar="LEVEL=COL,...",
        type=_quantile_columns,
        help="quantile forecasts of --y, e.g. 0.1=q10,0.5=q50,0.9=q90: quantile CRPS, PIT test, pinball loss, WIS "
        "(with the median and symmetric levels) and quantile coverage per level (forecast tables)",
    )
    cols.add_argument(
        "--intervals",
        metavar="LEVEL=LO:HI,...",
        type=_interval_columns,
        help="central intervals of --y at several confidence levels, e.g. 0.8=lo80:hi80,0.9=lo90:hi90: "
        "coverage (Wilson interval), width and Winkler score per level (interval_coverage table)",
    )
    cols.add_argument("--mean", metavar="COL", help="mean of a Gaussian forecast of --y (with --std)")
    cols.add_argument("--std", metavar="COL", help="standard deviation of a Gaussian forecast of --y (with --mean)")
    cols.add_argument("--point", metavar="COL", help="point forecast of --y: MAE, RMSE, bias and sMAPE")
    cols.add_argument("--baseline", metavar="COL", help="a baseline's point forecast of --y (with --point): mae_skill")
    cols.add_argument(
        "--horizon",
        metavar="COL",
        help="the forecasts' lead time: a forecast comparison, one row per model (the --by groups) and horizon, "
        "with score-by-horizon and coverage-by-horizon figures (--out); not also in --by",
    )
    for old in RENAMED_OPTIONS:
        cols.add_argument(old, action=_Renamed, nargs="?", help=argparse.SUPPRESS)


def _checked_level(value: float, part: str, seen: Sequence[float], example: str) -> None:
    """A level of ``--quantiles`` / ``--intervals``: strictly between 0 and 1, given once (CLI words)."""
    if not 0 < value < 1:
        msg = f"level {value:g} in {part!r} is not strictly between 0 and 1 (e.g. {example})"
        raise argparse.ArgumentTypeError(msg)
    if value in seen:
        msg = f"level {value:g} is given twice (e.g. {example})"
        raise argparse.ArgumentTypeError(msg)


def _checked_columns(columns: list[str], example: str) -> None:
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        msg = f"column {repeated[0]!r} is given twice (e.g. {example})"
        raise argparse.ArgumentTypeError(msg)


def _quantile_columns(text: str) -> dict[float, str]:
    """``0.1=q10,0.9=q90`` -> ``{0.1: "q10", 0.9: "q90"}`` (levels checked here, in CLI words)."""
    example = "0.1=q10,0.5=q50,0.9=q90"
    out: dict[float, str] = {}
    for part in text.split(","):
        level, sep, column = part.strip().partition("=")
        try:
            value = float(level)
        except ValueError:
            value = math.nan
        if not sep or not column or value != value:
            msg = f"expected LEVEL=COLUMN pairs such as {example}, got {part.strip()!r}"
            raise argparse.ArgumentTypeError(msg)
        _checked_level(value, part.strip(), list(out), example)
        out[value] = column
    _checked_columns(list(out.values()), example)
    return out


def _interval_columns(text: str) -> dict[float, tuple[str, str]]:
    """``0.8=lo80:hi80,0.9=lo90:hi90`` -> ``{0.8: ("lo80", "hi80"), ...}`` (levels checked here, in CLI words)."""
    example = "0.8=lo80:hi80,0.9=lo90:hi90"
    out: dict[float, tuple[str, str]] = {}
    for part in text.split(","):
        level, sep, columns = part.strip().partition("=")
        lo, colon, hi = columns.partition(":")
        try:
            value = float(level)
        except ValueError:
            value = math.nan
        if not sep or not colon or not lo or not hi or ":" in hi or value != value:
            msg = f"expected LEVEL=LO:HI pairs such as {example}, got {part.strip()!r}"
            raise argparse.ArgumentTypeError(msg)
        _checked_level(value, part.strip(), list(out), example)
        out[value] = (lo, hi)
    _checked_columns([c for pair in out.values() for c in pair], example)
    return out


def _metric_options(p: argparse.ArgumentParser) -> None:
    opts = p.add_argument_group("metrics")
    opts.add_argument(
        "--confidence-level",
        type=_level,
        metavar="P|COL",
        help="nominal coverage: a number such as 0.9, or the column of nominal levels (several levels "
        "stacked in long format; it becomes a group column and each group's target)",
    )
    opts.add_argument(
        "--ci-level",
        type=_probability,
        default=0.95,
        metavar="P",
        help="confidence of the per-group coverage intervals (default 0.95)",
    )
    opts.add_argument(
        "--n-calibration",
        type=_positive_int,
        metavar="N",
        help="size of the split-conformal calibration set: the under-coverage test then uses the exact "
        "Beta-binomial law of the coverage",
    )
    opts.add_argument(
        "--hsic",
        action="store_true",
        help="also compute HSIC between coverage and width (reads all rows of each group; not with --memory bounded)",
    )
    opts.add_argument(
        "--significance",
        type=_probability,
        default=0.05,
        metavar="S",
        help="a segment is flagged when its adjusted p-value is below S (default 0.05)",
    )
    opts.add_argument(
        "--correction",
        choices=["holm", "bh", "none"],
        default="holm",
        help="multiplicity correction across segments (default holm)",
    )
    opts.add_argument(
        "--n-bins", type=_positive_int, default=10, metavar="M", help="score bins and PIT histogram bins (default 10)"
    )
    opts.add_argument(
        "--ssc-n-bins",
        type=_positive_int,
        default=3,
        metavar="K",
        help="width bins of size-stratified coverage (default 3)",
    )
    opts.add_argument(
        "--invalid",
        choices=["null", "drop", "raise"],
        default="null",
        help="rows with invalid values: null (default: their groups get null metrics and are named as untested), "
        "drop (evaluate the valid rows; n counts them), raise (stop with the cause); a bad row leaves only the "
        "tables of the families whose inputs are bad",
    )
    opts.add_argument(
        "--crossing",
        choices=["score", "sort", "invalid"],
        default="score",
        help="crossing quantiles (--quantiles) and intervals that are not nested (--intervals): score them as "
        "given (default), sort each row's quantiles first, or make them invalid rows; counted in *_n_crossing",
    )
    opts.add_argument(
        "--memory",
        choices=["auto", "exact", "bounded"],
        default="auto",
        help="exact: size-stratified coverage and exact width quantiles (memory grows with the rows); "
        "bounded: memory independent of the rows (no SSC, width quantiles from 512-bin histograms); "
        f"auto (default): bounded when the input is larger than 1/{round(1 / AUTO_BOUNDED_FRACTION)} of the physical memory",
    )


def _input_run_options(p: argparse.ArgumentParser) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument(
        "--input-format", choices=["auto", "csv", "parquet"], default="auto", help="default: from the file extension"
    )
    inp.add_argument("--separator", default=",", metavar="CHAR", help="CSV field separator (default ','; tab for .tsv)")
    inp.add_argument(
        "--null-values", metavar="TOKENS", help="comma-separated CSV tokens read as missing, e.g. NA or NA,n/a,-"
    )
    inp.add_argument("--decimal-comma", action="store_true", help="CSV numbers use a decimal comma (3,14)")
    run = p.add_argument_group("run")
    run.add_argument(
        "--fail-on-under-coverage",
        action="store_true",
        help=f"exit with {EXIT_UNDER_COVERED} when a segment is significantly under-covered, "
        f"{EXIT_UNTESTED} when a group could not be tested (needs --confidence-level)",
    )
    run.add_argument(
        "--progress",
        action="store_true",
        help=f"progress on stderr even for small inputs (default: inputs >= {PROGRESS_BYTES // 2**20} MiB)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress messages")
    # issue 40: monitoring with guarantees
    run.add_argument(
        "--order-by",
        metavar="COL",
        help="a period column (day, batch): a monitoring section, the running coverage per segment with an "
        "anytime-valid confidence sequence and e-process alarms (needs --confidence-level and intervals or sets)",
    )
    run.add_argument(
        "--fail-on-alarm",
        action="store_true",
        help=f"exit with {EXIT_ALARM} when the monitoring (--order-by) raises an alarm in a segment",
    )


_REPORT_DESCRIPTION = (
    "Evaluate every metric that applies to the given columns, per group, on a CSV or Parquet file read "
    "lazily with polars (only aggregated tables are collected, so files larger than memory work). "
    "Interval metrics need --y --lo --hi; calibration needs --score with its 0/1 outcome (--y, or "
    "--score-y); prediction sets need --y --sets. Segments whose coverage is significantly below the "
    "target (--confidence-level, a number or a column of levels) are listed (one-sided exact binomial "
    "test per segment, Holm correction by default), and so are the segments significantly above it "
    "(over-covered: intervals or sets too wide)."
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="conformal-frames",
        description="Evaluate conformal prediction and calibration inside DataFrames.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rp = sub.add_parser(
        "report",
        help="evaluate a CSV or Parquet file and print / write the report",
        description=_REPORT_DESCRIPTION,
        epilog="example:\n  conformal-frames report preds.parquet --y y --lo lo --hi hi --by region model "
        "--confidence-level 0.9 --out report/\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    rp.add_argument(
        "file", metavar="FILE", help="input file: .parquet/.pq or .csv/.tsv (a glob pattern works for Parquet)"
    )
    _column_options(rp)
    _metric_options(rp)
    _input_run_options(rp)
    _output_options(rp)
    rp.set_defaults(func=_run_report)
    demo = sub.add_parser(
        "demo",
        help="report on a deterministic synthetic dataset",
        description="Report on a deterministic synthetic dataset: heteroscedastic regression intervals "
        "at levels 0.8 / 0.9 / 0.95 (a level column), five segments, one deliberately under-covered.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    demo.add_argument("--rows", type=_positive_int, default=20_000, help="rows per confidence level (default 20000)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    _output_options(demo)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
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
