"""Differential fuzz (hypothesis): generated frames, every backend, numpy oracles, invariances.

Each example draws a frame as a careful user's data would be: ties, 1-ulp
near-ties, bin edges, scores of exactly 0 and 1, groups of 1 and 2 rows, many
groups, keys that are null, NaN, empty, unicode, Boolean, categorical,
integer, -0.0 or dates, magnitudes from 1e-300 to 1e300, Float32 and Int64
columns with nulls, invalid rows, zero weights, odd column names, 0-row
frames and frames filtered before the metric (lazy frames with a filter).
Per metric family (intervals, sets, calibration, ranking, forecasts):

- ``test_backends_agree_with_oracle``: pandas, pandas with pyarrow dtypes,
  polars, polars lazy and DuckDB give the same result (every column, 1e-12)
  and the main metrics equal a numpy oracle of the definition (``oracle*.py``);
  the caller's frame is never modified;
- ``test_invariances`` (one backend drawn per example): row shuffle, row
  duplication (estimates unchanged, ``n`` doubled), weight scaling,
  ``finalize(summarize(...))`` = ``evaluate``, two days summarized, merged
  and finalized = ``evaluate``, and an extra all-invalid group under
  ``invalid="drop"``.

Cases draw ``counts=`` too (counts 0 to 3, groups whose counts are all 0):
``n`` is the represented rows, ``n_invalid`` / ``n_dropped`` the input rows
(docs/weights.md), checked against the oracle and between ``evaluate`` and
the summary path.  Issue 42's classes have tests of their own:
``test_composite_metrics_with_counts_and_weights`` (``skill_score``,
``bootstrap``, ``relative_skill``), ``test_short_groups_against_exact_oracles``
(Diebold-Mariano with ``horizon`` at least a group's rows, exact rational
oracle; the naive scale with a season longer than a series),
``test_categorical_keys_through_frame_functions`` (Categorical, Enum and
Arrow dictionary keys, also read back from Parquet) and
``test_empty_summaries_of_every_mergeable_metric``.

PySpark is left out (seconds per query). Profiles:

- ``ci`` (default): derandomized (the same examples on every run), a few
  examples per family, the file in about a minute on one core;
- ``long``: ``CF_FUZZ_PROFILE=long`` (2,000 random examples per test and
  family) or ``CF_FUZZ_EXAMPLES=<n>``; larger frames (up to 2,000 groups);
  ``CF_FUZZ_NO_SHRINK=1`` reports a failing example as drawn::

      CF_FUZZ_PROFILE=long python -m pytest -n 0 -q tests/test_fuzz.py

Cases the fuzz hits that are known defects (issue 25) are excluded by the
narrow filters that test ``KNOWN_DEFECTS``; remove a number from the set
when its fix is merged.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import narwhals.stable.v2 as nw
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from scipy.special import ndtr

import conformal_frames as cf
import oracle
import oracle_calibration as ocal
import oracle_forecast as ofc
import oracle_sets as osets
from helpers import assert_close, to_pandas

pl = pytest.importorskip("polars")

#: issue 25's defects the fuzz still meets: each number guards one narrow
#: exclusion below (search for "issue 25 defect N"); drop it once fixed.
KNOWN_DEFECTS: set[int] = set()  # defects 1-8 fixed (issue 25); the filters stay for bisecting
#: defects the fuzz found beyond issue 25's list (see the narrow exclusions "new defect X")
NEW_DEFECTS: set[str] = set()  # "internal-name", "bool-key-concat" fixed; the filters stay for bisecting
if "CF_FUZZ_KNOWN_DEFECTS" in os.environ:  # e.g. CF_FUZZ_KNOWN_DEFECTS="" runs without the exclusions
    _listed = os.environ["CF_FUZZ_KNOWN_DEFECTS"].replace(",", " ").split()
    KNOWN_DEFECTS = {int(x) for x in _listed if x.isdigit()}
    NEW_DEFECTS = {x for x in _listed if not x.isdigit()}

# ---------------------------------------------------------------------------
# profiles
# ---------------------------------------------------------------------------
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "cf-fuzz-ci", max_examples=10, deadline=None, derandomize=True, suppress_health_check=_HEALTH, print_blob=True
)
settings.register_profile(
    "cf-fuzz-long", max_examples=2000, deadline=None, suppress_health_check=_HEALTH, print_blob=True
)
_NAME = os.environ.get("CF_FUZZ_PROFILE", "ci")
PROFILE = settings.get_profile(f"cf-fuzz-{_NAME}")
if os.environ.get("CF_FUZZ_EXAMPLES"):
    PROFILE = settings(PROFILE, max_examples=int(os.environ["CF_FUZZ_EXAMPLES"]), derandomize=False)
LONG = _NAME == "long" or PROFILE.max_examples > 100
if os.environ.get("CF_FUZZ_NO_SHRINK"):  # report the first failing example as drawn (fast, for bisecting)
    PROFILE = settings(PROFILE, phases=[Phase.explicit, Phase.reuse, Phase.generate])
#: the largest frame: many groups in the long profile, a few hundred rows in CI
MAX_ROWS = 2000 if LONG else 300

RTOL = 1e-12

# ---------------------------------------------------------------------------
# backends (built from one polars frame, as tests/conftest.py does)
# ---------------------------------------------------------------------------
_DUCK: list[Any] = []


def _duckdb(frame: Any) -> Any:
    import duckdb

    if not _DUCK:
        _DUCK.append(duckdb.connect())
    return _DUCK[0].from_arrow(frame.to_arrow())


def _pandas(frame: Any) -> Any:
    out = frame.to_pandas()
    for name, dtype in frame.schema.items():
        if dtype == pl.Int64 and frame[name].null_count():  # a nullable Int64, as pandas users hold it
            out[name] = pd.array(frame[name].to_list(), dtype="Int64")
        elif dtype == pl.List:  # a column of Python lists (dtype object)
            out[name] = pd.Series([list(v) for v in frame[name].to_list()], dtype=object, index=out.index)
    return out


BACKENDS: dict[str, Callable[[Any], Any]] = {
    "pandas": _pandas,
    "pandas[pyarrow]": lambda f: f.to_pandas(use_pyarrow_extension_array=True),
    "polars": lambda f: f,
    "polars[lazy]": lambda f: f.lazy(),
    "duckdb": _duckdb,
}
for _module in ("pyarrow", "duckdb"):
    pytest.importorskip(_module)


# ---------------------------------------------------------------------------
# generated cases
# ---------------------------------------------------------------------------
#: odd column names: spaces, unicode, quotes, SQL words, names like internal or output ones
ODD_NAMES = ["y ✓", "lower bound", "__cf_r0", "select", "a.b", 'say "hi"', "it's", "1", "Σ", "NULL", "n", "g2", "ü"]
KEY_KINDS = ["none", "str", "int", "float", "bool", "cat", "date", "many"]


@dataclass
class Case:
    """A generated frame: numpy columns (NaN = null), their dtypes, the physical names."""

    family: str
    n: int
    data: dict[str, np.ndarray]  # logical name -> values (float columns: NaN is invalid)
    dtypes: dict[str, Any]  # logical name -> polars dtype
    names: dict[str, str]  # logical name -> column name in the frame
    key_kind: str
    keys: list[Any]  # the Python key per row (None: null)
    invalid: str
    weights: bool
    filtered: bool
    params: dict[str, Any] = field(default_factory=dict)
    junk: int = 0  # rows at the end removed by the filter
    counts: bool = False  # the metrics take counts= (column "k": 0 to 3, zeros included)

    @property
    def by(self) -> str | None:
        return None if self.key_kind == "none" else self.names["g"]


def _near(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """x moved by -1, 0 or +1 ulp."""
    step = rng.integers(-1, 2, size=x.shape)
    return np.where(step < 0, np.nextafter(x, -np.inf), np.where(step > 0, np.nextafter(x, np.inf), x))


def _keys(rng: np.random.Generator, kind: str, n: int) -> list[Any]:
    if kind == "none":
        return [None] * n
    if kind == "many":
        pool: list[Any] = [f"k{i}" for i in range(max(1, n // 2))]  # mostly groups of 1 and 2 rows
    elif kind in ("str", "cat"):
        pool = ["", "a", "ключ ✓", " b ", "日本", "a\u0301", "NULL"]
    elif kind == "int":
        pool = [0, -1, 7, 2**40]
    elif kind == "float":
        pool = [0.0, -0.0, 1.5, -2.25, 1e300, 5e-324]
    elif kind == "bool":
        pool = [True, False]
    else:
        pool = [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1900, 12, 31)]
    size = int(rng.integers(1, len(pool) + 1))
    chosen = [pool[i] for i in rng.choice(len(pool), size=size, replace=False)]
    keys = [chosen[i] for i in rng.choice(len(chosen), size=n, p=rng.dirichlet(np.ones(len(chosen)) * 0.5))]
    if kind != "many" and n and rng.random() < 0.3:  # missing keys: null (NaN for float keys, not both)
        missing = math.nan if kind == "float" and rng.random() < 0.5 else None
        for i in rng.choice(n, size=int(rng.integers(1, max(2, n // 4) + 1)), replace=True):
            keys[i] = missing
    return keys


def _key_dtype(kind: str) -> Any:
    return {
        "str": pl.String,
        "many": pl.String,
        "cat": pl.Categorical,
        "int": pl.Int64,
        "float": pl.Float64,
        "bool": pl.Boolean,
        "date": pl.Date,
    }[kind]


def _values(rng: np.random.Generator, n: int, style: str, mag: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y, lo, hi: ties, 1-ulp near-ties, values on the bounds, any magnitude."""
    center = rng.normal(size=n) * 3
    w = rng.gamma(2.0, 1.0, size=n)
    y = center + rng.normal(size=n) * 1.5
    if style == "ties":
        center, w, y = np.round(center), np.round(w), np.round(y)  # zero widths too
    lo = (center - w / 2) * mag
    hi = lo + w * mag
    y = y * mag
    if style in ("near", "edges") and n:  # on a bound, or 1 ulp either side
        pick = rng.random(n) < 0.5
        bound = np.where(rng.random(n) < 0.5, lo, hi)
        y = np.where(pick, _near(rng, bound) if style == "near" else bound, y)
    return y, lo, hi


def _scores(rng: np.random.Generator, n: int, style: str, n_bins: int) -> np.ndarray:
    """Scores in [0, 1]: ties, bin edges, 1-ulp near edges, exact 0 and 1."""
    s = rng.random(n)
    if style == "ties":
        s = np.round(s * 4) / 4
    elif style in ("edges", "near"):
        edges = rng.integers(0, n_bins + 1, size=n) / n_bins
        s = np.where(rng.random(n) < 0.7, edges, s)
        if style == "near":
            s = np.clip(_near(rng, s), 0.0, 1.0)
    elif style == "extreme":
        s = np.where(rng.random(n) < 0.6, rng.integers(0, 2, size=n).astype(float), s**30)
    return s


@st.composite
def cases(draw: st.DrawFn, family: str) -> Case:
    size_kind = draw(st.sampled_from(["empty", "tiny", "small", "small", "large"]))
    n = {"empty": 0, "tiny": draw(st.integers(1, 4)), "small": draw(st.integers(5, 40))}.get(
        size_kind, draw(st.integers(41, MAX_ROWS))
    )
    key_kind = draw(st.sampled_from(KEY_KINDS))
    style = draw(st.sampled_from(["plain", "ties", "near", "edges", "extreme"]))
    dtype = draw(st.sampled_from(["f64", "f64", "f32", "Int64"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mag = float(draw(st.sampled_from([1.0, 1e-300, 1e-150, 1e-8, 1e8, 1e150, 1e300])))
    if dtype == "f32":
        mag = min(max(mag, 1e-30), 1e30)
    data: dict[str, np.ndarray] = {}
    dtypes: dict[str, Any] = {}
    params: dict[str, Any] = {"style": style, "mag": mag}
    value_cols: list[str] = []  # the float columns where invalid rows and Float32 go
    if family == "intervals":
        if dtype == "Int64":
            y, lo, hi = (np.round(v) for v in _values(rng, n, style, 1.0))
        else:
            y, lo, hi = _values(rng, n, style, mag)
        data.update(y=y, lo=lo, hi=hi)
        value_cols = ["y", "lo", "hi"]
    elif family == "calibration":
        n_bins = draw(st.sampled_from([1, 2, 3, 5, 10, 32, 100]))
        s = _scores(rng, n, style, n_bins)
        label = (rng.random(n) < s).astype(float)
        data.update(label=label, score=s)
        params["n_bins"] = n_bins
        value_cols = ["score"]
        if dtype == "Int64":
            value_cols = ["label"]
    elif family == "ranking":
        s = _scores(rng, n, style, 8)
        correct = (rng.random(n) < s).astype(float)
        conf = (s - (0.5 if rng.random() < 0.5 else 0.0)) * mag
        data.update(correct=correct, conf=conf)
        value_cols = ["correct"] if dtype == "Int64" else ["conf"]
    elif family == "sets":
        k = draw(st.integers(1, 4))
        m = rng.random((n, k)) < rng.uniform(0.0, 1.0, size=(n, 1))
        if style == "edges":  # every set empty, or every set full
            m[:] = rng.random() < 0.5
        data["y"] = rng.integers(0, k, size=n).astype(float)
        params.update(k=k, m=m, list_column=draw(st.booleans()))
        value_cols = ["y"]
    else:  # forecasts
        far = style == "extreme" and rng.random() < 0.5
        mu = rng.normal(size=n) * 2
        sd = rng.gamma(2.0, 1.0, size=n) + 0.01
        y = mu + rng.normal(size=n) * sd
        if style == "ties":
            mu, sd, y = np.round(mu), np.round(sd) + 1.0, np.round(y)
        if far:  # far in the tail: |y - mu| / sd up to 1e12
            sd = sd * 10.0 ** -rng.integers(0, 12, size=n)
        z = rng.gamma(2.0, 1.0, size=(n, 3)).cumsum(axis=1)
        q = mu[:, None] + (z - z[:, [1]])  # q10 <= q50 = mu <= q90
        if style == "near":
            y = np.where(rng.random(n) < 0.5, _near(rng, q[:, 1]), y)
        data.update(y=y * mag, mu=mu * mag, sd=sd * mag, q10=q[:, 0] * mag, q50=q[:, 1] * mag, q90=q[:, 2] * mag)
        params["far"] = far
        value_cols = ["y", "mu", "sd", "q10", "q50", "q90"]
        if dtype == "Int64":
            for c in value_cols:
                data[c] = np.round(data[c] / mag)
            data["sd"] = np.abs(data["sd"]) + 1.0
            data["q10"], data["q50"], data["q90"] = np.sort(np.stack([data["q10"], data["q50"], data["q90"]]), axis=0)
    for c in data:
        dtypes[c] = pl.Float64
    if dtype == "f32":
        for c in value_cols:
            data[c] = data[c].astype(np.float32).astype(np.float64)
            dtypes[c] = pl.Float32
    if dtype == "Int64" or family in ("sets",):
        int_cols = value_cols if dtype == "Int64" else ["y"]
        if family == "calibration" or family == "ranking":
            int_cols = [value_cols[0]]
        for c in int_cols:
            dtypes[c] = pl.Int64
    # invalid rows: NaN in a float column (null in an Int64 one)
    if n and draw(st.integers(0, 3)) == 0:
        c = value_cols[int(rng.integers(len(value_cols)))]
        bad = rng.random(n) < 0.15
        data[c] = np.where(bad, np.nan, data[c])
    weights = draw(st.booleans())
    if weights:
        data["w"] = rng.choice([0.0, 0.5, 1.0, 2.5, 3.0], size=n, p=[0.1, 0.2, 0.4, 0.2, 0.1])
        dtypes["w"] = pl.Float64
    counts = draw(st.booleans())
    if counts:  # frequency counts: rows of count 0, and groups whose counts are all 0
        data["k"] = rng.choice([0.0, 1.0, 2.0, 3.0], size=n, p=[0.3, 0.35, 0.2, 0.15])
        dtypes["k"] = pl.Int64
    keys = _keys(rng, key_kind, n)
    invalid = draw(st.sampled_from(["null", "drop"]))
    filtered = draw(st.booleans())
    logical = [*data, "g", "keep"]
    odd = draw(st.booleans())
    names = {c: c for c in logical}
    if odd:
        pool = draw(st.permutations(ODD_NAMES))
        names = dict(zip(logical, pool))
        if names["g"] in ("n",):  # a key named like the row count is rejected (tested elsewhere)
            names["g"] = "group ✓"
    case = Case(family, n, data, dtypes, names, key_kind, keys, invalid, weights, filtered, params, counts=counts)
    if filtered:
        case.junk = int(rng.integers(1, 4))
    return case


def _null_key(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def polars_frame(case: Case) -> Any:
    """The case as a polars frame (the junk rows, if filtered, at the end with keep = False)."""
    n, junk = case.n, case.junk
    cols: dict[str, Any] = {}
    for c, v in case.data.items():
        vals = np.concatenate([v, np.full(junk, -7.0)]) if junk else v
        if case.dtypes[c] == pl.Int64:
            cols[case.names[c]] = pl.Series(
                case.names[c], [None if math.isnan(x) else int(x) for x in vals], dtype=pl.Int64
            )
        else:
            s = pl.Series(case.names[c], vals, dtype=pl.Float64, nan_to_null=False)
            cols[case.names[c]] = s.cast(case.dtypes[c])
    if case.family == "sets":
        m = case.params["m"]
        if junk:
            m = np.concatenate([m, np.ones((junk, m.shape[1]), dtype=bool)])
        if case.params["list_column"]:
            lists = [[int(j) for j in np.flatnonzero(row)] for row in m]
            cols[case.names.get("sets", "sets ✓")] = pl.Series("s", lists, dtype=pl.List(pl.Int64))
        else:
            for j in range(m.shape[1]):
                cols[f"m{j} ✓"] = pl.Series(f"m{j} ✓", m[:, j], dtype=pl.Boolean)
    if case.key_kind != "none":
        keys = case.keys + [case.keys[0] if case.keys else _junk_key(case.key_kind)] * junk
        if case.key_kind == "float":
            vals = [math.nan if (isinstance(k, float) and math.isnan(k)) else k for k in keys]
            cols[case.names["g"]] = pl.Series("g", vals, dtype=pl.Float64, nan_to_null=False)
        else:
            cols[case.names["g"]] = pl.Series("g", keys, dtype=_key_dtype(case.key_kind))
    cols[case.names["keep"]] = pl.Series("keep", [True] * n + [False] * junk, dtype=pl.Boolean)
    frame = pl.DataFrame([s.alias(name) for name, s in cols.items()])
    return frame


def _junk_key(kind: str) -> Any:
    return {"int": 1, "float": 1.0, "bool": True, "date": dt.date(2000, 1, 1)}.get(kind, "junk ✗")


def _sets_arg(case: Case) -> Any:
    if case.params["list_column"]:
        return case.names.get("sets", "sets ✓")
    return [f"m{j} ✓" for j in range(case.params["k"])]


def metrics(case: Case, weights: str | None = "auto") -> list[cf.Metric]:
    c = case.names
    w = (c["w"] if case.weights else None) if weights == "auto" else weights
    k = c["k"] if case.counts else None
    return [m if k is None else dataclasses.replace(m, counts=k) for m in _metrics(case, w)]


def _metrics(case: Case, w: str | None) -> list[cf.Metric]:
    c = case.names
    if case.family == "intervals":
        return [
            cf.coverage(c["y"], c["lo"], c["hi"], weights=w),
            cf.width(c["lo"], c["hi"], weights=w),
            cf.winkler(c["y"], c["lo"], c["hi"], confidence_level=0.9, weights=w),
        ]
    if case.family == "calibration":
        return [
            cf.ece(c["label"], c["score"], n_bins=case.params["n_bins"], weights=w),
            cf.brier(c["label"], c["score"], weights=w),
        ]
    if case.family == "ranking":
        return [cf.auroc(c["correct"], c["conf"], weights=w)]
    if case.family == "sets":
        classes = list(range(case.params["k"]))
        return [
            cf.set_coverage(c["y"], _sets_arg(case), classes=classes, weights=w),
            cf.set_size(_sets_arg(case), classes=classes, weights=w),
        ]
    q = {0.1: c["q10"], 0.5: c["q50"], 0.9: c["q90"]}
    return [
        cf.crps(c["y"], mean=c["mu"], std=c["sd"], weights=w),
        cf.pinball_loss(c["y"], quantiles=q, weights=w),
    ]


def extra_metrics(case: Case) -> list[cf.Metric]:
    """Metrics compared across backends only (no oracle, not mergeable)."""
    if case.family != "forecasts" or case.counts:  # pit_test takes no counts=
        return []
    if 4 in KNOWN_DEFECTS and not (row_valid(case) & _key_ok(case)).any():
        return []  # issue 25 defect 4: pit_test fails on pandas[pyarrow] with no (valid) rows
    c = case.names
    return [cf.pit_test(c["y"], mean=c["mu"], std=c["sd"])]


#: backends where coverage_test runs (its p-values are a scipy step on the per-group table: not on DuckDB)
FLAG_BACKENDS = ["pandas", "pandas[pyarrow]", "polars", "polars[lazy]"]


def flag_metrics(case: Case) -> list[cf.Metric]:
    """A test with a Boolean flag (null where there is no p-value), compared across backends and paths."""
    if case.family != "intervals":
        return []
    c = case.names
    return [
        cf.coverage_test(
            c["y"],
            c["lo"],
            c["hi"],
            confidence_level=0.9,
            weights=c["w"] if case.weights else None,
            counts=c["k"] if case.counts else None,
        )
    ]


def _key_ok(case: Case) -> np.ndarray:
    return np.array([not _null_key(k) for k in case.keys], dtype=bool) if case.by else np.ones(case.n, dtype=bool)


def describe(case: Case) -> list[str]:
    """Labels of the case for ``--hypothesis-show-statistics``."""
    size = "0 rows" if case.n == 0 else "1-4 rows" if case.n < 5 else "5-40 rows" if case.n <= 40 else "41+ rows"
    dtypes = sorted({str(d) for d in case.dtypes.values()})
    return [
        size,
        f"key {case.key_kind}",
        f"invalid={case.invalid}",
        f"values {case.params['style']}",
        "dtypes " + ",".join(dtypes),
        "filtered" if case.filtered else "unfiltered",
        "weights" if case.weights else "no weights",
        "counts" if case.counts else "no counts",
        "invalid rows" if not row_valid(case).all() else "valid rows",
        "null/NaN key" if case.by and not _key_ok(case).all() else "keys present",
        "odd names" if case.names["g"] != "g" else "plain names",
    ]


MAIN = {
    "intervals": ["coverage", "width", "winkler"],
    "calibration": ["ece", "brier"],
    "ranking": ["auroc"],
    "sets": ["set_coverage", "set_size"],
    "forecasts": ["crps", "pinball_loss"],
}
FAMILIES = list(MAIN)


# ---------------------------------------------------------------------------
# the numpy oracle (per group)
# ---------------------------------------------------------------------------
def _wmean(x: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(w * x) / np.sum(w)) if len(x) else math.nan


def oracle_values(case: Case, idx: np.ndarray) -> dict[str, float]:
    """The main metrics of the rows ``idx`` (all valid) from the definitions."""
    d = {c: v[idx] for c, v in case.data.items()}
    w = d.get("w", np.ones(len(idx))) * d.get("k", np.ones(len(idx)))  # counts: integer weights
    if case.family == "intervals":
        y, lo, hi = d["y"], d["lo"], d["hi"]
        if not (case.weights or case.counts):
            return {
                "coverage": oracle.coverage(y, lo, hi),
                "width": oracle.width(lo, hi),
                "winkler": oracle.winkler(y, lo, hi, 0.9),
            }
        return {
            "coverage": _wmean(oracle.covered(y, lo, hi), w),
            "width": _wmean(hi - lo, w),
            "winkler": _wmean(ofc.interval_score(y, lo, hi, 0.1), w),
        }
    if case.family == "calibration":
        y, s, nb = d["label"], d["score"], case.params["n_bins"]
        if case.dtypes["score"] == pl.Float32:
            s = s.astype(np.float32)
        if not (case.weights or case.counts):
            return {"ece": ocal.ece(y, s, nb), "brier": ocal.brier(y, np.asarray(s, dtype=float))}
        b = ocal.uniform_bins(s, nb)
        s = np.asarray(s, dtype=float)
        keep = w > 0
        total = sum(
            np.sum(w[(b == m) & keep])
            / np.sum(w)
            * abs(_wmean(y[(b == m) & keep], w[(b == m) & keep]) - _wmean(s[(b == m) & keep], w[(b == m) & keep]))
            for m in range(nb)
            if ((b == m) & keep).any()
        )
        return {"ece": total, "brier": _wmean((y - s) ** 2, w)}
    if case.family == "ranking":
        y, s = d["correct"], d["conf"]
        pos, neg = y == 1, y == 0
        wp, wn = w[pos], w[neg]
        if wp.sum() == 0 or wn.sum() == 0:
            return {"auroc": math.nan}
        sp, sn = s[pos][:, None], s[neg][None, :]
        pair = (sp > sn) + 0.5 * (sp == sn)
        return {"auroc": float(np.sum(wp[:, None] * wn[None, :] * pair) / (wp.sum() * wn.sum()))}
    if case.family == "sets":
        m = case.params["m"][idx]
        yi = d["y"].astype(int)
        if not (case.weights or case.counts):
            return {"set_coverage": osets.set_coverage(yi, m), "set_size": osets.set_size(m)}
        return {"set_coverage": _wmean(osets.set_covered(yi, m), w), "set_size": _wmean(m.sum(axis=1).astype(float), w)}
    from test_forecast_distributions import crps_gauss_oracle

    y = d["y"]
    crps = crps_gauss_oracle(y, d["mu"], d["sd"])
    pin = np.mean(
        [
            np.where(y >= q, t * (y - q), (t - 1.0) * (y - q))
            for t, q in ((0.1, d["q10"]), (0.5, d["q50"]), (0.9, d["q90"]))
        ],
        axis=0,
    )
    if not (case.weights or case.counts):  # the oracle_forecast form, averaged over the levels
        p = np.mean([ofc.pinball(y, d[c], t) for t, c in ((0.1, "q10"), (0.5, "q50"), (0.9, "q90"))])
        return {"crps": float(np.mean(crps)), "pinball_loss": float(p)}
    return {"crps": _wmean(crps, w), "pinball_loss": _wmean(pin, w)}


def canon(v: Any) -> Any:
    """A key as a comparable value, the same on every backend (null and NaN: one missing value)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return ("missing",)
    if isinstance(v, (bool, np.bool_)):
        return ("bool", bool(v))
    if isinstance(v, (pd.Timestamp, np.datetime64, dt.datetime)):
        return ("date", pd.Timestamp(v).date().isoformat())
    if isinstance(v, dt.date):
        return ("date", v.isoformat())
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return ("missing",) if math.isnan(f) else ("num", f + 0.0)  # -0.0 is 0.0
    return ("str", str(v))


def table(result: Any, case: Case) -> dict[Any, dict[str, Any]]:
    """A result frame as {canonical key: {column: value}}."""
    out = to_pandas(result)
    rows: dict[Any, dict[str, Any]] = {}
    for rec in out.to_dict("records"):
        key = canon(rec.pop(case.by)) if case.by else ()
        assert key not in rows, f"two result rows for the key {key!r}"
        rows[key] = rec
    return rows


def _num(v: Any) -> float:
    if v is None or v is pd.NA:
        return math.nan
    if isinstance(v, (float, int, np.floating, np.integer, bool, np.bool_)):
        return float(v)
    return math.nan if pd.isna(v) else float(v)


def same_tables(
    a: dict[Any, dict[str, Any]], b: dict[Any, dict[str, Any]], what: str, *, rtol: float = RTOL, atol: float = 0.0
) -> None:
    assert a.keys() == b.keys(), f"{what}: groups {sorted(map(str, a))} != {sorted(map(str, b))}"
    for k in a:
        assert a[k].keys() == b[k].keys(), f"{what}: columns of {k!r}"
        for c in a[k]:
            x, y = _num(a[k][c]), _num(b[k][c])
            if math.isnan(x) or math.isnan(y):
                assert math.isnan(x) and math.isnan(y), f"{what}: {c} of {k!r}: {a[k][c]!r} != {b[k][c]!r}"
            else:
                assert math.isclose(x, y, rel_tol=rtol, abs_tol=atol) or x == y, f"{what}: {c} of {k!r}: {x!r} != {y!r}"


def _atol(case: Case) -> float:
    """Absolute noise of a difference of sums: ~1e-15 of the largest magnitude."""
    vals = [np.nanmax(np.abs(v)) for c, v in case.data.items() if c != "w" and len(v) and not np.isnan(v).all()]
    scale = max([1.0 if case.family in ("calibration", "sets", "ranking") else 0.0, *vals]) if vals else 1.0
    return 1e-13 * scale


def row_valid(case: Case) -> np.ndarray:
    ok = np.ones(case.n, dtype=bool)
    for v in case.data.values():
        ok &= ~np.isnan(v)
    return ok


#: the data columns each main metric reads besides w and k: under invalid="drop" a metric drops
#: only the rows its own inputs fail (issue 38 item 1)
READS = {
    "coverage": ("y", "lo", "hi"),
    "width": ("lo", "hi"),
    "winkler": ("y", "lo", "hi"),
    "ece": ("label", "score"),
    "brier": ("label", "score"),
    "auroc": ("correct", "conf"),
    "set_coverage": ("y",),
    "set_size": (),
    "crps": ("y", "mu", "sd"),
    "pinball_loss": ("y", "q10", "q50", "q90"),
}


def valid_for(case: Case, metric: str) -> np.ndarray:
    """The rows valid for ``metric``'s own inputs."""
    ok = np.ones(case.n, dtype=bool)
    for c in (*READS[metric], "w", "k"):
        if c in case.data:
            ok &= ~np.isnan(case.data[c])
    return ok


def _only(case: Case, metric: str) -> Case:
    """``case`` with the missing values of the columns ``metric`` does not read filled (for the oracle)."""
    data = {c: v if c in READS[metric] else np.nan_to_num(v, nan=0.0) for c, v in case.data.items()}
    return dataclasses.replace(case, data=data)


def _dropped(case: Case, idx: np.ndarray, rule: bool, weight: np.ndarray) -> tuple[dict[str, float], np.ndarray]:
    """Under "drop": each main metric on the rows valid for it, and the rows some metric dropped."""
    gone = np.zeros(len(idx), dtype=bool)
    values = {}
    for m in MAIN[case.family]:
        ok = valid_for(case, m)[idx]
        if rule and not (weight[idx[ok]] > 0).any():  # the positive-total rule reads the metric's rows left
            gone[:], values[m] = True, math.nan
            continue
        gone |= ~ok
        values[m] = oracle_values(_only(case, m), idx[ok])[m] if ok.any() else math.nan
    return values, gone


def expected(case: Case) -> dict[Any, dict[str, Any]]:
    """Per group: n, the invalid/dropped count and the main metrics from the oracle."""
    groups: dict[Any, list[int]] = {}
    for i, k in enumerate(case.keys):
        groups.setdefault(canon(k) if case.by else (), []).append(i)
    if not case.by and not groups:
        groups[()] = []
    valid = row_valid(case)
    ones = np.ones(case.n)
    rep = case.data.get("k", ones)  # the rows each row represents
    weight = case.data.get("w", ones) * rep
    rule = case.weights or case.counts  # a group needs a positive total weight (count)
    nulls = dict.fromkeys(MAIN[case.family], math.nan)
    out: dict[Any, dict[str, Any]] = {}
    for key, rows in groups.items():
        if key == ("missing",) and case.invalid == "drop":
            continue  # a null (or NaN) key: a group of its own, dropped with its rows under "drop"
        idx = np.array(rows, dtype=int)
        ok = valid[idx]
        n_bad = int(np.sum(~ok))
        # n: the represented rows; n_invalid / n_dropped: input rows (docs/weights.md); the
        # positive-total rule reads every row under "null", the rows left under "drop"
        if case.invalid == "drop":
            values, gone = _dropped(case, idx, rule, weight)
            exp = {"n": int(rep[idx[~gone]].sum()), "n_dropped": int(gone.sum())}
        else:
            zero = bool(rule and not (weight[idx] > 0).any())
            exp = {"n": int(rep[idx].sum()), "n_invalid": len(idx) if zero else n_bad}
            values = oracle_values(case, idx) if n_bad == 0 and len(idx) and not zero else nulls
        out[key] = {**exp, **values}
    return out


# ---------------------------------------------------------------------------
# known defects (issue 25): the narrow exclusions
# ---------------------------------------------------------------------------
def backend_skipped(case: Case, backend: str) -> str | None:
    """Why ``backend`` cannot run this case yet (a known defect), else None."""
    if backend == "pandas[pyarrow]":
        if (
            5 in KNOWN_DEFECTS
            and case.key_kind == "float"
            and any(isinstance(k, float) and k == 0.0 for k in case.keys)
        ):
            return "issue 25 defect 5: 0.0 and -0.0 keys form two groups on pandas[pyarrow]"
        if 6 in KNOWN_DEFECTS and case.key_kind == "cat":
            return "issue 25 defect 6: Arrow dictionary keys on pandas[pyarrow]"
    if (
        backend == "pandas"
        and 7 in KNOWN_DEFECTS
        and case.family == "sets"
        and case.params["list_column"]
        and not case.params["m"].any()
    ):
        return "issue 25 defect 7: a pandas object column of lists whose sets are all empty (or no rows)"
    return None


def crps_far_tail(case: Case, idx: np.ndarray) -> bool:
    """issue 25 defect 1: Gaussian CRPS is wrong beyond |z| = 1e6."""
    if 1 not in KNOWN_DEFECTS or case.family != "forecasts" or not len(idx):
        return False
    z = np.abs(case.data["y"][idx] - case.data["mu"][idx]) / case.data["sd"][idx]
    return bool(np.nanmax(z, initial=0.0) > 1e5)


# ---------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------
def native(case: Case, backend: str, frame: Any | None = None) -> Any:
    out = BACKENDS[backend](polars_frame(case) if frame is None else frame)
    if case.filtered:
        out = nw.from_native(out).filter(nw.col(case.names["keep"])).to_native()
    return out


def summary_parts(case: Case, ms: list[cf.Metric]) -> list[list[cf.Metric]]:
    """The metrics by the columns they read under "drop" (a summary per family), else all of them."""
    if case.invalid != "drop":
        return [ms]
    parts: dict[tuple[str, ...], list[cf.Metric]] = {}
    for m in ms:
        parts.setdefault(READS[m.default_name], []).append(m)
    return list(parts.values())


def run(case: Case, backend: str, ms: list[cf.Metric] | None = None) -> dict[Any, dict[str, Any]]:
    frame = native(case, backend)
    result = cf.evaluate(frame, *(ms or metrics(case)), by=case.by, invalid=case.invalid)
    return table(result, case)


def check_oracle(case: Case, got: dict[Any, dict[str, Any]]) -> None:
    exp = expected(case)
    assert got.keys() == exp.keys(), f"groups {sorted(map(str, got))} != {sorted(map(str, exp))}"
    atol = _atol(case)
    groups = {
        k: np.array([i for i, g in enumerate(case.keys) if (canon(g) if case.by else ()) == k], dtype=int) for k in exp
    }
    for key, e in exp.items():
        row = got[key]
        for c, v in e.items():
            if c == "crps" and crps_far_tail(case, groups[key]):
                continue
            a = _num(row[c])
            if math.isnan(v):
                assert math.isnan(a), f"{c} of {key!r}: {a!r}, expected null"
            else:
                assert math.isclose(a, v, rel_tol=RTOL, abs_tol=atol), f"{c} of {key!r}: {a!r} != {v!r}"


# ---------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_backends_agree_with_oracle(family: str) -> None:
    @PROFILE
    @given(cases(family))
    def check(case: Case) -> None:
        for label in describe(case):
            event(label)
        frame = polars_frame(case)
        before = frame.clone()
        results: dict[str, dict[Any, dict[str, Any]]] = {}
        for backend in BACKENDS:
            if backend_skipped(case, backend):
                continue
            source = BACKENDS[backend](frame)
            copy = source.copy(deep=True) if isinstance(source, pd.DataFrame) else None
            view = nw.from_native(source).filter(nw.col(case.names["keep"])).to_native() if case.filtered else source
            ms = metrics(case) + extra_metrics(case)
            results[backend] = table(cf.evaluate(view, *ms, by=case.by, invalid=case.invalid), case)
            if copy is not None:
                pd.testing.assert_frame_equal(source, copy)  # never modified
        assert frame.equals(before)
        first, *others = results
        for backend in others:
            same_tables(results[first], results[backend], f"{first} vs {backend}", atol=_atol(case) * 1e-2)
        check_oracle(case, results[first])
        if flag_metrics(case):  # flags, p-values and bookkeeping of a test: the same on every backend
            flags = {b: run(case, b, flag_metrics(case)) for b in FLAG_BACKENDS if not backend_skipped(case, b)}
            first, *others = flags
            for backend in others:
                same_tables(flags[first], flags[backend], f"coverage_test: {first} vs {backend}", rtol=1e-10)

    check()


def _take(case: Case, order: np.ndarray, **changes: Any) -> Case:
    data = {c: v[order] for c, v in case.data.items()}
    params = dict(case.params)
    if "m" in params:
        params["m"] = params["m"][order]
    new = Case(
        **{**case.__dict__, "data": data, "keys": [case.keys[i] for i in order], "n": len(order), "params": params}
    )
    for k, v in changes.items():
        setattr(new, k, v)
    return new


def _summary_concat(parts: list[Any]) -> Any:
    frames = [nw.from_native(p) for p in parts]
    return nw.concat(frames, how="vertical").to_native()


@pytest.mark.parametrize("family", FAMILIES)
def test_invariances(family: str) -> None:
    @PROFILE
    @given(cases(family), st.sampled_from(list(BACKENDS)), st.sampled_from([0.5, 3.0, 1e-3, 1e3]))
    def check(case: Case, backend: str, c: float) -> None:
        if backend_skipped(case, backend):
            backend = "polars"
        rng = np.random.default_rng(case.n)
        base = run(case, backend)
        atol = _atol(case)
        # row shuffle
        perm = rng.permutation(case.n)
        same_tables(base, run(_take(case, perm), backend), "shuffle", atol=atol)
        # duplication: every estimate unchanged, n doubled
        twice = run(_take(case, np.concatenate([np.arange(case.n), np.arange(case.n)])), backend)
        assert base.keys() == twice.keys()
        for k in base:
            for col in [*MAIN[family], "n"]:
                a, b = _num(base[k][col]), _num(twice[k][col])
                exp = 2 * a if col == "n" else a
                assert (math.isnan(a) and math.isnan(b)) or math.isclose(b, exp, rel_tol=RTOL, abs_tol=atol), (
                    f"duplication: {col} of {k!r}: {b!r} != {exp!r}"
                )
        # weight scaling
        if case.weights:
            scaled = _take(case, np.arange(case.n))
            scaled.data["w"] = case.data["w"] * c
            same_tables(base, run(scaled, backend), f"weights x {c}", rtol=1e-11, atol=atol)
        if "internal-name" in NEW_DEFECTS and any(v.startswith("__cf_") for v in case.names.values()):
            return  # new defect internal-name (fixed): summarize() recursed on a column named "__cf_r0"
        # summarize / finalize = evaluate
        frame = native(case, backend)
        ms = metrics(case)
        if case.params.get("n_bins", 0) > 32:
            return  # uniform ECE merges exactly up to 32 bins (summarize refuses more, documented)
        # a summary drops a row from all its metrics (one n per row): under "drop" each family is summarized apart
        parts = summary_parts(case, ms)
        bases = [base] if len(parts) == 1 else [run(case, backend, part) for part in parts]
        empty_grouped = case.n == 0 and case.by is not None
        for part, pbase in zip(parts, bases):
            summarized = cf.summarize(frame, *part, by=case.by, invalid=case.invalid)
            if not (3 in KNOWN_DEFECTS and empty_grouped):  # issue 25 defect 3
                got = table(cf.finalize(summarized, *part, by=case.by), case)
                same_tables(pbase, got, "summarize/finalize", atol=atol)
        if flag_metrics(case) and backend in FLAG_BACKENDS:  # a test's flag and bookkeeping on both paths
            fm = flag_metrics(case)
            got = table(cf.finalize(cf.summarize(frame, *fm, by=case.by, invalid=case.invalid), *fm, by=case.by), case)
            same_tables(run(case, backend, fm), got, "coverage_test summarize/finalize", rtol=1e-10)
        # two days, summarized apart, merged and finalized = evaluate on both
        day = rng.random(case.n) < rng.uniform(0.0, 1.0)
        if rng.random() < 0.2:
            day[:] = rng.random() < 0.5  # one day without rows
        days = [_take(case, np.flatnonzero(day == v)) for v in (True, False)]
        one_empty = min(d.n for d in days) == 0
        zero_partition = case.weights and any(
            d.data["w"][[canon(k) == g for k in d.keys]].sum() == 0
            for d in days
            for g in {canon(k) for k in d.keys}
            if case.data["w"][[canon(k) == g for k in case.keys]].sum() > 0
        )
        known = (
            (2 in KNOWN_DEFECTS and one_empty and case.by is None)  # issue 25 defect 2
            or (3 in KNOWN_DEFECTS and one_empty and case.by is not None)  # issue 25 defect 3
            or (8 in KNOWN_DEFECTS and zero_partition)  # issue 25 defect 8
            # new defect bool-key-concat (fixed): a pandas day whose Boolean keys are all null had a float key
            # column; concatenated with another day's bool keys, False became 0.0 before merge_summaries
            or (
                "bool-key-concat" in NEW_DEFECTS
                and backend == "pandas"
                and case.key_kind == "bool"
                and any(d.n and all(_null_key(k) for k in d.keys) for d in days)
            )
        )
        for part, pbase in zip(parts, bases) if not known else ():
            daily = [cf.summarize(native(d, backend), *part, by=case.by, invalid=case.invalid) for d in days]
            merged = cf.merge_summaries(_summary_concat(daily), by=case.by)
            same_tables(pbase, table(cf.finalize(merged, *part, by=case.by), case), "two days merged", atol=atol)
        # an extra all-invalid group under invalid="drop"
        if case.key_kind in ("str", "many", "int", "date", "cat") and case.n:
            extra_key = {"int": 123456, "date": dt.date(2100, 1, 1)}.get(case.key_kind, "✗ all invalid")
            extra = _take(case, np.concatenate([np.arange(case.n), [0, 0]]), invalid="drop")
            first = next(iter(extra.data))
            extra.data[first] = extra.data[first].copy()
            extra.data[first][-2:] = np.nan
            extra.keys[-2:] = [extra_key, extra_key]
            got = run(extra, backend)
            ref = run(_take(case, np.arange(case.n), invalid="drop"), backend)
            new = got.pop(canon(extra_key))
            same_tables(ref, got, "extra invalid group", atol=atol)
            assert new["n"] == 0 and new["n_dropped"] == 2, new
            assert all(math.isnan(_num(new[col])) for col in MAIN[family] if first in READS[col]), new

    check()


# ---------------------------------------------------------------------------
# issue 42: the classes a second differential fuzz found, generated
# ---------------------------------------------------------------------------
#: fewer examples for these (each runs every backend); the long profile runs its own count
SMALL = PROFILE if LONG else settings(PROFILE, max_examples=6)


def _tables_agree(
    results: dict[str, Any], keys: list[str], what: str, *, rtol: float = RTOL, atol: float = 1e-300
) -> dict[Any, Any]:
    """Results of several backends as ``{key tuple: row}``, asserted equal (every column); the first's table."""
    tables: dict[str, dict[Any, dict[str, Any]]] = {}
    for backend, result in results.items():
        rows: dict[Any, dict[str, Any]] = {}
        for rec in to_pandas(result).to_dict("records"):
            key = tuple(canon(rec.pop(k)) for k in keys)
            assert key not in rows, f"{what} on {backend}: two rows for {key!r}"
            rows[key] = rec
        tables[backend] = rows
    first, *others = tables
    for backend in others:
        same_tables(tables[first], tables[backend], f"{what}: {first} vs {backend}", rtol=rtol, atol=atol)
    return tables[first]


# -- composite metrics with counts= and weights= --------------------------------------
@st.composite
def scored(draw: st.DrawFn) -> dict[str, Any]:
    """A forecast, a reference and two models' rows: y, f, b (one decimal: ties), w, k, g, model."""
    n = draw(st.integers(0, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    y = np.round(rng.normal(size=n) * 2, 1)
    data = {
        "y": y,
        "f": np.round(y + rng.normal(size=n), 1),
        "b": np.round(y + rng.normal(size=n) * 2, 1),
        "w": rng.choice([0.0, 0.5, 1.0, 3.0], size=n, p=[0.15, 0.25, 0.4, 0.2]),
        "k": rng.choice([0, 1, 2, 3], size=n, p=[0.25, 0.35, 0.25, 0.15]),
        "g": [f"g{i}" for i in rng.integers(0, draw(st.integers(1, 4)), size=n)],
        "model": rng.choice(["m1", "m2", "m3"], size=n),
    }
    return {"data": data, "weighting": draw(st.sampled_from(["none", "weights", "counts", "both"]))}


def _mae(data: dict[str, Any], idx: np.ndarray, column: str, weight: np.ndarray) -> float:
    err, w = np.abs(data["y"][idx] - data[column][idx]), weight[idx]
    return float(np.sum(w * err) / np.sum(w)) if np.sum(w) > 0 else math.nan


@given(scored(), st.sampled_from(["null", "drop"]), st.sampled_from([b for b in BACKENDS if b != "polars"]))
@SMALL
def test_composite_metrics_with_counts_and_weights(drawn: dict[str, Any], invalid: str, other: str) -> None:
    data, how = drawn["data"], drawn["weighting"]
    event(f"composite {how}")
    backends = ["polars", other]  # one other backend per example: bootstraps cost
    opts = {
        "none": {},
        "weights": {"weights": "w"},
        "counts": {"counts": "k"},
        "both": {"weights": "w", "counts": "k"},
    }[how]
    frame = pl.DataFrame({c: pl.Series(c, v, dtype=pl.Int64 if c == "k" else None) for c, v in data.items()})
    skill = cf.skill_score(cf.mae("y", "f", **opts), cf.mae("y", "b", **opts))
    ms: list[cf.Metric] = [skill, cf.mae("y", "f", **opts)]
    if "counts" not in opts:  # bootstrap resamples input rows
        ms.append(cf.bootstrap(cf.mae("y", "f", **opts), n_resamples=20, seed=1).alias("boot"))
    results = {b: cf.evaluate(BACKENDS[b](frame), *ms, by="g", invalid=invalid) for b in backends}
    got = _tables_agree(results, ["g"], f"composites ({how})", rtol=1e-10, atol=1e-12)  # a skill near 0
    weight = data["w"] if "weights" in opts else np.ones(len(data["y"]))
    weight = weight * (data["k"] if "counts" in opts else 1)
    keys = np.array(data["g"], dtype=object)
    for (key,), row in got.items():
        idx = np.flatnonzero(keys == key[1])
        s_f, s_b = _mae(data, idx, "f", weight), _mae(data, idx, "b", weight)
        expect = math.nan if math.isnan(s_b) or s_b == 0 else 1.0 - s_f / s_b
        assert_close([row["mae_skill"]], [expect], rtol=1e-12, atol=1e-12, what=f"skill of {key}")
        assert_close([row["mae"]], [s_f], rtol=1e-12, what=f"mae of {key}")
        if "boot" in row:
            assert_close([row["boot"]], [s_f], rtol=1e-12, what=f"bootstrap of {key}")
        assert row["n"] == int(np.sum(data["k"][idx])) if "counts" in opts else len(idx)
    # the one-counts-column rule sees through the skill score
    if "counts" in opts:
        with pytest.raises(ValueError, match="same counts="):
            cf.evaluate(frame, skill, cf.mae("y", "f"), by="g")
    # relative skill over the models (a frame function of the metric with its counts / weights)
    # 0.3's rule (each model's mean over all its rows): compare="all", which warns when the sets differ
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rel = {
            b: cf.relative_skill(
                BACKENDS[b](frame), cf.mae("y", "f", **opts), model="model", by="g", invalid=invalid, compare="all"
            )
            for b in backends
        }
    got = _tables_agree(rel, ["g", "model"], f"relative_skill ({how})", rtol=1e-10)
    models = np.array(data["model"], dtype=object)
    for (g, m), row in got.items():
        scores = {
            mm: _mae(data, np.flatnonzero((keys == g[1]) & (models == mm)), "f", weight)
            for (gg, mm) in [(gg, mm[1]) for gg, mm in got if gg == g]
        }
        assert_close([row["mae"]], [scores[m[1]]], rtol=1e-12, what=f"relative_skill mae of {g}, {m}")
        vals = np.array([v for v in scores.values() if not math.isnan(v)])  # null scores are left out
        own = scores[m[1]]
        ok = not math.isnan(own) and bool(np.all(vals > 0))
        expect = own / np.exp(np.mean(np.log(vals))) if ok else math.nan
        assert_close([row["relative_skill"]], [expect], rtol=1e-10, what=f"relative_skill of {g}, {m}")


# -- groups shorter than their horizon, season or lag -----------------------------------
def _dm_exact(d: list[Fraction], a2b2: float, h: int) -> tuple[float, float]:
    """DM of one group in exact rational arithmetic (gamma_0 fallback when V <= 0; null when d is constant)."""
    n = len(d)
    mean = sum(d, Fraction(0)) / n
    c = [x - mean for x in d]
    gamma = [sum((c[t] * c[t - k] for t in range(k, n)), Fraction(0)) / n for k in range(min(h, n))]
    if float(gamma[0]) <= 1e-24 * a2b2 / n:
        return math.nan, math.nan
    v = gamma[0] + 2 * sum(gamma[1:], Fraction(0))
    v = v if v > 0 else gamma[0]
    stat = float(mean) / math.sqrt(float(v) / n)
    return stat, float(2 * ndtr(-abs(stat)))


@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.integers(1, 7),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
@SMALL
def test_short_groups_against_exact_oracles(sizes: list[int], h: int, h_column: bool, seed: int) -> None:
    event("horizon >= a group's rows" if h >= min(sizes) else "horizon < every group's rows")
    rng = np.random.default_rng(seed)
    g = np.repeat([f"s{i}" for i in range(len(sizes))], sizes)
    t = np.concatenate([rng.permutation(m) for m in sizes])  # rows in no particular order
    n = len(g)
    y, f1, f2 = (np.round(rng.normal(size=n) * 2, 1) for _ in range(3))
    frame = pl.DataFrame({"g": g, "t": t, "y": y, "f1": f1, "f2": f2, "h": np.full(n, h)})
    test = cf.diebold_mariano_test("y", "f1", "f2", order_by="t", horizon="h" if h_column else h, small_sample=None)
    season = int(rng.integers(1, 5))
    results, scales = {}, {}
    for b in BACKENDS:
        results[b] = cf.evaluate(BACKENDS[b](frame), test, by="g", invalid="null")
        scales[b] = cf.naive_scale(BACKENDS[b](frame), "y", order_by="t", by="g", season=season, invalid="null")
    dm = _tables_agree(results, ["g"], "diebold_mariano_test", rtol=1e-9)
    naive = _tables_agree(scales, ["g"], "naive_scale", rtol=1e-12)
    for (key,), row in dm.items():
        rows = np.flatnonzero(g == key[1])
        order = rows[np.argsort(t[rows])]
        d = [
            Fraction(float(a)) - Fraction(float(b))
            for a, b in zip((y[order] - f1[order]) ** 2, (y[order] - f2[order]) ** 2)
        ]
        a2b2 = float(np.sum((y[order] - f1[order]) ** 2 + (y[order] - f2[order]) ** 2))
        stat, p = _dm_exact(d, a2b2, h)
        assert_close([row["diebold_mariano_test"]], [stat], rtol=1e-9, what=f"DM of {key}")
        assert_close([row["diebold_mariano_test_pvalue"]], [p], rtol=1e-9, atol=1e-15, what=f"p of {key}")
        lagged = y[order][season:] - y[order][:-season] if len(order) > season else np.array([])
        mae = float(np.mean(np.abs(lagged))) if len(lagged) else math.nan
        assert_close([naive[(key,)]["naive_mae"]], [mae], rtol=1e-12, what=f"naive_mae of {key}")
        assert naive[(key,)]["n"] == len(order)


# -- Categorical / Enum / Arrow dictionary keys through every frame function -------------
def _through_parquet(frame: Any) -> Any:
    """pandas with Arrow dtypes as ``pd.read_parquet(dtype_backend="pyarrow")`` gives it (dictionary keys)."""
    import io

    buf = io.BytesIO()
    frame.write_parquet(buf)
    buf.seek(0)
    return pd.read_parquet(buf, dtype_backend="pyarrow")


KEYED = {**BACKENDS, "pandas[parquet]": _through_parquet}


def _sorted_rows(result: Any) -> list[tuple[Any, ...]]:
    out = to_pandas(result)
    return sorted(
        tuple(canon(v) if not isinstance(v, str) else ("str", v) for v in rec) for rec in out.itertuples(index=False)
    )


def _rows_agree(results: dict[str, Any], what: str) -> None:
    (first, a), *others = ((b, _sorted_rows(r)) for b, r in results.items())
    for backend, b in others:
        assert len(a) == len(b), f"{what}: {first} {len(a)} rows, {backend} {len(b)}"
        for ra, rb in zip(a, b):
            for x, y in zip(ra, rb):
                if x[0] == "num" and y[0] == "num":
                    assert math.isclose(x[1], y[1], rel_tol=1e-9, abs_tol=1e-12), (
                        f"{what}: {first} vs {backend}: {ra} != {rb}"
                    )
                else:
                    assert x == y, f"{what}: {first} vs {backend}: {ra} != {rb}"


def _cheap() -> Any:
    """A classifier that fits in a millisecond (the default one takes seconds on a loaded machine)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression()


def _frame_functions(native: Any) -> dict[str, Callable[[], Any]]:
    cov, bri, inv = cf.coverage("y", "lo", "hi"), cf.brier("label", "s"), "null"
    days = ["g", "t"]
    return {
        "evaluate": lambda: cf.evaluate(native, cov, bri, cf.reliability("label", "s", n_bins=3), by="g", invalid=inv),
        "finalize": lambda: cf.finalize(cf.summarize(native, cov, bri, by=days, invalid=inv), cov, bri, by="g"),
        "merge_summaries": lambda: cf.merge_summaries(cf.summarize(native, cov, by=days, invalid=inv), by="g"),
        "rolling": lambda: cf.rolling(
            cf.summarize(native, cov, by=days, invalid=inv), cov, index="t", window=2, by="g"
        ),
        "naive_scale": lambda: cf.naive_scale(native, "y", order_by="t", by="g", invalid=inv),
        "relative_skill": lambda: cf.relative_skill(
            native, cf.mae("y", "lo"), model="m", baseline="m1", by="g", invalid=inv
        ),
        "cumulative_differences": lambda: cf.cumulative_differences(native, "label", "s", by="g", invalid=inv),
        "corp_reliability": lambda: cf.corp_reliability(native, "label", "s", n_resamples=5, by="g", invalid=inv),
        "excess_risk_target_coverage": lambda: cf.excess_risk_target_coverage(
            native,
            "y",
            "lo",
            "hi",
            features=["x"],
            confidence_level=0.9,
            n_splits=2,
            by="g",
            invalid=inv,
            model=_cheap(),
        ),
    }


@given(
    st.sampled_from(["cat", "enum"]),
    st.integers(4, 40),
    st.integers(0, 2**32 - 1),
    st.sampled_from([b for b in KEYED if b != "polars"]),
)
@(PROFILE if LONG else settings(PROFILE, max_examples=4))
def test_categorical_keys_through_frame_functions(kind: str, n: int, seed: int, other: str) -> None:
    rng = np.random.default_rng(seed)
    # an Enum sorts by its categories, the backends that read it as text lexically: categories in lexical
    # order here, as corp_reliability's band depends on the group's position in the sorted keys (documented)
    labels = ["a", "ключ ✓", "b", "m1", "m2"]
    dtype = pl.Categorical if kind == "cat" else pl.Enum(sorted(labels))
    y = rng.normal(size=n)
    frame = pl.DataFrame(
        {
            "g": pl.Series(rng.choice(labels[:3], size=n), dtype=pl.String).cast(dtype),
            "m": pl.Series(np.where(np.arange(n) % 2 == 0, "m1", "m2"), dtype=pl.String).cast(dtype),
            "t": np.arange(n),
            "y": y,
            "lo": y - rng.gamma(2.0, 1.0, size=n) + 0.5,
            "hi": y + rng.gamma(2.0, 1.0, size=n) - 0.5,
            "label": (rng.random(n) < 0.5).astype(float),
            "s": np.round(rng.random(n), 2),
            "x": rng.normal(size=n),
        }
    ).with_columns(pl.max_horizontal("lo", "hi").alias("hi"), pl.min_horizontal("lo", "hi").alias("lo"))
    event(f"{kind} keys on {other}")
    for name in _frame_functions(frame):
        results = {}
        for backend in ("polars", other):
            native = KEYED[backend](frame)
            try:
                results[backend] = _frame_functions(native)[name]()
            except cf.BackendLimitError:  # eager-only functions on lazy backends (documented)
                continue
        if len(results) == 2:
            _rows_agree(results, f"{name} with {kind} keys")
    # finalize of a summary with dictionary keys read back from Parquet (a polars summary)
    cov = cf.coverage("y", "lo", "hi")
    summary = _through_parquet(cf.summarize(frame, cov, by=["g", "t"], invalid="null"))
    expected = cf.evaluate(frame, cov, by="g", invalid="null")
    _rows_agree({"polars": expected, "parquet": cf.finalize(summary, cov, by="g")}, "finalize from Parquet")


# -- the summary without rows of every mergeable metric --------------------------------
def _every_metric() -> dict[str, cf.Metric]:
    from test_output_contract import CALLS

    out = {name: make() for name, make in sorted(CALLS.items())}
    c = [0, 1, 2]  # the set metrics on a list column too
    out.update(
        {
            "set_coverage[list]": cf.set_coverage("label3", "sets", classes=c),
            "set_size[list]": cf.set_size("sets", classes=c),
            "empty_rate[list]": cf.empty_rate("sets", classes=c),
            "singleton_rate[list]": cf.singleton_rate("sets", classes=c),
            "set_ssc[list]": cf.set_ssc("label3", "sets", classes=c),
            "set_ssc_score[list]": cf.set_ssc_score("label3", "sets", classes=c),
        }
    )
    return out


def test_empty_summaries_of_every_mergeable_metric() -> None:
    """``finalize(summary.head(0))`` has evaluate's columns: no rows grouped, one row of n = 0 ungrouped."""
    from test_output_contract import DATA

    data = dict(DATA)
    data["sets"] = [[j for j in range(3) if data[f"m{j}"][i]] for i in range(len(data["g"]))]
    frame = pl.DataFrame(data, strict=False)
    backends = list(BACKENDS)
    mergeable = 0
    for i, (name, metric) in enumerate(_every_metric().items()):
        for backend in backends if LONG else [backends[i % len(backends)]]:  # CI: one backend per metric
            native = BACKENDS[backend](frame)
            try:
                summary = cf.summarize(native, metric, by="g", invalid="null")
            except ValueError as exc:
                if "do not merge exactly" in str(exc):
                    break
                raise
            except cf.BackendLimitError:
                continue
            mergeable += backend == backends[i % len(backends)]
            empty = nw.to_native(nw.from_native(summary).head(0))
            for by in ("g", None):
                try:
                    full = to_pandas(cf.finalize(summary, metric, by=by))
                except cf.BackendLimitError:  # a numpy step (e.g. exact p-values) on a lazy SQL frame
                    break
                got = to_pandas(cf.finalize(empty, metric, by=by))
                assert list(got.columns) == list(full.columns), f"{name} on {backend}, by={by}"
                assert len(got) == (0 if by else 1), f"{name} on {backend}, by={by}"
                if by is None:
                    assert got["n"].tolist() == [0], f"{name} on {backend}"
    assert mergeable >= 30  # most metrics merge
