"""Which drive or mount a path lives on, with its filesystem type, options and free space.

Network drives are told apart by the mount, not by the filesystem name alone: a Windows mapped
drive reports the server's filesystem (`NTFS`) and psutil marks it `remote` in its options.
On WSL, a Windows drive is a DrvFs mount: `/proc/self/mounts` shows its letter as the source
(`D:\\`, escaped as `D:\\134`) or, on WSL 2's 9p, `aname=drvfs;path=D:\\` in the options
(learn.microsoft.com/windows/wsl/filesystems); `drvfs_mounts` reads that, `windows_path`
translates `D:\\x` with `wslpath` (every WSL has it; it honours `[automount] root` of
/etc/wsl.conf) or that table, and refuses a result no DrvFs mount of that drive serves.
"""

from __future__ import annotations

import os
import posixpath
import re
from functools import lru_cache

import msgspec

from cachedoctor.errors import UserInputError
from cachedoctor.lazyre import lazy_pattern

NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb", "smbfs", "smb3", "fuse.sshfs", "sshfs",
                        "afpfs", "davfs", "fuse.davfs2", "webdav", "fuse.rclone", "ncpfs",
                        "glusterfs", "ceph"})


class DriveInfo(msgspec.Struct, frozen=True):
    mount: str
    device: str
    fstype: str
    options: tuple[str, ...]
    free_bytes: int  # available to an unprivileged user (df's Avail)
    total_bytes: int
    used_bytes: int  # df's Used: total minus all free blocks, reserved ones included

    @property
    def reserved_bytes(self) -> int:
        """Free blocks only root may use (ext4 reserves 5% by default): neither used nor free."""
        return max(0, self.total_bytes - self.used_bytes - self.free_bytes)

    @property
    def used_percent(self) -> float | None:
        """Used as df counts it, `used / (used + avail)`: reserved blocks are not "used"."""
        usable = self.used_bytes + self.free_bytes
        return 100.0 * self.used_bytes / usable if usable > 0 else None

    @property
    def remote(self) -> bool:
        """A network drive: a network filesystem, or a mount the OS marks `remote` (a Windows
        mapped drive, which reports the server's `NTFS`)."""
        return self.fstype.lower() in NETWORK_FS or "remote" in self.options

    def to_json(self) -> dict[str, object]:
        return {
            "mount": self.mount,
            "device": self.device,
            "fstype": self.fstype,
            "options": list(self.options),
            "free_bytes": self.free_bytes,
            "total_bytes": self.total_bytes,
            "used_bytes": self.used_bytes,
            "reserved_bytes": self.reserved_bytes,
            "remote": self.remote,
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
    if os.name == "nt":  # pragma: no cover - volumes and their mount points: ask Windows
        while not os.path.ismount(current):
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        return current
    # POSIX: `os.path.ismount`'s own test (the parent is another device, or the same inode: the
    # root) with one lstat per level, not two and a realpath: `current` has no links left, so
    # its dirname is its `..`. A level that cannot be read is not a mount point, as there.
    here = _lstat(current)
    while True:
        parent = os.path.dirname(current)
        if parent == current:
            return current
        above = _lstat(parent)
        if here is not None and above is not None and (
                above.st_dev != here.st_dev or above.st_ino == here.st_ino):
            return current
        current, here = parent, above


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


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
    import shutil  # here: its import (bz2, lzma) is 1.5 ms of every hot command's start

    try:
        usage = shutil.disk_usage(mount)
    except OSError:
        return None
    return DriveInfo(mount, device, fstype, options, usage.free, usage.total, usage.used)


def same_filesystem(a: str, b: str) -> bool:
    return os.stat(nearest_existing(a)).st_dev == os.stat(nearest_existing(b)).st_dev


# --- WSL: Windows drives --------------------------------------------------------------------

_DRVFS_PATH = lazy_pattern(r"(?:^|;)path=([A-Za-z]):\\?(?:;|$)")


def drvfs_letter(device: str, options: tuple[str, ...]) -> str | None:
    """The Windows drive letter a mount serves (`D:\\` or `D:` as its source, `path=D:\\`
    among 9p's options), upper case; None for any other mount."""
    found = re.fullmatch(r"([A-Za-z]):\\?", device)
    if found:
        return found.group(1).upper()
    for option in options:
        match = _DRVFS_PATH().search(option)
        if match:
            return match.group(1).upper()
    return None


def drvfs_mounts(mounts: tuple[Mount, ...] | None = None) -> dict[str, str]:
    """Drive letter -> where WSL mounted it (the last mount on a point wins)."""
    served: dict[str, str] = {}
    for point, device, _fstype, options in mounts if mounts is not None else partitions():
        letter = drvfs_letter(device, options)
        if letter is not None:
            served[letter] = point
    return served


def automount_root(text: str | None) -> str:
    """`[automount] root` of /etc/wsl.conf (default `/mnt/`; learn.microsoft.com/windows/wsl/
    wsl-config)."""
    import configparser

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(text or "")
        root = parser.get("automount", "root", fallback="/mnt/").strip().strip('"')
    except configparser.Error:
        root = "/mnt/"
    return root if root.endswith("/") else root + "/"


def wslpath(windows: str) -> str | None:
    """`wslpath -u -a` of a Windows path; None when wslpath is missing or says no."""
    import shutil
    import subprocess

    tool = shutil.which("wslpath")
    if tool is None:
        return None
    try:
        done = subprocess.run([tool, "-u", "-a", windows], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout.strip()
    return out if done.returncode == 0 and out.startswith("/") else None


def windows_path(letter: str, rest: str) -> str:
    """On WSL, the path of `<letter>:\\<rest>` on this side; UserInputError when no DrvFs
    mount of that drive serves it (the copy would land in the distribution's own disk)."""
    import posixpath

    letter = letter.upper()
    rest = rest.replace("\\", "/").strip("/")
    served = drvfs_mounts()
    translated = wslpath(f"{letter}:\\" + rest.replace("/", "\\"))
    if translated is None and letter in served:
        translated = posixpath.join(served[letter], rest) if rest else served[letter]
    mount = served.get(letter)
    if translated is not None and mount is not None and (
            translated == mount or translated.startswith(mount.rstrip("/") + "/")):
        return posixpath.normpath(translated)
    from cachedoctor.locate.files import system_path

    try:
        with open(system_path("/etc/wsl.conf"), encoding="utf-8") as fh:
            conf: str | None = fh.read()
    except OSError:
        conf = None
    expected = automount_root(conf) + letter.lower()
    raise UserInputError(
        f"drive {letter}: is not mounted in this WSL distribution (no DrvFs mount serves "
        f"{translated or expected}): the cache would be copied onto the distribution's own "
        "virtual disk, not onto " + f"{letter}:",
        hint=f"check [automount] in /etc/wsl.conf, or mount it: sudo mkdir -p {expected} && "
             f"sudo mount -t drvfs {letter}: {expected}")
