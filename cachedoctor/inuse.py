"""Is a cache in use? Observed, not guessed from process names.

A folder is in use when some process has, at or below it (in real paths):

- a file open (`open file`),
- its current directory (`working directory`) or its root directory (`root directory`),
- a file mapped into memory (`memory map`: a shared library, a model file loaded with mmap, a
  program running from the cache).

`find_uses` answers for many folders with one pass over the process table, and says what it
could not look at (processes of other users, without root), so a caller can say "no process
found, but 12 processes of other users could not be inspected". `check_not_in_use` is the
guard the commands call: it refuses (exit 2) or, with --force, returns the warning.

Paths are compared as real paths, component by component: every folder is resolved with
`os.path.realpath` (a relocated cache is a link to another drive, and what the OS reports for a
process is always the real path), and a path matches when it is the folder or lies below it
(`/a/bc` is not below `/a/b`). On macOS and Windows the comparison ignores case.

Never counted: zombie (defunct) processes, which hold nothing any more; this process; and
this process's forked workers (children, or their children, that are forks of it: same command
line, no exec). Children that ran another program (a tool this process started, a test's
helper) are processes like any other.

Where the information comes from is one small seam, a `ProcessSource` (a callable returning
`ProcessView`s), chosen by platform:

- Linux: `/proc` read directly (`proc_source`), which is much cheaper than psutil's per-process
  objects: `/proc/PID/stat` for name, state and parent; readlinks of `cwd`, `root` and
  `fd/*`; `maps`. Processes that exit mid-scan are skipped; EACCES is counted, not raised;
  deleted files show as "PATH (deleted)" and are reported as `deleted`.
- elsewhere: psutil (`psutil_source`): `cwd()`, `open_files()`, `memory_maps()`;
  AccessDenied counts the process as not inspectable, NoSuchProcess (and its subclass
  ZombieProcess) as gone.

Not seen: files a process in another mount namespace (a container) opened through a path
this process cannot see; per-thread working directories (threads that unshared theirs); on
Linux, processes of other users when /proc is mounted with `hidepid` (they are invisible, not
even counted); on Windows, handles psutil gives up on (see `psutil_source`).
"""

from __future__ import annotations

import itertools
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import msgspec

from cachedoctor.fsutil import read_all

What = Literal["open file", "working directory", "root directory", "memory map"]

# How a process's uses are listed: the most telling first.
_WHAT_ORDER: dict[str, int] = {
    "open file": 0,
    "working directory": 1,
    "memory map": 2,
    "root directory": 3,
}


class Use(msgspec.Struct, frozen=True):
    """One process using something at or below one of the folders asked about."""

    pid: int
    name: str  # the process name ("python3", "pip")
    what: What
    path: str  # the real path the OS reports, at or below `folder`
    folder: str  # the real path of the folder asked about (the deepest one, if they nest)
    deleted: bool = False  # the file (or directory) was deleted but is still held

    def describe(self) -> str:
        path = f"{self.path} (deleted)" if self.deleted else self.path
        return f"{self.name or '?'} (pid {self.pid}): {self.what} {path}"


class UseReport(msgspec.Struct, frozen=True):
    """What `find_uses` saw: the uses found, and what it could not look at."""

    uses: tuple[Use, ...] = ()
    # Sentences such as "12 processes of other users could not be inspected".
    not_inspected: tuple[str, ...] = ()
    processes: int = 0  # processes looked at (after skipping zombies and this process)

    @property
    def in_use(self) -> bool:
        return bool(self.uses)

    @property
    def pids(self) -> tuple[int, ...]:
        """The processes found, each once, in the order of `uses`."""
        return tuple(dict.fromkeys(u.pid for u in self.uses))

    def describe(self, limit: int = 3) -> str:
        """Up to `limit` processes, one use each: "python3 (pid 41): open file /c/x and 2 more"."""
        by_pid: dict[int, list[Use]] = {}
        for use in self.uses:
            by_pid.setdefault(use.pid, []).append(use)
        parts = []
        for uses in list(by_pid.values())[:limit]:
            text = uses[0].describe()
            if len(uses) > 1:
                text += f" and {len(uses) - 1} more"
            parts.append(text)
        rest = len(by_pid) - limit
        if rest > 0:
            parts.append(f"and {rest} more process{'es' if rest > 1 else ''}")
        return "; ".join(parts)


# --- the seam -----------------------------------------------------------------------------


class Gone(Exception):
    """The process exited while it was being looked at."""


class NotInspectable(Exception):
    """Part or all of what the process uses could not be read (EACCES, AccessDenied)."""


class ProcessView(ABC):
    """One process, as a source sees it. `pid`, `ppid` and `zombie` are known up front (one
    cheap read per process); the rest is asked for only when needed."""

    pid: int
    ppid: int
    zombie: bool

    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def command(self) -> tuple[str, ...] | None:
        """The command line (None: unknown), to recognise forks of this process."""

    @abstractmethod
    def resources(self) -> Iterator[tuple[What, str, bool]]:
        """(what, path, deleted) for everything the process uses that has a path.

        Raises Gone if the process exited; after yielding what it could read, raises
        NotInspectable if anything could not be read."""

    @abstractmethod
    def other_user(self) -> bool:
        """Does another user own the process (asked only when it could not be inspected)?"""


ProcessSource = Callable[[], Iterable[ProcessView]]


# --- finding ------------------------------------------------------------------------------


def find_uses(
    folders: Iterable[str | os.PathLike[str]], *, source: ProcessSource | None = None
) -> UseReport:
    """Every process using anything at or below any of `folders` (one scan for all of them).

    Other cachedoctor processes are not counted either: one that plans reads the cache, one
    that changes it holds the cache's lock, and the lock keeps them apart, not this check."""
    matcher = _Folders(folders, fold_case=sys.platform in ("darwin", "win32"))
    if not matcher.prefixes:
        return UseReport()
    views = list((source or default_source())())
    own = _own_processes(views, os.getpid())
    for view in views:
        if view.pid not in own and _is_cachedoctor(view):
            own |= _own_processes(views, view.pid)
    uses: list[Use] = []
    other_users = own_users = looked_at = 0
    for view in views:
        if view.zombie or view.pid in own:
            continue
        looked_at += 1
        found: dict[tuple[str, str], Use] = {}
        try:
            for what, path, deleted in view.resources():
                folder = matcher.folder_of(path)
                if folder is not None and (what, path) not in found:
                    found[(what, path)] = Use(view.pid, "", what, path, folder, deleted)
        except Gone:
            continue  # it no longer uses anything
        except NotInspectable:
            if view.other_user():
                other_users += 1
            else:
                own_users += 1
        if found:
            try:
                name = view.name()
            except Gone:
                continue
            uses.extend(
                Use(u.pid, name, u.what, u.path, u.folder, u.deleted) for u in found.values()
            )
    uses.sort(key=lambda u: (u.pid, _WHAT_ORDER[u.what], u.path))
    notes = []
    if other_users:
        notes.append(f"{_processes(other_users)} of other users could not be inspected")
    if own_users:
        mine = "1 of your own processes" if own_users == 1 else f"{own_users} of your own processes"
        notes.append(f"{mine} could not be fully inspected")
    return UseReport(tuple(uses), tuple(notes), looked_at)


def check_not_in_use(
    folders: Iterable[str | os.PathLike[str]], *, force: bool, what: str
) -> str | None:
    """Refuse to change `folders` while a process uses them; with `force`, return the warning.

    `what` names them in the message ("the pip cache"). None when no process uses them (what
    could not be inspected is not a reason to refuse; `find_uses` tells it)."""
    from cachedoctor.errors import RefusedError

    report = find_uses(folders)
    if not report.in_use:
        return None
    count = len(report.pids)
    if not force:
        raise RefusedError(
            f"{what} is in use by {_processes(count)}: {report.describe()}",
            hint=f"close {'it' if count == 1 else 'them'}, or pass --force",
        )
    return f"{what} is in use ({report.describe()}); going ahead because of --force"


def _processes(n: int) -> str:
    return f"{n} process" if n == 1 else f"{n} processes"


class _Folders:
    """The folders asked about, as real paths; which of them (if any) holds a path."""

    def __init__(self, folders: Iterable[str | os.PathLike[str]], *, fold_case: bool) -> None:
        self.fold_case = fold_case
        by_key: dict[str, str] = {}
        for folder in folders:
            real = os.path.realpath(os.fspath(folder))
            by_key[self._key(real)] = real
            if sys.platform.startswith("linux"):  # a process may use it through a bind mount
                from cachedoctor.drives import mount_aliases

                for alias in mount_aliases(real):
                    by_key.setdefault(self._key(alias), real)
        # Deepest first, so nested folders report the innermost one.
        ordered = sorted(by_key.items(), key=lambda kv: len(kv[0]), reverse=True)
        self._exact = by_key
        self._below = [(_with_sep(key), real) for key, real in ordered]
        self.prefixes = tuple(prefix for prefix, _ in self._below)

    def _key(self, path: str) -> str:
        if not self.fold_case:
            return path
        return os.path.normcase(path).casefold() if os.name == "nt" else path.casefold()

    def folder_of(self, path: str) -> str | None:
        key = self._key(path) if self.fold_case else path
        exact = self._exact.get(key)
        if exact is not None:
            return exact
        if not key.startswith(self.prefixes):  # one C-level test for all the folders
            return None
        for prefix, real in self._below:
            if key.startswith(prefix):
                return real
        return None  # pragma: no cover - startswith(tuple) matched one of them


def _with_sep(path: str) -> str:
    return path if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)) else path + os.sep


def _is_cachedoctor(view: ProcessView) -> bool:
    """Started as `cachedoctor ...`, `python .../cachedoctor ...` or `python -m cachedoctor ...`."""
    try:
        argv = view.command()
    except Gone:
        return False
    if not argv:
        return False
    names = [os.path.basename(a).lower().removesuffix(".exe") for a in argv[:2]]
    if names[0] == "cachedoctor":
        return True
    if len(names) > 1 and names[1] == "cachedoctor" and names[0].startswith("python"):
        return True  # the console script run by its interpreter: python3 .../bin/cachedoctor
    return any(a == "-m" and b == "cachedoctor" for a, b in itertools.pairwise(argv))


def _own_processes(views: list[ProcessView], me: int) -> set[int]:
    """This process and its forked workers: descendants that are forks of it (same command
    line), found through the parent links of the whole table."""
    own = {me}
    children: dict[int, list[ProcessView]] = {}
    mine: ProcessView | None = None
    for view in views:
        if view.pid == me:
            mine = view
        else:
            children.setdefault(view.ppid, []).append(view)
    if mine is None or me not in children:
        return own
    try:
        my_command = mine.command()
    except Gone:  # pragma: no cover - this process is alive
        return own
    if my_command is None:
        return own
    queue = [me]
    while queue:
        for child in children.get(queue.pop(), ()):
            if child.pid in own:
                continue
            try:
                command = child.command()
            except Gone:
                continue
            if command == my_command:
                own.add(child.pid)
                queue.append(child.pid)
    return own


def default_source() -> ProcessSource:
    """The source for this platform: /proc on Linux, psutil elsewhere."""
    if sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd"):
        return proc_source()
    return psutil_source()


# --- Linux: /proc -------------------------------------------------------------------------

_PF_KTHREAD = 0x00200000  # include/linux/sched.h: kernel threads use no files
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_GONE_ERRORS = (FileNotFoundError, ProcessLookupError, NotADirectoryError)
_DELETED = " (deleted)"


def proc_source(proc: str = "/proc") -> ProcessSource:
    """Processes read straight from `proc` (Linux): one listing, one stat read per process."""

    def scan() -> Iterator[ProcessView]:
        for entry in os.listdir(proc):
            if entry.isdigit():
                view = _read_stat(proc, int(entry))
                if view is not None:
                    yield view

    return scan


def _read_stat(proc: str, pid: int) -> _ProcView | None:
    """The process `pid` from /proc/PID/stat; None if it has gone or is a kernel thread."""
    base = f"{proc}/{pid}"
    try:
        data = read_all(base + "/stat")
    except _GONE_ERRORS:
        return None
    except OSError:  # unreadable stat (should not happen; stat is world-readable)
        return _ProcView(base, pid, 0, b"?", b"?")
    # "pid (comm) state ppid pgrp session tty_nr tpgid flags ..."; comm may hold ") ".
    close = data.rfind(b")")
    fields = data[close + 2 :].split()
    if close < 0 or len(fields) < 7:
        return None  # pragma: no cover - not a stat line
    if int(fields[6]) & _PF_KTHREAD:
        return None
    return _ProcView(base, pid, int(fields[1]), data[data.find(b"(") + 1 : close], fields[0])


class _ProcView(ProcessView):
    __slots__ = ("_base", "_comm", "_unreadable", "pid", "ppid", "zombie")

    def __init__(self, base: str, pid: int, ppid: int, comm: bytes, state: bytes) -> None:
        self._base = base
        self._comm = comm
        self._unreadable = state == b"?"
        self.pid = pid
        self.ppid = ppid
        self.zombie = state in (b"Z", b"X", b"x")  # zombie, dead

    def name(self) -> str:
        """comm, or the program's file name when comm is its truncated start (15 bytes)."""
        name = self._comm.decode("utf-8", "replace")
        if len(self._comm) >= 15:
            command = self.command()
            if command:
                program = os.path.basename(command[0])
                if program.startswith(name):
                    return program
        return name

    def command(self) -> tuple[str, ...] | None:
        try:
            data = read_all(self._base + "/cmdline")
        except _GONE_ERRORS:
            raise Gone from None
        except OSError:
            return None
        return tuple(os.fsdecode(arg) for arg in data.split(b"\0")[:-1]) if data else None

    def other_user(self) -> bool:
        try:
            return os.stat(self._base).st_uid != os.geteuid()
        except OSError:
            return True

    def resources(self) -> Iterator[tuple[What, str, bool]]:
        if self._unreadable:
            raise NotInspectable
        base = self._base
        denied = False
        links: tuple[tuple[What, str], ...] = (
            ("working directory", "/cwd"),
            ("root directory", "/root"),
        )
        for what, link in links:
            try:
                target = os.readlink(base + link)
            except PermissionError:
                denied = True
                continue
            except _GONE_ERRORS:  # an exiting process has no cwd any more
                raise Gone from None
            yield _entry(what, target)
        try:
            fd_dir = os.open(base + "/fd", _DIR_FLAGS)
        except PermissionError:
            denied = True
        except _GONE_ERRORS:
            raise Gone from None
        else:
            try:
                try:
                    fds = os.listdir(fd_dir)
                except _GONE_ERRORS:
                    raise Gone from None
                for fd in fds:
                    try:
                        target = os.readlink(fd, dir_fd=fd_dir)
                    except _GONE_ERRORS:  # closed meanwhile (or the process exited)
                        continue
                    except PermissionError:
                        denied = True
                        continue
                    if target.startswith("/"):  # not socket:[…], pipe:[…], anon_inode:…
                        yield _entry("open file", target)
            finally:
                os.close(fd_dir)
        try:
            maps = read_all(base + "/maps")
        except PermissionError:
            denied = True
        except _GONE_ERRORS:
            raise Gone from None
        else:
            for path in _mapped_paths(maps):
                yield _entry("memory map", path)
        if denied:
            raise NotInspectable


def _entry(what: What, target: str) -> tuple[What, str, bool]:
    if target.endswith(_DELETED):
        return what, target[: -len(_DELETED)], True
    return what, target, False


def _mapped_paths(maps: bytes) -> set[str]:
    """The files named in a /proc/PID/maps text, each once.

    A line is "address perms offset dev inode [path]"; the path is the sixth field (it may
    hold spaces), and the kernel writes a newline in it as "\\012"."""
    paths = set()
    for line in maps.split(b"\n"):
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5][:1] == b"/":
            paths.add(fields[5])
    return {os.fsdecode(p.replace(b"\\012", b"\n") if b"\\" in p else p) for p in paths}


# --- elsewhere: psutil --------------------------------------------------------------------


def psutil_source(
    process_iter: Callable[..., Iterable[Any]] | None = None, *, username: str | None = None
) -> ProcessSource:
    """Processes through psutil (macOS, Windows; testable anywhere with a fake `process_iter`).

    As psutil documents it (https://psutil.readthedocs.io/en/latest/):

    - `process_iter(attrs)` yields `Process` objects with the `attrs` in a `.info` dict;
      an attribute that raises AccessDenied (or ZombieProcess) is set to `ad_value` (None);
      processes that vanish are skipped.
    - `Process.cwd()` is the absolute working directory, possibly "" when it cannot be
      determined; `Process.open_files()` lists regular files as named tuples with `path`
      ("on Windows this method is not reliable ... not guaranteed to enumerate all regular
      file handles"; on BSD a path may be ""); `Process.memory_maps()` lists named tuples
      with `path` (also "[heap]" and the like), available on Linux, Windows, FreeBSD and
      SunOS; macOS support was removed in 5.6.0 (issue #1291), so there the executable
      (`Process.exe()`) stands for the mapped files.
    - Exceptions: AccessDenied when permission is denied; NoSuchProcess when the process no
      longer exists; ZombieProcess, a NoSuchProcess, when a zombie is queried (macOS, BSD).
    - `Process.status()` is one of the STATUS_* constants ("zombie", "dead").

    `username` is this process's user (default: `psutil.Process().username()`), to tell other
    users' processes from this user's.
    """

    def scan() -> Iterator[ProcessView]:
        import psutil

        user = username
        if user is None:
            try:
                user = psutil.Process().username()
            except psutil.Error:  # pragma: no cover - one's own process is always readable
                user = ""
        iterate = process_iter or psutil.process_iter
        for proc in iterate(["pid", "ppid", "name", "status", "username"]):
            yield _PsutilView(proc, user)

    return scan


class _PsutilView(ProcessView):
    def __init__(self, proc: Any, user: str) -> None:
        info: dict[str, Any] = getattr(proc, "info", None) or {}
        self._proc = proc
        self._user = user
        self._owner: str | None = info.get("username")
        self._name: str = info.get("name") or ""
        self.pid = int(info.get("pid", proc.pid))
        self.ppid = int(info.get("ppid") or 0)
        self.zombie = info.get("status") in ("zombie", "dead")  # psutil.STATUS_ZOMBIE, _DEAD

    def name(self) -> str:
        return self._name

    def command(self) -> tuple[str, ...] | None:
        import psutil

        try:
            return tuple(self._proc.cmdline())
        except psutil.NoSuchProcess:
            raise Gone from None
        except (psutil.Error, OSError):
            return None

    def other_user(self) -> bool:
        return self._owner is None or self._owner != self._user

    def resources(self) -> Iterator[tuple[What, str, bool]]:
        import psutil

        proc = self._proc
        has_maps = hasattr(proc, "memory_maps")
        steps: list[tuple[What, Callable[[], list[str]]]] = [
            ("working directory", lambda: [proc.cwd()]),
            ("open file", lambda: [f.path for f in proc.open_files()]),
            (
                "memory map",
                (lambda: [m.path for m in proc.memory_maps()]) if has_maps else lambda: [proc.exe()],
            ),
        ]
        denied = False
        for what, fetch in steps:
            try:
                paths = fetch()
            except psutil.NoSuchProcess:  # also ZombieProcess
                raise Gone from None
            except (psutil.AccessDenied, psutil.Error, OSError):
                denied = True
                continue
            for path in paths:
                if path and os.path.isabs(path):
                    yield what, path, False
        if denied:
            raise NotInspectable
