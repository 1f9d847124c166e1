"""Coverage targets: what "covered" means for a row, ``y`` in ``[lo, hi]`` or ``y`` in a prediction set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames._validate import checked, optional, validate_fields
from conformal_frames.engine import Metric, Query
from conformal_frames.inputs.intervals import (
    MULTI_OUTPUT,
    Columns,
    check_outputs,
    covered_row,
    interval_outputs,
    one_output,
)
from conformal_frames.inputs.sets import SetSpec, prepared, set_covered_row, set_spec

__all__ = ["Target", "TargetMetric", "target"]


# ---------------------------------------------------------------------------
# what "covered" means: intervals or sets
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The covered indicator's inputs: ``y`` with ``(lo, hi)`` or with a set.

    Intervals of several outputs: ``y``, ``lo``, ``hi`` tuples of columns (joint coverage).
    """

    y: Columns = checked(check_outputs)
    lo: Columns | None = checked(optional(check_outputs), None)
    hi: Columns | None = checked(optional(check_outputs), None)
    sets: SetSpec | None = None

    def __post_init__(self) -> None:
        validate_fields(self)

    def covered(self, q: Query) -> str:
        if self.sets is not None:
            assert isinstance(self.y, str)  # one label column (target() checks it)
            return set_covered_row(q, self.y, self.sets)
        assert self.lo is not None and self.hi is not None
        return covered_row(q, self.y, self.lo, self.hi)


class TargetMetric(Metric):
    """A metric of the covered indicator: a pandas list column of dtype object is
    converted first; without classes, ``y in set`` is computed row by row."""

    target: Target

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        sets, y = self.target.sets, self.target.y
        return prepared(frame, sets, y) if sets is not None and isinstance(y, str) else frame


def target(y: Any, lo: Any, hi: Any, sets: Any, classes: Any, *, metric: str) -> Target:
    """The target of ``metric``: intervals (lists of columns for several outputs where ``metric`` takes them) or sets."""
    check_outputs(y, "y")
    interval = lo is not None or hi is not None
    if interval and sets is not None:
        msg = "pass either lo= and hi= (intervals) or sets= (prediction sets), not both"
        raise ValueError(msg)
    if sets is not None:
        if not isinstance(y, str):
            msg = f"{metric}: with sets=, y is one column (the true label), got {list(y)!r}"
            raise TypeError(msg)
        return Target(y=y, sets=set_spec(sets, classes))
    if lo is None or hi is None:
        msg = "pass lo= and hi= (prediction intervals) or sets= (prediction sets)"
        raise ValueError(msg)
    if classes is not None:
        msg = "classes= only applies to prediction sets (sets=)"
        raise ValueError(msg)
    if metric not in MULTI_OUTPUT:
        for role, value in (("y", y), ("lo", lo), ("hi", hi)):
            one_output(metric)(value, role)
    interval_outputs(metric, y=y, lo=lo, hi=hi)
    return Target(y=y, lo=lo, hi=hi)
