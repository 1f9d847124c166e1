"""Distributional forecast scores: CRPS and the probability integral transform (PIT).

A forecast of ``y`` is given as one of

- a **Gaussian** forecast: ``mean=`` and ``std=`` columns (``std > 0``);
- an **ensemble** (sample) forecast: ``samples=`` a list column (polars
  List/Array, Arrow list, or a pandas ``object`` column of lists/arrays) or a
  list of columns, one per member.

Everything stays lazy on every backend: the Gaussian scores are row
expressions (the normal tail is the engine's polynomial approximation of the
Mills ratio, relative accuracy ~1e-14, see :mod:`conformal_frames.brownian`);
an ensemble is turned into one row per member (``explode`` of a list column,
a union of the member columns otherwise), its members sorted per forecast with
an ordered window, and aggregated back: ``O(m log m)`` per forecast of ``m``
members, never the ``O(m^2)`` pair sum.

Invalid rows (an error on eager input; null metrics and ``n_invalid`` on lazy
input): a missing or non-finite ``y``, ``mean`` or ``std``; ``std <= 0``; a
missing or empty ensemble, or one with NaN or infinite members.  A list whose
members are partly missing (null elements) cannot be seen by a row check on
every backend: the group's score is then null (never computed from the
remaining members).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw

from conformal_frames._validate import check_column, check_columns, checked, choice, fail, optional
from conformal_frames.brownian import normal_sf_expr
from conformal_frames.core import Metric, Query, TableFn, TableRef, aggregate
from conformal_frames.sets import arrow_lists
from conformal_frames.stats import ratio

__all__ = ["crps"]
METHODS = list(__all__)

Estimator = Literal["plain", "fair"]
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------------------
# parameter checks
# ---------------------------------------------------------------------------
def check_samples(value: Any, name: str = "samples") -> str | tuple[str, ...]:
    """An ensemble: a list column's name or a list of member column names."""
    if isinstance(value, str):
        return value
    expected = "the name of a list column or a list of member column names"
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        fail(TypeError, name, expected, value)
    return check_columns(value, name)


def _one_forecast(mean: str | None, std: str | None, samples: Any) -> None:
    """Exactly one forecast kind: ``mean=`` with ``std=``, or ``samples=``."""
    gaussian = mean is not None or std is not None
    if gaussian and (mean is None or std is None):
        missing = "std=" if std is None else "mean="
        msg = f"a Gaussian forecast needs both mean= and std= columns; {missing} is missing"
        raise ValueError(msg)
    if gaussian and samples is not None:
        msg = "give one forecast: mean= and std= (Gaussian) or samples= (ensemble), not both"
        raise ValueError(msg)
    if not gaussian and samples is None:
        msg = "give a forecast: mean= and std= columns (Gaussian) or samples= (an ensemble)"
        raise ValueError(msg)


# ---------------------------------------------------------------------------
# Gaussian forecasts: row expressions
# ---------------------------------------------------------------------------
def gaussian_z(q: Query, y: str, mean: str, std: str) -> tuple[str, str]:
    """Row columns ``z = (y - mean) / std`` and ``std``; ``std <= 0`` is invalid."""
    sd = q.number(std)
    q.check(f"std column {std!r} has zero or negative values (std must be > 0)", sd <= 0.0, example=sd)
    sd_row = q.row(("std", std), sd)
    z = q.row(("gauss_z", y, mean, std), (q.number(y) - q.number(mean)) / sd)
    return z, sd_row


def gaussian_crps_row(q: Query, y: str, mean: str, std: str) -> str:
    """Row column: ``std * (|z| (1 - 2 Phi_c(|z|)) + 2 phi(z) - 1/sqrt(pi))``."""
    z, sd = gaussian_z(q, y, mean, std)
    a = q.row(("gauss_abs_z", z), nw.col(z).abs(), inputs=[z])
    tail = q.row(("gauss_tail", a), normal_sf_expr(nw.col(a)), inputs=[a])
    col_a = nw.col(a)
    density = (-0.5 * col_a * col_a).exp() * _INV_SQRT_2PI
    crps = nw.col(sd) * (col_a * (1.0 - 2.0 * nw.col(tail)) + 2.0 * density - _INV_SQRT_PI)
    return q.row(("gauss_crps", a), crps, inputs=[a, tail, sd])


# ---------------------------------------------------------------------------
# ensembles: one row per member, sorted per forecast
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ensemble:
    """Row columns of an ensemble forecast: ``y`` and the members."""

    y: str
    #: a list row column, or one row column per member
    members: str | tuple[str, ...]

    @property
    def width(self) -> int | None:
        """Number of members when they are columns (``None`` for a list column)."""
        return None if isinstance(self.members, str) else len(self.members)


def _list_members(q: Query, name: str) -> str:
    col = q.column(name)
    dtype = q.schema[name]
    if isinstance(dtype, nw.Array):
        col = col.cast(nw.List(dtype.inner))
        inner = dtype.inner
    elif isinstance(dtype, nw.List):
        inner = dtype.inner
    else:
        msg = (
            f"samples column {name!r} must be a list column of numbers (polars List/Array, Arrow list, "
            f"or a pandas column of lists/arrays), found dtype {dtype}; "
            "alternatively pass the member columns as a list, samples=['x1', 'x2', ...]"
        )
        raise TypeError(msg)
    if not (inner.is_numeric() or inner == nw.Unknown):
        msg = f"samples column {name!r} must hold numbers, found {inner} members"
        raise TypeError(msg)
    q.check(f"samples column {name!r} has missing values", col.is_null())
    q.check(f"samples column {name!r} has empty ensembles", col.list.len() == 0)
    q.check(f"samples column {name!r} has NaN or infinite members", ~col.list.mean().is_finite())
    return q.row(("samples_list", name), col)


def ensemble(q: Query, y: str, samples: str | tuple[str, ...]) -> Ensemble:
    """The ensemble's row columns (inputs checked)."""
    y_row = q.row(("value", y), q.number(y))
    if isinstance(samples, str):
        return Ensemble(y_row, _list_members(q, samples))
    # + 0.0 turns -0.0 into 0.0: pandas (pyarrow dtypes) cannot sort or group a column holding both
    return Ensemble(y_row, tuple(q.row(("member", s), q.number(s) + 0.0) for s in samples))


def _members_long(rows: nw.LazyFrame, keys: list[str], ens: Ensemble, ref: TableRef) -> nw.LazyFrame:
    """One row per (forecast, distinct member value): ``rid``, ``y``, ``x``, ``c`` (its count).

    A list column is exploded once.  Member columns are stacked (a union of
    one select per member); their row id is ordered by the group keys, ``y``
    and every member, so that rows that share an id are the same forecast on
    every engine (a tie of this order is a repeated identical forecast).
    """
    rid, x, c = ref.name("rid"), ref.name("x"), ref.name("c")
    y = (nw.col(ens.y) + 0.0).alias(ref.name("y"))  # -0.0 becomes 0.0 (see below)
    if isinstance(ens.members, str):
        base = rows.select(*keys, y, nw.col(ens.members).alias(x))
        base = base.with_row_index(rid, order_by=[*keys, ref.name("y")])
        long = base.explode(x)
    else:
        base = rows.select(*keys, y, *ens.members)
        base = base.with_row_index(rid, order_by=[*keys, ref.name("y"), *ens.members])
        parts = [base.select(*keys, rid, ref.name("y"), nw.col(m).alias(x)) for m in ens.members]
        long = nw.concat(parts, how="vertical")
    # + 0.0 turns -0.0 into 0.0: one tie group on every engine (pandas cannot group both)
    long = long.with_columns(nw.col(x).cast(nw.Float64) + 0.0)
    ties = long.group_by(*keys, rid, ref.name("y"), x).agg(nw.len().alias(c))
    return ties.with_columns(nw.col(c).cast(nw.Float64))


def ensemble_rows(rows: nw.LazyFrame, keys: list[str], ens: Ensemble, ref: TableRef) -> nw.LazyFrame:
    """Per forecast: ``m`` members, ``abs_dev = sum_i |x_i - y|``, ``spread``, ``below``, ``equal``.

    ``spread = sum_i (2 i - m - 1) x_(i) = (1/2) sum_{i,j} |x_i - x_j|`` over
    the sorted members; a run of ``c`` tied members after ``s`` smaller ones
    contributes ``x c (2 s + c - m)``.  ``below``/``equal`` count the members
    ``< y`` / ``== y``.  Null members are counted in ``nulls``.
    """
    ties = _members_long(rows, keys, ens, ref)
    rid, x, c, y = ref.name("rid"), ref.name("x"), ref.name("c"), ref.name("y")
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
    per = real.group_by(*keys, rid).agg(nw.col(c).sum().alias(m), *sums)
    nulls = ties.with_columns(nw.when(nw.col(x).is_null()).then(nw.col(c)).otherwise(0.0).alias(ref.name("nulls")))
    nulls = nulls.group_by(*keys, rid).agg(nw.col(ref.name("nulls")).sum())
    return nulls.join(per, on=[*keys, rid], how="left")


def _crps_table(ens: Ensemble, estimator: Estimator) -> TableFn:
    """Sub-query: per group, the sum of the forecasts' CRPS and the forecasts with null members."""

    def build(rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        per = ensemble_rows(rows, keys, ens, ref)
        m = nw.col(ref.name("m"))
        pairs = m * m if estimator == "plain" else m * (m - 1.0)
        score = nw.col(ref.name("abs_dev")) / m - nw.col(ref.name("spread")) / pairs
        per = per.with_columns(score.alias(ref.name("crps")))
        bad = (nw.col(ref.name("nulls")) > 0).cast(nw.Float64).alias(ref.name("bad"))
        return aggregate(per.with_columns(bad), keys, [nw.col(ref.name("crps")).sum(), nw.col(ref.name("bad")).sum()])

    return build


# ---------------------------------------------------------------------------
# CRPS
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CRPS(Metric):
    y: str
    mean: str | None = checked(optional(check_column), None)
    std: str | None = checked(optional(check_column), None)
    samples: str | tuple[str, ...] | None = checked(optional(check_samples), None)
    estimator: str = checked(choice("plain", "fair"), "plain")
    default_name = "crps"

    def __post_init__(self) -> None:
        super().__post_init__()
        _one_forecast(self.mean, self.std, self.samples)
        if self.estimator == "fair" and isinstance(self.samples, tuple) and len(self.samples) < 2:
            msg = "estimator='fair' needs at least 2 members, got samples=" + repr(list(self.samples))
            raise ValueError(msg)

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        return arrow_lists(frame, [self.samples] if isinstance(self.samples, str) else [])

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        if self.mean is not None and self.std is not None:
            return {"": ratio(q.sum(gaussian_crps_row(q, self.y, self.mean, self.std)), q.n)}
        assert self.samples is not None
        ens = ensemble(q, self.y, self.samples)
        if self.estimator == "fair" and isinstance(self.samples, str):
            col = nw.col(self.samples)
            q.check(
                f"samples column {self.samples!r} has single-member ensembles (estimator='fair' needs 2+)",
                col.list.len() == 1,
            )
        t = q.table(("crps_ensemble", ens, self.estimator), _crps_table(ens, self.estimator))
        return {"": nw.when(t.col("bad").fill_null(0.0) == 0).then(ratio(t.col("crps").fill_null(0.0), q.n))}


def crps(
    y: str,
    *,
    mean: str | None = None,
    std: str | None = None,
    samples: str | Sequence[str] | None = None,
    estimator: Estimator = "plain",
) -> CRPS:
    """Continuous ranked probability score (CRPS), averaged over rows; lower is better.

    ``CRPS(F, y) = int (F(x) - 1[y <= x])^2 dx = E|X - y| - (1/2) E|X - X'|``
    with ``X, X'`` independent draws from the forecast ``F`` (Matheson and
    Winkler 1976; Gneiting and Raftery 2007).  The metric is the mean over rows.

    - **Gaussian** (``mean=``, ``std=``): the closed form
      ``std * (z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi))``, ``z = (y - mean) / std``
      (Gneiting et al. 2005); ``scipy.stats.norm`` / scoringrules'
      ``crps_normal`` give the same values.
    - **Ensemble** (``samples=``, ``m`` members ``x_1..x_m``): exact for the
      ensemble's empirical distribution, from the sorted members
      ``x_(1) <= ... <= x_(m)`` in ``O(m log m)``:
      ``(1/m) sum_i |x_i - y| - (1/m^2) sum_i (2 i - m - 1) x_(i)``
      (``estimator="plain"``, the default: the CRPS of the empirical
      distribution, scoringrules' default ``crps_ensemble`` estimator and
      properscoring's ``crps_ensemble``).  ``estimator="fair"`` divides the
      second sum by ``m (m - 1)`` instead: the unbiased ("fair") estimator of
      the CRPS of the distribution the members are drawn from (Ferro 2014;
      scoringrules' ``estimator="fair"``), which needs 2 or more members.

    Parameters
    ----------
    y : str
        Column of observed values.
    mean, std : str, optional
        Columns of a Gaussian forecast's mean and standard deviation
        (``std > 0``).
    samples : str or list of str, optional
        An ensemble: a list column (polars List or Array, Arrow list, or a
        pandas ``object`` column of lists or numpy arrays; members may differ
        in number between rows), or a list of member columns.
    estimator : {"plain", "fair"}, default "plain"
        The ensemble estimator (see above); ignored for a Gaussian forecast.

    Returns
    -------
    CRPS
        A metric object.  ``df.conformal.crps(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``crps`` and ``n`` (lazy in, lazy out).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 1.0], "mu": [0.0, 0.0], "sd": [1.0, 1.0],
    ...                    "ens": [[-1.0, 0.0, 1.0], [0.0, 2.0, 2.0]]})
    >>> round(df.conformal.crps("y", mean="mu", std="sd"), 6)
    0.418068
    >>> round(df.conformal.crps("y", samples="ens"), 6)
    0.388889

    References
    ----------
    J. E. Matheson and R. L. Winkler (1976), "Scoring rules for continuous
    probability distributions", Management Science 22(10), 1087-1096.
    T. Gneiting and A. E. Raftery (2007), "Strictly proper scoring rules,
    prediction, and estimation", JASA 102(477), 359-378.
    C. A. T. Ferro (2014), "Fair scores for ensemble forecasts", QJRMS
    140(683), 1917-1923.
    """
    return CRPS(
        y=y, mean=mean, std=std, samples=check_samples(samples) if samples is not None else None, estimator=estimator
    )
