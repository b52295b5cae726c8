"""Shared fixtures. Every test runs with its own HOME and XDG folders and with the scheduler
doubles of tests/doubles/sandbox-bin first on PATH (`crontab` with a private spool, `systemctl`
and `launchctl` that reach no manager, `sudo` that grants nothing unless a test gives it a
sandbox), so nothing a test does (state, config, shell files, crontab, timers, root's steps)
can touch the real user's files or jobs. A suite started with sudo does not pass sudo's
variables on: cachedoctor would note whose caches a root run sees (cachedoctor.invoker). As root on Linux
the whole session runs in a private mount namespace (see pytest_configure), so nothing a test
mounts reaches the machine's mount table either."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import realfs as _realfs
from tests.realfs import (  # noqa: F401 - fixtures, registered by being here
    drvfs_mnt_d,
    make_realfs,
    realfs,
    realfs_btrfs,
    realfs_drvfs,
    realfs_exfat,
    realfs_ext4,
    realfs_ntfs,
    realfs_tmpfs,
    realfs_xfs,
)

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
IS_LINUX = sys.platform.startswith("linux")
IS_MACOS = sys.platform == "darwin"
IS_WINDOWS = sys.platform == "win32"

# Tests that mount: they run only as root on Linux, inside the session's private mount namespace
# (pytest_runtest_setup below skips them otherwise, with the reason).
needs_root = pytest.mark.root
needs_linux = pytest.mark.skipif(not IS_LINUX, reason="Linux-only facility (du, mounts, crontab)")
needs_du = pytest.mark.skipif(
    shutil.which("du") is None or not IS_LINUX,
    reason="needs GNU du as the oracle (BSD du has no -B1, -b or --inodes)",
)
# Creating a symlink on Windows needs admin rights or Developer Mode; macOS and Linux just work.
needs_symlinks = pytest.mark.skipif(
    IS_WINDOWS, reason="creating symlinks on Windows needs admin rights or Developer Mode"
)
# Tests that drive the core with a hand-built Linux (or macOS) Host over real temp folders: on
# Windows those folders are drive paths (C:\...), which no POSIX Host can resolve.
needs_posix_paths = pytest.mark.skipif(
    IS_WINDOWS, reason="uses a POSIX Host over real temp paths; Windows temp paths are drive paths"
)
needs_posix_sh = pytest.mark.skipif(
    IS_WINDOWS or shutil.which("sh") is None, reason="needs a POSIX sh"
)


def pytest_configure(config: pytest.Config) -> None:
    """As root on Linux, move this process into a private mount namespace before any test runs:
    every mount a test makes (tmpfs, loop images, FUSE, /mnt/d), in this process or a child,
    stays out of the machine's mount table and vanishes with the session. pytest is still
    single-threaded here, which unshare(CLONE_NEWNS) needs (it moves the calling thread only)."""
    if IS_ROOT and IS_LINUX:
        _realfs.enter_private_mount_namespace()


def mount_skip_reason() -> str | None:
    """Why this session may not mount anything, or None when it may."""
    if not IS_LINUX:
        return "mounts filesystems: Linux only"
    if not IS_ROOT:
        return "needs root on Linux to mount filesystems"
    if not _realfs.ISOLATION.isolated:
        return f"no private mount namespace, so no mounts: {_realfs.ISOLATION.reason}"
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked `os_doubles("windows", "macos")` runs every test natively and through
    each OS double (tests/doubles): ids test_x[native], test_x[windows], test_x[macos]."""
    marker = metafunc.definition.get_closest_marker("os_doubles")
    if marker is not None:
        metafunc.parametrize("os_seam", ["native", *marker.args], indirect=True)


@pytest.fixture(autouse=True)
def os_seam(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The tree layer's OS seam for this test: the native one, or (parametrized by
    `os_doubles`) a double, yielded as its API (`native_only(reason, kinds=...)` skips a test there)."""
    kind = getattr(request, "param", "native")
    if kind == "native":
        yield None
        return
    if not IS_LINUX:
        pytest.skip("the OS doubles run over a Linux tree; this job runs the real OS")
    only = request.node.get_closest_marker("native_only")
    if only is not None and kind in only.kwargs.get("kinds", (kind,)):
        pytest.skip(f"not through the {kind} double: {only.args[0]}")
    from tests import doubles

    with doubles.installed(kind, tmp_path_factory.mktemp(f"{kind}-double"), monkeypatch) as api:
        yield api


@pytest.fixture
def windows_double(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The Windows double under the tree layer (tests/doubles/windows.py), here and in the CLI."""
    from tests import doubles

    if not IS_LINUX:
        pytest.skip("the OS doubles run over a Linux tree; this job runs the real OS")

    with doubles.installed("windows", tmp_path_factory.mktemp("windows-double"), monkeypatch) as api:
        yield api


@pytest.fixture
def macos_double(tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The macOS double under the tree layer (tests/doubles/macos.py), here and in the CLI."""
    from tests import doubles

    if not IS_LINUX:
        pytest.skip("the OS doubles run over a Linux tree; this job runs the real OS")

    with doubles.installed("macos", tmp_path_factory.mktemp("macos-double"), monkeypatch) as api:
        yield api


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("root") is not None:
        reason = mount_skip_reason()
        if reason:
            pytest.skip(reason)


def user_cache_root(home: Path) -> Path:
    """Where this OS keeps per-user caches (what profiles write as `${XDG_CACHE_HOME:-~/.cache}`,
    `~/Library/Caches` and `%LOCALAPPDATA%`), inside the test's isolated home."""
    if IS_WINDOWS:
        return home / "AppData" / "Local"
    if IS_MACOS:
        return home / "Library" / "Caches"
    return home / ".cache"


SANDBOX_BIN = Path(__file__).resolve().parent / "doubles" / "sandbox-bin"


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))
    for var, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
    ):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.delenv("CACHEDOCTOR_PROFILES_DIR", raising=False)
    for var in ("SUDO_USER", "SUDO_UID", "SUDO_GID", "SUDO_DOUBLE_ROOT", "SUDO_DOUBLE_LOG"):
        monkeypatch.delenv(var, raising=False)
    if not IS_WINDOWS:  # the doubles are scripts; Windows has no cron, systemd or launchd
        monkeypatch.setenv("PATH", f"{SANDBOX_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("CRONTAB_DOUBLE_SPOOL", str(tmp_path_factory.mktemp("crontabs")))
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # no user manager's bus either
    # The login shell decides which start-up files a new session reads and which get
    # cachedoctor's block: plain sh for every test, whatever the developer's own shell, and
    # the start-up files are only read (a real login shell would also run /etc/profile).
    # Tests of the login shell itself unset CACHEDOCTOR_NO_SHELL and name their shell.
    monkeypatch.setenv("SHELL", "/bin/sh")
    monkeypatch.setenv("CACHEDOCTOR_NO_SHELL", "1")
    monkeypatch.setattr("cachedoctor.locate.loginshell.passwd_entry", lambda: ("/bin/sh", "/nonexistent"))
    if IS_WINDOWS:  # pragma: no cover
        local, roaming = home / "AppData" / "Local", home / "AppData" / "Roaming"
        temp = local / "Temp"
        temp.mkdir(parents=True)
        monkeypatch.setenv("LOCALAPPDATA", str(local))
        monkeypatch.setenv("APPDATA", str(roaming))
        # platformdirs asks the shell API (not the variables above) for these folders; these
        # overrides make it use the isolated ones, so state/config/history stay per test.
        monkeypatch.setenv("WIN_PD_OVERRIDE_LOCAL_APPDATA", str(local))
        monkeypatch.setenv("WIN_PD_OVERRIDE_APPDATA", str(roaming))
        # %TEMP% is a user cache root on Windows (scan lists what is unclaimed there): keep the
        # runner's real temp folder, which holds pytest's own folders, out of it.
        monkeypatch.setenv("TEMP", str(temp))
        monkeypatch.setenv("TMP", str(temp))
    return home


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real, separate, small filesystem (8 MiB tmpfs): a second drive with real ENOSPC."""
    reason = mount_skip_reason()
    if reason:
        pytest.skip(reason)
    mount = tmp_path / "drive"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def no_uses(folders: object) -> object:
    """An in-use check that finds nobody (for plans whose subject is not process detection)."""
    from cachedoctor.inuse import UseReport

    return UseReport()


def run_cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess (with the test's environment) and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "cachedoctor", *args],
        capture_output=True,
        text=True,
        input=input,
        env=os.environ.copy(),
        timeout=300,
    )


def envelope_of(stdout: str) -> dict[str, Any]:
    """The one JSON document a `--json` run prints (docs/json.md), checked against the envelope
    schema and its command's result schema (cachedoctor/schemas)."""
    document = json.loads(stdout)
    assert isinstance(document, dict), document
    assert set(document) == {"schema", "ok", "result", "warnings", "errors"}, sorted(document)
    assert document["schema"].startswith("cachedoctor."), document["schema"]
    from tests.jsonschemas import check_envelope

    check_envelope(document)  # every --json output a test reads is checked against its schema
    return document


def result_of(run: subprocess.CompletedProcess[str] | str) -> Any:
    """The `result` of a `--json` run's envelope."""
    stdout = run if isinstance(run, str) else run.stdout
    assert stdout, run if isinstance(run, str) else run.stderr
    return envelope_of(stdout)["result"]


def trash_files_dir() -> Path:
    """Where `clean --trash` puts this test's files: the home trash of the isolated HOME
    (cachedoctor reads XDG_DATA_HOME when it trashes, not at import, unlike send2trash)."""
    if IS_MACOS:
        return Path(os.environ["HOME"]) / ".Trash"
    return Path(os.environ["XDG_DATA_HOME"]) / "Trash" / "files"


def profile_json(profile: object) -> str:
    """A loaded profile as the JSON text of a profile file that loads back to it: the plain
    data of its structs, without the values left unset and the settings' internal tag."""
    import msgspec

    from cachedoctor.profiles.model import SETTING_TAG

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items() if v is not None and k != SETTING_TAG}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return json.dumps(plain(msgspec.to_builtins(profile)), separators=(",", ":"))


def kill_the_first_worker(monkeypatch: pytest.MonkeyPatch, marker: Path) -> None:
    """The first forked worker of a walk (`fs.walk.TreeWalk._worker`) dies without a result,
    leaving `marker`; the others work: the parent must walk the dead one's share itself."""
    from cachedoctor.fs.walk import TreeWalk

    real = TreeWalk._worker

    def flaky(*args: Any, **kwargs: Any) -> int:
        try:  # runs in the forked children: the first to get here dies
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return real(*args, **kwargs)
        os._exit(3)

    monkeypatch.setattr(TreeWalk, "_worker", flaky)


def choose_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                compiled_loop: str) -> str:
    """For a fixture parametrised over ["compiled", "python"]: the per-folder loop a test's
    in-process walks use. `compiled_loop` names the seam's method (`folder_counter`,
    `folder_lister`); "python" makes it None, "compiled" skips where it is not built."""
    from cachedoctor.fs import seam

    if request.param == "python":
        monkeypatch.setattr(type(seam.current()), compiled_loop, lambda self: None)
    elif getattr(seam.current(), compiled_loop)() is None:
        pytest.skip("the compiled loop is not built here "
                    "(tests/test_walker_native.py::test_compiled_loop_is_built says why)")
    return str(request.param)
