"""Regenerate docs/img/report.png: the demo report's HTML page in headless Chromium.

    python tools/report_screenshot.py

Needs Chromium (``chromium`` on the PATH), matplotlib and Pillow (a
matplotlib dependency).  The page is opened at 1280 x 2000 pixels, as the
test does; the top of the page (summary, contents, the main tables) is kept
and stored with a 64-colour palette so the PNG stays small.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEIGHT = 1500  # pixels kept from the top of the page


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import polars as pl
    from PIL import Image

    from conformal_frames.demo import demo_data

    chromium = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if chromium is None:
        raise SystemExit("no Chromium on the PATH (Debian: apt-get install chromium)")
    df = pl.DataFrame(demo_data(n=20_000, seed=1))
    rep = df.conformal.report(y="y", lo="lo", hi="hi", by="segment", confidence_level="level")
    out = ROOT / "docs" / "img" / "report.png"
    with tempfile.TemporaryDirectory() as tmp:
        page, shot = Path(tmp) / "report.html", Path(tmp) / "shot.png"
        rep.to_html(page)
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp}/p"]
        cmd = [chromium, *flags, "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        image = Image.open(shot).convert("RGB")
        image = image.crop((0, 0, image.width, min(HEIGHT, image.height)))
        image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"{out.relative_to(ROOT)}: {out.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
