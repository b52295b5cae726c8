"""`sudo cachedoctor ...` (issue 15): the run acts for SUDO_USER, not root.

SUDO_USER is checked against a sandbox passwd file below CACHEDOCTOR_SYSTEM_ROOT (no real
account is needed), its home and state are used, and what root makes in their folders is given
back to them; only the policy file in /etc stays root's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IS_LINUX, IS_ROOT, envelope_of, result_of

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="sudo and /etc policy files are Linux's")

UID = GID = 4242  # no account on the machine has to exist: the passwd file is the sandbox's
POLICY = "etc/chromium/policies/managed/cachedoctor.json"


def passwd(root: Path, home: Path, name: str = "cdtest", uid: int = UID) -> None:
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "passwd").write_text(f"root:x:0:0:root:/root:/bin/sh\n"
                                         f"{name}:x:{uid}:{GID}:Test:{home}:/bin/sh\n")


def chromium_cache(home: Path) -> Path:
    cache = home / ".cache" / "chromium" / "Default" / "Cache" / "Cache_Data"
    cache.mkdir(parents=True)
    (cache / "data_0").write_bytes(os.urandom(3000))
    return cache


def owners(root: Path) -> dict[str, int]:
    found = {".": os.lstat(root).st_uid}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            found[os.path.relpath(path, root)] = os.lstat(path).st_uid
    return found


# --- who the run acts for ----------------------------------------------------------------------


def test_sudo_user_is_checked_against_the_passwd_database(tmp_path: Path) -> None:
    from cachedoctor.errors import UserInputError
    from cachedoctor.invoker import InvokingUser, invoking_user

    home = tmp_path / "home"
    home.mkdir()
    entries = {"ana": (UID, GID, str(home)), "nohome": (UID, GID, str(tmp_path / "gone"))}
    lookup = entries.get
    sudo = {"SUDO_USER": "ana", "SUDO_UID": str(UID), "SUDO_GID": str(GID), "HOME": "/root"}
    assert invoking_user(sudo, 0, lookup) == InvokingUser("ana", UID, GID, str(home))
    assert invoking_user(sudo, UID, lookup) is None  # `sudo -u ana`: already ana
    assert invoking_user({**sudo, "SUDO_USER": "root"}, 0, lookup) is None
    assert invoking_user({"HOME": "/root"}, 0, lookup) is None  # a root login
    bad = [({"SUDO_USER": "ghost"}, "SUDO_USER=ghost is not a user"),
           ({"SUDO_UID": "1000"}, "SUDO_UID=1000 does not match the passwd entry"),
           ({"SUDO_UID": ""}, "SUDO_UID=(unset)"),
           ({"SUDO_GID": "x"}, "SUDO_GID=x is not a group"),
           ({"SUDO_USER": "nohome"}, "does not exist")]
    for change, message in bad:
        with pytest.raises(UserInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            invoking_user({**sudo, **change}, 0, lookup)


def test_adopting_the_sudo_user_gives_their_home_to_every_lookup(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor import invoker
    from cachedoctor.host import Host
    from cachedoctor.state import state_dir

    home = tmp_path / "home"
    home.mkdir()
    root = tmp_path / "root"
    passwd(root, home)
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.setenv("USER", "root")
    monkeypatch.setenv("SUDO_USER", "cdtest")
    monkeypatch.setenv("SUDO_UID", str(UID))
    monkeypatch.setenv("SUDO_GID", str(GID))
    monkeypatch.setattr(invoker, "_acting_for", None)
    assert invoker.adopt(euid=0) == invoker.InvokingUser("cdtest", UID, GID, str(home))
    assert Host.current().home == str(home) and os.environ["USER"] == "cdtest"
    assert state_dir() == home / ".local" / "state" / "cachedoctor"


# --- run by sudo: the real CLI as root, acting for a user ----------------------------------------


@pytest.fixture
def sudo_run(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A home of uid 4242 and the environment sudo gives root (sudo's env_reset: root's HOME,
    USER root, no XDG folders), plus SUDO_USER/SUDO_UID/SUDO_GID."""
    home, root_home, root = tmp_path / "home", tmp_path / "roothome", tmp_path / "system"
    home.mkdir()
    root_home.mkdir()
    passwd(root, home)
    keep = ("PATH", "LANG", "PYTHONPATH", "SHELL", "CACHEDOCTOR_NO_SHELL", "CRONTAB_DOUBLE_SPOOL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(HOME=str(root_home), USER="root", LOGNAME="root", SUDO_USER="cdtest",
               SUDO_UID=str(UID), SUDO_GID=str(GID), CACHEDOCTOR_SYSTEM_ROOT=str(root))
    yield {"home": home, "root_home": root_home, "root": root, "env": env}


def run_as_sudo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.skipif(not IS_ROOT, reason="sudo runs cachedoctor as root")
def test_sudo_move_and_restore_keep_the_users_home_state_and_ownership(
        sudo_run: dict[str, Any], tmp_path: Path) -> None:
    home, root_home, env = sudo_run["home"], sudo_run["root_home"], sudo_run["env"]
    chromium_cache(home)
    dest = tmp_path / "dest"
    dest.mkdir()
    for path in (home, dest):
        subprocess.run(["chown", "-R", f"{UID}:{GID}", str(path)], check=True)
    moved = run_as_sudo(env, "move", "chromium", str(dest), "--method", "policy", "--yes", "--json")
    assert moved.returncode == 0, moved.stderr
    policy = sudo_run["root"] / POLICY
    assert json.loads(policy.read_text()) == {"DiskCacheDir": str(dest / "chromium")}
    assert os.stat(policy).st_uid == 0  # the one file that is root's
    assert owners(root_home) == {".": 0}  # nothing of the user's went to root's home
    state = home / ".local" / "state" / "cachedoctor"
    assert (state / "relocations.json").is_file()
    assert set(owners(home).values()) == {UID}, owners(home)  # state, history, locks: theirs
    assert set(owners(dest).values()) == {UID}, owners(dest)  # the moved cache too
    history = run_as_sudo(env, "history", "--json")
    assert [c["kind"] for c in result_of(history)["changes"]] == ["policy"]
    back = run_as_sudo(env, "restore", "chromium", "--yes")
    assert back.returncode == 0, back.stderr
    assert not policy.exists()
    assert (home / ".cache" / "chromium" / "Default" / "Cache" / "Cache_Data" / "data_0").is_file()
    assert set(owners(home).values()) == {UID}, owners(home)
    assert owners(root_home) == {".": 0}


@pytest.mark.parametrize(("change", "message"), [
    ({"SUDO_UID": "1000"}, "SUDO_UID=1000 does not match the passwd entry of SUDO_USER=cdtest"),
    ({"SUDO_USER": "ghost"}, "SUDO_USER=ghost is not a user of this system"),
])
@pytest.mark.skipif(not IS_ROOT, reason="sudo runs cachedoctor as root")
def test_inconsistent_sudo_variables_are_refused(sudo_run: dict[str, Any], change: dict[str, str],
                                                 message: str) -> None:
    done = run_as_sudo({**sudo_run["env"], **change}, "history", "--json")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    [error] = envelope_of(done.stdout)["errors"]
    assert error["code"] == 2 and message in error["message"]
    assert owners(sudo_run["root_home"]) == {".": 0} and owners(sudo_run["home"]) == {".": 0}


@pytest.mark.skipif(not IS_ROOT, reason="giving files to another user needs root")
def test_a_hard_link_planted_in_the_state_folder_is_not_given_away(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor import invoker

    home, elsewhere = tmp_path / "home", tmp_path / "etc"
    state = home / ".local" / "state" / "cachedoctor"
    state.mkdir(parents=True)
    elsewhere.mkdir()
    os.chown(home, UID, GID)
    secret = elsewhere / "shadow"
    secret.write_text("root's")
    os.link(secret, state / "planted")  # what a user could link there to be given it
    (state / "history.sqlite").write_text("made by this run")
    monkeypatch.setattr(invoker, "_acting_for", invoker.InvokingUser("cdtest", UID, GID, str(home)))
    invoker.give_back_tree(state)
    assert (state / "history.sqlite").stat().st_uid == UID and state.stat().st_uid == UID
    assert secret.stat().st_uid == 0


@pytest.mark.skipif(not IS_ROOT, reason="giving files to another user needs root")
def test_giving_back_never_walks_through_a_link_out_of_the_state_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor import invoker

    home, elsewhere = tmp_path / "home", tmp_path / "etc"
    state = home / ".local" / "state" / "cachedoctor"
    state.mkdir(parents=True)
    elsewhere.mkdir()
    os.chown(home, UID, GID)
    (elsewhere / "passwd").write_text("root's")
    (state / "journal").symlink_to(elsewhere)  # a folder of the state swapped for a link
    monkeypatch.setattr(invoker, "_acting_for", invoker.InvokingUser("cdtest", UID, GID, str(home)))
    invoker.give_back_tree(state)
    assert (elsewhere / "passwd").stat().st_uid == 0 and elsewhere.stat().st_uid == 0
    assert (state / "journal").lstat().st_uid == UID  # the link itself is the user's
