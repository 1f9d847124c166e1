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
    """One local Spark session (``local[2]``) for the whole test session."""
    if not _SPARK:
        import os

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("conformal-frames-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.driver.memory", "2g")
            # interpreted plans: the p-value series exceed Janino's 64 KB
            # method limit and every query would log a codegen fallback
            .config("spark.sql.codegen.wholeStage", "false")
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


CONSTRUCTORS: dict[str, tuple[Constructor, str, bool]] = {
    # id: (constructor, module it needs, is lazy)
    "pandas": (_pandas, "pandas", False),
    "pandas[pyarrow]": (_pandas_pyarrow, "pyarrow", False),
    "polars": (_polars, "polars", False),
    "polars[lazy]": (_polars_lazy, "polars", True),
    "duckdb": (_duckdb, "duckdb", True),
    "pyspark": (_pyspark, "pyspark", True),
}
# PySpark (local[2]) runs whenever pyspark is installed (the ``test`` extra
# brings it) and Java is on the PATH; CF_TEST_SPARK=0 leaves it out for quick
# local runs.  Without Java the pyspark tests are skipped with that reason.
# SQLFrame was tried and dropped: its DuckDB session could not even build the
# test frames (None in string columns, empty frames) and took ~10 s a query.
if os.environ.get("CF_TEST_SPARK", "1") == "0":
    CONSTRUCTORS = {k: v for k, v in CONSTRUCTORS.items() if k != "pyspark"}


def _available(module: str) -> bool:
    if module == "pyspark" and shutil.which("java") is None:
        return False
    return importlib.util.find_spec(module) is not None


@pytest.fixture(params=list(CONSTRUCTORS))
def constructor(request: pytest.FixtureRequest) -> Constructor:
    make, module, lazy = CONSTRUCTORS[request.param]
    if not _available(module):
        pytest.skip(f"{module} is not installed" + (" (or java is not on the PATH)" if module == "pyspark" else ""))
    make.lazy = lazy  # type: ignore[attr-defined]
    make.id = request.param  # type: ignore[attr-defined]
    return make


@pytest.fixture(params=[k for k, v in CONSTRUCTORS.items() if not v[2]])
def eager_constructor(request: pytest.FixtureRequest) -> Constructor:
    make, module, _ = CONSTRUCTORS[request.param]
    if not _available(module):
        pytest.skip(f"{module} is not installed" + (" (or java is not on the PATH)" if module == "pyspark" else ""))
    return make


@pytest.fixture(params=[k for k, v in CONSTRUCTORS.items() if v[2]])
def lazy_constructor(request: pytest.FixtureRequest) -> Constructor:
    make, module, _ = CONSTRUCTORS[request.param]
    if not _available(module):
        pytest.skip(f"{module} is not installed" + (" (or java is not on the PATH)" if module == "pyspark" else ""))
    return make
