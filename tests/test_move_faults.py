"""Fault injection: kill -9 the real CLI at random points of a move (or restore), then finish it
by re-running the same command or roll it back with `restore`. Nothing may be lost or differ.

The kill comes from inside (CACHEDOCTOR_FAULT_AT=N: SIGKILL at the N-th fault point: every
copied file, journal write, rename, link and deletion), so every step boundary is reachable.
"""

from __future__ import annotations

import os
import random
import shutil
import uuid
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX
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
