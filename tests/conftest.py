"""Shared fixtures. Every test runs with its own HOME and XDG folders, so nothing a test does
(state, config, shell files, crontab aside) can touch the real user's files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
IS_LINUX = sys.platform.startswith("linux")

needs_root = pytest.mark.skipif(
    not (IS_ROOT and IS_LINUX), reason="needs root on Linux to mount a tmpfs"
)
needs_linux = pytest.mark.skipif(not IS_LINUX, reason="Linux-only facility (du, mounts, crontab)")
needs_du = pytest.mark.skipif(
    shutil.which("du") is None or not IS_LINUX, reason="needs GNU du as the oracle"
)


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
    if sys.platform == "win32":  # pragma: no cover
        monkeypatch.setenv("LOCALAPPDATA", str(home / "AppData" / "Local"))
        monkeypatch.setenv("APPDATA", str(home / "AppData" / "Roaming"))
    return home


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real, separate, small filesystem (8 MiB tmpfs): a second drive with real ENOSPC."""
    if not (IS_ROOT and IS_LINUX):
        pytest.skip("needs root on Linux to mount a tmpfs")
    mount = tmp_path / "drive"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


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
