"""A Windows double: the calls `cachedoctor.fs.windows.WindowsOps` makes (`NativeWindowsApi`),
behaving on a Linux folder tree as Windows and CPython document them.

What is modelled, and where it is written down:

* **Junctions** are reparse points with tag IO_REPARSE_TAG_MOUNT_POINT (0xA0000003). CPython's
  `os.lstat` reports them as ``S_IFDIR`` with FILE_ATTRIBUTE_DIRECTORY | REPARSE_POINT in
  ``st_file_attributes`` and the tag in ``st_reparse_tag``; only IO_REPARSE_TAG_SYMLINK is
  ``S_IFLNK`` (bpo-37834, Python docs for os.stat_result). `os.readlink` returns the
  substitute name, ``\\\\?\\``-prefixed (Python docs, os.readlink 3.8). `_winapi.CreateJunction`
  needs an existing target and refuses a ``\\??\\`` one (Modules/_winapi.c). On disk here a
  junction is a Linux symlink (so paths through it resolve, as they do on Windows) whose inode
  is registered as a junction in the double's state file; a ``\\\\?\\Volume{GUID}\\`` target
  resolves through the double's volume table.
* **Other symlinks** (every Linux symlink not registered) are IO_REPARSE_TAG_SYMLINK, with
  FILE_ATTRIBUTE_DIRECTORY when they point at a folder.
* **`DirEntry.stat()`** has st_ino, st_dev and st_nlink 0 (Python docs, os.DirEntry.stat);
  `lstat` has the real ones. Neither has st_blocks. Modes come from the attributes only:
  folders 0o777, files 0o666, 0o444/0o555 with FILE_ATTRIBUTE_READONLY (CPython
  Python/fileutils.c `attributes_to_mode`); uid and gid are 0.
* **Read-only files** (FILE_ATTRIBUTE_READONLY; here: no owner write bit) cannot be deleted:
  ERROR_ACCESS_DENIED (5). `os.chmod` only sets or clears that attribute (Python docs,
  os.chmod: "Windows only supports setting the file's read-only flag").
* **`os.unlink` of a folder** fails (ERROR_ACCESS_DENIED); of a folder link it removes the link
  (CPython Py_DeleteFileW uses RemoveDirectoryW for symlink and junction tags); `os.rmdir` of a
  junction removes the reparse point only, never the target.
* **`os.rename`** never replaces an existing entry (ERROR_ALREADY_EXISTS 183; Python docs,
  os.rename: "On Windows, if dst exists a FileExistsError is always raised").
* **Sharing violations**: a file `hold`-ed by "another program" (Defender, the indexer, a
  running tool) cannot be deleted (ERROR_SHARING_VIOLATION 32), and a folder holding it cannot
  be renamed (ERROR_ACCESS_DENIED 5, as uv#1491 and uv#9543 report from real machines), for
  the given number of attempts or until released.
* **MAX_PATH**: a path of 260 characters or more (248 for a new folder, CreateDirectoryW) fails
  unless it starts with ``\\\\?\\`` (learn.microsoft.com, Maximum Path Length Limitation); such a
  path is accepted (the prefix is stripped, the rest is the Linux path).
* **The Recycle Bin** (`send2trash`) is a folder in the double's state.

Errors carry ``winerror`` as CPython's do on Windows (set here by hand: Linux has no field).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FILE_ATTRIBUTE_READONLY = 0x1
FILE_ATTRIBUTE_DIRECTORY = 0x10
FILE_ATTRIBUTE_ARCHIVE = 0x20
FILE_ATTRIBUTE_REPARSE_POINT = 0x400
IO_REPARSE_TAG_MOUNT_POINT = 0xA0000003
IO_REPARSE_TAG_SYMLINK = 0xA000000C
MAX_PATH = 260
MAX_DIR_PATH = 248
EXTENDED = "\\\\?\\"


def win_error(cls: type[OSError], code: int, winerror: int, text: str, path: str) -> OSError:
    exc = cls(code, text, path)
    exc.winerror = winerror  # type: ignore[attr-defined]
    return exc


class WinStatResult:
    """What CPython's os.lstat returns on Windows (the fields the seam reads)."""

    def __init__(self, st: os.stat_result, mode: int, attributes: int, tag: int,
                 identity: bool = True) -> None:
        self.st_mode = mode
        self.st_ino = st.st_ino if identity else 0
        self.st_dev = st.st_dev if identity else 0
        self.st_nlink = st.st_nlink if identity else 0
        self.st_uid = self.st_gid = 0
        self.st_size = st.st_size if stat.S_ISREG(mode) else 0  # folders and links: 0
        self.st_atime, self.st_mtime, self.st_ctime = st.st_atime, st.st_mtime, st.st_ctime
        self.st_atime_ns, self.st_mtime_ns, self.st_ctime_ns = (
            st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)
        self.st_file_attributes = attributes
        self.st_reparse_tag = tag


class DirEntry:
    """os.DirEntry on Windows: its stat() comes from the directory listing."""

    def __init__(self, name: str, path: str, st: WinStatResult) -> None:
        self.name, self.path, self._st = name, path, st

    def stat(self, *, follow_symlinks: bool = True) -> WinStatResult:
        return self._st


class WindowsApi:
    """The double. `state` is a folder: the junction registry, the files held open by "another
    program" and the Recycle Bin live there, so the CLI run in a subprocess sees the same."""

    def __init__(self, state: Path) -> None:
        self.state_dir = state
        state.mkdir(parents=True, exist_ok=True)
        self.file = state / "windows.json"
        self.data: dict[str, Any] = {"junctions": {}, "held": {}, "volumes": {},
                                     "violations": 0, "calls": {}}
        self.seen_ns = -1
        self.reload()

    # --- the shared state -----------------------------------------------------------------
    def reload(self) -> None:
        try:
            st = self.file.stat()
        except FileNotFoundError:
            return
        if st.st_mtime_ns != self.seen_ns:
            with open(self.file, encoding="utf-8") as fh:
                self.data = json.load(fh)
            self.seen_ns = st.st_mtime_ns

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, Any]]:
        with open(self.state_dir / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.reload()
            yield self.data
            tmp = self.file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data), encoding="utf-8")
            os.replace(tmp, self.file)
            self.seen_ns = self.file.stat().st_mtime_ns

    def _count(self, name: str) -> None:
        with self._changing() as data:
            data["calls"][name] = data["calls"].get(name, 0) + 1

    def hold(self, path: str | os.PathLike[str], attempts: int = -1) -> None:
        """Another program opens `path` without FILE_SHARE_DELETE: the next `attempts` tries
        to delete it (or rename a folder holding it) fail; -1 until `release`."""
        with self._changing() as data:
            data["held"][os.path.abspath(path)] = attempts

    def release(self, path: str | os.PathLike[str]) -> None:
        with self._changing() as data:
            data["held"].pop(os.path.abspath(path), None)

    def add_volume(self, guid: str, path: str | os.PathLike[str]) -> str:
        """Map a volume GUID to a folder; returns its ``\\\\?\\Volume{GUID}\\`` root."""
        with self._changing() as data:
            data["volumes"][guid] = os.path.abspath(path)
        return f"{EXTENDED}Volume{{{guid}}}\\"

    def recycle_bin(self) -> Path:
        return self.state_dir / "RecycleBin"

    # --- paths ----------------------------------------------------------------------------
    def _native(self, path: str, limit: int = MAX_PATH) -> str:
        if path.startswith(EXTENDED):
            rest = path[len(EXTENDED):]
            if rest.startswith("Volume{"):
                guid, _, tail = rest[len("Volume{"):].partition("}")
                root = self.data["volumes"].get(guid)
                if root is None:
                    raise win_error(FileNotFoundError, errno.ENOENT, 3,
                                    "The system cannot find the path specified", path)
                return os.path.join(root, tail.lstrip("\\").replace("\\", "/"))
            return rest
        if len(path) >= limit:
            raise win_error(FileNotFoundError, errno.ENOENT, 206,
                            "The filename or extension is too long", path)
        return path

    def _junction(self, st: os.stat_result) -> str | None:
        self.reload()
        target: str | None = self.data["junctions"].get(f"{st.st_dev}:{st.st_ino}")
        return target

    def _violation(self, path: str, *, inside: bool) -> bool:
        """Whether `path` (or, with `inside`, anything below it) is held; counts the attempt."""
        self.reload()
        held = self.data["held"]
        prefix = path.rstrip("/") + "/"
        hit = next((h for h in held if h == path or (inside and h.startswith(prefix))), None)
        if hit is None:
            return False
        with self._changing() as data:
            left = data["held"].get(hit)
            if left is None:
                return False
            data["violations"] += 1
            if left > 0:
                if left == 1:
                    del data["held"][hit]
                else:
                    data["held"][hit] = left - 1
        return True

    def _win_stat(self, path: str, identity: bool) -> WinStatResult:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if self._junction(st) is not None:
                return WinStatResult(st, stat.S_IFDIR | 0o777,
                                     FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT,
                                     IO_REPARSE_TAG_MOUNT_POINT, identity)
            attrs = FILE_ATTRIBUTE_REPARSE_POINT
            # A symlink's file/folder kind is fixed when it is made (CreateSymbolicLinkW's
            # SYMBOLIC_LINK_FLAG_DIRECTORY; Python docs, os.symlink: it "does not morph to the
            # target dynamically"); a link made outside the double takes its target's kind.
            made_as_dir = self.data.get("symlink_dirs", {}).get(f"{st.st_dev}:{st.st_ino}")
            if made_as_dir if made_as_dir is not None else os.path.isdir(path):
                attrs |= FILE_ATTRIBUTE_DIRECTORY
            return WinStatResult(st, stat.S_IFLNK | 0o777, attrs, IO_REPARSE_TAG_SYMLINK,
                                 identity)
        readonly = not st.st_mode & stat.S_IWUSR
        if stat.S_ISDIR(st.st_mode):
            attrs = FILE_ATTRIBUTE_DIRECTORY | (FILE_ATTRIBUTE_READONLY if readonly else 0)
            return WinStatResult(st, stat.S_IFDIR | (0o555 if readonly else 0o777), attrs, 0,
                                 identity)
        attrs = FILE_ATTRIBUTE_ARCHIVE | (FILE_ATTRIBUTE_READONLY if readonly else 0)
        return WinStatResult(st, stat.S_IFREG | (0o444 if readonly else 0o666), attrs, 0,
                             identity)

    # --- the calls NativeWindowsApi makes --------------------------------------------------
    def lstat(self, path: str) -> WinStatResult:
        return self._win_stat(self._native(path), identity=True)

    @contextlib.contextmanager
    def scandir(self, path: str) -> Iterator[Iterator[DirEntry]]:
        native = self._native(path)
        with os.scandir(native) as it:
            names = [entry.name for entry in it]
        yield iter([DirEntry(name, os.path.join(path, name),
                             self._win_stat(os.path.join(native, name), identity=False))
                    for name in names])

    def unlink(self, path: str) -> None:
        native = self._native(path)
        st = self._win_stat(native, identity=True)
        if st.st_file_attributes & FILE_ATTRIBUTE_REPARSE_POINT:
            self._drop_link(native)  # Py_DeleteFileW: RemoveDirectoryW for a folder link
            return
        if stat.S_ISDIR(st.st_mode):
            raise win_error(PermissionError, errno.EACCES, 5, "Access is denied", path)
        if self._violation(native, inside=False):
            raise win_error(PermissionError, errno.EACCES, 32, "The process cannot access the "
                            "file because it is being used by another process", path)
        if st.st_file_attributes & FILE_ATTRIBUTE_READONLY:
            raise win_error(PermissionError, errno.EACCES, 5, "Access is denied", path)
        os.unlink(native)

    def rmdir(self, path: str) -> None:
        native = self._native(path)
        st = self._win_stat(native, identity=True)
        if st.st_file_attributes & FILE_ATTRIBUTE_REPARSE_POINT:
            if os.path.isfile(native):  # a file symlink (a link to a folder whose target is
                raise win_error(NotADirectoryError, errno.ENOTDIR, 267,  # gone stays a folder
                                "The directory name is invalid", path)  # link on Windows)
            self._drop_link(native)  # the reparse point goes; the target stays
            return
        if self._violation(native, inside=False):
            raise win_error(PermissionError, errno.EACCES, 32, "The process cannot access the "
                            "file because it is being used by another process", path)
        try:
            os.rmdir(native)
        except OSError as exc:
            if exc.errno == errno.ENOTEMPTY:
                raise win_error(OSError, errno.ENOTEMPTY, 145, "The directory is not empty",
                                path) from None
            raise

    def _drop_link(self, native: str) -> None:
        st = os.lstat(native)
        os.unlink(native)
        key = f"{st.st_dev}:{st.st_ino}"
        if key in self.data["junctions"] or key in self.data.get("symlink_dirs", {}):
            with self._changing() as data:
                data["junctions"].pop(key, None)
                data.get("symlink_dirs", {}).pop(key, None)

    def rename(self, src: str, dst: str) -> None:
        n_src, n_dst = self._native(src), self._native(dst)
        if os.path.lexists(n_dst):
            raise win_error(FileExistsError, errno.EEXIST, 183, "Cannot create a file when "
                            "that file already exists", dst)
        if self._violation(n_src, inside=True):
            raise win_error(PermissionError, errno.EACCES, 5, "Access is denied", src)
        os.rename(n_src, n_dst)

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self._native(path, MAX_DIR_PATH))

    def open(self, path: str, flags: int, mode: int) -> int:
        native = self._native(path)
        fd = os.open(native, flags, 0o666)
        if flags & os.O_CREAT and not mode & stat.S_IWRITE:
            os.chmod(native, 0o444)
        return fd

    def chmod(self, path: str, mode: int) -> None:
        native = self._native(path)
        current = stat.S_IMODE(os.stat(native).st_mode)
        os.chmod(native, current | stat.S_IWUSR if mode & stat.S_IWRITE else current & ~0o222)

    def utime(self, path: str, ns: tuple[int, int]) -> None:
        os.utime(self._native(path), ns=ns)

    def readlink(self, path: str) -> str:
        native = self._native(path)
        st = os.lstat(native)
        if not stat.S_ISLNK(st.st_mode):
            raise win_error(OSError, errno.EINVAL, 4390, "The file or directory is not a "
                            "reparse point", path)
        target = self._junction(st)
        if target is not None:
            return EXTENDED + target if not target.startswith(EXTENDED) else target
        return os.readlink(native)

    def symlink(self, target: str, path: str, is_dir: bool) -> None:
        native = self._native(path)
        os.symlink(target, native)
        st = os.lstat(native)
        with self._changing() as data:
            data.setdefault("symlink_dirs", {})[f"{st.st_dev}:{st.st_ino}"] = is_dir

    def link(self, src: str, dst: str) -> None:
        os.link(self._native(src), self._native(dst), follow_symlinks=False)

    def create_junction(self, target: str, path: str) -> None:
        if target.startswith("\\??\\"):
            raise win_error(OSError, errno.EINVAL, 87, "The parameter is incorrect", target)
        resolved = self._native(target)
        if not os.path.isdir(resolved):  # GetFileAttributesW(src_path) must succeed
            raise win_error(FileNotFoundError, errno.ENOENT, 2, "The system cannot find the "
                            "file specified", target)
        native = self._native(path, MAX_DIR_PATH)
        os.symlink(resolved, native)  # CreateDirectoryW + FSCTL_SET_REPARSE_POINT
        st = os.lstat(native)
        with self._changing() as data:
            data["junctions"][f"{st.st_dev}:{st.st_ino}"] = target

    def set_link_times(self, path: str, atime_ns: int, mtime_ns: int) -> None:
        os.utime(self._native(path), ns=(atime_ns, mtime_ns), follow_symlinks=False)

    def send2trash(self, path: str) -> None:
        native = self._native(path)
        bin_dir = self.recycle_bin()
        bin_dir.mkdir(exist_ok=True)
        n = len(os.listdir(bin_dir))
        os.rename(native, bin_dir / f"{n}-{os.path.basename(native)}")

    # --- for the tests --------------------------------------------------------------------
    def make_junction(self, path: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        self.create_junction(str(target), str(path))

    def is_junction(self, path: str | os.PathLike[str]) -> bool:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        return stat.S_ISLNK(st.st_mode) and self._junction(st) is not None

    def junction_target(self, path: str | os.PathLike[str]) -> str | None:
        return self._junction(os.lstat(path))

    @property
    def violations(self) -> int:
        self.reload()
        count: int = self.data["violations"]
        return count
