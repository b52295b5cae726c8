"""Which drive or mount a path lives on, with its filesystem type, options and free space."""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class DriveInfo:
    mount: str
    device: str
    fstype: str
    options: tuple[str, ...]
    free_bytes: int
    total_bytes: int

    def to_json(self) -> dict[str, object]:
        return {
            "mount": self.mount,
            "device": self.device,
            "fstype": self.fstype,
            "options": list(self.options),
            "free_bytes": self.free_bytes,
            "total_bytes": self.total_bytes,
        }


Mount = tuple[str, str, str, tuple[str, ...]]  # (mount point, device, fs type, options)


@lru_cache(maxsize=1)
def partitions() -> tuple[Mount, ...]:
    if os.path.exists("/proc/self/mounts"):  # Linux: read directly, psutil costs start-up time
        with open("/proc/self/mounts", encoding="utf-8", errors="surrogateescape") as fh:
            return parse_proc_mounts(fh.read())
    import psutil

    parts = psutil.disk_partitions(all=True)
    return tuple((p.mountpoint, p.device, p.fstype, tuple(p.opts.split(","))) for p in parts)


def parse_proc_mounts(text: str) -> tuple[Mount, ...]:
    """Parse /proc/self/mounts (fstab format; spaces in paths are written as \\040)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4:
            device, mountpoint, fstype, options = (_unescape(f) for f in fields[:4])
            mounts.append((mountpoint, device, fstype, tuple(options.split(","))))
    return tuple(mounts)


def mount_aliases(path: str) -> list[str]:
    """The other paths the folder `path` (a real path) can be reached under on this machine:
    bind mounts of it, of a folder above it, or of folders inside it (Linux; elsewhere none)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
            return aliases_in(path, fh.read())
    except OSError:
        return []


def aliases_in(path: str, mountinfo: str) -> list[str]:
    """Pure: the aliases of `path` given /proc/self/mountinfo's text (proc(5): fields 3-5 are
    the filesystem's major:minor, the mount's root inside that filesystem, its mount point).
    Two mounts with the same major:minor show the same filesystem; a mount whose root holds
    the folder's own path inside the filesystem shows the folder again."""
    entries: list[tuple[str, str, str]] = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            entries.append((fields[2], _unescape(fields[3]), _unescape(fields[4])))
    holders = [e for e in entries if _is_under(path, e[2])]
    if not holders:
        return []
    dev, root, point = max(holders, key=lambda e: len(e[2]))
    inside = posixpath.join(root, posixpath.relpath(path, point))
    out: list[str] = []
    for other_dev, other_root, other_point in entries:
        if other_dev != dev or other_point == point:
            continue
        if _is_under(inside, other_root):
            out.append(posixpath.normpath(
                posixpath.join(other_point, posixpath.relpath(inside, other_root))))
        elif _is_under(other_root, inside):
            out.append(other_point)
    return sorted(set(out) - {path})


def _is_under(path: str, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    return path == folder or path.startswith(folder + "/") or folder == "/"


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def nearest_existing(path: str) -> str:
    """`path` itself or its closest existing parent (a cache that doesn't exist yet still has a drive)."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def mount_point(path: str) -> str:
    """The mount point holding `path`, found by walking up to a change of device (no link following
    for the last component)."""
    current = nearest_existing(path)
    if os.path.islink(current):
        current = os.path.dirname(current)
    current = os.path.realpath(current)
    while not os.path.ismount(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def drive_of(path: str) -> DriveInfo | None:
    """The drive holding `path` (or the parent it would be created in); None if unknowable."""
    mount = mount_point(path)
    device, fstype = "", ""
    options: tuple[str, ...] = ()
    best = -1
    for (
        mountpoint,
        dev,
        fs,
        opts,
    ) in partitions():  # the last mount on a point wins, as in the kernel
        if os.path.normcase(mountpoint) == os.path.normcase(mount) and len(mountpoint) >= best:
            device, fstype, options, best = dev, fs, opts, len(mountpoint)
    try:
        usage = shutil.disk_usage(mount)
    except OSError:
        return None
    return DriveInfo(mount, device, fstype, options, usage.free, usage.total)


def same_filesystem(a: str, b: str) -> bool:
    return os.stat(nearest_existing(a)).st_dev == os.stat(nearest_existing(b)).st_dev
