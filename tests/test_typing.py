"""The role parameters' type hints (``cf.Column``): tests/typecheck/ is type-checked by CI's ``mypy``.

Here: that snippet stays in mypy's files, and its calls run (the hints
promise nothing the runtime refuses).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pl = pytest.importorskip("polars")

ROOT = Path(__file__).parents[1]
SNIPPET = ROOT / "tests" / "typecheck" / "expression_roles.py"


def test_the_snippet_is_type_checked():
    text = (ROOT / "pyproject.toml").read_text()
    files = re.search(r"^\[tool\.mypy\].*?^files = \[(.*?)\]", text, re.M | re.S)
    assert files is not None and '"tests/typecheck"' in files.group(1)
    assert re.search(r"^warn_unused_ignores = true", text, re.M)  # the flagged lines must stay errors


def test_the_typed_calls_run():
    spec = importlib.util.spec_from_file_location("cf_typed_calls", SNIPPET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    df = pl.DataFrame(
        {
            "y": [1.0, 2, 3, 4],
            "lo": [0.0, 1, 6.5, 3],
            "hi": [2.0, 3, 7, 9],
            "p": [0.2, 0.4, 0.6, 0.8],
            "g": [1, 1, 2, 2],
        }
    )
    out = module.typed_calls(df)
    assert len(out) == 7
    assert out[1] == pytest.approx(0.5)  # 2y in [lo, hi]: rows 1 and 4 (2 in [0, 2], 8 in [3, 9]; 4 > 3, 6 < 6.5)


def test_cf_column_is_the_stub_alias():
    import conformal_frames as cf
    from conformal_frames import _roles

    assert cf.Column is _roles.Column
    assert "from conformal_frames._roles import Column" in (ROOT / "src/conformal_frames/namespace.pyi").read_text()
