"""The tool's own clean command is run by the program that serves *this* cache: real pips, an
old one (before 23.3, which knows http/ but not http-v2/) first on PATH and a current one."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX, result_of, run_cli

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="venv bin/ layout and sh scripts")
KIB = 1024


def pip_version(venv: Path) -> tuple[int, ...]:
    out = subprocess.run([str(venv / "bin" / "pip"), "--version"], capture_output=True,
                         text=True, check=True).stdout
    return tuple(int(x) for x in out.split()[1].split(".")[:2])


@pytest.fixture(scope="session")
def pips(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(old venv, new venv), made once with the machine's own pip configuration."""
    base = tmp_path_factory.mktemp("pips")
    old, new = base / "old", base / "new"
    for venv in (old, new):
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if pip_version(old) >= (23, 3):
        got = subprocess.run([str(old / "bin" / "pip"), "install", "-q", "pip==23.2.1"],
                             capture_output=True, text=True)
        if got.returncode != 0:
            pytest.skip(f"no pip older than 23.3 to be had: {got.stderr.strip()[-200:]}")
    if pip_version(new) < (23, 3):
        got = subprocess.run([str(new / "bin" / "pip"), "install", "-q", "pip>=23.3"],
                             capture_output=True, text=True)
        if got.returncode != 0:
            pytest.skip(f"no pip 23.3 or later to be had: {got.stderr.strip()[-200:]}")
    return old, new


@pytest.fixture
def pip_cache(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PIP_CACHE_DIR", raising=False)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    root = isolated_home / ".cache" / "pip"
    for i in range(8):
        entry = root / "http-v2" / f"{i}" / "b" / "c" / f"entry{i}"
        entry.parent.mkdir(parents=True)
        entry.write_bytes(b"h" * 20 * KIB)
        entry.with_name(entry.name + ".body").write_bytes(b"b" * 40 * KIB)
    old = root / "http" / "a" / "b" / "old-entry"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"o" * 4 * KIB)
    return root


def on_path(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    system = [p for p in os.environ["PATH"].split(os.pathsep)
              if p and not any((Path(p) / n).exists() for n in ("pip", "pip3"))]
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, folders), *system]))


def test_the_newest_pip_serving_the_cache_runs_not_the_first_on_path(
    pips: tuple[Path, Path], pip_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = pips
    on_path(monkeypatch, old / "bin", new / "bin")
    plan = run_cli("clean", "pip", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    (target,) = result_of(plan)["targets"]
    assert target["command"] == [str(new / "bin" / "pip"), "cache", "purge"]
    assert "newest of 2 that serve this cache" in target["command_why"]
    assert str(old / "bin" / "pip") in target["command_why"]
    proc = run_cli("clean", "pip", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = result_of(proc)["results"]
    assert list(pip_cache.rglob("entry*")) == []
    assert result["warnings"] == []
    assert result["files"] == result["measured"]["files_gone"] >= 17


def test_the_pip_a_cache_names_as_its_user_is_found_off_path(
    pips: tuple[Path, Path], pip_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip's self-check records each interpreter prefix that used the cache (self_outdated_check:
    `selfcheck/<sha224 of sys.prefix>.json` holding {"key": sys.prefix, ...})."""
    old, new = pips
    on_path(monkeypatch, old / "bin")
    prefix = str(new)
    selfcheck = pip_cache / "selfcheck" / f"{hashlib.sha224(prefix.encode()).hexdigest()}.json"
    selfcheck.parent.mkdir()
    selfcheck.write_text(json.dumps({"key": prefix, "last_check": "2026-01-01T00:00:00Z",
                                     "pypi_version": "26.0"}))
    plan = run_cli("clean", "pip", "--dry-run", "--json")
    (target,) = result_of(plan)["targets"]
    assert target["command"][0] == str(new / "bin" / "pip")


def test_an_old_pip_that_leaves_http_v2_is_reported_with_measured_numbers(
    pips: tuple[Path, Path], pip_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, _ = pips
    on_path(monkeypatch, old / "bin")
    proc = run_cli("clean", "pip", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = result_of(proc)["results"]
    measured = result["measured"]
    assert len(list(pip_cache.rglob("entry*"))) == 16  # http-v2 untouched
    assert not (pip_cache / "http" / "a" / "b" / "old-entry").exists()
    assert result["files"] == measured["files_gone"] == 1  # not the 17 files the plan counted
    assert result["bytes"] == measured["bytes_before"] - measured["bytes_after"]
    (warning,) = [w for w in result["warnings"] if "left" in w]
    assert "of the cache in place" in warning and "http-v2/" in warning
    assert any("planned to free" in w for w in result["warnings"])
    text = run_cli("clean", "pip", "--yes")
    assert "of the cache in place" in text.stderr


def test_a_pip_serving_another_cache_is_not_chosen_even_if_newer(
    pips: tuple[Path, Path], pip_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, new = pips
    elsewhere = tmp_path / "elsewhere-bin"
    elsewhere.mkdir()
    calls = tmp_path / "calls.txt"
    fake = elsewhere / "pip"
    fake.write_text("#!/bin/sh\n"
                    f'echo "$@" >> {calls}\n'
                    'case "$1" in --version) echo "pip 99.0 from /x";; '
                    'cache) echo /some/other/cache;; esac\n')
    fake.chmod(0o755)
    on_path(monkeypatch, elsewhere, new / "bin")
    plan = run_cli("clean", "pip", "--dry-run", "--json")
    (target,) = result_of(plan)["targets"]
    assert target["command"][0] == str(new / "bin" / "pip")
    assert "serves /some/other/cache" in target["command_why"]
    assert "purge" not in calls.read_text()


def test_ctrl_c_during_a_clean_says_what_happened(isolated_home: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A real SIGINT while the tool's own clean command runs (the command sends it, as a
    terminal would on Ctrl-C)."""
    profiles, bin_dir = tmp_path / "profiles", tmp_path / "bin"
    profiles.mkdir()
    bin_dir.mkdir()
    (profiles / "foo.yaml").write_text(
        "id: foo\nname: Foo\ndescription: test\nlocations:\n  - id: cache\n"
        "    paths: {linux: '~/.cache/foo'}\n    safe_to_delete: true\n"
        "    clean: {command: [foo-clean]}\n")
    script = bin_dir / "foo-clean"
    script.write_text("#!/bin/sh\nkill -INT $PPID\nsleep 10\n")
    script.chmod(0o755)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cache = isolated_home / ".cache" / "foo"
    cache.mkdir(parents=True)
    (cache / "f").write_bytes(b"x" * 5000)
    proc = run_cli("clean", "foo", "--yes")
    assert proc.returncode == 130, proc.stderr
    assert "the clean was interrupted" in proc.stderr and str(cache) in proc.stderr
    assert "the same command finishes it" in proc.stderr and (cache / "f").exists()
