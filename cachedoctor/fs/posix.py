"""The POSIX seam (Linux, macOS): the `*at` vocabulary is `os` itself.

Linux adds what only it has: mount ids (/proc/self/fdinfo, mountinfo), /proc/locks,
`copy_file_range` and `sendfile` for data, `syncfs(2)` to flush one filesystem, and fork.
macOS copies data with `fcopyfile(3)` (what CPython's shutil uses there) or clones it with
`fclonefileat(2)` on the same APFS volume, never with `sendfile`, which on XNU only writes to
sockets ("sendfile -- send a file to a socket"; ENOTSOCK otherwise, sendfile(2)), and it has no
`copy_file_range`. It flushes with ``fcntl(F_FULLFSYNC)``: Apple's fsync(2) says plain fsync
moves data to the drive, which "may not physically write the data to the platters for quite
some time". Any "not supported" errno from a fast path falls back to read/write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from types import ModuleType
from typing import Any

from cachedoctor.cachedirtag import read_head
from cachedoctor.fs.kinds import LinkKind
from cachedoctor.fs.seam import FolderCounter, FolderLister, Ops

DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
_PROBE_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                | getattr(os, "O_CLOEXEC", 0))
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
_HAS_XATTR = hasattr(os, "listxattr")
CHUNK = 1 << 20
NATIVE_ABI = 3  # the ABI of the _native.c this code calls (a stale build is not used)
# errnos that mean "this fast path does not work here" (never "the data is bad"): fall back
UNSUPPORTED = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM,
                         getattr(errno, "ENOTSUP", errno.EOPNOTSUPP), errno.EBADF,
                         errno.ENOTSOCK, errno.ENOTTY, errno.ESPIPE})


class PosixOps(Ops):
    name = "posix"
    can_fork = False

    def __init__(self) -> None:
        self.listdir = os.listdir
        self.lstat = os.lstat
        self.lstat_full = os.lstat
        self.fstat = os.fstat
        self.close = os.close
        self.unlink = os.unlink
        self.rmdir = os.rmdir

    # folders
    def open_root(self, path: str) -> int:
        return os.open(path, DIR_FLAGS)

    def open_dir(self, name: str, dir_fd: int) -> int:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)

    def mkdir(self, name: str, mode: int, *, dir_fd: int) -> None:
        os.mkdir(name, mode, dir_fd=dir_fd)

    def make_writable(self, fd: int, st: Any) -> None:
        if not _IS_ROOT and st.st_mode & 0o700 != 0o700:
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o700)

    # entries
    def open_file(self, name: str, flags: int, mode: int = 0o600, *, dir_fd: int) -> int:
        return os.open(name, flags | _CLOEXEC, mode, dir_fd=dir_fd)

    def readlink(self, name: str, *, dir_fd: int) -> str:
        return os.readlink(name, dir_fd=dir_fd)

    def copy_link(self, st: Any, target: str, name: str, *, dir_fd: int, owner: bool) -> None:
        os.symlink(target, name, dir_fd=dir_fd)
        if owner:
            with contextlib.suppress(PermissionError):
                os.chown(name, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False)
        if os.utime in os.supports_follow_symlinks:
            os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dir_fd,
                     follow_symlinks=False)

    def hardlink(self, existing: str, name: str, *, dir_fd: int) -> None:
        os.link(existing, name, dst_dir_fd=dir_fd, follow_symlinks=False)

    def make_special(self, st: Any, name: str, *, dir_fd: int, modes: bool) -> bool:
        mode = st.st_mode
        if stat.S_ISFIFO(mode):
            os.mkfifo(name, 0o600, dir_fd=dir_fd)
        elif (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and _IS_ROOT:
            os.mknod(name, stat.S_IFMT(mode) | 0o600, st.st_rdev, dir_fd=dir_fd)
        else:
            return False
        if _IS_ROOT:
            with contextlib.suppress(PermissionError):
                os.chown(name, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False)
        if modes:
            os.chmod(name, stat.S_IMODE(mode), dir_fd=dir_fd)
        os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dir_fd)
        return True

    def access(self, name: str, mode: int, *, dir_fd: int) -> bool:
        return os.access(name, mode, dir_fd=dir_fd)

    def read_head(self, name: str, limit: int, *, dir_fd: int) -> bytes | None:
        return read_head(name, limit, dir_fd=dir_fd)  # O_NOFOLLOW | O_NONBLOCK, then fstat

    # metadata
    def finish_file(self, fd: int, name: str, dir_fd: int, st: Any, *, modes: bool,
                    owner: bool) -> None:
        try:
            self.finish_dir(fd, st, modes=modes, owner=owner)
        finally:
            os.close(fd)

    def finish_dir(self, fd: int, st: Any, *, modes: bool, owner: bool) -> None:
        if owner:
            with contextlib.suppress(PermissionError):  # exFAT: EPERM, ownership can't travel
                os.fchown(fd, st.st_uid, st.st_gid)
        if modes:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))

    def copy_xattrs(self, src_fd: int, dst_fd: int) -> int:
        if not _HAS_XATTR:
            return 0
        try:
            names = os.listxattr(src_fd)
        except OSError:
            return 0
        failures = 0
        for name in names:
            try:
                os.setxattr(dst_fd, name, os.getxattr(src_fd, name))
            except OSError:
                failures += 1  # security.* without privileges, or no xattrs there
        return failures

    # data
    def copy_data(self, fin: int, fout: int, size: int) -> None:
        read_write(fin, fout, 0)

    def make_durable(self, path: str) -> str:
        sync = getattr(os, "sync", None)
        if sync is not None:
            sync()
        return "sync"

    # locks
    def is_locked(self, dir_fd: int, name: str) -> bool:
        """True when another open file description holds a flock on the file (probe, release)."""
        import fcntl

        try:
            fd = os.open(name, _PROBE_FLAGS, dir_fd=dir_fd)
        except OSError:
            return False  # unreadable for us: nobody's lock can be probed; unlink decides
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    # paths
    def lstat_path(self, path: str) -> Any:
        return os.lstat(path)

    def rename_path(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def rmdir_path(self, path: str) -> None:
        os.rmdir(path)

    def unlink_path(self, path: str) -> None:
        os.unlink(path)

    def readlink_path(self, path: str) -> str:
        return os.readlink(path)

    def create_link(self, path: str, target: str, kind: LinkKind) -> None:
        if kind == "junction":
            raise OSError(errno.EINVAL,
                          f"junctions exist only on Windows; cannot create one at {path}")
        os.symlink(target, path, target_is_directory=True)

    def remove_link(self, path: str, st: Any) -> None:
        os.unlink(path)


def read_write(fin: int, fout: int, done: int) -> None:
    """The portable data copy: read and write from offset `done` to the end."""
    os.lseek(fin, done, os.SEEK_SET)
    os.lseek(fout, done, os.SEEK_SET)
    while True:
        chunk = os.read(fin, CHUNK)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(fout, view):]


class LinuxOps(PosixOps):
    name = "linux"
    can_fork = hasattr(os, "fork") and os.listdir in os.supports_fd

    def __init__(self) -> None:
        super().__init__()
        self.use_copy_file_range = hasattr(os, "copy_file_range")
        self.use_sendfile = hasattr(os, "sendfile")

    def folder_counter(self) -> FolderCounter | None:
        """`_native.count_folder` where the wheel was built with it (hatch_build.py); it lists
        with getdents64 and stats with fstatat: the names `os.listdir(fd)` gives, the stats
        `os.lstat` gives."""
        native = _native_module()
        return native.count_folder if native is not None else None

    def folder_lister(self) -> FolderLister | None:
        """`_native.list_folder`, built with `count_folder`; it adds readlinkat, as
        `os.readlink` reads a link here."""
        native = _native_module()
        return native.list_folder if native is not None else None

    def copy_data(self, fin: int, fout: int, size: int) -> None:
        """copy_file_range (reflinks, server-side copies), then sendfile, then read/write; a
        fast path that says "not supported" before writing anything is not tried again."""
        size = max(size, 1)  # a file may have grown since it was listed: copy what is there
        done = 0
        if self.use_copy_file_range:
            try:
                while True:
                    n = os.copy_file_range(fin, fout, max(size - done, CHUNK))
                    if n == 0:
                        return
                    done += n
            except OSError as exc:
                if exc.errno not in UNSUPPORTED or done:
                    raise
                self.use_copy_file_range = False
        if self.use_sendfile:
            try:
                while True:
                    n = os.sendfile(fout, fin, done, max(size - done, CHUNK))
                    if n == 0:
                        return
                    done += n
            except OSError as exc:
                if exc.errno not in UNSUPPORTED or done:
                    raise
                self.use_sendfile = False
        read_write(fin, fout, done)

    def make_durable(self, path: str) -> str:
        """syncfs(2): one flush of the filesystem holding `path` (and its write-back errors
        since Linux 5.8), not of every drive as sync(2) would."""
        import ctypes

        try:
            syncfs = ctypes.CDLL(None, use_errno=True).syncfs
        except (OSError, AttributeError):
            return super().make_durable(path)
        fd = os.open(path, DIR_FLAGS)
        try:
            if syncfs(ctypes.c_int(fd)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), path)
        finally:
            os.close(fd)
        return "syncfs"

    def mount_id(self, fd: int) -> int | None:
        return mount_id(fd)

    def mounts_below(self, root: str) -> bool | None:
        return mounts_below(root)

    def flocked_inodes(self) -> frozenset[int] | None:
        return flocked_inodes()


class MacApi:  # pragma: no cover - macOS only (tests use tests/doubles/macos.py)
    """The macOS calls MacOps needs that `os` lacks."""

    def fcopyfile(self, fin: int, fout: int) -> None:
        import posix

        posix._fcopyfile(fin, fout, posix._COPYFILE_DATA)  # type: ignore[attr-defined]

    def fullfsync(self, fd: int) -> None:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)  # type: ignore[attr-defined,unused-ignore]

    def fclonefileat(self, src_fd: int, dst_dir_fd: int, name: str) -> None:
        """fclonefileat(2) with CLONE_NOFOLLOW (clonefile(2), macOS 10.12+)."""
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.fclonefileat(src_fd, dst_dir_fd, os.fsencode(name), 0x0001) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), name)


class MacOps(PosixOps):
    name = "macos"

    def __init__(self, api: Any = None) -> None:
        super().__init__()
        self.api: Any = api if api is not None else MacApi()
        self.use_fcopyfile = True

    def copy_data(self, fin: int, fout: int, size: int) -> None:
        if self.use_fcopyfile:
            try:
                self.api.fcopyfile(fin, fout)
                return
            except OSError as exc:
                if exc.errno not in UNSUPPORTED or os.lseek(fout, 0, os.SEEK_END):
                    raise
                self.use_fcopyfile = False
        read_write(fin, fout, 0)

    def clone_file(self, fin: int, name: str, *, dir_fd: int) -> bool:
        try:
            self.api.fclonefileat(fin, dir_fd, name)
        except OSError as exc:
            if exc.errno in UNSUPPORTED:  # EXDEV: another volume; ENOTSUP: not APFS
                return False
            raise
        return True

    def flush_file(self, fd: int) -> None:
        os.fsync(fd)

    def make_durable(self, path: str) -> str:
        """Every copied file was fsynced as it was written (`flush_file`); F_FULLFSYNC then asks
        the drive to put all it buffered onto the medium (Apple fsync(2), fcntl(2))."""
        fd = os.open(path, DIR_FLAGS)
        try:
            self.api.fullfsync(fd)
        finally:
            os.close(fd)
        return "fullfsync"


# --- Linux facts from /proc ------------------------------------------------------------------

_PROC_LOCKS = "/proc/locks"
_MOUNTINFO = "/proc/self/mountinfo"


def flocked_inodes() -> frozenset[int] | None:
    """Inode numbers that hold a flock right now (Linux /proc/locks), or None when unknown.

    A pre-filter only: files whose inode is listed get the real flock probe, which decides.
    Device numbers are ignored (overlay and btrfs report other ones), so a match on another
    filesystem costs one extra probe, never a wrong answer."""
    try:
        with open(_PROC_LOCKS, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    inodes: set[int] = set()
    for line in data.splitlines():
        parts = line.split()
        if len(parts) >= 6 and b"FLOCK" in parts[1:3]:
            try:
                inodes.add(int(parts[5 if parts[1] != b"->" else 6].rsplit(b":", 1)[1]))
            except (ValueError, IndexError):
                return None  # a format we do not understand: probe every file
    return frozenset(inodes)


def mounts_below(root: str) -> bool | None:
    """Whether a mount point lies strictly below `root` (Linux mountinfo), None when unknown.

    A bind mount of a folder of the same filesystem keeps its st_dev, so the device check alone
    would walk into it; when the table lists a mount below the root, every folder's mount id is
    compared with the root's (`mount_id`)."""
    try:
        with open(_MOUNTINFO, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    prefix = os.fsencode(os.path.realpath(root)).rstrip(b"/") + b"/"
    for line in data.splitlines():
        parts = line.split(b" ")
        if len(parts) < 5:
            continue
        point = unescape_mount(parts[4]) + b"/"
        if point.startswith(prefix) and point != prefix:
            return True
    return False


def unescape_mount(field: bytes) -> bytes:
    """mountinfo escapes space, tab, newline and backslash as octal (`\\040`)."""
    if b"\\" not in field:
        return field
    out = bytearray()
    i = 0
    while i < len(field):
        if field[i] == 0x5C and i + 3 < len(field) and field[i + 1: i + 4].isdigit():
            out.append(int(field[i + 1: i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)


def mount_id(fd: int) -> int | None:
    """The mount an open descriptor is on (Linux /proc/self/fdinfo), None when unknown."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        info = os.open(f"/proc/self/fdinfo/{fd}", os.O_RDONLY | _CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(info, 4096)
    except OSError:
        return None
    finally:
        os.close(info)
    for line in data.splitlines():
        if line.startswith(b"mnt_id:"):
            try:
                return int(line.split(b":", 1)[1])
            except ValueError:
                return None
    return None


def _native_module() -> ModuleType | None:
    """cachedoctor/fs/_native.c as built into this install, or None: not built (a pure wheel)
    or built from another version of the file (a stale build in a source tree)."""
    try:
        from cachedoctor.fs import _native
    except ImportError:
        return None
    return _native if getattr(_native, "ABI", None) == NATIVE_ABI else None
