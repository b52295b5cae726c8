"""Is a tool running? Matched by the process names its profile declares for this OS.

Only a hint (whether a cache is in use is observed by `cachedoctor.inuse`). Never counted:
zombie (defunct) processes, this process, and its forked workers (descendants that are forks
of it: same command line). A child that ran another program counts like any process.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import msgspec

from cachedoctor.fsutil import read_all
from cachedoctor.host import Host

if TYPE_CHECKING:
    from cachedoctor.profiles.model import Profile


class RunningProcess(msgspec.Struct, frozen=True):
    pid: int
    name: str


class _Row(msgspec.Struct, frozen=True):
    pid: int
    ppid: int
    name: str
    zombie: bool


def running_processes(profile: Profile, host: Host) -> list[RunningProcess]:
    names = {n.lower() for n in profile.processes.for_host(host)}
    if not names:
        return []
    table = _process_table()
    candidates = [r for r in table if r.name.lower() in names and not r.zombie]
    if not candidates:
        return []
    own = _own_pids(table, candidates)
    return [RunningProcess(r.pid, r.name) for r in candidates if r.pid not in own]


_SNAPSHOT_TTL = 1.0  # seconds: one listing serves a loop over every profile, not a later check
_snapshot: tuple[float, tuple[_Row, ...]] | None = None


def _process_table() -> tuple[_Row, ...]:
    """A snapshot of the process list, shared by the profiles asked about within a second."""
    global _snapshot
    now = time.monotonic()
    if _snapshot is None or now - _snapshot[0] > _SNAPSHOT_TTL:
        table = _proc_table() if sys.platform.startswith("linux") else None
        _snapshot = (now, table if table is not None else _psutil_table())
    return _snapshot[1]


def _psutil_table() -> tuple[_Row, ...]:
    import psutil

    return tuple(
        _Row(
            proc.info["pid"],
            proc.info["ppid"] or 0,
            proc.info["name"] or "",
            proc.info["status"] in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD),
        )
        for proc in psutil.process_iter(["pid", "ppid", "name", "status"])
    )


def _proc_table(proc: str = "/proc") -> tuple[_Row, ...] | None:
    """Linux: the process list read from `/proc/<pid>/stat` as psutil reads it (importing psutil
    was most of the cost of the hint): the name is the `comm` field, or the executable's name
    from the command line when `comm` is cut at 15 characters and it begins so; Z and X are
    zombie and dead. None without /proc (psutil answers then)."""
    try:
        pids = [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return None
    rows: list[_Row] = []
    for pid in pids:
        stat = _read_all(f"{proc}/{pid}/stat")
        if stat is None:  # gone since the listing
            continue
        start, end = stat.find(b"("), stat.rfind(b")")
        fields = stat[end + 2:].split()
        if start < 0 or end < start or len(fields) < 2:
            continue
        name = os.fsdecode(stat[start + 1:end])
        if len(name) >= 15:
            name = _untruncated(f"{proc}/{pid}/cmdline", name)
        rows.append(_Row(pid, int(fields[1]), name, fields[0] in (b"Z", b"X", b"x")))
    return tuple(rows)


def _untruncated(cmdline: str, comm: str) -> str:
    """psutil's rule: a program that rewrote its command line may separate it by spaces."""
    data = _read_all(cmdline)
    if not data:
        return comm
    sep = b"\0" if data.endswith(b"\0") else b" "
    args = data.removesuffix(sep).split(sep)
    if sep == b"\0" and len(args) == 1 and b" " in args[0]:
        args = args[0].split(b" ")
    full = os.path.basename(os.fsdecode(args[0]))
    return full if full.startswith(comm) else comm


def _read_all(path: str) -> bytes | None:
    try:
        return read_all(path)
    except OSError:  # gone since the listing, or not ours to read
        return None


def _own_pids(table: tuple[_Row, ...], candidates: list[_Row]) -> set[int]:
    """Which `candidates` are this process or its forked workers (checked at question time,
    so a forked child asking sees itself as "this process")."""
    me = os.getpid()
    parents = {r.pid: r.ppid for r in table}
    own = {me}
    for row in candidates:
        # Walk up to this process; every step on the way must be a fork of it.
        chain: list[int] = []
        pid = row.pid
        while pid in parents and pid != me and len(chain) < 64:
            chain.append(pid)
            pid = parents[pid]
        if pid == me and (not chain or all(_is_fork_of_me(p) for p in chain)):
            own.add(row.pid)
    return own


def _is_fork_of_me(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).cmdline() == psutil.Process().cmdline()
    except psutil.Error:
        return False


def forget_snapshot() -> None:
    """Make the next question list processes afresh (a last check just before a change)."""
    global _snapshot
    _snapshot = None
