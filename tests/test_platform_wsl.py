"""WSL 2 on Linux: the detection (interop, WSL_DISTRO_NAME, not the kernel string), drive
letters through a wslpath double (tests/doubles/bin/wslpath) and the mount table, and the move
itself onto the DrvFs stand-in mounted at /mnt/d with source `D:\\` (tests/realfs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor import drives, host
from cachedoctor.errors import UserInputError
from cachedoctor.host import Host
from cachedoctor.resolve import to_host_path
from tests.conftest import IS_LINUX
from tests.doubles import SITE

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="WSL is Linux")

DOUBLE_BIN = SITE.parent / "bin"
WSL = Host("wsl", {"WSL_DISTRO_NAME": "Ubuntu"}, "/home/ann")

# /proc/self/mounts lines as WSL writes them (docs/filesystems.md, learn.microsoft.com/windows/wsl)
WSL2_MOUNTS = ("C:\\134 /mnt/c 9p rw,dirsync,noatime,aname=drvfs;path=C:\\;uid=1000;gid=1000 0 0\n"
               "/dev/sdc / ext4 rw,relatime,discard 0 0\n")
WSL1_MOUNTS = "C: /mnt/c drvfs rw,noatime,uid=1000,gid=1000 0 0\n"


@pytest.fixture
def wsl_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process and the CLI it starts see WSL: WSL_DISTRO_NAME, the wslpath double first on
    PATH, and system files (/etc/wsl.conf) below a root of the test's own."""
    root = tmp_path / "sysroot"
    (root / "etc").mkdir(parents=True)
    monkeypatch.setenv("WSL_DISTRO_NAME", "Ubuntu")
    monkeypatch.setenv("PATH", f"{DOUBLE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    drives.partitions.cache_clear()
    return root


def test_wsl_is_its_interop_or_its_distro_name_not_the_kernel_string(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interop = tmp_path / "WSLInterop-late"
    monkeypatch.setattr(host, "WSL_INTEROP", (str(tmp_path / "WSLInterop"), str(interop)))
    assert not host.is_wsl({})  # a Docker Desktop container: "microsoft" kernel, no interop
    interop.write_text("enabled\n")
    assert host.is_wsl({})
    interop.unlink()
    assert host.is_wsl({"WSL_DISTRO_NAME": "Debian"})


def test_the_windows_users_folders_as_wsl_sees_them() -> None:
    path = "/usr/bin:/mnt/c/Users/Ann Lee/AppData/Local/Microsoft/WindowsApps:/mnt/c/Windows"
    side = host.windows_side({"PATH": path})
    assert side == {"WSL_WIN_USERPROFILE": "/mnt/c/Users/Ann Lee",
                    "WSL_WIN_LOCALAPPDATA": "/mnt/c/Users/Ann Lee/AppData/Local",
                    "WSL_WIN_APPDATA": "/mnt/c/Users/Ann Lee/AppData/Roaming",
                    "WSL_WIN_TEMP": "/mnt/c/Users/Ann Lee/AppData/Local/Temp"}
    passed = host.windows_side({"USERPROFILE": "/d/Users/ann", "LOCALAPPDATA": "/d/L"})
    assert passed["WSL_WIN_LOCALAPPDATA"] == "/d/L" and passed["WSL_WIN_TEMP"] == "/d/L/Temp"
    assert host.windows_side({"PATH": "/usr/bin", "USERPROFILE": "C:\\Users\\ann"}) == {}


def test_scan_looks_at_the_windows_side_caches_too(tmp_path: Path) -> None:
    from cachedoctor.scan import unclaimed_candidates

    local = tmp_path / "Users" / "ann" / "AppData" / "Local"
    (local / "SomeTool" / "cache").mkdir(parents=True)
    (local / "Temp" / "junk").mkdir(parents=True)
    wsl = Host("wsl", {"WSL_DISTRO_NAME": "Ubuntu", "XDG_CACHE_HOME": str(tmp_path / "c"),
                       **host.windows_side({"USERPROFILE": str(tmp_path / "Users" / "ann")})},
               str(tmp_path))
    found = unclaimed_candidates([], wsl)
    assert str(local / "SomeTool") in found and str(local / "Temp" / "junk") in found


def test_drive_letters_in_the_mount_table() -> None:
    assert drives.drvfs_mounts(drives.parse_proc_mounts(WSL2_MOUNTS)) == {"C": "/mnt/c"}
    assert drives.drvfs_mounts(drives.parse_proc_mounts(WSL1_MOUNTS)) == {"C": "/mnt/c"}
    assert drives.automount_root("[automount]\nroot = /\n") == "/"
    assert drives.automount_root("[automount]\nenabled=false\n") == "/mnt/"
    assert drives.automount_root(None) == "/mnt/"


def test_wslpath_honours_automount_root_and_a_drive_not_mounted_is_refused(
        wsl_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (wsl_env / "etc" / "wsl.conf").write_text("[automount]\nroot = /\n")
    table = drives.parse_proc_mounts("D:\\134 /d 9p rw,aname=drvfs;path=D:\\ 0 0\n"
                                     "E:\\134 /mnt/e 9p rw,aname=drvfs;path=E:\\ 0 0\n")
    monkeypatch.setattr(drives, "partitions", lambda: table)
    assert to_host_path(r"D:\ai-cache", WSL) == "/d/ai-cache"  # wslpath: root = /
    with pytest.raises(UserInputError, match="E: is not mounted"):  # wslpath says /e, nothing there
        to_host_path(r"E:\x", WSL)
    with pytest.raises(UserInputError, match="F: is not mounted") as refused:
        to_host_path("F:/x", WSL)
    assert "/f" in str(refused.value)  # the hint says where WSL would mount it


def test_without_wslpath_the_mount_table_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drives, "wslpath", lambda text: None)
    monkeypatch.setattr(drives, "partitions", lambda: drives.parse_proc_mounts(WSL2_MOUNTS))
    assert to_host_path(r"C:\Users\ann\x", WSL) == "/mnt/c/Users/ann/x"
    with pytest.raises(UserInputError, match="D: is not mounted"):
        to_host_path(r"D:\ai-cache", WSL)


def test_an_unquoted_windows_path_is_caught_on_wsl() -> None:
    """In bash, D:\\ai-cache without quotes arrives as D:ai-cache."""
    with pytest.raises(UserInputError, match="quote the path") as caught:
        to_host_path("D:ai-cache", WSL)
    assert "D:\\ai-cache" in str(caught.value)
    assert to_host_path("D:ai-cache", Host("linux", {}, "/home/ann")) == "D:ai-cache"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args], capture_output=True,
                          text=True, env=os.environ.copy(), timeout=300)


def test_move_to_d_on_the_drvfs_stand_in_and_back(drvfs_mnt_d: object, wsl_env: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 isolated_home: Path) -> None:
    """`cachedoctor move foo 'D:\\ai-cache'` in WSL: D: is the DrvFs mount at /mnt/d (all modes
    0777, chmod ignored). The move says permissions will not survive and verifies only what
    the drive holds (before: "the copy did not match ... mode 0o755 != 0o777")."""
    from tests.test_move import write_profile
    from tests.test_relocate_copy import build_tree

    write_profile(tmp_path / "profiles")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(tmp_path / "profiles"))
    cache = isolated_home / ".cache" / "foo"
    build_tree(cache)
    moved = cli("move", "foo", "D:\\ai-cache", "--yes")
    assert moved.returncode == 0, moved.stderr
    assert "permissions are not kept on /mnt/d/ai-cache" in moved.stderr
    assert os.path.realpath(cache) == "/mnt/d/ai-cache/foo"
    assert (cache / "blobs" / "sha-2").read_text() == "config\n"
    typo = cli("move", "foo", "D:ai-cache", "--yes")
    assert typo.returncode == 2 and "quote the path" in typo.stderr
    back = cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    assert not cache.is_symlink() and (cache / "exec.sh").stat().st_mode & 0o777 != 0o777
    assert not os.path.lexists("/mnt/d/ai-cache")  # the move made it: the restore takes it away
