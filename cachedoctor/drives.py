"""Which drive or mount a path lives on, with its filesystem type, options and free space."""

from __future__ import annotations

import os
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
