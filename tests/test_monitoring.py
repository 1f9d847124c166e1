"""coverage_sequence / coverage_alarms: an independent scipy oracle of each boundary, every backend,
summaries == rows, and small seeded simulations of the guarantees (the large ones: bench/bench_monitoring.py)."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy import integrate, optimize, special, stats

import conformal_frames as cf
from conformal_frames.errors import BackendLimitError
from conformal_frames.metrics.monitoring import numpy_ebh
from helpers import to_pandas

LEVEL, N_OPT = 0.9, 50.0


# ---------------------------------------------------------------------------
# the oracle: the paper's formulas, written again with scipy (root solves and quadrature)
# ---------------------------------------------------------------------------
def _pseudo_count(level: float) -> float:
    ell = math.log(1.0 / level)
    return N_OPT / (2.0 * ell + math.log(1.0 + 2.0 * ell))


def _log_m(k: float, t: float, p: float, a: float, b: float) -> float:
    f = t - k
    lik = (k * math.log(p) if k else 0.0) + (f * math.log1p(-p) if f else 0.0)
    return special.betaln(a + k, b + f) - special.betaln(a, b) - lik


@functools.cache
def oracle_beta_cs(k: float, t: float, p0: float, alpha: float) -> tuple[float, float]:
    """The miss-rate interval {p: M_t(p) < 1/alpha} by brentq."""
    c = _pseudo_count(alpha)
    a, b = c * p0, c * (1 - p0)
    bound = math.log(1 / alpha)
    phat = k / t

    def g(p: float) -> float:
        return _log_m(k, t, p, a, b) - bound

    low = 0.0 if k == 0 else optimize.brentq(g, 1e-300, phat, xtol=1e-15, rtol=1e-15)
    high = 1.0 if k == t else optimize.brentq(g, phat, 1 - 1e-16, xtol=1e-15, rtol=1e-15)
    return low, high


@functools.cache
def oracle_beta_e(k: float, t: float, p0: float, alpha: float, alternative: str) -> float:
    """The beta mixture of likelihood ratios, integrated numerically (restricted to one side)."""
    c = _pseudo_count(alpha)
    a, b = c * p0, c * (1 - p0)
    f = t - k

    def lr(q: float) -> float:
        return math.exp(k * math.log(q / p0) + f * math.log((1 - q) / (1 - p0)) + stats.beta.logpdf(q, a, b))

    lo, hi = {"two-sided": (0.0, 1.0), "greater": (p0, 1.0), "less": (0.0, p0)}[alternative]
    mass = stats.beta.cdf(hi, a, b) - stats.beta.cdf(lo, a, b)
    return (
        integrate.quad(lr, lo, hi, epsabs=0, epsrel=1e-13, limit=200, points=[k / t] if lo < k / t < hi else None)[0]
        / mass
    )


@functools.cache
def oracle_normal(k: float, t: float, p0: float, ci_level: float, alpha: float, alternative: str) -> tuple:
    """Miss-rate interval K/t -+ u(t/4)/t and the normal mixture over lambda, integrated numerically."""
    ell = math.log(1 / (1 - ci_level))
    rho_ci = N_OPT / 4 / (2 * ell + math.log(1 + 2 * ell))
    v = t / 4 + rho_ci
    r = math.sqrt(v * math.log(v / (rho_ci * (1 - ci_level) ** 2))) / t
    ell = math.log(1 / alpha)
    rho = N_OPT / 4 / (2 * ell + math.log(1 + 2 * ell))
    s = k - t * p0
    lo, hi = {"two-sided": (-np.inf, np.inf), "greater": (0.0, np.inf), "less": (-np.inf, 0.0)}[alternative]
    weight = 1.0 if alternative == "two-sided" else 2.0

    def integrand(lam: float) -> float:
        return weight * math.exp(lam * s - lam * lam * t / 8) * stats.norm.pdf(lam, scale=1 / math.sqrt(rho))

    e = integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-12, limit=200)[0]
    return k / t - r, k / t + r, e


def oracle(df: pd.DataFrame, keys: list[str], method: str, alternative: str, correction: Any, ci_level=0.95, sig=0.05):
    """Per segment and day: the running coverage, band, e-value, first exclusion and alarm."""
    miss_alt = {"less": "greater", "greater": "less"}.get(alternative, "two-sided")
    p0 = 1 - LEVEL
    miss = ((df["y"] < df["lo"]) | (df["y"] > df["hi"])).astype(float)
    frame = df.assign(__m=miss)
    groups = frame.groupby(keys, sort=True) if keys else [((), frame)]
    n_seg = len(groups) if keys else 1
    threshold = (n_seg if correction == "bonferroni" else 1) / sig
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        days = g.groupby("day")["__m"].agg(["sum", "size"]).sort_index()
        k_cum, t_cum = days["sum"].cumsum(), days["size"].cumsum()
        first_out = first_alarm = None
        for day, k, t in zip(days.index, k_cum, t_cum):
            if method == "beta_binomial":
                low, high = oracle_beta_cs(k, t, p0, 1 - ci_level)
                e = oracle_beta_e(k, t, p0, sig, miss_alt)
            else:
                low, high, e = oracle_normal(k, t, p0, ci_level, sig, miss_alt)
            cov_low, cov_high = max(1 - high, 0.0), min(1 - low, 1.0)
            out = not (cov_low <= LEVEL <= cov_high)
            first_out = day if out and first_out is None else first_out
            first_alarm = day if e >= threshold and first_alarm is None else first_alarm
            rows.append({**dict(zip(keys, key)), "day": day, "n": t, "coverage": 1 - k / t, "coverage_cs_low": cov_low,
                         "coverage_cs_high": cov_high, "e_value": e, "excluded": out})  # fmt: skip
        for r in rows:
            if all(r.get(kk) == kv for kk, kv in zip(keys, key)):
                r["first_excluded"], r["alarm_period"] = first_out, first_alarm
                r["alarm"] = first_alarm is not None and r["day"] >= first_alarm
    return pd.DataFrame(rows)


def _data(seed: int, n: int = 120, segments: int = 3, drop: float = 0.0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    seg = rng.choice([f"s{i}" for i in range(segments)], n)
    day = rng.integers(1, 7, n)
    y = rng.normal(size=n)
    hi = np.where((seg == "s0") & (day > 3), 1.645 - drop, 1.645)
    return {"seg": seg, "day": day, "y": y, "lo": np.full(n, -1.645), "hi": hi}


def _compare(actual: Any, expected: pd.DataFrame, keys: list[str], rtol: float = 1e-9) -> None:
    got = to_pandas(actual).reset_index(drop=True)
    exp = expected.sort_values([*keys, "day"]).reset_index(drop=True)
    assert list(got[[*keys, "day"]].astype(str).itertuples(index=False)) == list(
        exp[[*keys, "day"]].astype(str).itertuples(index=False)
    )
    np.testing.assert_array_equal(got["n"].to_numpy(dtype=float), exp["n"].to_numpy(dtype=float))
    for c in ("coverage", "coverage_cs_low", "coverage_cs_high"):
        np.testing.assert_allclose(got[c].to_numpy(dtype=float), exp[c].to_numpy(dtype=float), rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(np.log(got["e_value"].to_numpy(dtype=float)), np.log(exp["e_value"].to_numpy(float)),
                               rtol=1e-8, atol=1e-9)  # fmt: skip
    for c in ("excluded", "alarm"):
        assert got[c].astype(bool).tolist() == exp[c].astype(bool).tolist(), c
    for c in ("first_excluded", "alarm_period"):
        g = [None if pd.isna(x) else int(x) for x in got[c]]
        assert g == [None if x is None or pd.isna(x) else int(x) for x in exp[c]], c


@pytest.mark.parametrize("method", ["beta_binomial", "normal_mixture"])
@pytest.mark.parametrize("alternative", ["less", "two-sided", "greater"])
@pytest.mark.parametrize("seed", [0])
def test_against_the_scipy_oracle(method: str, alternative: str, seed: int) -> None:
    data = _data(seed + (alternative == "greater"), drop=1.0)
    df = pd.DataFrame(data)
    kw = dict(confidence_level=LEVEL, order_by="day", n_opt=N_OPT, method=method, alternative=alternative)
    for keys, correction in (([], None), (["seg"], "bonferroni"), (["seg"], None)):
        out = cf.coverage_sequence(df, "y", "lo", "hi", by=keys or None, correction=correction, **kw)
        _compare(out, oracle(df, keys, method, alternative, correction), keys)


@pytest.mark.parametrize("alternative", ["less", "two-sided"])
def test_the_lazy_normal_mixture_equals_its_numpy_reference(alternative: str) -> None:
    from conformal_frames.numerics import sequences

    df = pd.DataFrame(_data(10, n=300, drop=1.0))
    out = cf.coverage_sequence(df, "y", "lo", "hi", confidence_level=LEVEL, order_by="day", by="seg", n_opt=N_OPT,
                               method="normal_mixture", alternative=alternative)  # fmt: skip
    k, t = out["n"] * (1 - out["coverage"]), out["n"].to_numpy(float)
    miss_alt = "greater" if alternative == "less" else "two-sided"
    rho = sequences.normal_rho(N_OPT, 0.05)  # ci_level 0.95 and significance 0.05: one tuning
    low, high, log_e = sequences.numpy_normal(k, t, 1 - LEVEL, rho, 0.05, miss_alt)
    np.testing.assert_allclose(out["coverage_cs_low"], np.clip(1 - high, 0, 1), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["coverage_cs_high"], np.clip(1 - low, 0, 1), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.log(out["e_value"]), log_e, rtol=1e-9, atol=1e-9)


def test_groups_of_one_and_two_rows() -> None:
    df = pd.DataFrame({"seg": ["a", "b", "b"], "day": [1, 1, 2], "y": [0.0, 5.0, 0.0], "lo": [-1.0] * 3,
                       "hi": [1.0] * 3})  # fmt: skip
    for method in ("beta_binomial", "normal_mixture"):
        out = cf.coverage_sequence(df, "y", "lo", "hi", confidence_level=LEVEL, order_by="day", by="seg",
                                   n_opt=N_OPT, method=method)  # fmt: skip
        _compare(out, oracle(df, ["seg"], method, "less", "bonferroni"), ["seg"])


def test_every_miss_input_counts_the_same() -> None:
    data = _data(3)
    df = pd.DataFrame(data)
    df["m"] = ((df.y < df.lo) | (df.y > df.hi)).astype(int)
    df["label"] = np.where(df.m == 1, "x", "z")
    df["set_z"] = True
    df["set_x"] = False
    kw = dict(confidence_level=LEVEL, order_by="day", by="seg", n_opt=N_OPT)
    a = cf.coverage_sequence(df, "y", "lo", "hi", **kw)
    b = cf.coverage_sequence(df, miss="m", **kw)
    c = cf.coverage_sequence(df, "label", sets=["set_x", "set_z"], classes=["x", "z"], **kw)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)


def test_since_starts_the_count() -> None:
    df = pd.DataFrame(_data(4))
    kw = dict(confidence_level=LEVEL, order_by="day", by="seg", n_opt=N_OPT)
    late = cf.coverage_sequence(df, "y", "lo", "hi", since=3, **kw)
    expected = cf.coverage_sequence(df[df.day >= 3], "y", "lo", "hi", **kw)
    pd.testing.assert_frame_equal(late, expected)


# ---------------------------------------------------------------------------
# backends, summaries
# ---------------------------------------------------------------------------
@pytest.mark.spark_cases(method="normal_mixture")
@pytest.mark.parametrize("method", ["beta_binomial", "normal_mixture"])
def test_every_backend_and_summaries_equal_rows(constructor: Any, method: str) -> None:
    data = _data(5, drop=1.0)
    df = pd.DataFrame(data)
    native = constructor(data)
    kw = dict(confidence_level=LEVEL, order_by="day", by="seg", n_opt=N_OPT, method=method)
    expected = cf.coverage_sequence(df, "y", "lo", "hi", **kw)
    lazy_sql = constructor.lazy and constructor.id != "polars[lazy]"
    if method == "beta_binomial" and lazy_sql:
        with pytest.raises(BackendLimitError, match="normal_mixture"):
            cf.coverage_sequence(native, "y", "lo", "hi", **kw)
        return
    got = to_pandas(cf.coverage_sequence(native, "y", "lo", "hi", **kw))
    summary = cf.summarize(native, cf.coverage("y", "lo", "hi"), by=["seg", "day"])
    from_summary = to_pandas(cf.coverage_sequence(summary, "y", "lo", "hi", **kw))
    alarms = to_pandas(cf.coverage_alarms(native, "y", "lo", "hi", correction="e-bh", **kw))
    for frame in (got, from_summary):
        frame = frame.assign(seg=frame.seg.astype(str))
        for c in ("coverage", "coverage_cs_low", "coverage_cs_high", "e_value"):
            np.testing.assert_allclose(frame[c].to_numpy(float), expected[c].to_numpy(float), rtol=1e-12)
        for c in ("excluded", "alarm"):
            assert frame[c].astype(bool).tolist() == expected[c].tolist()
        assert frame["n"].tolist() == expected["n"].tolist()
    last = expected.groupby("seg").tail(1)
    assert alarms["alarm"].astype(bool).tolist() == numpy_ebh(last["e_value"].to_numpy(), 0.05).tolist()


def test_bad_input_is_named() -> None:
    df = pd.DataFrame(_data(6))
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day")
    with pytest.raises(ValueError, match="one of y, lo, hi"):
        cf.coverage_sequence(df, "y", "lo", "hi", miss="y", **kw)
    with pytest.raises(ValueError, match="method"):
        cf.coverage_sequence(df, "y", "lo", "hi", method="bogus", **kw)
    with pytest.raises(ValueError, match="e-bh"):
        cf.coverage_sequence(df, "y", "lo", "hi", correction="e-bh", **kw)
    with pytest.raises(ValueError, match="also a by="):
        cf.coverage_sequence(df, "y", "lo", "hi", by="day", **kw)
    with pytest.raises(TypeError, match="significance"):
        cf.coverage_sequence(df, "y", "lo", "hi", alpha=0.05, **kw)  # type: ignore[call-arg]
    bad = df.assign(lo=df.hi + 1.0)
    with pytest.raises(ValueError, match="greater than"):
        cf.coverage_sequence(bad, "y", "lo", "hi", **kw)
    before = df.copy()
    cf.coverage_sequence(df, "y", "lo", "hi", **kw)
    pd.testing.assert_frame_equal(df, before)


def test_ebh_and_bonferroni_decisions() -> None:
    e = np.array([100.0, 30.0, 1.0, 45.0, 0.5])
    # G = 5, significance 0.1: k=1: 100 >= 50; k=2: 45 >= 25; k=3: 30 >= 16.7; k=4: 1 < 12.5
    assert numpy_ebh(e, 0.1).tolist() == [True, True, False, True, False]
    rng = np.random.default_rng(7)
    rows = []
    for s, rate in enumerate([0.1, 0.1, 0.4, 0.1]):
        for d in range(1, 11):
            rows += [{"seg": s, "day": d, "m": int(rng.random() < rate)} for _ in range(30)]
    df = pd.DataFrame(rows)
    kw: dict[str, Any] = dict(miss="m", confidence_level=LEVEL, order_by="day", by="seg", n_opt=100)
    path = cf.coverage_sequence(df, correction=None, **kw)
    ebh = cf.coverage_alarms(df, correction="e-bh", **kw)
    assert ebh["alarm"].tolist() == numpy_ebh(path.groupby("seg").tail(1)["e_value"].to_numpy(), 0.05).tolist()
    bonf = cf.coverage_alarms(df, correction="bonferroni", **kw)
    crossed = path.groupby("seg")["e_value"].max() >= 4 / 0.05
    assert bonf["alarm"].tolist() == crossed.tolist() == [False, False, True, False]
    at5 = cf.coverage_alarms(df, correction="bonferroni", at=5, **kw)
    assert (at5["day"] == 5).all()


# ---------------------------------------------------------------------------
# the guarantees, small seeded simulations (many runs = many segments of one call)
# ---------------------------------------------------------------------------
RUNS, DAYS, PER_DAY = 300, 30, 20


def _runs(seed: int, rate_after: float = 0.1, change_day: int = DAYS) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    day = np.tile(np.repeat(np.arange(DAYS), PER_DAY), RUNS)
    run = np.repeat(np.arange(RUNS), DAYS * PER_DAY)
    rate = np.where(day >= change_day, rate_after, 0.1)
    return pl.DataFrame({"run": run, "day": day, "m": (rng.random(run.size) < rate).astype(np.int64)})


@pytest.mark.parametrize("method", ["beta_binomial", "normal_mixture"])
def test_on_target_few_runs_ever_alarm_unlike_a_daily_binomial_test(method: str) -> None:
    df = _runs(11)
    out = cf.coverage_sequence(df, miss="m", confidence_level=LEVEL, order_by="day", by="run", method=method,
                               correction=None, n_opt=300)  # fmt: skip
    per_run = out.group_by("run").agg(pl.col("alarm").any(), pl.col("excluded").any()).sort("run")
    ever_alarm = per_run["alarm"].mean()
    ever_out = per_run["excluded"].mean()
    # the binomial test of the cumulative misses, looked at every day (one-sided, 5 %)
    k = out["n"].to_numpy() * (1 - out["coverage"].to_numpy())
    pvalue = stats.binom.sf(np.round(k) - 1, out["n"].to_numpy(), 0.1)
    peeking = pl.DataFrame({"run": out["run"], "rej": pvalue <= 0.05}).group_by("run").agg(pl.col("rej").any())
    peeking_rate = peeking["rej"].mean()
    assert ever_alarm <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / RUNS)
    assert ever_out <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / RUNS)  # the band holds at every period in >= 95 %
    assert peeking_rate > 0.1  # about 0.2: peeking at a fixed-sample test inflates its 5 %


def _sprt_delay(rate0: float, rate1: float, threshold: float, rng: np.random.Generator, n_runs: int) -> float:
    """Mean rows to cross log(threshold) for the SPRT of rate1 vs rate0 on rows drawn at rate1."""
    up, down = math.log(rate1 / rate0), math.log((1 - rate1) / (1 - rate0))
    delays = []
    for _ in range(n_runs):
        x = rng.random(20_000) < rate1
        llr = np.cumsum(np.where(x, up, down))
        delays.append(int(np.argmax(llr >= math.log(threshold))) + 1)
    return float(np.mean(delays))


def test_the_alarm_after_a_drop_comes_within_a_few_sprt_delays() -> None:
    change = 5
    df = _runs(12, rate_after=0.25, change_day=change)
    out = cf.coverage_sequence(df, miss="m", confidence_level=LEVEL, order_by="day", by="run", correction=None,
                               n_opt=300, since=change)  # fmt: skip
    first = out.group_by("run").agg(pl.col("alarm_period").first())["alarm_period"]
    assert first.null_count() == 0  # every run alarms within the 25 days
    delay_rows = float(((first.to_numpy() - change + 1) * PER_DAY).mean())
    oracle_rows = _sprt_delay(0.1, 0.25, 1 / 0.05, np.random.default_rng(13), 300)
    ratio = delay_rows / oracle_rows
    assert 1.0 <= ratio <= 4.0, ratio  # about 2: the price of not knowing the drop, and daily looks


# ---------------------------------------------------------------------------
# plot, report, CLI
# ---------------------------------------------------------------------------
def _drifting(seed: int = 21) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 3000
    d = pd.DataFrame({"day": rng.integers(0, 30, n), "seg": rng.choice(["a", "b", "c"], n), "y": rng.normal(size=n)})
    d["lo"] = -1.645
    d["hi"] = np.where((d.seg == "c") & (d.day > 15), 0.5, 1.645)
    return d


def test_the_plot_draws_band_target_and_alarm() -> None:
    pytest.importorskip("matplotlib")
    seq = cf.coverage_sequence(_drifting(), "y", "lo", "hi", confidence_level=LEVEL, order_by="day", by="seg")
    ax = cf.plots.coverage_sequence(seq, order_by="day", confidence_level=LEVEL, by="seg")
    assert len(ax.collections) == 3  # one band per segment
    assert [t.get_text() for t in ax.texts] == [f"alarm {int(seq[seq.seg == 'c'].alarm_period.iloc[0])}"]
    assert ax.get_legend_handles_labels()[1] == ["seg=a", "seg=b", "seg=c", "target 0.9"]  # key order
    with pytest.raises(ValueError, match="coverage_sequence"):
        cf.plots.coverage_sequence(seq.drop(columns="alarm_period"), order_by="day", confidence_level=LEVEL)


def test_the_report_gains_a_monitoring_section() -> None:
    d = _drifting()
    rep = cf.report(d, y="y", lo="lo", hi="hi", by="seg", confidence_level=LEVEL, order_by="day")
    alarms = to_pandas(rep.monitoring["alarms"])
    expected = cf.coverage_alarms(d, "y", "lo", "hi", confidence_level=LEVEL, order_by="day", by="seg")
    pd.testing.assert_series_equal(alarms["e_value"], expected["e_value"])
    assert alarms["alarm"].tolist() == expected["alarm"].tolist() == [False, False, True]
    assert [a["group"] for a in rep.summary["alarms"]] == [{"seg": "c"}]
    assert "ALARM: coverage below target (monitoring by day): seg=c from" in str(rep)
    assert "table-monitoring" in rep.to_html(plots=False)
    assert "monitoring" in rep.to_dict()
    plain = cf.report(d, y="y", lo="lo", hi="hi", by="seg", confidence_level=LEVEL)
    assert plain.monitoring == {} and "alarms" not in plain.summary
    with pytest.raises(ValueError, match="number"):
        cf.report(d, y="y", lo="lo", hi="hi", by="seg", order_by="day")
    duckdb = pytest.importorskip("duckdb")
    lazy_sql = cf.report(duckdb.from_df(d), y="y", lo="lo", hi="hi", by="seg", confidence_level=LEVEL, order_by="day")
    normal = cf.coverage_alarms(d, "y", "lo", "hi", confidence_level=LEVEL, order_by="day", by="seg",
                                method="normal_mixture")  # fmt: skip
    got = to_pandas(lazy_sql.monitoring["alarms"])
    np.testing.assert_allclose(got["e_value"].to_numpy(float), normal["e_value"].to_numpy(float), rtol=1e-12)
    assert got["alarm"].tolist() == normal["alarm"].tolist()


def test_the_cli_flags_alarms_with_its_exit_code(tmp_path: Any) -> None:
    from conformal_frames import cli

    path = tmp_path / "rows.csv"
    d = _drifting()
    d.to_csv(path, index=False)
    args = ["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "seg", "--confidence-level", "0.9",
            "--order-by", "day", "-q"]  # fmt: skip
    assert cli.main([*args, "--fail-on-alarm"]) == cli.EXIT_ALARM
    assert cli.main(args) == cli.EXIT_OK
    d.assign(hi=1.645).to_csv(path, index=False)
    assert cli.main([*args, "--fail-on-alarm"]) == cli.EXIT_OK


def test_summaries_of_set_coverage_and_kupiec_serve_too() -> None:
    df = pd.DataFrame(_data(8, n=200))
    df["m"] = ((df.y < df.lo) | (df.y > df.hi)).astype(int)
    df["label"] = np.where(df.m == 1, "x", "z")
    df["set_x"], df["set_z"] = False, True
    kw: dict[str, Any] = dict(confidence_level=LEVEL, order_by="day", by="seg", n_opt=N_OPT)
    expected = cf.coverage_sequence(df, "y", "lo", "hi", **kw)
    kupiec = cf.summarize(df, cf.kupiec_test(miss="m", confidence_level=LEVEL), by=["seg", "day"])
    sets = cf.summarize(df, cf.set_coverage("label", ["set_x", "set_z"], classes=["x", "z"]), by=["seg", "day"])
    for got in (
        cf.coverage_sequence(kupiec, miss="m", **kw),
        cf.coverage_sequence(sets, "label", sets=["set_x", "set_z"], classes=["x", "z"], **kw),
    ):
        np.testing.assert_allclose(got["e_value"], expected["e_value"], rtol=1e-12)
        np.testing.assert_allclose(got["coverage_cs_low"], expected["coverage_cs_low"], rtol=1e-12)


def test_a_period_with_invalid_rows_nulls_its_segment_from_then_on() -> None:
    df = pd.DataFrame(_data(9, n=200))
    df.loc[(df.seg == "s0") & (df.day == 3), "y"] = np.nan
    out = cf.coverage_sequence(pl.from_pandas(df).lazy(), "y", "lo", "hi", confidence_level=LEVEL, order_by="day",
                               by="seg", n_opt=N_OPT).collect()  # fmt: skip
    s0 = out.filter(pl.col("seg") == "s0")
    assert s0.filter(pl.col("day") < 3)["coverage"].null_count() == 0
    assert s0.filter(pl.col("day") >= 3)["e_value"].null_count() == len(s0.filter(pl.col("day") >= 3))
    assert out.filter(pl.col("seg") != "s0")["coverage"].null_count() == 0
    with pytest.raises(ValueError, match="missing"):
        cf.coverage_sequence(df, "y", "lo", "hi", confidence_level=LEVEL, order_by="day", by="seg")
