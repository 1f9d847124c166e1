"""Regenerate the plot gallery images of docs/plots.md.

Runs the page's ```python blocks (the same code the test suite executes) in
docs/img/, which leaves the PNGs the page shows there:

    python tools/make_gallery.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def main() -> None:
    page = ROOT / "docs" / "plots.md"
    out = ROOT / "docs" / "img"
    out.mkdir(exist_ok=True)
    os.chdir(out)
    namespace: dict[str, object] = {"__name__": "gallery"}
    for block in BLOCK.findall(page.read_text()):
        if not block.startswith("# not executed"):
            exec(compile(block, str(page), "exec"), namespace)
    for leftover in ("report.html", "preds.parquet"):
        (out / leftover).unlink(missing_ok=True)
    print("\n".join(sorted(str(p.relative_to(ROOT)) for p in out.glob("*.png"))))


if __name__ == "__main__":
    main()
