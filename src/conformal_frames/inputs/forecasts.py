"""Forecast inputs: quantile and interval forecasts, wide or long, validated.

The forecast families (:mod:`~conformal_frames.metrics.quantiles`,
:mod:`~conformal_frames.metrics.distributions`) read their inputs through this
module, so that every metric accepts the same forms with the same checks and
messages.  Two steps, as everywhere in the library:

1. **parameters** (when the metric object is built, no frame yet):
   :func:`check_quantiles`, :func:`check_intervals` and
   :func:`check_level_column` normalise what the user wrote and raise
   ``TypeError`` (wrong type) or ``ValueError`` (wrong value) naming the
   parameter.  Use them as dataclass field checks::

       quantiles: Quantiles = checked(check_quantiles)

2. **rows** (in :meth:`Metric.build`, on the :class:`~conformal_frames.engine.Query`):
   :func:`quantile_rows`, :func:`interval_rows` and :func:`~conformal_frames.inputs.levels.level_column_row`
   register the validated input columns as Float64 row columns and the
   bad-input checks, which follow the evaluation's ``invalid=`` policy (an
   error naming the columns and the row count on eager input by default).

Forms
-----
Wide quantiles
    ``quantiles={0.05: "q05", 0.5: "q50", 0.95: "q95"}``: a mapping from
    quantile level (a number strictly inside (0, 1)) to the column holding
    that quantile.  Levels are distinct, columns are distinct; the normalised
    form is a tuple of ``(level, column)`` pairs sorted by level.  Rows where
    the quantiles are not non-decreasing in the level (crossing quantiles,
    e.g. ``q05 > q50``) follow the metric's ``crossing=`` (read here, in
    :func:`quantile_rows`): ``"score"`` (default) scores them as given and
    counts them (``<name>_n_crossing``, and a warning on eager input);
    ``"sort"`` rearranges each row's quantiles in increasing order first
    (Chernozhukov, Fernandez-Val and Galichon 2010) and counts them too;
    ``"invalid"`` makes them invalid rows, counted per adjacent pair of
    levels, under the evaluation's ``invalid=`` policy.
Central intervals
    ``intervals={0.8: ("lo80", "hi80"), 0.9: ("lo90", "hi90")}``: a mapping
    from confidence level (in (0, 1)) to the ``(lo, hi)`` columns of the
    central interval at that level.  Normalised to ``(level, lo, hi)``
    triples sorted by level.  The interval at level ``c`` is the pair of
    quantiles at levels ``(1 - c) / 2`` and ``(1 + c) / 2``
    (:func:`intervals_as_quantiles`), so rows with ``lo > hi`` and rows
    where the intervals are not nested (``lo90 <= lo80 <= hi80 <= hi90``
    fails) are crossing quantiles and follow ``crossing=`` like any
    quantiles (:func:`interval_set_rows`; ``"invalid"``: counted per level
    and per bound).  The single-interval metrics (``coverage``, ``width``,
    ``winkler``: one ``lo``/``hi`` pair, no ``crossing=``) make ``lo > hi``
    an invalid row.
Long quantiles
    ``quantiles="q", quantile_level="tau"``: one row per forecast and level,
    the quantile in column ``q`` and its level in column ``tau`` (the word of
    scoringutils 2).  Level values outside (0, 1) are invalid rows.  The
    per-level metrics group by the level column (it must be a ``by=`` key
    where a metric needs one level per group; see :func:`~conformal_frames.inputs.levels.level_column_row`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

import narwhals.stable.v2 as nw

from conformal_frames._roles import as_role
from conformal_frames._validate import check_choice, check_columns, fail, is_number
from conformal_frames.engine import Metric, Query, TableRef, indicator, join_keys, over, total
from conformal_frames.errors import ListColumnError
from conformal_frames.inputs.levels import level_column_row
from conformal_frames.numerics.stats import max_of, min_of, ratio

__all__ = [
    "CROSSING",
    "Crossing",
    "CrossingOutputs",
    "Ensemble",
    "Intervals",
    "QuantileLevel",
    "Quantiles",
    "check_crossing",
    "check_horizon",
    "check_intervals",
    "check_level_column",
    "check_long_form",
    "check_member_weights",
    "check_quantiles",
    "check_samples",
    "crossing_interval_checks",
    "crossing_outputs",
    "crossing_row",
    "ensemble",
    "ensemble_rows",
    "gaussian_std",
    "gaussian_z",
    "horizon_row",
    "interval_rows",
    "interval_set_rows",
    "intervals_as_quantiles",
    "is_close_level",
    "level_tau",
    "list_column",
    "n_crossing",
    "nesting_checks",
    "one_forecast",
    "quantile_levels",
    "quantile_rows",
    "sorted_rows",
    "tail_level",
    "value_row",
]

#: normalised wide quantiles: ``(level, column)`` pairs sorted by level
Quantiles = tuple[tuple[float, str], ...]
#: normalised intervals: ``(confidence_level, lo, hi)`` triples sorted by level
Intervals = tuple[tuple[float, str, str], ...]
#: what a metric does with crossing quantiles (see :func:`quantile_rows`)
Crossing = Literal["score", "sort", "invalid"]
CROSSING: tuple[str, ...] = ("score", "sort", "invalid")

QUANTILES = "a mapping {level: column} with levels strictly between 0 and 1, e.g. {0.1: 'q10', 0.9: 'q90'}"
QUANTILES_OR_COLUMN = QUANTILES + ", or the name of a quantile column with quantile_level= (long form)"
INTERVALS = (
    "a mapping {confidence_level: (lo, hi)} with levels strictly between 0 and 1, "
    "e.g. {0.8: ('lo80', 'hi80'), 0.9: ('lo90', 'hi90')}"
)
LONG_UNSUPPORTED = (
    ", one row per forecast and level, is read by pinball_loss and quantile_coverage only; this metric "
    "needs all quantiles of a forecast on one row: pivot to one column per level"
)
LONG_INTERVALS = (
    "one (lo, hi) pair: for intervals in long form (one row per forecast and level, the level in a column) "
    "use coverage, width and winkler with confidence_level='<level column>' and by=[..., '<level column>']"
)


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------
def _level(value: Any, name: str, expected: str, mapping: Any) -> float:
    """A mapping key: a number strictly inside (0, 1)."""
    if not is_number(value):
        fail(TypeError, name, expected + f" (level {value!r} is not a number)", mapping)
    level = float(value)
    if not 0.0 < level < 1.0:
        fail(ValueError, name, expected + f" (level {value!r} is outside (0, 1))", mapping)
    return level


def _distinct(values: list[Any], name: str, expected: str, what: str, mapping: Any) -> None:
    repeated = sorted({v for v in values if values.count(v) > 1}, key=str)
    if repeated:
        fail(ValueError, name, expected + f" ({what} {', '.join(map(repr, repeated))} repeated)", mapping)


@overload
def check_quantiles(value: Any, name: str = ..., *, long: Literal[False] = ...) -> Quantiles: ...
@overload
def check_quantiles(value: Any, name: str = ..., *, long: bool) -> Quantiles | str: ...
def check_quantiles(value: Any, name: str = "quantiles", *, long: bool = False) -> Quantiles | str:
    """Quantile forecasts: ``{level: column}``, normalised to sorted pairs.

    With ``long=True`` a string (the quantile column of the long form) is
    accepted as is.  A non-mapping, a level that is not a number or a column
    that is not a string is a ``TypeError``; an empty mapping, a level outside
    (0, 1), two equal levels or a column used twice is a ``ValueError``.

    >>> check_quantiles({0.9: "q90", 0.1: "q10"})
    ((0.1, 'q10'), (0.9, 'q90'))
    """
    expected = QUANTILES_OR_COLUMN if long else QUANTILES
    if long and isinstance(value, str):
        return value
    if isinstance(value, str):
        fail(TypeError, name, expected + f" ({value!r} names one column: the long form{LONG_UNSUPPORTED})", value)
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        value = dict(value)  # the normalised form itself (dataclasses.replace)
    if not isinstance(value, Mapping):
        fail(TypeError, name, expected, value)
    pairs: list[tuple[float, str]] = []
    for level, column in value.items():
        lv = _level(level, name, expected, value)
        column = as_role(column)
        if not isinstance(column, str):
            fail(TypeError, name, expected + f" (column {column!r} is not a string)", value)
        pairs.append((lv, column))
    if not pairs:
        fail(ValueError, name, expected + " (at least one level)", value)
    _distinct([p[0] for p in pairs], name, expected, "level", value)
    _distinct([p[1] for p in pairs], name, expected, "column", value)
    return tuple(sorted(pairs))


def check_intervals(value: Any, name: str = "intervals") -> Intervals:
    """Central intervals: ``{confidence_level: (lo, hi)}``, normalised to sorted triples.

    Type errors (not a mapping, a level that is not a number, a bound that is
    not a string, not a pair) raise ``TypeError``; an empty mapping, a level
    outside (0, 1), two equal levels, ``lo`` equal to ``hi`` or a column used
    twice raise ``ValueError``.

    >>> check_intervals({0.9: ("lo90", "hi90"), 0.5: ["lo50", "hi50"]})
    ((0.5, 'lo50', 'hi50'), (0.9, 'lo90', 'hi90'))
    """
    if isinstance(value, tuple) and all(isinstance(t, tuple) and len(t) == 3 for t in value):
        value = {t[0]: (t[1], t[2]) for t in value}  # the normalised form itself
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(c, str) for c in value):
        fail(TypeError, name, INTERVALS + f" ({LONG_INTERVALS})", value)
    if not isinstance(value, Mapping):
        fail(TypeError, name, INTERVALS, value)
    triples: list[tuple[float, str, str]] = []
    for level, pair in value.items():
        lv = _level(level, name, INTERVALS, value)
        if isinstance(pair, (str, bytes)) or not isinstance(pair, (tuple, list)) or len(pair) != 2:
            fail(TypeError, name, INTERVALS + f" (the value of level {level!r} is not a (lo, hi) pair)", value)
        lo, hi = as_role(pair[0]), as_role(pair[1])
        if not isinstance(lo, str) or not isinstance(hi, str):
            fail(TypeError, name, INTERVALS + f" (the bounds of level {level!r} are not column names)", value)
        if lo == hi:
            fail(ValueError, name, INTERVALS + f" (level {level!r} has the same column {lo!r} as lo and hi)", value)
        triples.append((lv, lo, hi))
    if not triples:
        fail(ValueError, name, INTERVALS + " (at least one level)", value)
    _distinct([t[0] for t in triples], name, INTERVALS, "level", value)
    _distinct([c for t in triples for c in t[1:]], name, INTERVALS, "column", value)
    return tuple(sorted(triples))


def check_level_column(value: Any, name: str = "quantile_level") -> str | None:
    """The level column of the long form: ``None`` or a column name."""
    if value is not None and not isinstance(value, str):
        fail(TypeError, name, "the name of a column of quantile levels (a string) or None", value)
    return value


def check_long_form(quantiles: Quantiles | str, quantile_level: str | None, metric: str) -> None:
    """``quantiles`` a column name exactly when ``quantile_level`` is given."""
    if isinstance(quantiles, str) and quantile_level is None:
        msg = (
            f"{metric}: quantiles={quantiles!r} names one column (long form); pass the column of "
            "levels too, e.g. quantile_level='quantile_level', or a mapping {level: column} (wide form)"
        )
        raise ValueError(msg)
    if not isinstance(quantiles, str) and quantile_level is not None:
        msg = (
            f"{metric}: quantile_level={quantile_level!r} is for the long form (quantiles= a column name); "
            "with a mapping {level: column} the levels are the mapping's keys"
        )
        raise ValueError(msg)


def intervals_as_quantiles(intervals: Intervals) -> Quantiles:
    """The quantile levels ``(1 - c) / 2`` and ``(1 + c) / 2`` of each central interval.

    >>> intervals_as_quantiles(((0.8, "lo", "hi"),))
    ((0.1, 'lo'), (0.9, 'hi'))
    """
    pairs = []
    for level, lo, hi in intervals:
        tail = tail_level(level)
        pairs += [(tail, lo), (1.0 - tail, hi)]
    return tuple(sorted(pairs))


def tail_level(level: float) -> float:
    """``(1 - level) / 2`` as the decimal the user meant: 0.8 -> 0.1 (not 0.09999999999999998).

    >>> tail_level(0.8)
    0.1
    """
    from decimal import Decimal

    return float((Decimal(1) - Decimal(repr(float(level)))) / 2)


# ---------------------------------------------------------------------------
# rows (inside Metric.build)
# ---------------------------------------------------------------------------
def check_crossing(value: Any, name: str = "crossing") -> str:
    """``crossing=``: ``"score"``, ``"sort"`` or ``"invalid"`` (see :func:`quantile_rows`)."""
    return check_choice(value, name, CROSSING)


def quantile_rows(q: Query, quantiles: Quantiles, crossing: str = "invalid") -> list[tuple[float, str]]:
    """Register the quantile columns as Float64 rows: ``[(level, row name), ...]`` by level.

    Each column is checked as a number (missing / NaN / infinite values are
    invalid rows).  Crossing quantiles (a row where ``q_a > q_b`` for levels
    ``a < b``) follow ``crossing``, the one place the library reads it:

    - ``"score"``: the rows are the columns as given (the pinball loss, the
      WIS in its quantile form and the quantile coverage are defined for any
      quantiles); count the crossing rows with :func:`n_crossing`;
    - ``"sort"``: the rows are each row's quantiles sorted in increasing
      order (the rearrangement of Chernozhukov, Fernandez-Val and Galichon,
      2010: the ``j``-th row holds the ``j``-th smallest value), which never
      increases the pinball loss; lazy, two layers of row expressions
      (:func:`sorted_rows`);
    - ``"invalid"``: each adjacent pair of levels ``a < b`` adds the check
      "quantile columns cross: 'qa' (level a) is greater than 'qb' (level
      b)", so crossing rows are counted per pair and follow the ``invalid=``
      policy.  Rows with equal quantiles at two levels are valid.
    """
    rows = [(level, q.row(("value", column), q.number(column))) for level, column in quantiles]
    if crossing == "invalid":
        for (a, ca), (b, cb) in itertools.pairwise(quantiles):
            q.check(
                f"quantile columns cross: {ca!r} (level {a:g}) is greater than {cb!r} (level {b:g})",
                q.number(ca) > q.number(cb),
            )
    elif crossing == "sort":
        return list(zip([level for level, _ in quantiles], sorted_rows(q, [r for _, r in rows])))
    return rows


def sorted_rows(q: Query, rows: list[str]) -> list[str]:
    """Row columns holding the values of ``rows`` sorted in increasing order, row by row.

    ``c_a = #{b: x_b <= x_a}`` (ties included) is ``x_a``'s rank from above;
    the ``j``-th smallest value is ``min{x_a : c_a >= j}``.  Two layers of
    ``k`` row expressions of ``k`` terms each, comparisons and minima only:
    lazy on every engine, ``O(k^2)`` per row for ``k`` levels (small).
    """
    k = len(rows)
    if k < 2:
        return list(rows)
    key = tuple(rows)
    top = q.row(("sorted_max", key), max_of(*[nw.col(r) for r in rows]), inputs=rows)
    ranks = [
        q.row(("rank_le", key, a), total(indicator(nw.col(b) <= nw.col(a)) for b in rows), inputs=rows) for a in rows
    ]
    out = []
    for j in range(1, k + 1):
        if j == k:
            out.append(top)
            continue
        parts = [nw.when(nw.col(c) >= float(j)).then(nw.col(a)).otherwise(nw.col(top)) for a, c in zip(rows, ranks)]
        out.append(q.row(("sorted", key, j), min_of(*parts), inputs=[*rows, *ranks, top]))
    return out


def crossing_row(q: Query, quantiles: Quantiles) -> str:
    """Row column: 1.0 where some quantile exceeds the quantile of a higher level (else 0.0)."""
    rows = [q.row(("value", column), q.number(column)) for _, column in quantiles]
    if len(rows) < 2:
        return q.row(("no_crossing",), nw.lit(0.0))
    parts = [indicator(nw.col(a) > nw.col(b)) for a, b in itertools.pairwise(rows)]
    return q.row(("crossing", tuple(rows)), max_of(*parts), inputs=rows)


def n_crossing(q: Query, quantiles: Quantiles, counts: str | None = None) -> nw.Expr:
    """The group's number of rows with crossing quantiles (``<name>_n_crossing``), counted like ``n``."""
    return q.weighting(None, counts=counts).sum(crossing_row(q, quantiles))


def check_long_crossing(quantiles: object, crossing: str, metric: str) -> None:
    """Refuse ``crossing="sort"`` with long-form quantiles (one level per row: nothing to rearrange)."""
    if isinstance(quantiles, str) and crossing == "sort":
        msg = (
            f"{metric}: crossing='sort' needs all quantiles of a forecast on one row (wide form, "
            "quantiles={level: column}); in the long form each row holds one level and is scored as given"
        )
        raise ValueError(msg)


class CrossingOutputs:
    """Outputs of a metric with ``crossing=``: ``<name>_n_crossing`` (Int64) and its warning."""

    crossing: str
    output_name: str

    def counts_crossing(self) -> bool:
        """Whether the metric outputs ``n_crossing`` (wide quantiles under "score" or "sort")."""
        return self.crossing != "invalid" and not isinstance(getattr(self, "quantiles", None), str)

    def rearranges(self) -> bool:
        """Whether crossing rows are rearranged (``"sort"``) rather than scored as given."""
        return self.crossing == "sort"

    def notices(self) -> dict[str, str]:
        if not self.counts_crossing():
            return {}
        if self.rearranges():
            done = "rearranged in increasing order first"
            other = "" if self.crossing == "score" else "pass crossing='score' to score them as given, or "
        else:
            done, other = "scored as given", "pass crossing='sort' to rearrange them, or "
        msg = (
            f"{self.output_name}: crossing quantiles in {{rows}}, {done} (crossing={self.crossing!r}); "
            f"{other}crossing='invalid' to make them invalid rows"
        )
        return {f"{self.output_name}_n_crossing": msg}

    def output_dtypes(self, built: Mapping[str, nw.Expr | None]) -> dict[str, Any]:
        out = Metric.output_dtypes(self, built)  # type: ignore[arg-type]
        if "n_crossing" in built:
            out[f"{self.output_name}_n_crossing"] = nw.Int64
        return out


def crossing_outputs(
    metric: CrossingOutputs, q: Query, quantiles: Quantiles, counts: str | None
) -> dict[str, nw.Expr | None]:
    """``{"n_crossing": count}`` when the metric counts crossing rows, else ``{}``."""
    return {"n_crossing": n_crossing(q, quantiles, counts)} if metric.counts_crossing() else {}


def interval_set_rows(q: Query, intervals: Intervals, crossing: str = "invalid") -> list[tuple[float, str, str]]:
    """Each interval's bounds as Float64 rows: ``[(level, lo row, hi row), ...]``, under ``crossing``.

    The bounds are the quantiles ``(1 - c) / 2`` and ``(1 + c) / 2`` of the
    interval at level ``c`` (:func:`intervals_as_quantiles`); an interval
    with ``lo > hi`` and intervals that are not nested are those quantiles
    crossing, one rule for both:

    - ``"invalid"``: ``lo > hi`` is an invalid row (the coverage family's
      message, checked per level) and so is a nesting that fails
      (:func:`nesting_checks`), under the evaluation's ``invalid=`` policy;
    - ``"score"``: the bounds as given (an interval with ``lo > hi`` covers
      nothing and has a negative width; its Winkler score is the interval
      score, defined for any bounds); the metric counts the rows
      (:func:`n_crossing`);
    - ``"sort"``: the set's quantiles sorted row by row (:func:`quantile_rows`)
      and each interval read back from them: the lowest level gets the two
      middle values, so every interval has ``lo <= hi`` and they are nested.
    """
    if crossing == "invalid":
        crossing_interval_checks(q, intervals)
    quantile_set = intervals_as_quantiles(intervals)
    rows = quantile_rows(q, quantile_set, "sort" if crossing == "sort" else "score")

    def row_at(level: float) -> str:
        return next(r for lv, r in rows if is_close_level(lv, level))

    # sorted, the rows are read back by level: the lowest level's bounds are the inner pair
    return [(level, row_at(tail_level(level)), row_at(1.0 - tail_level(level))) for level, _, _ in intervals]


def crossing_interval_checks(q: Query, intervals: Intervals) -> None:
    """``crossing="invalid"`` on intervals: ``lo > hi`` per level and the nesting (:func:`nesting_checks`) are invalid rows."""
    for level, lo, hi in intervals:
        lo_e, hi_e = q.number(lo), q.number(hi)
        swapped = f"are lo and hi swapped? (intervals {level:g}: lo={lo!r}, hi={hi!r})"
        q.check(f"column {lo!r} is greater than column {hi!r}", lo_e > hi_e, hint=swapped)
    nesting_checks(q, intervals)


def interval_rows(q: Query, intervals: Intervals) -> list[tuple[float, str, str]]:
    """Register each interval's bounds as Float64 rows: ``[(level, lo row, hi row), ...]``.

    Bounds are checked as numbers; rows with ``lo > hi`` are invalid, with the
    message of the interval metrics ("column 'lo80' is greater than column
    'hi80' in 3 rows"), counted per level; intervals that are not nested are
    invalid rows too (:func:`nesting_checks`).
    """
    return interval_set_rows(q, intervals, "invalid")


def nesting_checks(q: Query, intervals: Intervals) -> None:
    """Intervals of increasing level must be nested: ``lo_b <= lo_a <= hi_a <= hi_b`` for ``a < b``.

    Each adjacent pair of levels adds two checks ("intervals not nested:
    'lo90' (level 0.9) is greater than 'lo80' (level 0.8)"), so rows that
    violate the nesting are counted per bound and follow the ``invalid=``
    policy, like crossing quantiles (the quantiles of nested intervals never
    cross).
    """
    for (a, lo_a, hi_a), (b, lo_b, hi_b) in itertools.pairwise(intervals):
        q.check(
            f"intervals not nested: {lo_b!r} (level {b:g}) is greater than {lo_a!r} (level {a:g})",
            q.number(lo_b) > q.number(lo_a),
        )
        q.check(
            f"intervals not nested: {hi_a!r} (level {a:g}) is greater than {hi_b!r} (level {b:g})",
            q.number(hi_a) > q.number(hi_b),
        )


def check_horizon(value: Any, name: str = "horizon") -> int | str:
    """``horizon=``: a positive integer, or the name of a column holding it (one value per group)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            ok = isinstance(value, np.integer)
        except ImportError:  # pragma: no cover
            ok = False
        if not ok:
            fail(TypeError, name, "a positive integer or the name of a column of positive integers", value)
    if int(value) < 1:
        fail(ValueError, name, "a positive integer or the name of a column of positive integers", value)
    return int(value)


def horizon_row(q: Query, column: str) -> str:
    """The ``horizon=`` column as a Float64 row: positive integers, one value per group.

    Missing, non-finite, non-integer and values below 1 are invalid rows;
    so are the rows of a group where the horizon is not constant (e.g. a
    ``by=`` that does not include the horizon column).
    """
    bad = f"column {column!r} (horizon=) has values that are not integers >= 1"
    if column in q.keys:  # by=[..., horizon]: the group's own key (a null key: a group too)
        if not q.schema[column].is_numeric():
            msg = f"column {column!r} (horizon=) must hold positive integers, found dtype {q.schema[column]}"
            raise TypeError(msg)
        key = nw.col(column).cast(nw.Float64)
        q.check(bad, ~key.is_finite() | (key < 1.0) | (key != key.floor()))
        return q.row(("horizon_key", column), key)
    h = q.number(column)
    q.check(bad, (h < 1.0) | (h != h.floor()))
    spread = over(h.max(), q.keys) - over(h.min(), q.keys)  # the keys' own names: checks read the input frame
    q.check(
        f"column {column!r} (horizon=) is not constant within a group, in {{rows}}; group by it "
        f"(by=[..., {column!r}]) or pass one horizon as an integer",
        spread != 0.0,
    )
    return q.row(("value", column), h)


def value_row(q: Query, y: str) -> str:
    """The observed value ``y`` as a Float64 row (the key every family shares)."""
    return q.row(("value", y), q.number(y))


def is_close_level(a: float, b: float) -> bool:
    """Two levels equal up to float rounding (e.g. ``1 - 0.9`` and ``0.1``)."""
    return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-12)


# ---------------------------------------------------------------------------
# parameter checks
# ---------------------------------------------------------------------------
def check_samples(value: Any, name: str = "samples") -> str | tuple[str, ...]:
    """An ensemble: a list column's name or a list of member column names."""
    value = as_role(value)
    if isinstance(value, str):
        return value
    expected = "the name of a list column or a list of member column names"
    if isinstance(value, (list, tuple)):
        value = [as_role(v) for v in value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        fail(TypeError, name, expected, value)
    return check_columns(value, name)


def one_forecast(mean: str | None, std: str | None, samples: Any, quantiles: Any = None) -> None:
    """Exactly one forecast kind: ``mean=`` with ``std=``, ``samples=`` or ``quantiles=``."""
    gaussian = mean is not None or std is not None
    if gaussian and (mean is None or std is None):
        missing = "std=" if std is None else "mean="
        msg = f"a Gaussian forecast needs both mean= and std= columns; {missing} is missing"
        raise ValueError(msg)
    kinds = int(gaussian) + int(samples is not None) + int(quantiles is not None)
    if kinds > 1:
        msg = "give one forecast: mean= and std= (Gaussian), samples= (ensemble) or quantiles=, not several"
        raise ValueError(msg)
    if kinds == 0:
        msg = "give a forecast: mean= and std= columns (Gaussian), samples= (an ensemble) or quantiles={level: column}"
        raise ValueError(msg)


# ---------------------------------------------------------------------------
# Gaussian forecasts: row expressions
# ---------------------------------------------------------------------------
def gaussian_std(q: Query, std: str) -> str:
    """Row column ``std`` of a Gaussian forecast; missing, non-finite or ``std <= 0`` values are invalid."""
    sd = q.number(std)
    q.check(f"std column {std!r} has zero or negative values (std must be > 0)", sd <= 0.0, example=sd)
    return q.row(("std", std), sd)


def gaussian_z(q: Query, y: str, mean: str, std: str) -> tuple[str, str]:
    """Row columns ``z = (y - mean) / std`` and ``std``; ``std <= 0`` is invalid."""
    sd_row, sd = gaussian_std(q, std), q.number(std)
    z = q.row(("gauss_z", y, mean, std), ratio(q.number(y) - q.number(mean), nw.when(sd > 0.0).then(sd)))
    return z, sd_row


# ---------------------------------------------------------------------------
# ensembles: one row per member, sorted per forecast
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ensemble:
    """Row columns of an ensemble forecast: ``y`` and the members."""

    y: str
    #: a list row column, or one row column per member
    members: str | tuple[str, ...]
    #: the row column of the forecast's weight (``weights=``), carried to each forecast
    weight: str | None = None
    #: the members' weights (``member_weights=``): a list row column, or one row column per member
    member_weights: str | tuple[str, ...] | None = None

    @property
    def width(self) -> int | None:
        """Number of members when they are columns (``None`` for a list column)."""
        return None if isinstance(self.members, str) else len(self.members)


def list_column(q: Query, name: str) -> nw.Expr:
    """The column ``name`` of ``q``, a polars ``Array`` column cast to a ``List`` (read with ``list.*``)."""
    dtype = q.schema.get(name)
    return q.column(name).cast(nw.List(dtype.inner)) if isinstance(dtype, nw.Array) else q.column(name)


def _list_members(q: Query, name: str) -> str:
    col = list_column(q, name)
    dtype = q.schema[name]
    if isinstance(dtype, (nw.Array, nw.List)):
        inner = dtype.inner
    else:
        msg = (
            f"samples column {name!r} must be a list column of numbers (polars List/Array, Arrow list, "
            f"or a pandas column of lists/arrays), found dtype {dtype}; "
            "alternatively pass the member columns as a list, samples=['x1', 'x2', ...]"
        )
        raise ListColumnError(
            msg, column=name, inner=nw.Float64()
        )  # a TypeError; cfx's recorder learns the dtype from it
    if not (inner.is_numeric() or inner == nw.Unknown):
        msg = f"samples column {name!r} must hold numbers, found {inner} members"
        raise TypeError(msg)
    q.check(f"samples column {name!r} has missing values", col.is_null())
    q.check(f"samples column {name!r} has empty ensembles", col.list.len() == 0)
    q.check(f"samples column {name!r} has missing members", col.list.contains(None))
    q.check(f"samples column {name!r} has NaN or infinite members", ~col.list.mean().is_finite())
    return q.row(("samples_list", name), col)


def check_member_weights(
    samples: Any, member_weights: Any, name: str = "member_weights"
) -> str | tuple[str, ...] | None:
    """``member_weights=``: like ``samples`` (a list column, or one column per member), aligned with it."""
    if member_weights is None:
        return None
    if samples is None:
        msg = f"{name}= weighs the members of an ensemble: it needs samples="
        raise ValueError(msg)
    value = check_samples(member_weights, name)
    if isinstance(samples, str) != isinstance(value, str):
        msg = (
            f"{name}= must have the form of samples=: a list column with a list column, "
            f"a list of member columns with a list of as many weight columns, got samples={samples!r}, {name}={value!r}"
        )
        raise TypeError(msg)
    if not isinstance(value, str) and len(value) != len(samples):
        msg = f"{name}= must give one weight column per member: {len(samples)} members, {len(value)} weight columns"
        raise ValueError(msg)
    return value


def _member_weight_rows(
    q: Query, samples: str | tuple[str, ...], weights: str | tuple[str, ...]
) -> str | tuple[str, ...]:
    """The member weights as row columns, checked: finite, non-negative, a positive total per forecast."""
    if isinstance(weights, str):
        assert isinstance(samples, str)
        dtype = q.schema.get(weights)
        if not isinstance(dtype, (nw.List, nw.Array)):
            msg = f"member_weights column {weights!r} must be a list column of numbers aligned with {samples!r}, found dtype {dtype}"
            raise ListColumnError(
                msg, column=weights, inner=nw.Float64()
            )  # a TypeError; cfx's recorder learns the dtype from it
        col = list_column(q, weights)
        what = f"member_weights column {weights!r}"
        q.check(f"{what} has missing values", col.is_null())
        q.check(f"{what} has missing members", col.list.contains(None))
        q.check(f"{what} has NaN or infinite weights", ~col.list.mean().is_finite())
        q.check(f"{what} has negative weights", col.list.min() < 0.0)
        q.check(f"{what} has a zero total weight", col.list.max() <= 0.0)  # weights are non-negative
        members = list_column(q, samples)
        q.check(f"{what} has lists of another length than {samples!r}", col.list.len() != members.list.len())
        return q.row(("member_weights_list", weights), col)
    rows = []
    for c in weights:
        w = q.number(c)
        q.check(f"member_weights column {c!r} has negative values", w < 0.0)
        rows.append(q.row(("value", c), w))
    q.check("member_weights have a zero total weight", total(q.number(c) for c in weights) <= 0.0)
    return tuple(rows)


def ensemble(
    q: Query,
    y: str,
    samples: str | tuple[str, ...],
    weight: str | None = None,
    member_weights: str | tuple[str, ...] | None = None,
) -> Ensemble:
    """The ensemble's row columns (inputs checked); ``weight``: a weight row column; ``member_weights``: columns."""
    y_row = q.row(("value", y), q.number(y))
    mw = None if member_weights is None else _member_weight_rows(q, samples, member_weights)
    if isinstance(samples, str):
        return Ensemble(y_row, _list_members(q, samples), weight, mw)
    # + 0.0 turns -0.0 into 0.0: pandas (pyarrow dtypes) cannot sort or group a column holding both
    return Ensemble(y_row, tuple(q.row(("member", s), q.number(s) + 0.0) for s in samples), weight, mw)


def _members_long(rows: nw.LazyFrame, keys: list[str], ens: Ensemble, ref: TableRef) -> nw.LazyFrame:
    """One row per (forecast, distinct member value): ``rid``, ``y``, ``x``, ``c`` (its count).

    A list column is exploded once.  Member columns are stacked (a union of
    one select per member); their row id is ordered by the group keys, ``y``
    and every member (and the weight), so that rows that share an id are the
    same forecast on every engine (a tie of this order is a repeated identical
    forecast).  With a weight, its column ``w`` is carried along.
    """
    rid, x, c, mw = ref.name("rid"), ref.name("x"), ref.name("c"), ref.name("mw")
    y = (nw.col(ens.y) + 0.0).alias(ref.name("y"))  # -0.0 becomes 0.0 (see below)
    carried = [ref.name("y")] + ([ref.name("w")] if ens.weight is not None else [])
    weight = [nw.col(ens.weight).alias(ref.name("w"))] if ens.weight is not None else []
    mws = ens.member_weights
    if isinstance(ens.members, str):
        list_w = [nw.col(mws).alias(mw)] if isinstance(mws, str) else []
        base = rows.select(*keys, y, *weight, nw.col(ens.members).alias(x), *list_w)
        base = base.with_row_index(rid, order_by=[*keys, *carried])
        if list_w:  # lists of other lengths are invalid rows (checked); leave them out of the explode
            base = base.filter(nw.col(x).list.len() == nw.col(mw).list.len())
        long = base.explode(x, mw) if list_w else base.explode(x)
    else:
        cols_w = list(mws) if isinstance(mws, tuple) else []
        base = rows.select(*keys, y, *weight, *ens.members, *cols_w)
        base = base.with_row_index(rid, order_by=[*keys, *carried, *ens.members, *cols_w])
        parts = [
            base.select(*keys, rid, *carried, nw.col(m).alias(x), *([nw.col(cols_w[i]).alias(mw)] if cols_w else []))
            for i, m in enumerate(ens.members)
        ]
        long = nw.concat(parts, how="vertical")
    # + 0.0 turns -0.0 into 0.0: one tie group on every engine (pandas cannot group both)
    long = long.with_columns(nw.col(x).cast(nw.Float64) + 0.0)
    if mws is not None:
        long = long.with_columns(nw.col(mw).cast(nw.Float64))
    aggs = [nw.len().alias(c), *([nw.col(mw).sum()] if mws is not None else [])]
    ties = long.group_by(*keys, rid, *carried, x).agg(*aggs)
    return ties.with_columns(nw.col(c).cast(nw.Float64))


def ensemble_rows(rows: nw.LazyFrame, keys: list[str], ens: Ensemble, ref: TableRef) -> nw.LazyFrame:
    """Per forecast: ``m`` members, ``abs_dev = sum_i |x_i - y|``, ``spread``, ``below``, ``equal``.

    ``spread = sum_i (2 i - m - 1) x_(i) = (1/2) sum_{i,j} |x_i - x_j|`` over
    the sorted members; a run of ``c`` tied members after ``s`` smaller ones
    contributes ``x c (2 s + c - m)``.  ``below``/``equal`` count the members
    ``< y`` / ``== y``.  Null members are counted in ``nulls``.  With a
    weight, ``w`` is the forecast's weight.
    """
    ties = _members_long(rows, keys, ens, ref)
    rid, x, y = ref.name("rid"), ref.name("x"), ref.name("y")
    # with member weights every count below is a weight: m the total weight, spread the weighted sum
    c = ref.name("mw") if ens.member_weights is not None else ref.name("c")
    end, m = ref.name("end"), ref.name("m")
    part = [*keys, rid]
    real = ties.filter(~nw.col(x).is_null())
    real = real.with_columns(
        nw.col(c).cum_sum().over(*part, order_by=x).alias(end), nw.col(c).sum().over(*part).alias(m)
    )
    xc, yc, cc = nw.col(x), nw.col(y), nw.col(c)
    start = nw.col(end) - cc
    real = real.with_columns(
        ((xc - yc).abs() * cc).alias(ref.name("abs_dev")),
        (xc * cc * (2.0 * start + cc - nw.col(m))).alias(ref.name("spread")),
        nw.when(xc < yc).then(cc).otherwise(0.0).alias(ref.name("below")),
        nw.when(xc == yc).then(cc).otherwise(0.0).alias(ref.name("equal")),
    )
    sums = [nw.col(ref.name(k)).sum() for k in ("abs_dev", "spread", "below", "equal")]
    if ens.weight is not None:  # one value per forecast
        sums.append(nw.col(ref.name("w")).max())
    per = real.group_by(*keys, rid).agg(nw.col(c).sum().alias(m), *sums)
    count = nw.col(ref.name("c"))
    nulls = ties.with_columns(nw.when(nw.col(x).is_null()).then(count).otherwise(0.0).alias(ref.name("nulls")))
    nulls = nulls.group_by(*keys, rid).agg(nw.col(ref.name("nulls")).sum())
    return join_keys(nulls, per, [*keys, rid])


# ---------------------------------------------------------------------------
# levels: wide (a float per quantile column) or long (the level column)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantileLevel:
    """One quantile level of a metric: its quantile row and the level as row / group value."""

    row: str
    #: the level for row expressions: a float, or the level row's name (long form)
    tau: float | str
    #: the level per group (finalize): a float, or the group's level (long form, a by= key)
    group_tau: float | nw.Expr


def quantile_levels(
    q: Query, quantiles: Quantiles | str, quantile_level: str | None, *, by_key: bool, crossing: str = "invalid"
) -> list[QuantileLevel]:
    """The levels of wide or long quantiles; wide ones under ``crossing`` (:func:`quantile_rows`)."""
    if isinstance(quantiles, str):
        assert quantile_level is not None  # checked by check_long_form
        t = level_column_row(q, quantile_level, by_key=by_key)
        return [QuantileLevel(value_row(q, quantiles), t, q.min(t))]
    return [QuantileLevel(row, tau, tau) for tau, row in quantile_rows(q, quantiles, crossing)]


def level_tau(level: QuantileLevel) -> tuple[nw.Expr | float, list[str]]:
    """The level in a row expression, and the row inputs it needs."""
    if isinstance(level.tau, str):
        return nw.col(level.tau), [level.tau]
    return level.tau, []
