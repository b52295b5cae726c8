"""Which mount a path is on: /proc/self/mounts parsing checked against psutil and real mounts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cachedoctor.drives import drive_of, parse_proc_mounts, partitions
from tests.conftest import IS_LINUX, needs_root


def test_parse_escaped_mount_points() -> None:
    text = "/dev/sda1 /media/my\\040disk ext4 rw,noexec,nosuid 0 0\ntmpfs /tmp tmpfs rw 0 0\n"
    assert parse_proc_mounts(text) == (
        ("/media/my disk", "/dev/sda1", "ext4", ("rw", "noexec", "nosuid")),
        ("/tmp", "tmpfs", "tmpfs", ("rw",)),
    )


@pytest.mark.skipif(not IS_LINUX, reason="/proc/self/mounts is Linux-only")
def test_mounts_agree_with_psutil() -> None:
    import psutil

    partitions.cache_clear()  # read both tables now (other tests mount and unmount)
    theirs = {(p.mountpoint, p.fstype) for p in psutil.disk_partitions(all=True)}
    ours = {(m[0], m[2]) for m in partitions()}
    assert ours == theirs


@needs_root
def test_noexec_mount_with_a_space_in_its_name(tmp_path: Path) -> None:
    mount = tmp_path / "my drive"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,noexec", "tmpfs", str(mount)], check=True)
    try:
        partitions.cache_clear()
        drive = drive_of(str(mount / "not-yet" / "created"))
        assert drive is not None
        assert drive.mount == str(mount) and drive.fstype == "tmpfs" and "noexec" in drive.options
        assert drive.total_bytes == 1024 * 1024
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        partitions.cache_clear()
    assert os.path.isdir(mount)


def test_the_mount_point_is_the_one_os_path_ismount_finds(tmp_path: Path) -> None:
    """The walk up by device and inode against `os.path.ismount` (the oracle) on this
    machine's real mounts, a link and a path that does not exist yet."""
    from cachedoctor.drives import mount_point, nearest_existing

    def by_ismount(path: str) -> str:
        current = nearest_existing(path)
        if os.path.islink(current):
            current = os.path.dirname(current)
        current = os.path.realpath(current)
        while not os.path.ismount(current) and os.path.dirname(current) != current:
            current = os.path.dirname(current)
        return current

    (tmp_path / "link").symlink_to("/proc/self")
    paths = [str(tmp_path), str(tmp_path / "link"), str(tmp_path / "not" / "yet"), "/",
             "/proc/self/fd", "/dev", "/sys/kernel", "/dev/shm", "/etc/hostname",
             *(m[0] for m in partitions()[:40])]
    for path in paths:
        assert mount_point(path) == by_ismount(path), path
