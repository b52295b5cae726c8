"""Fault injection: kill -9 the real CLI at random points of a move (or restore), then finish it
by re-running the same command or roll it back with `restore`. Nothing may be lost or differ.

The kill comes from inside (CACHEDOCTOR_FAULT_AT=N: SIGKILL at the N-th fault point: every
copied file, journal write, rename, link and deletion), so every step boundary is reachable.
"""

from __future__ import annotations

import os
import random
import shutil
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IS_LINUX, result_of
from tests.test_move import cli, leftovers, pending, write_profile
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = pytest.mark.skipif(not IS_LINUX or not os.path.isdir("/dev/shm"),
                                reason="needs Linux and /dev/shm (a second filesystem)")


def count_points(*args: str, report: Path) -> int:
    result = cli(*args, env={"CACHEDOCTOR_FAULT_REPORT": str(report)})
    assert result.returncode == 0, result.stderr
    return int(report.read_text())


def run_trials(trials: int, seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               home: Path) -> dict[str, int]:
    rng = random.Random(seed)
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    cache = home / ".cache" / "foo"
    shm_root = Path("/dev/shm") / f"cachedoctor-faults-{uuid.uuid4().hex[:8]}"
    destinations = {"cross": shm_root / "dest", "same": tmp_path / "dest"}
    stats = {"killed": 0, "finished_by_move": 0, "rolled_back_by_restore": 0, "restore_killed": 0}
    try:
        build_tree(cache)
        reference = snapshot(cache)
        # how many fault points a whole move and restore pass (the range to kill in)
        move_points = count_points("move", "foo", str(destinations["cross"]), "--yes",
                                   report=tmp_path / "count-move")
        restore_points = count_points("restore", "foo", "--yes", report=tmp_path / "count-restore")
        assert snapshot(cache) == reference
        for trial in range(trials):
            kind = "cross" if trial % 4 else "same"
            dest = destinations[kind]
            at = rng.randint(1, move_points + 2)
            killed = cli("move", "foo", str(dest), "--yes", env={"CACHEDOCTOR_FAULT_AT": str(at)})
            assert killed.returncode in (-9, 0), (trial, at, killed.stderr)
            stats["killed"] += killed.returncode == -9
            context = f"trial {trial} ({kind}) killed at point {at}/{move_points}"
            if rng.random() < 0.5:
                done = cli("move", "foo", str(dest), "--yes")
                assert done.returncode == 0, (context, done.stderr)
                assert os.path.islink(cache), context
                assert snapshot(cache) == reference, context
                assert snapshot(dest / "foo") == reference, context
                stats["finished_by_move"] += 1
                at_restore = rng.randint(1, restore_points + 2)
                rkilled = cli("restore", "foo", "--yes", env={"CACHEDOCTOR_FAULT_AT": str(at_restore)})
                assert rkilled.returncode in (-9, 0), (context, rkilled.stderr)
                stats["restore_killed"] += rkilled.returncode == -9
            else:
                stats["rolled_back_by_restore"] += 1
            back = cli("restore", "foo", "--yes")
            assert back.returncode == 0, (context, back.stderr)
            assert not os.path.islink(cache), context
            assert snapshot(cache) == reference, context
            assert not (dest / "foo").exists(), context
            assert leftovers(cache.parent, shm_root, tmp_path / "dest") == [], context
            assert pending() == [], context
    finally:
        shutil.rmtree(shm_root, ignore_errors=True)
    return stats


def test_kill_9_at_random_points_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               isolated_home: Path) -> None:
    stats = run_trials(8, 1234, tmp_path, monkeypatch, isolated_home)
    assert stats["killed"] >= 4  # most trials really were interrupted


@pytest.mark.slow
def test_kill_9_at_random_points_many_trials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             isolated_home: Path) -> None:
    stats = run_trials(60, int.from_bytes(os.urandom(4), "big"), tmp_path, monkeypatch, isolated_home)
    assert stats["killed"] >= 40


# ------------------------------------------------- every method, and a tool of several locations

# (profile YAML, the location moved, where its data lands below DEST/<tool>): one per method.
METHOD_PROFILES: dict[str, tuple[str, str, str]] = {
    "env": ("""\
        id: hflike
        name: HF-like
        description: two locations (only one exists); the default method is a variable
        locations:
          - id: hub
            paths: {linux: '${HFLIKE_HUB:-~/.cache/hflike/hub}'}
            safe_to_delete: true
            relocate: [{method: env, vars: {HFLIKE_HUB: '{dest}'}}, {method: link}]
          - id: xet
            paths: {linux: '~/.cache/hflike/xet'}
            safe_to_delete: true
            relocate: [{method: env, vars: {HFLIKE_XET: '{dest}'}}]
        """, "~/.cache/hflike/hub", "hub"),
    "config": ("""\
        id: hflike
        name: pip-like
        description: moved by a config key
        locations:
          - id: hub
            paths: {linux: '~/.cache/hflike/hub'}
            safe_to_delete: true
            relocate:
              - {method: config, file: {linux: '~/.config/hflike.ini'}, format: ini, section: global, key: cache-dir}
        """, "~/.cache/hflike/hub", ""),
    "policy": ("""\
        id: hflike
        name: browser-like
        description: moved by the DiskCacheDir policy
        locations:
          - id: hub
            paths: {linux: ['~/.cache/hflike/Default', '~/.cache/hflike/Profile *']}
            safe_to_delete: true
            relocate: [{method: policy, browser: chromium}]
        """, "~/.cache/hflike/Default", "Default"),
}


def _where(tool: str) -> dict[str, Any]:

    proc = cli("where", tool, "--json")
    return result_of(proc)


def run_method_trials(method: str, trials: int, seed: int, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch, home: Path) -> int:
    """kill -9 a move by `method` at random points; re-run THE SAME COMMAND (no --location, no
    --method) and it finishes; restore then puts everything back as it was."""
    text, cache_template, below = METHOD_PROFILES[method]
    rng = random.Random(seed)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "hflike.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(tmp_path / "root"))
    cache = Path(cache_template.replace("~", str(home)))
    dest = Path("/dev/shm") / f"cachedoctor-faults-{uuid.uuid4().hex[:8]}"
    landed = dest / "hflike" / "hub" if method == "env" else dest / "hflike"
    landed = landed / below if below and method != "env" else landed
    killed = 0
    try:
        build_tree(cache)
        reference = snapshot(cache)
        command = ("move", "hflike", str(dest), "--yes")
        points = count_points(*command, report=tmp_path / "count")
        assert snapshot(landed) == reference
        assert cli("restore", "hflike", "--yes").returncode == 0
        assert snapshot(cache) == reference
        for trial in range(trials):
            at = rng.randint(1, points + 2)
            first = cli(*command, env={"CACHEDOCTOR_FAULT_AT": str(at)})
            assert first.returncode in (-9, 0), (trial, at, first.stderr)
            killed += first.returncode == -9
            context = f"{method} trial {trial} killed at point {at}/{points}"
            done = cli(*command)
            assert done.returncode == 0, (context, done.stderr)
            assert snapshot(landed) == reference, context
            [hub] = [r for r in _where("hflike")["locations"] if r["location"] == "hub"]
            assert [p["data"] for p in hub["places"] if p["exists"]] == [str(landed)], context
            back = cli("restore", "hflike", "--yes")
            assert back.returncode == 0, (context, back.stderr)
            assert snapshot(cache) == reference, context
            assert not landed.exists(), context
            assert leftovers(cache.parent, dest) == [], context
            assert pending() == [], context
            [hub] = [r for r in _where("hflike")["locations"] if r["location"] == "hub"]
            assert hub["record"] is None and hub["places"][0]["path"] == str(cache), context
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return killed


@pytest.mark.parametrize("method", sorted(METHOD_PROFILES))
def test_kill_9_during_a_move_by_any_method_then_the_same_command_finishes(
        method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    assert run_method_trials(method, 4, 99, tmp_path, monkeypatch, isolated_home) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(METHOD_PROFILES))
def test_kill_9_during_a_move_by_any_method_many_trials(
        method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    assert run_method_trials(method, 30, seed, tmp_path, monkeypatch, isolated_home) >= 20


def test_a_killed_move_of_several_locations_is_finished_and_continued_by_the_same_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    """`move TOOL DEST` moves every present location in turn. Killed in the second one, the
    same command (even without the --method it was given) finishes that one and moves the
    ones it had not reached, the same way."""
    profiles = tmp_path / "profiles"
    extra = "".join(
        f"- id: loc{i}\n"
        f"  paths: {{linux: \"~/.cache/foo{i}\"}}\n"
        "  safe_to_delete: true\n"
        f"  relocate: [{{method: env, vars: {{FOO{i}: \"{{dest}}\"}}}}, {{method: link}}]\n"
        for i in (1, 2, 3))
    write_profile(profiles, extra_locations=extra)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    folders = [isolated_home / ".cache" / name for name in ("foo", "foo1", "foo2", "foo3")]
    for folder in folders:
        build_tree(folder)
    reference = [snapshot(f) for f in folders]
    shm = Path("/dev/shm") / f"cachedoctor-multi-{uuid.uuid4().hex[:8]}"
    try:
        total = count_points("move", "foo", str(shm / "probe"), "--method", "link", "--yes",
                             report=tmp_path / "count")
        assert cli("restore", "foo", "--yes").returncode == 0
        shutil.rmtree(shm / "probe", ignore_errors=True)
        killed = cli("move", "foo", str(shm / "dest"), "--method", "link", "--yes",
                     env={"CACHEDOCTOR_FAULT_AT": str(total * 3 // 8)})
        assert killed.returncode == -9
        again = cli("move", "foo", str(shm / "dest"), "--yes")
        assert again.returncode == 0, again.stderr
        for folder, before in zip(folders, reference, strict=True):
            assert folder.is_symlink(), f"{folder} was not moved"
            assert snapshot(folder) == before
        assert pending() == [] and leftovers(isolated_home / ".cache") == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)
