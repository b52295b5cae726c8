"""What a scheduler backend is: the strategy `cachedoctor.schedule` asks to install, remove and
inspect the job. Each backend module (systemd, cron, launchd, schtasks) builds its files or
commands as pure functions and ends with one `BACKEND` object; the registry in
`cachedoctor.schedule` lists the modules."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from cachedoctor.errors import OperationFailed

if TYPE_CHECKING:
    from cachedoctor.host import Host, OsName
    from cachedoctor.schedule.model import Job


class Installed(msgspec.Struct):
    """The outcome of an install or remove: what is on disk and what was run."""

    backend: str
    job: Job | None
    files: list[str] = msgspec.field(default_factory=list)
    cron_line: str | None = None
    crontab_user: str | None = None  # whose crontab was rewritten (cron only)
    commands: list[list[str]] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    history_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "job": self.job.to_json() if self.job else None,
            "files": self.files,
            "cron_line": self.cron_line,
            "crontab_user": self.crontab_user,
            "commands": self.commands,
            "notes": self.notes,
            "history_id": self.history_id,
        }


class Backend:
    """One scheduler. `preference` names the systems it runs on, lowest first in `auto`'s
    order and in `schedule status`."""

    name: ClassVar[str]
    preference: ClassVar[dict[OsName, int]]

    def usable(self, host: Host) -> bool:
        """Whether `auto` can pick it on this host now (its scheduler answers)."""
        raise NotImplementedError

    def state(self, host: Host) -> dict[str, Any]:
        """What it has installed now (`installed` plus files, cron_line, ...), as JSON data."""
        raise NotImplementedError

    def preview(self, job: Job, host: Host) -> dict[str, Any]:
        """What an install would write or run, for the plan (`--dry-run`)."""
        raise NotImplementedError

    def install(self, job: Job, host: Host, result: Installed, *, enable: bool) -> None:
        """Install (or replace) the job; `enable` also starts it where that is a separate step."""
        raise NotImplementedError

    def remove(self, host: Host, result: Installed, *, enable: bool) -> None:
        """Remove the job (a no-op when it is not installed)."""
        raise NotImplementedError

    def status(self, state: dict[str, Any], host: Host) -> dict[str, Any]:
        """What `schedule status` shows beyond `installed`, from `state`."""
        return {}


def run(argv: Sequence[str], result: Installed, *, check: bool) -> None:
    """Run a scheduler command, noting it in `result`; `check`: a failure is an error."""
    result.commands.append(list(argv))
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        if check:
            raise OperationFailed(f"`{argv[0]}` could not run: {exc}") from None
        return
    if check and proc.returncode != 0:
        raise OperationFailed(f"`{' '.join(argv)}` failed: {(proc.stdout + proc.stderr).strip()}")
