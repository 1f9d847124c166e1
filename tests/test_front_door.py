"""The front door: one version, ``python -m conformal_frames``, the README and the API page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import conformal_frames as cf
from conformal_frames import cli

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def test_one_version() -> None:
    """``cf.__version__`` comes from ``_version.py``, which ``pyproject.toml`` reads; the CHANGELOG's top section matches."""
    from conformal_frames import _version

    assert cf.__version__ == _version.__version__ == "0.4.0.dev0"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^version\s*=\s*\"", pyproject, re.M) is None and 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "conformal_frames._version.__version__" }' in pyproject
    top = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert top is not None and cf.__version__.startswith(top.group(1).removesuffix(".0"))


def test_cli_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"conformal-frames {cf.__version__}"


def test_python_m_runs_the_cli() -> None:
    """``python -m conformal_frames`` is the ``conformal-frames`` command (a real process)."""
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    res = subprocess.run(
        [sys.executable, "-m", "conformal_frames", "--version"], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"conformal-frames {cf.__version__}"
    res = subprocess.run([sys.executable, "-m", "conformal_frames", "report"], capture_output=True, text=True, env=env)
    assert res.returncode == cli.EXIT_USAGE
    assert res.stderr.startswith("conformal-frames: error: ")


README = ROOT / "README.md"
FAMILIES = (
    "intervals",
    "sets",
    "efficiency",
    "conditional",
    "calibration",
    "recalibration",
    "ranking",
    "forecasts",
    "backtests",
    "comparison",
    "bootstrap",
    "monitoring",
    "report",
    "plots",
    "CLI",
)


def test_readme_runs_as_written_in_a_fresh_interpreter(tmp_path: Path) -> None:
    """Every python block of README.md, in order, as one script in a new process (the first one defines ``df``)."""
    from test_docs import _blocks

    blocks = _blocks(README)
    assert blocks and re.search(r"^df = ", blocks[0], re.M), "the README's first snippet must define its df"
    script = tmp_path / "readme.py"
    script.write_text("\n".join(blocks))
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "report.html").exists() and (tmp_path / "preds.parquet").exists()


def test_readme_has_a_line_per_family() -> None:
    """One runnable line per family: the family's name is a comment of a python block."""
    from test_docs import _blocks

    comments = " ".join(re.findall(r"#\s*([^\n]*)", "\n".join(_blocks(README))))
    missing = [f for f in FAMILIES if not re.search(rf"\b{f}\b", comments)]
    assert not missing, missing


def test_api_page_lists_every_public_name() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    missing = [name for name in cf.__all__ if not re.search(rf"\b{re.escape(name)}\b", text)]
    assert not missing, f"public names missing from docs/api.md: {missing}"


def test_index_lists_every_page() -> None:
    """docs/index.md links every page of docs/ (and mkdocs.yml's nav has them all)."""
    index = (ROOT / "docs" / "index.md").read_text()
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md")
    assert not [p for p in pages if f"({p})" not in index and f"({p}#" not in index], "pages missing from docs/index.md"
    assert not [p for p in pages if f": {p}" not in nav], "pages missing from mkdocs.yml's nav"


def test_one_install_story() -> None:
    """docs/getting-started.md installs with the README's commands, from the checkout; every extra is explained there."""
    bash = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
    readme = bash.findall(README.read_text())[0]
    started = (ROOT / "docs" / "getting-started.md").read_text()
    assert bash.findall(started)[0] == readme
    assert 'pip install ".[polars]"' in readme and "conformal-frames demo" in readme and "pytest" in readme
    pyproject = (ROOT / "pyproject.toml").read_text()
    extras = re.findall(r"^(\w+) = \[", pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0], re.M)
    assert {"polars", "pandas", "plot"} <= set(extras)
    assert not [e for e in extras if f"`{e}`" not in started], "extras not explained in docs/getting-started.md"
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        assert 'pip install "conformal-frames' not in page.read_text(), f"{page.name} installs from PyPI"
