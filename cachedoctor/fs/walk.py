"""The one walker: depth-first over open folder descriptors, iterative, bounded in depth.

A walk keeps a stack of `Frame`s, one per folder from the root down to where it is; each holds
the folder's descriptor and its names (listed once). A visitor (`measure`, the deleter, the
survey, the copier, the verifier, the unit listing, sweep's finder) subclasses `TreeWalk` and
writes one hot loop, `_scan`, over a folder's names; for a subfolder it calls `_open`, which

* refuses another device (unless the visitor walks across mounts) and, where a mount lies below
  the root, another mount of the same device (Linux mount ids: a bind mount keeps st_dev);
* opens it ``O_NOFOLLOW | O_DIRECTORY`` *relative to the parent's descriptor* and compares the
  opened folder's (st_dev, st_ino) with the lstat seen while listing: a folder swapped for a
  link or another folder in between is not entered (no check-then-use race);
* stops at `MAX_DEPTH` levels with a clear reason instead of a RecursionError or running out of
  descriptors (the soft RLIMIT_NOFILE is raised towards the hard one when a deep tree needs it).

What a visitor decides about a subfolder while listing its parent travels with it: `_open`
(and a deferred `Task`) gives the new frame that `data` (sweep's finder: the subtree is inside
a build output and is counted, not searched). `_open_listed` opens a subfolder with the same
identity check without entering it, for a visitor that looks inside before it decides.

After a folder's last entry the walk closes it and calls `_done(parent, child)` (post-order:
the deleter removes it there, the copier sets its times). On Linux a big tree can be shared
among forked workers: the parent opens the top of the tree breadth-first until it has enough
folders queued, then each worker pulls slices of that list from a shared pipe (fixed 8-byte records
written atomically, so reads never tear), walks each below the inherited parent descriptor, and
sends progress and its result back on a pipe of its own; a worker that dies leaves its folders
to the parent, which walks them itself. Where there is no fork, a visitor may use threads over
the top-level folders instead (system calls release the GIL).

On Windows the descriptors are the seam's (`fs.windows`); the walk is the same code.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from cachedoctor import collector
from cachedoctor.fs import seam
from cachedoctor.fs.seam import Ops

MAX_WORKERS = 8  # forked workers of a walk that counts (measure, sweep's finder) at the most
MAX_DEPTH = 2048  # folders below the root; deeper trees get a clear "too deep", not a crash
TASKS_PER_WORKER = 8  # the parent opens folders breadth-first until this many per worker wait
MAX_EXPAND_DEPTH = 4  # ...but never deeper than this below the root
MAX_EXPAND_FOLDERS = 512  # ...nor with more folders open at once than this
TASK_RECORDS_PER_WORKER = 32  # tasks are handed out in about this many slices per worker
_FRAME_HEADER = 5  # kind (1 byte) + payload length (4 bytes, little endian)
_TASK = 8  # one task record: start and stop index (4 bytes each)
_GONE = frozenset({errno.ELOOP, errno.ENOTDIR, errno.ENOENT})


class Frame:
    """One open folder on the walk's stack. `deleted`/`remaining`/`selected_all` are the
    deleter's counters (the engine's own `_walk_task` reads `deleted`); `data` is the
    visitor's (the copier: the destination folder's descriptor)."""

    __slots__ = ("data", "deleted", "depth", "fd", "index", "name", "names", "owned",
                 "pending", "rel", "remaining", "selected_all", "st")

    def __init__(self, fd: int, rel: str, name: str, names: list[str], selected_all: bool = True,
                 owned: bool = True, depth: int = 0, st: Any = None) -> None:
        self.fd = fd
        self.rel = rel
        self.name = name
        self.names = names
        self.index = 0
        self.deleted = 0
        self.remaining = 0
        self.selected_all = selected_all
        self.owned = owned  # opened by the walk: closed (and maybe removed) when done
        self.depth = depth
        self.st = st
        self.data: Any = None
        self.pending: list[tuple[Any, ...]] | None = None  # (name, lstat, ...) still to walk


class Task:
    """A folder left for later (a worker, a thread): its parent frame, name and listed lstat,
    and the `data` its frame starts with (what the visitor decided about it while listing
    the parent: sweep's finder, whether it is inside a build output)."""

    __slots__ = ("data", "name", "parent", "rel", "st")

    def __init__(self, parent: Frame, name: str, rel: str, st: Any, data: Any = None) -> None:
        self.parent = parent
        self.name = name
        self.rel = rel
        self.st = st
        self.data = data


class Listed:
    """A subfolder as a compiled loop saw it (`Ops.folder_counter`, `Ops.folder_lister`):
    the identity `TreeWalk._open` compares the opened folder with."""

    __slots__ = ("st_dev", "st_ino")

    def __init__(self, st_dev: int, st_ino: int) -> None:
        self.st_dev = st_dev
        self.st_ino = st_ino


def join_rel(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


_FD_RESERVE = 24  # descriptors kept free for what a level does besides holding its folder


def fd_room(per_level: int, grow: bool) -> int:
    """How many more folder levels fit under RLIMIT_NOFILE with the descriptors open now, at
    `per_level` each; with `grow`, the soft limit is raised to the hard one first (a deep tree
    holds one or two descriptors per level; macOS's soft default is 256)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows: the seam's descriptors are not limited
        return MAX_DEPTH + 1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if grow:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
        if soft < wanted:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                soft = wanted
    return max(0, (soft - _open_descriptors() - _FD_RESERVE) // per_level)


def _open_descriptors() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return len(os.listdir(folder))
    return 64


class TreeWalk:
    """The engine. Subclasses implement `_scan` and the hooks below."""

    workers = 0  # forked workers allowed (Linux); 0 or 1: none
    threads = 0  # threads over the top-level folders when not forking
    same_device = True  # never enter another device (du -x, the deleter)
    check_mounts = False  # also compare mount ids when a mount lies below the root
    fds_per_level = 1  # descriptors one level of the stack holds (the copier: two)

    def __init__(self, root: str, ops: Ops | None = None) -> None:
        self.root = root
        self.ops = ops if ops is not None else seam.current()
        self.root_dev = 0
        self.root_mnt: int | None = None
        self.max_depth = MAX_DEPTH
        self.fd_limit = -1  # the depth the descriptor limit allows, from `fd_room`

    # ------------------------------------------------------------------ hooks (visitors)

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        """The entries of one folder from `frame.index`: push a subfolder and return True to
        walk it first, or (with `defer`) list subfolders there; False when the folder is done."""
        raise NotImplementedError

    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        """A folder was opened (the root: parent None): list it."""
        frame.names = self._list(frame)

    def _list(self, frame: Frame) -> list[str]:
        try:
            return self.ops.listdir(frame.fd)
        except OSError as exc:
            self._error(frame.rel, exc)
            return []

    def _done(self, parent: Frame, child: Frame) -> None:
        """Post-order: `child` is walked and its descriptor closed."""

    def _unopened(self, parent: Frame) -> None:
        """A subfolder of `parent` could not be entered (already reported)."""

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        """A folder not entered: reason "other filesystem", "changed" or "too deep"."""

    def _error(self, rel: str, exc: OSError) -> None:
        """A failure the walk went on after."""

    def _state(self) -> Any:
        """What a forked worker sends back (picklable)."""
        return None

    def _absorb(self, state: Any) -> None:
        """Merge a worker's (or a thread's) `_state` into this walk."""

    def _fresh(self) -> None:
        """Reset the results, in a worker or a thread clone, so only its own part is sent."""

    def _worker_progress(self, worker: int, payload: bytes) -> None:
        """A progress frame from a forked worker."""

    def _enough(self, ntasks: int, wanted: int) -> bool:
        """Whether the parent has opened enough of the top to share it."""
        return ntasks >= wanted

    def _worth_forking(self, ntasks: int) -> bool:
        return ntasks > 1

    def _task_finished(self, task: Task, outcome: bool | None) -> None:
        """A shared task's outcome (None: its worker died; walk it here)."""
        if outcome is None:
            self._walk_task(task)

    # ------------------------------------------------------------------ the engine

    def path_of(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _open_listed(self, name: str, dir_fd: int, st: Any) -> tuple[int, Any] | None:
        """Open the subfolder `name` of `dir_fd` if it is still the folder its listing showed
        (lstat `st`): its descriptor and fstat, or None when it was replaced (a link, another
        folder; closed again). OSError as `Ops.open_dir` raises it. For a visitor that looks
        into a folder before deciding whether to enter it, and for `_open`."""
        ops = self.ops
        fd = ops.open_dir(name, dir_fd)
        opened = ops.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            ops.close(fd)
            return None
        return fd, opened

    def _open(self, parent: Frame, name: str, rel: str, st: Any,
              data: Any = None) -> Frame | None:
        """Enter a subfolder listed with lstat `st` (see the module docstring); its frame
        starts with `data`."""
        if self.same_device and st.st_dev != self.root_dev:
            self._skip(rel, "other filesystem", "a mount point; not entered")
            return None
        if parent.depth >= self.max_depth:
            self._skip(rel, "too deep", f"more than {self.max_depth} folders below "
                       f"{self.root}; not entered")
            return None
        if parent.depth + 1 >= self.fd_limit:
            self.fd_limit = parent.depth + fd_room(self.fds_per_level, grow=self.fd_limit >= 0)
            if parent.depth + 1 >= self.fd_limit:
                self._skip(rel, "too deep", f"{parent.depth + 1} folders below {self.root}: "
                           "more than the open-file limit allows (ulimit -n); not entered")
                return None
        try:
            listed = self._open_listed(name, parent.fd, st)
        except OSError as exc:
            if exc.errno not in _GONE:
                self._error(rel, exc)
                return None
            listed = None
        if listed is None:
            self._skip(rel, "changed", "replaced while walking; not entered")
            return None
        fd, opened = listed
        if self.root_mnt is not None and self.ops.mount_id(fd) != self.root_mnt:
            self.ops.close(fd)  # a bind mount of the same filesystem (same st_dev): another folder
            self._skip(rel, "other filesystem", "a mount point; not entered")
            return None
        frame = Frame(fd, rel, name, [], parent.selected_all, depth=parent.depth + 1, st=opened)
        frame.data = data
        self._enter(parent, frame, st)
        return frame

    def _open_root(self, root_fd: int, st: Any) -> Frame:
        """The root frame (not owned: the caller opened it and closes it)."""
        self.root_dev = st.st_dev
        if self.check_mounts and self.ops.mounts_below(self.root) is not False:
            # a mount below the root (or no way to tell): check each folder's mount id
            self.root_mnt = self.ops.mount_id(root_fd)
        frame = Frame(root_fd, "", "", [], owned=False, st=st)
        self._enter(None, frame, st)
        return frame

    def _walk_root(self, *, selected_all: bool = True) -> Frame | None:
        """Open the root and walk everything below it: the read-only visitors' whole run. A
        root that cannot be opened is reported through `_error("")` like any folder (None is
        returned); otherwise the root frame, its descriptor closed, for what the visitor kept
        on it."""
        ops = self.ops
        try:
            root_fd = ops.open_root(self.root)
        except OSError as exc:
            self._error("", exc)
            return None
        try:
            root = self._open_root(root_fd, ops.fstat(root_fd))
            root.selected_all = selected_all
            self._walk(root)
        finally:
            ops.close(root_fd)
        return root

    def _walk(self, root: Frame) -> None:
        """Walk everything below `root`, forked, threaded or here; the collector is paused
        (no reference cycles are made; rescanning the heap only costs time)."""
        with collector.paused():
            if self.workers > 1 and self.ops.can_fork:
                self._walk_forked(root)
            elif self.threads > 1:
                self._walk_threads(root)
            else:
                self._loop([root], base=0)

    def _loop(self, frames: list[Frame], base: int) -> None:
        """Depth-first, post-order, until only `base` frames are left (those are not closed).
        On an exception every frame it opened is closed."""
        try:
            while len(frames) > base:
                frame = frames[-1]
                if self._scan(frame, frames, None):
                    continue  # a subfolder was pushed: walk it first
                frames.pop()
                if frame.owned:
                    self.ops.close(frame.fd)
                    if frames:
                        self._done(frames[-1], frame)
        except BaseException:
            while len(frames) > base:
                frame = frames.pop()
                if frame.owned:
                    with contextlib.suppress(OSError):
                        self.ops.close(frame.fd)
            raise

    def _walk_task(self, task: Task, private: bool = False) -> bool:
        """Walk one folder; True when it was removed. `private` (a worker or a thread): count
        the parent's outcome on a copy; the caller applies it."""
        parent = task.parent
        if private:
            parent = Frame(parent.fd, parent.rel, parent.name, [], parent.selected_all, False,
                           parent.depth, parent.st)
        before = parent.deleted
        child = self._open(parent, task.name, task.rel, task.st, task.data)
        if child is None:
            self._unopened(parent)
        else:
            self._loop([parent, child], base=1)
        return parent.deleted > before

    # ------------------------------------------------------------------ threads

    def _walk_threads(self, root: Frame) -> None:
        """The root's own entries here; each top-level folder as its own task, on threads.
        Every thread acts only through descriptors below the root's."""
        tasks: list[Task] = []
        self._scan(root, [root], tasks)
        count = min(self.threads, len(tasks))
        if count > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=count) as pool:
                states = list(pool.map(self._subtree, tasks))
        else:
            states = [self._subtree(task) for task in tasks]
        for state in states:
            self._absorb(state)

    def _subtree(self, task: Task) -> Any:
        import copy  # only a walk split into subtrees needs it: 1 ms of every start otherwise

        clone = copy.copy(self)
        clone._fresh()
        clone._walk_task(task, private=True)  # the root is never removed: its counts don't matter
        return clone._state()

    # ------------------------------------------------------------------ forked workers

    def _walk_forked(self, root: Frame) -> None:
        """Open the top of the tree breadth-first until enough folders are queued (or
        `MAX_EXPAND_DEPTH` / `MAX_EXPAND_FOLDERS` is reached), then share the queue."""
        from collections import deque

        first: list[Task] = []
        self._scan(root, [root], first)
        queue = deque(first)
        opened: list[tuple[Frame, Frame]] = []  # (parent, child) opened here, in order
        wanted = TASKS_PER_WORKER * self.workers
        # the folders opened here stay open until the end: at most half the descriptors free
        # (the soft limit raised first), the other half for the walks below them
        most = min(MAX_EXPAND_FOLDERS, fd_room(1, grow=True) // 2)
        try:
            while (queue and not self._enough(len(queue), wanted)
                   and len(opened) < most
                   and queue[0].parent.depth < MAX_EXPAND_DEPTH):
                task = queue.popleft()
                child = self._open(task.parent, task.name, task.rel, task.st, task.data)
                if child is None:
                    self._unopened(task.parent)
                    continue
                opened.append((task.parent, child))
                below: list[Task] = []
                self._scan(child, [child], below)
                queue.extend(below)
            tasks = list(queue)
            self.fd_limit = -1  # the top holds descriptors now: the depth budget is counted again
            if self._worth_forking(len(tasks)):
                self._share(tasks)
            else:
                for task in tasks:
                    self._walk_task(task)
        finally:
            for parent, child in reversed(opened):  # post-order: deepest first
                self.ops.close(child.fd)
                self._done(parent, child)

    def _share(self, tasks: list[Task]) -> None:
        """Fork the workers, feed them slices of `tasks`, read their progress and results."""
        if sys.platform == "win32":  # pragma: no cover - can_fork is False there
            raise NotImplementedError("forked walks need fork")
        import pickle
        import select
        import signal

        nworkers = min(self.workers, len(tasks))
        task_r, task_w = os.pipe()
        children: dict[int, int] = {}  # result pipe -> pid
        results: dict[int, bytes] = {}
        try:
            for _ in range(nworkers):
                res_r, res_w = os.pipe()

                def work(res_r: int = res_r, res_w: int = res_w) -> int:  # pragma: no cover
                    os.close(res_r)  # in the child
                    os.close(task_w)
                    for other in children:
                        os.close(other)
                    return self._worker(task_r, res_w, tasks)

                def register(pid: int, res_r: int = res_r, res_w: int = res_w) -> None:
                    os.close(res_w)
                    children[res_r] = pid

                fork_worker(work, register)
            os.close(task_r)
            task_r = -1
            os.set_blocking(task_w, False)
            step = max(1, len(tasks) // (TASK_RECORDS_PER_WORKER * nworkers))
            pending = memoryview(b"".join(
                start.to_bytes(4, "little") + min(start + step, len(tasks)).to_bytes(4, "little")
                for start in range(0, len(tasks), step)))
            buffers = {fd: bytearray() for fd in children}
            poller = select.poll()  # not select.select: no FD_SETSIZE limit on descriptor numbers
            for fd in children:
                poller.register(fd, select.POLLIN)
            poller.register(task_w, select.POLLOUT)
            open_fds = set(children)
            while open_fds:
                for fd, _event in poller.poll():
                    if fd == task_w:
                        pending = _feed(task_w, pending)
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
                    while len(buf) >= _FRAME_HEADER:
                        length = int.from_bytes(buf[1:_FRAME_HEADER], "little")
                        if len(buf) < _FRAME_HEADER + length:
                            break
                        kind, payload = buf[0], bytes(buf[_FRAME_HEADER:_FRAME_HEADER + length])
                        del buf[:_FRAME_HEADER + length]
                        if kind == ord("p"):
                            self._worker_progress(fd, payload)
                        elif kind == ord("r"):
                            results[fd] = payload
            finished: dict[int, bool] = {}
            for fd, pid in list(children.items()):
                status = _reap(pid)
                del children[fd]
                os.close(fd)
                if status in (0, None) and fd in results:
                    try:
                        state, done = pickle.loads(results[fd])
                    except Exception:  # a torn result: its tasks are walked again below
                        continue
                    self._absorb(state)
                    finished.update(done)
        except BaseException:
            for fd, pid in children.items():  # Ctrl-C or a failure here: stop the workers
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                _reap(pid)
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
        finally:
            for fd in (task_r, task_w):
                if fd >= 0:
                    os.close(fd)
        for index, task in enumerate(tasks):
            self._task_finished(task, finished.get(index))

    def _worker(self, task_r: int, res_w: int, tasks: Sequence[Task]) -> int:  # pragma: no cover
        """A forked worker: pull task slices until the pipe is empty, then report once."""
        import pickle

        gc.freeze()  # the parent's objects are never scanned (or copied) by this process
        gc.disable()
        self._fresh()
        self.send = lambda kind, payload: _send(res_w, kind, payload)
        done: dict[int, bool] = {}
        while True:
            raw = os.read(task_r, _TASK)
            if len(raw) < _TASK:
                break
            start, stop = int.from_bytes(raw[:4], "little"), int.from_bytes(raw[4:], "little")
            for index in range(start, stop):
                done[index] = self._walk_task(tasks[index], private=True)
        _send(res_w, b"r", pickle.dumps((self._state(), done), protocol=pickle.HIGHEST_PROTOCOL))
        os.close(res_w)
        return 0

    send: Any = None  # in a worker: send(kind, payload) to the parent


def worker_count(requested: int | None, ops: Ops, most: int = MAX_WORKERS) -> int:
    """Forked workers for a walk: 1 (none) where the seam cannot fork; `requested` when
    given; else one per usable CPU, at most `most`."""
    if not ops.can_fork:
        return 1
    if requested is not None:
        return max(1, requested)
    return max(1, min(usable_cpus(), most))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one)."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def fork_worker(work: Callable[[], int], register: Callable[[int], None]) -> int:
    """Fork a worker that runs `work` (its exit code) and `register(pid)` it in the parent.
    Ctrl-C, SIGTERM or SIGHUP (what the CLI stops on) between the fork and the registration
    would leave a worker nobody stops: they are held back across both. The mask is per thread,
    so a signal another thread takes can still raise once fork returns: a worker not yet
    registered then is killed and reaped before the exception goes on."""
    import signal
    import warnings

    stop = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    pid, registered = -1, False
    try:
        with warnings.catch_warnings():  # 3.12+ warns about forking with threads alive
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, stop)
                code = work()
            finally:
                os._exit(code)
        register(pid)
        registered = True
    except BaseException:
        if pid > 0 and not registered:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop)
    return pid


def _send(fd: int, kind: bytes, payload: bytes) -> None:  # pragma: no cover - in workers
    data = memoryview(kind + len(payload).to_bytes(4, "little") + payload)
    while data:
        data = data[os.write(fd, data):]


def _feed(task_w: int, pending: memoryview) -> memoryview:
    """Write task records to the shared, non-blocking pipe in chunks of at most PIPE_BUF bytes:
    such writes are atomic, so every 8-byte read by a worker gets one whole record."""
    while pending:
        try:
            written = os.write(task_w, pending[:4096])
        except BlockingIOError:
            break
        except BrokenPipeError:  # every worker is gone; the parent walks what is left
            return pending[:0]
        pending = pending[written:]
    return pending


def _reap(pid: int) -> int | None:
    """Wait for a worker; its exit status (None when it was reaped already: SIGCHLD ignored by
    the application; then its result, if it arrived whole, is trusted)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return os.waitstatus_to_exitcode(status)
