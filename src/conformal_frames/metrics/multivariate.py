"""Multivariate ensemble scores: the energy score and the variogram score.

A multivariate forecast is an ensemble of ``M`` members, each a vector of
``D`` values (the outputs of a model, or the horizons of a path); the
observation is a vector of ``D`` values.  Two forms:

- **wide**: one row per forecast, ``y=["y1", ..., "yD"]`` and ``samples=``
  one list of ``M`` member columns per dimension
  (``samples=[["a1", "a2"], ["b1", "b2"]]``: member ``j`` of the forecast is
  the vector of the ``j``-th column of every dimension).  The scores are row
  expressions (``M^2 D`` terms for the energy score, ``D^2 M`` for the
  variogram score): one pass, mergeable, lazy on every backend.  Or
  ``samples=`` one list column per dimension (``samples=["ens1", "ens2"]``,
  member ``j`` the ``j``-th element of every list, ``M`` may vary by row):
  the lists are exploded together (the energy score's member pairs by a
  second explode), lazy on polars and pandas; DuckDB and Spark raise
  :class:`~conformal_frames.BackendLimitError` (narwhals explodes one column
  at a time there), not mergeable;
- **path**: the dimensions are the rows of a path, ``path=["series",
  "cutoff"]`` as in :func:`~conformal_frames.path_coverage`; ``y`` is one
  column and ``samples=`` the ``M`` member columns (member ``j`` of the path
  is its ``j``-th column on every row); ``order_by=`` gives a row's
  position (the dimension ``pair_weights=`` reads), ``weights=`` and
  ``counts=`` are constant within a path.  Per path sums (the energy score)
  or the pairs of the path's rows (a self-join, the variogram score), then
  the (weighted) mean over paths: lazy on every backend, not mergeable.

Both scores are the mean over forecasts (rows or paths) of scoringrules'
``es_ensemble`` / ``vs_ensemble``, ``estimator="plain"`` being its ``"nrg"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._roles import Column, role, roles
from conformal_frames._validate import check_column, check_columns, checked, choice, fail, is_number, optional
from conformal_frames.engine import Metric, Query, TableFn, TableRef, aggregate, backend_name, join_keys, over, total
from conformal_frames.errors import BackendLimitError
from conformal_frames.inputs.forecasts import ensemble, value_row
from conformal_frames.inputs.sets import arrow_lists
from conformal_frames.numerics.stats import max_of, ratio

__all__ = ["energy_score", "variogram_score"]
METHODS = list(__all__)

Estimator = Literal["plain", "fair"]
Members = tuple[tuple[str, ...], ...]
PairWeights = tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class PathRows:
    """Row columns of the path form."""

    y: str
    members: list[str]
    path: list[str]
    #: each row's weight (constant within a path), ``None``: unweighted
    weight: str | None
    #: each row's position in its path (1, 2, ...: ``order_by``), ``None`` without ``order_by``
    position: str | None


# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------
def _check_y(value: Any, name: str = "y") -> str | tuple[str, ...]:
    return value if isinstance(value, str) else check_columns(value, name)


def _check_members(value: Any, name: str = "samples") -> tuple[str, ...] | Members:
    """Member columns: one list per dimension (wide form) or one list (path form)."""
    if isinstance(value, str):
        msg = (
            f"{name}={value!r} names one column: the path form reads member columns (a list of them); "
            "a list column of members is read in the wide form only (one list column per dimension), "
            "expand it to member columns first"
        )
        raise TypeError(msg)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (list, tuple)) for v in value):
        dims = tuple(check_columns(v, name) for v in value)
        if len({len(d) for d in dims}) > 1:
            sizes = [len(d) for d in dims]
            fail(ValueError, name, f"one list of member columns per dimension, all of one length (got {sizes})", value)
        check_columns([c for d in dims for c in d], name)  # distinct
        return dims
    return check_columns(value, name)


def _check_pair_weights(value: Any, name: str = "pair_weights") -> PairWeights | None:
    if value is None:
        return None
    try:
        w = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        fail(TypeError, name, "a D x D matrix of non-negative numbers (a nested list or a numpy array)", value)
    if w.ndim != 2 or w.shape[0] != w.shape[1] or not np.all(np.isfinite(w)) or np.any(w < 0):
        fail(ValueError, name, "a D x D matrix of non-negative finite numbers", value)
    return tuple(tuple(float(x) for x in row) for row in w)


def _check_p(value: Any, name: str = "p") -> float:
    if not is_number(value) or not 0.0 < float(value) < float("inf"):
        fail(ValueError, name, "a positive number (the variogram's order, e.g. 0.5, 1 or 2)", value)
    return float(value)


def _check_path(value: Any, name: str = "path") -> tuple[str, ...] | None:
    if value is None:
        return None
    return (value,) if isinstance(value, str) else check_columns(value, name)


@dataclass(frozen=True, kw_only=True)
class _Multivariate(Metric):
    y: str | tuple[str, ...] = checked(_check_y)
    samples: tuple[str, ...] | Members = checked(_check_members)
    path: tuple[str, ...] | None = checked(_check_path, None)
    order_by: str | None = checked(optional(check_column), None)
    member_weights: tuple[str, ...] | None = checked(optional(check_columns), None)
    estimator: str = checked(choice("plain", "fair"), "plain")
    weights: str | None = None
    counts: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        wide = isinstance(self.y, tuple)
        if wide and self.path is not None:
            msg = "path= is for the path form (y one column, the dimensions are the rows of a path); got y=" + repr(
                list(self.y)
            )
            raise ValueError(msg)
        if not wide and self.path is None:
            msg = (
                f"y={self.y!r} is one column: pass path=[...] (the columns identifying a path, whose rows are the "
                "dimensions), or the wide form y=['y1', 'y2', ...] with one list of member columns per dimension"
            )
            raise ValueError(msg)
        nested = bool(self.samples) and isinstance(self.samples[0], tuple)
        if wide and len(self.samples) != len(self.y):
            msg = (
                f"the wide form needs one list of member columns (or one list column) per dimension of y "
                f"({len(self.y)}), e.g. samples=[['a1', 'a2'], ['b1', 'b2']] or samples=['ens_a', 'ens_b']; "
                f"got samples={self.samples!r}"
            )
            raise ValueError(msg)
        if not wide and nested:
            msg = "the path form takes one list of member columns (member j of a path is its j-th column on every row)"
            raise ValueError(msg)
        if self.estimator == "fair" and self.lists is None and self.n_members < 2:
            msg = "estimator='fair' needs at least 2 members"
            raise ValueError(msg)
        if self.member_weights is not None and (self.lists is not None or not wide):
            msg = "member_weights= is read in the wide form with member columns (one weight column per member)"
            raise ValueError(msg)
        if self.member_weights is not None and len(self.member_weights) != self.n_members:
            msg = f"member_weights= must give one column per member: {self.n_members} members, {len(self.member_weights)} columns"
            raise ValueError(msg)
        if wide and self.order_by is not None:
            msg = (
                "order_by= orders the rows of a path (the path form, with path=); the wide form's order is y's columns"
            )
            raise ValueError(msg)

    @property
    def lists(self) -> tuple[str, ...] | None:
        """The list columns of the wide form's list variant (one per dimension), else ``None``."""
        wide, nested = isinstance(self.y, tuple), isinstance(self.samples[0], tuple)
        return self.samples if wide and not nested else None  # type: ignore[return-value]

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        return frame if self.lists is None else arrow_lists(frame, list(self.lists), empty_as="float64")

    @property
    def reshapes(self) -> bool:
        """Only list columns are prepared: member columns keep the compiled-query cache."""
        return self.lists is not None

    def _list_rows(self, q: Query) -> tuple[list[str], list[str], str | None]:
        """The wide form with list columns: the ``y`` rows, the list rows (checked) and the weight row."""
        assert isinstance(self.y, tuple) and self.lists is not None
        w = q.weighting(self.weights, counts=self.counts)
        ens = [ensemble(q, y, lst) for y, lst in zip(self.y, self.lists)]
        first = q.column(self.lists[0]).list.len()
        for lst in self.lists[1:]:
            q.check(
                f"samples columns {self.lists[0]!r} and {lst!r} have lists of different lengths",
                q.column(lst).list.len() != first,
            )
        if self.estimator == "fair":
            q.check(
                f"samples column {self.lists[0]!r} has single-member ensembles (estimator='fair' needs 2+)", first == 1
            )
        return [e.y for e in ens], [e.members for e in ens], w.row  # type: ignore[misc]

    def _list_mean(self, q: Query, t: TableRef) -> dict[str, nw.Expr | None]:
        return {"": ratio(t.col("s"), q.weighting(self.weights, counts=self.counts).total)}

    @property
    def n_members(self) -> int:
        if self.lists is not None:
            return 0  # known per row only
        return len(self.samples[0]) if isinstance(self.samples[0], tuple) else len(self.samples)

    def _wide_rows(self, q: Query) -> tuple[list[str], list[list[str]]]:
        """Row columns: ``y_d`` and the members ``x[d][m]``."""
        assert isinstance(self.y, tuple)
        ys = [value_row(q, c) for c in self.y]
        xs = [[value_row(q, c) for c in dim] for dim in self.samples]
        return ys, xs

    def _shares(self, q: Query) -> list[str] | None:
        """The members' weights ``v_j = u_j / sum u`` (``member_weights=``, checked as crps reads them), or ``None``."""
        if self.member_weights is None:
            return None
        ens = ensemble(q, self.y[0], self.samples[0], member_weights=self.member_weights)
        rows = list(ens.member_weights or ())
        if self.estimator == "fair":
            u = [q.number(c) for c in self.member_weights]
            q.check(
                "member_weights put all the weight on one member (estimator='fair' needs two)", max_of(*u) >= total(u)
            )
        key = ("member_share", tuple(rows))
        return [q.row((*key, j), nw.col(r) / total([nw.col(c) for c in rows]), inputs=rows) for j, r in enumerate(rows)]

    def _path_rows(self, q: Query) -> PathRows:
        """The path form's row columns: ``y``, the members, the path, each row's weight and position."""
        assert isinstance(self.y, str) and self.path is not None
        path, names = [], []
        for p in self.path:
            if p in q.keys:  # a group key is constant within the group: the path is the rest
                continue
            col = q.column(p)
            q.check(f"column {p!r} (path=) has missing values", col.is_null())
            path.append(q.row(("path", p), col))
            names.append(p)
        within = [*q.keys, *names]  # the input's names: checks read the input frame
        for param, c in (("weights", self.weights), ("counts", self.counts)):
            if c is not None:
                v = q.number(c)
                spread = over(v.max(), within) - over(v.min(), within)
                q.check(f"column {c!r} ({param}=) is not constant within a path (a path has one weight)", spread != 0.0)
        w = q.weighting(self.weights, counts=self.counts)
        position = None
        if self.order_by is not None:
            col = q.column(self.order_by)
            q.check(f"column {self.order_by!r} (order_by=) has missing values", col.is_null())
            repeated = over(col.count(), [*within, self.order_by]) > 1
            q.check(f"column {self.order_by!r} (order_by=) has repeated values within a path", repeated)
            pw = getattr(self, "pair_weights", None)
            if pw is not None:
                longer = over(col.count(), within) > len(pw)
                q.check(f"a path has more rows than pair_weights has dimensions ({len(pw)})", longer)
            order = q.row(("value", self.order_by), col)
            rank = q.over(nw.col(order).rank("ordinal"), *path).cast(nw.Float64)
            position = q.row(("path_position", order, *path), rank, inputs=[order, *path])
        y, xs = value_row(q, self.y), [value_row(q, c) for c in self.samples]  # type: ignore[arg-type]
        return PathRows(y, xs, path, w.row, position)

    def _mean(self, q: Query, row: str) -> dict[str, nw.Expr | None]:
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


def _path_mean(per_path: nw.LazyFrame, keys: list[str], ref: TableRef, score: str, weight: str | None) -> nw.LazyFrame:
    """Per group: the (weighted) sum of the paths' scores and their total weight (plain sums: no pandas fallback)."""
    s, m = ref.name("s"), ref.name("m")
    w = nw.col(weight) if weight is not None else nw.lit(1.0)
    per_path = per_path.with_columns((nw.col(score) * w).alias(s), w.alias(m))
    return aggregate(per_path, keys, [nw.col(s).sum(), nw.col(m).sum()])


def _sums(rows: nw.LazyFrame, group: list[str], exprs: dict[str, nw.Expr]) -> nw.LazyFrame:
    """``exprs`` as row columns, then their sums per ``group`` (plain sums: no pandas fallback)."""
    rows = rows.with_columns(*[e.alias(name) for name, e in exprs.items()])
    return rows.group_by(*group).agg(*[nw.col(name).sum() for name in exprs])


def _members(
    rows: nw.LazyFrame, keys: list[str], ys: list[str], lists: list[str], weight: str | None, ref: TableRef
) -> tuple[nw.LazyFrame, list[str]]:
    """One row per forecast (``rid``): ``y_i``, the lists as ``x_i`` (of equal lengths), ``M`` and the weight ``w``."""
    impl = rows.implementation
    if len(lists) > 1 and not (impl.is_polars() or impl.is_pandas_like()):
        msg = (
            "the wide form with list columns zips one list per dimension (an explode of several columns), "
            f"which narwhals does not run on {backend_name(impl)}; pass member columns instead "
            "(samples=[['a1', 'a2'], ['b1', 'b2']], row expressions that run on every backend), or collect to polars"
        )
        raise BackendLimitError(msg, backend=backend_name(impl))
    xs = [ref.name(f"x{i}") for i in range(len(lists))]
    w = nw.col(weight) if weight is not None else nw.lit(1.0)
    base = rows.select(*keys, *ys, *[nw.col(c).alias(x) for c, x in zip(lists, xs)], w.alias(ref.name("w")))
    m = nw.col(xs[0]).list.len()
    for x in xs[1:]:  # lists of other lengths are invalid rows (checked); left out of the explode
        base = base.filter(nw.col(x).list.len() == m)
    base = base.filter(m > 0).with_columns(m.cast(nw.Float64).alias(ref.name("m")))
    return base.with_row_index(ref.name("rid"), order_by=[*keys, *ys]), xs


def _per_forecast_mean(per: nw.LazyFrame, keys: list[str], ref: TableRef, score: nw.Expr) -> nw.LazyFrame:
    """Per group: the weighted sum of the forecasts' scores (the weights' total is the main aggregation's)."""
    per = per.with_columns((score * nw.col(ref.name("w"))).alias(ref.name("s")))
    return aggregate(per, keys, [nw.col(ref.name("s")).sum()])


def _es_list_table(ys: list[str], lists: list[str], estimator: str, weight: str | None) -> TableFn:
    def fn(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        base, xs = _members(rows, keys, ys, lists, weight, ref)
        other = [ref.name(f"o{i}") for i in range(len(xs))]
        pairs = base.with_columns(*[nw.col(x).alias(o) for x, o in zip(xs, other)]).explode(*xs).explode(*other)
        f64 = [nw.col(c).cast(nw.Float64) for c in [*xs, *other]]
        x, o = f64[: len(xs)], f64[len(xs) :]
        err = total([(xi - nw.col(y)) ** 2 for xi, y in zip(x, ys)]).sqrt()  # each member M times
        spread = total([(xi - oi) ** 2 for xi, oi in zip(x, o)]).sqrt()
        group = [*keys, ref.name("rid"), ref.name("m"), ref.name("w")]
        per = _sums(pairs, group, {ref.name("err"): err, ref.name("spread"): spread})
        m = nw.col(ref.name("m"))
        n_pairs = m * m if estimator == "plain" else m * (m - 1.0)
        score = nw.col(ref.name("err")) / (m * m) - 0.5 * nw.col(ref.name("spread")) / n_pairs
        return _per_forecast_mean(per, keys, ref, score)

    return fn


def _vs_list_table(
    ys: list[str], lists: list[str], p: float, weights: list[tuple[int, int, float]], estimator: str, weight: str | None
) -> TableFn:
    def fn(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        base, xs = _members(rows, keys, ys, lists, weight, ref)
        members = base.explode(*xs).with_columns(*[nw.col(x).cast(nw.Float64) for x in xs])
        sums: dict[str, nw.Expr] = {}
        for i, k, _ in weights:
            a = (nw.col(xs[i]) - nw.col(xs[k])).abs() ** p
            b = (nw.col(ys[i]) - nw.col(ys[k])).abs() ** p
            sums |= {ref.name(f"a{i}_{k}"): a, ref.name(f"aa{i}_{k}"): a * a, ref.name(f"d{i}_{k}"): (a - b) ** 2}
        per = _sums(members, [*keys, ref.name("rid"), ref.name("m"), ref.name("w"), *ys], sums)
        m = nw.col(ref.name("m"))
        terms = []
        for i, k, w in weights:
            s1, s2 = nw.col(ref.name(f"a{i}_{k}")), nw.col(ref.name(f"aa{i}_{k}"))
            b = (nw.col(ys[i]) - nw.col(ys[k])).abs() ** p
            if estimator == "plain":
                terms.append(w * (b - s1 / m) ** 2)
            else:
                terms.append(w * (nw.col(ref.name(f"d{i}_{k}")) / m - (m * s2 - s1 * s1) / (m * (m - 1.0))))
        return _per_forecast_mean(per, keys, ref, total(terms) if terms else nw.lit(0.0))

    return fn


# ---------------------------------------------------------------------------
# energy score
# ---------------------------------------------------------------------------
def _es_expr(
    err: list[nw.Expr], spread: list[nw.Expr], m: int, estimator: str, v: list[nw.Expr] | None = None
) -> nw.Expr:
    """``(1/M) sum_j ||x_j - y|| - (1/2) sum_{j != k} ||x_j - x_k|| / M^2 (or M (M - 1))`` from squared norms;
    with member shares ``v``: ``sum_j v_j ||x_j - y|| - sum_{j < k} v_j v_k ||x_j - x_k|| (/ (1 - sum_j v_j^2))``."""
    if v is not None:
        pairs = [(j, k) for j in range(m) for k in range(j + 1, m)]
        first = total([vj * e.sqrt() for vj, e in zip(v, err)])
        if not spread:
            return first
        second = total([v[j] * v[k] * s.sqrt() for (j, k), s in zip(pairs, spread)])
        return first - (second if estimator == "plain" else second / (1.0 - total([vj * vj for vj in v])))
    first = total([e.sqrt() for e in err]) / float(m)
    if not spread:
        return first
    n_pairs = float(m * m if estimator == "plain" else m * (m - 1))
    return first - total([s.sqrt() for s in spread]) / n_pairs  # each unordered pair once: the 1/2 cancels


def _es_path_table(r: PathRows, estimator: str) -> TableFn:
    def fn(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        xs, m = r.members, len(r.members)
        pairs = [(j, k) for j in range(m) for k in range(j + 1, m)]
        sq = {ref.name(f"e{j}"): (nw.col(x) - nw.col(r.y)) ** 2 for j, x in enumerate(xs)}
        sq |= {ref.name(f"s{j}_{k}"): (nw.col(xs[j]) - nw.col(xs[k])) ** 2 for j, k in pairs}
        per_path = _sums(rows, [*keys, *r.path, *([r.weight] if r.weight else [])], sq)
        es = _es_expr(
            [nw.col(ref.name(f"e{j}")) for j in range(m)],
            [nw.col(ref.name(f"s{j}_{k}")) for j, k in pairs],
            m,
            estimator,
        )
        return _path_mean(per_path.with_columns(es.alias(ref.name("es"))), keys, ref, ref.name("es"), r.weight)

    return fn


@dataclass(frozen=True, kw_only=True)
class EnergyScore(_Multivariate):
    default_name = "energy_score"
    mergeable_alternative = "energy_score in the wide form with member columns"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        m = self.n_members
        if self.lists is not None:
            ys_l, lists, weight = self._list_rows(q)
            key_l = ("energy_score_lists", tuple(ys_l), tuple(lists), self.estimator, weight)
            return self._list_mean(q, q.table(key_l, _es_list_table(ys_l, lists, self.estimator, weight)))
        if self.path is not None:
            r = self._path_rows(q)
            key = ("energy_score_path", r.y, tuple(r.members), tuple(r.path), r.weight, self.estimator)
            t = q.table(key, _es_path_table(r, self.estimator))
            return {"": ratio(t.col("s"), t.col("m"))}
        ys, xw = self._wide_rows(q)
        d = len(ys)
        # one row column per member and per pair of members: small expressions (a polars plan of one
        # expression with M^2 D nodes takes seconds to optimise; as columns it takes milliseconds)
        err = []
        for j in range(m):
            dims = [*ys, *[xw[i][j] for i in range(d)]]
            sq = total([(nw.col(xw[i][j]) - nw.col(ys[i])) ** 2 for i in range(d)])
            err.append(q.row(("sq_dist", tuple(ys), tuple(xw[i][j] for i in range(d))), sq, inputs=dims))
        spread = []
        for j in range(m):
            for k in range(j + 1, m):
                a, b = tuple(xw[i][j] for i in range(d)), tuple(xw[i][k] for i in range(d))
                sq = total([(nw.col(xw[i][j]) - nw.col(xw[i][k])) ** 2 for i in range(d)])
                spread.append(q.row(("sq_dist", a, b), sq, inputs=[*a, *b]))
        shares = self._shares(q) or []
        v = [nw.col(c) for c in shares] if shares else None
        es = _es_expr([nw.col(c) for c in err], [nw.col(c) for c in spread], m, self.estimator, v)
        wide_key = ("energy_score", tuple(ys), tuple(tuple(dim) for dim in xw), self.estimator, *shares)
        return self._mean(q, q.row(wide_key, es, inputs=[*err, *spread, *shares]))


def energy_score(
    y: Column | Sequence[Column],
    samples: Sequence[Column] | Sequence[Sequence[Column]],
    *,
    path: Column | Sequence[Column] | None = None,
    order_by: Column | None = None,
    estimator: Estimator = "plain",
    weights: Column | None = None,
    counts: Column | None = None,
    member_weights: Sequence[Column] | None = None,
) -> EnergyScore:
    """Energy score of a multivariate ensemble (Gneiting and Raftery 2007), averaged over forecasts; lower is better.

    ``ES(x, y) = (1/M) sum_j ||x_j - y|| - 1/(2 M^2) sum_{j,k} ||x_j - x_k||``
    for the ``M`` members ``x_j`` (vectors of ``D`` values) and the observed
    vector ``y``, ``||.||`` the Euclidean norm; ``estimator="fair"`` divides
    the second sum by ``M (M - 1)`` instead (the unbiased estimator).  With one
    dimension it is the ensemble CRPS.  Equal to scoringrules'
    ``es_ensemble(y, x)`` (``estimator="nrg"``, resp. ``"fair"``), averaged.

    Parameters
    ----------
    y : list of Column, or Column
        Wide form: one column per dimension.  Path form (with ``path=``): the
        observed value of each row of a path.
    samples : list of lists of Column, or list of Column
        Wide form: one list of member columns per dimension, in the order of
        ``y`` (all of one length ``M``), or one list column per dimension
        (lists of one length per row).  Path form: the ``M`` member columns.
    path : Column or list of Column, optional
        Path form: the columns identifying a path; its rows are the
        dimensions.  Missing path values are invalid rows.
    order_by : Column, optional
        Path form: the column ordering a path's rows (e.g. the horizon), the
        dimension of a row being its position; needed by ``pair_weights=``
        only (the scores are symmetric in the dimensions otherwise).
        Missing values and a value repeated within a path are invalid rows.
    estimator : {"plain", "fair"}, default "plain"
        See above; ``"fair"`` needs 2 or more members.
    weights : Column, optional
        Column of non-negative forecast weights (path form: constant within
        a path, else an invalid row; each path weighs its weight).
    counts : Column, optional
        Column of frequency counts (path form: constant within a path).
    member_weights : list of Column, optional
        Wide form with member columns: one column of non-negative weights
        per member (a forecast's weights are normalised to sum to 1),
        scoringrules' ``ens_w``: ``sum_j v_j ||x_j - y|| - (1/2) sum_{j,k}
        v_j v_k ||x_j - x_k||``, the fair estimator dividing the second sum
        by ``1 - sum_j v_j^2``.  Checked as :func:`~conformal_frames.crps`
        reads them (negative weights and a zero total are invalid rows).

    Returns
    -------
    EnergyScore
        A metric object (output ``energy_score``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y1": [0.0], "y2": [0.0], "a1": [3.0], "a2": [0.0], "b1": [4.0], "b2": [0.0]})
    >>> df.conformal.energy_score(["y1", "y2"], [["a1", "a2"], ["b1", "b2"]])
    1.25

    References
    ----------
    T. Gneiting and A. E. Raftery (2007), "Strictly proper scoring rules,
    prediction, and estimation", JASA 102(477), 359-378.
    """
    return EnergyScore(
        y=roles(y),
        samples=_check_members(samples, "samples"),
        path=_check_path(path, "path"),
        order_by=role(order_by),
        estimator=estimator,
        weights=role(weights),
        counts=role(counts),
        member_weights=None if member_weights is None else check_columns(member_weights, "member_weights"),
    )


# ---------------------------------------------------------------------------
# variogram score
# ---------------------------------------------------------------------------
def _vs_term(b: nw.Expr, a: list[nw.Expr], estimator: str, v: list[nw.Expr] | None = None) -> nw.Expr:
    """One ordered pair of dimensions: ``(b - mean a)^2``, or the fair estimator's
    ``(1/M) sum (a_j - b)^2 - (M sum a^2 - (sum a)^2) / (M (M - 1))``; with member shares ``v`` the means
    are ``v``-weighted and the fair correction is ``(sum v a^2 - (sum v a)^2) / (1 - sum v^2)``."""
    if v is not None:
        mean = total([vj * x for vj, x in zip(v, a)])
        if estimator == "plain":
            return (b - mean) ** 2
        first = total([vj * (x - b) ** 2 for vj, x in zip(v, a)])
        return first - (total([vj * x**2 for vj, x in zip(v, a)]) - mean**2) / (1.0 - total([vj * vj for vj in v]))
    m = float(len(a))
    if estimator == "plain":
        return (b - total(a) / m) ** 2
    first = total([(x - b) ** 2 for x in a]) / m
    return first - (m * total([x**2 for x in a]) - total(a) ** 2) / (m * (m - 1.0))


def _position_weight(left: str, right: str, weights: PairWeights) -> nw.Expr:
    """``w[i][k]`` of the pair at positions ``(i + 1, k + 1)`` (0 for a zero weight)."""
    expr: nw.Expr = nw.lit(0.0)
    for i, row in enumerate(weights):
        for k, w in enumerate(row):
            if w != 0.0:
                at = (nw.col(left) == float(i + 1)) & (nw.col(right) == float(k + 1))
                expr = nw.when(at).then(nw.lit(w)).otherwise(expr)
    return expr


def _vs_path_table(r: PathRows, p: float, estimator: str, weights: PairWeights | None) -> TableFn:
    def fn(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        own = [r.y, *r.members, *([r.position] if r.position else [])]
        left = rows.select(*keys, *r.path, *own, *([r.weight] if r.weight else []))
        names = [ref.name(f"r{j}") for j in range(len(own))]
        right = left.select(*keys, *r.path, *[nw.col(c).alias(n) for c, n in zip(own, names)])
        pairs = join_keys(left, right, [*keys, *r.path], how="inner")  # every ordered pair of the path's rows
        b = (nw.col(r.y) - nw.col(names[0])).abs() ** p
        a = [(nw.col(x) - nw.col(n)).abs() ** p for x, n in zip(r.members, names[1:])]
        term = _vs_term(b, a, estimator)
        if weights is not None:
            assert r.position is not None
            term = _position_weight(r.position, names[-1], weights) * term
        per_path = _sums(pairs, [*keys, *r.path, *([r.weight] if r.weight else [])], {ref.name("vs"): term})
        return _path_mean(per_path, keys, ref, ref.name("vs"), r.weight)

    return fn


@dataclass(frozen=True, kw_only=True)
class VariogramScore(_Multivariate):
    p: float = checked(_check_p, 0.5)
    pair_weights: PairWeights | None = checked(_check_pair_weights, None)
    default_name = "variogram_score"
    mergeable_alternative = "variogram_score in the wide form with member columns"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pair_weights is not None:
            if not isinstance(self.y, tuple):
                if self.order_by is None:
                    msg = "pair_weights= in the path form needs order_by= (the dimensions are the positions of a path's rows)"
                    raise ValueError(msg)
            elif len(self.pair_weights) != len(self.y):
                msg = f"pair_weights= must be a {len(self.y)} x {len(self.y)} matrix (one row per column of y), got {len(self.pair_weights)} rows"
                raise ValueError(msg)

    def _pairs(self, d: int) -> list[tuple[int, int, float]]:
        """The unordered pairs of dimensions with their weight ``w_ik + w_ki`` (0: left out)."""
        pw = self.pair_weights
        pairs = [(i, k, 2.0 if pw is None else pw[i][k] + pw[k][i]) for i in range(d) for k in range(i + 1, d)]
        return [t for t in pairs if t[2] != 0.0]

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        if self.lists is not None:
            ys_l, lists, weight = self._list_rows(q)
            pairs = self._pairs(len(ys_l))
            if not pairs:  # one dimension, or every pair weighted 0: the score is 0
                return self._mean(q, q.row(("zero",), nw.lit(0.0)))
            key_l = ("variogram_score_lists", tuple(ys_l), tuple(lists), self.p, tuple(pairs), self.estimator, weight)
            table = _vs_list_table(ys_l, lists, self.p, pairs, self.estimator, weight)
            return self._list_mean(q, q.table(key_l, table))
        if self.path is not None:
            r = self._path_rows(q)
            key = (
                "variogram_score_path",
                r.y,
                tuple(r.members),
                tuple(r.path),
                r.weight,
                r.position,
                self.p,
                self.pair_weights,
                self.estimator,
            )
            t = q.table(key, _vs_path_table(r, self.p, self.estimator, self.pair_weights))
            return {"": ratio(t.col("s"), t.col("m"))}
        ys, xw = self._wide_rows(q)
        d, m = len(ys), self.n_members
        shares = self._shares(q) or []
        v = [nw.col(c) for c in shares] if shares else None
        terms: list[str] = []
        weights: list[float] = []
        for i in range(d):
            for k in range(i + 1, d):  # |.|^p is symmetric and 0 on the diagonal: w_ik + w_ki per unordered pair
                w = 2.0 if self.pair_weights is None else self.pair_weights[i][k] + self.pair_weights[k][i]
                if w == 0.0:
                    continue
                b = (nw.col(ys[i]) - nw.col(ys[k])).abs() ** self.p
                a = [(nw.col(xw[i][j]) - nw.col(xw[k][j])).abs() ** self.p for j in range(m)]
                pair = [ys[i], ys[k], *xw[i], *xw[k]]  # a row column per pair: small expressions
                term = _vs_term(b, a, self.estimator, v)
                terms.append(q.row(("vs_pair", *pair, self.p, self.estimator, *shares), term, inputs=[*pair, *shares]))
                weights.append(w)
        expr = total([w * nw.col(t) for w, t in zip(weights, terms)]) if terms else nw.lit(0.0)
        inputs = terms or ys
        wkey = (
            "variogram_score",
            tuple(ys),
            tuple(tuple(dim) for dim in xw),
            self.p,
            self.pair_weights,
            self.estimator,
            *shares,
        )
        return self._mean(q, q.row(wkey, expr, inputs=inputs))


def variogram_score(
    y: Column | Sequence[Column],
    samples: Sequence[Column] | Sequence[Sequence[Column]],
    *,
    p: float = 0.5,
    pair_weights: Any = None,
    path: Column | Sequence[Column] | None = None,
    order_by: Column | None = None,
    estimator: Estimator = "plain",
    weights: Column | None = None,
    counts: Column | None = None,
    member_weights: Sequence[Column] | None = None,
) -> VariogramScore:
    """Variogram score of order ``p`` of a multivariate ensemble (Scheuerer and Hamill 2015), averaged; lower is better.

    ``VS_p(x, y) = sum_{i,k} w_ik (|y_i - y_k|^p - (1/M) sum_j |x_ji - x_jk|^p)^2``
    over every ordered pair of dimensions ``(i, k)`` (each unordered pair
    twice, as scoringrules sums the whole ``D x D`` matrix), ``w_ik = 1``
    unless ``pair_weights=`` is given.  ``estimator="fair"``:
    ``sum_{i,k} w_ik [(1/M) sum_j (a_jik - b_ik)^2 - 1/(2 M (M - 1)) sum_{j != l} (a_jik - a_lik)^2]``
    with ``a_jik = |x_ji - x_jk|^p`` and ``b_ik = |y_i - y_k|^p``.  Equal to
    scoringrules' ``vs_ensemble(y, x, w, p=p)`` (``estimator="nrg"``, resp.
    ``"fair"``), averaged.  It scores the forecast's dependence between
    dimensions, which the energy score barely sees.

    Parameters
    ----------
    y, samples, path, order_by, estimator, weights, counts, member_weights
        As in :func:`energy_score` (with ``member_weights``, the member means
        of ``|x_ji - x_jk|^p`` are weighted and the fair correction is
        divided by ``1 - sum_j v_j^2``, as scoringrules' ``ens_w``).
    p : float, default 0.5
        The order (> 0); 0.5 is Scheuerer and Hamill's recommendation and
        scoringrules' default.
    pair_weights : D x D matrix, optional
        Non-negative weights of the ordered pairs of dimensions: in the order
        of ``y``'s columns (wide form) or of the rows' positions by
        ``order_by`` (path form; a path of more than ``D`` rows is an invalid
        row), e.g. decaying with the distance between horizons.

    Returns
    -------
    VariogramScore
        A metric object (output ``variogram_score``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y1": [0.0], "y2": [1.0], "a1": [0.0], "a2": [0.0], "b1": [1.0], "b2": [4.0]})
    >>> df.conformal.variogram_score(["y1", "y2"], [["a1", "a2"], ["b1", "b2"]], p=1.0)
    4.5

    References
    ----------
    M. Scheuerer and T. M. Hamill (2015), "Variogram-based proper scoring
    rules for probabilistic forecasts of multivariate quantities", Monthly
    Weather Review 143, 1321-1334.
    """
    return VariogramScore(
        y=roles(y),
        samples=_check_members(samples, "samples"),
        p=p,
        pair_weights=pair_weights,
        path=_check_path(path, "path"),
        order_by=role(order_by),
        estimator=estimator,
        weights=role(weights),
        counts=role(counts),
        member_weights=None if member_weights is None else check_columns(member_weights, "member_weights"),
    )
