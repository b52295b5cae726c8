"""The one seam per OS of the tree layer: which `Ops` the walker, copier and deleter use.

`Ops` speaks one vocabulary everywhere, the POSIX ``*at`` one: folders are descriptors, entries
are names relative to them. `posix.PosixOps` maps it 1:1 onto `os` (no cost: its attributes
*are* the `os` functions); `windows.WindowsOps` implements it on Windows with paths and the
platform's documented behaviour (junctions, `DirEntry` stats without st_dev, sharing violations,
read-only files, MAX_PATH). Tests run the same code through an OS double by installing a seam
built over it (`use`); nothing above this module knows which one it talks to.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from cachedoctor.errors import OperationFailed
from cachedoctor.fs.kinds import LinkKind


class InUseError(PermissionError, OperationFailed):
    """Another program holds the entry (a Windows sharing violation that outlasted the
    retries): the operation can be run again once it lets go. An OSError for the tree layer,
    a clear message (no traceback) for the CLI."""

    def __init__(self, code: int, strerror: str, filename: str | None) -> None:
        PermissionError.__init__(self, code, strerror, filename)
        self.message = f"{filename} is in use: {strerror}"
        self.hint = ("close the program that has it open (an antivirus scan ends by itself), "
                     "then run the same command again: it carries on from where it stopped")

    def __str__(self) -> str:
        return OperationFailed.__str__(self)


# count_folder(fd, root_dev, one_file_system) of cachedoctor/fs/_native.c: (blocks, size, files,
# dirs, newest mtime, subfolders [(name, dev, ino)], hard-linked [(dev, ino, blocks, size,
# mtime)], failures [(name, errno)])
FolderCounter = Callable[[int, int, bool], tuple[int, int, int, int, float,
                                               list[tuple[str, int, int]],
                                               list[tuple[int, int, int, int, float]],
                                               list[tuple[str, int]]]]
# list_folder(fd, prefix, make_entry, block_unit) of cachedoctor/fs/_native.c: (entries made by
# make_entry(rel, is_dir, is_link, is_file, allocated, atime, mtime, (dev, ino), nlink, target),
# the subfolders among them [(name, entry)], failures [(name, errno)])
FolderLister = Callable[[int, str, Callable[..., Any], int],
                        tuple[list[Any], list[tuple[str, Any]], list[tuple[str, int]]]]


class Ops:
    """What the tree layer needs from an OS. Hot functions are plain attributes (so POSIX
    binds the `os` functions themselves); the rest are methods."""

    name = "posix"
    listing_identity = True  # lstat() of a listing carries st_dev/st_ino/st_nlink
    block_unit = 512  # st_blocks * block_unit = allocated bytes
    can_fork = False
    modes_meaningful = True  # chmod bits mean something (Windows: only the read-only flag)
    probes_locks = True  # flock can be probed (POSIX); Windows: sharing violations instead
    trash_by_path = False  # the trash takes a path (Windows' Recycle Bin), not (fd, name)
    os_descriptors = True  # folder descriptors are the OS's: `os.open(name, dir_fd=fd)` works

    listdir: Callable[[int], list[str]]
    lstat: Callable[..., Any]  # lstat(name, *, dir_fd): the listing stat
    lstat_full: Callable[..., Any]  # lstat_full(name, *, dir_fd): with identity and nlink
    fstat: Callable[[int], Any]
    close: Callable[[int], None]
    unlink: Callable[..., None]  # unlink(name, *, dir_fd): a file or a link, never a folder
    rmdir: Callable[..., None]  # rmdir(name, *, dir_fd)

    def folder_counter(self) -> FolderCounter | None:
        """The compiled per-folder count of the measuring walk (`cachedoctor/fs/_native.c`),
        or None: the walk then lists and stats through `listdir` and `lstat`."""
        return None

    def folder_lister(self) -> FolderLister | None:
        """The compiled per-folder listing of the unit listing (`cachedoctor/fs/_native.c`),
        or None: the listing then uses `listdir`, `lstat` and `readlink`."""
        return None

    # --- folders ---------------------------------------------------------------------------
    def open_root(self, path: str) -> int:
        """A descriptor on the folder `path`, refusing a link there (OSError ELOOP/ENOTDIR)."""
        raise NotImplementedError

    def open_dir(self, name: str, dir_fd: int) -> int:
        """A descriptor on the subfolder `name`, refusing a link (OSError ELOOP/ENOTDIR)."""
        raise NotImplementedError

    def mkdir(self, name: str, mode: int, *, dir_fd: int) -> None:
        raise NotImplementedError

    def make_writable(self, fd: int, st: Any) -> None:
        """Let the owner remove entries of the folder open as `fd` (a 0555 Go module folder)."""

    # --- entries ---------------------------------------------------------------------------
    def open_file(self, name: str, flags: int, mode: int = 0o600, *, dir_fd: int) -> int:
        raise NotImplementedError

    def readlink(self, name: str, *, dir_fd: int) -> str:
        raise NotImplementedError

    def copy_link(self, st: Any, target: str, name: str, *, dir_fd: int, owner: bool) -> None:
        """Make `name` a link like the one `st` describes (its kind, target and times)."""
        raise NotImplementedError

    def hardlink(self, existing: str, name: str, *, dir_fd: int) -> None:
        raise NotImplementedError

    def make_special(self, st: Any, name: str, *, dir_fd: int, modes: bool) -> bool:
        """Recreate a FIFO (or, as root, a device) like `st`; False where that is not possible."""
        return False

    def access(self, name: str, mode: int, *, dir_fd: int) -> bool:
        raise NotImplementedError

    def read_head(self, name: str, limit: int, *, dir_fd: int) -> bytes | None:
        """The first `limit` bytes of the regular file `name`, never through a link; None
        when it is something else or cannot be read (a marker file: absent is an answer)."""
        raise NotImplementedError

    # --- metadata --------------------------------------------------------------------------
    def finish_file(self, fd: int, name: str, dir_fd: int, st: Any, *, modes: bool,
                    owner: bool) -> None:
        """Give the copy open as `fd` the original's owner (as root), mode and times; close it."""
        raise NotImplementedError

    def finish_dir(self, fd: int, st: Any, *, modes: bool, owner: bool) -> None:
        """The same for a copied folder (still open as `fd`; the caller closes it)."""
        raise NotImplementedError

    def copy_xattrs(self, src_fd: int, dst_fd: int) -> int:
        """Copy extended attributes between two open entries; returns how many failed."""
        return 0

    # --- data ------------------------------------------------------------------------------
    def copy_data(self, fin: int, fout: int, size: int) -> None:
        raise NotImplementedError

    def clone_file(self, fin: int, name: str, *, dir_fd: int) -> bool:
        """Make `name` a copy-on-write clone of `fin` where the filesystem can; False if not."""
        return False

    def flush_file(self, fd: int) -> None:
        """Flush one copied file where the whole tree cannot be flushed at once afterwards."""

    def make_durable(self, path: str) -> str:
        raise NotImplementedError

    # --- the cache's surroundings ----------------------------------------------------------
    def mount_id(self, fd: int) -> int | None:
        return None

    def mounts_below(self, root: str) -> bool | None:
        """Whether a mount point lies strictly below `root`; None when unknown."""
        return None

    def flocked_inodes(self) -> frozenset[int] | None:
        return None

    def is_locked(self, dir_fd: int, name: str) -> bool:
        return False

    def trash_path(self, path: str) -> None:
        """Send one entry (by path) to the platform's trash (Windows: the Recycle Bin)."""
        raise NotImplementedError

    # --- paths (for the few steps outside a walk: the journal's renames, links) ------------
    def lstat_path(self, path: str) -> Any:
        raise NotImplementedError

    def rename_path(self, src: str, dst: str) -> None:
        raise NotImplementedError

    def rmdir_path(self, path: str) -> None:
        raise NotImplementedError

    def unlink_path(self, path: str) -> None:
        raise NotImplementedError

    def readlink_path(self, path: str) -> str:
        raise NotImplementedError

    def create_link(self, path: str, target: str, kind: LinkKind) -> None:
        raise NotImplementedError

    def remove_link(self, path: str, st: Any) -> None:
        raise NotImplementedError


_current: Ops | None = None


def native() -> Ops:
    """The seam of the OS this process runs on."""
    if sys.platform == "win32":  # pragma: no cover - Windows only
        from cachedoctor.fs.windows import WindowsOps

        return WindowsOps()
    from cachedoctor.fs.posix import LinuxOps, MacOps, PosixOps

    if sys.platform.startswith("linux"):
        return LinuxOps()
    if sys.platform == "darwin":  # pragma: no cover - macOS only
        return MacOps()
    return PosixOps()  # pragma: no cover


def current() -> Ops:
    global _current
    if _current is None:
        _current = native()
    return _current


def use(ops: Ops | None) -> Ops | None:
    """Install `ops` (None: the native one again); returns the previous seam. For tests and
    their OS doubles, and for nothing else."""
    global _current
    previous, _current = _current, ops
    return previous


def rename(src: str, dst: str) -> None:
    """Rename a path through the seam (Windows: retried while another program holds it)."""
    current().rename_path(src, dst)


__all__ = ["FolderCounter", "FolderLister", "InUseError", "Ops", "current", "native", "rename", "use"]
