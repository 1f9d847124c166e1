"""The documentation site builds with warnings as errors (``mkdocs build --strict``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None,
    reason="mkdocs / mkdocstrings[python] not installed (pip install -e '.[docs]')",
)
def test_docs_build_strict(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    site = tmp_path / "site"
    for page in (
        "index.html",
        "getting-started/index.html",
        "intervals/index.html",
        "plots/index.html",
        "api/index.html",
        "differences/index.html",
        "backends/index.html",
        "performance/index.html",
    ):
        assert (site / page).exists(), page
    api = (site / "api" / "index.html").read_text()
    assert "report_figures" in api and "coverage_by_segment" in api
    gallery = (site / "plots" / "index.html").read_text()
    for png in ("coverage_by_segment", "coverage_vs_level", "ssc", "width_distribution", "reliability"):
        assert f"img/{png}.png" in gallery and (site / "img" / f"{png}.png").exists()


def test_every_doc_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml would be built but unreachable."""
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert page.name in nav, f"{page.name} is not in the nav of mkdocs.yml"
