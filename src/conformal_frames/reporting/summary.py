"""The report's summary: pooled coverage, worst group, flagged and untested groups."""

from __future__ import annotations

import math
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np

from conformal_frames._widths import floats
from conformal_frames.reporting.plan import COVERAGE_COLUMN
from conformal_frames.reporting.tables import CURVES, INVALID_COUNTS, PER_BIN, PER_LEVEL


def plain(v: Any) -> Any:
    """A Python scalar (numpy scalars unwrapped, NaN as None)."""
    if isinstance(v, np.generic):
        v = v.item()
    if type(v).__name__ == "NAType":  # pandas' missing-value sentinel (pyarrow dtypes)
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def main_family(tables: dict[str, Any]) -> str:
    return next(k for k in ("intervals", "sets", "calibration", "forecast", "joint_coverage") if k in tables)


def _count(t: nw.DataFrame, name: str) -> np.ndarray:
    return floats(t, name) if name in t.columns else np.zeros(len(t))


def _group(row: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {k: plain(row[k]) for k in keys}


def _pooled(cov: np.ndarray, n: np.ndarray, target: np.ndarray, lost: np.ndarray, grouped: bool) -> list[dict]:
    """Pooled coverage per target over the tested groups, with the rows it leaves out."""
    pooled = []
    for tv in sorted(set(target[~np.isnan(target)].tolist())) or [None]:
        sel = np.ones(len(cov), bool) if tv is None else target == tv
        ok = sel & ~np.isnan(cov)
        item: dict[str, Any] = {"target": tv, "coverage": None, "n": int(n[ok].sum())}
        item["n_excluded"] = int(n[sel & np.isnan(cov)].sum() + lost[sel].sum())
        if ok.any():
            item["coverage"] = float((cov[ok] * n[ok]).sum() / n[ok].sum())
            if tv is not None and grouped:
                dev = np.abs(cov[ok] - tv)
                item["gap"] = float(dev.mean())
                item["gap_weighted"] = float((dev * n[ok]).sum() / n[ok].sum())
        pooled.append(item)
    return pooled


def _worst(t: nw.DataFrame, keys: list[str], cov: np.ndarray, target: np.ndarray) -> dict[str, Any] | None:
    gap = cov - np.nan_to_num(target, nan=0.0)
    if not keys or not np.isfinite(gap).any():
        return None
    i = int(np.nanargmin(gap))
    named = dict(zip(t.columns, t.row(i)))
    return {
        "group": _group(named, keys),
        "coverage": float(cov[i]),
        "target": None if np.isnan(target[i]) else float(target[i]),
        "n": int(named["n"]),
    }


def _untested(t: nw.DataFrame, keys: list[str], cov_col: str) -> list[dict[str, Any]]:
    """Groups without a coverage (or without a p-value when a target exists)."""
    check = "pvalue" if "pvalue" in t.columns else cov_col
    rows = t.filter(nw.col(check).is_null()).iter_rows(named=True)
    return [
        {"group": _group(r, keys), "n": int(r["n"]), **{c: int(r[c] or 0) for c in INVALID_COUNTS if c in r}}
        for r in rows
    ]


def _flagged(t: nw.DataFrame, keys: list[str], cov_col: str, flag: str = "under_covered") -> list[dict[str, Any]]:
    pvalue = "pvalue_adjusted" if flag == "under_covered" else "pvalue_over_adjusted"
    return [
        {
            "group": _group(r, keys),
            "coverage": plain(r[cov_col]),
            "target": plain(r["target"]),
            "n": int(r["n"]),
            "pvalue_adjusted": plain(r[pvalue]),
        }
        for r in t.filter(nw.col(flag).fill_null(False)).iter_rows(named=True)
    ]


def summarize(tables: dict[str, Any], keys: list[str], target: Any, test: str | None, notes: list[str]) -> dict:
    """Rows, groups, pooled coverage per target, worst, flagged and untested groups."""
    name = main_family(tables)
    t = tables[name]
    n = floats(t, "n")
    invalid, dropped = _count(t, "n_invalid"), _count(t, "n_dropped")
    families = [f for f in tables if f not in ("decomposition", "widths", *PER_BIN, *PER_LEVEL, *CURVES)]
    out: dict[str, Any] = {"rows": int(n.sum() + dropped.sum()), "groups": len(t), "families": families}
    if target is not None:
        out["target"] = target if isinstance(target, float) else f"column {target!r}"
    cov_col = COVERAGE_COLUMN.get(name)
    if cov_col is not None:
        cov = floats(t, cov_col)
        goal = floats(t, "target") if "target" in t.columns else np.full(len(t), np.nan)
        out["pooled_coverage"] = _pooled(cov, n, goal, dropped, bool(keys))
        worst = _worst(t, keys, cov, goal)
        if worst is not None:
            out["worst_group"] = worst
        out["untested"] = _untested(t, keys, cov_col)
        if "under_covered" in t.columns:
            out["tested"] = int(np.isfinite(floats(t, "pvalue")).sum())
            out["test"] = test
            out["under_covered"] = _flagged(t, keys, cov_col)
            if "over_covered" in t.columns:
                out["over_covered"] = _flagged(t, keys, cov_col, "over_covered")
    out["invalid_rows"] = int(invalid.sum())
    out["dropped_rows"] = int(dropped.sum())
    out["notes"] = notes
    return out
