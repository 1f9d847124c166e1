"""Ranking metrics of uncertainty: AUROC, AUARC, excess risk of the target coverage.

A *correctness* column ``y`` (0/1 or boolean: was the prediction correct /
covered) and a *confidence* column ``score`` (any finite number; higher means more confident,
e.g. the top softmax probability, or ``1 / width`` of an interval) per row;
a group of ``n`` rows.

* :func:`auroc`: the probability that a correct row has a higher confidence
  than an incorrect one (ties count one half): the Mann-Whitney form of the
  area under the ROC curve, from mid-ranks of the confidence inside each group.
* :func:`auarc`: the area under the accuracy-rejection curve, the mean over
  ``k = 1..n`` of the accuracy among the ``k`` most confident rows.  Tied
  confidences are resolved by *averaging over every order of the tied rows*
  (exact, in closed form), so the value never depends on row order or backend.
* :func:`excess_risk_target_coverage`: a classifier predicts coverage from
  feature columns (cross-validated) and its L1 miscoverage loss is compared
  with the constant predictor ``confidence_level``.  Needs scikit-learn
  (``pip install conformal-frames[sklearn]``) and an eager frame.

Both AUROC and AUARC are ordinary window functions and sums: grouped and lazy
on every backend.  Invalid rows (missing / NaN / infinite confidence,
correctness other than 0/1) are an error on eager input and make the group's
metrics null (``n_invalid``) on lazy input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._renames import renamed
from conformal_frames._roles import Column, role
from conformal_frames._validate import (
    FIELD_CHECKS,
    check_boolean,
    check_classifier,
    check_columns,
    check_level,
    check_positive_int,
    checked,
    instance_of,
)
from conformal_frames.engine import (
    InvalidPolicy,
    Metric,
    Query,
    TableFn,
    TableRef,
    aggregate,
    backend_name,
    evaluate_one,
    no_weights,
    running_total,
    to_lazy,
)
from conformal_frames.errors import BackendLimitError
from conformal_frames.inputs.binary import binary_row
from conformal_frames.inputs.levels import level_row
from conformal_frames.inputs.sets import Label
from conformal_frames.inputs.target import Target, TargetMetric, target
from conformal_frames.numerics.stats import ratio

__all__ = ["auarc", "auroc", "excess_risk_target_coverage"]
#: factories that become ``.conformal`` methods (``excess_risk_target_coverage``
#: takes the frame itself: it is eager-only)
METHODS = ["auroc", "auarc"]
#: functions of a frame that become ``.conformal`` methods
FRAME_METHODS = ["excess_risk_target_coverage"]

F64 = nw.Float64


def _inputs(q: Query, y: str, score: str) -> tuple[str, str]:
    c = binary_row(q, y)
    s = q.row(("value", score), q.number(score))
    return c, s


# ---------------------------------------------------------------------------
# AUROC
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class AUROC(Metric):
    y: str
    score: str
    weights: str | None = None
    counts: str | None = None
    default_name = "auroc"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        c, s = _inputs(q, self.y, self.score)
        # weighted: the same table of per-score sums, of w c and w (W1 W0 the totals)
        w = q.weighting(self.weights, counts=self.counts)
        one = q.row(("one",), nw.lit(1.0)) if w.row is None else w.row
        wc = w.of(c)
        t = q.cells(("auroc", wc, s), _mann_whitney_table(wc, one), order=s, sums=(wc, one))
        n1 = w.sum(c)
        return {"": ratio(t.col("u"), n1 * (w.total - n1))}


def _mann_whitney_table(c: str, one: str) -> TableFn:
    """Per group: the Mann-Whitney ``U`` from per-(group, distinct score) counts.

    With ``p_k`` correct and ``m_k`` incorrect rows at the ``k``-th distinct
    score and ``M_k`` incorrect rows at smaller scores,
    ``U = sum_k p_k (M_k + m_k / 2)`` (ties count one half): integers and
    halves, exact in Float64 (the correctly rounded ``U``).
    """

    def build(cells: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        p, m, u = nw.col(c), nw.col(one) - nw.col(c), ref.name("u")
        # M_k + m_k = the incorrect rows at scores up to the k-th
        upto = nw.col(running_total(one)) - nw.col(running_total(c))
        cells = cells.with_columns((p * (upto - 0.5 * m)).alias(u))
        return aggregate(cells, keys, [nw.col(u).sum().alias(u)])

    return build


@renamed(correct="y", confidence="score")
def auroc(y: Column, score: Column, *, weights: Column | None = None, counts: Column | None = None) -> AUROC:
    """Area under the ROC curve of the confidence ``score`` for predicting ``y`` (correct).

    The Mann-Whitney form: with ``n1`` correct and ``n0`` incorrect rows in
    the group and ``R1`` the sum of the mid-ranks (ties get the average rank)
    of the confidences of the correct rows,

    ``auroc = (R1 - n1 (n1 + 1) / 2) / (n1 n0)``,

    the probability that a random correct row is more confident than a random
    incorrect one, ties counting one half.  Equal to
    ``sklearn.metrics.roc_auc_score(y, score)`` and to the numpy
    baseline's ``auroc`` up to the last bit (the sum of mid-ranks is exact:
    this is the correctly rounded ``U / (n1 n0)``; scikit-learn integrates the
    ROC curve with the trapezoid rule).  **Null** when the group has only correct or only
    incorrect rows (the baseline raises; inside a grouped evaluation a null
    keeps the other groups).

    Parameters
    ----------
    y : Column
        Column of 0/1 (or boolean) correctness / coverage indicators.
    score : Column
        Column of confidences (any finite numbers; higher = more confident).
    weights : Column, optional
        Column of non-negative row weights: the weighted probability
        ``sum_{i correct, j incorrect} w_i w_j (1[s_i > s_j] + 1[s_i = s_j] / 2)
        / (W1 W0)``, equal to ``roc_auc_score(y, score, sample_weight=w)``
        (see the docs page "Weights").
    counts : Column, optional
        Column of frequency counts (non-negative integers): a row stands for
        ``k`` identical rows; every output is that of the repeated rows (see
        the docs page "Weights").

    Returns
    -------
    AUROC
        A metric object; evaluate it with ``df.conformal.auroc(...)``,
        ``df.conformal.evaluate(...)`` or :func:`conformal_frames.evaluate`.

    Examples
    --------
    >>> import pandas as pd
    >>> import conformal_frames
    >>> df = pd.DataFrame({"correct": [1, 1, 0, 0, 1], "conf": [0.9, 0.8, 0.2, 0.8, 0.1]})
    >>> df.conformal.auroc("correct", "conf")
    0.5833333333333334

    References
    ----------
    J. A. Hanley and B. J. McNeil (1982), "The meaning and use of the area
    under a receiver operating characteristic (ROC) curve", Radiology 143,
    29-36.
    """
    return AUROC(y=role(y), score=role(score), weights=role(weights), counts=role(counts))


# ---------------------------------------------------------------------------
# AUARC
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class AUARC(Metric):
    y: str
    score: str
    default_name = "auarc"
    mergeable_alternative = "auroc"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        c, s = _inputs(q, self.y, self.score)
        sc = nw.col(s)
        key = (s, c)
        # rows of the group with a larger confidence (K0), and up to the end of the tie block
        above = q.row(("arc_above", *key), q.over(sc.rank("min", descending=True)).cast(F64) - 1.0, inputs=key)
        upto = q.row(("arc_upto", *key), q.over(sc.rank("max", descending=True)).cast(F64), inputs=key)
        # the same among the rows with the same correctness
        same_above = q.row(
            ("arc_same_above", *key), q.over(sc.rank("min", descending=True), c).cast(F64) - 1.0, inputs=key
        )
        same_upto = q.row(("arc_same_upto", *key), q.over(sc.rank("max", descending=True), c).cast(F64), inputs=key)
        # position of the row in the order of decreasing confidence (1..n); a tie
        # block of m rows after K0 others takes positions K0+1..K0+m in any order
        pos = q.row(("arc_pos", *key), q.over(sc.rank("ordinal", descending=True)).cast(F64), inputs=key)
        a, u, sa, su, k = (nw.col(x) for x in (above, upto, same_above, same_upto, pos))
        is_c = nw.col(c) == 1.0
        # correct rows above the block (C0) and correct rows up to the end of the block
        c0 = nw.when(is_c).then(sa).otherwise(a - sa)
        c_upto = nw.when(is_c).then(su).otherwise(u - su)
        m = u - a
        p = (c_upto - c0) / m  # accuracy inside the tie block
        # expected accuracy of the k most confident rows over the orders of the block
        term = q.row(("arc_term", *key), (c0 + (k - a) * p) / k, inputs=[above, upto, same_above, same_upto, pos, c])
        return {"": ratio(q.sum(term), q.n)}


@no_weights("auarc")
@renamed(correct="y", confidence="score")
def auarc(y: Column, score: Column) -> AUARC:
    """Area under the accuracy-rejection curve (higher is better).

    Rows are retained in order of decreasing confidence; ``acc_k`` is the
    accuracy of the ``k`` most confident rows and

    ``auarc = (1/n) * sum_{k=1..n} acc_k``.

    **Ties.**  When confidences tie, "the ``k`` most confident" is ambiguous;
    the numpy baseline takes the tied rows in input order (a stable sort), so
    its value depends on row order.  Here a block of ``m`` tied rows, after
    ``K0`` more confident rows of which ``C0`` are correct and with ``p`` the
    accuracy inside the block, contributes its *expected* accuracy over every
    order of the block: ``acc_{K0+j} = (C0 + j p) / (K0 + j)`` for
    ``j = 1..m``.  Without ties this is exactly the baseline's value; with
    ties it is the mean of the baseline's value over all orders of the tied
    rows, and it does not depend on row order or backend.

    Parameters
    ----------
    y : Column
        Column of 0/1 (or boolean) correctness indicators.
    score : Column
        Column of confidences (any finite numbers; higher = more confident).

    Returns
    -------
    AUARC
        A metric object.  ``df.conformal.auarc(...)`` returns a float on an
        eager frame without ``by=``, otherwise a frame of the caller's type
        with the group keys, ``auarc`` and ``n`` (lazy in, lazy out);
        :func:`~conformal_frames.evaluate` combines it with other metrics.

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"correct": [0, 0, 1, 1], "conf": [0.1, 0.2, 0.8, 0.9]})
    >>> df.conformal.auarc("correct", "conf")
    0.7916666666666666

    References
    ----------
    M. S. A. Nadeem, J.-D. Zucker and B. Hanczar (2009), "Accuracy-rejection
    curves (ARCs) for comparing classification methods with a reject option",
    PMLR 8, 65-81.
    """
    return AUARC(y=role(y), score=role(score))


# ---------------------------------------------------------------------------
# excess risk of the target coverage (eager, scikit-learn)
# ---------------------------------------------------------------------------
def _l1_miscoverage(pred: np.ndarray, cover: np.ndarray, target: float) -> np.ndarray:
    """covmetrics' L1 miscoverage loss (0 where ``pred == target``)."""
    return np.where(pred < target, cover - target, np.where(pred > target, target - cover, 0.0))


def ert_numpy(
    x: np.ndarray,
    cover: np.ndarray,
    confidence_level: float,
    *,
    model: Any = None,
    n_splits: int = 5,
    random_state: int = 42,
) -> float:
    """Excess risk of the target coverage of one group (numpy in, float out).

    ``KFold(n_splits, shuffle=True, random_state)``; on each fold a clone of
    ``model`` is fitted on the training rows and predicts
    ``P(covered | x)`` (``predict_proba[:, 1]``) on the test rows; the fold's
    value is ``mean(L(target)) - mean(L(pred))`` with the L1 miscoverage loss
    ``L(pred, c) = c - t if pred < t, t - c if pred > t, 0 if pred == t``
    (``t = confidence_level``; zero for the constant predictor ``t``), so the
    fold's value is ``-mean(L(pred, c))`` over its test rows.  The folds' values are averaged.  A training fold
    whose rows are all covered (or all uncovered) predicts that constant
    probability (1 or 0) without fitting.
    """
    from sklearn.base import clone
    from sklearn.model_selection import KFold

    if model is None:
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(random_state=random_state)
    t = confidence_level
    values = []
    for train, test in KFold(n_splits=n_splits, shuffle=True, random_state=random_state).split(x):
        c_train = cover[train]
        if np.all(c_train == c_train[0]):
            pred = np.full(len(test), float(c_train[0]))
        else:
            fitted = clone(model).fit(x[train], c_train)
            if hasattr(fitted, "predict_proba"):
                proba = np.asarray(fitted.predict_proba(x[test]), dtype=float)
                classes = list(np.asarray(fitted.classes_, dtype=float))
                pred = proba[:, classes.index(1.0)]
            else:
                pred = np.clip(np.asarray(fitted.predict(x[test]), dtype=float), 1e-5, 1 - 1e-5)
        # the constant predictor t has loss 0 on every row
        values.append(0.0 - float(np.mean(_l1_miscoverage(pred, cover[test], t))))
    return float(np.mean(values))


@no_weights("excess_risk_target_coverage")
@renamed(random_state="seed")
def excess_risk_target_coverage(
    frame: Any,
    y: Column,
    lo: Column | None = None,
    hi: Column | None = None,
    *,
    features: Sequence[Column],
    confidence_level: float | str,
    sets: Column | Sequence[Column] | None = None,
    classes: Sequence[Label] | None = None,
    by: str | Sequence[str] | None = None,
    model: Any = None,
    n_splits: int = 5,
    seed: int = 42,
    invalid: InvalidPolicy | None = None,
) -> Any:
    """Excess risk of the target coverage (ERT) of Braun et al. (2025).

    A row is *covered* when ``lo <= y <= hi`` (intervals) or ``y`` is in its
    prediction set (``sets=``, ``classes=`` optional with a list column, as in
    :mod:`conformal_frames.metrics.sets`).  A classifier (default
    ``HistGradientBoostingClassifier(random_state=seed)``, or a clone
    of ``model``) learns ``P(covered | features)`` with ``n_splits``-fold
    cross-validation (``KFold(shuffle=True, random_state=seed)``); the
    ERT is how much lower its L1 miscoverage loss is than the loss of the
    constant prediction ``confidence_level`` (see :func:`ert_numpy`).  About
    0 when coverage does not depend on the features; positive when some
    region is over- or under-covered.  Same definition as the numpy
    baseline's ``excess_risk_target_coverage`` with its default loss.

    **Eager only** (it fits a model): a lazy frame raises
    ``NotImplementedError``; collect it first.  Needs scikit-learn
    (``pip install conformal-frames[sklearn]``).

    Parameters
    ----------
    frame
        An eager frame (pandas, polars, pyarrow-backed pandas...).
    y, lo, hi : Column
        Observed value and interval bounds (intervals); or ``y`` with ``sets=``.
    features : list of Column
        Numeric feature columns the classifier uses (missing / NaN / infinite
        values are an error).
    confidence_level : float or str
        The target coverage, in (0, 1); or the name of a ``by=`` column
        holding each group's target.
    sets, classes
        Prediction sets instead of intervals.
    by : str or list of str, optional
        Group columns: one ERT per group (cross-validated inside the group);
        groups with fewer than ``n_splits`` rows get a null ERT.
    model : scikit-learn classifier, optional
        An unfitted classifier; cloned for every fold.
    n_splits : int, default 5
        Number of cross-validation folds (at least 2).
    seed : int, default 42
        Seed of the fold split (and of the default classifier).
    invalid : {"raise", "drop", "null"}, optional
        The invalid-row policy, as in :func:`conformal_frames.evaluate`
        (default ``"raise"``: the input is eager).

    Returns
    -------
    float or frame
        A float (ungrouped), or a frame of the caller's type: group keys,
        ``excess_risk_target_coverage``, ``n``, sorted by the keys.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sklearn.dummy import DummyClassifier
    >>> import conformal_frames as cf
    >>> y = np.arange(12.0)
    >>> odd = np.arange(12) % 2 == 1  # odd rows are not covered
    >>> df = pd.DataFrame({"x": y, "y": y, "lo": np.where(odd, y + 1.0, y - 0.1),
    ...                    "hi": np.where(odd, y + 2.0, y + 0.1)})
    >>> cf.excess_risk_target_coverage(df, "y", "lo", "hi", features=["x"], confidence_level=0.5,
    ...     model=DummyClassifier(strategy="prior"), n_splits=2)
    -0.16666666666666666

    References
    ----------
    S. Braun, D. Holzmueller, M. I. Jordan and F. Bach (2025), "Conditional
    coverage diagnostics for conformal prediction", arXiv:2512.11779.
    """
    lf, eager = to_lazy(frame)
    if not eager:
        msg = (
            "excess_risk_target_coverage fits a classifier and is eager-only; got a lazy "
            f"{type(nw.to_native(lf)).__name__}: collect it first (e.g. .collect(), .df(), .toPandas())"
        )
        raise BackendLimitError(msg, backend=backend_name(lf))
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "excess_risk_target_coverage needs scikit-learn: pip install 'conformal-frames[sklearn]'"
        raise ImportError(msg) from exc
    metric = ExcessRisk(
        target=target(y, lo, hi, sets, classes, metric="excess_risk_target_coverage"),
        features=check_columns(features, "features"),
        level=check_level(confidence_level),
        model=model,
        n_splits=check_positive_int(n_splits, "n_splits", at_least=2),
        seed=seed,
        grouped=by is not None,
    )
    return evaluate_one(lf.collect(), metric, by=by, invalid=invalid)


@dataclass(frozen=True, kw_only=True, eq=False)
class ExcessRisk(TargetMetric):
    """ERT per group: a per-group numpy step of the core (all rows of a group)."""

    target: Target = checked(instance_of(Target))
    features: tuple[str, ...]
    level: float | str = checked(FIELD_CHECKS["confidence_level"])
    model: Any = checked(check_classifier)
    n_splits: int
    seed: int
    grouped: bool = checked(check_boolean)
    default_name = "excess_risk_target_coverage"
    mergeable_alternative = "coverage and auroc"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        cover = self.target.covered(q)
        feats = [q.row(("value", f), q.number(f)) for f in self.features]
        level = level_row(q, self.level)  # a by= key: constant within each group

        def per_group(group: np.ndarray, n_groups: int, data: dict[str, np.ndarray]) -> np.ndarray:
            x_all = np.column_stack([data[f] for f in feats]) if len(group) else np.empty((0, len(feats)))
            c_all = data[cover]
            if not self.grouped and len(c_all) < self.n_splits:
                msg = f"excess_risk_target_coverage needs at least n_splits={self.n_splits} rows, got {len(c_all)}"
                raise ValueError(msg)
            out = np.full(n_groups, np.nan)
            for g in range(n_groups):
                idx = np.flatnonzero(group == g)
                if len(idx) >= self.n_splits:
                    out[g] = ert_numpy(
                        x_all[idx],
                        c_all[idx],
                        float(data[level][idx[0]]) if level is not None else float(self.level),
                        model=self.model,
                        n_splits=self.n_splits,
                        random_state=self.seed,
                    )
            return out

        q.per_group(
            self.output_name,
            [cover, *feats, *([level] if level is not None else [])],
            per_group,
            what="excess_risk_target_coverage (fits a classifier per group)",
        )
        return {"": None}
