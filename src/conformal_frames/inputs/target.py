"""Coverage targets: what "covered" means for a row, ``y`` in ``[lo, hi]`` or ``y`` in a prediction set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import narwhals.stable.v2 as nw

from conformal_frames._validate import check_column, checked, optional, validate_fields
from conformal_frames.engine import Metric, Query
from conformal_frames.inputs.intervals import covered_row
from conformal_frames.inputs.sets import SetSpec, prepared, set_covered_row, set_spec

__all__ = ["Target", "TargetMetric", "target"]


# ---------------------------------------------------------------------------
# what "covered" means: intervals or sets
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """The covered indicator's inputs: ``y`` with ``(lo, hi)`` or with a set."""

    y: str
    lo: str | None = checked(optional(check_column), None)
    hi: str | None = checked(optional(check_column), None)
    sets: SetSpec | None = None

    def __post_init__(self) -> None:
        validate_fields(self)

    def covered(self, q: Query) -> str:
        if self.sets is not None:
            return set_covered_row(q, self.y, self.sets)
        assert self.lo is not None and self.hi is not None
        return covered_row(q, self.y, self.lo, self.hi)


class TargetMetric(Metric):
    """A metric of the covered indicator: a pandas list column of dtype object is
    converted first; without classes, ``y in set`` is computed row by row."""

    target: Target

    def prepare(self, frame: nw.LazyFrame) -> nw.LazyFrame:
        sets = self.target.sets
        return prepared(frame, sets, self.target.y) if sets is not None else frame


def target(y: str, lo: str | None, hi: str | None, sets: Any, classes: Any) -> Target:
    check_column(y, "y")
    interval = lo is not None or hi is not None
    if interval and sets is not None:
        msg = "pass either lo= and hi= (intervals) or sets= (prediction sets), not both"
        raise ValueError(msg)
    if sets is not None:
        return Target(y=y, sets=set_spec(sets, classes))
    if lo is None or hi is None:
        msg = "pass lo= and hi= (prediction intervals) or sets= (prediction sets)"
        raise ValueError(msg)
    if classes is not None:
        msg = "classes= only applies to prediction sets (sets=)"
        raise ValueError(msg)
    return Target(y=y, lo=lo, hi=hi)
