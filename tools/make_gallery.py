"""Regenerate the plot gallery images of docs/plots.md (and docs/monitoring-guarantees.md).

Runs the pages' ```python blocks (the same code the test suite executes) in
docs/img/, which leaves the PNGs the pages show there:

    python tools/make_gallery.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


#: the pages whose figures are docs images (each page's blocks run in one namespace)
PAGES = ("plots.md", "monitoring-guarantees.md")


def main() -> None:
    out = ROOT / "docs" / "img"
    out.mkdir(exist_ok=True)
    os.chdir(out)
    for name in PAGES:
        page = ROOT / "docs" / name
        namespace: dict[str, object] = {"__name__": "gallery"}
        for block in BLOCK.findall(page.read_text()):
            if not block.startswith("# not executed"):
                exec(compile(block, str(page), "exec"), namespace)
    for leftover in ("report.html", "preds.parquet"):
        (out / leftover).unlink(missing_ok=True)
    print("\n".join(sorted(str(p.relative_to(ROOT)) for p in out.glob("*.png"))))


if __name__ == "__main__":
    main()
