"""Building a query on classic PySpark: Spark's functions looked up once per build (issue 38 item 9).

Every ``pyspark.sql.functions`` call of classic PySpark finds the JVM
function by reflection before calling it: two py4j round trips (the class
``org.apache.spark.sql.functions``, then its member) on top of the call
itself.  The trial's 23-metric query makes about 7,000 such calls, for a few
dozen distinct functions.  While :func:`spark_functions_kept` is active,
PySpark's lookup (``pyspark.sql.functions.builtin._get_jvm_function``)
returns the member found the first time for the same Spark context and name;
the calls made, and the query built, are the same.  The original lookup is
put back when the last (nested or concurrent) block ends.  Nothing happens
on a PySpark without that function.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["spark_functions_kept"]

_LOCK = threading.Lock()
#: [depth of the active blocks, the original lookup, the members found: (id of the context, name) -> member]
_STATE: list[Any] = [0, None, {}]


def _kept(original: Callable[[str, Any], Any], found: dict[tuple[int, str], Any]) -> Callable[[str, Any], Any]:
    def lookup(name: str, sc: Any) -> Any:
        key = (id(sc), name)
        member = found.get(key)
        if member is None:
            member = found[key] = original(name, sc)
        return member

    lookup.__wrapped__ = original  # type: ignore[attr-defined]
    return lookup


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
        _STATE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE[0] -= 1
            if _STATE[0] == 0:
                builtin._get_jvm_function = _STATE[1]
                _STATE[1:] = [None, {}]
