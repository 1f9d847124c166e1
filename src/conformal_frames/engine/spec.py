"""A metric's definition as a value: :class:`Spec`, what its ``build`` registered, frozen.

:meth:`Query.record <conformal_frames.engine.query.Query.record>` builds a
metric on a query and returns its ``Spec``; :meth:`Metric.definition
<conformal_frames.engine.metric.Metric.definition>` does so for the metric alone.
Consumers read the facts from it instead of building a probe:

- the inputs and their dtypes (:attr:`Spec.inputs`);
- the named statistics and their reduction (:attr:`Spec.stats`: sum, min,
  max) and the ordered cells (:attr:`Spec.cells`), under *declared names*
  that summaries persist (:attr:`Stat.state`);
- whether the statistics merge, or why not (:attr:`Spec.why_not`), and
  whether the metric is one pass over the rows (:attr:`Spec.single_pass`);
- the output columns (:attr:`Spec.outputs`).

A statistic's declared name is its structural key written out, with the row
columns it reads replaced by their own keys: ``("covered", "y", "lo", "hi")``
is ``covered[y,lo,hi]``, and the summary column of its sum is
``cf_sum__covered[y,lo,hi]``.  The names are part of the summary format
(schema version 2): ``tests/test_summary_format.py`` pins every metric's.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from conformal_frames._roles import ExprColumn, escaped

__all__ = ["PHASES", "CellTable", "Reduction", "Spec", "Stat", "declared_name"]

#: the phases beyond the main aggregation a metric may need, in words (:attr:`Spec.phases`)
PHASES = {
    "table": "a second aggregation level",
    "window": "a window over the rows of a group",
    "finalize": "a multi-step finalize",
    "numpy": "a numpy step",
    "group_step": "a per-group numpy step",
}

Reduction = Literal["sum", "min", "max"]

#: a name is a valid column name on every backend (Spark reads a dot as a struct field):
#: letters, digits and ``_`` kept, every other character %-escaped
_escaped = escaped


def _atom(value: Any) -> str:
    if isinstance(value, ExprColumn):  # an expression role: its text (see conformal_frames._roles)
        return value.declared
    if isinstance(value, str):
        return _escaped(value)
    if isinstance(value, bool) or value is None:
        return f"~{value}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value).replace(".", "p") if math.isfinite(value) else f"~{value}"
    return "~" + _escaped(repr(value))


def declared_name(key: Hashable) -> str:
    """A row's structural key written out as a column-safe name: ``covered[y,lo,hi]``.

    A row key ``(word, *arguments)`` is ``word[arguments]``; an argument that
    is another row (``("row", key)`` in a canonical key) is that row's name,
    another tuple ``(items)``.  Column names keep letters, digits and ``_``
    (anything else is ``%XX``), a float's dot is ``p`` (``0.9`` is ``0p9``),
    ``None``/``True``/``False`` are ``~None``/``~True``/``~False``, a role
    given as an expression is ``~nw_`` (narwhals) or ``~pl_`` (polars) and its
    escaped text: two keys never share a name.

    >>> declared_name(("covered", "y", "lo", "hi"))
    'covered[y,lo,hi]'
    >>> declared_name(("winkler", "y", "lo", "hi", 0.9))
    'winkler[y,lo,hi,0p9]'
    >>> declared_name(("set_size", (("m 0", "m1"), (0, 1))))
    'set_size[((m%200,m1),(0,1))]'
    """
    if isinstance(key, tuple) and key and isinstance(key[0], str):
        return f"{_escaped(key[0])}[{','.join(_argument(k) for k in key[1:])}]"
    return _argument(key)


def _argument(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "row":
        return declared_name(value[1])
    if isinstance(value, tuple):
        return f"({','.join(_argument(k) for k in value)})"
    return _atom(value)


@dataclass(frozen=True)
class Stat:
    """One named statistic: the reduction ``how`` of a row column over a group."""

    how: Reduction
    #: the structural key of the row column it reduces (rows it reads replaced by their keys)
    key: Hashable
    #: the aggregated column of the query that recorded it (internal to that query)
    column: str

    @property
    def name(self) -> str:
        """The declared name: the key written out (:func:`declared_name`)."""
        return declared_name(self.key)

    @property
    def state(self) -> str:
        """The summary column: ``cf_<how>__<name>``."""
        return f"cf_{self.how}__{self.name}"


@dataclass(frozen=True)
class CellTable:
    """The ordered cells of a sort-based table: per (group, distinct ``order``) the sums of rows."""

    #: structural key of the order row (a score)
    order_key: Hashable
    #: the order row of the query that recorded it
    order: str
    #: (structural key, row column) of each summed row
    sums: tuple[tuple[Hashable, str], ...]

    @property
    def id(self) -> str:
        """The cell set's declared name (a summary's ``cf_cell``)."""
        return declared_name(self.order_key)

    @property
    def states(self) -> dict[str, str]:
        """Summary column -> row column of each summed row."""
        return {f"cf_sum__{declared_name(key)}": row for key, row in self.sums}


@dataclass(frozen=True)
class Spec:
    """What one metric is, as a value (see the module docstring)."""

    #: the metric's output name
    metric: str
    #: the wide output columns, in order
    outputs: tuple[str, ...]
    #: (input column, narwhals dtype) of every column the metric reads, sorted by name
    inputs: tuple[tuple[str, Any], ...]
    #: the statistics of the main aggregation
    stats: tuple[Stat, ...]
    #: the ordered cells of its sort-based tables (mergeable: summed again)
    cells: tuple[CellTable, ...]
    #: why the statistics do not merge exactly; ``None`` when they do
    why_not: str | None
    #: one aggregation over the rows: no table, no window, no per-group step
    single_pass: bool
    #: the phases beyond the main aggregation and finalize expressions (keys of :data:`PHASES`)
    phases: frozenset[str] = frozenset()

    @property
    def mergeable(self) -> bool:
        """Whether summaries of the metric merge exactly (:func:`~conformal_frames.summarize`)."""
        return self.why_not is None

    @property
    def input_dtypes(self) -> Mapping[str, Any]:
        """Input column -> dtype."""
        return dict(self.inputs)

    @property
    def states(self) -> tuple[str, ...]:
        """Every summary column of the metric's state: statistics, then cell sums."""
        cells = [s for c in self.cells for s in c.states]
        return tuple(dict.fromkeys([*(s.state for s in self.stats), *cells]))
