"""Is a tool running? Matched by the process names its profile declares for this OS."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cachedoctor.host import Host
from cachedoctor.profiles.model import Profile


@dataclass(frozen=True)
class RunningProcess:
    pid: int
    name: str


def running_processes(profile: Profile, host: Host) -> list[RunningProcess]:
    names = {n.lower() for n in profile.processes.for_host(host)}
    if not names:
        return []
    return [p for p in _process_table() if p.name.lower() in names]


_SNAPSHOT_TTL = 1.0  # seconds: one listing serves a loop over every profile, not a later check
_snapshot: tuple[float, tuple[RunningProcess, ...]] | None = None


def _process_table() -> tuple[RunningProcess, ...]:
    """A snapshot of the process list, shared by the profiles asked about within a second."""
    global _snapshot
    now = time.monotonic()
    if _snapshot is None or now - _snapshot[0] > _SNAPSHOT_TTL:
        import psutil

        table = tuple(
            RunningProcess(proc.info["pid"], proc.info["name"] or "")
            for proc in psutil.process_iter(["pid", "name"])
        )
        _snapshot = (now, table)
    return _snapshot[1]


def check_not_running(profile: Profile, host: Host, *, force: bool) -> str | None:
    """Refuse to change a cache while its tool runs; with `force`, return the warning instead."""
    from cachedoctor.errors import RefusedError

    running = running_processes(profile, host)
    if not running:
        return None
    names = ", ".join(f"{p.name} (pid {p.pid})" for p in running)
    if not force:
        raise RefusedError(f"{profile.name} is running: {names}",
                           hint="close it first, or pass --force if you are sure it is idle")
    return f"{profile.name} is running ({names}); going ahead because of --force"


def forget_snapshot() -> None:
    """Make the next question list processes afresh (a last check just before a change)."""
    global _snapshot
    _snapshot = None
