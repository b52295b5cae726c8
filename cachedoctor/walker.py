"""du-exact measurement of a folder tree, faster than `du -s`.

Counts like GNU du: allocated bytes (`du -sB1`), apparent bytes (`du -sb`), inodes
(`du --inodes -s`); hard links once (also across worker processes), symlinks as themselves
(never followed), directories' own blocks included; `one_file_system` skips other mounts like
`du -x` (the mount-point folder itself is not counted either, exactly like du).

How it is fast (Linux, warm cache):

- every entry is stat'ed relative to an open directory descriptor (`os.listdir(fd)` +
  `os.lstat(name, dir_fd=fd)`, i.e. `fstatat(fd, name)`), so the kernel never re-walks the
  full path;
- no object per entry beyond its name and stat result (no DirEntry, no dataclass); totals live
  in local variables; the cyclic garbage collector is paused during the walk;
- big trees are split over forked worker processes (one per usable CPU): the parent walks the
  top of the tree breadth-first until it has enough folders queued, then forks; workers pull
  slices of that folder list from a shared pipe (fixed 8-byte records written atomically, so
  reads never tear) and walk each subtree depth-first; progress and results come back on one
  pipe per worker. Hard-linked inodes (nlink > 1, the only ones remembered, so memory stays
  flat) are merged across workers so the totals stay exact. If a worker dies, the parent
  walks the whole shared part again itself.

Elsewhere (Windows, macOS, small trees) the walk is single-process. On Windows there is no
st_blocks (allocated bytes = apparent bytes), `DirEntry.stat` carries no inode numbers (hard
links are counted per name) and reparse points (junctions, symlinks) are never descended.

Entries that vanish during the walk are skipped silently (they no longer take space); every
other failure (unreadable folder, failed stat) is listed in `errors` and makes the result
`partial`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

ProgressCallback = Callable[[int, int], None]  # (entries so far, allocated bytes so far)

# Below this many entries a tree is walked in one process (forking costs a few milliseconds).
MIN_PARALLEL_ENTRIES = 4096
# The parent keeps walking breadth-first until this many folders per worker are queued...
FOLDERS_PER_WORKER = 8
# ...but forks anyway (if there are at least 2 folders queued) after this many entries.
MAX_PARENT_ENTRIES = 65536
MAX_WORKERS = 8
PROGRESS_EVERY = 2048  # entries between progress reports

_VANISHED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
_IFMT = 0o170000
_IFDIR = 0o040000
_WIN_REPARSE_POINT = 0x400  # FILE_ATTRIBUTE_REPARSE_POINT
_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
_FD_WALK = os.listdir in os.supports_fd and os.stat in os.supports_dir_fd
_HAS_BLOCKS = hasattr(os.stat_result, "st_blocks")


@dataclass
class WalkResult:
    path: str
    allocated_bytes: int = 0
    apparent_bytes: int = 0
    files: int = 0  # non-directory inodes (regular files, symlinks, others), hard links once
    dirs: int = 0
    newest_mtime: float | None = None
    errors: list[str] = field(default_factory=list)

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
        self.blocks = 0  # 512-byte units (or bytes where there is no st_blocks, see _unit)
        self.size = 0
        self.files = 0
        self.dirs = 0
        self.newest = -1.0e300
        self.errors: list[str] = []
        self.links: dict[tuple[int, int], tuple[int, int]] = {}

    def entries(self) -> int:
        return self.files + self.dirs

    def add_stat(self, st: os.stat_result) -> None:
        """Count one entry (the walk's root); the hot loops inline this."""
        blocks: int = getattr(st, "st_blocks", st.st_size)  # no st_blocks on Windows
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

    def result(self, path: str) -> WalkResult:
        return WalkResult(
            path=path,
            allocated_bytes=self.blocks * (512 if _HAS_BLOCKS else 1),
            apparent_bytes=self.size, files=self.files, dirs=self.dirs,
            newest_mtime=self.newest if self.entries() else None,
            errors=self.errors,
        )


def measure(path: str, *, one_file_system: bool = False,
            on_progress: ProgressCallback | None = None,
            workers: int | None = None) -> WalkResult:
    """Measure `path` (a folder, file or link: links are measured as themselves).

    `workers`: None = as many processes as usable CPUs, for trees big enough to gain from it
    (Linux only); 1 = single process; n > 1 = up to n processes whenever the tree has at least
    two folders below the top (used by the tests to exercise the parallel walk on small trees).
    """
    tally = _Tally()
    try:
        top = os.lstat(path)
    except OSError as exc:
        tally.errors.append(f"{path}: {exc.strerror}")
        return tally.result(path)
    tally.add_stat(top)
    if top.st_mode & _IFMT != _IFDIR or _is_reparse_point(top):
        return tally.result(path)

    import gc

    collecting = gc.isenabled()
    gc.disable()  # the walk makes no reference cycles; don't rescan the heap every 700 stats
    try:
        _measure_folder(tally, path, top.st_dev, one_file_system, on_progress, workers)
    finally:
        if collecting:
            gc.enable()
    return tally.result(path)


def _measure_folder(tally: _Tally, path: str, root_dev: int, one_file_system: bool,
                    on_progress: ProgressCallback | None, workers: int | None) -> None:
    report = _Reporter(on_progress)
    queue: deque[str] = deque([path])
    count = _walk if _FD_WALK else _walk_by_path
    wanted = _worker_count(workers)
    if wanted > 1:
        # Breadth-first at the top, until there is enough queued work to share.
        min_queue = 2 if workers else FOLDERS_PER_WORKER * wanted
        min_entries = 0 if workers else MIN_PARALLEL_ENTRIES

        def enough() -> bool:
            done = tally.entries()
            return len(queue) >= 2 and (
                (done >= min_entries and len(queue) >= min_queue) or done >= MAX_PARENT_ENTRIES)

        count(tally, queue, root_dev, one_file_system, report, fifo=True, stop=enough)
        if len(queue) >= 2:
            tasks = list(queue)
            queue.clear()
            if _parallel(tally, tasks, min(wanted, len(tasks)), root_dev, one_file_system,
                         report):
                report(tally.entries(), tally.blocks, final=True)
                return
            queue.extend(tasks)  # a worker failed: walk everything it might have had here
    count(tally, queue, root_dev, one_file_system, report, fifo=False, stop=None)
    report(tally.entries(), tally.blocks, final=True)


def _is_reparse_point(st: os.stat_result) -> bool:
    """Windows junctions and symlinks look like directories to lstat: never descend them."""
    return bool(getattr(st, "st_file_attributes", 0) & _WIN_REPARSE_POINT)


def _worker_count(requested: int | None) -> int:
    if requested is not None:
        return max(1, requested) if _can_fork() else 1
    if not _can_fork():
        return 1
    cpus = os.cpu_count() or 1
    if sys.platform == "linux":  # _can_fork() is Linux-only anyway
        with contextlib.suppress(OSError):
            cpus = len(os.sched_getaffinity(0))
    return max(1, min(cpus, MAX_WORKERS))


def _can_fork() -> bool:
    return sys.platform.startswith("linux") and _FD_WALK and hasattr(os, "fork")


class _Reporter:
    """Calls the progress callback (if any) at most every PROGRESS_EVERY entries."""

    __slots__ = ("callback", "next_at")

    def __init__(self, callback: ProgressCallback | None) -> None:
        self.callback = callback
        self.next_at = PROGRESS_EVERY

    def __call__(self, entries: int, blocks: int, *, final: bool = False) -> None:
        if self.callback is not None and (final or entries >= self.next_at):
            self.next_at = entries + PROGRESS_EVERY
            self.callback(entries, blocks * (512 if _HAS_BLOCKS else 1))


# --- the hot loops ---------------------------------------------------------------------------

def _walk(tally: _Tally, queue: deque[str], root_dev: int, one_file_system: bool,
          report: Callable[[int, int], None] | None, *, fifo: bool,
          stop: Callable[[], bool] | None) -> None:
    """Walk every folder in `queue` (and below), stat'ing relative to the folder's descriptor.
    Depth-first unless `fifo`; returns early, leaving work queued, when `stop()` says so."""
    if sys.platform == "win32":  # no dir_fd there (_FD_WALK is False): _walk_by_path is used
        raise NotImplementedError("the fd-relative walk needs dir_fd support")
    listdir = os.listdir
    lstat = os.lstat
    os_open = os.open
    close = os.close
    flags = _DIR_FLAGS
    pop = queue.popleft if fifo else queue.pop
    push = queue.append
    links = tally.links
    errors = tally.errors
    vanished = _VANISHED
    blocks = tally.blocks
    size = tally.size
    files = tally.files
    dirs = tally.dirs
    newest = tally.newest
    next_report = files + dirs + PROGRESS_EVERY
    while queue:
        folder = pop()
        try:
            fd = os_open(folder, flags)
        except OSError as exc:
            if exc.errno not in vanished:
                errors.append(f"{folder}: {exc.strerror}")
            continue
        prefix = folder if folder.endswith("/") else folder + "/"
        try:
            # The whole folder's names at once, like du's fts: fewer Python objects than
            # DirEntry, and lstat(name, dir_fd=fd) is fstatat(fd, name, AT_SYMLINK_NOFOLLOW).
            for name in listdir(fd):
                try:
                    st = lstat(name, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in vanished:
                        errors.append(f"{prefix}{name}: {exc.strerror}")
                    continue
                if st.st_mode & 0o170000 == 0o040000:
                    if one_file_system and st.st_dev != root_dev:
                        continue
                    push(prefix + name)
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
        except OSError as exc:  # reading the folder failed part-way (EIO, ...)
            if exc.errno not in vanished:
                errors.append(f"{folder}: {exc.strerror}")
        finally:
            close(fd)
        if files + dirs >= next_report:
            next_report = files + dirs + PROGRESS_EVERY
            if report is not None:
                report(files + dirs, blocks)
        if stop is not None:
            tally.blocks, tally.size, tally.files, tally.dirs = blocks, size, files, dirs
            tally.newest = newest
            if stop():
                return
    tally.blocks, tally.size, tally.files, tally.dirs, tally.newest = (
        blocks, size, files, dirs, newest)


def _walk_by_path(tally: _Tally, queue: deque[str], root_dev: int, one_file_system: bool,
                  report: Callable[[int, int], None] | None, *, fifo: bool,
                  stop: Callable[[], bool] | None) -> None:
    """The same walk for platforms without fd-relative stat (Windows)."""
    pop = queue.popleft if fifo else queue.pop
    while queue:
        folder = pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        if exc.errno not in _VANISHED:
                            tally.errors.append(f"{entry.path}: {exc.strerror}")
                        continue
                    if st.st_mode & _IFMT == _IFDIR:
                        if one_file_system and st.st_dev != root_dev:
                            continue
                        if not _is_reparse_point(st):
                            queue.append(entry.path)
                    tally.add_stat(st)
        except OSError as exc:
            if exc.errno not in _VANISHED:
                tally.errors.append(f"{folder}: {exc.strerror}")
        if report is not None:
            report(tally.entries(), tally.blocks)
        if stop is not None and stop():
            return


# --- the parallel walk (Linux) ---------------------------------------------------------------

_FRAME = 5  # frame header: kind (1 byte) + payload length (4 bytes, little endian)
_TASK = 8  # one task record = start and stop indices (4 bytes each) into the task list
TASK_RECORDS_PER_WORKER = 32  # folders are handed out in about this many slices per worker


def _parallel(tally: _Tally, tasks: list[str], nworkers: int, root_dev: int,
              one_file_system: bool, report: _Reporter) -> bool:
    """Walk `tasks` in `nworkers` forked processes and merge their totals into `tally`.
    Returns False (tally untouched) if any worker failed to deliver its result."""
    if sys.platform == "win32":  # only called when _can_fork(), which is Linux-only
        raise NotImplementedError("the parallel walk needs fork")
    import marshal
    import select
    import signal
    import warnings

    task_r, task_w = os.pipe()
    children: dict[int, int] = {}  # result fd -> pid
    try:
        for _ in range(nworkers):
            res_r, res_w = os.pipe()
            with warnings.catch_warnings():  # 3.12+ warns about forking with threads alive
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child, which never returns
                code = 1
                try:
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    os.close(res_r)
                    os.close(task_w)
                    for other in children:
                        os.close(other)
                    code = _worker(task_r, res_w, tasks, root_dev, one_file_system)
                finally:
                    os._exit(code)
            os.close(res_w)
            children[res_r] = pid
        os.close(task_r)
        task_r = -1
        os.set_blocking(task_w, False)
        step = max(1, len(tasks) // (TASK_RECORDS_PER_WORKER * nworkers))
        pending = memoryview(b"".join(
            start.to_bytes(4, "little") + min(start + step, len(tasks)).to_bytes(4, "little")
            for start in range(0, len(tasks), step)))

        buffers = {fd: bytearray() for fd in children}
        progress = dict.fromkeys(children, (0, 0))
        results: list[tuple[int, int, int, int, float, list[str],
                            dict[tuple[int, int], tuple[int, int]]]] = []
        base_entries, base_blocks = tally.entries(), tally.blocks
        poller = select.poll()  # not select.select: no FD_SETSIZE limit on descriptor numbers
        for fd in children:
            poller.register(fd, select.POLLIN)
        poller.register(task_w, select.POLLOUT)
        open_fds = set(children)
        while open_fds:
            for fd, _event in poller.poll():
                if fd == task_w:
                    pending = _feed_tasks(task_w, pending)
                    if not pending:
                        poller.unregister(task_w)
                        os.close(task_w)
                        task_w = -1
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                buf = buffers[fd]
                buf += chunk
                while len(buf) >= _FRAME:
                    length = int.from_bytes(buf[1:_FRAME], "little")
                    if len(buf) < _FRAME + length:
                        break
                    kind, payload = buf[0], bytes(buf[_FRAME:_FRAME + length])
                    del buf[:_FRAME + length]
                    if kind == ord("p"):
                        progress[fd] = marshal.loads(payload)
                        report(base_entries + sum(p[0] for p in progress.values()),
                               base_blocks + sum(p[1] for p in progress.values()))
                    elif kind == ord("r"):
                        results.append(marshal.loads(payload))
        statuses = [_reap(pid) for pid in children.values()]
        children.clear()
        if len(results) != nworkers or any(statuses):
            return False
        for blocks, size, files, dirs, newest, errors, links in results:
            tally.merge(blocks, size, files, dirs, newest, errors, links)
        return True
    finally:
        for fd in (task_r, task_w):
            if fd >= 0:
                os.close(fd)
        for fd, pid in children.items():  # only left on an exception (e.g. Ctrl-C)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
            os.close(fd)


def _reap(pid: int) -> int:
    """Wait for a worker; its exit status (0 if someone else already reaped it)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:  # SIGCHLD ignored by the application: reaped automatically
        return 0


def _feed_tasks(task_w: int, pending: memoryview) -> memoryview:
    """Write task records (8 bytes each) to the shared, non-blocking pipe in chunks of at most
    PIPE_BUF bytes: such writes are atomic, so every 8-byte read by a worker gets exactly one
    whole record. Returns what is still to write."""
    while pending:
        try:
            written = os.write(task_w, pending[:4096])
        except BlockingIOError:
            break
        except BrokenPipeError:  # every worker is gone; the caller notices missing results
            return pending[:0]
        pending = pending[written:]
    return pending


def _worker(task_r: int, res_w: int, tasks: list[str], root_dev: int,
            one_file_system: bool) -> int:  # pragma: no cover - runs in a forked child
    """A forked worker: pull task records until the pipe is empty, walk each slice of folders,
    send the totals."""
    import gc
    import marshal

    gc.freeze()  # the parent's objects are never scanned (or copied) by this process
    gc.disable()
    tally = _Tally()

    def send(kind: bytes, payload: bytes) -> None:
        data = memoryview(kind + len(payload).to_bytes(4, "little") + payload)
        while data:
            data = data[os.write(res_w, data):]

    def progress(entries: int, blocks: int) -> None:
        send(b"p", marshal.dumps((entries, blocks)))

    queue: deque[str] = deque()
    while True:
        raw = os.read(task_r, _TASK)
        if not raw:
            break
        start, stop = int.from_bytes(raw[:4], "little"), int.from_bytes(raw[4:], "little")
        queue.extend(tasks[start:stop])
        _walk(tally, queue, root_dev, one_file_system, progress, fifo=False, stop=None)
    progress(tally.entries(), tally.blocks)
    send(b"r", marshal.dumps((tally.blocks, tally.size, tally.files, tally.dirs, tally.newest,
                              tally.errors, tally.links)))
    return 0
