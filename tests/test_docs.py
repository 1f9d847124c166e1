"""Every ```python block in docs/*.md and README.md runs.

Blocks of one page run in order in one namespace (a page reads like a
notebook).  A block whose first line is ``# not executed`` is skipped (used
only for snippets that need a cluster or files the reader has).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(page: Path) -> list[str]:
    return [b for b in BLOCK.findall(page.read_text()) if not b.startswith("# not executed")]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_doc_page_code_runs(page: Path, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for i, block in enumerate(_blocks(page)):
        try:
            exec(compile(block, f"{page.name}[block {i}]", "exec", dont_inherit=True), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            raise AssertionError(f"{page.name}, block {i} failed: {exc!r}\n{block}") from exc
