"""Windows Task Scheduler through `schtasks.exe` (pure command construction; run on Windows)."""

from __future__ import annotations

import subprocess

from cachedoctor.schedule.model import JOB_NAME, WEEKDAY, Job

TASK = JOB_NAME


def task_command_line(job: Job) -> str:
    """The /TR value: the command line, with the executable quoted when it has spaces."""
    return subprocess.list2cmdline(list(job.argv))


def create_command(job: Job) -> list[str]:
    s = job.schedule
    argv = ["schtasks", "/Create"]
    if s.every == "hourly":
        argv += ["/SC", "HOURLY", "/MO", "1"]
        start = f"00:{s.minute:02d}"
    elif s.every == "weekly":
        argv += ["/SC", "WEEKLY", "/D", WEEKDAY.upper()]
        start = s.at
    else:
        argv += ["/SC", "DAILY"]
        start = s.at
    return [*argv, "/TN", TASK, "/TR", task_command_line(job), "/ST", start, "/F"]


def delete_command() -> list[str]:
    return ["schtasks", "/Delete", "/TN", TASK, "/F"]


def query_command() -> list[str]:
    return ["schtasks", "/Query", "/TN", TASK, "/FO", "LIST", "/V"]
