"""``--constructors`` chooses the backends of the constructor fixtures (like narwhals)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/test_api.py::test_several_group_keys_sorted"


def _collect(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", TEST, "--collect-only", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def test_constructors_option_selects_backends():
    done = _collect("--constructors=polars[lazy],pandas")
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line[len(TEST) + 1 : -1] for line in done.stdout.splitlines() if line.startswith(TEST + "[")]
    assert ids == ["polars[lazy]", "pandas"]


def test_unknown_constructor_is_a_usage_error():
    done = _collect("--constructors=polars,pandsa")
    assert done.returncode != 0
    assert "unknown backend(s) ['pandsa']" in done.stdout + done.stderr


def test_cf_test_spark_0_leaves_spark_out_of_the_default():
    env = {**os.environ, "CF_TEST_SPARK": "0"}
    done = _collect(env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pyspark" not in done.stdout and "duckdb" in done.stdout
