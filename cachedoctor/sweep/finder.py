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

It is a visitor of the one walker (`fs.walk.TreeWalk`, through the OS seam `fs.seam`): each
folder's frame carries where it is (its project, the .gitignore names above it, the output it
is part of), decided while its parent is listed, so a subtree switches to counting as soon as
its top is recognised. Links are never followed: a link named like an output is noted and
left alone. Folders are opened relative to their parent's descriptor and must be the folder
the parent's listing showed (the walker's check), so one swapped for a link or another folder
in between is skipped; a candidate is looked into the same way before it is decided on, and
marker files are read through the seam (`Ops.read_head`: a regular file, never a link).

How it is fast (Linux): names come from `os.listdir(fd)` (no DirEntry objects), one `lstat`
per entry relative to the folder's descriptor, no object per entry; the cyclic garbage
collector is paused; on a big tree the walker shares the top among forked workers (one per
usable CPU), which send their findings back to be merged (hard links across workers
included); a worker that fails leaves its folders to the parent. Elsewhere the walk runs in one
process; on Windows the seam is path-based, reparse points (junctions, symlinks) are links,
sizes are apparent bytes, and identity (hard links) inside outputs comes from `lstat`.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
from collections.abc import Callable
from typing import Any

import msgspec

from cachedoctor.fs import seam
from cachedoctor.fs.walk import Frame, Task, TreeWalk, join_rel, worker_count
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
_SEP = os.sep
_VANISHED = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
NEVER = float("-inf")

TASKS_PER_WORKER = 16  # the parent walks breadth-first until this many folders per worker...
MIN_PARENT_ENTRIES = 4096  # ...and at least this many entries (a small tree: one process)
MAX_PARENT_ENTRIES = 65536  # ...but shares what it has after this many
PROGRESS_EVERY = 4096  # entries between progress reports
GITIGNORE_LIMIT = 64 * 1024


class Output(msgspec.Struct):
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
    links: dict[tuple[int, int], list[int]] = msgspec.field(default_factory=dict)  # -> [bytes, names, nlink]
    git_inside: list[str] = msgspec.field(default_factory=list)
    mounts_inside: list[str] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)

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


class Project(msgspec.Struct):
    """A folder holding a `.git` or a build file (or the walked folder itself): outputs are
    dated by the newest file from here down."""

    path: str
    parent: str | None
    git: bool


class Passed(msgspec.Struct, frozen=True):
    """A folder (or link) named like an output that is not one, and why."""

    path: str
    kind: str
    reason: str


class Survey(msgspec.Struct):
    root: str
    outputs: dict[str, Output] = msgspec.field(default_factory=dict)
    projects: dict[str, Project] = msgspec.field(default_factory=dict)
    newest: dict[str, float] = msgspec.field(default_factory=dict)  # project -> newest mtime, own folders
    passed: list[Passed] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
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


_NO_IGNORES: frozenset[str] = frozenset()
# What a folder's frame carries (`Frame.data`): the project it is in, the names .gitignore
# files above it ignore at any depth, and the path of the output it is part of (None: source).
_Where = tuple[str, frozenset[str], "str | None"]


class _Probe:
    """What the kinds' markers look at, for one candidate: its parent's listing and files, and
    its own (opened lazily, once, if it is still the folder the listing showed)."""

    def __init__(self, walk: _Finder, parent: Frame, name: str, st: Any,
                 ignores: frozenset[str]) -> None:
        self.walk, self.parent, self.name, self.st = walk, parent, name, st
        self.ignores = ignores
        self._beside: frozenset[str] | None = None
        self._fd: int | None = None
        self._opened = False
        self._inside: list[str] | None = None

    @property
    def beside(self) -> frozenset[str]:
        if self._beside is None:
            self._beside = frozenset(self.parent.names)
        return self._beside

    def _open(self) -> int | None:
        if not self._opened:
            self._opened = True
            with contextlib.suppress(OSError):
                listed = self.walk._open_listed(self.name, self.parent.fd, self.st)
                self._fd = None if listed is None else listed[0]
        return self._fd

    def inside(self) -> list[str]:
        if self._inside is None:
            fd = self._open()
            self._inside = []
            if fd is not None:
                with contextlib.suppress(OSError):
                    self._inside = self.walk.ops.listdir(fd)
        return self._inside

    def read_beside(self, name: str, limit: int = READ_LIMIT) -> bytes | None:
        return self.walk.ops.read_head(name, limit, dir_fd=self.parent.fd)

    def read_inside(self, name: str, limit: int = READ_LIMIT) -> bytes | None:
        fd = self._open()
        return None if fd is None else self.walk.ops.read_head(name, limit, dir_fd=fd)

    def ignored(self) -> bool:
        return self.name in self.ignores

    def close(self) -> None:
        if self._fd is not None:
            self.walk.ops.close(self._fd)


class _Finder(TreeWalk):
    """The walk of one folder tree, a visitor of `fs.walk` (see the module docstring). Each
    frame's `data` is its `_Where`; a subfolder's is decided while its parent is listed."""

    same_device = False  # sources on another filesystem are searched; outputs check their own

    def __init__(self, root: str, wanted: frozenset[str] | None,
                 on_progress: ProgressCallback | None, workers: int) -> None:
        super().__init__(root)
        self.wanted = wanted  # ids of the kinds measured (None: all); others are skipped
        self.workers = workers
        self.survey = Survey(root)
        self.on_progress = on_progress
        self.next_report = PROGRESS_EVERY
        self.found_bytes = 0
        self.unit = self.ops.block_unit
        # inside outputs hard links are counted once: Windows' listing has no identity
        self.output_lstat = self.ops.lstat if self.ops.listing_identity else self.ops.lstat_full
        self.prefix = root if root.endswith(os.sep) else root + os.sep
        self.progress: dict[int, int] = {}  # forked worker -> entries it has seen
        self.base = -1  # entries seen here before the workers started

    def run(self) -> Survey:
        try:
            self.ops.lstat_path(self.root)
        except OSError as exc:
            self.survey.errors.append(f"{self.root}: {exc.strerror}")
            return self.survey
        self.survey.projects[self.root] = Project(self.root, None, False)
        self._walk_root()
        self._progress()
        return self.survey

    def _path(self, rel: str) -> str:
        if not rel:
            return self.root
        return self.prefix + (rel if _SEP == "/" else rel.replace("/", _SEP))

    # ------------------------------------------------------------------ the engine's hooks

    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        try:
            frame.names = self.ops.listdir(frame.fd)
        except OSError as exc:
            self.survey.errors.append(f"{self._path(frame.rel)}: {exc.strerror}")
        self.survey.entries += len(frame.names)
        if parent is None:
            frame.data = (self.root, _NO_IGNORES, None)

    def _error(self, rel: str, exc: OSError) -> None:
        if exc.errno not in _VANISHED:
            self.survey.errors.append(f"{self._path(rel)}: {exc.strerror}")

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        if reason == "changed":
            detail = "replaced while it was being read; not entered"
        self.survey.errors.append(f"{self._path(rel)}: {detail}")

    def _state(self) -> Any:
        return self.survey, self.found_bytes

    def _absorb(self, state: Any) -> None:
        survey, found_bytes = state
        self.survey.merge(survey)
        self.found_bytes += found_bytes

    def _fresh(self) -> None:
        """A worker counts its own share: every output found so far starts again at 0."""
        parent = self.survey
        self.survey = Survey(self.root, {p: o.fresh() for p, o in parent.outputs.items()},
                             dict(parent.projects))
        self.found_bytes = 0
        self.next_report = PROGRESS_EVERY

    def _enough(self, ntasks: int, wanted: int) -> bool:
        entries = self.survey.entries
        return ntasks >= 2 and (
            (entries >= MIN_PARENT_ENTRIES and ntasks >= TASKS_PER_WORKER * self.workers)
            or entries >= MAX_PARENT_ENTRIES)

    def _worth_forking(self, ntasks: int) -> bool:
        return ntasks >= 2 and self.survey.entries >= MIN_PARENT_ENTRIES

    # ------------------------------------------------------------------ progress

    def _progress(self) -> None:
        if self.send is not None:  # a forked worker: tell the parent
            self.send(b"p", self.survey.entries.to_bytes(8, "little"))
        elif self.on_progress is not None:
            self.on_progress(self.survey.entries, self.found_bytes)

    def _worker_progress(self, worker: int, payload: bytes) -> None:
        if self.base < 0:
            self.base = self.survey.entries
        self.progress[worker] = int.from_bytes(payload, "little")
        if self.on_progress is not None:
            self.on_progress(self.base + sum(self.progress.values()), self.found_bytes)

    # ------------------------------------------------------------------ one folder

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        pending = frame.pending
        if pending is None:
            project, ignores, output = frame.data
            if output is None:
                pending = self._source(frame, project, ignores)
            else:
                pending = self._output(frame, self.survey.outputs[output])
            if self.survey.entries >= self.next_report:
                self.next_report = self.survey.entries + PROGRESS_EVERY
                self._progress()
            if defer is not None:
                rel = frame.rel
                defer.extend(Task(frame, name, join_rel(rel, name), st, where)
                             for name, st, where in pending)
                frame.pending = []
                return False
            frame.pending = pending
        while pending:
            name, st, where = pending.pop()
            child = self._open(frame, name, join_rel(frame.rel, name), st, where)
            if child is not None:
                frames.append(child)
                return True
        return False

    def _source(self, frame: Frame, project: str,
                ignores: frozenset[str]) -> list[tuple[str, Any, _Where]]:
        """A folder outside outputs: date its project, find the outputs among its subfolders;
        returns the subfolders to walk."""
        lstat, fd, names = self.ops.lstat, frame.fd, frame.names
        survey = self.survey
        errors = survey.errors
        newest = NEVER
        git = False
        subfolders: list[tuple[str, Any]] = []
        candidates: list[tuple[str, Any]] = []
        by_folder, not_activity = BY_FOLDER, NOT_ACTIVITY
        for name in names:
            try:
                st = lstat(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in _VANISHED:
                    errors.append(f"{self._path(join_rel(frame.rel, name))}: {exc.strerror}")
                continue
            mode = st.st_mode & 0o170000
            if mode == 0o040000:  # links (Windows: junctions too) are S_IFLNK through the seam
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
            if mode == _IFLNK and name in by_folder:
                survey.passed.append(Passed(self._path(join_rel(frame.rel, name)),
                                            by_folder[name][0].id, "a link: never followed"))
                continue
            mtime = st.st_mtime
            if mtime > newest and name not in not_activity:
                newest = mtime
        if not frame.rel:  # the walked folder itself
            survey.projects[self.root].git = git
        elif git or not PROJECT_MARKERS.isdisjoint(names):
            path = self._path(frame.rel)
            survey.projects[path] = Project(path, project, git)
            project = path
            if git:
                ignores = _NO_IGNORES  # a repository's own .gitignore files start afresh
        if newest > survey.newest.get(project, NEVER):
            survey.newest[project] = newest
        here = ignores
        if ".gitignore" in names:
            here, ignores = _gitignore(
                self.ops.read_head(".gitignore", GITIGNORE_LIMIT, dir_fd=fd), ignores)
        below: _Where = (project, ignores, None)
        pending = [(name, st, below) for name, st in subfolders]
        for name, st in candidates:
            if not self._candidate(frame, name, st, project, here, pending) \
                    and not not_searched(name):
                pending.append((name, st, below))
        return pending

    def _candidate(self, frame: Frame, name: str, st: Any, project: str,
                   ignores: frozenset[str], pending: list[tuple[str, Any, _Where]]) -> bool:
        """Try a folder named like an output; True when it is one (queued to be measured, or
        skipped when its kind was not asked for)."""
        path = self._path(join_rel(frame.rel, name))
        probe = _Probe(self, frame, name, st, ignores)
        try:
            for kind in BY_FOLDER[name]:
                why = kind.recognise(probe)
                if why is None:
                    continue
                if self.wanted is not None and kind.id not in self.wanted:
                    return True  # an output, but not of a kind asked for: not walked
                parent = frame.st
                if st.st_dev != parent.st_dev:
                    self.survey.passed.append(Passed(path, kind.id, "a mount point (another "
                                                     "filesystem): never entered"))
                    return True
                output = Output(path, kind.id, why, project, st.st_dev, st.st_ino,
                                parent.st_dev, parent.st_ino, kind.only)
                size = st.st_blocks * self.unit
                output.bytes = output.single = output.root_bytes = output.dir_bytes = size
                output.dirs = 1
                self.survey.outputs[path] = output
                self.found_bytes += size
                pending.append((name, st, (project, _NO_IGNORES, path)))
                return True
        except OSError as exc:
            self.survey.errors.append(f"{path}: {exc.strerror}")
            return True
        finally:
            probe.close()
        for kind in BY_FOLDER.get(name, ()):
            self.survey.passed.append(Passed(path, kind.id, kind.miss()))
        return False

    def _output(self, frame: Frame, out: Output) -> list[tuple[str, Any, _Where]]:
        """A folder inside an output: count it like du; returns the subfolders to walk."""
        lstat, fd = self.output_lstat, frame.fd
        links = out.links
        only = out.only
        dev = out.dev
        unit = self.unit
        where = frame.data
        subfolders: list[tuple[str, Any, _Where]] = []
        total = single = files = dirs = dir_bytes = 0
        for name in frame.names:
            try:
                st = lstat(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in _VANISHED:
                    out.errors.append(f"{self._path(join_rel(frame.rel, name))}: "
                                      f"{exc.strerror}")
                continue
            size = st.st_blocks * unit
            if st.st_mode & 0o170000 == 0o040000:
                if name == ".git":
                    out.git_inside.append(self._path(join_rel(frame.rel, name)))
                    continue
                if st.st_dev != dev:
                    out.mounts_inside.append(self._path(join_rel(frame.rel, name)))
                    continue
                dirs += 1
                total += size
                single += size
                dir_bytes += size
                subfolders.append((name, st, where))
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
        return subfolders


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


def survey(root: str, *, kinds: tuple[Kind, ...] | None = None,
           on_progress: ProgressCallback | None = None, workers: int | None = None) -> Survey:
    """Find, measure and date the build outputs below `root` (a real folder path). `kinds`:
    only these are measured; outputs of other kinds are recognised and left unwalked."""
    wanted = None if kinds is None else frozenset(k.id for k in kinds)
    ops = seam.current()
    return _Finder(root, wanted, on_progress, worker_count(workers, ops)).run()


__all__ = ["NEVER", "Output", "Passed", "Project", "Survey", "survey"]
