"""Log scores: the log loss of binary or class probabilities and the Gaussian log score.

Both are means over the rows of a group of a negative log likelihood (lower
is better), weighted by ``weights=`` and repeated by ``counts=``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._roles import Column, role
from conformal_frames._validate import check_column, checked
from conformal_frames.engine import Metric, Query, total
from conformal_frames.inputs.binary import binary_row, score_precision, score_row
from conformal_frames.inputs.forecasts import gaussian_z
from conformal_frames.inputs.probabilities import (
    Probs,
    ProbsMetric,
    binary_or_classes,
    probability_rows,
    probs_field,
    probs_precision,
)
from conformal_frames.inputs.sets import Label, label_exprs
from conformal_frames.numerics.stats import ratio

__all__ = ["log_loss", "log_score"]
METHODS = list(__all__)

#: the probability clip of scikit-learn's log_loss: the machine epsilon of the score's dtype
EPS = {"float64": float(np.finfo(np.float64).eps), "float32": float(np.finfo(np.float32).eps)}
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True, kw_only=True)
class LogLoss(Metric):
    y: str
    score: str
    weights: str | None = None
    counts: str | None = None
    default_name = "log_loss"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        t, s = binary_row(q, self.y), score_row(q, self.score)
        eps = EPS[score_precision(q, self.score)]
        # the clipped score as a column: narwhals' log on Spark repeats its argument in guards
        p = q.row(("clipped", s, eps), nw.col(s).clip(lower_bound=eps, upper_bound=1.0 - eps), inputs=[s])
        loss = -nw.when(nw.col(t) == 1.0).then(nw.col(p).log()).otherwise((1.0 - nw.col(p)).log())
        row = q.row(("log_loss", t, s, eps), loss, inputs=[t, p])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


@dataclass(frozen=True, kw_only=True)
class MulticlassLogLoss(ProbsMetric):
    y: str
    probs: Probs = checked(probs_field)
    classes: tuple[Label, ...]
    weights: str | None = None
    counts: str | None = None
    default_name = "log_loss"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        p_rows = probability_rows(q, self.probs, self.classes, sums_to_one=True)
        eq_rows = [
            q.row(("label_eq", self.y, c), e) for c, e in zip(self.classes, label_exprs(q, self.y, self.classes))
        ]
        eps = EPS[probs_precision(q, self.probs)]
        # scikit-learn's xlogy(1[y = c_k], clip(p_k)): the terms of the other classes are exactly 0
        terms = [
            nw.col(e) * nw.col(p).clip(lower_bound=eps, upper_bound=1.0 - eps).log() for e, p in zip(eq_rows, p_rows)
        ]
        row = q.row(
            ("log_loss_classes", self.y, self.probs, self.classes, eps), -total(terms), inputs=[*eq_rows, *p_rows]
        )
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


def log_loss(
    y: Column,
    score: Column | Sequence[Column] | None = None,
    *,
    probs: Column | Sequence[Column] | None = None,
    classes: Sequence[Label] | None = None,
    weights: Column | None = None,
    counts: Column | None = None,
) -> LogLoss | MulticlassLogLoss:
    """Log loss (cross-entropy) of a binary probability: ``-(1/n) sum_i log p_i(y_i)``.

    ``p_i(1) = score_i``, ``p_i(0) = 1 - score_i``.  As scikit-learn's
    ``log_loss`` (version 1.5 and later) the score is first clipped to
    ``[eps, 1 - eps]`` with ``eps`` the machine epsilon of the score's dtype
    (``2.2e-16`` for Float64, ``1.2e-7`` for Float32): a confident wrong
    forecast (``score = 0``, ``y = 1``) costs ``-log(eps) = 36.04`` instead
    of an infinite loss, so one such row does not make the mean infinite,
    yet it dominates a mean of typical losses; count such rows if they matter.
    Equal to ``sklearn.metrics.log_loss(y, score, sample_weight=w)``.
    Labels other than 0 and 1 and scores outside ``[0, 1]`` are invalid rows.

    **Multiclass** (``probs=`` one probability column per class, or a list
    column with ``classes=``; a list of columns as ``score`` is the same):
    ``-(1/n) sum_i log p_i(y_i)`` with ``p_i(c)`` the probability of class
    ``c``, clipped to ``[eps, 1 - eps]`` as above, equal to
    ``sklearn.metrics.log_loss(y, P, labels=classes, sample_weight=w)``.
    A label outside ``classes`` and a row whose probabilities do not sum to 1
    (scikit-learn's tolerance ``1e-8 + sqrt(eps) x total``, the rows it warns
    about) are invalid rows; nothing is renormalised.

    Parameters
    ----------
    y : Column
        0/1 label (numeric or Boolean); with ``classes=``, the class label.
    score : Column or list of Column
        Predicted probability of ``y = 1``, in [0, 1].  A list of columns is
        read as ``probs=``.
    probs : Column or list of Column, optional
        Class probabilities: one column per class in the order of ``classes``
        (default ``0, 1, ..., K-1``), or the name of a list column holding
        them (``classes=`` required).
    classes : list of int or str, optional
        The labels of the classes, in the order of the probabilities.
    weights : Column, optional
        Column of non-negative row weights (scikit-learn's ``sample_weight``).
    counts : Column, optional
        Column of frequency counts (non-negative integers).

    Returns
    -------
    LogLoss or MulticlassLogLoss
        A metric object (output ``log_loss``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1, 0, 1, 1], "p": [0.9, 0.2, 0.6, 0.99]})
    >>> round(df.conformal.log_loss("y", "p"), 6)
    0.212345
    >>> mc = pl.DataFrame({"y": ["a", "b", "c"], "pa": [0.7, 0.2, 0.1], "pb": [0.2, 0.5, 0.3], "pc": [0.1, 0.3, 0.6]})
    >>> round(mc.conformal.log_loss("y", probs=["pa", "pb", "pc"], classes=["a", "b", "c"]), 6)
    0.520216
    """
    multiclass = binary_or_classes("log_loss", score, probs, classes)
    if multiclass is not None:
        cols, labels = multiclass
        return MulticlassLogLoss(y=role(y), probs=cols, classes=labels, weights=role(weights), counts=role(counts))
    return LogLoss(y=role(y), score=check_column(score, "score"), weights=role(weights), counts=role(counts))


@dataclass(frozen=True, kw_only=True)
class LogScore(Metric):
    y: str
    mean: str = checked(check_column)
    std: str = checked(check_column)
    weights: str | None = None
    counts: str | None = None
    default_name = "log_score"

    def build(self, q: Query) -> dict[str, nw.Expr | None]:
        z, sd = gaussian_z(q, self.y, self.mean, self.std)
        expr = 0.5 * nw.col(z) ** 2 + nw.col(sd).log() + _HALF_LOG_2PI
        row = q.row(("gauss_log_score", z, sd), expr, inputs=[z, sd])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


def log_score(
    y: Column, *, mean: Column, std: Column, weights: Column | None = None, counts: Column | None = None
) -> LogScore:
    """Gaussian log score: the mean negative log density of ``y`` under ``N(mean, std^2)``.

    ``(1/n) sum_i [ z_i^2 / 2 + log std_i + log(2 pi) / 2 ]`` with
    ``z_i = (y_i - mean_i) / std_i``: the closed form, never the log of a
    density that underflows, so it stays exact far in the tail (``z = 40``
    gives ``800.92`` where ``-log(pdf)`` is infinite).  Equal to
    ``-scipy.stats.norm.logpdf(y, mean, std)`` averaged and to scoringrules'
    ``logs_normal``.  ``std <= 0`` is an invalid row.

    Parameters
    ----------
    y : Column
        Observed value.
    mean, std : Column
        Columns of the forecast's mean and standard deviation (> 0).
    weights : Column, optional
        Column of non-negative row weights.
    counts : Column, optional
        Column of frequency counts (non-negative integers).

    Returns
    -------
    LogScore
        A metric object (output ``log_score``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [0.0, 2.0], "mu": [0.0, 0.0], "sd": [1.0, 1.0]})
    >>> round(df.conformal.log_score("y", mean="mu", std="sd"), 6)
    1.918939
    """
    return LogScore(y=role(y), mean=role(mean), std=role(std), weights=role(weights), counts=role(counts))
