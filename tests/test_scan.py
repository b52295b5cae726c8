"""`cachedoctor scan` end to end: profiles, links, unclaimed folders, mounts, JSON fields."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cachedoctor.quota import set_quota
from tests.conftest import (
    envelope_of,
    needs_du,
    needs_root,
    needs_symlinks,
    result_of,
    run_cli,
    user_cache_root,
)

PROFILE = """\
id: demo
name: Demo
description: A demo tool.
locations:
  - id: cache
    paths: {linux: "${XDG_CACHE_HOME:-~/.cache}/demo", macos: ~/Library/Caches/demo, windows: '%LOCALAPPDATA%\\\\demo'}
    safe_to_delete: true
  - id: models
    paths: {linux: ~/.demo/models, macos: ~/.demo/models, windows: '~\\\\.demo\\\\models'}
    safe_to_delete: false
"""

ENTRY_FIELDS = {
    "tool", "location", "path", "link", "target", "bytes", "apparent_bytes", "files", "dirs",
    "inodes", "newest_mtime", "partial", "errors", "drive",
}


@pytest.fixture
def profiles_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "demo.yaml").write_text(PROFILE)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))
    return folder


def make_tree(root: Path, files: int = 20) -> None:
    for i in range(files):
        sub = root / f"d{i % 4}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.bin").write_bytes(os.urandom(100 * i + 1))


def du(flag: str, path: Path) -> int:
    out = subprocess.run(["du", "-s", flag, str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def scan_json(*args: str) -> tuple[int, dict]:
    result = run_cli("scan", *args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result_of(result)


@needs_du
def test_scan_path_matches_du_and_has_documented_fields(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    make_tree(tree)
    os.link(tree / "d0" / "f0.bin", tree / "hard")
    os.symlink("d1/f1.bin", tree / "link")
    code, doc = scan_json("--path", str(tree))
    assert code == 0
    [entry] = doc["entries"]
    assert set(entry) >= ENTRY_FIELDS
    assert {"mount", "free_bytes", "total_bytes"} <= set(entry["drive"])
    assert entry["tool"] is None
    assert entry["bytes"] == du("-B1", tree)
    assert entry["apparent_bytes"] == du("-b", tree)
    assert entry["inodes"] == du("--inodes", tree)
    assert doc["totals"]["bytes"] == entry["bytes"]


@needs_symlinks
def test_scan_profiles_relocated_and_broken_links(profiles_dir: Path, isolated_home: Path, tmp_path: Path) -> None:
    cache = user_cache_root(isolated_home) / "demo"
    make_tree(cache, 8)
    elsewhere = tmp_path / "other-drive" / "models"
    make_tree(elsewhere, 12)
    (isolated_home / ".demo").mkdir()
    os.symlink(elsewhere, isolated_home / ".demo" / "models")
    code, doc = scan_json("demo")
    assert code == 0
    by_location = {e["location"]: e for e in doc["entries"]}
    assert by_location["models"]["link"] == "symlink"
    assert by_location["models"]["target"] == str(elsewhere)
    assert by_location["models"]["files"] == 12  # measured at the target
    assert by_location["cache"]["link"] is None and by_location["cache"]["files"] == 8
    assert doc["entries"][0]["bytes"] >= doc["entries"][1]["bytes"]  # sorted by size

    # the other drive is unplugged: the link is shown as broken, the scan does not crash
    for f in elsewhere.rglob("*"):
        if f.is_file():
            f.unlink()
    for d in sorted(elsewhere.rglob("*"), reverse=True):
        d.rmdir()
    elsewhere.rmdir()
    code, doc = scan_json("demo")
    models = next(e for e in doc["entries"] if e["location"] == "models")
    assert models["broken"] is True and models["link"] == "symlink"
    assert models["inodes"] == 1  # the link itself


def test_unclaimed_folders_are_listed(profiles_dir: Path, isolated_home: Path) -> None:
    make_tree(user_cache_root(isolated_home) / "demo", 4)
    make_tree(user_cache_root(isolated_home) / "mystery-app", 30)
    code, doc = scan_json()
    assert code == 0
    unclaimed = [e["path"] for e in doc["unclaimed"]]
    assert str(user_cache_root(isolated_home) / "mystery-app") in unclaimed
    assert str(user_cache_root(isolated_home) / "demo") not in unclaimed
    assert all(e["tool"] is None for e in doc["unclaimed"])
    # naming tools limits the scan to them, without the unclaimed list
    _, only = scan_json("demo")
    assert only["unclaimed"] == []


def test_progress_is_drawn_on_stderr_never_into_the_report(isolated_home: Path,
                                                           tmp_path: Path) -> None:
    """`cachedoctor scan --path X > report.txt` at a terminal: the spinner is drawn on stderr
    (a real pseudo terminal), then erased; the report holds exactly what a pipe gets. (The
    progress shows after SHOW_AFTER: 0 here, so a small tree is enough.)"""
    import pty
    import select
    import sys

    tree = tmp_path / "tree"
    make_tree(tree, 30)
    report = tmp_path / "report.txt"
    start = ("import sys; from cachedoctor.cli import main, progress; progress.SHOW_AFTER = 0; "
             "sys.argv[0] = 'cachedoctor'; main()")
    leader, follower = pty.openpty()
    with report.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", start, "scan", "--path", str(tree)],
                                stdout=out, stderr=follower, stdin=subprocess.DEVNULL,
                                env={**os.environ, "TERM": "xterm", "COLUMNS": "150"})
    os.close(follower)
    screen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        try:
            chunk = os.read(leader, 65536) if ready else b""
        except OSError:  # every writer has closed the terminal
            chunk = b""
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0, screen
    drawn = screen.decode(errors="replace")
    assert f"scanning {tree}" in drawn and "entries" in drawn, drawn
    assert "\x1b[2K" in drawn[drawn.rindex("entries"):]  # erased when the scan ended
    piped = run_cli("scan", "--path", str(tree))
    assert report.read_text() == piped.stdout and "scanning" not in piped.stderr


def test_quota_is_shown(profiles_dir: Path, isolated_home: Path) -> None:
    make_tree(user_cache_root(isolated_home) / "demo", 4)
    set_quota("demo", "cache", 20_000_000_000)
    _, doc = scan_json("demo")
    assert doc["entries"][0]["quota_bytes"] == 20_000_000_000


def test_human_table_and_errors(profiles_dir: Path, isolated_home: Path, tmp_path: Path) -> None:
    make_tree(user_cache_root(isolated_home) / "demo", 4)
    table = run_cli("scan", "demo")
    assert table.returncode == 0
    assert "demo" in table.stdout and "total" in table.stdout
    assert "\x1b" not in table.stdout + table.stderr  # no colour codes when piped
    assert "scanning" not in table.stderr  # and no progress
    unknown = run_cli("scan", "nope")
    assert unknown.returncode == 2 and "unknown tool 'nope'" in unknown.stderr
    missing = run_cli("scan", "--path", str(tmp_path / "missing"), "--json")
    assert missing.returncode == 2  # a mistyped folder is bad input, not a partial 0 B row
    assert envelope_of(missing.stdout)["errors"][0]["message"].startswith("no such folder")


@needs_root
@needs_du
def test_nested_mount_is_crossed_like_du_unless_one_file_system(tmp_path: Path, tmpfs: Path) -> None:
    # the tmpfs fixture is mounted inside tmp_path, so tmp_path holds a nested mount
    make_tree(tmp_path / "plain", 6)
    make_tree(tmpfs, 9)
    _, crossing = scan_json("--path", str(tmp_path))
    _, staying = scan_json("--path", str(tmp_path), "-x")
    assert crossing["entries"][0]["bytes"] == du("-B1", tmp_path)
    assert staying["entries"][0]["bytes"] == int(
        subprocess.run(["du", "-sxB1", str(tmp_path)], capture_output=True, text=True).stdout.split()[0]
    )
    assert staying["entries"][0]["files"] < crossing["entries"][0]["files"]


def test_scan_and_profiles_list_filter_by_category() -> None:

    from tests.conftest import run_cli

    listed = result_of(run_cli("profiles", "list", "--category", "browser", "--json"))
    assert {p["id"] for p in listed["profiles"]} == {"chrome", "chromium", "edge"}
    assert {p["category"] for p in listed["profiles"]} == {"browser"}
    assert run_cli("scan", "--category", "browser", "--json").returncode == 0
    bad = run_cli("scan", "--category", "nope")
    assert bad.returncode == 2 and "known: ai, browser" in bad.stderr
