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

    assert cf.__version__ == _version.__version__ == "0.3.0.dev0"
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
