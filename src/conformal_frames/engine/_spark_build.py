"""Building a query on classic PySpark with fewer py4j round trips and shorter plans (issue 38 item 9).

While :func:`spark_functions_kept` is active:

- PySpark's lookup of a JVM function (``pyspark.sql.functions.builtin._get_jvm_function``,
  two reflection round trips per ``functions`` call) returns the member found the first
  time for the same Spark context and name.
- PySpark's ``lit`` and ``col`` return the column made the first time for the same context
  and value (``_invoke_function``, the one call both make): a Spark ``Column`` is an
  immutable expression, and one object can sit in any number of expressions.  Values are
  told apart by type and ``repr`` (``1`` from ``1.0`` and ``True``, ``0.0`` from ``-0.0``);
  other values, and numpy scalars, are made anew.

And, in the threads inside a block only:

- py4j's reflection lookups of a class, package or method (``sc._jvm.PythonUtils.toSeq``:
  two round trips each time) return what was found the first time; a static field is
  read anew.
- py4j sends a Python list (the arguments of ``coalesce``, ``select``, ``agg``...) as
  ``java.util.List.of(...)`` calls of up to 10 members instead of an ``ArrayList`` and
  one ``add`` per member.
- narwhals' ``rename`` of a Spark frame with a mapping of names to themselves (after
  every ``group_by(...).agg(...)``) returns the frame instead of a ``select`` of every
  column: one plan analysis fewer per aggregation.
- narwhals' division on Spark (``a / b``: ``CASE WHEN b != 0 THEN try_divide(a, b) WHEN
  b = 0 THEN CASE WHEN a = 0 THEN NaN WHEN a > 0 THEN inf WHEN a < 0 THEN -inf END END``)
  writes its numerator twice instead of four times: ``WHEN b = 0 THEN nanvl(a, inf) * inf``,
  the same values (``NaN / 0`` is ``inf`` in both: Spark orders NaN above every number).
  A nested quotient's text grew fourfold per level (``classwise_ece`` of 3 classes: 11,010
  characters); Spark's analysis, optimization and AQE re-planning follow the text.  A
  division by a number made with ``lit`` other than 0 is ``try_divide`` alone.

The originals are put back when the last (nested or concurrent) block ends.  The results
are the same (bit-identical, tested).
Nothing happens on a PySpark, py4j or narwhals without the functions named.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["spark_functions_kept"]

_LOCK = threading.Lock()
#: [depth of the active blocks, the original lookup, the members found: (id of the context, name) -> member,
#: the original ``_invoke_function``, the columns made: (id of the context, name, type, repr) -> column]
_STATE: list[Any] = [0, None, {}, None, {}]
#: the literal columns made inside: id of the column -> (the column, its value)
_LITERALS: dict[int, tuple[Any, Any]] = {}
#: the patches of the threads inside a block: (owner, attribute, original) while active
_THREAD_PATCHES: list[tuple[Any, str, Any]] = []
#: this thread's depth of blocks (``depth``)
_THREAD = threading.local()

#: the functions whose column is kept, and the types of the one argument they are kept for
_KEPT_CALLS = frozenset({"lit", "col"})
_KEPT_TYPES = frozenset({int, float, bool, str, type(None)})
#: the most members ``java.util.List.of`` takes as separate arguments
_LIST_OF_MAX = 10


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
            if name == "lit":
                _LITERALS[id(column)] = (column, args[0])
        return column

    invoke.__wrapped__ = original  # type: ignore[attr-defined]
    return invoke


def _inside() -> bool:
    """Whether this thread is inside a :func:`spark_functions_kept` block."""
    return getattr(_THREAD, "depth", 0) > 0


def _literal(column: Any) -> float | None:
    """The number of a ``lit`` column made inside (not a Boolean), else None."""
    entry = _LITERALS.get(id(column))
    if entry is None or entry[0] is not column or type(entry[1]) not in (int, float):
        return None
    return float(entry[1])


def _divide(original: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    """narwhals' ``true_divide(F, left, right)`` on Spark with the numerator written twice (see the module)."""

    def true_divide(F: Any, left: Any, right: Any) -> Any:
        quotient, nanvl = getattr(F, "try_divide", None), getattr(F, "nanvl", None)
        if not _inside() or quotient is None or nanvl is None:
            return original(F, left, right)
        divisor = _literal(right)
        if divisor is not None and divisor != 0:  # a number other than 0: never the zero branch
            return quotient(left, right)
        zero = F.lit(0)
        inf = F.lit(float("inf"))
        return F.when(right != zero, quotient(left, right)).when(right == zero, nanvl(left, inf) * inf)

    true_divide.__wrapped__ = original  # type: ignore[attr-defined]
    return true_divide


def _found_once(original: Callable[[Any, str], Any], kinds: tuple[type, ...]) -> Callable[[Any, str], Any]:
    """A py4j ``__getattr__`` that keeps what it found of one of ``kinds`` (per object and name) inside."""
    found: dict[tuple[int, str], tuple[Any, Any]] = {}

    def getattr_(self: Any, name: str) -> Any:
        if not _inside() or name.startswith("__"):
            return original(self, name)
        entry = found.get((id(self), name))
        if entry is not None and entry[0] is self:
            return entry[1]
        value = original(self, name)
        if isinstance(value, kinds):
            found[(id(self), name)] = (self, value)  # the object held: its id stays its own
        return value

    getattr_.__wrapped__ = original  # type: ignore[attr-defined]
    return getattr_


def _listed(original: Callable[[Any, Any, Any], Any], java_class: type) -> Callable[[Any, Any, Any], Any]:
    """py4j's ``ListConverter.convert`` sending members in ``java.util.List.of`` calls of up to 10 inside."""
    found: dict[int, tuple[Any, Any, Any]] = {}

    def convert(self: Any, members: Any, gateway_client: Any) -> Any:
        if not _inside():
            return original(self, members, gateway_client)
        members = list(members)
        if not members or any(m is None for m in members):  # List.of refuses null members
            return original(self, members, gateway_client)
        entry = found.get(id(gateway_client))
        if entry is None or entry[0] is not gateway_client:
            entry = found[id(gateway_client)] = (
                gateway_client,
                java_class("java.util.List", gateway_client).of,
                java_class("java.util.ArrayList", gateway_client),
            )
        _, of, array_list = entry
        chunks = [members[i : i + _LIST_OF_MAX] for i in range(0, len(members), _LIST_OF_MAX)]
        if len(chunks) == 1:
            return of(*chunks[0])
        joined = array_list(of(*chunks[0]))
        for chunk in chunks[1:]:
            joined.addAll(of(*chunk))
        return joined

    convert.__wrapped__ = original  # type: ignore[attr-defined]
    return convert


def _renamed(original: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """narwhals' ``rename`` of a Spark frame returning the frame itself for a mapping of names to themselves."""

    def rename(self: Any, mapping: Any) -> Any:
        if _inside() and all(old == new for old, new in mapping.items()):
            return self
        return original(self, mapping)

    rename.__wrapped__ = original  # type: ignore[attr-defined]
    return rename


def _thread_patches() -> list[tuple[Any, str, Callable[[Any], Any]]]:
    """(owner, attribute, wrapper of the original) of the patches for the threads inside a block."""
    patches: list[tuple[Any, str, Callable[[Any], Any]]] = []
    gateway: Any = sys.modules.get("py4j.java_gateway")
    collections: Any = sys.modules.get("py4j.java_collections")
    if gateway is not None and all(hasattr(gateway, c) for c in ("JVMView", "JavaClass", "JavaPackage", "JavaMember")):
        kinds = (gateway.JavaClass, gateway.JavaPackage, gateway.JavaMember)
        for owner in (gateway.JVMView, gateway.JavaClass, gateway.JavaPackage):
            patches.append((owner, "__getattr__", functools.partial(_found_once, kinds=kinds)))
        if collections is not None and hasattr(getattr(collections, "ListConverter", None), "convert"):
            patches.append(
                (collections.ListConverter, "convert", functools.partial(_listed, java_class=gateway.JavaClass))
            )
    frames: Any = sys.modules.get("narwhals._spark_like.dataframe")
    if "rename" in vars(getattr(frames, "SparkLikeLazyFrame", object)):
        patches.append((frames.SparkLikeLazyFrame, "rename", _renamed))
    narwhals_spark: Any = sys.modules.get("narwhals._spark_like.expr")
    if narwhals_spark is not None and callable(getattr(narwhals_spark, "true_divide", None)):
        patches.append((narwhals_spark, "true_divide", _divide))
    return patches


def _install() -> None:
    builtin: Any = sys.modules.get("pyspark.sql.functions.builtin")
    _STATE[1] = builtin._get_jvm_function
    _STATE[2] = {}
    builtin._get_jvm_function = _kept(_STATE[1], _STATE[2])
    if callable(getattr(builtin, "_invoke_function", None)):
        _STATE[3], _STATE[4] = builtin._invoke_function, {}
        builtin._invoke_function = _made_once(_STATE[3], _STATE[4])
    for owner, attribute, wrap in _thread_patches():
        original = vars(owner).get(attribute)
        if original is None:  # inherited, or gone in this version
            continue
        _THREAD_PATCHES.append((owner, attribute, original))
        setattr(owner, attribute, wrap(original))


def _restore() -> None:
    builtin: Any = sys.modules.get("pyspark.sql.functions.builtin")
    builtin._get_jvm_function = _STATE[1]
    if _STATE[3] is not None:
        builtin._invoke_function = _STATE[3]
    _STATE[1:] = [None, {}, None, {}]
    _LITERALS.clear()
    while _THREAD_PATCHES:
        owner, attribute, original = _THREAD_PATCHES.pop()
        setattr(owner, attribute, original)


@contextlib.contextmanager
def spark_functions_kept() -> Iterator[None]:
    """Inside: classic PySpark builds with fewer py4j round trips (see the module's text)."""
    builtin: Any = sys.modules.get("pyspark.sql.functions.builtin")
    if builtin is None or not callable(getattr(builtin, "_get_jvm_function", None)):
        yield
        return
    with _LOCK:
        if _STATE[0] == 0:
            _install()
        _STATE[0] += 1
    _THREAD.depth = getattr(_THREAD, "depth", 0) + 1
    try:
        yield
    finally:
        _THREAD.depth -= 1
        with _LOCK:
            _STATE[0] -= 1
            if _STATE[0] == 0:
                _restore()
