"""Compiled queries reused across calls on eager polars frames.

Building a query costs about 30 µs of narwhals translation per expression
node, milliseconds per call: most of a call on a small frame.  For an eager
polars ``DataFrame`` the compiled query is built once per (metrics, keys,
policy, schema) on a polars IO source that reads the frame of the current
call, and reused: a call then costs the engine's own work.  The plan is the
one :func:`~conformal_frames.engine.compile_query` builds; only its input
node differs.  Everything else (lazy frames, other backends, metrics that
reshape the input in :meth:`~conformal_frames.engine.Metric.prepare`, metrics
whose parameters are not hashable) compiles on every call.

On classic PySpark, building a query costs a py4j round trip per expression
node (about 0.7 s for the 8 single-pass metrics), and Spark optimizes each new
query again when it runs (about 0.9 s more).  A Spark ``DataFrame`` is an
immutable plan, so the result of a lazy call is kept per input frame (held
weakly: the entry goes with the frame) and per (metrics, keys, policy): a
repeated call on the same frame returns the same result frame, whose
optimized plan Spark keeps.  Calls that run work when called
(``invalid="raise"`` runs its checks) build every time.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import narwhals.stable.v2 as nw

#: compiled queries kept (least recently used dropped first)
MAX_PLANS = 128


@dataclass
class _CachedPlan:
    """A compiled query over an IO source, and the frame that source reads."""

    compiled: Any
    lock: threading.RLock = field(default_factory=threading.RLock)
    frame: Any = None


_PLANS: OrderedDict[Hashable, _CachedPlan] = OrderedDict()
_PLANS_LOCK = threading.Lock()


@functools.cache
def _register_io_source() -> Callable[..., Any] | None:
    try:
        from polars.io.plugins import register_io_source
    except ImportError:  # polars without IO plugins
        return None
    return register_io_source


def _source(plan: _CachedPlan, schema: Any) -> Any:
    """A polars LazyFrame that yields ``plan.frame`` (projected, filtered as asked)."""
    register = _register_io_source()
    assert register is not None

    def read(
        with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None
    ) -> Iterator[Any]:
        frame = plan.frame
        if with_columns is not None:
            frame = frame.select(with_columns)
        if predicate is not None:
            frame = frame.filter(predicate)
        if n_rows is not None:
            frame = frame.head(n_rows)
        # batches of the engine's size: the streaming engine runs them in parallel
        step = batch_size if batch_size else len(frame)
        yield from (frame.slice(start, step) for start in range(0, max(len(frame), 1), max(step, 1)))

    return register(read, schema=schema)


def _key(lf: nw.LazyFrame, metrics: Sequence[Any], keys: list[str], policy: str) -> Hashable | None:
    """The cache key of a call, or ``None`` when its metrics' parameters are not hashable."""
    # the native schema: polars dtypes carry more than narwhals' (e.g. categories)
    key = (tuple(metrics), tuple(keys), policy, tuple(lf.to_native().collect_schema().items()))
    return key if _hashable(key) else None


@contextmanager
def bound(
    frame: Any,
    lf: nw.LazyFrame,
    metrics: Sequence[Any],
    keys: list[str],
    policy: str,
    compile_fn: Callable[..., Any],
    *,
    reusable: bool,
    variant: Hashable = None,
) -> Iterator[Any]:
    """The compiled query of this call, reading ``frame`` while the block runs.

    ``frame`` is the caller's frame (``lf`` its lazy narwhals frame); ``compile_fn(lf, metrics, keys, invalid=policy)`` builds
    the query.  Eager polars frames reuse a cached query built on an IO
    source when ``reusable`` (the query reads the caller's columns as they
    are); any other call gets ``compile_fn`` on ``lf``.  ``variant`` tells
    apart the queries that ``compile_fn`` builds otherwise than
    :func:`~conformal_frames.engine.compile_query` does.
    """
    native = _native(frame)
    key = _key(lf, metrics, keys, policy) if reusable and _polars_eager(native) else None
    if key is None:
        yield compile_fn(lf, metrics, keys, invalid=policy)
        return
    plan = _plan((variant, key), lf, metrics, keys, policy, compile_fn)
    with plan.lock:  # re-entrant: a nested call of the same query restores the outer frame
        outer, plan.frame = plan.frame, native
        try:
            yield plan.compiled
        finally:
            plan.frame = outer  # None after the outermost call: the caller's data is not kept


def _plan(
    key: Hashable,
    lf: nw.LazyFrame,
    metrics: Sequence[Any],
    keys: list[str],
    policy: str,
    compile_fn: Callable[..., Any],
) -> _CachedPlan:
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    plan = _CachedPlan(compiled=None)
    source = nw.from_native(_source(plan, lf.to_native().collect_schema()))
    plan.compiled = compile_fn(source, metrics, keys, invalid=policy)  # raises like an uncached call
    with _PLANS_LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > MAX_PLANS:
            _PLANS.popitem(last=False)
    return plan


def _polars_eager(frame: Any) -> bool:
    if _register_io_source() is None:
        return False
    pl = sys.modules.get("polars")
    return pl is not None and isinstance(frame, pl.DataFrame)


#: results kept per Spark frame (least recently used dropped first)
MAX_RESULTS = 16

_RESULTS: weakref.WeakKeyDictionary[Any, OrderedDict[Hashable, nw.LazyFrame]] = weakref.WeakKeyDictionary()


def kept(frame: Any, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()``, or the result an earlier ``build()`` gave for the same classic PySpark frame and ``key``.

    ``key`` holds what the result depends on besides the frame (metrics,
    keys, policy); a key that is not hashable, a frame of another backend or
    a result that is not lazy is not kept.
    """
    native = _native(frame)
    if not spark_classic(native) or not _hashable(key):
        return build()
    with _PLANS_LOCK:
        results = _RESULTS.get(native)
        if results is not None and key in results:
            results.move_to_end(key)
            return results[key]
    result = build()
    if isinstance(result, nw.LazyFrame):
        with _PLANS_LOCK:
            results = _RESULTS.setdefault(native, OrderedDict())
            results[key] = result
            while len(results) > MAX_RESULTS:
                results.popitem(last=False)
    return result


def _hashable(key: tuple[Any, ...]) -> bool:
    try:
        hash(key)
    except TypeError:  # a parameter such as a dict or list
        return False
    return True


def _native(frame: Any) -> Any:
    return frame.to_native() if isinstance(frame, (nw.DataFrame, nw.LazyFrame)) else frame


def spark_classic(frame: Any) -> bool:
    """Whether ``frame`` (native or narwhals) is a classic PySpark ``DataFrame``."""
    # pyspark 4 (classic, not Spark Connect), and pyspark 3
    return type(_native(frame)).__module__ in ("pyspark.sql.classic.dataframe", "pyspark.sql.dataframe")


def clear() -> None:
    """Forget every cached query and kept result."""
    with _PLANS_LOCK:
        _PLANS.clear()
        _RESULTS.clear()
