"""The built wheel carries the profiles and, on Linux, the compiled walk loop: install it in a
fresh venv and run it elsewhere; without a C compiler the wheel is pure Python and works."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX, result_of

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


def _has_compiler() -> bool:
    cc = sysconfig.get_config_var("CC")
    return bool(cc) and shutil.which(shlex.split(cc)[0]) is not None


needs_compiler = pytest.mark.skipif(not (IS_LINUX and _has_compiler()),
                                    reason="the walk's C loop is built on Linux with a compiler")


def test_wheel_contains_the_profiles(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("cachedoctor/builtin_profiles/")}
    in_repo = {p.name for p in (ROOT / "profiles").glob("*.yaml")}
    assert in_repo and in_repo <= shipped


def test_wheel_contains_the_json_schemas(wheel: Path) -> None:
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

    if IS_LINUX and _has_compiler():
        check = "from cachedoctor.fs import seam; print(seam.current().folder_counter())"
        counter = subprocess.run([str(python), "-c", check], cwd=outside, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert counter.stdout.strip() == "<built-in function count_folder>", counter.stderr


@needs_compiler
def test_wheel_carries_the_compiled_loop_for_this_python(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert f"cachedoctor/fs/_native{suffix}" in names
    assert not wheel.name.endswith("-none-any.whl")  # a platform wheel, tagged for it


def test_without_a_compiler_the_sdist_builds_a_pure_wheel_that_scans(tmp_path: Path) -> None:
    """hatch_build.py ships in the sdist; a failed compile is a warning, not a failed
    install, and the walk then takes its Python loop."""
    sdist_dir, wheel_dir = tmp_path / "sdist", tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(sdist_dir), str(ROOT)],
                   check=True, capture_output=True, timeout=600)
    [sdist] = sdist_dir.glob("cachedoctor-*.tar.gz")
    env = {**os.environ, "CC": str(tmp_path / "no-such-compiler")}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheel_dir), str(sdist)],
        env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    [pure] = wheel_dir.glob("cachedoctor-*.whl")
    assert pure.name.endswith("-py3-none-any.whl")
    assert not any(n.endswith((".so", ".pyd")) for n in zipfile.ZipFile(pure).namelist())
    unpacked = tmp_path / "site"
    zipfile.ZipFile(pure).extractall(unpacked)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_bytes(b"x" * 5000)
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    probe = ("import cachedoctor; from cachedoctor.fs import seam; "
             "print(cachedoctor.__file__, seam.current().folder_counter())")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    imported, counter = run.stdout.split()
    assert imported.startswith(str(unpacked)) and counter == "None"
    scan = subprocess.run([sys.executable, "-m", "cachedoctor", "scan", "--path", str(tree),
                           "--json"], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    entry = result_of(scan)["entries"][0]
    assert entry["apparent_bytes"] == sum(os.lstat(p).st_size for p in (tree, tree / "sub",
                                                                         tree / "sub" / "f"))
