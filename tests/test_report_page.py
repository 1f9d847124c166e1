"""The HTML report as a page: summary first, contents with working anchors, captions as sentences,
flagged rows highlighted, the same group order everywhere; the page opened in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from conformal_frames import cli
from conformal_frames.demo import UNDER_COVERED, demo_data
from conformal_frames.reporting import report

pl = pytest.importorskip("polars", reason="the page tests build their frames with polars")


class _Page(HTMLParser):
    """Ids, in-page links, the order of the top-level sections, list items and captions."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.items: list[str] = []
        self.captions: list[str] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.links.append(str(a["href"])[1:])
        if tag in ("li", "figcaption") or (tag == "p" and a.get("class") == "cf-caption"):
            self._text = []
            self._kind = "captions" if tag != "li" else "items"

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._text is not None and tag in ("li", "figcaption", "p"):
            getattr(self, self._kind).append("".join(self._text).strip())
            self._text = None


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    return p


@pytest.fixture(scope="module")
def demo():
    return report(
        pl.DataFrame(demo_data(n=3000, seed=0)), y="y", lo="lo", hi="hi", by="segment", confidence_level="level"
    )


@pytest.fixture(scope="module")
def page_with_plots(demo) -> str:
    pytest.importorskip("matplotlib", reason="plots need matplotlib ([plot] extra)")
    return demo.to_html()


def test_summary_first_then_contents_tables_figures(demo) -> None:
    page = demo.to_html(plots=False)
    order = [page.index(s) for s in ('id="summary"', 'class="cf-toc"', 'id="tables"', 'id="table-intervals"')]
    assert order == sorted(order)
    head = page.split('id="summary"')[1].split("</section>")[0]
    assert "3 of 15 tested groups are significantly below the target coverage." in head
    assert f"<strong>segment={UNDER_COVERED}, level=0.9</strong>" in head  # the worst group
    assert head.count("<li><strong>segment=island") == 3  # the flagged groups, one clean bullet each
    p = _parse(page)
    assert not [t for t in p.items if t.startswith("-")]  # no "- seg=..." inside a bullet
    assert set(p.links) <= set(p.ids) and {"summary", "tables", "table-intervals", "table-ssc"} <= set(p.links)
    # captions are sentences, not identifiers
    assert p.captions and all(c.endswith(".") and " " in c for c in p.captions)
    # flagged rows highlighted in the per-bin table too (its rows have no under_covered column)
    ssc = page.split('id="table-ssc"')[1].split("</section>")[0]
    assert ssc.count('<tr class="cf-flag">') == 3
    assert "<style>" in page and "@media print" in page and "<link" not in page and "<script" not in page


def test_figures_come_after_tables_with_sentence_captions(page_with_plots: str) -> None:
    page = page_with_plots
    assert page.index('id="tables"') < page.index('id="figures"') < page.index("data:image/png")
    p = _parse(page)
    figures = [c for c in p.captions if c.startswith("Figure ")]
    assert len(figures) == 4 and not any(re.search(r"\b(ssc|width_distribution)\b", c) for c in figures)
    assert set(p.links) <= set(p.ids) and "figure-ssc" in p.links


def test_verdict_without_flags_and_without_a_test() -> None:
    rng = np.random.default_rng(1)
    y = rng.standard_normal(400)
    df = pl.DataFrame({"g": ["a", "b"] * 200, "y": y, "lo": -3.0, "hi": 3.0})
    ok = report(df, y="y", lo="lo", hi="hi", by="g", confidence_level=0.9)._repr_html_()
    assert 'class="cf-verdict cf-ok"' in ok and "No group is significantly below the target coverage" in ok
    plain = report(df, y="y", lo="lo", hi="hi", by="g")._repr_html_()
    assert "No coverage test: give a target coverage" in plain
    assert "not tested (invalid rows)" not in ok  # the legend names only what the page shows
    flawed = df.with_columns(y=pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise(pl.col("y")))
    warn = report(flawed.lazy(), y="y", lo="lo", hi="hi", by="g", confidence_level=0.9)._repr_html_()
    assert 'class="cf-verdict cf-warn"' in warn and "1 group could not be tested." in warn
    assert '<tr class="cf-untested">' in warn and "not tested (invalid rows)" in warn
    p = rng.uniform(size=400)
    scores = pl.DataFrame({"g": ["a", "b"] * 200, "p": p, "e": (rng.uniform(size=400) < p**2).astype(int)})
    cal = report(scores, y="e", score="p", by="g")
    worst = cal.frame("calibration").sort("ece")["g"][-1]
    assert f"Largest expected calibration error in g={worst}: ECE" in cal._repr_html_()


# ---------------------------------------------------------------------------
# group order: an ordered categorical keeps its order in Python and in the CLI
# ---------------------------------------------------------------------------
ORDER = ["low", "mid", "high"]


def _ordered_frame():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    seg = pd.Categorical(rng.choice(ORDER, 600), categories=ORDER, ordered=True)
    return pd.DataFrame({"seg": seg, "y": rng.standard_normal(600), "lo": -1.6, "hi": 1.6})


def test_ordered_categorical_keeps_its_order_everywhere(tmp_path: Path, capsys) -> None:
    df = _ordered_frame()
    rep = report(df, y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9)
    assert rep.table["seg"].tolist() == ORDER
    page = rep.to_html(plots=False)
    assert [page.index(f'<td class="cf-key">{s}</td>') for s in ORDER] == sorted(
        page.index(f'<td class="cf-key">{s}</td>') for s in ORDER
    )
    enum = pl.from_pandas(df).with_columns(pl.col("seg").cast(pl.Enum(ORDER)))
    assert report(enum.lazy(), y="y", lo="lo", hi="hi", by="seg", confidence_level=0.9).table["seg"].to_list() == ORDER
    plots = pytest.importorskip("conformal_frames.plots")
    pytest.importorskip("matplotlib", reason="plots need matplotlib ([plot] extra)").use("Agg")
    ax = plots.ssc_bars(df, by="seg", y="y", lo="lo", hi="hi")  # raw rows: the engine's table, not re-sorted
    assert [t.get_text() for t in ax.get_yticklabels()] == ORDER
    ax.figure.clf()
    pytest.importorskip("pyarrow", reason="the CLI reads the categories of a Parquet file with pyarrow")
    path = tmp_path / "ordered.parquet"
    df.to_parquet(path)
    assert cli.main(["report", str(path), "--y", "y", "--lo", "lo", "--hi", "hi", "--by", "seg", "-q"]) == 0
    rows = capsys.readouterr().out.split("Interval metrics per group\n")[1].splitlines()[2:5]
    assert [r.split()[0] for r in rows] == ORDER  # as in Python, not "high, low, mid"


# ---------------------------------------------------------------------------
# the page in headless Chromium
# ---------------------------------------------------------------------------
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--hide-scrollbars",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,2000",
]
#: written into the DOM on load: horizontal overflow, in-page links that resolve to nothing, elements past the edge
PROBE = """<script>
addEventListener("load", () => {
  const d = document.body.dataset, w = window.innerWidth;
  d.overflow = String(document.documentElement.scrollWidth > w);
  const links = [...document.querySelectorAll('a[href^="#"]')];
  d.links = String(links.length);
  d.broken = links.map(a => a.getAttribute("href")).filter(h => !document.getElementById(h.slice(1))).join(" ");
  d.past = String([...document.querySelectorAll("img, .cf-scroll, dl")]
    .filter(e => e.getBoundingClientRect().right > w + 1).length);
  d.images = String([...document.images].filter(i => i.complete && i.naturalWidth > 0).length);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
def test_page_layout_in_headless_chromium(page_with_plots: str, tmp_path: Path) -> None:
    page = page_with_plots
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    shot = tmp_path / "report.png"
    profile = f"--user-data-dir={tmp_path / 'profile'}"
    assert CHROMIUM is not None
    res = subprocess.run(
        [CHROMIUM, *FLAGS, profile, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    body = re.search(r"<body[^>]*>", res.stdout)
    assert body is not None
    facts = dict(re.findall(r'data-(\w+)="([^"]*)"', body.group(0)))
    assert facts["overflow"] == "false" and facts["past"] == "0"  # nothing wider than the window
    assert int(facts["links"]) >= 8 and facts["broken"] == ""  # every anchor resolves
    assert facts["images"] == "4"
    res = subprocess.run(
        [CHROMIUM, *FLAGS, profile, f"--screenshot={shot}", probe.as_uri()], capture_output=True, timeout=120
    )
    assert res.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
