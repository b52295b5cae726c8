"""What a tree holds before it is moved: sizes (hard links once), what cannot be read, and what
a destination would have to hold for it (links, hard links, sparse files, depth, long paths,
names that differ only in case or use characters Windows reserves). A visitor of `fs.walk`."""

from __future__ import annotations

import os
import stat
from typing import Any

import msgspec

from cachedoctor.fs import kinds
from cachedoctor.fs.walk import Frame, Task, TreeWalk, join_rel

_REMOVE_ENTRIES = os.W_OK | os.X_OK  # what removing a folder's entries takes (POSIX)
RESERVED_CHARS = '\\:*?"<>|'  # what Windows (NTFS through Win32, exFAT, FAT) refuses in a name


class LookFor(msgspec.Struct, frozen=True):
    """Costlier facts the survey gathers only when the destination needs them."""

    xattrs: bool = False  # entries carrying extended attributes (one listxattr per entry)
    case: bool = False  # names in one folder that differ only in case
    reserved: str = ""  # characters the destination refuses in names


class Survey(msgspec.Struct):
    """What a tree holds (hard links once), and what could not be read."""

    files: int = 0
    dirs: int = 0
    allocated_bytes: int = 0
    apparent_bytes: int = 0
    unreadable: list[str] = msgspec.field(default_factory=list)
    undeletable: list[str] = msgspec.field(default_factory=list)  # folders whose entries we cannot remove
    skipped: list[str] = msgspec.field(default_factory=list)  # sockets: not copyable, not data
    symlinks: int = 0
    junctions: int = 0
    hardlinked_names: int = 0  # names beyond the first of a hard-linked file
    hardlinked_bytes: int = 0  # what those names take when each is a file of its own
    specials: int = 0  # FIFOs and devices
    sparse_files: int = 0
    sparse_bytes: int = 0  # apparent - allocated bytes of sparse files (holes)
    deepest: int = 0  # folders below the root
    longest_path: int = 0  # characters of the longest path relative to the root
    mounts: list[str] = msgspec.field(default_factory=list)  # other filesystems mounted inside
    too_deep: list[str] = msgspec.field(default_factory=list)
    with_xattrs: int = 0
    case_clashes: list[str] = msgspec.field(default_factory=list)
    reserved_names: list[str] = msgspec.field(default_factory=list)

    @property
    def links(self) -> int:
        return self.symlinks + self.junctions


def survey(root: str, look_for: LookFor = LookFor()) -> Survey:
    """Walk `root` (never following links) counting sizes and checking every entry is readable."""
    walk = _Survey(root, look_for)
    walk.run()
    return walk.result


class _Survey(TreeWalk):
    check_mounts = True

    def __init__(self, root: str, look_for: LookFor) -> None:
        super().__init__(root)
        self.look_for = look_for
        self.result = Survey()
        self.seen: set[tuple[int, int]] = set()

    def run(self) -> None:
        ops, result = self.ops, self.result
        try:
            top = ops.lstat_path(self.root)
        except OSError as exc:
            result.unreadable.append(f"{self.root}: {exc.strerror}")
            return
        self._count(top, "")
        if not kinds.is_real_dir(top):
            return
        if ops.modes_meaningful and not os.access(self.root, _REMOVE_ENTRIES) \
                and not _can_make_writable(top, self.root):
            result.undeletable.append(self.root)
        self._walk_root()

    def _count(self, st: Any, rel: str) -> None:
        result = self.result
        if not self.ops.listing_identity and stat.S_ISREG(st.st_mode) and rel:
            st = self.ops.lstat_path(self.path_of(rel))  # Windows: nlink and ino by lstat
        if stat.S_ISDIR(st.st_mode):
            result.dirs += 1
        else:
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in self.seen:
                    result.hardlinked_names += 1
                    result.hardlinked_bytes += st.st_blocks * self.ops.block_unit
                    return
                self.seen.add(key)
            result.files += 1
        allocated = st.st_blocks * self.ops.block_unit
        result.apparent_bytes += st.st_size
        result.allocated_bytes += allocated
        if stat.S_ISREG(st.st_mode) and allocated < st.st_size and self.ops.block_unit > 1:
            result.sparse_files += 1
            result.sparse_bytes += st.st_size - allocated

    # engine hooks
    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        frame.names = self._list(frame)
        result = self.result
        result.deepest = max(result.deepest, frame.depth)
        if self.look_for.case:
            seen: dict[str, str] = {}
            for name in frame.names:
                other = seen.setdefault(name.casefold(), name)
                if other != name:
                    result.case_clashes.append(self.path_of(join_rel(frame.rel, name)))

    def _error(self, rel: str, exc: OSError) -> None:
        self.result.unreadable.append(f"{self.path_of(rel)}: {exc.strerror}")

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        path = self.path_of(rel)
        if reason == "other filesystem":
            self.result.mounts.append(path)
        elif reason == "too deep":
            self.result.too_deep.append(f"{path}: {detail}")
        else:
            self.result.unreadable.append(f"{path}: {detail}")

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        ops, result, look = self.ops, self.result, self.look_for
        fd = frame.fd
        names = frame.names
        while frame.index < len(names):
            name = names[frame.index]
            frame.index += 1
            rel = join_rel(frame.rel, name)
            try:
                st = ops.lstat(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                self._error(rel, exc)
                continue
            result.longest_path = max(result.longest_path, len(rel))
            if look.reserved and any(c in name for c in look.reserved):
                result.reserved_names.append(self.path_of(rel))
            if look.xattrs and _has_xattrs(self.path_of(rel)):
                result.with_xattrs += 1
            kind = kinds.link_kind_of(st)
            if kind == "junction":
                result.junctions += 1
            elif kind == "symlink":
                result.symlinks += 1
            self._count(st, rel)
            if kinds.is_real_dir(st):
                if ops.modes_meaningful and not ops.access(name, _REMOVE_ENTRIES, dir_fd=fd) \
                        and not _can_make_writable(st, name, fd):
                    result.undeletable.append(self.path_of(rel))
                child = self._open(frame, name, rel, st)
                if child is not None:
                    frames.append(child)
                    return True
            elif stat.S_ISREG(st.st_mode) and not ops.access(name, os.R_OK, dir_fd=fd):
                result.unreadable.append(f"{self.path_of(rel)}: permission denied")
            elif stat.S_ISSOCK(st.st_mode):
                result.skipped.append(self.path_of(rel))
            elif not stat.S_ISREG(st.st_mode) and not kind:
                result.specials += 1
        return False


def _can_make_writable(st: Any, name: str, dir_fd: int | None = None) -> bool:
    """Whether the deleter can give the folder write permission back before emptying it, as it
    does for a Go module cache's 0555 folders: only the owner can, and not when the folder is
    immutable (chmod to its own mode is harmless and fails with EPERM then)."""
    if st.st_uid != os.geteuid():
        return False
    try:
        os.chmod(name, stat.S_IMODE(st.st_mode), dir_fd=dir_fd)
    except OSError:
        return False
    return True


def _has_xattrs(path: str) -> bool:
    listxattr = getattr(os, "listxattr", None)
    if listxattr is None:
        return False
    try:
        return bool(listxattr(path, follow_symlinks=False))
    except OSError:
        return False
