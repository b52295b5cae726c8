"""No traceback, ever: each fault that once ended in a Python traceback (some leaving every retry
crashing the same way) now ends in a clear message, exit 1 or 2, and a state the next run can
finish or roll back."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX, IS_ROOT, result_of, run_cli
from tests.test_move import cli, leftovers, pending, write_profile
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="drives real Linux faults")
needs_chattr = pytest.mark.skipif(not IS_ROOT or not os.path.exists("/usr/bin/chattr"),
                                  reason="needs root and chattr (immutable files)")


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


@pytest.fixture
def foo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> Path:
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    cache = isolated_home / ".cache" / "foo"
    build_tree(cache)
    return cache


def test_a_corrupt_history_database_stops_the_move_before_the_copy(foo: Path, tmp_path: Path) -> None:
    from cachedoctor.history import db_path

    path = db_path()
    path.write_bytes(b"this is not a database" * 100)
    before = snapshot(foo)
    moved = cli("move", "foo", str(tmp_path / "d"), "--yes")
    no_traceback(moved)
    assert moved.returncode == 2 and "history database" in moved.stderr and "mv " in moved.stderr
    assert snapshot(foo) == before and not (tmp_path / "d" / "foo").exists()
    history = run_cli("history")
    no_traceback(history)
    assert history.returncode == 2  # a damaged state file (docs/state.md)


def test_a_history_database_that_breaks_after_the_work_does_not_undo_the_move(
        foo: Path, tmp_path: Path) -> None:
    from cachedoctor.history import db_path

    pause = tmp_path / "pause"
    pause.mkdir()
    env = {**os.environ, "CACHEDOCTOR_FAULT_AT": "registered:pause",
           "CACHEDOCTOR_FAULT_PAUSE_DIR": str(pause)}
    proc = subprocess.Popen([sys.executable, "-m", "cachedoctor", "move", "foo", str(tmp_path / "d"),
                             "--yes"], env=env, text=True, stderr=subprocess.PIPE)
    while not (pause / "paused").exists():
        assert proc.poll() is None
        time.sleep(0.02)
    conn = sqlite3.connect(db_path())
    conn.close()
    db_path().write_bytes(b"damaged mid-move" * 64)
    (pause / "resume").touch()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "not in the history" in err and "Traceback" not in err
    assert os.path.islink(foo) and pending() == []


def test_a_cache_folder_that_is_a_mount_point_is_refused_before_the_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path, tmpfs: Path) -> None:
    profiles = tmp_path / "profiles"
    write_profile(profiles, paths=str(tmpfs))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    (tmpfs / "blob").write_bytes(b"x" * 1000)
    moved = cli("move", "foo", str(tmp_path / "d"), "--yes")
    no_traceback(moved)
    assert moved.returncode == 2 and "mount point" in moved.stderr
    assert not (tmp_path / "d").exists()


def test_an_io_error_while_deleting_the_old_copy_leaves_a_move_to_finish(foo: Path, tmp_path: Path,
                                                                         shm_dest: Path) -> None:
    reference = snapshot(foo)
    failed = cli("move", "foo", str(shm_dest), "--yes", env={"CACHEDOCTOR_FAULT_AT": "remove-file:raise"})
    no_traceback(failed)
    assert failed.returncode == 1 and "injected fault" in failed.stderr
    assert "finishes it" in failed.stderr  # what to run next is said
    assert pending(), "the journal keeps the move to finish"
    done = cli("move", "foo", str(shm_dest), "--yes")
    assert done.returncode == 0, done.stderr
    assert snapshot(foo) == reference and leftovers(foo.parent, shm_dest) == []


@pytest.fixture
def shm_dest(tmp_path: Path) -> Path:
    import uuid

    path = Path("/dev/shm") / f"cachedoctor-notb-{uuid.uuid4().hex[:8]}"
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


@needs_chattr
def test_a_state_folder_that_cannot_be_written_changes_nothing(foo: Path, tmp_path: Path) -> None:
    from cachedoctor.state import state_dir

    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    run_cli("history")  # the database exists
    subprocess.run(["chattr", "+i", str(folder)], check=True)
    try:
        before = snapshot(foo)
        moved = cli("move", "foo", str(tmp_path / "d"), "--yes")
        no_traceback(moved)
        assert moved.returncode in (1, 2) and str(folder) in moved.stderr
        assert snapshot(foo) == before and not (tmp_path / "d" / "foo").exists()
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@needs_chattr
def test_a_folder_whose_entries_cannot_be_removed_stops_the_move_before_the_copy(
        foo: Path, shm_dest: Path) -> None:
    """The original is deleted after the copy: a folder in it that the user cannot empty (root's,
    or immutable as here: access(2) says EPERM even to root) is found in preflight, not after
    a whole copy."""
    stuck = next(p for p in sorted(foo.rglob("*")) if p.is_dir() and not p.is_symlink())
    subprocess.run(["chattr", "+i", str(stuck)], check=True)
    try:
        before = snapshot(foo)
        moved = cli("move", "foo", str(shm_dest), "--yes")
        no_traceback(moved)
        assert moved.returncode == 1, moved.stderr
        assert "not writable by you" in moved.stderr and str(stuck) in moved.stderr
        assert snapshot(foo) == before and not (shm_dest / "foo").exists()
    finally:
        subprocess.run(["chattr", "-i", str(stuck)], check=True)


@needs_chattr
def test_an_immutable_settings_file_is_a_message(isolated_home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{\n  // mine\n}\n", encoding="utf-8")
    subprocess.run(["chattr", "+i", str(settings)], check=True)
    try:
        tuned = run_cli("tune", "grok", "--file", str(settings), "--yes")
        no_traceback(tuned)
        assert tuned.returncode == 1 and "settings.json" in tuned.stderr
    finally:
        subprocess.run(["chattr", "-i", str(settings)], check=True)
    assert settings.read_text(encoding="utf-8") == "{\n  // mine\n}\n"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_absurdly_nested_config_files_are_malformed_not_a_crash(fmt: str, isolated_home: Path,
                                                                 tmp_path: Path) -> None:
    if fmt == "json":
        text = "[" * 5000 + "]" * 5000
        target, tool = tmp_path / "settings.json", "grok"
    else:
        text = "a:\n" + "".join("  " * i + "- \n" for i in range(1, 3000))
        target, tool = tmp_path / "config.yaml", "claude"
    target.write_text(text, encoding="utf-8")
    tuned = run_cli("tune", tool, "--file", str(target), "--yes")
    no_traceback(tuned)
    assert tuned.returncode == 2, tuned.stderr
    assert target.read_text(encoding="utf-8") == text


def test_an_alias_bomb_in_a_profile_folder_is_skipped_and_the_rest_works(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "hostile"
    folder.mkdir()
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    (folder / "bomb.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len((folder / "bomb.yaml").read_bytes()) < 400
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))
    started = time.monotonic()
    listed = run_cli("profiles", "list", "--json")
    assert time.monotonic() - started < 30
    no_traceback(listed)
    assert listed.returncode == 0 and "bomb.yaml" in listed.stderr and "aliases" in listed.stderr
    assert len(result_of(listed)["profiles"]) >= 75


def _wait_until_cachedoctor_runs(pid: int) -> None:
    """Until the process runs cachedoctor's own code (its SIGTERM handler is installed): a
    Ctrl-C earlier, while the interpreter itself starts, is Python's to report, not ours."""
    status = Path(f"/proc/{pid}/status")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            caught = next(line for line in status.read_text().splitlines()
                          if line.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return
        if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.001)


def test_ctrl_c_during_start_up_is_interrupted_not_a_traceback() -> None:
    for delay in (0.0, 0.02, 0.05, 0.1, 0.2):
        proc = subprocess.Popen([sys.executable, "-m", "cachedoctor", "profiles", "list"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_until_cachedoctor_runs(proc.pid)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, (delay, err)
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, err)


def test_sigterm_during_the_copy_rolls_back_like_ctrl_c(foo: Path, shm_dest: Path) -> None:
    reference = snapshot(foo)
    killed = cli("move", "foo", str(shm_dest), "--yes", env={"CACHEDOCTOR_FAULT_AT": "copy-file:sigterm"})
    no_traceback(killed)
    assert killed.returncode == 128 + signal.SIGTERM and "interrupted" in killed.stderr
    assert snapshot(foo) == reference and not os.path.islink(foo)
    assert pending() == [] and leftovers(foo.parent, shm_dest) == []


def test_control_characters_in_file_names_do_not_reach_the_terminal_raw(isolated_home: Path,
                                                                         tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    cache = isolated_home / ".cache" / "foo"
    evil = cache / "\x1b[2J\x1b]0;pwned\x07name"
    evil.mkdir(parents=True)
    (evil / "f").write_bytes(b"x" * 5000)
    for args in (("clean", "foo", "--dry-run"), ("scan", "--path", str(evil)), ("which", str(evil))):
        proc = run_cli(*args)
        no_traceback(proc)
        assert "\x1b" not in proc.stdout + proc.stderr, args
        assert "\\x1b" in proc.stdout + proc.stderr, args


def test_a_deeply_nested_cache_does_not_end_in_a_recursion_error(foo: Path, shm_dest: Path) -> None:
    path = str(foo / "deep")
    os.mkdir(path)
    for _ in range(1100):  # os.makedirs itself recurses
        path += "/d"
        os.mkdir(path)
    Path(path, "leaf").write_text("bottom")
    try:
        _move_and_restore_deep(foo, shm_dest)
    finally:  # pytest's own clean-up of old temp folders recurses too: leave nothing this deep
        for holder in [*foo.parent.glob("foo*"), *shm_dest.glob("foo*")]:
            if holder.is_dir() and not holder.is_symlink():
                _remove_deep(holder / "deep")


def _remove_deep(top: Path) -> None:
    path = str(top)
    while os.path.isdir(path) and not os.path.islink(path):
        inner = path + "/d"
        if os.path.isdir(inner):
            path = inner
            continue
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
        if path == str(top):
            return
        path = path.rsplit("/", 1)[0]


def _move_and_restore_deep(foo: Path, shm_dest: Path) -> None:
    moved = cli("move", "foo", str(shm_dest), "--yes")
    no_traceback(moved)
    if moved.returncode == 0:
        assert os.path.islink(foo)
        back = cli("restore", "foo", "--yes")
        no_traceback(back)
        assert back.returncode == 0, back.stderr
    else:
        assert moved.returncode in (1, 2) and not os.path.islink(foo) and pending() == []


def test_damaged_state_files_are_named_with_what_they_held(foo: Path, shm_dest: Path) -> None:
    from cachedoctor.relocate.journal import journal_dir, registry_file

    assert cli("move", "foo", str(shm_dest), "--yes").returncode == 0
    registry_file().write_text("{broken", encoding="utf-8")
    back = cli("restore", "foo", "--yes")
    no_traceback(back)
    assert back.returncode == 2 and "relocations.json" in back.stderr and "damaged" in back.stderr
    again = cli("move", "foo", str(shm_dest / "other"), "--yes")
    assert again.returncode == 2 and registry_file().read_text(encoding="utf-8") == "{broken"
    doctor = result_of(run_cli("doctor", "--json"))
    assert any(f["check"] == "state-damaged" for f in doctor["findings"])
    registry_file().unlink()
    journal_dir().mkdir(parents=True, exist_ok=True)
    (journal_dir() / "20261201T000000-1-abcdef.json").write_text("{half", encoding="utf-8")
    listed = run_cli("profiles", "list")
    no_traceback(listed)
    assert "20261201T000000-1-abcdef.json is damaged" in listed.stderr


def test_a_kill_while_a_rollback_deletes_the_copy_leaves_nothing_disowned(foo: Path,
                                                                          shm_dest: Path) -> None:
    """10 of 1,758 trials once left up to a whole cache of junk that the next restore disowned."""
    reference = snapshot(foo)
    first = cli("move", "foo", str(shm_dest), "--yes", env={"CACHEDOCTOR_FAULT_AT": "linked"})
    assert first.returncode == -9
    killed = cli("restore", "foo", "--yes", env={"CACHEDOCTOR_FAULT_AT": "unplace-done"})
    assert killed.returncode == -9
    assert [p for p in leftovers(shm_dest) if "removing" in p], "the copy was renamed before deleting"
    back = cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    assert snapshot(foo) == reference and leftovers(foo.parent, shm_dest) == [] and pending() == []
