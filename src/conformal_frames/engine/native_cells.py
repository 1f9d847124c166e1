"""Memory of the ordered cells in a polars expression (hooks of :mod:`~conformal_frames.engine.native`).

A table of ordered cells (:func:`native._cells_of`) holds a group's cells as a
list of structs, and a step of cell columns read more than once is
materialised as a new list of structs (``list.eval(pl.struct(...))``).  In
``group_by().agg`` every such list holds the cells of all the groups at once,
and each field of a materialised struct costs about two columns of the frame's
length at the peak (measured: 1e7 rows, 1,000 groups, SSC, 0.16 GB a field).
Two rules keep fewer or smaller fields, with the same values:

- :func:`deferred`: a column of a materialised step that is an aggregation of
  the cells (a scalar per group, e.g. SSC's ``n`` and ``scale``: broadcast to
  every cell when stored) or is read at most once after the step (SSC's
  ``prev``) is not stored when every column it reads is: it is computed again
  from the stored columns where it is read (the same operations on the same
  values, so the same numbers);
- :func:`fields`: the row columns summed into cells are carried through
  the sort in less room: a column of ones (``nw.len()`` of the cells, SSC's
  row count) is no field at all, its running total being the row's position
  (``int_range``: exact as a Float64 below 2**53, as the running sum of ones
  is); an indicator ``when(p).then(1.0).otherwise(0.0)`` (SSC's covered
  flag) is the Boolean ``p``, cast back to 0.0/1.0 before its running sum.

Measured (bench/bench_memory.py, 1e7 rows, 1,000 groups, lazy): SSC's peak
above the frame 1.71 -> 1.17-1.33 GB (two runs; the cells alone take about 1.0).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import narwhals.stable.v2 as nw
    import polars as pl

__all__ = ["deferred", "fields", "indicator_of", "is_ones", "recipes", "running", "sort_rows"]

#: the polars aggregations whose value is one per group (a scalar broadcast when stored beside cells)
_SCALARS = (".sum()", ".max()", ".min()", ".mean()", ".len()", ".first()", ".last()")


def is_scalar(native: pl.Expr) -> bool:
    """Whether ``native`` (an expression inside ``list.eval``) ends in an aggregation: one value per list."""
    return str(native.meta.undo_aliases()).endswith(_SCALARS)


def recipes(
    before: Mapping[str, nw.Expr],
    step: Sequence[tuple[str, nw.Expr]],
    live: set[str],
    reads: Callable[[nw.Expr], list[str]],
) -> dict[str, nw.Expr]:
    """The columns that may be computed again after ``step`` (name -> expression), from those ``before`` it.

    A column stays one while nothing it reads is written again; a column of
    ``step`` is one unless it reads a column ``step`` writes (it read the
    previous value, which a stored column would not hold).
    """
    written = {n for n, _ in step}
    out = {n: e for n, e in before.items() if n in live and n not in written and not written & set(reads(e))}
    out |= {n: e for n, e in step if n in live and not written & set(reads(e))}
    return out


def deferred(
    recipes: Mapping[str, nw.Expr],
    keep: Sequence[str],
    counts: Mapping[str, int],
    bind: Mapping[str, pl.Expr],
    reads: Callable[[nw.Expr], list[str]],
) -> list[str]:
    """The columns of ``keep`` (the live columns of a step about to be materialised) not to store.

    ``recipes``: the columns that may be computed again (name -> its
    expression over cell columns), in their order; ``counts``: how often each
    column is read after the step; ``bind``: the columns' polars expressions
    now.  A recipe is left out when it is a scalar or read at most once, and
    every column it reads is stored (or left out before it, in order).
    """
    candidates = [n for n in recipes if n in keep and (counts.get(n, 0) <= 1 or is_scalar(bind[n]))]
    stored = set(keep) - set(candidates)
    out: list[str] = []
    for n in candidates:
        if set(reads(recipes[n])) <= stored | set(out):
            out.append(n)
        else:
            stored.add(n)
    return out if stored else []


def fields(rows: Mapping[str, pl.Expr], sums: Sequence[str]) -> tuple[list[pl.Expr], dict[str, str]]:
    """The fields of the sorted rows for the row columns ``rows`` (name -> expression), and how the
    columns of ``sums`` among them are held (name -> ``"ones"`` / ``"flag"``; others as they are).

    A column of ones is no field (its running total is the row's position); an
    indicator ``when(p).then(1.0).otherwise(0.0)`` is the Boolean ``p`` (a
    null ``p`` is false, as ``otherwise`` reads it), cast back to the same
    0.0/1.0 before its running sum.
    """
    out: list[pl.Expr] = []
    kinds: dict[str, str] = {}
    for name, row in rows.items():
        flag = indicator_of(row) if name in sums else None
        if name in sums and is_ones(row):
            kinds[name] = "ones"
        elif flag is not None:
            kinds[name] = "flag"
            out.append(flag.fill_null(False).alias(name))
        else:
            out.append(row.alias(name))
    return out, kinds


def sort_rows(rows: pl.Expr, key: pl.Expr) -> pl.Expr:
    """A group's ``rows`` (a struct) sorted by ``key``, as one list: single-threaded and stable.

    polars' multithreaded ``sort_by`` (its default) took twice the CPU time of
    the single-threaded one on 5e6 rows (563 vs 254 ms; one ``sort`` of the
    column 156 ms), and on a shared machine the wall time followed; a group of
    ``group_by().agg`` is sorted on one thread anyway.  Stable: tied keys keep
    the rows' order, so a running sum over ties adds in a defined order.
    """
    return rows.sort_by(key, multithreaded=False, maintain_order=True).implode()


def running(name: str, kind: str | None) -> pl.Expr:
    """Inside ``list.eval`` over the sorted rows: the running sum of the row column ``name`` (Float64)."""
    import polars as pl

    column = pl.element().struct.field(name)
    if kind == "ones":  # 1.0, 2.0, ...: the running sum of ones, exactly
        return pl.int_range(1, pl.len() + 1, dtype=pl.Int64).cast(pl.Float64)
    if kind == "flag":
        return column.cast(pl.Float64).cum_sum()
    return column.cum_sum()


def is_ones(row: pl.Expr) -> bool:
    """Whether the row column ``row`` is the constant 1.0 (``nw.len()`` summed as a column of ones)."""
    import polars as pl

    text = str(row.meta.undo_aliases())
    return text in (str(pl.lit(1.0)), str(pl.lit(1.0, pl.Float64)))


def indicator_of(row: pl.Expr) -> pl.Expr | None:
    """``p`` when the row column ``row`` is ``when(p).then(1.0).otherwise(0.0)`` (an indicator), else ``None``."""
    import polars as pl

    bare = row.meta.undo_aliases()
    if not str(bare).startswith(".when("):
        return None
    parts = bare.meta.pop()  # [predicate, otherwise, then]
    if len(parts) != 3 or str(parts[1]) != str(pl.lit(0.0)) or str(parts[2]) != str(pl.lit(1.0)):
        return None
    return parts[0]
