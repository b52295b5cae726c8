"""launchd: a LaunchAgent plist in ~/Library/LaunchAgents, built with plistlib."""

from __future__ import annotations

import plistlib
from pathlib import Path
from typing import Any

from cachedoctor.host import Host
from cachedoctor.schedule.model import Job

LABEL = "org.cachedoctor.clean"


def plist_path(host: Host) -> Path:
    return Path(host.home) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def calendar(job: Job) -> dict[str, int]:
    s = job.schedule
    if s.every == "hourly":
        return {"Minute": s.minute}
    interval = {"Hour": s.hour, "Minute": s.minute}
    if s.every == "weekly":
        interval["Weekday"] = 1  # Monday
    return interval


def plist_data(job: Job, log_file: str) -> dict[str, Any]:
    return {
        "Label": LABEL,
        "ProgramArguments": list(job.argv),
        "StartCalendarInterval": calendar(job),
        "RunAtLoad": False,
        "ProcessType": "Background",
        "LowPriorityIO": True,
        "Nice": 10,
        "StandardOutPath": log_file,
        "StandardErrorPath": log_file,
    }


def plist_bytes(job: Job, log_file: str) -> bytes:
    data = plistlib.dumps(plist_data(job, log_file), fmt=plistlib.FMT_XML, sort_keys=True)
    parsed = plistlib.loads(data)  # validate: what we write must parse back to the same data
    if parsed != plist_data(job, log_file):
        raise AssertionError("plist round trip changed the job")
    return data


def launchctl_load(path: Path, uid: int) -> list[list[str]]:
    """launchctl commands that (re)load the agent for the logged-in user."""
    return [
        ["launchctl", "bootout", f"gui/{uid}", str(path)],
        ["launchctl", "bootstrap", f"gui/{uid}", str(path)],
    ]


def launchctl_unload(path: Path, uid: int) -> list[str]:
    return ["launchctl", "bootout", f"gui/{uid}", str(path)]
