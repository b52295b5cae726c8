"""Is a tool running? Matched by the process names its profile declares for this OS."""

from __future__ import annotations

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
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        name = (proc.info.get("name") or "").lower()
        if name in names:
            found.append(RunningProcess(proc.info["pid"], proc.info["name"]))
    return found
