"""The Windows seam: the tree layer's `*at` vocabulary over paths, as Windows behaves.

Python has no ``dir_fd`` on Windows, so a folder "descriptor" here is a number standing for the
path it was opened at and the identity it had then; everything else follows the platform's
documentation (sources inline):

* **Junctions and other name-surrogate reparse points are links** (`kinds`): a listing shows
  them as ``S_IFLNK``, so they are removed as themselves (``os.rmdir`` for a folder link,
  which deletes the reparse point only), copied as junctions (target kept absolute, a
  ``\\\\?\\Volume{GUID}\\`` one included, cpython gh-89760) with their own times, and never
  entered. CPython reports only ``IO_REPARSE_TAG_SYMLINK`` as ``S_IFLNK`` (bpo-37834).
* **`DirEntry.stat()` has st_ino, st_dev and st_nlink 0** (Python docs, os.DirEntry.stat:
  "Call os.stat() to get these attributes"): a folder found in a listing is `os.lstat`-ed (its
  device and identity are compared); files keep the cheap listing stat with st_nlink 1 (hard
  links count per name in a measurement) and `lstat_full` asks `os.lstat` where identity
  matters (the copier, the verifier). There is no st_blocks: allocated = apparent bytes.
* **Sharing violations** (ERROR_SHARING_VIOLATION 32, ERROR_LOCK_VIOLATION 33; "access denied"
  5 while antivirus or the indexer has a new file open, as uv, npm's graceful-fs and VS Code
  retry): renames and removals are retried with backoff (about 3 s); what still fails is an
  `InUseError` (a "still in use" message, and a journal that can finish later).
* **Read-only files** (FILE_ATTRIBUTE_READONLY) cannot be deleted until the attribute is
  cleared (``os.chmod(path, stat.S_IWRITE)``, which is all Windows chmod does): they are
  cleared first, never reported as "in use". The attribute is not honoured on folders
  (learn.microsoft.com, File Attribute Constants).
* **MAX_PATH**: a path of 248 characters or more (CreateDirectoryW's limit, MAX_PATH - 12) is
  passed as an extended-length ``\\\\?\\`` path, which Win32 calls accept up to 32,767
  characters without `LongPathsEnabled` (learn.microsoft.com, Maximum Path Length Limitation).

The calls themselves go through `api` (`NativeWindowsApi`: `os`, `_winapi`, ctypes); the tests
give the same class a double written from the same documentation (tests/doubles/windows.py).
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
import time
from collections.abc import Callable
from typing import Any, TypeVar

from cachedoctor.cachedirtag import read_open
from cachedoctor.fs import kinds
from cachedoctor.fs.kinds import LinkKind
from cachedoctor.fs.seam import InUseError, Ops

ERROR_ACCESS_DENIED = 5
ERROR_SHARING_VIOLATION = 32
ERROR_LOCK_VIOLATION = 33
_IN_USE = (ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION)
_TRANSIENT = (ERROR_ACCESS_DENIED, *_IN_USE)
LONG_PATH = 248  # CreateDirectoryW: MAX_PATH (260) - 12; files allow 259
_EXTENDED = "\\\\?\\"
_O_BINARY = getattr(os, "O_BINARY", 0) | getattr(os, "O_NOINHERIT", 0)

T = TypeVar("T")


class WinStat:
    """A Windows stat as the tree layer reads it: links as ``S_IFLNK``, st_nlink 1 where the
    listing does not say, st_blocks = st_size (with `block_unit` 1)."""

    __slots__ = ("st_atime", "st_atime_ns", "st_blocks", "st_ctime", "st_ctime_ns", "st_dev",
                 "st_file_attributes", "st_gid", "st_ino", "st_mode", "st_mtime", "st_mtime_ns",
                 "st_nlink", "st_reparse_tag", "st_size", "st_uid")

    def __init__(self, st: Any) -> None:
        mode = st.st_mode
        if kinds.is_link(st):
            mode = stat.S_IFLNK | stat.S_IMODE(mode)
        self.st_mode = mode
        self.st_ino, self.st_dev = st.st_ino, st.st_dev
        self.st_nlink = st.st_nlink or 1
        self.st_uid, self.st_gid = st.st_uid, st.st_gid
        self.st_size = self.st_blocks = st.st_size
        self.st_atime, self.st_mtime, self.st_ctime = st.st_atime, st.st_mtime, st.st_ctime
        self.st_atime_ns, self.st_mtime_ns = st.st_atime_ns, st.st_mtime_ns
        self.st_ctime_ns = st.st_ctime_ns
        self.st_file_attributes = getattr(st, "st_file_attributes", 0)
        self.st_reparse_tag = getattr(st, "st_reparse_tag", 0)


class _Dir:
    __slots__ = ("entries", "path", "st")

    def __init__(self, path: str, st: Any) -> None:
        self.path, self.st = path, st
        self.entries: dict[str, Any] = {}


def long_path(path: str) -> str:
    """`path` as an extended-length path when it is too long for the plain Win32 calls."""
    if len(path) < LONG_PATH or path.startswith(_EXTENDED):
        return path
    if path.startswith("\\\\"):
        return _EXTENDED + "UNC\\" + path[2:]
    return _EXTENDED + path


class WindowsOps(Ops):
    name = "windows"
    listing_identity = False
    block_unit = 1
    modes_meaningful = False
    probes_locks = False
    trash_by_path = True
    os_descriptors = False  # the seam's own numbers (Windows' os.open has no dir_fd either)
    retry_delays: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.2)

    def __init__(self, api: Any = None) -> None:
        self.api: Any = api if api is not None else NativeWindowsApi()
        self._dirs: dict[int, _Dir] = {}
        self._ids = itertools.count(1 << 20)
        self.listdir = self._listdir
        self.lstat = self._lstat
        self.lstat_full = self._lstat_full
        self.fstat = self._fstat
        self.close = self._close
        self.unlink = self._unlink
        self.rmdir = self._rmdir

    # --- virtual descriptors ---------------------------------------------------------------
    def _register(self, path: str, st: Any) -> int:
        if kinds.is_link(st):
            raise OSError(errno.ELOOP, "is a link (junction or symlink); not entered", path)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", path)
        fd = next(self._ids)
        self._dirs[fd] = _Dir(path, st)
        return fd

    def _join(self, dir_fd: int, name: str) -> str:
        return os.path.join(self._dirs[dir_fd].path, name)

    def open_root(self, path: str) -> int:
        return self._register(path, self.api.lstat(long_path(path)))

    def open_dir(self, name: str, dir_fd: int) -> int:
        path = self._join(dir_fd, name)
        return self._register(path, self.api.lstat(long_path(path)))

    def _listdir(self, fd: int) -> list[str]:
        folder = self._dirs[fd]
        with self.api.scandir(long_path(folder.path)) as it:
            folder.entries = {entry.name: entry.stat(follow_symlinks=False) for entry in it}
        return list(folder.entries)

    def _lstat(self, name: str, *, dir_fd: int) -> WinStat:
        listed = self._dirs[dir_fd].entries.get(name)
        if listed is None or (stat.S_ISDIR(listed.st_mode) and not kinds.is_link(listed)):
            return self._lstat_full(name, dir_fd=dir_fd)  # a folder: its device is compared
        return WinStat(listed)

    def _lstat_full(self, name: str, *, dir_fd: int) -> WinStat:
        return WinStat(self.api.lstat(long_path(self._join(dir_fd, name))))

    def _fstat(self, fd: int) -> WinStat:
        return WinStat(self._dirs[fd].st)

    def _close(self, fd: int) -> None:
        self._dirs.pop(fd, None)

    # --- removal, with the retries Windows needs ------------------------------------------
    def _retry(self, call: Callable[..., T], *args: Any, moving: bool = False) -> T:
        """`call`, again after a pause while Windows says another program holds the entry.
        What still fails is an InUseError; for a rename (`moving`) "access denied" too: that
        is what a folder holding an open file answers (uv#1491)."""
        for delay in (*self.retry_delays, None):
            try:
                return call(*args)
            except PermissionError as exc:
                code = getattr(exc, "winerror", None)
                if code not in _TRANSIENT:
                    raise
                if delay is None:
                    if code in _IN_USE:
                        raise InUseError(exc.errno or errno.EACCES, "another program has it open (Windows "
                                         "sharing violation)", exc.filename) from exc
                    if moving:
                        raise InUseError(exc.errno or errno.EACCES, "access is denied: another program has "
                                         "it, or a file in it, open", exc.filename) from exc
                    raise
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _remove(self, path: str, st: Any) -> None:
        if kinds.is_dir_link(st):
            self._retry(self.api.rmdir, path)  # deletes the reparse point, not its target
            return
        if getattr(st, "st_file_attributes", 0) & kinds.FILE_ATTRIBUTE_READONLY:
            self.api.chmod(path, stat.S_IWRITE)
        try:
            self._retry(self.api.unlink, path)
        except PermissionError as exc:  # read-only set since it was listed
            now = self.api.lstat(path)
            if getattr(exc, "winerror", None) != ERROR_ACCESS_DENIED or not (
                    getattr(now, "st_file_attributes", 0) & kinds.FILE_ATTRIBUTE_READONLY):
                raise
            self.api.chmod(path, stat.S_IWRITE)
            self._retry(self.api.unlink, path)

    def _unlink(self, name: str, *, dir_fd: int) -> None:
        path = long_path(self._join(dir_fd, name))
        listed = self._dirs[dir_fd].entries.get(name)
        self._remove(path, listed if listed is not None else self.api.lstat(path))

    def _rmdir(self, name: str, *, dir_fd: int) -> None:
        self._retry(self.api.rmdir, long_path(self._join(dir_fd, name)))

    # --- making entries --------------------------------------------------------------------
    def mkdir(self, name: str, mode: int, *, dir_fd: int) -> None:
        self.api.mkdir(long_path(self._join(dir_fd, name)), mode)

    def open_file(self, name: str, flags: int, mode: int = 0o600, *, dir_fd: int) -> int:
        fd: int = self.api.open(long_path(self._join(dir_fd, name)), flags | _O_BINARY, mode)
        return fd

    def readlink(self, name: str, *, dir_fd: int) -> str:
        target: str = self.api.readlink(long_path(self._join(dir_fd, name)))
        return target

    def copy_link(self, st: Any, target: str, name: str, *, dir_fd: int, owner: bool) -> None:
        path = long_path(self._join(dir_fd, name))
        if kinds.link_kind_of(st) == "junction":
            from cachedoctor.links import junction_target

            self.api.create_junction(junction_target(target), path)
        else:
            is_dir = bool(getattr(st, "st_file_attributes", 0) & kinds.FILE_ATTRIBUTE_DIRECTORY)
            self.api.symlink(target, path, is_dir)
        self.api.set_link_times(path, st.st_atime_ns, st.st_mtime_ns)

    def hardlink(self, existing: str, name: str, *, dir_fd: int) -> None:
        self.api.link(long_path(existing), long_path(self._join(dir_fd, name)))

    def access(self, name: str, mode: int, *, dir_fd: int) -> bool:
        return True  # os.access checks only the read-only flag here; reading itself decides

    def read_head(self, name: str, limit: int, *, dir_fd: int) -> bytes | None:
        """No O_NOFOLLOW on Windows: the entry is looked at first (a link is not read)."""
        path = long_path(self._join(dir_fd, name))
        try:
            st = self.api.lstat(path)
            if kinds.is_link(st) or not stat.S_ISREG(st.st_mode):
                return None
            fd: int = self.api.open(path, os.O_RDONLY | _O_BINARY, 0)
        except OSError:
            return None
        try:
            return read_open(fd, limit)
        finally:
            os.close(fd)

    def finish_file(self, fd: int, name: str, dir_fd: int, st: Any, *, modes: bool,
                    owner: bool) -> None:
        """Times and the read-only flag go by path after closing (no futimens on Windows);
        the flag is set last, so the times can still be written."""
        os.close(fd)
        path = long_path(self._join(dir_fd, name))
        self.api.utime(path, (st.st_atime_ns, st.st_mtime_ns))
        if not st.st_mode & stat.S_IWRITE:
            self.api.chmod(path, stat.S_IREAD)

    def finish_dir(self, fd: int, st: Any, *, modes: bool, owner: bool) -> None:
        self.api.utime(long_path(self._dirs[fd].path), (st.st_atime_ns, st.st_mtime_ns))

    # --- data ------------------------------------------------------------------------------
    def copy_data(self, fin: int, fout: int, size: int) -> None:
        from cachedoctor.fs.posix import read_write

        read_write(fin, fout, 0)

    def flush_file(self, fd: int) -> None:
        os.fsync(fd)  # FlushFileBuffers: a volume can only be flushed as a whole by an admin

    def make_durable(self, path: str) -> str:
        return "per-file"

    def trash_path(self, path: str) -> None:
        self.api.send2trash(path)

    # --- paths -----------------------------------------------------------------------------
    def lstat_path(self, path: str) -> WinStat:
        return WinStat(self.api.lstat(long_path(path)))

    def rename_path(self, src: str, dst: str) -> None:
        self._retry(self.api.rename, long_path(src), long_path(dst), moving=True)

    def rmdir_path(self, path: str) -> None:
        self._retry(self.api.rmdir, long_path(path))

    def unlink_path(self, path: str) -> None:
        path = long_path(path)
        self._remove(path, self.api.lstat(path))

    def readlink_path(self, path: str) -> str:
        target: str = self.api.readlink(long_path(path))
        return target

    def create_link(self, path: str, target: str, kind: LinkKind) -> None:
        if kind == "junction":
            from cachedoctor.links import junction_target

            self.api.create_junction(junction_target(target), long_path(path))
        else:
            self.api.symlink(target, long_path(path), True)

    def remove_link(self, path: str, st: Any) -> None:
        self._remove(long_path(path), st)


class NativeWindowsApi:  # pragma: no cover - runs on Windows only
    """The real calls behind `WindowsOps`."""

    scandir = staticmethod(os.scandir)
    lstat = staticmethod(os.lstat)
    unlink = staticmethod(os.unlink)
    rmdir = staticmethod(os.rmdir)
    rename = staticmethod(os.rename)
    readlink = staticmethod(os.readlink)
    link = staticmethod(os.link)

    @staticmethod
    def mkdir(path: str, mode: int) -> None:
        os.mkdir(path, mode)

    @staticmethod
    def open(path: str, flags: int, mode: int) -> int:
        return os.open(path, flags, mode)

    @staticmethod
    def chmod(path: str, mode: int) -> None:
        os.chmod(path, mode)

    @staticmethod
    def utime(path: str, ns: tuple[int, int]) -> None:
        os.utime(path, ns=ns)

    @staticmethod
    def symlink(target: str, path: str, is_dir: bool) -> None:
        os.symlink(target, path, target_is_directory=is_dir)

    @staticmethod
    def send2trash(path: str) -> None:
        from send2trash import send2trash

        send2trash(path)

    @staticmethod
    def create_junction(target: str, path: str) -> None:
        """`_winapi.CreateJunction` (no privilege needed; the target must exist). It prefixes
        ``\\??\\`` to GetFullPathNameW(target), which would mangle a ``\\\\?\\Volume{GUID}\\``
        target, so such a junction's reparse data is written here (FSCTL_SET_REPARSE_POINT with a
        mount-point REPARSE_DATA_BUFFER, learn.microsoft.com)."""
        if not target.startswith(_EXTENDED):
            import _winapi

            _winapi.CreateJunction(target, path)  # type: ignore[attr-defined,unused-ignore]
            return
        import struct

        substitute = ("\\??\\" + target[len(_EXTENDED):]).encode("utf-16-le")
        body = struct.pack("<HHHH", 0, len(substitute), len(substitute) + 2, 0)
        body += substitute + b"\0\0" + b"\0\0"
        buffer = struct.pack("<IHH", kinds.IO_REPARSE_TAG_MOUNT_POINT, len(body), 0) + body
        os.mkdir(path)
        try:
            _device_io(path, 0x000900A4, buffer)  # FSCTL_SET_REPARSE_POINT
        except OSError:
            os.rmdir(path)
            raise

    @staticmethod
    def set_link_times(path: str, atime_ns: int, mtime_ns: int) -> None:
        """SetFileTime on the link itself (CreateFileW with FILE_FLAG_OPEN_REPARSE_POINT |
        FILE_FLAG_BACKUP_SEMANTICS): os.utime would follow it."""
        import ctypes
        from ctypes import wintypes

        def filetime(ns: int) -> Any:
            ticks = ns // 100 + 116444736000000000  # 100 ns steps since 1601
            return wintypes.FILETIME(ticks & 0xFFFFFFFF, ticks >> 32)

        handle = _open_reparse_point(path, 0x100)  # FILE_WRITE_ATTRIBUTES
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
        try:
            if not kernel32.SetFileTime(handle, None, ctypes.byref(filetime(atime_ns)),
                                        ctypes.byref(filetime(mtime_ns))):
                raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined,unused-ignore]
        finally:
            kernel32.CloseHandle(handle)


def _open_reparse_point(path: str, access: int) -> Any:  # pragma: no cover - Windows only
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    kernel32.CreateFileW.restype = wintypes.HANDLE
    kernel32.CreateFileW.argtypes = [wintypes.LPCWSTR, wintypes.DWORD, wintypes.DWORD,
                                     ctypes.c_void_p, wintypes.DWORD, wintypes.DWORD,
                                     wintypes.HANDLE]
    handle = kernel32.CreateFileW(path, access, 7, None, 3,  # share all; OPEN_EXISTING
                                  0x00200000 | 0x02000000, None)
    if handle in (None, wintypes.HANDLE(-1).value):
        raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined,unused-ignore]
    return handle


def _device_io(path: str, code: int, data: bytes) -> None:  # pragma: no cover - Windows only
    import ctypes
    from ctypes import wintypes

    handle = _open_reparse_point(path, 0x40000000)  # GENERIC_WRITE
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
    returned = wintypes.DWORD()
    try:
        if not kernel32.DeviceIoControl(handle, code, data, len(data), None, 0,
                                        ctypes.byref(returned), None):
            raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined,unused-ignore]
    finally:
        kernel32.CloseHandle(handle)
