"""Log scores: the log loss of binary probabilities and the Gaussian log score.

Both are means over the rows of a group of a negative log likelihood (lower
is better), weighted by ``weights=`` and repeated by ``counts=``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._validate import check_column, checked
from conformal_frames.engine import Metric, Query
from conformal_frames.inputs.binary import binary_row, score_precision, score_row
from conformal_frames.inputs.forecasts import gaussian_z
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
        p = nw.col(s).clip(lower_bound=eps, upper_bound=1.0 - eps)
        loss = -nw.when(nw.col(t) == 1.0).then(p.log()).otherwise((1.0 - p).log())
        row = q.row(("log_loss", t, s, eps), loss, inputs=[t, s])
        w = q.weighting(self.weights, counts=self.counts)
        return {"": ratio(w.sum(row), w.total)}


def log_loss(y: str, score: str, *, weights: str | None = None, counts: str | None = None) -> LogLoss:
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

    Parameters
    ----------
    y : str
        0/1 label (numeric or Boolean).
    score : str
        Predicted probability of ``y = 1``, in [0, 1].
    weights : str, optional
        Column of non-negative row weights (scikit-learn's ``sample_weight``).
    counts : str, optional
        Column of frequency counts (non-negative integers).

    Returns
    -------
    LogLoss
        A metric object (output ``log_loss``).

    Examples
    --------
    >>> import polars as pl
    >>> import conformal_frames
    >>> df = pl.DataFrame({"y": [1, 0, 1, 1], "p": [0.9, 0.2, 0.6, 0.99]})
    >>> round(df.conformal.log_loss("y", "p"), 6)
    0.212345
    """
    return LogLoss(y=y, score=score, weights=weights, counts=counts)


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


def log_score(y: str, *, mean: str, std: str, weights: str | None = None, counts: str | None = None) -> LogScore:
    """Gaussian log score: the mean negative log density of ``y`` under ``N(mean, std^2)``.

    ``(1/n) sum_i [ z_i^2 / 2 + log std_i + log(2 pi) / 2 ]`` with
    ``z_i = (y_i - mean_i) / std_i``: the closed form, never the log of a
    density that underflows, so it stays exact far in the tail (``z = 40``
    gives ``800.92`` where ``-log(pdf)`` is infinite).  Equal to
    ``-scipy.stats.norm.logpdf(y, mean, std)`` averaged and to scoringrules'
    ``logs_normal``.  ``std <= 0`` is an invalid row.

    Parameters
    ----------
    y : str
        Observed value.
    mean, std : str
        Columns of the forecast's mean and standard deviation (> 0).
    weights : str, optional
        Column of non-negative row weights.
    counts : str, optional
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
    return LogScore(y=y, mean=mean, std=std, weights=weights, counts=counts)
