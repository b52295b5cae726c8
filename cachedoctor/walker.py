"""du-exact measurement of a folder tree, faster than `du -s`: a visitor of `fs.walk`.

Counts like GNU du: allocated bytes (`du -sB1`), apparent bytes (`du -sb`), inodes
(`du --inodes -s`); hard links once (also across worker processes), symlinks as themselves
(never followed), directories' own blocks included; `one_file_system` skips other mounts like
`du -x` (the mount-point folder itself is not counted either, exactly like du).

How it is fast (Linux, warm cache): the walker opens each folder relative to its parent's
descriptor, and each name is stat'ed relative to it (`fstatat`), so the kernel never re-walks a
full path. On Linux that per-folder loop is C (`fs/_native.c`, through
`Ops.folder_counter`): no Python object for a plain file, only subfolders, hard-linked files
and failures come back. Elsewhere it is `_count` below (`os.listdir(fd)` + `os.lstat(name,
dir_fd=fd)`), which counts the same; totals live in local variables; the cyclic garbage
collector is paused. Big trees are shared among forked workers (one per usable CPU,
at most `fs.walk.MAX_WORKERS`): the parent walks the top breadth-first until enough folders are
queued, the workers take slices of them and send progress and totals back; hard-linked
inodes (nlink > 1, the only ones remembered, so memory stays flat) are merged across workers so
the totals stay exact. A worker that dies leaves its share to the parent.

Elsewhere (Windows, macOS, small trees) the walk is single-process. On Windows the seam
reports no allocation (allocated bytes = apparent bytes) and the listing carries no inode
numbers (hard links are counted per name); reparse points (junctions, symlinks) are links,
never descended.

Entries that vanish during the walk are skipped silently (they no longer take space); every
other failure (unreadable folder, failed stat, a tree deeper than `fs.walk.MAX_DEPTH`) is
listed in `errors` and makes the result `partial`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from cachedoctor.fs import kinds, seam
from cachedoctor.fs.walk import Frame, Listed, Task, TreeWalk, join_rel
from cachedoctor.fs.walk import worker_count as _worker_count  # (the tests replace it)

ProgressCallback = Callable[[int, int], None]  # (entries so far, allocated bytes so far)

# Below this many entries a tree is walked in one process (forking costs a few milliseconds).
MIN_PARALLEL_ENTRIES = 4096
# The parent keeps walking breadth-first until this many folders per worker are queued...
FOLDERS_PER_WORKER = 8
# ...but forks anyway (if there are at least 2 folders queued) after this many entries.
MAX_PARENT_ENTRIES = 65536
PROGRESS_EVERY = 2048  # entries between progress reports

_VANISHED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
_IFMT = 0o170000
_IFDIR = 0o040000


class WalkResult(msgspec.Struct):
    path: str
    allocated_bytes: int = 0
    apparent_bytes: int = 0
    files: int = 0  # non-directory inodes (regular files, symlinks, others), hard links once
    dirs: int = 0
    newest_mtime: float | None = None
    errors: list[str] = msgspec.field(default_factory=list)

    @property
    def inodes(self) -> int:
        return self.files + self.dirs

    @property
    def partial(self) -> bool:
        return bool(self.errors)


class _Tally:
    """Running totals of one process. `links` maps (dev, ino) of every nlink > 1 non-directory
    seen to (blocks, apparent bytes); it is already included in the totals."""

    __slots__ = ("blocks", "dirs", "errors", "files", "links", "newest", "size")

    def __init__(self) -> None:
        self.blocks = 0  # st_blocks units (the seam's `block_unit` bytes each)
        self.size = 0
        self.files = 0
        self.dirs = 0
        self.newest = -1.0e300
        self.errors: list[str] = []
        self.links: dict[tuple[int, int], tuple[int, int]] = {}

    def entries(self) -> int:
        return self.files + self.dirs

    def add_stat(self, st: Any) -> None:
        """Count one entry (the walk's root); the hot loop inlines this."""
        blocks: int = getattr(st, "st_blocks", st.st_size)
        if st.st_mode & _IFMT == _IFDIR:
            self.dirs += 1
        else:
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in self.links:
                    return
                self.links[key] = (blocks, st.st_size)
            self.files += 1
        self.blocks += blocks
        self.size += st.st_size
        self.newest = max(self.newest, st.st_mtime)

    def merge(self, blocks: int, size: int, files: int, dirs: int, newest: float,
              errors: Iterable[str], links: dict[tuple[int, int], tuple[int, int]]) -> None:
        """Add another process's totals, counting inodes both have seen once."""
        mine = self.links
        for key, (b, s) in links.items():
            if key in mine:
                blocks -= b
                size -= s
                files -= 1
            else:
                mine[key] = (b, s)
        self.blocks += blocks
        self.size += size
        self.files += files
        self.dirs += dirs
        self.newest = max(self.newest, newest)
        self.errors.extend(errors)

    def state(self) -> tuple[Any, ...]:
        return (self.blocks, self.size, self.files, self.dirs, self.newest, self.errors,
                self.links)

    def result(self, path: str, unit: int) -> WalkResult:
        return WalkResult(
            path=path, allocated_bytes=self.blocks * unit, apparent_bytes=self.size,
            files=self.files, dirs=self.dirs,
            newest_mtime=self.newest if self.entries() else None, errors=self.errors,
        )


def measure(path: str, *, one_file_system: bool = False,
            on_progress: ProgressCallback | None = None,
            workers: int | None = None) -> WalkResult:
    """Measure `path` (a folder, file or link: links are measured as themselves).

    `workers`: None = as many processes as usable CPUs, for trees big enough to gain from it
    (Linux only); 1 = single process; n > 1 = up to n processes whenever the tree has at least
    two folders below the top (used by the tests to exercise the parallel walk on small trees).
    """
    ops = seam.current()
    tally = _Tally()
    try:
        top = ops.lstat_path(path)
    except OSError as exc:
        tally.errors.append(f"{path}: {exc.strerror}")
        return tally.result(path, ops.block_unit)
    tally.add_stat(top)
    if kinds.is_real_dir(top):
        _Measure(path, ops, tally, one_file_system, on_progress, workers).run()
    return tally.result(path, ops.block_unit)


class _Measure(TreeWalk):
    same_device = False  # the loop leaves other devices out itself (du -x) or walks them (du)

    def __init__(self, root: str, ops: seam.Ops, tally: _Tally, one_file_system: bool,
                 on_progress: ProgressCallback | None, workers: int | None) -> None:
        super().__init__(root, ops)
        self.tally = tally
        self.one_file_system = one_file_system
        self.callback = on_progress
        self.explicit = workers is not None and workers > 1
        self.workers = _worker_count(workers, ops)
        self.next_report = PROGRESS_EVERY
        self.progress: dict[int, tuple[int, int]] = {}
        self.base: tuple[int, int] | None = None
        self.counter = ops.folder_counter()  # the compiled loop, where there is one

    def run(self) -> None:
        if self._walk_root() is None:
            return
        self._report(final=True)

    # progress ----------------------------------------------------------------------------
    def _report(self, final: bool = False) -> None:
        tally = self.tally
        entries = tally.files + tally.dirs
        if self.send is not None:  # a forked worker: tell the parent
            if entries >= self.next_report:
                import marshal

                self.next_report = entries + PROGRESS_EVERY
                self.send(b"p", marshal.dumps((entries, tally.blocks)))
            return
        if self.callback is not None and (final or entries >= self.next_report):
            self.next_report = entries + PROGRESS_EVERY
            self.callback(entries, tally.blocks * self.ops.block_unit)

    def _worker_progress(self, worker: int, payload: bytes) -> None:
        import marshal

        tally = self.tally
        if self.base is None:
            self.base = (tally.entries(), tally.blocks)
        self.progress[worker] = marshal.loads(payload)
        if self.callback is not None:
            self.callback(self.base[0] + sum(p[0] for p in self.progress.values()),
                          (self.base[1] + sum(p[1] for p in self.progress.values()))
                          * self.ops.block_unit)

    # the engine's hooks ------------------------------------------------------------------
    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        if self.counter is not None:
            return  # it lists the folder itself
        try:
            frame.names = self.ops.listdir(frame.fd)
        except OSError as exc:
            self._error(frame.rel, exc)

    def _error(self, rel: str, exc: OSError) -> None:
        if exc.errno not in _VANISHED:
            self.tally.errors.append(f"{self.path_of(rel)}: {exc.strerror}")

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        if reason == "too deep":
            self.tally.errors.append(f"{self.path_of(rel)}: {detail}")

    def _state(self) -> Any:
        return self.tally.state()

    def _absorb(self, state: Any) -> None:
        self.tally.merge(*state)

    def _fresh(self) -> None:
        self.tally = _Tally()
        self.next_report = PROGRESS_EVERY

    def _enough(self, ntasks: int, wanted: int) -> bool:
        if ntasks < 2:
            return False
        done = self.tally.entries()
        if self.explicit:
            return True
        return (done >= MIN_PARALLEL_ENTRIES and ntasks >= FOLDERS_PER_WORKER * self.workers) \
            or done >= MAX_PARENT_ENTRIES

    def _worth_forking(self, ntasks: int) -> bool:
        return ntasks >= 2 and (self.explicit or self.tally.entries() >= MIN_PARALLEL_ENTRIES)

    # the hot loop ------------------------------------------------------------------------
    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        pending = frame.pending
        if pending is None:
            pending = self._count(frame)
            if defer is not None:
                rel = frame.rel
                defer.extend(Task(frame, name, join_rel(rel, name), st) for name, st in pending)
                frame.pending = []
                return False
            frame.pending = pending
        while pending:
            name, st = pending.pop()
            child = self._open(frame, name, join_rel(frame.rel, name), st)
            if child is not None:
                frames.append(child)
                return True
        return False

    def _count(self, frame: Frame) -> list[tuple[str, Any]]:
        """Every name of one folder, stat'ed relative to its descriptor (`fstatat`); returns
        the subfolders to walk. The whole folder's names at once, like du's fts."""
        if self.counter is not None:
            return self._count_compiled(frame, self.counter)
        tally = self.tally
        lstat = self.ops.lstat
        fd = frame.fd
        links = tally.links
        vanished = _VANISHED
        one_fs = self.one_file_system
        root_dev = self.root_dev
        blocks, size, files, dirs, newest = (tally.blocks, tally.size, tally.files, tally.dirs,
                                             tally.newest)
        subdirs: list[tuple[str, Any]] = []
        for name in frame.names:
            try:
                st = lstat(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in vanished:
                    tally.errors.append(f"{self.path_of(join_rel(frame.rel, name))}: "
                                        f"{exc.strerror}")
                continue
            if st.st_mode & 0o170000 == 0o040000:
                if one_fs and st.st_dev != root_dev:
                    continue
                subdirs.append((name, st))
                dirs += 1
            elif st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in links:
                    continue
                links[key] = (st.st_blocks, st.st_size)
                files += 1
            else:
                files += 1
            blocks += st.st_blocks
            size += st.st_size
            if st.st_mtime > newest:
                newest = st.st_mtime
        tally.blocks, tally.size, tally.files, tally.dirs, tally.newest = (
            blocks, size, files, dirs, newest)
        if files + dirs >= self.next_report:
            self._report()
        return subdirs

    def _count_compiled(self, frame: Frame, counter: seam.FolderCounter) -> list[tuple[str, Any]]:
        """`_count` through the compiled loop: it counts plain files and folders itself and
        hands back only what needs this process's state (hard links, failures, subfolders)."""
        tally = self.tally
        try:
            blocks, size, files, dirs, newest, subdirs, linked, failed = counter(
                frame.fd, self.root_dev, self.one_file_system)
        except OSError as exc:
            self._error(frame.rel, exc)
            return []
        links = tally.links
        for dev, ino, link_blocks, link_size, mtime in linked:
            key = (dev, ino)
            if key in links:
                continue
            links[key] = (link_blocks, link_size)
            files += 1
            blocks += link_blocks
            size += link_size
            if mtime > newest:
                newest = mtime
        for name, code in failed:
            tally.errors.append(f"{self.path_of(join_rel(frame.rel, name))}: {os.strerror(code)}")
        tally.blocks += blocks
        tally.size += size
        tally.files += files
        tally.dirs += dirs
        if newest > tally.newest:
            tally.newest = newest
        if tally.files + tally.dirs >= self.next_report:
            self._report()
        return [(name, Listed(dev, ino)) for name, dev, ino in subdirs]
