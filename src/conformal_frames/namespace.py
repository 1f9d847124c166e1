"""The ``.conformal`` namespace: thin, stateless, delegates to the core."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

from conformal_frames.core import Metric, evaluate, evaluate_one

__all__ = ["ConformalNamespace", "conformal", "register_accessors"]

#: metric families; each lists in ``METHODS`` the factories that become
#: ``.conformal`` methods, and may list in ``FRAME_METHODS`` functions
#: ``f(frame, ...)`` that become methods on the namespace's frame
#: (imported by module path: a family may export a function of its own name,
#: e.g. ``efficiency``, which shadows the submodule on the package)
FAMILIES = tuple(
    importlib.import_module(f"conformal_frames.{name}")
    for name in ("intervals", "sets", "efficiency", "conditional", "calibration", "ranking")
)

#: metric factories exposed as namespace methods (name -> factory)
METRIC_FACTORIES: dict[str, Callable[..., Metric]] = {
    name: getattr(module, name) for module in FAMILIES for name in module.METHODS
}


class ConformalNamespace:
    """Conformal-prediction and calibration metrics of one frame.

    Every metric method takes the metric's arguments plus ``by=`` and returns a
    float (eager, ungrouped), a test result (eager, ungrouped test), or a
    frame of the caller's type (grouped, long tables, or lazy input).
    """

    def __init__(self, frame: Any) -> None:
        self._frame = frame

    def evaluate(self, *metrics: Metric, by: str | Sequence[str] | None = None) -> Any:
        """Many metrics in one pass; see :func:`conformal_frames.evaluate`."""
        return evaluate(self._frame, *metrics, by=by)


def _method(name: str, factory: Callable[..., Metric]) -> Callable[..., Any]:
    @functools.wraps(factory)
    def method(self: ConformalNamespace, *args: Any, by: str | Sequence[str] | None = None, **kwargs: Any) -> Any:
        return evaluate_one(self._frame, factory(*args, **kwargs), by=by)

    method.__name__ = name
    method.__qualname__ = f"ConformalNamespace.{name}"
    method.__doc__ = (factory.__doc__ or "").split("\n")[
        0
    ] + f"\n\n    Evaluates :func:`conformal_frames.{name}` with ``by=``; see there.\n"
    return method


def _frame_method(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def method(self: ConformalNamespace, *args: Any, **kwargs: Any) -> Any:
        return fn(self._frame, *args, **kwargs)

    method.__qualname__ = f"ConformalNamespace.{name}"
    return method


def add_metrics(factories: dict[str, Callable[..., Metric]]) -> None:
    """Expose metric factories as ``.conformal`` methods."""
    METRIC_FACTORIES.update(factories)
    for name, factory in factories.items():
        setattr(ConformalNamespace, name, _method(name, factory))


add_metrics(dict(METRIC_FACTORIES))


def conformal(frame: Any) -> ConformalNamespace:
    """The ``.conformal`` namespace for any frame narwhals supports.

    For frames without the accessor (DuckDB relations, Spark DataFrames...).

    Examples
    --------
    >>> import duckdb
    >>> import conformal_frames as cf
    >>> rel = duckdb.sql("select * from (values (1.0, 0.0, 2.0), (3.0, 0.0, 2.0)) t(y, lo, hi)")
    >>> cf.conformal(rel).coverage("y", "lo", "hi").select("coverage, n").fetchall()
    [(0.5, 2)]
    """
    return ConformalNamespace(frame)


def register_accessors() -> None:
    """Register ``.conformal`` on pandas and polars frames that are installed."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - depends on the environment
        pass
    else:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # re-registration on reload
            pd.api.extensions.register_dataframe_accessor("conformal")(ConformalNamespace)
    try:
        import polars as pl
    except ImportError:  # pragma: no cover
        pass
    else:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            pl.api.register_dataframe_namespace("conformal")(ConformalNamespace)
            pl.api.register_lazyframe_namespace("conformal")(ConformalNamespace)


def _report(frame: Any, **kwargs: Any) -> Any:
    """Evaluation report of this frame; see :func:`conformal_frames.report.report`."""
    from conformal_frames.report import report  # report imports matplotlib lazily

    return report(frame, **kwargs)


for _module in FAMILIES:
    for _name in getattr(_module, "FRAME_METHODS", ()):
        setattr(ConformalNamespace, _name, _frame_method(_name, getattr(_module, _name)))
ConformalNamespace.report = _frame_method("report", _report)  # type: ignore[attr-defined]
