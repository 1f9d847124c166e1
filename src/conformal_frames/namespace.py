"""The ``.conformal`` namespace: thin, stateless, delegates to the core.

Every metric factory of the families (``METHODS`` of each module) becomes a
method with the factory's own parameters plus ``by=`` and ``invalid=``, its
full docstring and a true signature (``inspect.signature``, ``help()``).
Functions of a frame (``FRAME_METHODS``, and :func:`~conformal_frames.reporting.report`)
become methods that pass the namespace's frame.  For IDEs and type checkers
the methods are spelled out in ``namespace.pyi``, generated from this module by
``python -m conformal_frames._stub`` and checked against it by the tests.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from conformal_frames._renames import check_keywords, keyword_names, passed_on
from conformal_frames.engine import InvalidPolicy, Metric, evaluate, evaluate_one, to_lazy
from conformal_frames.metrics import (
    bootstrap,
    calibration,
    comparison,
    conditional,
    distributions,
    efficiency,
    intervals,
    logscores,
    multivariate,
    point,
    quantiles,
    ranking,
    recalibration,
    sequential,
    sets,
    uncertainty_calibration,
)
from conformal_frames.reporting import report
from conformal_frames.slices import find_slices

__all__ = ["ConformalNamespace", "add_metrics", "conformal", "register_accessors"]

#: metric families; each lists in ``METHODS`` the factories that become
#: ``.conformal`` methods, and may list in ``FRAME_METHODS`` functions
#: ``f(frame, ...)`` that become methods on the namespace's frame
FAMILIES: tuple[ModuleType, ...] = (
    intervals,
    sets,
    efficiency,
    conditional,
    calibration,
    recalibration,
    ranking,
    comparison,
    quantiles,
    sequential,
    distributions,
    point,
    logscores,
    bootstrap,
    uncertainty_calibration,
    multivariate,
)

#: metric factories exposed as namespace methods (name -> factory)
METRIC_FACTORIES: dict[str, Callable[..., Metric]] = {
    name: getattr(module, name) for module in FAMILIES for name in module.METHODS
}
#: functions of a frame exposed as namespace methods (name -> function)
FRAME_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{name: getattr(module, name) for module in FAMILIES for name in getattr(module, "FRAME_METHODS", ())},
    "report": report,
    "find_slices": find_slices,
}

_KW = inspect.Parameter.KEYWORD_ONLY
_SELF = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
_BY = inspect.Parameter("by", _KW, default=None, annotation=str | Sequence[str] | None)
_INVALID = inspect.Parameter("invalid", _KW, default=None, annotation=InvalidPolicy | None)
_PROGRESS = inspect.Parameter("progress", _KW, default=False, annotation=bool | None)
_RETURNS = (
    "\n    The ``.conformal`` method evaluates this metric on the frame: ``by=`` groups it "
    "(column name or names), ``invalid=`` sets the invalid-row policy and "
    "``progress=True`` shows a progress bar on stderr (see :func:`conformal_frames.evaluate`).  It returns a float (eager, ungrouped score), "
    "a test result (eager, ungrouped test) or a frame of the caller's type "
    "(grouped, long tables, or lazy input).\n"
)


class ConformalNamespace:
    """Conformal-prediction and calibration metrics of one frame.

    Every metric method takes the metric's arguments plus ``by=`` and
    ``invalid=`` and returns a float (eager, ungrouped), a test result (eager,
    ungrouped test), or a frame of the caller's type (grouped, long tables,
    or lazy input).
    """

    def __init__(self, frame: Any) -> None:
        self._frame = frame

    def evaluate(
        self,
        *metrics: Metric,
        by: str | Sequence[str] | None = None,
        invalid: InvalidPolicy | None = None,
        progress: bool | None = False,
    ) -> Any:
        """Many metrics in one pass; see :func:`conformal_frames.evaluate`."""
        return evaluate(self._frame, *metrics, by=by, invalid=invalid, progress=progress)


def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature with evaluated annotations (as written when they cannot be)."""
    try:
        return inspect.signature(fn, eval_str=True)
    except (NameError, TypeError):  # pragma: no cover - an annotation only a type checker knows
        return inspect.signature(fn)


def _parameters(fn: Callable[..., Any], *, skip_first: bool = False) -> list[inspect.Parameter]:
    params = list(_signature(fn).parameters.values())
    return params[1:] if skip_first else params


def _metric_method(name: str, factory: Callable[..., Metric]) -> Callable[..., Any]:
    def method(
        self: ConformalNamespace, *args: Any, by: Any = None, invalid: Any = None, progress: Any = False, **kwargs: Any
    ) -> Any:
        if kwargs and keywords is not None:
            check_keywords(name, kwargs, [*keywords, "by", "invalid", "progress"], renamed)
        try:
            metric = factory(*args, **kwargs)
        except TypeError:
            to_lazy(self._frame)  # a frame whose column names are not strings: say that first
            raise
        return evaluate_one(self._frame, metric, by=by, invalid=invalid, progress=progress)

    own = _parameters(factory)
    keywords, renamed = keyword_names(factory), passed_on(factory)
    taken = {p.name for p in own} & {"by", "invalid", "progress"}
    if taken:  # pragma: no cover - a programming error in a family
        msg = f"factory {name} has parameters {sorted(taken)} that the namespace method adds"
        raise TypeError(msg)
    method.__signature__ = inspect.Signature([_SELF, *own, _BY, _INVALID, _PROGRESS], return_annotation=Any)  # type: ignore[attr-defined]
    method.__doc__ = (factory.__doc__ or "").rstrip() + "\n" + _RETURNS
    _name(method, name, factory)
    return method


def _frame_method(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: ConformalNamespace, *args: Any, **kwargs: Any) -> Any:
        if kwargs and keywords is not None:
            check_keywords(name, kwargs, keywords[1:], renamed)
        return fn(self._frame, *args, **kwargs)

    keywords, renamed = keyword_names(fn), passed_on(fn)

    sig = _signature(fn)
    params = _parameters(fn, skip_first=True)
    method.__signature__ = inspect.Signature([_SELF, *params], return_annotation=sig.return_annotation)  # type: ignore[attr-defined]
    method.__doc__ = fn.__doc__
    _name(method, name, fn)
    return method


def _name(method: Callable[..., Any], name: str, source: Callable[..., Any]) -> None:
    method.__name__ = name
    method.__qualname__ = f"ConformalNamespace.{name}"
    method.__module__ = __name__
    method.__dict__["source"] = source  # the factory or frame function behind the method


def add_metrics(factories: dict[str, Callable[..., Metric]]) -> None:
    """Expose metric factories as ``.conformal`` methods."""
    METRIC_FACTORIES.update(factories)
    for name, factory in factories.items():
        setattr(ConformalNamespace, name, _metric_method(name, factory))


add_metrics(dict(METRIC_FACTORIES))
for _name_, _fn in FRAME_FUNCTIONS.items():
    setattr(ConformalNamespace, _name_, _frame_method(_name_, _fn))


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


def _register_pandas(pd: Any) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # re-registration on reload
        pd.api.extensions.register_dataframe_accessor("conformal")(ConformalNamespace)


def _register_polars(pl: Any) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        pl.api.register_dataframe_namespace("conformal")(ConformalNamespace)
        pl.api.register_lazyframe_namespace("conformal")(ConformalNamespace)


#: libraries that get the ``.conformal`` accessor, and how
_REGISTER: dict[str, Callable[[Any], None]] = {"pandas": _register_pandas, "polars": _register_polars}


class _RegisterOnImport:
    """A ``sys.meta_path`` finder that registers the accessor once pandas / polars is imported.

    Importing pandas and polars costs ~0.5 s, so ``import conformal_frames``
    does not import them: a library already imported is registered at once;
    one imported later is registered right after its own ``__init__`` ran
    (the finder delegates to the other finders and only wraps ``exec_module``
    of the loader they return).  It removes itself when nothing is pending.
    """

    def __init__(self, pending: dict[str, Callable[[Any], None]]) -> None:
        self.pending = pending

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        register = self.pending.get(fullname)
        if register is None:
            return None
        import sys

        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:  # pragma: no cover - the library is not installed
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):  # pragma: no cover
            return spec
        original = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original(module)
            self.done(fullname)
            try:
                register(module)
            except Exception as exc:  # pragma: no cover - never break the caller's import
                import warnings

                warnings.warn(f"conformal_frames: .conformal not registered on {fullname}: {exc!r}", stacklevel=2)

        setattr(loader, "exec_module", exec_module)  # noqa: B010 - this loader instance only
        return spec

    def done(self, name: str) -> None:
        import sys

        self.pending.pop(name, None)
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)


def register_accessors() -> None:
    """Register ``.conformal`` on pandas and polars frames, now or when they are imported.

    A library already imported is registered at once; otherwise a light import
    hook registers it when the caller imports it (``import conformal_frames``
    does not import pandas or polars).
    """
    import sys

    for finder in list(sys.meta_path):
        if isinstance(finder, _RegisterOnImport):
            sys.meta_path.remove(finder)
    pending = {}
    for name, register in _REGISTER.items():
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "api"):
            register(module)
        else:
            pending[name] = register
    if pending:
        sys.meta_path.insert(0, _RegisterOnImport(pending))  # type: ignore[arg-type]
