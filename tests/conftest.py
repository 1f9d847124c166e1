"""Backends every test runs on: the ``constructor`` fixture.

A constructor turns a dict of columns into a native frame of one backend.
Backends that are not installed are skipped with the reason.
"""

from __future__ import annotations

import importlib.util
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


CONSTRUCTORS: dict[str, tuple[Constructor, str, bool]] = {
    # id: (constructor, module it needs, is lazy)
    "pandas": (_pandas, "pandas", False),
    "pandas[pyarrow]": (_pandas_pyarrow, "pyarrow", False),
    "polars": (_polars, "polars", False),
    "polars[lazy]": (_polars_lazy, "polars", True),
    "duckdb": (_duckdb, "duckdb", True),
}


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture(params=list(CONSTRUCTORS))
def constructor(request: pytest.FixtureRequest) -> Constructor:
    make, module, lazy = CONSTRUCTORS[request.param]
    if not _available(module):
        pytest.skip(f"{module} is not installed")
    make.lazy = lazy  # type: ignore[attr-defined]
    make.id = request.param  # type: ignore[attr-defined]
    return make


@pytest.fixture(params=[k for k, v in CONSTRUCTORS.items() if not v[2]])
def eager_constructor(request: pytest.FixtureRequest) -> Constructor:
    make, module, _ = CONSTRUCTORS[request.param]
    if not _available(module):
        pytest.skip(f"{module} is not installed")
    return make


@pytest.fixture(params=[k for k, v in CONSTRUCTORS.items() if v[2]])
def lazy_constructor(request: pytest.FixtureRequest) -> Constructor:
    make, module, _ = CONSTRUCTORS[request.param]
    if not _available(module):
        pytest.skip(f"{module} is not installed")
    return make
