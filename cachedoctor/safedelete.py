"""The deleter that cannot be aimed outside a cache.

Every operation below a cache root is relative to an open directory file descriptor:

* directories are opened with ``O_RDONLY | O_DIRECTORY | O_NOFOLLOW`` relative to their parent's
  fd, then ``fstat``-ed and compared (st_dev, st_ino) with the ``lstat`` seen while listing the
  parent, so a directory swapped for a link (or another directory) between listing and opening
  is skipped, not entered (no check-then-use race);
* entries are removed with ``unlink(name, dir_fd=...)`` / ``rmdir(name, dir_fd=...)``: a symlink
  is removed as a link (its target untouched) and a hard link loses one name only;
* a directory on another device than the root (a nested mount) is never entered;
* the root itself is never removed;
* a regular file that another process holds with ``flock`` is skipped and reported.

The same walk serves planning (``dry_run=True``: nothing is changed, every candidate is
reported) and deleting. On Windows the walk is path-based behind the same interface
(`_WindowsOps`): reparse points (junctions, symlinks) are removed as links, never entered, and a
file in use (PermissionError) is reported as skipped.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

SkipReason = Literal["locked", "in use", "other filesystem", "changed", "kept", "error"]

_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_PROBE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
FILE_ATTRIBUTE_REPARSE_POINT = 0x400


@dataclass(frozen=True)
class FileInfo:
    """One non-directory entry found under the root (times and size from its lstat)."""

    rel: str  # relative to the root, '/'-separated
    size: int  # allocated bytes (st_blocks * 512; st_size where blocks are unknown)
    atime: float
    mtime: float
    ctime: float
    dev: int
    ino: int
    nlink: int
    is_link: bool

    @property
    def last_used(self) -> float:
        """The LRU key: access time, or modification time when that is newer (noatime mounts)."""
        return max(self.atime, self.mtime)


@dataclass(frozen=True)
class Skipped:
    rel: str
    reason: SkipReason
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"path": self.rel, "reason": self.reason, "detail": self.detail}


@dataclass
class DeleteResult:
    root: str
    files: int = 0  # non-directory entries removed (or that would be, in a dry run)
    dirs: int = 0  # directories removed
    bytes: int = 0  # allocated bytes of what was removed; hard links counted once
    total_bytes: int = 0  # allocated bytes of the whole tree, root folder included (like du)
    kept: int = 0  # entries left alone by `keep`/`only` globs or the selection
    skipped: list[Skipped] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    removed: list[FileInfo] = field(default_factory=list)  # only when `collect` is set

    @property
    def partial(self) -> bool:
        return bool(self.errors)


@dataclass(frozen=True)
class Rules:
    """Which entries may go: `keep` globs are never deleted; with `only`, only those are.

    A pattern without '/' matches any path component (`*.lock`, `selfcheck.json`); a pattern
    with '/' matches the path relative to the root (`http/*`, `wheels/**`). A directory that
    matches `keep` is not entered; everything below a directory matching `only` is selected.
    """

    keep: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    exclude: frozenset[str] = frozenset()  # exact relative paths never touched (nested locations)

    def _match(self, rel: str, patterns: tuple[str, ...]) -> bool:
        name = rel.rsplit("/", 1)[-1]
        for pattern in patterns:
            pat = pattern.strip("/")
            if pat.endswith("/**"):
                pat = pat[:-3]
            if "/" in pat:
                if fnmatch.fnmatchcase(rel, pat):
                    return True
            elif fnmatch.fnmatchcase(name, pat):
                return True
        return False

    def kept(self, rel: str) -> bool:
        return rel in self.exclude or (bool(self.keep) and self._match(rel, self.keep))

    def in_only(self, rel: str) -> bool:
        return not self.only or self._match(rel, self.only)


Selector = Callable[[FileInfo], bool]


_HAS_BLOCKS = hasattr(os.stat_result, "st_blocks")
WORKERS = 2  # threads for the top-level folders; more gains nothing on a single disk
_PROC_LOCKS = "/proc/locks"


def _flocked_inodes() -> frozenset[int] | None:
    """Inode numbers that hold a flock right now (Linux /proc/locks), or None when unknown.

    Used as a pre-filter: only files whose inode is listed get the real flock probe, which is
    what decides. Device numbers are ignored (overlay and btrfs report other ones), so a match
    on another filesystem costs one extra probe, never a wrong answer.
    """
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


def _is_locked_posix(dir_fd: int, name: str) -> bool:
    """True when another open file description holds a flock on the file (probe, then release)."""
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


def _info(rel: str, st: os.stat_result) -> FileInfo:
    blocks = getattr(st, "st_blocks", None)
    size = blocks * 512 if blocks is not None else st.st_size
    return FileInfo(
        rel,
        size,
        st.st_atime,
        st.st_mtime,
        st.st_ctime,
        st.st_dev,
        st.st_ino,
        st.st_nlink,
        stat.S_ISLNK(st.st_mode),
    )


class _Frame:
    __slots__ = (
        "deleted",
        "entries",
        "fd",
        "index",
        "name",
        "owned",
        "rel",
        "remaining",
        "selected_all",
    )

    def __init__(
        self,
        fd: int,
        rel: str,
        name: str,
        entries: list[os.DirEntry[str]],
        selected_all: bool,
        owned: bool = True,
    ) -> None:
        self.fd = fd
        self.rel = rel
        self.name = name
        self.entries = entries
        self.index = 0
        self.deleted = 0
        self.remaining = 0  # entries that stay (kept, skipped, not selected, failed)
        self.selected_all = selected_all
        self.owned = owned  # opened by the walk: closed (and maybe removed) when done


def clean_tree(
    root: str,
    *,
    rules: Rules = Rules(),
    select: Selector | None = None,
    dry_run: bool = False,
    trash: bool = False,
    expect: tuple[int, int] | None = None,
    collect: bool = False,
    check_locks: bool = True,
) -> DeleteResult:
    """Delete the entries below `root` (never `root` itself) that the rules and `select` allow.

    `select` (default: everything) decides per non-directory entry; directories are removed
    when they end up empty — all of them when `select` is None, otherwise only those in which
    something was deleted. `expect` is the root's (st_dev, st_ino) seen at planning time: a root
    replaced since then is refused. With `trash`, entries go to the OS trash (send2trash)
    instead. With `collect`, every removed (or, dry run, selected) entry is listed in `removed`.
    """
    if os.name == "nt":  # pragma: no cover - exercised on Windows only
        return _WindowsOps(root, rules, select, dry_run, trash, collect).run()
    return _PosixWalk(root, rules, select, dry_run, trash, expect, collect, check_locks).run()


class _PosixWalk:
    def __init__(
        self,
        root: str,
        rules: Rules,
        select: Selector | None,
        dry_run: bool,
        trash: bool,
        expect: tuple[int, int] | None,
        collect: bool,
        check_locks: bool,
    ) -> None:
        self.root = root
        self.rules = rules
        self.select = select
        self.dry_run = dry_run
        self.trash = trash
        self.expect = expect
        self.collect = collect
        self.check_locks = check_locks
        self.result = DeleteResult(root=root)
        self.seen_inodes: set[tuple[int, int]] = set()
        self.root_dev = 0
        self.locked_inodes: frozenset[int] | None = None

    def run(self) -> DeleteResult:
        try:
            root_fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.result.errors.append(f"{self.root}: is a link; refusing to clean through it")
            elif exc.errno == errno.ENOENT:
                return self.result  # nothing to clean
            else:
                self.result.errors.append(f"{self.root}: {exc.strerror}")
            return self.result
        st = os.fstat(root_fd)
        if self.expect is not None and (st.st_dev, st.st_ino) != self.expect:
            os.close(root_fd)
            self.result.errors.append(f"{self.root}: the folder was replaced since it was planned")
            return self.result
        self.root_dev = st.st_dev
        self.result.total_bytes += getattr(st, "st_blocks", 0) * 512  # measured like du / scan
        try:
            self._walk_root(root_fd)
        finally:
            os.close(root_fd)
        return self.result

    def _walk_root(self, root_fd: int) -> None:
        """Files of the root here; each top-level folder as its own task (threads when several).

        unlink/stat release the GIL, so a second worker overlaps its system calls with the
        first one's Python work; every worker still acts only through fds below `root_fd`.
        """
        entries = self._list(root_fd, "")
        dirs: list[tuple[os.DirEntry[str], os.stat_result]] = []
        others: list[os.DirEntry[str]] = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode) and not self.rules.kept(entry.name):
                        dirs.append((entry, st))
                        continue
            except OSError:
                pass
            others.append(entry)  # files, links, kept folders: the ordinary loop decides
        root = _Frame(root_fd, "", "", others, selected_all=not self.rules.only, owned=False)
        self._loop([root], base=0)
        workers = min(WORKERS, len(dirs))
        if workers > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers) as pool:
                outcomes = list(pool.map(lambda d: self._subtree(root_fd, *d), dirs))
        else:
            outcomes = [self._subtree(root_fd, entry, st) for entry, st in dirs]
        for result in outcomes:
            self._merge(result)

    def _subtree(self, root_fd: int, entry: os.DirEntry[str], st: os.stat_result) -> DeleteResult:
        """Walk one top-level folder with a private result (merged by the caller)."""
        worker = _PosixWalk(
            self.root,
            self.rules,
            self.select,
            self.dry_run,
            self.trash,
            None,
            self.collect,
            self.check_locks,
        )
        worker.root_dev = self.root_dev
        worker.seen_inodes = self.seen_inodes  # shared: set.add is atomic under the GIL
        parent = _Frame(root_fd, "", "", [], selected_all=not self.rules.only, owned=False)
        frames = [parent]
        if worker._enter(frames, parent, entry.name, entry.name, st):
            worker._loop(frames, base=1)
        return worker.result

    def _merge(self, other: DeleteResult) -> None:
        r = self.result
        r.files += other.files
        r.dirs += other.dirs
        r.bytes += other.bytes
        r.total_bytes += other.total_bytes
        r.kept += other.kept
        r.skipped.extend(other.skipped)
        r.errors.extend(other.errors)
        r.removed.extend(other.removed)

    def _list(self, fd: int, rel: str) -> list[os.DirEntry[str]]:
        if self.check_locks:
            self.locked_inodes = _flocked_inodes()
        try:
            with os.scandir(fd) as it:
                return list(it)
        except OSError as exc:
            self.result.errors.append(f"{self._path(rel)}: {exc.strerror}")
            return []

    def _path(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _loop(self, frames: list[_Frame], base: int) -> None:
        """Depth-first, post-order, until only `base` frames are left (those are not closed)."""
        result = self.result
        rules = self.rules
        has_keep = bool(rules.keep or rules.exclude)
        detail = self.select is not None or self.collect
        select = self.select
        check_locks = self.check_locks
        fast_unlink = not self.dry_run and not self.trash
        unlink = os.unlink
        s_isdir, s_isreg = stat.S_ISDIR, stat.S_ISREG
        while len(frames) > base:
            frame = frames[-1]
            entries = frame.entries
            count = len(entries)
            fd = frame.fd
            prefix = f"{frame.rel}/" if frame.rel else ""
            pushed = False
            while frame.index < count:  # the files of one folder in a tight loop
                entry = entries[frame.index]
                frame.index += 1
                name = entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    if exc.errno != errno.ENOENT:
                        result.errors.append(f"{self._path(prefix + name)}: {exc.strerror}")
                        frame.remaining += 1
                    continue
                if has_keep and rules.kept(prefix + name):
                    result.kept += 1
                    frame.remaining += 1
                    continue
                if s_isdir(st.st_mode):
                    if self._enter(frames, frame, name, prefix + name, st):
                        pushed = True
                        break
                    frame.remaining += 1
                    continue
                size = st.st_blocks * 512 if _HAS_BLOCKS else st.st_size
                result.total_bytes += size
                if not (frame.selected_all or rules.in_only(prefix + name)):
                    result.kept += 1
                    frame.remaining += 1
                    continue
                info = _info(prefix + name, st) if detail else None
                if select is not None and info is not None and not select(info):
                    result.kept += 1
                    frame.remaining += 1
                    continue
                if (
                    check_locks
                    and s_isreg(st.st_mode)
                    and (self.locked_inodes is None or st.st_ino in self.locked_inodes)
                    and _is_locked_posix(fd, name)
                ):
                    result.skipped.append(
                        Skipped(prefix + name, "locked", "held with flock by another process")
                    )
                    frame.remaining += 1
                    continue
                if fast_unlink:
                    try:
                        unlink(name, dir_fd=fd)
                    except FileNotFoundError:
                        frame.remaining += 1
                        continue
                    except OSError as exc:
                        result.errors.append(f"{self._path(prefix + name)}: {exc.strerror}")
                        frame.remaining += 1
                        continue
                elif not self.dry_run and not self._remove_file(fd, name, prefix + name, st):
                    frame.remaining += 1
                    continue
                frame.deleted += 1
                result.files += 1
                if st.st_nlink > 1:
                    key = (st.st_dev, st.st_ino)
                    if key in self.seen_inodes:
                        size = 0
                    self.seen_inodes.add(key)
                result.bytes += size
                if info is not None and self.collect:
                    result.removed.append(info)
            if pushed:
                continue
            frames.pop()
            if frame.owned:
                os.close(fd)
                if frames:
                    self._maybe_rmdir(frames[-1], frame)

    def _enter(
        self, frames: list[_Frame], parent: _Frame, name: str, rel: str, st: os.stat_result
    ) -> bool:
        """Open a subdirectory (no links, same device, same inode as listed) and push it."""
        result = self.result
        if st.st_dev != self.root_dev:
            result.skipped.append(Skipped(rel, "other filesystem", "a mount point; not entered"))
            return False
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                result.skipped.append(
                    Skipped(rel, "changed", "replaced while cleaning; not entered")
                )
            else:
                result.errors.append(f"{self._path(rel)}: {exc.strerror}")
            return False
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            result.skipped.append(Skipped(rel, "changed", "replaced while cleaning; not entered"))
            return False
        result.total_bytes += getattr(st, "st_blocks", 0) * 512
        selected_all = parent.selected_all or (bool(self.rules.only) and self.rules.in_only(rel))
        frames.append(_Frame(fd, rel, name, self._list(fd, rel), selected_all))
        return True

    def _maybe_rmdir(self, parent: _Frame, child: _Frame) -> None:
        """Remove a folder the walk emptied (all of them when no selection is given)."""
        removable = (
            child.remaining == 0
            and child.selected_all  # with `only`, a folder goes only when it matched
            and (self.select is None or child.deleted > 0)  # a selection removes what it emptied
        )
        if not removable:
            parent.remaining += 1
            return
        if not self.dry_run:
            try:
                os.rmdir(child.name, dir_fd=parent.fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY):
                    self.result.errors.append(f"{self._path(child.rel)}: {exc.strerror}")
                parent.remaining += 1
                return
        parent.deleted += 1
        self.result.dirs += 1

    def _remove_file(self, dir_fd: int, name: str, rel: str, st: os.stat_result) -> bool:
        try:
            if self.trash:
                return self._trash(dir_fd, name, rel, st)
            os.unlink(name, dir_fd=dir_fd)
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            self.result.errors.append(f"{self._path(rel)}: {exc.strerror}")
            return False

    def _trash(self, dir_fd: int, name: str, rel: str, st: os.stat_result) -> bool:
        """send2trash works on paths: re-check that the path still names the entry we listed."""
        from send2trash import send2trash

        path = self._path(rel)
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            self.result.skipped.append(Skipped(rel, "changed", "replaced while cleaning"))
            return False
        send2trash(path)
        return True


class _WindowsOps:  # pragma: no cover - exercised on Windows only
    """Path-based walk for Windows, where there is no dir_fd: reparse points are never entered."""

    def __init__(
        self,
        root: str,
        rules: Rules,
        select: Selector | None,
        dry_run: bool,
        trash: bool,
        collect: bool,
    ) -> None:
        self.root = root
        self.rules = rules
        self.select = select
        self.dry_run = dry_run
        self.trash = trash
        self.collect = collect
        self.result = DeleteResult(root=root)

    def run(self) -> DeleteResult:
        try:
            top = os.lstat(self.root)
        except FileNotFoundError:
            return self.result
        if is_reparse_point(top):
            self.result.errors.append(
                f"{self.root}: is a link or junction; refusing to clean through it"
            )
            return self.result
        self._dir(self.root, "", top.st_dev, not self.rules.only)
        return self.result

    def _dir(self, path: str, rel: str, dev: int, selected_all: bool) -> int:
        deleted = 0
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            self.result.errors.append(f"{path}: {exc.strerror}")
            return 0
        for entry in entries:
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if self.rules.kept(child_rel):
                self.result.kept += 1
                continue
            link = is_reparse_point(st)
            if stat.S_ISDIR(st.st_mode) and not link:
                if st.st_dev != dev:
                    self.result.skipped.append(Skipped(child_rel, "other filesystem"))
                    continue
                sub_all = selected_all or self.rules.in_only(child_rel)
                removed_inside = self._dir(entry.path, child_rel, dev, sub_all)
                if (self.select is None or removed_inside) and sub_all and not self.dry_run:
                    try:
                        os.rmdir(entry.path)
                        self.result.dirs += 1
                        deleted += 1
                    except OSError:
                        pass
                continue
            if not (selected_all or self.rules.in_only(child_rel)):
                self.result.kept += 1
                continue
            info = _info(child_rel, st)
            self.result.total_bytes += info.size
            if self.select is not None and not self.select(info):
                self.result.kept += 1
                continue
            if not self.dry_run:
                try:
                    if self.trash:
                        from send2trash import send2trash

                        send2trash(entry.path)
                    elif link and _is_dir_link(st):
                        os.rmdir(
                            entry.path
                        )  # a junction or directory symlink: remove the link only
                    else:
                        os.unlink(entry.path)
                except PermissionError:
                    self.result.skipped.append(
                        Skipped(child_rel, "in use", "open in another program")
                    )
                    continue
                except OSError as exc:
                    self.result.errors.append(f"{entry.path}: {exc.strerror}")
                    continue
            deleted += 1
            self.result.files += 1
            self.result.bytes += info.size
            if self.collect:
                self.result.removed.append(info)
        return deleted


def is_reparse_point(st: os.stat_result) -> bool:
    """A Windows junction or symlink (or a POSIX symlink): removed as a link, never entered."""
    attrs = getattr(st, "st_file_attributes", 0)
    return bool(attrs & FILE_ATTRIBUTE_REPARSE_POINT) or stat.S_ISLNK(st.st_mode)


def _is_dir_link(st: os.stat_result) -> bool:
    """A reparse point that is a directory (a junction, or a symlink to a folder) needs rmdir."""
    attrs = getattr(st, "st_file_attributes", 0)
    return bool(attrs & FILE_ATTRIBUTE_REPARSE_POINT) and bool(
        attrs & stat.FILE_ATTRIBUTE_DIRECTORY
    )


def walk_files(root: str, *, rules: Rules = Rules()) -> DeleteResult:
    """Read-only listing with the same rules: every non-directory entry that could go (`removed`)."""
    return clean_tree(root, rules=rules, dry_run=True, collect=True, check_locks=False)


__all__: Sequence[str] = (
    "DeleteResult",
    "FileInfo",
    "Rules",
    "Skipped",
    "clean_tree",
    "is_reparse_point",
    "walk_files",
)
