"""Ensemble and randomized-PIT tables as polars expressions (the ``list.eval`` forms).

``cf.evaluate`` computes an ensemble's statistics with a table: each forecast
reshaped into its members, the members grouped by value (ties), sorted, and
aggregated back (:func:`conformal_frames.inputs.forecasts.ensemble_rows`).
A table function that also gives the specification of that table
(:class:`NativeTable`: the metric wraps its function with :func:`native_table`)
compiles here to the same arithmetic per forecast on its list of members:

- the members sorted (with their weights, ``member_weights=``), each run of
  tied members read at its last member: the run's value ``x``, the running
  weight ``end`` there and the run's weight ``c = end - end_before``;
- per forecast ``m`` (the total weight), ``abs_dev = sum |x - y| c``,
  ``spread = sum x c (2 (end - c) + c - m)``, ``below`` and ``equal`` (the
  weight of the members ``< y`` / ``== y``): the formulas of ``ensemble_rows``;
- the CRPS table (:class:`CRPSSums`) sums ``abs_dev / m - spread / pairs``
  (``m^2`` or ``m (m - 1)``) times the forecast's weight over the group's rows;
- the randomized PIT (:class:`PITDraws`) takes each forecast's interval
  ``[lo, hi]`` (an ensemble's rank among its members, or a quantile
  forecast's row columns), sorts the group's forecasts by ``(lo, hi, weight)``
  and draws ``u = lo + V (hi - lo)`` with ``V`` the hash of the forecast's
  rank in that order (:func:`uniform_hash_parts`, the one definition of the
  hash: ``metrics.distributions.uniform_hash`` reads it too); then the PIT
  histogram's bins or the KS distance over the ordered draws.

A table's outputs are one list per group (a block of the compiled statistics,
``engine.native``).  Null members give null per-forecast values (such rows are
invalid by the checks on polars).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import narwhals.stable.v2 as nw

from conformal_frames.engine.expr import TableFn, TableRef

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "HASH_P",
    "CRPSSums",
    "NativeTable",
    "PITDraws",
    "mod_p",
    "native_table",
    "per_forecast",
    "table_rows",
    "uniform_hash_parts",
]

#: a prime below 2^26: squares of residues stay below 2^52, exact in Float64
HASH_P = 67108859.0
#: the constants of the hash's three rounds ``h -> h^2 + (c + index) mod P``
HASH_ROUNDS = (1013904223.0, 1664525.0, 22695477.0)


def mod_p(x: Any, when: Callable[[Any], Any] = nw.when) -> Any:
    """``x mod P`` for integer-valued ``0 <= x < 2^53``, exact on every engine.

    ``x`` a narwhals expression, or a polars one with ``when=pl.when``.
    """
    r = x - HASH_P * (x / HASH_P).floor()
    return when(r < 0.0).then(r + HASH_P).otherwise(when(r >= HASH_P).then(r - HASH_P).otherwise(r))


def uniform_hash_parts(seed: int) -> tuple[float, tuple[float, ...]]:
    """The hash of a rank ``i`` (see ``metrics.distributions.uniform_hash``): its offset and rounds.

    ``h = (i + offset) mod P``, then ``h = (h^2 + (c + i)) mod P`` for each
    round constant ``c``; the draw is ``(h + 1/2) / P``.
    """
    return float((seed * 1000003 + 12345) % int(HASH_P)), HASH_ROUNDS


class _Ensemble(Protocol):
    """An ensemble's row columns (``inputs.forecasts.Ensemble``)."""

    @property
    def y(self) -> str: ...
    @property
    def members(self) -> str | tuple[str, ...]: ...
    @property
    def weight(self) -> str | None: ...
    @property
    def member_weights(self) -> str | tuple[str, ...] | None: ...


@dataclass(frozen=True)
class CRPSSums:
    """Per group: ``crps`` (the weighted sum of the forecasts' CRPS) and ``bad`` (forecasts with null members)."""

    ens: _Ensemble
    estimator: str


@dataclass(frozen=True)
class PITDraws:
    """Per group, over the randomized PIT values of the forecasts (of positive weight):

    ``n_bins`` given, the histogram's ``n<k>`` (and ``w<k>`` with a weight);
    else ``d``, the KS distance; and ``bad`` (forecasts with null members).
    """

    #: an ensemble's rows, or a quantile forecast's ``(lo, hi)`` rows
    ens: _Ensemble | None
    interval: tuple[str, str] | None
    weight: str | None
    seed: int
    n_bins: int | None = None


@dataclass(frozen=True)
class NativeTable:
    """A table function (``Query.table``) and the specification of its polars form."""

    build: TableFn
    spec: CRPSSums | PITDraws

    def __call__(self, rows: nw.LazyFrame, keys: list[str], ref: TableRef) -> nw.LazyFrame:
        return self.build(rows, keys, ref)


def native_table(build: TableFn, spec: CRPSSums | PITDraws) -> TableFn:
    """``build``, compiled by ``conformal_frames.polars`` from ``spec`` (see the module docstring)."""
    return NativeTable(build, spec)


def table_rows(q: Any) -> list[str]:
    """The row columns the tables of ``q`` with a polars form read (leaves of ``native._rows``'s binding:
    a quantile forecast's PIT interval inlined is 20,000 characters of plan, bound once 1,000)."""
    out: list[str] = []
    for fn, _ in q.tables.values():
        if isinstance(fn, NativeTable):
            spec, ens = fn.spec, fn.spec.ens
            if ens is not None:
                out += [ens.y, *_names(ens.members), *_names(ens.member_weights), *_names(ens.weight)]
            if isinstance(spec, PITDraws):
                out += [*(spec.interval or ()), *_names(spec.weight)]
    return out


def _names(columns: str | tuple[str, ...] | None) -> list[str]:
    return [] if columns is None else [columns] if isinstance(columns, str) else list(columns)


# ---------------------------------------------------------------------------
# the polars forms
# ---------------------------------------------------------------------------
Kept = Callable[["pl.Expr"], "pl.Expr"]


def aggregations(
    table: NativeTable, ref: TableRef, rows: Mapping[str, pl.Expr], kept: Kept
) -> tuple[list[str], pl.Expr]:
    """The table's aggregated columns (``ref.name(...)``) and their values: one list per group.

    ``kept(e)``: the rows of ``e`` the policy keeps (``"drop"``: the valid ones).
    """
    spec = table.spec
    if isinstance(spec, CRPSSums):
        names, values = _crps(spec, rows, kept)
    else:
        names, values = _pit(spec, rows, kept)
    return [ref.name(n) for n in names], values


def _as_list(rows: Mapping[str, pl.Expr], columns: str | tuple[str, ...]) -> pl.Expr:
    import polars as pl

    if isinstance(columns, str):
        return rows[columns].cast(pl.List(pl.Float64))
    return pl.concat_list([rows[c].cast(pl.Float64) for c in columns])


def per_forecast(ens: _Ensemble, rows: Mapping[str, pl.Expr]) -> pl.Expr:
    """Per row, a struct of the statistics of ``ensemble_rows`` (fields ``m``, ``abs_dev``, ``spread``,
    ``below``, ``equal``, ``nulls``) from the row's sorted members, each run of ties whole.

    Each step is a level of ``struct.with_fields`` (read as ``pl.field``): a
    value read several times is computed once.
    """
    import polars as pl

    e, f = pl.element(), pl.field
    x = _as_list(rows, ens.members)
    fields = [x.alias("x"), rows[ens.y].cast(pl.Float64).alias("y")]
    if ens.member_weights is not None:
        w = _as_list(rows, ens.member_weights)
        fields.append(pl.when(w.list.len() == x.list.len()).then(w).alias("w"))  # other lengths: invalid rows
    s = pl.struct(*fields)
    run_ends = e.ne_missing(e.shift(-1)).arg_true()  # sorted: the last member of each run of ties
    if ens.member_weights is None:
        s = s.struct.with_fields(f("x").list.sort().alias("xs"))
        s = s.struct.with_fields(f("xs").list.eval(run_ends).alias("last"))
        end = f("last").list.eval((e + 1).cast(pl.Float64))  # the members up to the run's last
    else:
        s = s.struct.with_fields(f("x").list.eval(e.arg_sort()).alias("order"))
        s = s.struct.with_fields(f("x").list.gather(f("order")).alias("xs"))
        s = s.struct.with_fields(f("xs").list.eval(run_ends).alias("last"))
        end = f("w").list.gather(f("order")).list.eval(e.cum_sum()).list.gather(f("last"))
    s = s.struct.with_fields(f("xs").list.gather(f("last")).alias("xr"), end.alias("end"))
    s = s.struct.with_fields(
        f("end").list.eval(e - e.shift(1, fill_value=0.0)).alias("c"),  # the run's weight
        f("end").list.last().alias("m"),
        (f("xr") - f("y")).alias("dev"),
    )
    s = s.struct.with_fields(
        (f("dev").list.eval(e.abs()) * f("c")).list.sum().alias("abs_dev"),
        ((f("xr") * f("c")) * (2.0 * (f("end") - f("c")) + f("c") - f("m"))).list.sum().alias("spread"),
        (f("dev").list.eval((e < 0.0).cast(pl.Float64)) * f("c")).list.sum().alias("below"),
        (f("dev").list.eval((e == 0.0).cast(pl.Float64)) * f("c")).list.sum().alias("equal"),
        f("x").list.eval(e.is_null().any()).list.first().cast(pl.Float64).alias("nulls"),
    )
    return _project(s, ["m", "abs_dev", "spread", "below", "equal", "nulls"])


def _project(s: pl.Expr, names: list[str]) -> pl.Expr:
    """The struct of the fields ``names`` of the struct ``s``, ``s`` computed once (a struct of
    ``s.struct.field`` reads would compute it once per field: polars shares nothing in ``agg``)."""
    import polars as pl

    field = pl.element().struct.field
    return pl.concat_list(s).list.eval(pl.struct(*[field(n) for n in names])).list.first()


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    import polars as pl

    return pl.when(den != 0).then(num / den)


def _crps(spec: CRPSSums, rows: Mapping[str, pl.Expr], kept: Kept) -> tuple[list[str], pl.Expr]:
    """``crps``: the sum of ``abs_dev / m - spread / pairs`` (times the weight); ``bad``."""
    import polars as pl

    f = pl.field
    pairs = f("m") * f("m") if spec.estimator == "plain" else f("m") * (f("m") - 1.0)
    score = _ratio(f("abs_dev"), f("m")) - _ratio(f("spread"), pairs)
    if spec.ens.weight is not None:
        score = score * f("weight")
    s = per_forecast(spec.ens, rows)
    if spec.ens.weight is not None:
        s = s.struct.with_fields(rows[spec.ens.weight].alias("weight"))
    s = s.struct.with_fields(score.alias("score"), (f("nulls") > 0).cast(pl.Float64).alias("bad"))
    field = pl.element().struct.field
    sums = kept(s).implode().list.eval(pl.concat_list(field("score").sum(), field("bad").sum()))
    return ["crps", "bad"], sums.list.first()


def _bounds(spec: PITDraws, rows: Mapping[str, pl.Expr]) -> pl.Expr:
    """Per forecast, a struct of the PIT interval ``lo``, ``hi``, the weight ``w`` (with ``weights=``)
    and the null-member flag ``bad`` (``PITSource.bounds``), in this order."""
    import polars as pl

    weight = [rows[spec.weight].alias("w")] if spec.weight is not None else []
    if spec.interval is not None:
        a, b = spec.interval
        return pl.struct(rows[a].alias("lo"), rows[b].alias("hi"), *weight, pl.lit(0.0).alias("bad"))
    assert spec.ens is not None
    f = pl.field
    if spec.ens.member_weights is not None:  # the weighted empirical CDF: [F(y-), F(y)]
        lo, hi = f("below") / f("m"), (f("below") + f("equal")) / f("m")
    else:  # the rank among the members and y
        lo, hi = f("below") / (f("m") + 1.0), (f("below") + f("equal") + 1.0) / (f("m") + 1.0)
    bad = (f("nulls") > 0).cast(pl.Float64)
    s = per_forecast(spec.ens, rows).struct.with_fields(lo.alias("lo"), hi.alias("hi"), bad.alias("bad"), *weight)
    return _project(s, ["lo", "hi", *(["w"] if weight else []), "bad"])


def _pit(spec: PITDraws, rows: Mapping[str, pl.Expr], kept: Kept) -> tuple[list[str], pl.Expr]:
    """The group's forecasts sorted by ``(lo, hi, w)``, each drawn by its rank; the histogram or ``d``."""
    import polars as pl

    field = pl.element().struct.field
    forecasts = kept(_bounds(spec, rows)).implode()
    if spec.weight is not None:  # a forecast of weight 0 takes no part (not even in the draws)
        forecasts = forecasts.list.eval(pl.element().filter(field("w") > 0.0))
    ranked = forecasts.list.eval(pl.element().sort()).list.eval(
        pl.element().struct.with_fields(pl.int_range(pl.len(), dtype=pl.Int64).cast(pl.Float64).alias("i"))
    )
    offset, rounds = uniform_hash_parts(spec.seed)
    h, i = pl.field("h"), pl.field("i")
    ranked = ranked.list.eval(pl.element().struct.with_fields(mod_p(i + offset, pl.when).alias("h")))
    for c in rounds:  # a stage each: a round reads h twenty times
        ranked = ranked.list.eval(pl.element().struct.with_fields(mod_p(h * h + (c + i), pl.when).alias("h")))
    u = field("lo") + ((field("h") + 0.5) / HASH_P) * (field("hi") - field("lo"))
    if spec.n_bins is None:  # the draws sorted once
        ranked = ranked.list.eval(pl.element().struct.with_fields(u.alias("u"))).list.eval(
            pl.element().sort_by(field("u"))
        )
        stats = [_ks(field("u")), field("bad").sum()]
        return ["d", "bad"], ranked.list.eval(pl.concat_list(stats)).list.first()
    b = (u * float(spec.n_bins)).floor().clip(0.0, float(spec.n_bins - 1))
    ins = [(b == float(k)).cast(pl.Float64) for k in range(spec.n_bins)]
    sums = [x.sum() for x in ins]
    names = [f"n{k}" for k in range(spec.n_bins)]
    if spec.weight is not None:
        sums += [(x * field("w")).sum() for x in ins]
        names += [f"w{k}" for k in range(spec.n_bins)]
    return [*names, "bad"], ranked.list.eval(pl.concat_list([*sums, field("bad").sum()])).list.first()


def _ks(u: pl.Expr) -> pl.Expr:
    """Inside ``list.eval``: ``D = sup |F_n - u|`` of the sorted draws ``u``, ties whole (``_ks_distance``)."""
    import polars as pl

    i = pl.int_range(1, pl.len() + 1, dtype=pl.Int64).cast(pl.Float64)
    last = u.ne_missing(u.shift(-1))  # the last draw of each run of ties
    end, uc = i.filter(last), u.filter(last)
    tot = end.last()
    c = end - end.shift(1, fill_value=0.0)
    return pl.max_horizontal(end / tot - uc, uc - (end - c) / tot).max()
