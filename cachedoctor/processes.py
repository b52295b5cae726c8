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


def forget_snapshot() -> None:
    """Make the next question list processes afresh (a last check just before a change)."""
    global _snapshot
    _snapshot = None
