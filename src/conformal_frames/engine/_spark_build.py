"""Building a query on classic PySpark: Spark's functions looked up once per build (issue 38 item 9).

Every ``pyspark.sql.functions`` call of classic PySpark finds the JVM
function by reflection before calling it: two py4j round trips (the class
``org.apache.spark.sql.functions``, then its member) on top of the call
itself.  The trial's 23-metric query makes about 7,000 such calls, for a few
dozen distinct functions.  While :func:`spark_functions_kept` is active,
PySpark's lookup (``pyspark.sql.functions.builtin._get_jvm_function``)
returns the member found the first time for the same Spark context and name;
the calls made, and the query built, are the same.

Inside, PySpark's ``lit`` and ``col`` also return the column made the first
time for the same context and value (``_invoke_function``, the one call both
make): a Spark ``Column`` is an immutable expression, and one object can sit
in any number of expressions.  The trial's query makes 1,481 ``lit`` calls
of 68 distinct values and 1,259 ``col`` calls of 309 names, one py4j round
trip each.  Values are told apart by type and ``repr`` (``1`` from ``1.0``
and ``True``, ``0.0`` from ``-0.0``); other values, and numpy scalars, are
made anew.  The original functions are put back when the last (nested or
concurrent) block ends.  Nothing happens on a PySpark without them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["spark_functions_kept"]

_LOCK = threading.Lock()
#: [depth of the active blocks, the original lookup, the members found: (id of the context, name) -> member,
#: the original ``_invoke_function``, the columns made: (id of the context, name, type, repr) -> column]
_STATE: list[Any] = [0, None, {}, None, {}]

#: the functions whose column is kept, and the types of the one argument they are kept for
_KEPT_CALLS = frozenset({"lit", "col"})
_KEPT_TYPES = frozenset({int, float, bool, str, type(None)})


def _kept(original: Callable[[str, Any], Any], found: dict[tuple[int, str], Any]) -> Callable[[str, Any], Any]:
    def lookup(name: str, sc: Any) -> Any:
        key = (id(sc), name)
        member = found.get(key)
        if member is None:
            member = found[key] = original(name, sc)
        return member

    lookup.__wrapped__ = original  # type: ignore[attr-defined]
    return lookup


def _made_once(original: Callable[..., Any], made: dict[tuple[Any, ...], Any]) -> Callable[..., Any]:
    def invoke(name: str, *args: Any) -> Any:
        if name not in _KEPT_CALLS or len(args) != 1 or type(args[0]) not in _KEPT_TYPES:
            return original(name, *args)
        context = getattr(getattr(sys.modules.get("pyspark"), "SparkContext", None), "_active_spark_context", None)
        key = (id(context), name, type(args[0]), repr(args[0]))
        column = made.get(key)
        if column is None:
            column = made[key] = original(name, *args)
        return column

    invoke.__wrapped__ = original  # type: ignore[attr-defined]
    return invoke


@contextlib.contextmanager
def spark_functions_kept() -> Iterator[None]:
    """Inside: classic PySpark looks each JVM function up once (see the module's text)."""
    builtin: Any = sys.modules.get("pyspark.sql.functions.builtin")
    if builtin is None or not callable(getattr(builtin, "_get_jvm_function", None)):
        yield
        return
    with _LOCK:
        if _STATE[0] == 0:
            _STATE[1] = builtin._get_jvm_function
            _STATE[2] = {}
            builtin._get_jvm_function = _kept(_STATE[1], _STATE[2])
            if callable(getattr(builtin, "_invoke_function", None)):
                _STATE[3], _STATE[4] = builtin._invoke_function, {}
                builtin._invoke_function = _made_once(_STATE[3], _STATE[4])
        _STATE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE[0] -= 1
            if _STATE[0] == 0:
                builtin._get_jvm_function = _STATE[1]
                if _STATE[3] is not None:
                    builtin._invoke_function = _STATE[3]
                _STATE[1:] = [None, {}, None, {}]
