"""Vovk's criteria of efficiency for conformal classifiers.

From one p-value column per class (``p_k``), a confidence level (the
significance level is ``eps = 1 - confidence_level``) and, for the *observed*
criteria, the true label ``y``; the prediction set at significance ``eps`` is
``{k : p_k > eps}``.  Definitions (Vovk, Fedorova,
Nouretdinov and Gammerman, 2016), all averaged over the rows of a group:

=============  ===========================================  ================
criterion      per row                                      needs ``y``
=============  ===========================================  ================
S              ``sum_k p_k``                                no
N              ``|set|``                                    no
U              second largest ``p_k`` (a largest value      no
               that occurs twice is also the second)
F              ``sum_k p_k - max_k p_k``                    no
M              ``1[|set| > 1]``                             no
E              ``max(|set| - 1, 0)``                        no
OU             ``max_{k != y} p_k``                         yes
OF             ``sum_{k != y} p_k``                         yes
OM             ``1[set contains some k != y]``              yes
OE             ``|set \\ {y}|``                             yes
credibility    ``max_k p_k`` (tie-break for U and F)        no
empty          ``1[|set| = 0]`` (tie-break for M and E)     no
=============  ===========================================  ================

Smaller is better for all ten criteria; for the tie-breaks, smaller mean
credibility and a *larger* fraction of empty sets are preferable.  The
label-conditional versions of the paper are the same numbers computed within
each true label: pass ``by=`` the label column.

The factory is :func:`efficiency_criteria` (not ``efficiency``: that name is
this module's, and the package exposes its modules as attributes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames._renames import renamed
from conformal_frames._roles import Column, role
from conformal_frames._validate import (
    check_classes,
    check_column,
    check_columns,
    checked,
    complement,
    optional,
)
from conformal_frames.engine import Metric, Query, total
from conformal_frames.inputs.levels import level_row
from conformal_frames.inputs.sets import Label, label_exprs
from conformal_frames.numerics.stats import max_of, ratio

__all__ = ["efficiency_criteria"]
METHODS = list(__all__)

PRIOR = ("S", "N", "U", "F", "M", "E")
OBSERVED = ("OU", "OF", "OM", "OE")
SECONDARY = ("credibility", "empty")


def pvalue_exprs(q: Query, pvalues: tuple[str, ...]) -> list[nw.Expr]:
    """Validated Float64 p-value expressions; values outside [0, 1] are invalid."""
    out = []
    for name in pvalues:
        p = q.number(name)
        q.check(f"p-value column {name!r} has values outside [0, 1]", (p < 0.0) | (p > 1.0))
        out.append(p)
    return out


def _pvalue_columns(value: Any, name: str) -> tuple[str, ...]:
    """One p-value column per class: at least two."""
    return check_columns(value, name, at_least=2)


@dataclass(frozen=True, kw_only=True)
class Efficiency(Metric):
    y: str | None = checked(optional(check_column))
    pvalues: tuple[str, ...] = checked(_pvalue_columns)
    classes: tuple[Label, ...] | None = checked(optional(check_classes))
    confidence_level: float | str
    weights: str | None = None
    counts: str | None = None
    default_name = "efficiency_criteria"
    kind = "table"
    long = True

    @property
    def criteria(self) -> tuple[str, ...]:
        return PRIOR + (OBSERVED if self.y is not None else ()) + SECONDARY

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        p = pvalue_exprs(q, self.pvalues)
        level = level_row(q, self.confidence_level)
        key: tuple[Any, ...] = (self.pvalues, self.confidence_level)
        largest = max_of(*p)
        n_largest = total([(pk == largest).cast(nw.Float64) for pk in p])
        below = max_of(*[nw.when(pk < largest).then(pk).otherwise(nw.lit(-1.0)) for pk in p])
        second = nw.when(n_largest >= 2.0).then(largest).otherwise(below)
        if level is None:
            eps = complement(float(self.confidence_level))
            member = [(pk > eps).cast(nw.Float64) for pk in p]
        else:  # p > 1 - t as p + t > 1: exact for decimal levels and p-values such as 0.1 + 0.9
            t = nw.col(str(self.confidence_level)).cast(nw.Float64)  # the by= key level_row checked
            member = [(pk + t > 1.0).cast(nw.Float64) for pk in p]
        size = total(member)
        rows = {
            "S": total(p),
            "N": size,
            "U": second,
            "F": total(p) - largest,
            "M": (size > 1.0).cast(nw.Float64),
            "E": (size - 1.0).clip(lower_bound=0.0),
            "credibility": largest,
            "empty": (size == 0.0).cast(nw.Float64),
        }
        if self.y is not None:
            assert self.classes is not None
            eq = label_exprs(q, self.y, self.classes)
            false_in_set = size - total([e * m for e, m in zip(eq, member)])
            rows["OU"] = max_of(*[nw.when(e == 0.0).then(pk).otherwise(nw.lit(-1.0)) for e, pk in zip(eq, p)])
            rows["OF"] = total(p) - total([e * pk for e, pk in zip(eq, p)])
            rows["OM"] = (false_in_set > 0.0).cast(nw.Float64)
            rows["OE"] = false_in_set
            key = (*key, self.y, self.classes)
        w = q.weighting(self.weights, counts=self.counts)
        return {c: ratio(w.sum(q.row(("vovk", c, key), rows[c])), w.total) for c in self.criteria}

    def to_long(self, frame: nw.LazyFrame, keys: list[str]) -> nw.LazyFrame:
        name = self.output_name
        extra = [c for c in ("n", "n_invalid") if c in frame.collect_schema()]
        return frame.select(*keys, *[nw.col(f"{name}_{c}").alias(c) for c in self.criteria], *extra)


@renamed(significance=("confidence_level", "the test size eps is now 1 - confidence_level"))
def efficiency_criteria(
    y: Column | None,
    pvalues: Sequence[Column],
    *,
    classes: Sequence[Label] | None = None,
    confidence_level: float | str,
    weights: Column | None = None,
    counts: Column | None = None,
) -> Efficiency:
    """Vovk's ten criteria of efficiency from per-class p-values.

    ``S, N, U, F, M, E`` (prior: no label needed), ``OU, OF, OM, OE``
    (observed: need the true label ``y``), and the tie-breaking secondary
    numbers ``credibility`` (mean largest p-value, for U and F) and ``empty``
    (fraction of empty sets, for M and E).  The prediction set at confidence
    level ``1 - eps`` is ``{k : p_k > eps}``: ``eps = 1 - confidence_level``,
    taken on the decimal value (``confidence_level=0.9`` gives ``eps = 0.1``
    exactly, so a p-value of exactly 0.1 is outside the set).  Before 0.2 the
    parameter was ``significance=eps``: ``significance=0.1`` is now
    ``confidence_level=0.9``, with identical results.  See the module docstring for the table of
    definitions.  Label-conditional criteria: ``by=`` the label column (the
    label may then be both ``y`` and the group key).

    Parameters
    ----------
    y : Column or None
        Column of true labels; ``None`` computes the prior criteria only.
    pvalues : list of Column
        One p-value column per class (at least two), values in [0, 1].
    classes : list of int or str, optional
        The label of each p-value column, in order; required with ``y``.
    confidence_level : float
        The confidence level ``1 - eps`` of the prediction sets, in (0, 1).
    weights : Column, optional
        Column of non-negative row weights: every criterion becomes the
        weighted mean ``sum_i w_i x_i / sum_i w_i`` of its per-row value (see
        the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    Efficiency
        A direct call returns a frame: group keys, one column per criterion,
        ``n``.  Inside ``evaluate`` the columns are ``efficiency_criteria_S``,
        ``efficiency_criteria_N``, ...

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0, 1, 1], "p0": [0.8, 0.5, 0.05],
    ...                    "p1": [0.1, 0.3, 0.6], "p2": [0.02, 0.5, 0.2]})  # row 2: tied largest
    >>> out = df.conformal.efficiency_criteria("y", ["p0", "p1", "p2"], classes=[0, 1, 2], confidence_level=0.9)
    >>> out.select(pl.col("S", "N", "U", "OF", "OE").round(4))
    shape: (1, 5)
    ┌────────┬─────┬────────┬────────┬─────┐
    │ S      ┆ N   ┆ U      ┆ OF     ┆ OE  │
    │ ---    ┆ --- ┆ ---    ┆ ---    ┆ --- │
    │ f64    ┆ f64 ┆ f64    ┆ f64    ┆ f64 │
    ╞════════╪═════╪════════╪════════╪═════╡
    │ 1.0233 ┆ 2.0 ┆ 0.2667 ┆ 0.4567 ┆ 1.0 │
    └────────┴─────┴────────┴────────┴─────┘

    References
    ----------
    V. Vovk, V. Fedorova, I. Nouretdinov and A. Gammerman (2016), "Criteria of
    efficiency for conformal prediction", COPA 2016, LNCS 9653, 23-39.
    """
    cols = _pvalue_columns(pvalues, "pvalues")
    labels = None
    if classes is not None or y is not None:
        if classes is None:
            msg = "classes= is required with a label column y: the label of each p-value column"
            raise ValueError(msg)
        labels = check_classes(classes)
        if len(labels) != len(cols):
            msg = (
                f"mismatched classes and p-value columns: {len(cols)} columns {list(cols)!r} "
                f"but {len(labels)} classes {list(labels)!r}"
            )
            raise ValueError(msg)
    return Efficiency(
        y=role(y),
        pvalues=cols,
        classes=labels,
        confidence_level=confidence_level,
        weights=role(weights),
        counts=role(counts),
    )
