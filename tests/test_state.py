"""cachedoctor's own folders (cachedoctor.state): on Linux they are read from the XDG variables
without importing platformdirs, and must be exactly what platformdirs answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from cachedoctor import state

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the XDG folders are read on Linux only")


def platformdirs_answer() -> tuple[Path, Path, Path]:
    return (Path(platformdirs.user_config_dir(state.APP, appauthor=False)),
            Path(platformdirs.user_state_dir(state.APP, appauthor=False)),
            Path(platformdirs.user_log_dir(state.APP, appauthor=False)))


@linux_only
@pytest.mark.parametrize("home", ["/home/ana", "/home/ana/", "/", "relative/home", "", None])
@pytest.mark.parametrize("xdg", ["/srv/xdg", "relative/xdg", "", "  ", None])
def test_the_folders_are_platformdirs(monkeypatch: pytest.MonkeyPatch, home: str | None,
                                      xdg: str | None) -> None:
    for name, value in (("HOME", home), ("XDG_CONFIG_HOME", xdg), ("XDG_STATE_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    ours = (state.config_dir(), state.state_dir(), state.log_dir())
    assert ours == platformdirs_answer()
    if home in ("/home/ana", "/"):
        assert state._xdg_folder("XDG_STATE_HOME", ".local/state") is not None  # read, not asked


@linux_only
def test_android_is_left_to_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANDROID_DATA", "/data")
    assert state._xdg_folder("XDG_STATE_HOME", ".local/state") is None


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_other_systems_ask_platformdirs(monkeypatch: pytest.MonkeyPatch, platform: str) -> None:
    monkeypatch.setattr(sys, "platform", platform)
    assert state._xdg_folder("XDG_CONFIG_HOME", ".config") is None


@linux_only
def test_a_hot_command_does_not_import_platformdirs(isolated_home: Path) -> None:
    """The point of reading the folders here: `profiles list` starts without platformdirs."""
    probe = ("import sys; sys.argv = ['cachedoctor', 'profiles', 'list']\n"
             "from cachedoctor.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('platformdirs' in sys.modules, 'tempfile' in sys.modules, 'hashlib' in sys.modules)")
    for _ in range(2):  # the first run may write the index and the spec
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              env=dict(os.environ), check=True)
    assert done.stdout.splitlines()[-1] == "False False False"
