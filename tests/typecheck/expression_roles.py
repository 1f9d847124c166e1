"""Type-checked by ``mypy`` (pyproject's ``[tool.mypy] files``), its calls run by tests/test_typing.py.

The role parameters read :data:`conformal_frames.Column` (a column name, a
narwhals expression, or a polars expression): each call below type-checks.
A wrong type is still flagged: the lines marked ``# type: ignore[arg-type]``
are errors, and ``warn_unused_ignores`` fails the mypy run if one stops being
one.  ``cfx`` factories take the same roles (their stub reads ``Column`` too).
"""

from __future__ import annotations

from typing import Any

import narwhals.stable.v2 as nw
import polars as pl

import conformal_frames as cf
import conformal_frames.polars as cfx
from conformal_frames.namespace import ConformalNamespace


def typed_calls(df: pl.DataFrame) -> list[Any]:
    """Every call type-checks and runs (``df`` has numeric columns y, lo, hi, p, g)."""
    q: dict[float, str] = {0.05: "lo", 0.95: "hi"}  # a dict of names stays accepted (Mapping)
    role: cf.Column = nw.col("y") * 2
    namespace: ConformalNamespace = cf.conformal(df)
    metrics = [
        cf.coverage(nw.col("y") * 2, "lo", "hi"),
        cf.coverage(pl.col("y") * 2, "lo", nw.col("hi") + 1, weights=nw.col("p")).alias("c2"),
        cf.width("lo", nw.col("hi"), counts=None),
        cf.pinball_loss("y", quantiles=q),
        cf.pinball_loss(role, quantiles={0.05: nw.col("lo"), 0.95: "hi"}).alias("pl2"),
        cf.interval_coverage("y", intervals={0.9: (nw.col("lo"), pl.col("hi"))}),
    ]
    cfx.check(df, metrics[0], by=nw.col("g") % 2)
    return [
        cf.evaluate(df, *metrics, by=nw.col("g") % 2),
        namespace.coverage(pl.col("y") * 2, "lo", "hi"),
        namespace.coverage(["y"], [nw.col("lo")], ["hi"], by=pl.col("g")),
        cf.summarize(df, metrics[0], by="g"),
        cf.naive_scale(df, nw.col("y"), by=["g"], order_by="p"),
        df.select(cfx.coverage("y", "lo", "hi")),
        df.group_by("g").agg(cfx.coverage(pl.col("y") * 2, "lo", nw.col("hi"), weights=pl.col("p"))),
    ]


def flagged() -> None:
    """Never run: each line is a type error that mypy must report."""
    cf.coverage(1, "lo", "hi")  # type: ignore[arg-type]
    cf.coverage("y", "lo", "hi", weights=2.0)  # type: ignore[arg-type]
    cf.pinball_loss("y", quantiles={0.5: 3})  # type: ignore[dict-item]
    cfx.coverage(2.0, "lo", "hi")  # type: ignore[arg-type]
    cf.evaluate(pl.DataFrame(), cf.coverage("y", "lo", "hi"), by=1)  # type: ignore[arg-type]
