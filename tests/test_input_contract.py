"""One input contract: every documented form of a role gives the same values and the same refusals.

Prediction sets cross six forms (a polars list, a pandas object column of
lists / of tuples, sets and numpy arrays, a pandas pyarrow list, a DuckDB
list, Boolean membership columns with ``classes=``), each with and without
``classes=`` where that applies, with every metric that reads sets and with
``report()``.  With 3 classes the size strata of ``set_ssc`` without classes
(sizes 0, 1, 2 and ``>= 3``) are the sizes ``0..3`` of the classes: the same
strata either way.  The level role (a float or a ``by=`` column) and the
binary label role (0/1 integers, floats or Booleans) are crossed where cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
import oracle_sets as osets
from helpers import assert_close, to_pandas

K = 3
CLASSES = list(range(K))
DATA = osets.random_sets(7, n=90, k=K)
LISTS = [[c for c, inside in zip(CLASSES, row) if inside] for row in DATA["m"]]
X = np.random.default_rng(3).random(len(LISTS))


W = np.random.default_rng(4).uniform(0.0, 2.0, len(LISTS))


def _base(sets: Any) -> dict[str, Any]:
    return {"g": list(DATA["g"]), "x": X, "w": W, "y": DATA["y"].astype(np.int64), "s": sets}


def _pandas_object(cells: list[Any]) -> pd.DataFrame:
    frame = pd.DataFrame({k: v for k, v in _base(None).items() if k != "s"})
    frame["s"] = pd.Series(cells, dtype=object)
    return frame


def _polars(lists: list[Any]) -> pl.DataFrame:
    text = any(isinstance(c, str) for v in lists if v is not None for c in v)
    return pl.DataFrame(_base(lists), schema_overrides={"s": pl.List(pl.String if text else pl.Int64)})


def _duckdb(lists: list[Any]) -> Any:
    import duckdb

    return duckdb.connect().from_arrow(_polars(lists).to_arrow())


def _mixed(lists: list[Any]) -> list[Any]:
    """Tuples, sets and numpy arrays in turn (missing cells stay missing)."""
    kinds: list[Callable[[list[Any]], Any]] = [tuple, set, np.array]
    return [None if v is None else kinds[i % 3](v) for i, v in enumerate(lists)]


def _membership(lists: list[Any]) -> pd.DataFrame:
    frame = pd.DataFrame({k: v for k, v in _base(None).items() if k != "s"})
    for c in CLASSES:
        frame[f"m{c}"] = pd.array([None if v is None else c in v for v in lists], dtype="boolean")
    return frame


#: form -> (frame from the lists, the sets= argument, needs classes, eager)
FORMS: dict[str, tuple[Callable[[list[Any]], Any], Any, bool, bool]] = {
    "polars list": (_polars, "s", False, True),
    "polars lazy list": (lambda v: _polars(v).lazy(), "s", False, False),
    "pandas object lists": (lambda v: _pandas_object([None if c is None else list(c) for c in v]), "s", False, True),
    "pandas object tuples/sets/arrays": (lambda v: _pandas_object(_mixed(v)), "s", False, True),
    "pandas pyarrow list": (lambda v: _polars(v).to_pandas(use_pyarrow_extension_array=True), "s", False, True),
    "duckdb list": (_duckdb, "s", False, False),
    "membership columns": (_membership, [f"m{c}" for c in CLASSES], True, True),
}


def _cases() -> list[Any]:
    out = []
    for form, (_, _, needs, _) in FORMS.items():
        out.append(pytest.param(form, True, id=f"{form}+classes"))
        if not needs:
            out.append(pytest.param(form, False, id=form))
    return out


def _metrics(sets: Any, classes: list[int] | None) -> list[cf.Metric]:
    c = {"classes": classes}
    return [
        cf.set_coverage("y", sets, **c),
        cf.set_size(sets, **c),
        cf.singleton_rate(sets, **c),
        cf.empty_rate(sets, **c),
        cf.set_ssc("y", sets, **c),
        cf.set_ssc_score("y", sets, **c),
        cf.coverage_gap("y", sets=sets, groups="g", confidence_level=0.8, **c),
    ]


def _tested(sets: Any, classes: list[int] | None) -> cf.Metric:
    return cf.coverage_test("y", sets=sets, classes=classes, confidence_level=0.8, n_calibration=50)


def _expected() -> dict[str, float]:
    yi, m = DATA["yi"], DATA["m"]
    covered = osets.set_covered(yi, m)
    sizes = m.sum(axis=1)
    strata = [covered[sizes == s].mean() for s in range(1, K + 1) if (sizes == s).any()]  # non-empty sets
    gaps = [abs(covered[DATA["g"] == g].mean() - 0.8) for g in np.unique(DATA["g"])]
    return {
        "set_coverage": osets.set_coverage(yi, m),
        "set_size": osets.set_size(m),
        "singleton_rate": osets.size_rate(m, 1),
        "empty_rate": osets.size_rate(m, 0),
        "set_ssc_score": float(min(strata)),
        "coverage_gap": float(np.mean(gaps)),
    }


def _reference() -> pd.DataFrame:
    return to_pandas(cf.evaluate(_polars(LISTS), *_metrics("s", CLASSES), _tested("s", CLASSES)))


def _run(form: str, classes: bool, lists: list[Any], *metrics: cf.Metric, **options: Any) -> pd.DataFrame:
    make = FORMS[form][0]
    return to_pandas(cf.evaluate(make(lists), *metrics, **options))


@pytest.mark.parametrize(("form", "with_classes"), _cases())
def test_every_form_gives_the_same_values(form: str, with_classes: bool) -> None:
    sets, classes = FORMS[form][1], CLASSES if with_classes else None
    metrics = _metrics(sets, classes)
    eager = FORMS[form][3]
    if eager or form == "polars lazy list":  # the p-values: eager frames and polars
        metrics.append(_tested(sets, classes))
    out = _run(form, with_classes, LISTS, *metrics)
    ref = _reference()
    for name, value in _expected().items():
        assert_close(out[name], [value], rtol=1e-12, what=f"{form} {name}")
    same = [c for c in out.columns if c in ref.columns and c not in ("n_invalid", "coverage_gap_worst_g")]
    assert {c for c in ref.columns if c.startswith("set_ssc_bin")} <= set(out.columns)
    assert_close(out[same].to_numpy(dtype=float), ref[same].to_numpy(dtype=float), rtol=1e-12, what=form)
    assert out["coverage_gap_worst_g"].tolist() == ref["coverage_gap_worst_g"].tolist()


def _weighted(sets: Any, classes: list[int] | None) -> list[cf.Metric]:
    c: dict[str, Any] = {"classes": classes, "weights": "w"}
    return [
        cf.set_coverage("y", sets, **c),
        cf.set_size(sets, **c),
        cf.singleton_rate(sets, **c),
        cf.empty_rate(sets, **c),
        cf.set_ssc("y", sets, **c),
        cf.coverage_gap("y", sets=sets, groups="g", confidence_level=0.8, **c),
    ]


@pytest.mark.parametrize(("form", "with_classes"), _cases())
def test_every_form_gives_the_same_weighted_values(form: str, with_classes: bool) -> None:
    sets, classes = FORMS[form][1], CLASSES if with_classes else None
    out = _run(form, with_classes, LISTS, *_weighted(sets, classes))
    ref = to_pandas(cf.evaluate(_polars(LISTS), *_weighted("s", CLASSES)))
    cols = [c for c in ref.columns if c not in ("n_invalid", "coverage_gap_worst_g")]
    assert_close(out[cols].to_numpy(dtype=float), ref[cols].to_numpy(dtype=float), rtol=1e-12, what=form)


@pytest.mark.parametrize(("form", "with_classes"), [c for c in _cases() if FORMS[c.values[0]][3]])
def test_summaries_of_every_form_equal_the_evaluation(form: str, with_classes: bool) -> None:
    sets, classes = FORMS[form][1], CLASSES if with_classes else None
    metrics = [cf.set_coverage("y", sets, classes=classes), cf.set_ssc_score("y", sets, classes=classes)]
    frame = FORMS[form][0](LISTS)
    merged = to_pandas(cf.finalize(cf.summarize(frame, *metrics, by="g"), *metrics))
    ref = _reference()
    assert_close(
        merged[["set_coverage", "set_ssc_score"]].to_numpy(),
        ref[["set_coverage", "set_ssc_score"]].to_numpy(),
        rtol=1e-12,
    )


@pytest.mark.parametrize(("form", "with_classes"), _cases())
def test_set_ssc_long_table_is_the_same(form: str, with_classes: bool) -> None:
    sets, classes = FORMS[form][1], CLASSES if with_classes else None
    frame = FORMS[form][0](LISTS)
    out = to_pandas(_long(frame, cf.set_ssc("y", sets, classes=classes)))
    ref = to_pandas(_long(_polars(LISTS), cf.set_ssc("y", "s", classes=CLASSES)))
    assert list(out.columns) == ["size_min", "size_max", "set_ssc", "n"]
    assert_close(out.to_numpy(dtype=float), ref.to_numpy(dtype=float), rtol=1e-12, what=form)


def _long(frame: Any, metric: cf.Metric) -> Any:
    import narwhals.stable.v2 as nw

    from conformal_frames.engine import evaluate_one

    result = evaluate_one(frame, metric)
    native = nw.to_native(result) if isinstance(result, (nw.DataFrame, nw.LazyFrame)) else result
    return native.collect() if hasattr(native, "collect") and not isinstance(native, pd.DataFrame) else native


@pytest.mark.parametrize(("form", "with_classes"), [c for c in _cases() if FORMS[c.values[0]][3]])
def test_every_eager_form_gives_the_same_worst_slab(form: str, with_classes: bool) -> None:
    sets, classes = FORMS[form][1], CLASSES if with_classes else None
    metric = cf.worst_slab_coverage("y", sets=sets, classes=classes, features=["x"], n_directions=3)
    out = _run(form, with_classes, LISTS, metric)
    ref = _run("polars list", True, LISTS, cf.worst_slab_coverage("y", sets="s", classes=CLASSES, features=["x"]))
    assert_close(out["worst_slab_coverage"], ref["worst_slab_coverage"], rtol=1e-12, what=form)


@pytest.mark.parametrize(("form", "with_classes"), [c for c in _cases() if FORMS[c.values[0]][3]])
def test_every_eager_form_gives_the_same_excess_risk(form: str, with_classes: bool) -> None:
    pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    sets, classes = FORMS[form][1], CLASSES if with_classes else None
    options: dict[str, Any] = {"features": ["x"], "confidence_level": 0.8, "model": LogisticRegression(), "n_splits": 3}
    out = cf.excess_risk_target_coverage(FORMS[form][0](LISTS), "y", sets=sets, classes=classes, **options)
    ref = cf.excess_risk_target_coverage(_polars(LISTS), "y", sets="s", classes=CLASSES, **options)
    assert out == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize(  # report(sets=) takes a list column
    ("form", "with_classes"), [c for c in _cases() if FORMS[c.values[0]][3] and FORMS[c.values[0]][1] == "s"]
)
def test_every_eager_form_gives_the_same_report(form: str, with_classes: bool) -> None:
    sets = FORMS[form][1]
    frame = FORMS[form][0](LISTS)
    classes = CLASSES if with_classes else None
    rep = cf.report(frame, y="y", sets=sets, classes=classes, by="g", confidence_level=0.8)
    ref = cf.report(_polars(LISTS), y="y", sets="s", classes=CLASSES, by="g", confidence_level=0.8)
    got, want = to_pandas(rep.tables["sets"]), to_pandas(ref.tables["sets"])
    assert list(got.columns) == list(want.columns)
    numeric = [c for c in want.columns if c not in ("g", "under_covered")]
    assert_close(got[numeric].to_numpy(dtype=float), want[numeric].to_numpy(dtype=float), rtol=1e-12, what=form)


def test_done_when() -> None:
    frame = pd.DataFrame({"y": [2, 8, 3, 1], "sets": [[2], [8, 1], [], [1]]})
    rep = frame.conformal.report(y="y", sets="sets", confidence_level=0.9)
    assert to_pandas(rep.tables["sets"])["set_coverage"].tolist() == [0.75]
    assert frame.conformal.coverage_test(y="y", sets="sets", confidence_level=0.9).statistic == 0.75
    ssc = frame.conformal.set_ssc(y="y", sets="sets")
    assert ssc.to_dict("list") == {
        "size_min": [0, 1, 2],
        "size_max": [0, 1, 2],
        "set_ssc": [0.0, 1.0, 1.0],
        "n": [1, 2, 1],
    }


def test_the_open_stratum_reports_its_largest_size() -> None:
    frame = pl.DataFrame({"y": [0, 1, 2, 3, 4], "s": [[0], [0, 1], [1, 3, 4], [0, 1, 2, 3, 4], []]})
    out = frame.conformal.set_ssc("y", "s", n_bins=3)
    assert out.rows() == [(0, 0, 0.0, 1), (1, 1, 1.0, 1), (2, 5, 2 / 3, 3)]
    wide = cf.evaluate(frame, cf.set_ssc("y", "s", n_bins=3))
    assert wide.columns[-2:] == ["set_ssc_bin2_size_max", "n"]


def test_the_cli_reads_sets_without_classes(tmp_path: Any, capsys: Any) -> None:
    import json

    from conformal_frames import cli

    path = tmp_path / "sets.parquet"
    _polars(LISTS).write_parquet(path)
    assert cli.main(["report", str(path), "--y", "y", "--sets", "s", "--by", "g", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]["sets"]
    ref = to_pandas(cf.report(_polars(LISTS), y="y", sets="s", classes=CLASSES, by="g").tables["sets"])
    assert [r["set_coverage"] for r in rows] == pytest.approx(ref["set_coverage"].tolist(), rel=1e-12)


# ---------------------------------------------------------------------------
# refusals: the same input error, the same message, whatever the form
# ---------------------------------------------------------------------------
def _refusal(form: str, lists: list[Any], metric: cf.Metric) -> str:
    with pytest.raises((ValueError, TypeError)) as info:
        cf.evaluate(FORMS[form][0](lists), metric, invalid="raise")
    return str(info.value)


LIST_FORMS = [f for f, (_, sets, _, _) in FORMS.items() if isinstance(sets, str)]
ROLE_METRICS = {
    "set_coverage": lambda c: cf.set_coverage("y", "s", classes=c),
    "set_ssc": lambda c: cf.set_ssc("y", "s", classes=c),
    "set_ssc_score": lambda c: cf.set_ssc_score("y", "s", classes=c),
    "coverage_gap": lambda c: cf.coverage_gap("y", sets="s", classes=c, groups="g", confidence_level=0.8),
}


@pytest.mark.parametrize("with_classes", [False, True], ids=["no classes", "classes"])
@pytest.mark.parametrize("metric", list(ROLE_METRICS))
def test_a_missing_set_is_refused_alike(metric: str, with_classes: bool) -> None:
    lists: list[Any] = [*LISTS[:-1], None]
    make = ROLE_METRICS[metric]
    messages = {_refusal(form, lists, make(CLASSES if with_classes else None)) for form in LIST_FORMS}
    assert messages == {"set column 's' has missing values in 1 row"}, messages


@pytest.mark.parametrize("metric", list(ROLE_METRICS))
def test_a_label_of_another_kind_is_refused_alike(metric: str) -> None:
    text = [[f"c{c}" for c in v] for v in LISTS]
    make = ROLE_METRICS[metric]
    messages = {_refusal(form, text, make(None)) for form in LIST_FORMS}
    assert len(messages) == 1, messages
    assert messages.pop().startswith("label column 'y' has dtype Int64 but the sets hold String labels")


# ---------------------------------------------------------------------------
# the level role and the binary label role
# ---------------------------------------------------------------------------
def test_a_level_column_equals_the_float(constructor: Any) -> None:
    frame = {**_base(LISTS), "lv": [0.8] * len(LISTS)}
    native = constructor({k: v for k, v in frame.items()})
    metrics = [
        cf.coverage_gap("y", sets="s", groups="g", confidence_level=0.8).alias("gap"),
        cf.coverage_gap("y", sets="s", groups="g", confidence_level="lv").alias("gap_col"),
    ]
    if not constructor.lazy or constructor.id == "polars[lazy]":  # p-values: eager frames and polars
        metrics += [
            cf.coverage_test("y", sets="s", confidence_level=0.8).alias("test"),
            cf.coverage_test("y", sets="s", confidence_level="lv").alias("test_col"),
        ]
    out = to_pandas(cf.evaluate(native, *metrics, by="lv"))
    assert_close(out["gap_col"], out["gap"], rtol=1e-12, what=constructor.id)
    if "test" in out.columns:
        assert_close(out["test_col_pvalue"], out["test_pvalue"], rtol=1e-12, what=constructor.id)
        assert_close(out["test_col"], out["test"], rtol=1e-12, what=constructor.id)


@pytest.mark.spark_cases(kind="bool")  # the other forms cast to the same Float64 column
@pytest.mark.parametrize("kind", ["int", "float", "bool"])
def test_binary_labels_in_every_form(constructor: Any, kind: str) -> None:
    rng = np.random.default_rng(5)
    label = rng.random(80) < 0.4
    p = np.clip(label * 0.5 + rng.random(80) * 0.5, 0.0, 1.0)
    y = {"int": label.astype(np.int64), "float": label.astype(float), "bool": label}[kind]
    metrics = [cf.brier("y", "p"), cf.ece("y", "p", n_bins=5), cf.ks_test("y", "p")]
    out = to_pandas(cf.evaluate(constructor({"y": y, "p": p}), *metrics))
    ref = to_pandas(cf.evaluate(pl.DataFrame({"y": label.astype(np.int64), "p": p}), *metrics))
    cols = ["brier", "ece", "ks_test", "ks_test_pvalue"]
    cols = [c for c in cols if c in out.columns]
    assert_close(out[cols].to_numpy(dtype=float), ref[cols].to_numpy(dtype=float), rtol=1e-12, what=constructor.id)
