"""launchd: a LaunchAgent plist in ~/Library/LaunchAgents, built with plistlib."""

from __future__ import annotations

import os
import plistlib
import shutil
import sys
from pathlib import Path
from typing import Any, ClassVar

from cachedoctor.host import Host, OsName
from cachedoctor.schedule.backend import Backend, Installed, run
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


class LaunchdBackend(Backend):
    """A LaunchAgent plist, loaded with `launchctl` on macOS."""

    name = "launchd"
    preference: ClassVar[dict[OsName, int]] = {"macos": 0}

    def usable(self, host: Host) -> bool:
        return True  # every macOS user has a launchd agent domain

    def state(self, host: Host) -> dict[str, Any]:
        path = plist_path(host)
        try:
            return {"installed": True, "files": {str(path): path.read_text(encoding="utf-8")}}
        except FileNotFoundError:
            return {"installed": False, "files": {}}

    def preview(self, job: Job, host: Host) -> dict[str, Any]:
        return {"files": {str(plist_path(host)): "(plist)"}}

    def install(self, job: Job, host: Host, result: Installed, *, enable: bool) -> None:
        from cachedoctor.clean import log_path
        from cachedoctor.fsutil import atomic_write_bytes

        path = plist_path(host)
        data = plist_bytes(job, str(log_path().with_name("launchd.log")))
        atomic_write_bytes(path, data, mode=0o644)
        result.files.append(str(path))
        if shutil.which("plutil"):
            run(["plutil", "-lint", str(path)], result, check=True)
        if enable and sys.platform == "darwin":  # pragma: no cover - macOS only
            load, bootstrap = launchctl_load(path, os.getuid())
            run(load, result, check=False)
            run(bootstrap, result, check=True)

    def remove(self, host: Host, result: Installed, *, enable: bool) -> None:
        plist = plist_path(host)
        if plist.exists():
            if enable and sys.platform == "darwin":  # pragma: no cover - macOS only
                run(launchctl_unload(plist, os.getuid()), result, check=False)
            plist.unlink()
            result.files.append(str(plist))

    def status(self, state: dict[str, Any], host: Host) -> dict[str, Any]:
        return {"files": sorted(state.get("files") or {})}


BACKEND = LaunchdBackend()
