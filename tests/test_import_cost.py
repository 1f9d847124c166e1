"""``import conformal_frames`` stays light: heavy libraries are imported where used.

Not a timing test: it checks which modules the import loads (in a fresh
interpreter), and that the ``.conformal`` accessor is registered whether
pandas / polars are imported before or after the package.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("scipy", "scipy.signal", "scipy.stats", "scipy.special", "matplotlib", "pandas", "polars", "pyarrow")


def _run(script: str) -> str:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_loads_no_scipy_matplotlib_pandas_or_polars():
    out = _run(f"import sys, conformal_frames\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert out == "[]"


FRAME = "{'y': [1.0, 3.0], 'lo': [0.0, 0.0], 'hi': [2.0, 2.0]}"
CHECK = (
    f"a = pd.DataFrame({FRAME}).conformal.coverage('y', 'lo', 'hi')\n"
    f"b = pl.DataFrame({FRAME}).conformal.coverage('y', 'lo', 'hi')\n"
    f"c = pl.LazyFrame({FRAME}).conformal.coverage('y', 'lo', 'hi').collect()\n"
    "print(float(a), float(b), c['coverage'][0])\n"
)


def test_accessor_registered_when_pandas_and_polars_are_imported_after():
    out = _run("import sys\nimport conformal_frames\nimport pandas as pd\nimport polars as pl\n" + CHECK)
    assert out == "0.5 0.5 0.5"


def test_accessor_registered_when_pandas_and_polars_are_imported_before():
    out = _run("import pandas as pd\nimport polars as pl\nimport conformal_frames\n" + CHECK)
    assert out == "0.5 0.5 0.5"


def test_accessor_registered_when_one_is_imported_before_and_one_after():
    out = _run("import polars as pl\nimport conformal_frames\nimport pandas as pd\n" + CHECK)
    assert out == "0.5 0.5 0.5"


def test_scipy_still_reached_where_used():
    script = (
        "import sys, numpy as np, conformal_frames as cf\n"
        "print(float(cf.kolmogorov_smirnov_cdf(np.array([1.0]))[0]) > 0, 'scipy.special' in sys.modules)\n"
    )
    assert _run(script) == "True True"
