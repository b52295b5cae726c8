"""cron: one line with a marker comment in the user's crontab, through the real `crontab`."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any, ClassVar

from cachedoctor.errors import OperationFailed
from cachedoctor.host import Host, OsName
from cachedoctor.schedule.backend import Backend, Installed
from cachedoctor.schedule.model import JOB_NAME, Job, Schedule

MARKER = f"# {JOB_NAME} (managed by cachedoctor)"


def cron_fields(schedule: Schedule) -> str:
    if schedule.every == "hourly":
        return f"{schedule.minute} * * * *"
    weekday = "1" if schedule.every == "weekly" else "*"
    return f"{schedule.minute} {schedule.hour} * * {weekday}"


def cron_line(job: Job) -> str:
    """`MM HH * * D command # marker`; `%` is escaped because cron turns it into a newline."""
    command = " ".join(shlex.quote(a) for a in job.argv).replace("%", "\\%")
    return f"{cron_fields(job.schedule)} {command} {MARKER}"


def is_ours(line: str) -> bool:
    return line.rstrip().endswith(MARKER)


def merge(crontab: str, line: str | None) -> str:
    """The crontab with our line replaced (or removed when `line` is None); others untouched."""
    lines = [x for x in crontab.splitlines() if not is_ours(x)]
    if line is not None:
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


def available(crontab: Sequence[str] = ("crontab",)) -> bool:
    return shutil.which(crontab[0]) is not None


def read(crontab: Sequence[str] = ("crontab",)) -> str:
    try:
        proc = subprocess.run(
            [*crontab, "-l"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise OperationFailed(f"cannot run {crontab[0]}: {exc.strerror}") from None
    if proc.returncode != 0:
        if "no crontab" in proc.stderr.lower():
            return ""
        raise OperationFailed(f"`crontab -l` failed: {proc.stderr.strip()}")
    return proc.stdout


def write(text: str, crontab: Sequence[str] = ("crontab",)) -> None:
    proc = subprocess.run(
        [*crontab, "-"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    if proc.returncode != 0:
        raise OperationFailed(f"`crontab -` failed: {proc.stderr.strip()}")


def installed_line(crontab: Sequence[str] = ("crontab",)) -> str | None:
    for line in read(crontab).splitlines():
        if is_ours(line):
            return line
    return None


def crontab_user() -> str:
    """Whose crontab `crontab` reads and rewrites: without `-u` it is the one of the user the
    process runs as (crontab(1)), named as the password database names that user."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid with no entry (a container): crontab itself names it by number
        return str(os.getuid())


class CronBackend(Backend):
    """One marked line in the user's crontab; every other line stays as it is."""

    name = "cron"
    preference: ClassVar[dict[OsName, int]] = {"linux": 1, "wsl": 2, "macos": 1}

    def usable(self, host: Host) -> bool:
        return available()

    def state(self, host: Host) -> dict[str, Any]:
        line = installed_line() if available() else None
        return {"installed": line is not None, "cron_line": line}

    def preview(self, job: Job, host: Host) -> dict[str, Any]:
        return {"cron_line": cron_line(job), "crontab_user": crontab_user()}

    def install(self, job: Job, host: Host, result: Installed, *, enable: bool) -> None:
        current = read()
        line = cron_line(job)
        write(merge(current, line))
        result.cron_line = line
        result.crontab_user = crontab_user()
        result.commands.append(["crontab", "-"])

    def remove(self, host: Host, result: Installed, *, enable: bool) -> None:
        if not available():
            return
        current = read()
        if any(is_ours(x) for x in current.splitlines()):
            write(merge(current, None))
            result.crontab_user = crontab_user()
            result.commands.append(["crontab", "-"])

    def status(self, state: dict[str, Any], host: Host) -> dict[str, Any]:
        line = state.get("cron_line")
        return {"available": available(), "cron_line": line,
                "schedule": " ".join(line.split()[:5]) if line else None}


BACKEND = CronBackend()
