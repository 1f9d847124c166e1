"""Backends every test runs on: the ``constructor`` fixture.

A constructor turns a dict of columns into a native frame of one backend.
Backends that are not installed are skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

Constructor = Callable[[dict[str, Any]], Any]


def _polars(data: dict[str, Any]) -> Any:
    import polars as pl

    return pl.DataFrame(data, strict=False)


def _polars_lazy(data: dict[str, Any]) -> Any:
    return _polars(data).lazy()


def _pandas(data: dict[str, Any]) -> Any:
    import pandas as pd

    return pd.DataFrame(data)


def _pandas_pyarrow(data: dict[str, Any]) -> Any:
    return _polars(data).to_pandas(use_pyarrow_extension_array=True)


_DUCKDB_CON: list[Any] = []


def _duckdb(data: dict[str, Any]) -> Any:
    import duckdb

    if not _DUCKDB_CON:
        _DUCKDB_CON.append(duckdb.connect())
    table = _polars(data).to_arrow()
    return _DUCKDB_CON[0].from_arrow(table)


_SPARK: list[Any] = []


def spark_session() -> Any:
    """One local Spark session (``local[1]``, two shuffle partitions) for the whole test session."""
    if not _SPARK:
        import os

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        session = (
            # one task thread: each xdist worker has a JVM of its own and the machine
            # two cores (local[2] oversubscribed them: Spark tests ~20% slower); two
            # shuffle partitions keep multi-partition results (order, merges) tested
            SparkSession.builder.master("local[1]")
            .appName("conformal-frames-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", "2g")
            .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            # interpreted plans: the p-value series exceed Janino's 64 KB
            # method limit and every query would log a codegen fallback
            .config("spark.sql.codegen.wholeStage", "false")
            # no call-site capture per PySpark function call (a stack walk and
            # four py4j calls each): building a query makes a third of the calls
            .config("spark.python.sql.dataFrameDebugging.enabled", "false")
            # interpreted expressions too: the test frames are tiny, and compiling
            # each query's generated code (Janino) costs more than running it (the
            # suite's Spark tests: 1,249 -> 1,075 worker-seconds, docs/performance.md);
            # the results are the same, Spark tests its two evaluation modes against
            # each other
            .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
            # no adaptive re-planning of the tiny shuffles, no console progress bars
            .config("spark.sql.adaptive.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        _SPARK.append(session)
    return _SPARK[0]


def _pyspark(data: dict[str, Any]) -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pyspark on pandas >= 3
        return spark_session().createDataFrame(_spark_compatible(_polars(data)).to_arrow())


def _spark_compatible(table: Any) -> Any:
    """Spark has no unsigned integer types: widen them to the next signed type."""
    import polars as pl

    wider = {pl.UInt8: pl.Int16, pl.UInt16: pl.Int32, pl.UInt32: pl.Int64, pl.UInt64: pl.Int64}
    return table.with_columns(pl.col(c).cast(wider[t]) for c, t in table.schema.items() if t in wider)


@dataclass(frozen=True)
class Backend:
    """One backend of the ``constructor`` fixtures: ``backend(data)`` builds a native frame."""

    id: str
    make: Callable[[dict[str, Any]], Any]
    module: str
    lazy: bool

    def __call__(self, data: dict[str, Any]) -> Any:
        return self.make(data)

    def skip_reason(self) -> str | None:
        if self.module == "pyspark" and shutil.which("java") is None:
            return "pyspark needs java on the PATH"
        if importlib.util.find_spec(self.module) is None:
            return f"{self.module} is not installed"
        return None


BACKENDS: dict[str, Backend] = {
    b.id: b
    for b in (
        Backend("pandas", _pandas, "pandas", lazy=False),
        Backend("pandas[pyarrow]", _pandas_pyarrow, "pyarrow", lazy=False),
        Backend("polars", _polars, "polars", lazy=False),
        Backend("polars[lazy]", _polars_lazy, "polars", lazy=True),
        Backend("duckdb", _duckdb, "duckdb", lazy=True),
        Backend("pyspark", _pyspark, "pyspark", lazy=True),
    )
}
#: the 0.1 name: id -> (constructor, module it needs, is lazy)
CONSTRUCTORS: dict[str, tuple[Constructor, str, bool]] = {k: (b, b.module, b.lazy) for k, b in BACKENDS.items()}


def pytest_addoption(parser: pytest.Parser) -> None:
    # like narwhals' --constructors.  PySpark (local[2]) runs whenever pyspark
    # is installed (the ``test`` extra brings it) and Java is on the PATH;
    # CF_TEST_SPARK=0 leaves it out of the default for quick local runs.
    # SQLFrame was tried and dropped: its DuckDB session could not even build
    # the test frames (None in string columns, empty frames) and took ~10 s a query.
    default = [k for k in BACKENDS if k != "pyspark" or os.environ.get("CF_TEST_SPARK", "1") != "0"]
    parser.addoption(
        "--constructors",
        default=",".join(default),
        help=f"comma-separated backends of the constructor fixtures (default: {','.join(default)}; "
        f"known: {', '.join(BACKENDS)}); a backend that is not installed is skipped with the reason",
    )


def _selected(config: pytest.Config) -> list[Backend]:
    names = [n.strip() for n in str(config.getoption("constructors")).split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        msg = f"--constructors: unknown backend(s) {unknown}; known: {', '.join(BACKENDS)}"
        raise pytest.UsageError(msg)
    return [BACKENDS[n] for n in names]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "spark_cases(**params): run the [pyspark] case of a parametrized test only where its parameters "
        "equal these (a list of dicts for several); the other cases repeat the same Spark query shape and "
        "run on the other backends",
    )


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject addopts): one worker per core, at most 4 (each Spark worker starts a JVM)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, cores))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("spark_cases")
        callspec = getattr(item, "callspec", None)
        if marker is None or callspec is None or getattr(callspec.params.get("constructor"), "id", "") != "pyspark":
            continue
        kept = list(marker.args[0]) if marker.args else [marker.kwargs]
        params = callspec.params
        if not any(all(params.get(k) == v for k, v in case.items()) for case in kept):
            shown = " or ".join(",".join(f"{k}={v!r}" for k, v in case.items()) for case in kept)
            name = item.name.split("[")[0]
            item.add_marker(pytest.mark.skip(reason=f"covered by {name}[pyspark] with {shown}"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    wanted = {"constructor": None, "eager_constructor": False, "lazy_constructor": True}
    for fixture, lazy in wanted.items():
        if fixture in metafunc.fixturenames:
            chosen = [b for b in _selected(metafunc.config) if lazy is None or b.lazy == lazy]
            params = [pytest.param(b, id=b.id, marks=_skip(b)) for b in chosen]
            metafunc.parametrize(fixture, params)


def _skip(backend: Backend) -> list[pytest.MarkDecorator]:
    reason = backend.skip_reason()
    return [pytest.mark.skip(reason=reason)] if reason else []
