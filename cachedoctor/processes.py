"""Is a tool running? Matched by the process names its profile declares for this OS."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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


@lru_cache(maxsize=1)
def _process_table() -> tuple[RunningProcess, ...]:
    """One snapshot of the process list per command, shared by every profile asked about."""
    import psutil

    return tuple(
        RunningProcess(proc.info["pid"], proc.info["name"] or "")
        for proc in psutil.process_iter(["pid", "name"])
    )
