"""`sudo cachedoctor ...` (issue 15): root acts for root, never in another user's home.

The policy method no longer needs the whole run as root (tests/test_rootfiles.py: it runs as the
user and asks sudo for its one file). Run as root, cachedoctor refuses a HOME another user owns
(sudo with HOME kept): what root wrote there would stay root's, and root would follow the links
that user made (an attack a review of this change demonstrated, when root acted in the user's
home and gave files back: a link in the state folder to /etc had every root file there handed to
the user). With root's own HOME it goes on, and says whose caches these are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor import invoker
from cachedoctor.errors import UserInputError
from tests.conftest import IS_ROOT, envelope_of

UID = 4242  # no account has to exist: the home is simply given this owner


def test_root_in_another_users_home_is_refused_and_a_sudo_run_for_root_says_whose_caches() -> None:
    with pytest.raises(UserInputError, match=r"HOME=/home/ann, the home folder of uid 4242"):
        invoker.check({}, 0, "/home/ann", lambda _path: UID)
    with pytest.raises(UserInputError, match="the home folder of"):
        invoker.check({"SUDO_USER": "ann"}, 0, "/home/ann", lambda _path: UID)
    note = invoker.check({"SUDO_USER": "ann"}, 0, "/root", lambda _path: 0)
    assert note is not None and "root's caches (HOME=/root), not ann's" in note
    assert invoker.check({}, 0, "/root", lambda _path: 0) is None  # root, for root
    assert invoker.check({"SUDO_USER": "root"}, 0, "/root", lambda _path: 0) is None
    assert invoker.check({}, 1000, "/home/ann", lambda _path: UID) is None  # the user: fine
    assert invoker.check({}, 0, "/nonexistent", lambda _path: None) is None


def test_root_with_a_users_xdg_folder_kept_is_refused() -> None:
    """`sudo -E`: root's own HOME, but the user's XDG folders (which hold cachedoctor's state
    and the caches it moves): refused as the user's home is, checked on the nearest folder
    that exists."""
    owners = {"/root": 0, "/": 0, "/home": 0, "/home/ann": UID, "/tmp": 0}
    owner = owners.get
    for variable in invoker.XDG_FOLDERS:
        with pytest.raises(UserInputError, match=rf"{variable}=/home/ann/.local/x, \(sudo -E keeps it\) a folder of uid 4242"):
            invoker.check({variable: "/home/ann/.local/x"}, 0, "/root", owner)
        assert invoker.check({variable: "/tmp/root-state"}, 0, "/root", owner) is None
        assert invoker.check({variable: "relative"}, 0, "/root", owner) is None
        assert invoker.check({variable: "/home/ann/x"}, 1000, "/home/ann", owner) is None


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.skipif(not IS_ROOT, reason="runs cachedoctor as root in a home another user owns")
@pytest.mark.parametrize("args", [
    ("scan", "--json"),
    ("move", "chromium", "/tmp/cachedoctor-never", "--method", "policy", "--yes", "--json"),
    ("history", "--json"),
])
def test_sudo_with_the_users_home_kept_reads_and_writes_nothing(
        isolated_home: Path, args: tuple[str, ...]) -> None:
    cache = isolated_home / ".cache" / "chromium" / "Default" / "Cache"
    cache.mkdir(parents=True)
    (cache / "data_0").write_bytes(b"x" * 3000)
    (isolated_home / ".local" / "state").mkdir(parents=True)
    (isolated_home / ".local" / "state" / "cachedoctor").symlink_to("/etc")  # planted
    before = tree(isolated_home)
    for path in (isolated_home, *isolated_home.rglob("*")):
        os.chown(path, UID, UID, follow_symlinks=False)
    try:
        done = run({**os.environ, "SUDO_USER": "ann", "SUDO_UID": str(UID)}, *args)
    finally:
        for path in (isolated_home, *isolated_home.rglob("*")):
            os.chown(path, 0, 0, follow_symlinks=False)
    assert done.returncode == 2, done.stderr
    assert "the home folder of" in done.stderr and "Traceback" not in done.stderr
    [error] = envelope_of(done.stdout)["errors"]
    assert error["kind"] == "bad_input" and "without sudo" in error["hint"]
    assert tree(isolated_home) == before  # no state, index, journal or history made
    assert not Path("/tmp/cachedoctor-never").exists()


@pytest.mark.skipif(not IS_ROOT, reason="runs cachedoctor as root")
def test_sudo_with_roots_home_goes_on_and_says_whose_caches_these_are(isolated_home: Path) -> None:
    done = run({**os.environ, "SUDO_USER": "ann"}, "scan", "--json")
    assert done.returncode == 0, done.stderr
    said = "running as root, for root's caches"
    assert said in done.stderr
    assert any(said in w for w in envelope_of(done.stdout)["warnings"])


@pytest.mark.skipif(not IS_ROOT, reason="runs cachedoctor as root with another user's folder")
def test_sudo_keeping_the_users_state_folder_writes_nothing_there(tmp_path: Path) -> None:
    theirs = tmp_path / "ann"
    theirs.mkdir()
    os.chown(theirs, UID, UID)
    env = {**os.environ, "SUDO_USER": "ann", "XDG_STATE_HOME": str(theirs / ".local" / "state")}
    done = run(env, "scan", "--json")
    assert done.returncode == 2, done.stderr
    assert f"XDG_STATE_HOME={theirs}/.local/state, (sudo -E keeps it) a folder of" in done.stderr
    assert list(theirs.iterdir()) == []
