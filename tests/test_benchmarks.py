"""The benchmark scripts still run against today's CLI (tiny data, one round): they are not
timed here (speed is measured by running them, docs/performance.md), but a script that no
longer reads the output contract would otherwise be found only on the next measuring day."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

pytestmark = pytest.mark.skipif(not IS_LINUX or shutil.which("du") is None,
                                reason="the benchmarks compare against GNU du on Linux")


@pytest.mark.parametrize("script,args", [
    ("bench_scan.py", ["--files", "400", "--dirs", "8", "--runs", "1"]),
    ("bench_doctor.py", ["--files", "300", "--runs", "1"]),
    ("bench_units.py", ["--repos", "12", "--rounds", "1"]),
    ("bench_sweep.py", ["--projects", "3", "--files", "300", "--runs", "1"]),
])
def test_a_benchmark_runs_to_its_figures(script: str, args: list[str], tmp_path: Path) -> None:
    extra = ["--data", str(tmp_path)] if script != "bench_units.py" else ["--dir", str(tmp_path)]
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args, *extra],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
