"""Multiclass log loss, Brier score and ranked probability score: numpy oracle, peers, every backend, bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import conformal_frames as cf
from helpers import assert_close, to_pandas

K = 4
COLS = [f"p{k}" for k in range(K)]
LABELS = ["lo", "mid", "high", "top"]  # ordered categories, not alphabetical


def class_data(seed: int, n: int = 60) -> dict[str, Any]:
    """Class probabilities (columns and a list column) with ties, confident rows and groups of 1 and 2 rows."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(K) * 0.8, n)
    p[:5] = [0.25, 0.25, 0.25, 0.25]  # tied probabilities
    p[5] = [1.0, 0.0, 0.0, 0.0]  # a confident row: clipped by log loss
    p[6:9] = p[9]  # repeated rows
    y = rng.integers(0, K, n)
    g = np.concatenate([rng.choice(["a", "b", "c"], n - 3), ["one", "two", "two"]])
    data: dict[str, Any] = {"g": g, "y": [LABELS[i] for i in y], "w": np.round(rng.random(n) * 2, 1)}
    data |= {c: p[:, k] for k, c in enumerate(COLS)}
    data["pl"] = [list(row) for row in p]
    return data


def _oracle(data: dict[str, Any], weighted: bool) -> pd.DataFrame:
    p = np.column_stack([data[c] for c in COLS])
    onehot = (np.asarray(data["y"])[:, None] == np.asarray(LABELS)[None, :]).astype(float)
    eps = np.finfo(np.float64).eps
    rows = pd.DataFrame(
        {
            "g": data["g"],
            "w": data["w"] if weighted else np.ones(len(p)),
            "log_loss": -(onehot * np.log(np.clip(p, eps, 1 - eps))).sum(axis=1),
            "brier": ((onehot - p) ** 2).sum(axis=1),
            "rps": ((np.cumsum(p, axis=1) - np.cumsum(onehot, axis=1)) ** 2).sum(axis=1),
        }
    )
    out = {}
    for g, part in rows.groupby("g"):
        out[g] = {m: float(np.sum(part[m] * part["w"]) / np.sum(part["w"])) for m in ("log_loss", "brier", "rps")}
    return pd.DataFrame.from_dict(out, orient="index").rename_axis("g").reset_index()


def _metrics(probs: Any, weights: str | None) -> list[Any]:
    return [
        cf.log_loss("y", probs=probs, classes=LABELS, weights=weights),
        cf.brier("y", probs=probs, classes=LABELS, weights=weights),
        cf.rps("y", probs, classes=LABELS, weights=weights),
    ]


@pytest.mark.spark_cases(seed=0, form="list", weighted=True)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("form", ["columns", "list"])
@pytest.mark.parametrize("weighted", [False, True])
def test_categorical_scores_equal_the_numpy_oracle(constructor: Any, seed: int, form: str, weighted: bool) -> None:
    data = class_data(seed)
    probs = COLS if form == "columns" else "pl"
    out = to_pandas(cf.evaluate(constructor(data), *_metrics(probs, "w" if weighted else None), by="g"))
    expected = _oracle(data, weighted)
    assert list(out["g"]) == list(expected["g"])
    for m in ("log_loss", "brier", "rps"):
        assert_close(out[m], expected[m], what=m)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_categorical_scores_equal_scikit_learn_and_scoringrules(seed: int) -> None:
    sr = pytest.importorskip("scoringrules")
    from sklearn.metrics import brier_score_loss, log_loss

    data = class_data(seed)
    df = pl.DataFrame(data)
    p = np.column_stack([data[c] for c in COLS])
    w = np.asarray(data["w"])
    code = np.array([LABELS.index(v) for v in data["y"]])
    assert_close(df.conformal.log_loss("y", probs=COLS, classes=LABELS), log_loss(code, p, labels=range(K)))
    assert_close(
        df.conformal.log_loss("y", "pl", classes=LABELS, weights="w"),
        log_loss(code, p, labels=range(K), sample_weight=w),
    )
    assert_close(df.conformal.brier("y", COLS, classes=LABELS), brier_score_loss(code, p, labels=range(K)))
    assert_close(
        df.conformal.brier("y", probs="pl", classes=LABELS, weights="w"),
        brier_score_loss(code, p, labels=range(K), sample_weight=w),
    )
    # scoringrules' obs is the category's position counted from 1 (or a one-hot vector)
    assert_close(df.conformal.rps("y", COLS, classes=LABELS), np.mean(sr.rps_score(code + 1, p)))
    assert_close(df.conformal.rps("y", "pl", classes=LABELS), np.mean(sr.rps_score(np.eye(K)[code], p, onehot=True)))


def test_two_classes_give_the_binary_scores() -> None:
    from sklearn.metrics import brier_score_loss

    rng = np.random.default_rng(3)
    s = np.round(rng.random(40), 2)
    y = rng.integers(0, 2, 40)
    df = pl.DataFrame({"y": y, "p0": 1 - s, "p1": s})
    assert_close(df.conformal.log_loss("y", ["p0", "p1"]), df.conformal.log_loss("y", "p1"))
    # scikit-learn's scale_by_half="auto": two classes are halved, the binary Brier score
    assert_close(df.conformal.brier("y", ["p0", "p1"]), df.conformal.brier("y", "p1"))
    assert_close(df.conformal.brier("y", ["p0", "p1"]), brier_score_loss(y, np.column_stack([1 - s, s]), labels=[0, 1]))
    # the binary calls are unchanged: their metric objects and state names
    assert type(cf.log_loss("y", "p1")).__name__ == "LogLoss"
    assert type(cf.brier("y", "p1")).__name__ == "Brier"


def test_counts_repeat_rows() -> None:
    data = class_data(4, n=30)
    df = pl.DataFrame(data).with_columns(k=pl.Series(np.arange(30) % 3))
    repeated = pl.DataFrame(df.to_pandas().loc[lambda d: d.index.repeat(d["k"])].drop(columns="k"))
    for metric in _metrics("pl", None):
        counted = type(metric)(**{**metric.__dict__, "counts": "k"})
        assert_close(cf.evaluate(df, counted)[metric.default_name], cf.evaluate(repeated, metric)[metric.default_name])


def test_list_forms_and_array_columns() -> None:
    data = class_data(5, n=20)
    df = pl.DataFrame(data)
    expected = df.conformal.rps("y", COLS, classes=LABELS)
    arr = df.with_columns(pl.col("pl").cast(pl.Array(pl.Float64, K)))
    assert_close(arr.conformal.rps("y", "pl", classes=LABELS), expected)
    pdf = pd.DataFrame({"y": data["y"], "pl": [np.asarray(r) for r in data["pl"]]})  # object column of arrays
    assert_close(pdf.conformal.rps("y", "pl", classes=LABELS), expected)
    assert_close(
        pdf.conformal.top_label_ece("y", "pl", classes=LABELS), df.conformal.top_label_ece("y", COLS, classes=LABELS)
    )


def test_bad_input_is_counted_or_refused() -> None:
    df = pl.DataFrame(
        {
            "y": ["lo", "mid", "other", "top"],
            "p0": [0.5, 0.25, 0.25, 0.1],
            "p1": [0.5, 0.25, 0.25, 0.1],
            "p2": [0.1, 0.25, 0.25, 0.1],
            "p3": [0.0, 0.25, 0.25, float("nan")],
        }
    )
    for rows, message in (
        (
            [0],
            r"probability columns \['p0', 'p1', 'p2', 'p3'\] do not sum to 1 \(tolerance 1e-8 \+ 1.49e-08 x total\) in 1 row",
        ),
        ([2], r"label column 'y' has labels not among classes \['lo', 'mid', 'high', 'top'\] in 1 row"),
        ([3], r"column 'p3' has missing \(null/NaN\) or infinite values in 1 row"),
    ):
        with pytest.raises(cf.InvalidRowsError, match=message):
            df[[1, *rows]].conformal.log_loss("y", COLS, classes=LABELS)
    out = df.conformal.rps("y", COLS, classes=LABELS, invalid="drop")
    assert out == pytest.approx(float(np.sum((np.cumsum([0.25] * 4) - [0, 1, 1, 1]) ** 2)))
    lazy = df.lazy().conformal.brier("y", COLS, classes=LABELS).collect()
    assert lazy["n_invalid"].item() == 3 and lazy["brier"].item() is None
    lists = pl.DataFrame({"y": ["lo", "mid", "lo"], "pl": [[0.5, 0.5, 0.0, 0.0], [1.0], None]})
    with pytest.raises(cf.InvalidRowsError, match="lists of another length than the 4 classes in 1 row"):
        lists[:2].conformal.rps("y", "pl", classes=LABELS)
    with pytest.raises(cf.InvalidRowsError, match="probs column 'pl' has missing values in 1 row"):
        lists[[0, 2]].conformal.rps("y", "pl", classes=LABELS)
    assert lists.conformal.rps("y", "pl", classes=LABELS, invalid="drop") == pytest.approx(0.25)
    with pytest.raises(TypeError, match="a list column of class probabilities needs classes="):
        cf.rps("y", "pl")
    with pytest.raises(ValueError, match="mismatched classes and probability columns"):
        cf.log_loss("y", COLS, classes=["a", "b"])
    with pytest.raises(ValueError, match="not both"):
        cf.brier("y", "s", probs=COLS)
    with pytest.raises(TypeError, match="must be a list column of probabilities"):
        df.conformal.rps("y", "p0", classes=LABELS)


def _forms(data: dict[str, Any]) -> dict[str, Any]:
    """The forms of the class-probability role: columns, and list columns of every backend."""
    import duckdb

    base = pl.DataFrame(data)
    return {
        "polars list": base,
        "polars array": base.with_columns(pl.col("pl").cast(pl.Array(pl.Float64, K))),
        "pandas object lists": pd.DataFrame({**data, "pl": [list(r) for r in data["pl"]]}),
        "pandas object arrays": pd.DataFrame({**data, "pl": [np.asarray(r) for r in data["pl"]]}),
        "pandas pyarrow list": base.to_pandas(use_pyarrow_extension_array=True),
        "duckdb list": duckdb.from_arrow(base.to_arrow()),
    }


@pytest.mark.parametrize(
    "form",
    [
        "polars list",
        "polars array",
        "pandas object lists",
        "pandas object arrays",
        "pandas pyarrow list",
        "duckdb list",
    ],
)
def test_every_probability_form_gives_the_values_of_the_columns(form: str) -> None:
    data = class_data(7, n=40)
    metrics = [
        *_metrics("pl", "w"),
        cf.top_label_ece("y", "pl", classes=LABELS, n_bins=4),
        cf.confidence_ece("y", "pl", classes=LABELS, n_bins=4),
        cf.classwise_ece("y", "pl", classes=LABELS, n_bins=4),
    ]
    columns = [
        *_metrics(COLS, "w"),
        cf.top_label_ece("y", COLS, classes=LABELS, n_bins=4),
        cf.confidence_ece("y", COLS, classes=LABELS, n_bins=4),
        cf.classwise_ece("y", COLS, classes=LABELS, n_bins=4),
    ]
    expected = to_pandas(cf.evaluate(pl.DataFrame(data), *columns, by="g"))
    out = to_pandas(cf.evaluate(_forms(data)[form], *metrics, by="g"))
    for name in ("log_loss", "brier", "rps", "top_label_ece", "confidence_ece", "classwise_ece"):
        assert_close(out[name], expected[name], what=f"{form}: {name}")


def test_probability_columns_keep_the_compiled_query_cache() -> None:
    assert not cf.top_label_ece("y", COLS).reshapes and not cf.rps("y", COLS).reshapes
    assert cf.rps("y", "pl", classes=LABELS).reshapes and cf.log_loss("y", probs="pl", classes=LABELS).reshapes
    assert not cf.energy_score(["a", "b"], [["a1", "a2"], ["b1", "b2"]]).reshapes
    assert cf.energy_score(["a", "b"], ["la", "lb"]).reshapes
    assert cf.set_coverage("y", "s").reshapes and not cf.coverage("y", "lo", "hi").reshapes  # by the class
