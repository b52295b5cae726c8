"""cron: one line with a marker comment in the user's crontab, through the real `crontab`."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence

from cachedoctor.errors import OperationFailed
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
