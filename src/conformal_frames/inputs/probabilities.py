"""Class probabilities: one probability column per class, or one list column, with ``classes=``.

The multiclass metrics (top-label, confidence and class-wise ECE, the
multiclass log loss, Brier score and ranked probability score) read their
class probabilities here.  Two forms:

- ``probs=["p_a", "p_b", "p_c"]``: one column per class, in the order of
  ``classes=`` (default ``0, 1, ..., K-1``);
- ``probs="p"`` with ``classes=``: a list column (a polars List or Array, an
  Arrow list, or a pandas column of lists or arrays) holding the ``K``
  probabilities of each row in the order of ``classes=``.  A list of another
  length than ``K`` is an invalid row.

Each probability is a number in ``[0, 1]`` (outside: an invalid row).  The
proper scores also need each row to sum to 1 (:func:`probability_rows` with
``sums_to_one=True``): a row whose
total differs from 1 by more than scikit-learn's tolerance (``1e-8 +
sqrt(eps) |total|``, ``eps`` the machine epsilon of the probabilities' dtype,
the rows its ``log_loss`` warns about) is an invalid row, under the
evaluation's ``invalid=`` policy.
"""

from __future__ import annotations

import math
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames._roles import is_expression
from conformal_frames._validate import check_classes, check_columns, fail
from conformal_frames.engine import Metric, Query, total
from conformal_frames.inputs.binary import Precision, score_precision, score_row
from conformal_frames.inputs.sets import Label, arrow_lists

__all__ = [
    "Probs",
    "ProbsMetric",
    "binary_or_classes",
    "check_probs",
    "length_column",
    "prepared",
    "probability_rows",
    "probs_field",
    "probs_precision",
]

#: class probabilities: a list column's name, or one column per class
Probs = str | tuple[str, ...]


def check_probs(probs: Any, classes: Any) -> tuple[Probs, tuple[Label, ...]]:
    """Validate ``probs`` and ``classes``: a list of columns (classes default ``0 .. K-1``) or a list column with ``classes``.

    >>> check_probs(["pa", "pb"], ["a", "b"])
    (('pa', 'pb'), ('a', 'b'))
    >>> check_probs("p", [0, 1, 2])
    ('p', (0, 1, 2))
    """
    if isinstance(probs, str):
        if classes is None:
            msg = (
                f"probs={probs!r} names one column: a list column of class probabilities needs classes= "
                "(the labels of its positions, in order, e.g. classes=[0, 1, 2]); or pass one column per class"
            )
            raise TypeError(msg)
        return probs, check_classes(classes)
    if probs is None:
        fail(TypeError, "probs", "a list of probability column names (one per class) or a list column's name", probs)
    cols = check_columns(probs, "probs")
    labels = check_classes(list(range(len(cols))) if classes is None else classes)
    if len(labels) != len(cols):
        msg = f"mismatched classes and probability columns: {len(cols)} columns {list(cols)!r} but {len(labels)} classes {list(labels)!r}"
        raise ValueError(msg)
    return cols, labels


def binary_or_classes(metric: str, score: Any, probs: Any, classes: Any) -> tuple[Probs, tuple[Label, ...]] | None:
    """The form of a metric with a binary and a multiclass form: ``None`` for the binary one, else the classes.

    Binary: ``score=`` one column or expression (the probability of ``y = 1``)
    and neither ``probs=`` nor ``classes=``.  Multiclass: ``probs=`` (or a
    list of columns given as ``score``) with ``classes=`` where needed
    (:func:`check_probs`).

    >>> binary_or_classes("brier", "p", None, None) is None
    True
    >>> binary_or_classes("brier", ["pa", "pb"], None, ["a", "b"])
    (('pa', 'pb'), ('a', 'b'))
    """
    binary = score is None or isinstance(score, str) or is_expression(score)
    if probs is None and classes is None and binary:
        if score is None:
            msg = f"{metric} needs score= (the probability of y = 1) or probs= (one probability per class)"
            raise TypeError(msg)
        return None
    if probs is not None and score is not None:
        msg = f"{metric}: give score= (a binary probability) or probs= (class probabilities), not both"
        raise ValueError(msg)
    return check_probs(score if probs is None else probs, classes)


def length_column(name: str) -> str:
    """The frame column :func:`prepared` adds: the length of each list of ``name``."""
    return f"__cf_probs_len[{name}]"


def prepared(frame: nw.LazyFrame, probs: Probs, k: int) -> nw.LazyFrame:
    """The frame the list form needs: pandas object lists as Arrow lists, each list's length in
    :func:`length_column`, and the lists of another length than ``k`` replaced by null
    (``list.get`` out of bounds fails on polars, pyarrow and ANSI Spark)."""
    if not isinstance(probs, str):
        return frame
    frame = arrow_lists(frame, [probs])
    dtype = frame.collect_schema().get(probs)
    if not isinstance(dtype, (nw.List, nw.Array)):
        return frame  # the build refuses it with the role's message
    col = nw.col(probs).cast(nw.List(dtype.inner)) if isinstance(dtype, nw.Array) else nw.col(probs)
    length = col.list.len()
    return frame.with_columns(length.alias(length_column(probs)), nw.when(length == k).then(col).alias(probs))


def probs_field(value: Any, name: str = "probs") -> Probs:
    """The ``probs`` field of a metric object: a list column's name or distinct column names."""
    return value if isinstance(value, str) else check_columns(value, name)


def _list_column(q: Query, name: str, k: int) -> nw.Expr:
    col, dtype = q.column(name), q.schema[name]
    if isinstance(dtype, nw.Array):  # a frame that was not prepared (output names, definitions)
        col, dtype = col.cast(nw.List(dtype.inner)), nw.List(dtype.inner)
    if not isinstance(dtype, nw.List) or not (dtype.inner.is_numeric() or dtype.inner == nw.Unknown):
        msg = (
            f"probs column {name!r} must be a list column of probabilities (polars List/Array, Arrow list, "
            f"or a pandas column of lists/arrays), found dtype {dtype}; "
            "alternatively pass one probability column per class, probs=['p0', 'p1', ...]"
        )
        raise TypeError(msg)
    prepared_length = length_column(name)
    length = q.column(prepared_length) if prepared_length in q.schema else col.list.len()
    q.check(f"probs column {name!r} has missing values", length.is_null())
    q.check(f"probs column {name!r} has lists of another length than the {k} classes", length != k)
    return col


def _probability_exprs(q: Query, probs: Probs, classes: tuple[Label, ...]) -> list[nw.Expr]:
    """The probability of each class as an expression of the input frame (checked within ``[0, 1]``)."""
    if not isinstance(probs, str):
        exprs = []
        for p in probs:
            score_row(q, p)  # registers the checks of a score column
            exprs.append(q.number(p))
        return exprs
    col = _list_column(q, probs, len(classes))
    exprs = []
    for i, c in enumerate(classes):
        value = col.list.get(i).cast(nw.Float64)
        what = f"probs column {probs!r} (position {i}, class {c!r})"
        q.check(f"{what} has missing (null/NaN) or infinite values", value.is_null() | ~value.is_finite())
        q.check(f"{what} has values outside [0, 1]", (value < 0.0) | (value > 1.0))
        exprs.append(value)
    return exprs


def probability_rows(q: Query, probs: Probs, classes: tuple[Label, ...], *, sums_to_one: bool = False) -> list[str]:
    """Row columns: the probability of each class (Float64, checked within ``[0, 1]``), in the order of ``classes``.

    With ``sums_to_one``, a row whose probabilities do not sum to 1 is invalid
    (scikit-learn's tolerance, see the module's docstring).
    """
    exprs = _probability_exprs(q, probs, classes)
    if sums_to_one:
        eps = 2.0**-52 if probs_precision(q, probs) == "float64" else 2.0**-23
        s = total(exprs)
        what = f"probs column {probs!r}" if isinstance(probs, str) else f"probability columns {list(probs)!r}"
        tol = f"1e-8 + {math.sqrt(eps):.3g} x total"
        q.check(f"{what} do not sum to 1 (tolerance {tol})", (s - 1.0).abs() > 1e-8 + math.sqrt(eps) * s.abs())
    if isinstance(probs, str):
        return [q.row(("prob_list", probs, i), e) for i, e in enumerate(exprs)]
    return [q.row(("score", p), e) for p, e in zip(probs, exprs)]


def probs_precision(q: Query, probs: Probs) -> Precision:
    """``"float32"`` when the probabilities are single precision."""
    if isinstance(probs, str):
        inner = getattr(q.schema.get(probs), "inner", None)
        return "float32" if inner == nw.Float32 else "float64"
    return score_precision(q, *probs)


class ProbsMetric(Metric):
    """A metric of class probabilities: the list form is prepared first (see :func:`prepared`)."""

    probs: Probs
    classes: tuple[Label, ...]

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        return prepared(frame, self.probs, len(self.classes))

    @property
    def reshapes(self) -> bool:
        """Only the list form is prepared: probability columns keep the compiled-query cache."""
        return isinstance(self.probs, str)
