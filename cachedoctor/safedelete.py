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

How it is fast (Linux): names come from ``os.listdir(fd)`` (no DirEntry objects) and each entry
costs one ``fstatat`` (needed: the type without trusting d_type, the byte count, the hard-link
dedup, the inode for the lock pre-filter) and one ``unlinkat``; the cyclic garbage collector is
paused during the walk; a big tree is split over forked worker processes (one per usable CPU,
at most `MAX_WORKERS`): the parent handles the top of the tree until it has enough folders,
then the workers pull those folders from a shared pipe, each acting only through descriptors
inherited from the parent (the folder's parent fd) and its own O_NOFOLLOW opens below them.
Counts, skipped entries and hard-linked inodes come back on a pipe per worker and are merged
(see `DeleteResult.bytes` for hard links, exact across workers too). A worker that dies leaves its folders to the
parent, which walks them again itself.

The same walk serves planning (``dry_run=True``: nothing is changed, every candidate is
reported), deleting and trashing (``trash=True``: `cachedoctor.trash` renames each entry into
the trash relative to the same verified folder descriptor, so trashing is as link-proof as
deleting; an entry whose filesystem has no usable trash is skipped, reason ``no trash``). On
Windows the walk is path-based behind the same interface (`_WindowsOps`): reparse points
(junctions, symlinks) are removed as links, never entered, a file in use (PermissionError) is
reported as skipped, and trashing re-checks the folders on the path just before send2trash.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import gc
import os
import stat
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from cachedoctor.trash import Trasher

SkipReason = Literal[
    "locked", "in use", "other filesystem", "changed", "kept", "error", "no trash"
]

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
_IFMT, _IFDIR, _IFREG = 0o170000, 0o040000, 0o100000


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
    # allocated bytes freed (dry run: that would be): a file counts when its last name goes, so
    # a hard-linked file counts once when all its names are removed, and not at all when a
    # name stays (outside the cache, kept or skipped) — removing the others frees nothing
    bytes: int = 0
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
WORKERS = 2  # threads for the top-level folders where there is no fork (trash mode, macOS)
MAX_WORKERS = 4  # forked workers (Linux): one per usable CPU, at most this many
TASKS_PER_WORKER = 8  # the parent opens folders level by level until it has this many per worker
MAX_EXPAND_DEPTH = 4  # ...but never deeper than this below the root
_TASK = 4  # bytes per task record on the shared pipe (a folder index)
_PROC_LOCKS = "/proc/locks"
LOCKS_REFRESH = 0.02  # seconds a /proc/locks reading is reused (re-read per folder after that)


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


_MOUNTINFO = "/proc/self/mountinfo"


def _mounts_below(root: str) -> bool | None:
    """Whether a mount point lies strictly below `root` (Linux mountinfo), None when unknown.

    A bind mount of a folder of the same filesystem keeps its st_dev, so the device check alone
    would walk into it (and empty the folder it shows); when the table lists a mount below the
    root, every folder's mount id is compared with the root's (`_mount_id`)."""
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
        point = _unescape_mount(parts[4]) + b"/"
        if point.startswith(prefix) and point != prefix:
            return True
    return False


def _unescape_mount(field: bytes) -> bytes:
    """mountinfo escapes space, tab, newline and backslash as octal (`\\040`)."""
    if b"\\" not in field:
        return field
    out = bytearray()
    i = 0
    while i < len(field):
        if field[i] == 0x5C and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(int(field[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)


def _mount_id(fd: int) -> int | None:
    """The mount an open descriptor is on (Linux /proc/self/fdinfo), None when unknown."""
    try:
        info = os.open(f"/proc/self/fdinfo/{fd}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
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
        entries: list[str],
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


class _Task:
    """A folder left for a worker: its parent frame (open fd), name and lstat at listing time."""

    __slots__ = ("name", "parent", "rel", "st")

    def __init__(self, parent: _Frame, name: str, rel: str, st: os.stat_result) -> None:
        self.parent = parent
        self.name = name
        self.rel = rel
        self.st = st


# What a forked worker sends back: its result, the tasks it finished (index -> folder removed),
# and the hard-linked files it removed ((dev, ino) -> [bytes, names removed, highest nlink]).
_WorkerReport = tuple[DeleteResult, dict[int, bool], dict[tuple[int, int], list[int]]]


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
    workers: int | None = None,
) -> DeleteResult:
    """Delete the entries below `root` (never `root` itself) that the rules and `select` allow.

    `select` (default: everything) decides per non-directory entry; directories are removed
    when they end up empty — all of them when `select` is None, otherwise only those in which
    something was deleted. `expect` is the root's (st_dev, st_ino) seen at planning time: a root
    replaced since then is refused. With `trash`, entries go to the user's trash instead
    (`cachedoctor.trash`, relative to the same verified folder descriptors). With `collect`, every removed (or, dry run, selected) entry is listed in `removed`.
    `workers` caps the forked worker processes (default: one per usable CPU; 1: no fork).
    """
    if os.name == "nt":  # pragma: no cover - exercised on Windows only
        return _WindowsOps(root, rules, select, dry_run, trash, collect).run()
    walk = _PosixWalk(root, rules, select, dry_run, trash, expect, collect, check_locks)
    walk.workers = _worker_count(workers, trash or dry_run)
    return walk.run()


def _worker_count(requested: int | None, no_fork: bool) -> int:
    """Forked workers to use: 0 where fork is not safe or useful (then threads, as before).

    Not for trash mode (each move fsyncs its .trashinfo: the disk is the limit, not the CPU,
    and the trash folders stay open in this process), nor for dry runs (listing
    alone gained nothing from forking on tmpfs, and sending `collect` lists back costs more than
    it saves), nor outside Linux (fork without exec is unsafe on macOS)."""
    if no_fork or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return 0
    if requested is not None:
        return max(1, requested)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux always has it
        cpus = os.cpu_count() or 1
    return max(2, min(cpus, MAX_WORKERS))


class _Walk:
    """What both deleters (fd-relative POSIX, path-based Windows) are asked to do."""

    def __init__(self, root: str, rules: Rules, select: Selector | None, dry_run: bool,
                 trash: bool, collect: bool) -> None:
        self.root = root
        self.rules = rules
        self.select = select
        self.dry_run = dry_run
        self.trash = trash
        self.collect = collect
        self.result = DeleteResult(root=root)


class _PosixWalk(_Walk):
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
        super().__init__(root, rules, select, dry_run, trash, collect)
        self.expect = expect
        self.check_locks = check_locks
        # hard-linked files removed: (dev, ino) -> [bytes, names removed, highest st_nlink seen]
        self.links: dict[tuple[int, int], list[int]] = {}
        self.root_dev = 0
        self.root_mnt: int | None = None  # set when a mount lies below the root: compare ids
        self.locked_inodes: frozenset[int] | None = None
        self.locks_read = -LOCKS_REFRESH  # monotonic time /proc/locks was last read
        self.workers = 0  # forked workers allowed (0: threads over the top-level folders)
        self.trasher: Trasher | None = None  # trash mode: the trash folders, shared by threads
        self.real_root = b""  # trash mode: the root's real path (for the .trashinfo Path=)

    def run(self) -> DeleteResult:
        try:
            root_fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (
                exc.errno == errno.ENOTDIR and os.path.islink(self.root)
            ):  # O_DIRECTORY|O_NOFOLLOW on a link to a folder: ENOTDIR on Linux
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
        if sys.platform.startswith("linux") and _mounts_below(self.root) is not False:
            # a mount below the root (or no way to tell): check each folder's mount id
            self.root_mnt = _mount_id(root_fd)
        self.result.total_bytes += getattr(st, "st_blocks", 0) * 512  # measured like du / scan
        if self.trash and not self.dry_run:
            from cachedoctor.trash import Trasher, fd_path, trash_folders_at

            self.trasher = Trasher()
            self.real_root = fd_path(root_fd) or os.fsencode(os.path.realpath(self.root))
            own = trash_folders_at(root_fd)  # a cache that is a mount holds that mount's trash
            if own:
                self.rules = replace(self.rules, exclude=self.rules.exclude | own)
        gc_was_on = gc.isenabled()
        gc.disable()  # no reference cycles are made here; the collector only costs time
        try:
            if self.workers:
                self._walk_forked(root_fd)
            else:
                self._walk_root(root_fd)
            self._count_links()
        finally:
            os.close(root_fd)
            if self.trasher is not None:
                self.trasher.close()
            if gc_was_on:
                gc.enable()
        return self.result

    def _count_links(self) -> None:
        """Hard-linked files seen with st_nlink > 1: removing a name with nlink == 1 already
        counted it; otherwise it is free (and counted once) only if as many of its names were
        removed as it had (a dry run sees the same nlink for each name, and two workers removing
        the last two names at once both see 2: both cases end here)."""
        for size, removed, most in self.links.values():
            if removed >= most:
                self.result.bytes += size

    # ------------------------------------------------------------------ forked workers (Linux)

    def _walk_forked(self, root_fd: int) -> None:
        """Open the top of the tree level by level, then share its folders among workers."""
        root = _Frame(root_fd, "", "", self._list(root_fd, ""), not self.rules.only, owned=False)
        level = [root]
        opened: list[tuple[_Frame, _Frame]] = []  # (parent, child) opened here, in order
        tasks: list[_Task] = []
        wanted = TASKS_PER_WORKER * self.workers if self.workers > 1 else 0
        for depth in range(MAX_EXPAND_DEPTH + 1):
            tasks = []
            for frame in level:
                self._scan(frame, [frame], tasks)
            if not tasks or len(tasks) >= wanted or depth == MAX_EXPAND_DEPTH:
                break
            level = []
            for task in tasks:  # too few folders to share yet: go one level down
                child = self._open(task.parent, task.name, task.rel, task.st)
                if child is None:
                    task.parent.remaining += 1
                else:
                    opened.append((task.parent, child))
                    level.append(child)
            tasks = []
        try:
            if len(tasks) > 1 and self.workers > 1:
                self._share(tasks)
            else:
                for task in tasks:
                    self._walk_task(task)
        finally:
            for parent, child in reversed(opened):  # post-order: deepest first
                os.close(child.fd)
                self._maybe_rmdir(parent, child)

    def _walk_task(self, task: _Task, private: bool = False) -> bool:
        """Walk one folder; True when it was removed. `private` (a worker): count the parent's
        outcome on a copy, the parent process applies it."""
        parent = task.parent
        if private:
            parent = _Frame(parent.fd, parent.rel, parent.name, [], parent.selected_all, False)
        before = parent.deleted
        child = self._open(parent, task.name, task.rel, task.st)
        if child is None:
            parent.remaining += 1
        else:
            self._loop([parent, child], base=1)
        return parent.deleted > before

    def _share(self, tasks: list[_Task]) -> None:
        """Fork the workers, feed them task numbers, merge what they report."""
        import pickle  # noqa: F401 - imported before forking, so the workers need no import
        import signal
        import warnings

        task_r, task_w = os.pipe()
        children: list[list[int]] = []  # [pid, result pipe]; 0 / -1 once reaped / closed
        try:
            for _ in range(min(self.workers, len(tasks))):
                res_r, res_w = os.pipe()
                with warnings.catch_warnings():  # 3.12+ warns about forking with threads alive
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:  # pragma: no cover - runs in the forked child
                    code = 1
                    try:
                        os.close(task_w)
                        os.close(res_r)
                        for _, other in children:
                            os.close(other)
                        signal.signal(signal.SIGINT, signal.default_int_handler)
                        self._worker(task_r, res_w, tasks)
                        code = 0
                    finally:
                        os._exit(code)
                os.close(res_w)
                children.append([pid, res_r])
            os.close(task_r)
            task_r = -1
            records = b"".join(i.to_bytes(_TASK, "little") for i in range(len(tasks)))
            try:
                for start in range(0, len(records), 4096):  # whole records, atomic writes
                    os.write(task_w, records[start : start + 4096])
            except BrokenPipeError:
                pass  # every worker is gone: their tasks are walked below
            os.close(task_w)
            task_w = -1
            finished: dict[int, bool] = {}
            for child in children:
                report = _read_report(child[1])
                child[1] = -1
                status = _reap(child[0])
                child[0] = 0
                if report is not None and status == 0:
                    self._merge_worker(report, finished)
        except BaseException:
            for pid, res_r in children:  # Ctrl-C or a failure here: stop the workers, then raise
                if pid:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGINT)
                    _reap(pid)
                if res_r >= 0:
                    with contextlib.suppress(OSError):
                        os.close(res_r)
            raise
        finally:
            for fd in (task_r, task_w):
                if fd >= 0:
                    os.close(fd)
        for index, task in enumerate(tasks):
            removed = finished.get(index)
            if removed is None:  # its worker died: walk it here (what it removed is gone)
                try:
                    os.lstat(task.name, dir_fd=task.parent.fd)
                except FileNotFoundError:
                    task.parent.deleted += 1
                    continue
                except OSError:
                    pass
                self._walk_task(task)
            elif removed:
                task.parent.deleted += 1
            else:
                task.parent.remaining += 1

    def _worker(self, task_r: int, res_w: int, tasks: list[_Task]) -> None:  # pragma: no cover
        """A forked worker: take task numbers until the pipe is empty, then report once."""
        import pickle

        self.result = DeleteResult(root=self.root)
        self.links = {}  # only what this worker removed: the parent adds it to its own
        done: dict[int, bool] = {}
        while True:
            record = os.read(task_r, _TASK)
            if len(record) < _TASK:
                break
            index = int.from_bytes(record, "little")
            done[index] = self._walk_task(tasks[index], private=True)
        payload = pickle.dumps((self.result, done, self.links), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(payload)
        while view:
            view = view[os.write(res_w, view) :]
        os.close(res_w)

    def _merge_worker(self, report: _WorkerReport, finished: dict[int, bool]) -> None:
        result, done, links = report
        self._merge(result, links)
        finished.update(done)

    # ------------------------------------------------------- threads (no fork) and the walk itself

    def _walk_root(self, root_fd: int) -> None:
        """Files of the root here; each top-level folder as its own task (threads when several).

        unlink/stat release the GIL, so a second worker overlaps its system calls with the
        first one's Python work; every worker still acts only through fds below `root_fd`.
        """
        root = _Frame(root_fd, "", "", self._list(root_fd, ""), not self.rules.only, owned=False)
        tasks: list[_Task] = []
        self._scan(root, [root], tasks)
        workers = min(WORKERS, len(tasks))
        if workers > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=workers) as pool:
                outcomes = list(pool.map(self._subtree, tasks))
        else:
            outcomes = [self._subtree(task) for task in tasks]
        for result, links in outcomes:
            self._merge(result, links)

    def _subtree(self, task: _Task) -> tuple[DeleteResult, dict[tuple[int, int], list[int]]]:
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
        worker.root_mnt = self.root_mnt
        worker.trasher = self.trasher
        worker.real_root = self.real_root
        worker._walk_task(task, private=True)  # the root is never removed: its counts don't matter
        return worker.result, worker.links

    def _merge(self, other: DeleteResult, links: dict[tuple[int, int], list[int]]) -> None:
        for key, (size, removed, most) in links.items():
            mine = self.links.get(key)
            if mine is None:
                self.links[key] = [size, removed, most]
            else:
                mine[1] += removed
                mine[2] = max(mine[2], most)
        r = self.result
        r.files += other.files
        r.dirs += other.dirs
        r.bytes += other.bytes
        r.total_bytes += other.total_bytes
        r.kept += other.kept
        r.skipped.extend(other.skipped)
        r.errors.extend(other.errors)
        r.removed.extend(other.removed)

    def _list(self, fd: int, rel: str) -> list[str]:
        if self.check_locks:
            now = time.monotonic()
            if now - self.locks_read >= LOCKS_REFRESH:
                self.locked_inodes = _flocked_inodes()
                self.locks_read = now
        try:
            return os.listdir(fd)
        except OSError as exc:
            self.result.errors.append(f"{self._path(rel)}: {exc.strerror}")
            return []

    def _path(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _loop(self, frames: list[_Frame], base: int) -> None:
        """Depth-first, post-order, until only `base` frames are left (those are not closed)."""
        while len(frames) > base:
            frame = frames[-1]
            if self._scan(frame, frames, None):
                continue  # a subfolder was pushed: walk it first
            frames.pop()
            if frame.owned:
                os.close(frame.fd)
                if frames:
                    self._maybe_rmdir(frames[-1], frame)

    def _scan(self, frame: _Frame, frames: list[_Frame], defer: list[_Task] | None) -> bool:
        """The entries of one folder in a tight loop, from where it stopped. A subfolder is
        opened and pushed (returns True) or, with `defer`, listed there and left alone."""
        result = self.result
        rules = self.rules
        has_keep = bool(rules.keep or rules.exclude)
        detail = self.select is not None or self.collect
        select = self.select
        check_locks = self.check_locks
        locked = self.locked_inodes
        fast_unlink = not self.dry_run and not self.trash
        links = self.links
        lstat, unlink = os.lstat, os.unlink
        entries = frame.entries
        count = len(entries)
        fd = frame.fd
        prefix = f"{frame.rel}/" if frame.rel else ""
        selected_all = frame.selected_all
        # counters in locals, written back on the way out (also when a subfolder is pushed)
        i = frame.index
        files = freed = total = kept = deleted = remaining = 0
        try:
            while i < count:
                name = entries[i]
                i += 1
                try:
                    st = lstat(name, dir_fd=fd)
                except OSError as exc:
                    if exc.errno != errno.ENOENT:
                        result.errors.append(f"{self._path(prefix + name)}: {exc.strerror}")
                        remaining += 1
                    continue
                if has_keep and rules.kept(prefix + name):
                    kept += 1
                    remaining += 1
                    continue
                mode = st.st_mode
                if mode & _IFMT == _IFDIR:
                    if defer is not None:
                        defer.append(_Task(frame, name, prefix + name, st))
                        continue
                    child = self._open(frame, name, prefix + name, st)
                    if child is not None:
                        frames.append(child)
                        return True
                    remaining += 1
                    continue
                size = st.st_blocks * 512 if _HAS_BLOCKS else st.st_size
                total += size
                if not (selected_all or rules.in_only(prefix + name)):
                    kept += 1
                    remaining += 1
                    continue
                info = _info(prefix + name, st) if detail else None
                if select is not None and info is not None and not select(info):
                    kept += 1
                    remaining += 1
                    continue
                if (
                    check_locks
                    and mode & _IFMT == _IFREG
                    and (locked is None or st.st_ino in locked)
                    and _is_locked_posix(fd, name)
                ):
                    result.skipped.append(
                        Skipped(prefix + name, "locked", "held with flock by another process")
                    )
                    remaining += 1
                    continue
                if fast_unlink:
                    try:
                        unlink(name, dir_fd=fd)
                    except FileNotFoundError:
                        remaining += 1
                        continue
                    except OSError as exc:
                        result.errors.append(f"{self._path(prefix + name)}: {exc.strerror}")
                        remaining += 1
                        continue
                elif not self.dry_run and not self._remove_file(fd, name, prefix + name, st):
                    remaining += 1
                    continue
                deleted += 1
                files += 1
                nlink = st.st_nlink
                if nlink == 1:  # its last name: the space is free now (the usual case)
                    freed += size
                else:  # decided when the walk is over (`_count_links`)
                    key = (st.st_dev, st.st_ino)
                    seen = links.get(key)
                    if seen is None:
                        links[key] = [size, 1, nlink]
                    else:
                        seen[1] += 1
                        if nlink > seen[2]:
                            seen[2] = nlink
                if info is not None and self.collect:
                    result.removed.append(info)
            return False
        finally:
            frame.index = i
            frame.deleted += deleted
            frame.remaining += remaining
            result.files += files
            result.bytes += freed
            result.total_bytes += total
            result.kept += kept

    def _open(self, parent: _Frame, name: str, rel: str, st: os.stat_result) -> _Frame | None:
        """Open a subdirectory (no links, same device, same inode as listed) as a frame."""
        result = self.result
        if st.st_dev != self.root_dev:
            result.skipped.append(Skipped(rel, "other filesystem", "a mount point; not entered"))
            return None
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                result.skipped.append(
                    Skipped(rel, "changed", "replaced while cleaning; not entered")
                )
            else:
                result.errors.append(f"{self._path(rel)}: {exc.strerror}")
            return None
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            result.skipped.append(Skipped(rel, "changed", "replaced while cleaning; not entered"))
            return None
        if self.root_mnt is not None and _mount_id(fd) != self.root_mnt:
            os.close(fd)  # a bind mount of the same filesystem (same st_dev): another folder
            result.skipped.append(Skipped(rel, "other filesystem", "a mount point; not entered"))
            return None
        result.total_bytes += getattr(st, "st_blocks", 0) * 512
        selected_all = parent.selected_all or (bool(self.rules.only) and self.rules.in_only(rel))
        return _Frame(fd, rel, name, self._list(fd, rel), selected_all)

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
        """Rename the entry into the trash relative to its folder's descriptor (never a path:
        see `cachedoctor.trash`); True when it went."""
        from cachedoctor.trash import EntryChanged, TrashFailed, TrashRefused

        assert self.trasher is not None
        try:
            self.trasher.trash(
                dir_fd, name, st, self.real_root + b"/" + os.fsencode(rel), dev=self.root_dev
            )
        except TrashRefused as exc:
            self.result.skipped.append(Skipped(rel, "no trash", str(exc)))
            return False
        except EntryChanged as exc:
            self.result.skipped.append(Skipped(rel, "changed", str(exc)))
            return False
        except TrashFailed as exc:
            self.result.errors.append(f"{self._path(rel)}: {exc}")
            return False
        return True


def _read_report(fd: int) -> _WorkerReport | None:
    """Everything a worker wrote on its result pipe, unpickled (None if it sent nothing)."""
    import pickle

    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    if not chunks:
        return None
    try:
        report: _WorkerReport = pickle.loads(b"".join(chunks))
    except Exception:  # a worker that died mid-write: its tasks are walked again
        return None
    return report


def _reap(pid: int) -> int:
    """Wait for a worker; its exit status (non-zero when it failed or was killed)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return -1
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return os.waitstatus_to_exitcode(status)


class _WindowsOps(_Walk):  # pragma: no cover - exercised on Windows only
    """Path-based walk for Windows, where there is no dir_fd: reparse points are never entered."""

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
        self._dir(self.root, "", top.st_dev, not self.rules.only, ((self.root, _ident(top)),))
        return self.result

    def _dir(
        self, path: str, rel: str, dev: int, selected_all: bool, chain: tuple[_Link, ...]
    ) -> int:
        """One folder; `chain` is every folder from the root down to it with the identity seen
        when it was listed (re-checked before each send2trash)."""
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
                try:  # DirEntry.stat() has st_dev and st_ino 0 on Windows: ask lstat
                    full = os.lstat(entry.path)
                except OSError:
                    continue
                if full.st_dev != dev or is_reparse_point(full):
                    self.result.skipped.append(Skipped(child_rel, "other filesystem"))
                    continue
                sub_all = selected_all or self.rules.in_only(child_rel)
                removed_inside = self._dir(
                    entry.path, child_rel, dev, sub_all, (*chain, (entry.path, _ident(full)))
                )
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
                        from cachedoctor.trash import EntryChanged, trash_path_checked

                        try:  # the listing has no file id on Windows: take it now
                            listed = _ident(os.lstat(entry.path))
                            trash_path_checked(chain, entry.path, listed)
                        except EntryChanged as exc:
                            self.result.skipped.append(Skipped(child_rel, "changed", str(exc)))
                            continue
                        except FileNotFoundError:
                            continue
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


_Link = tuple[str, tuple[int, int]]  # a folder on the way down and its (st_dev, st_ino)


def _ident(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


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
