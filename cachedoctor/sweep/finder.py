"""One walk of a folder tree that finds the build outputs in it, measures them, and dates the
projects they belong to (`survey`).

What the walk does per folder:

* outside outputs ("source" folders): every entry is `lstat`-ed relative to the folder's open
  descriptor. A subfolder named like an output (`kinds.BY_FOLDER`) is tried against its kind's
  recipes (`kinds.Kind.recognise`); one that matches is an output. Other subfolders are walked,
  except `.git` (never entered) and the folders `kinds.not_searched` names. Each file's mtime
  dates its project (`kinds.NOT_ACTIVITY` aside). A folder with a `.git` or a build file is a
  project of its own (`Project`); a `.gitignore` is read for the `Ignored` marker.
* inside an output: every entry is `lstat`-ed and counted like du counts (allocated bytes,
  hard-linked files once, folders included), plus what deleting the output alone would free: a
  file with other names outside the output (st_nlink higher than the names seen inside) frees
  nothing. A `.git` folder inside (a repository, not a build output) or another filesystem is
  not entered and noted: the plan refuses such outputs.

Links are never followed: a link named like an output is noted and left alone. Folders are
opened with O_NOFOLLOW relative to nothing but their own path, and their (st_dev, st_ino) must
be the ones the listing of their parent showed, so a folder swapped for a link (or another
folder) between listing and opening is skipped.

How it is fast (Linux): names come from `os.listdir(fd)` (no DirEntry objects), one `lstat`
per entry, no object per entry; the cyclic garbage collector is paused; the parent walks the
top of the tree breadth-first until it has enough folders queued, then forks workers (one per
usable CPU) which take folders from a shared pipe and walk each subtree depth-first; their
findings come back pickled and are merged (hard links across workers included). If a worker
fails, the parent walks everything it had shared itself. Elsewhere the walk runs in one process;
on Windows it is path-based (no dir_fd) and reparse points (junctions, symlinks) are links.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import gc
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cachedoctor.cachedirtag import read_head
from cachedoctor.safedelete import is_reparse_point
from cachedoctor.sweep.kinds import (
    BY_FOLDER,
    NOT_ACTIVITY,
    PROJECT_MARKERS,
    READ_LIMIT,
    Kind,
    not_searched,
)

ProgressCallback = Callable[[int, int], None]  # (entries seen, bytes of outputs found)

_IFLNK = 0o120000  # (the hot loops spell S_IFMT and S_IFDIR out: no global look-ups)
_WINDOWS = os.name == "nt"
_DIR_FLAGS = (
    os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_VANISHED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
_HAS_BLOCKS = hasattr(os.stat_result, "st_blocks")
NEVER = float("-inf")

TASKS_PER_WORKER = 16  # the parent walks breadth-first until this many folders per worker...
MIN_PARENT_ENTRIES = 4096  # ...and at least this many entries (a small tree: one process)
MAX_PARENT_ENTRIES = 65536  # ...but shares what it has after this many
MAX_WORKERS = 8
PROGRESS_EVERY = 4096  # entries between progress reports
GITIGNORE_LIMIT = 64 * 1024


@dataclass
class Output:
    """One build output, as found and measured. Counters are bytes allocated (st_blocks)."""

    path: str
    kind: str
    why: str  # what recognised it ("a package.json beside it")
    project: str  # the Project it belongs to
    dev: int
    ino: int
    parent_dev: int
    parent_ino: int
    only: tuple[str, ...] = ()  # file-name globs of what goes (`__pycache__`: *.pyc)
    bytes: int = 0  # like du: hard links once, folders included
    files: int = 0
    dirs: int = 0
    single: int = 0  # bytes that go with it for sure: folders, files with one name
    kept: int = 0  # bytes of files its kind keeps (not matching `only`)
    kept_files: int = 0
    root_bytes: int = 0  # the output folder's own blocks
    dir_bytes: int = 0  # the blocks of its folders (itself included)
    links: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # -> [bytes, names, nlink]
    git_inside: list[str] = field(default_factory=list)
    mounts_inside: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def fresh(self) -> Output:
        """The same output with nothing counted yet (a worker counts its own share)."""
        return Output(self.path, self.kind, self.why, self.project, self.dev, self.ino,
                      self.parent_dev, self.parent_ino, self.only)

    def merge(self, other: Output) -> None:
        self.bytes += other.bytes
        self.files += other.files
        self.dirs += other.dirs
        self.single += other.single
        self.kept += other.kept
        self.kept_files += other.kept_files
        self.root_bytes += other.root_bytes
        self.dir_bytes += other.dir_bytes
        for key, (size, names, nlink) in other.links.items():
            mine = self.links.get(key)
            if mine is None:
                self.links[key] = [size, names, nlink]
            else:
                self.bytes -= size  # counted by both: once is right
                self.files -= 1
                mine[1] += names
                mine[2] = max(mine[2], nlink)
        self.git_inside += other.git_inside
        self.mounts_inside += other.mounts_inside
        self.errors += other.errors

    @property
    def shared(self) -> int:
        """Bytes of hard-linked files that keep a name outside this output."""
        return sum(size for size, names, nlink in self.links.values() if names < nlink)

    @property
    def freed(self) -> int:
        """Bytes deleting this output alone frees (its folder stays when a file is kept)."""
        linked = sum(size for size, names, nlink in self.links.values() if names >= nlink)
        return self.single + linked - (self.root_bytes if self.kept_files else 0)


@dataclass
class Project:
    """A folder holding a `.git` or a build file (or the walked folder itself): outputs are
    dated by the newest file from here down."""

    path: str
    parent: str | None
    git: bool


@dataclass(frozen=True)
class Passed:
    """A folder (or link) named like an output that is not one, and why."""

    path: str
    kind: str
    reason: str


@dataclass
class Survey:
    root: str
    outputs: dict[str, Output] = field(default_factory=dict)
    projects: dict[str, Project] = field(default_factory=dict)
    newest: dict[str, float] = field(default_factory=dict)  # project -> newest mtime, own folders
    passed: list[Passed] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    entries: int = 0

    def activity(self) -> dict[str, float]:
        """Each project's newest file mtime, its subprojects included (NEVER: no file)."""
        rolled = {path: self.newest.get(path, NEVER) for path in self.projects}
        for path in sorted(self.projects, key=len, reverse=True):  # deepest first
            parent = self.projects[path].parent
            if parent is not None and rolled[path] > rolled.get(parent, NEVER):
                rolled[parent] = rolled[path]
        return rolled

    def merge(self, other: Survey) -> None:
        for path, output in other.outputs.items():
            mine = self.outputs.get(path)
            if mine is None:
                self.outputs[path] = output
            else:
                mine.merge(output)
        self.projects.update(other.projects)
        for path, newest in other.newest.items():
            if newest > self.newest.get(path, NEVER):
                self.newest[path] = newest
        self.passed += other.passed
        self.errors += other.errors
        self.entries += other.entries


# A folder to walk: path, (st_dev, st_ino) from its parent's listing, the project it is in,
# the names .gitignore files above it ignore at any depth, and the output it is part of.
_Task = tuple[str, int, int, str, frozenset[str], "str | None"]


class _Seam:
    """Folder access: fd-relative on POSIX (a handle is an open descriptor), path-based on
    Windows, where there is no dir_fd (a handle is the folder's path)."""

    def open(self, path: str, dev: int, ino: int) -> Any:
        fd = os.open(path, _DIR_FLAGS)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino):
            os.close(fd)
            raise _Changed(path)
        return fd

    def open_child(self, handle: Any, name: str, st: os.stat_result) -> Any:
        fd = os.open(name, _DIR_FLAGS, dir_fd=handle)
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            raise _Changed(name)
        return fd

    listdir = staticmethod(os.listdir)
    lstat = staticmethod(os.lstat)  # called as lstat(name, dir_fd=handle)
    close = staticmethod(os.close)

    def read(self, handle: Any, name: str, limit: int) -> bytes | None:
        return read_head(name, limit, dir_fd=handle)


class _WindowsSeam(_Seam):  # pragma: no cover - exercised on Windows (and by a test double)
    def open(self, path: str, dev: int, ino: int) -> Any:
        st = os.lstat(path)
        if is_reparse_point(st) or (ino and (st.st_dev, st.st_ino) != (dev, ino)):
            raise _Changed(path)
        return path

    def open_child(self, handle: Any, name: str, st: os.stat_result) -> Any:
        return self.open(os.path.join(handle, name), st.st_dev, st.st_ino)

    @staticmethod
    def lstat(name: str, dir_fd: Any = None) -> os.stat_result:  # type: ignore[override]
        return os.lstat(os.path.join(dir_fd, name))

    @staticmethod
    def close(handle: Any) -> None:  # type: ignore[override]
        return None

    def read(self, handle: Any, name: str, limit: int) -> bytes | None:
        return read_head(os.path.join(handle, name), limit)


class _Changed(Exception):
    """A folder is not the one its parent's listing showed (replaced by a link, moved)."""


def _seam() -> _Seam:
    can_fd = os.listdir in os.supports_fd and os.stat in os.supports_dir_fd
    return _Seam() if can_fd and not _WINDOWS else _WindowsSeam()


class _Probe:
    """What the kinds' markers look at, for one candidate: its parent's listing and files, and
    its own (opened lazily, once)."""

    def __init__(self, walk: _Walk, parent: Any, names: list[str], name: str,
                 st: os.stat_result, ignores: frozenset[str]) -> None:
        self.walk, self.parent, self.names, self.name, self.st = walk, parent, names, name, st
        self.ignores = ignores
        self._beside: frozenset[str] | None = None
        self._handle: Any = None
        self._inside: list[str] | None = None

    @property
    def beside(self) -> frozenset[str]:
        if self._beside is None:
            self._beside = frozenset(self.names)
        return self._beside

    def _open(self) -> Any:
        if self._handle is None:
            self._handle = self.walk.seam.open_child(self.parent, self.name, self.st)
        return self._handle

    def inside(self) -> list[str]:
        if self._inside is None:
            try:
                self._inside = self.walk.seam.listdir(self._open())
            except (OSError, _Changed):
                self._inside = []
        return self._inside

    def read_beside(self, name: str, limit: int = READ_LIMIT) -> bytes | None:
        return self.walk.seam.read(self.parent, name, limit)

    def read_inside(self, name: str, limit: int = READ_LIMIT) -> bytes | None:
        try:
            return self.walk.seam.read(self._open(), name, limit)
        except (OSError, _Changed):
            return None

    def ignored(self) -> bool:
        return self.name in self.ignores

    def close(self) -> None:
        if self._handle is not None:
            self.walk.seam.close(self._handle)


class _Walk:
    """The walk of one folder tree (see the module docstring)."""

    def __init__(self, root: str, wanted: frozenset[str] | None,
                 on_progress: ProgressCallback | None) -> None:
        self.root = root
        self.wanted = wanted  # ids of the kinds measured (None: all); others are skipped
        self.seam = _seam()
        self.sep = os.sep
        self.survey = Survey(root)
        self.on_progress = on_progress
        self.next_report = PROGRESS_EVERY
        self.found_bytes = 0
        self.send: Callable[[int], None] | None = None  # a worker's progress reporter

    # --------------------------------------------------------------------------- one folder

    def folder(self, task: _Task, push: Callable[[_Task], None]) -> None:
        path, dev, ino, project, ignores, output = task
        try:
            handle = self.seam.open(path, dev, ino)
        except _Changed:
            self.survey.errors.append(f"{path}: replaced while it was being read; not entered")
            return
        except OSError as exc:
            if exc.errno not in _VANISHED:
                self.survey.errors.append(f"{path}: {exc.strerror}")
            return
        try:
            try:
                names = self.seam.listdir(handle)
            except OSError as exc:
                self.survey.errors.append(f"{path}: {exc.strerror}")
                return
            self.survey.entries += len(names)
            if output is None:
                self._source(handle, path, dev, ino, names, project, ignores, push)
            else:
                self._output(handle, path, names, self.survey.outputs[output], push)
        finally:
            self.seam.close(handle)
        if self.survey.entries >= self.next_report:
            self.next_report = self.survey.entries + PROGRESS_EVERY
            self._progress()

    def _progress(self) -> None:
        if self.send is not None:
            self.send(self.survey.entries)
        elif self.on_progress is not None:
            self.on_progress(self.survey.entries, self.found_bytes)

    def _source(self, handle: Any, path: str, dev: int, ino: int, names: list[str],
                project: str, ignores: frozenset[str], push: Callable[[_Task], None]) -> None:
        lstat = self.seam.lstat
        errors = self.survey.errors
        prefix = path if path.endswith(self.sep) else path + self.sep
        newest = NEVER
        git = False
        subfolders: list[tuple[str, os.stat_result]] = []
        candidates: list[tuple[str, os.stat_result]] = []
        by_folder, not_activity, windows = BY_FOLDER, NOT_ACTIVITY, _WINDOWS
        for name in names:
            try:
                st = lstat(name, dir_fd=handle)
            except OSError as exc:
                if exc.errno not in _VANISHED:
                    errors.append(f"{prefix}{name}: {exc.strerror}")
                continue
            mode = st.st_mode & 0o170000
            if mode == 0o040000 and not (windows and is_reparse_point(st)):
                if name == ".git":
                    git = True
                elif name in by_folder:
                    candidates.append((name, st))
                elif not not_searched(name):
                    subfolders.append((name, st))
                continue
            if name == ".git":
                git = True  # a worktree's or submodule's pointer file
                continue
            if (mode == _IFLNK or windows) and name in by_folder and is_reparse_point(st):
                self.survey.passed.append(Passed(prefix + name, by_folder[name][0].id,
                                                 "a link: never followed"))
                continue
            mtime = st.st_mtime
            if mtime > newest and name not in not_activity:
                newest = mtime
        if path == project:  # the walked folder itself
            self.survey.projects[path].git = git
        elif git or not PROJECT_MARKERS.isdisjoint(names):
            self.survey.projects[path] = Project(path, project, git)
            project = path
            if git:
                ignores = frozenset()  # a repository's own .gitignore files start afresh
        if newest > self.survey.newest.get(project, NEVER):
            self.survey.newest[project] = newest
        here = ignores
        if ".gitignore" in names:
            here, ignores = _gitignore(self.seam.read(handle, ".gitignore", GITIGNORE_LIMIT),
                                       ignores)
        for name, st in candidates:
            found = self._candidate(handle, (dev, ino), prefix + name, names, name, st, project,
                                    here, push)
            if not found and not not_searched(name):
                subfolders.append((name, st))
        for name, st in subfolders:
            push((prefix + name, st.st_dev, st.st_ino, project, ignores, None))

    def _candidate(self, handle: Any, parent: tuple[int, int], path: str, names: list[str],
                   name: str, st: os.stat_result, project: str, ignores: frozenset[str],
                   push: Callable[[_Task], None]) -> bool:
        """Try a folder named like an output; True when it is one (queued to be measured, or
        skipped when its kind was not asked for)."""
        probe = _Probe(self, handle, names, name, st, ignores)
        try:
            for kind in BY_FOLDER[name]:
                why = kind.recognise(probe)
                if why is None:
                    continue
                if self.wanted is not None and kind.id not in self.wanted:
                    return True  # an output, but not of a kind asked for: not walked
                if st.st_dev != parent[0]:
                    self.survey.passed.append(Passed(path, kind.id, "a mount point (another "
                                                     "filesystem): never entered"))
                    return True
                output = Output(path, kind.id, why, project, st.st_dev, st.st_ino,
                                parent[0], parent[1], kind.only)
                size = st.st_blocks * 512 if _HAS_BLOCKS else st.st_size
                output.bytes = output.single = output.root_bytes = output.dir_bytes = size
                output.dirs = 1
                self.survey.outputs[path] = output
                self.found_bytes += size
                push((path, st.st_dev, st.st_ino, project, frozenset(), path))
                return True
        except OSError as exc:
            self.survey.errors.append(f"{path}: {exc.strerror}")
            return True
        finally:
            probe.close()
        for kind in BY_FOLDER.get(name, ()):
            self.survey.passed.append(Passed(path, kind.id, kind.miss()))
        return False

    def _output(self, handle: Any, path: str, names: list[str], out: Output,
                push: Callable[[_Task], None]) -> None:
        lstat = self.seam.lstat
        prefix = path if path.endswith(self.sep) else path + self.sep
        links = out.links
        only = out.only
        dev = out.dev
        has_blocks, windows = _HAS_BLOCKS, _WINDOWS
        total = single = files = dirs = dir_bytes = 0
        for name in names:
            try:
                st = lstat(name, dir_fd=handle)
            except OSError as exc:
                if exc.errno not in _VANISHED:
                    out.errors.append(f"{prefix}{name}: {exc.strerror}")
                continue
            size = st.st_blocks * 512 if has_blocks else st.st_size
            if st.st_mode & 0o170000 == 0o040000 and not (windows and is_reparse_point(st)):
                if name == ".git":
                    out.git_inside.append(prefix + name)
                    continue
                if st.st_dev != dev:
                    out.mounts_inside.append(prefix + name)
                    continue
                dirs += 1
                total += size
                single += size
                dir_bytes += size
                push((prefix + name, st.st_dev, st.st_ino, out.project, frozenset(), out.path))
                continue
            files += 1
            if only and not any(fnmatch.fnmatchcase(name, p) for p in only):
                out.kept += size
                out.kept_files += 1
                total += size
                continue
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                seen = links.get(key)
                if seen is None:
                    links[key] = [size, 1, st.st_nlink]
                    total += size
                else:
                    seen[1] += 1
                    files -= 1  # du counts an inode once
                continue
            total += size
            single += size
        out.bytes += total
        out.single += single
        out.files += files
        out.dirs += dirs
        out.dir_bytes += dir_bytes
        self.found_bytes += total

    # ---------------------------------------------------------------------------- the walk

    def run(self, workers: int) -> Survey:
        try:
            top = os.lstat(self.root)
        except OSError as exc:
            self.survey.errors.append(f"{self.root}: {exc.strerror}")
            return self.survey
        self.survey.projects[self.root] = Project(self.root, None, False)
        queue: deque[_Task] = deque([(self.root, top.st_dev, top.st_ino, self.root,
                                      frozenset(), None)])
        collecting = gc.isenabled()
        gc.disable()  # no reference cycles are made; the collector would only cost time
        try:
            if workers > 1:
                while queue and not self._enough(queue, workers):
                    self.folder(queue.popleft(), queue.append)
                if len(queue) > 1:
                    tasks = list(queue)
                    queue.clear()
                    if not self._share(tasks, workers):
                        queue.extend(tasks)  # a worker failed: walk it all here
            while queue:
                self.folder(queue.pop(), queue.append)
        finally:
            if collecting:
                gc.enable()
        self._progress()
        return self.survey

    def _enough(self, queue: deque[_Task], workers: int) -> bool:
        entries = self.survey.entries
        return len(queue) >= 2 and (
            (entries >= MIN_PARENT_ENTRIES and len(queue) >= TASKS_PER_WORKER * workers)
            or entries >= MAX_PARENT_ENTRIES)

    # ------------------------------------------------------------------------ forked workers

    def _share(self, tasks: list[_Task], workers: int) -> bool:
        """Walk `tasks` (and below) in forked workers; merge what they found. False (nothing
        merged) when a worker failed."""
        if _WINDOWS:  # pragma: no cover - there is no fork there (workers is 1)
            return False
        import pickle  # before forking: the workers need no import
        import select
        import signal

        from cachedoctor.fs.walk import fork_worker

        task_r, task_w = os.pipe()
        children: dict[int, int] = {}  # result pipe -> pid
        try:
            for _ in range(min(workers, len(tasks))):
                res_r, res_w = os.pipe()

                def work(res_r: int = res_r, res_w: int = res_w) -> int:  # pragma: no cover
                    os.close(task_w)  # in the child
                    os.close(res_r)
                    for other in children:
                        os.close(other)
                    self._worker(task_r, res_w, tasks)
                    return 0

                def register(pid: int, res_r: int = res_r, res_w: int = res_w) -> None:
                    os.close(res_w)
                    children[res_r] = pid

                fork_worker(work, register)  # the walker's: no worker left by a Ctrl-C
            os.close(task_r)
            task_r = -1
            os.set_blocking(task_w, False)
            pending = memoryview(b"".join(i.to_bytes(4, "little") for i in range(len(tasks))))
            poller = select.poll()  # no FD_SETSIZE limit on descriptor numbers
            for fd in children:
                poller.register(fd, select.POLLIN)
            poller.register(task_w, select.POLLOUT)
            buffers = {fd: bytearray() for fd in children}
            progress = dict.fromkeys(children, 0)
            base = self.survey.entries
            reports: list[Survey] = []
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
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    buffer = buffers[fd]
                    buffer += chunk
                    for kind, payload in _frames(buffer):
                        if kind == b"p":
                            progress[fd] = int.from_bytes(payload, "little")
                            if self.on_progress is not None:
                                self.on_progress(base + sum(progress.values()), self.found_bytes)
                        else:
                            reports.append(pickle.loads(payload))
            statuses = [_reap(pid) for pid in children.values()]
            children.clear()
            if len(reports) != len(statuses) or any(statuses):
                return False
            for report in reports:
                self.survey.merge(report)
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

    def _worker(self, task_r: int, res_w: int, tasks: list[_Task]) -> None:  # pragma: no cover
        """A forked worker: take task numbers until the pipe is empty, report once."""
        import pickle

        gc.freeze()
        parent = self.survey
        self.survey = Survey(self.root, {p: o.fresh() for p, o in parent.outputs.items()},
                             dict(parent.projects))
        self.found_bytes = 0

        def send(kind: bytes, payload: bytes) -> None:
            data = memoryview(kind + len(payload).to_bytes(4, "little") + payload)
            while data:
                data = data[os.write(res_w, data):]

        self.send = lambda entries: send(b"p", entries.to_bytes(8, "little"))
        stack: list[_Task] = []
        while True:
            record = os.read(task_r, 4)
            if len(record) < 4:
                break
            stack.append(tasks[int.from_bytes(record, "little")])
            while stack:
                self.folder(stack.pop(), stack.append)
        send(b"r", pickle.dumps(self.survey, protocol=pickle.HIGHEST_PROTOCOL))
        os.close(res_w)


def _frames(buffer: bytearray) -> Iterator[tuple[bytes, bytes]]:
    """Whole frames (kind: 1 byte, length: 4 bytes, payload) taken off the front of `buffer`."""
    while len(buffer) >= 5:
        length = int.from_bytes(buffer[1:5], "little")
        if len(buffer) < 5 + length:
            return
        kind, payload = bytes(buffer[:1]), bytes(buffer[5 : 5 + length])
        del buffer[: 5 + length]
        yield kind, payload


def _feed(task_w: int, pending: memoryview) -> memoryview:
    """Write whole 4-byte task records (writes of at most PIPE_BUF bytes are atomic, so a
    worker's 4-byte read always gets one record); returns what is left to write."""
    while pending:
        try:
            written = os.write(task_w, pending[:4096])
        except BlockingIOError:
            break
        except BrokenPipeError:  # every worker is gone; the caller notices missing results
            return pending[:0]
        pending = pending[written:]
    return pending


def _reap(pid: int) -> int:
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return os.waitstatus_to_exitcode(status)


def _gitignore(raw: bytes | None, inherited: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The names a .gitignore ignores (here, and at any depth below), simple patterns only:
    `name`, `name/`, `/name`, `**/name`. A negation (`!name`) un-ignores the name everywhere
    (conservative: less is recognised). Returns (ignored here, ignored below)."""
    if not raw:
        return inherited, inherited
    anywhere: set[str] = set()
    here_only: set[str] = set()
    negated: set[str] = set()
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = line.removeprefix("!").rstrip("/")
        anchored = line.startswith("/")
        line = line.lstrip("/")
        if line.startswith("**/"):
            line, anchored = line[3:], False
        if not line or "/" in line or any(c in line for c in "*?[\\"):
            continue
        if negate:
            negated.add(line)
        else:
            (here_only if anchored else anywhere).add(line)
    below = (inherited | anywhere) - negated
    return frozenset(below | (here_only - negated)), frozenset(below)


def worker_count(requested: int | None = None) -> int:
    """Forked workers to use: 1 (no fork) outside Linux; else one per usable CPU."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return 1
    if requested is not None:
        return max(1, requested)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux always has it
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def survey(root: str, *, kinds: tuple[Kind, ...] | None = None,
           on_progress: ProgressCallback | None = None, workers: int | None = None) -> Survey:
    """Find, measure and date the build outputs below `root` (a real folder path). `kinds`:
    only these are measured; outputs of other kinds are recognised and left unwalked."""
    wanted = None if kinds is None else frozenset(k.id for k in kinds)
    return _Walk(root, wanted, on_progress).run(worker_count(workers))


__all__ = ["NEVER", "Output", "Passed", "Project", "Survey", "survey", "worker_count"]
