"""The one root step of a user's run (issue 15): a policy file in /etc written through sudo.

The move, tune or restore is planned and run as the user; writing (or removing) the policy file
goes through sudo, shown in the plan first. sudo is the double in tests/doubles/sandbox-bin,
granted a sandbox with SUDO_DOUBLE_ROOT.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX, result_of

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="sudo and /etc policy files are Linux's")

POLICY = "etc/chromium/policies/managed/cachedoctor.json"


def chromium_cache(home: Path) -> Path:
    cache = home / ".cache" / "chromium" / "Default" / "Cache" / "Cache_Data"
    cache.mkdir(parents=True)
    (cache / "data_0").write_bytes(os.urandom(3000))
    return cache


# --- run by the user: only the policy file goes through sudo -----------------------------------


@pytest.fixture
def unwritable_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A system root whose /etc this user may not write (as for a user without root: the tests
    may run as root, who may write anything, so the permission probe says no for it)."""
    from cachedoctor import rootfiles
    from cachedoctor.cli.common import OPTIONS

    monkeypatch.setattr(OPTIONS, "_profiles", None)  # the CLI runs in this process: load anew
    root = tmp_path / "system"
    (root / "etc").mkdir(parents=True)
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    real = rootfiles.may_write
    monkeypatch.setattr(rootfiles, "may_write",
                        lambda folder: not folder.startswith(str(root / "etc")) and real(folder))
    return root


def grant_sudo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *roots: Path) -> Path:
    log = tmp_path / "sudo.log"
    monkeypatch.setenv("SUDO_DOUBLE_ROOT", os.pathsep.join(map(str, roots)))
    monkeypatch.setenv("SUDO_DOUBLE_LOG", str(log))
    return log


def sudo_calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [json.loads(line)["argv"] for line in log.read_text().splitlines()]


def test_policy_method_without_root_plans_the_sudo_step_instead_of_refusing(
        unwritable_policy: Path, isolated_home: Path) -> None:
    from cachedoctor.host import Host
    from cachedoctor.relocate import policy

    host = Host.current()
    file = str(unwritable_policy / POLICY)
    policy.check_supported(host, "chromium")  # was: "needs root: run the same command with sudo"
    lines = policy.describe("chromium", "DiskCacheDir", "/d/chromium", host)
    staged = isolated_home / ".local" / "state" / "cachedoctor" / "staged"
    assert lines[0] == f"write DiskCacheDir = '/d/chromium' into {file}"
    assert f"`sudo install -D -m 0644 {staged}/" in lines[1]
    assert f"sudo mv -f {file}.cachedoctor-new {file}`" in lines[1]
    assert f"`sudo rm -f -- {file}.cachedoctor-new {file}`" in lines[1]


def test_policy_method_without_sudo_is_refused_before_anything_changes(
        unwritable_policy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.errors import RefusedError
    from cachedoctor.host import Host
    from cachedoctor.relocate import policy

    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RefusedError, match="needs root, and sudo was not found") as refused:
        policy.check_supported(Host.current(), "chromium")
    assert refused.value.hint == "run the same command as root, or use --method link"


def test_policy_move_and_restore_run_only_the_file_steps_through_sudo(
        unwritable_policy: Path, isolated_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from cachedoctor.cli.app import run

    log = grant_sudo(monkeypatch, tmp_path, unwritable_policy, isolated_home)
    chromium_cache(isolated_home)
    dest = tmp_path / "dest"
    assert run(["move", "chromium", str(dest), "--method", "policy", "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "by sudo (it may ask for your password): `sudo install -D -m 0644" in plan
    assert sudo_calls(log) == []  # a dry run runs nothing
    assert run(["move", "chromium", str(dest), "--method", "policy", "--yes"]) == 0, capsys.readouterr().err
    file = str(unwritable_policy / POLICY)
    staged = isolated_home / ".local" / "state" / "cachedoctor" / "staged"
    [install, rename] = sudo_calls(log)
    assert install[:4] == ["install", "-D", "-m", "0644"] and install[4].startswith(f"{staged}/")
    assert install[5:] == [file + ".cachedoctor-new"]
    assert rename == ["mv", "-f", file + ".cachedoctor-new", file]
    assert json.loads(Path(file).read_text()) == {"DiskCacheDir": str(dest / "chromium")}
    assert list(staged.iterdir()) == []  # the staged copy is gone
    log.unlink()
    assert run(["restore", "chromium", "--yes"]) == 0, capsys.readouterr().err
    assert sudo_calls(log) == [["rm", "-f", "--", file + ".cachedoctor-new", file]]
    assert not os.path.exists(file)
    assert (isolated_home / ".cache" / "chromium" / "Default" / "Cache" / "Cache_Data" / "data_0").is_file()


def test_a_refused_sudo_step_rolls_the_move_back(
        unwritable_policy: Path, isolated_home: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from cachedoctor.cli.app import run
    from cachedoctor.relocate.journal import pending_operations

    cache = chromium_cache(isolated_home)
    before = (cache / "data_0").read_bytes()
    code = run(["move", "chromium", str(tmp_path / "dest"), "--method", "policy", "--yes"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "sudo install -D -m 0644" in err and "a password is required" in err
    assert "rolled back" in err
    assert (cache / "data_0").read_bytes() == before
    assert not (unwritable_policy / POLICY).exists() and pending_operations() == []


def test_tune_of_a_root_policy_file_goes_through_sudo_and_its_undo_too(
        unwritable_policy: Path, isolated_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from cachedoctor.cli.app import run

    log = grant_sudo(monkeypatch, tmp_path, unwritable_policy, isolated_home)
    file = str(unwritable_policy / POLICY)
    assert run(["tune", "chromium", "--dry-run", "--json"]) == 0
    planned = result_of(capsys.readouterr().out)
    [command] = planned["sudo"]
    assert command.startswith("sudo install -D -m 0644 ") and command.endswith(f"sudo mv -f {file}.cachedoctor-new {file}")
    assert run(["tune", "chromium", "--yes"]) == 0, capsys.readouterr().err
    assert [argv[0] for argv in sudo_calls(log)] == ["install", "mv"]
    assert json.loads(Path(file).read_text()) == {"DiskCacheSize": 2147483647}
    log.unlink()
    assert run(["tune", "chromium", "--undo", "--yes"]) == 0, capsys.readouterr().err
    assert sudo_calls(log) == [["rm", "-f", "--", file + ".cachedoctor-new", file]]
    assert not os.path.exists(file)


def test_the_sudo_double_grants_nothing_outside_its_sandbox(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    sudo = shutil.which("sudo")
    assert sudo is not None and "sandbox-bin" in sudo
    denied = subprocess.run(["sudo", "-n", "true"], capture_output=True, text=True)
    assert denied.returncode == 1 and "a password is required" in denied.stderr
    grant_sudo(monkeypatch, tmp_path, tmp_path / "box")
    outside = subprocess.run(["sudo", "rm", "-f", "--", "/etc/hostname"], capture_output=True, text=True)
    assert outside.returncode != 0 and "outside the sandbox" in outside.stderr


def test_a_move_failing_between_the_sudo_commands_rolls_back_and_leaves_nothing_in_etc(
        unwritable_policy: Path, isolated_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from cachedoctor.cli.app import run
    from cachedoctor.relocate.journal import pending_operations

    log = grant_sudo(monkeypatch, tmp_path, unwritable_policy, isolated_home)
    cache = chromium_cache(isolated_home)
    monkeypatch.setenv("CACHEDOCTOR_FAULT_AT", "sudo-mv:raise")  # installed, not yet renamed
    code = run(["move", "chromium", str(tmp_path / "dest"), "--method", "policy", "--yes"])
    assert code == 1, capsys.readouterr().err
    file = str(unwritable_policy / POLICY)
    assert [argv[0] for argv in sudo_calls(log)] == ["install", "rm"]
    assert not os.path.lexists(file) and not os.path.lexists(file + ".cachedoctor-new")
    assert (cache / "data_0").is_file() and pending_operations() == []


def test_at_a_terminal_sudo_asks_for_the_password_before_the_copy_and_a_refusal_changes_nothing(
        unwritable_policy: Path, isolated_home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`sudo -v` runs before the progress line takes the terminal (it would draw over sudo's
    prompt); without a terminal nothing is asked ahead (sudo -n at the step, tests above)."""
    from cachedoctor import rootfiles
    from cachedoctor.cli.app import run

    monkeypatch.setattr(rootfiles, "_has_terminal", lambda: True)
    cache = chromium_cache(isolated_home)
    log = tmp_path / "sudo.log"
    monkeypatch.setenv("SUDO_DOUBLE_LOG", str(log))  # not granted: the password is refused
    code = run(["move", "chromium", str(tmp_path / "dest"), "--method", "policy", "--yes"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "sudo did not allow writing" in err and "nothing was changed" in err
    assert sudo_calls(log) == [["-v"]]  # asked once, before anything else
    assert (cache / "data_0").is_file() and not (tmp_path / "dest").exists()
    log.unlink()
    grant_sudo(monkeypatch, tmp_path, unwritable_policy, isolated_home)
    assert run(["move", "chromium", str(tmp_path / "dest"), "--method", "policy", "--yes"]) == 0
    assert [argv[0] for argv in sudo_calls(log)] == ["-v", "install", "mv"]


def test_only_the_policy_method_names_root_files() -> None:
    from cachedoctor.host import Host
    from cachedoctor.relocate.journal import Operation
    from cachedoctor.relocate.methods import METHODS

    op = Operation(id="1", kind="move", tool="chromium", location="cache", method="policy",
                   dest_root="/d", base="/d/chromium", pairs=[], settings={"browser": "chromium"})
    linux, windows = Host("linux", {}, "/home/u"), Host("windows", {}, "C:\\Users\\u")
    assert METHODS["policy"].root_files(op, linux)[0].endswith(
        "/etc/chromium/policies/managed/cachedoctor.json")
    assert METHODS["policy"].root_files(op, windows) == []  # the registry: HKCU needs no admin
    assert all(METHODS[name].root_files(op, linux) == [] for name in METHODS if name != "policy")


def test_sudo_asks_only_a_terminal_whose_foreground_this_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the background (`cachedoctor move … &`) reading the terminal would stop the job
    (SIGTTIN): there sudo runs with -n, as without a terminal."""
    from cachedoctor import rootfiles

    monkeypatch.setattr(rootfiles.os, "open", lambda *_args, **_kw: 99)
    monkeypatch.setattr(rootfiles.os, "close", lambda _fd: None)
    monkeypatch.setattr(rootfiles.os, "getpgrp", lambda: 1234)
    monkeypatch.setattr(rootfiles.os, "tcgetpgrp", lambda _fd: 1234)
    assert rootfiles._has_terminal()
    monkeypatch.setattr(rootfiles.os, "tcgetpgrp", lambda _fd: 4321)  # another job in front
    assert not rootfiles._has_terminal()
