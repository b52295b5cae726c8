"""The built wheel carries the profiles: install it in a fresh venv and run it elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import result_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )
    [built] = out.glob("cachedoctor-*.whl")
    return built


def test_wheel_contains_the_profiles(wheel: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("cachedoctor/builtin_profiles/")}
    in_repo = {p.name for p in (ROOT / "profiles").glob("*.yaml")}
    assert in_repo and in_repo <= shipped


def test_wheel_contains_the_json_schemas(wheel: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("cachedoctor/schemas/")}
    in_repo = {p.name for p in (ROOT / "cachedoctor" / "schemas").glob("*.json")}
    assert "envelope.json" in in_repo and in_repo <= shipped


def test_installed_wheel_lists_profiles_outside_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / ("python.exe" if os.name == "nt" else "python")
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=900)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    script = bin_dir / ("cachedoctor.exe" if os.name == "nt" else "cachedoctor")
    result = subprocess.run([str(script), "profiles", "list", "--json"], cwd=outside, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = result_of(result)["profiles"]
    assert rows and all(row["origin"] == "builtin" for row in rows)
    assert all("site-packages" in row["file"] for row in rows)
