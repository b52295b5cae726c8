"""What a scheduled job is, as plain data shared by every backend (pure; no I/O)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from typing import Any, Literal

import msgspec

from cachedoctor.errors import UserInputError

Every = Literal["hourly", "daily", "weekly"]
EVERY: tuple[Every, ...] = ("hourly", "daily", "weekly")
JOB_NAME = "cachedoctor-clean"
JOB_ARGS = ("clean", "--scheduled")
WEEKDAY = "Mon"  # weekly runs happen on Mondays on every backend
_AT = re.compile(r"^(\d{1,2}):(\d{2})$")


class Schedule(msgspec.Struct, frozen=True):
    every: Every = "daily"
    hour: int = 3
    minute: int = 30

    @property
    def at(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"

    def describe(self) -> str:
        if self.every == "hourly":
            return f"hourly at minute {self.minute:02d}"
        if self.every == "weekly":
            return f"weekly on {WEEKDAY} at {self.at}"
        return f"daily at {self.at}"

    def to_json(self) -> dict[str, Any]:
        return {"every": self.every, "at": self.at}


def parse_schedule(every: str, at: str) -> Schedule:
    """Validate `--every` and `--at HH:MM` (UserInputError, exit 2, on anything else)."""
    if every not in EVERY:
        raise UserInputError(f"invalid --every {every!r}: use hourly, daily or weekly")
    match = _AT.match(at.strip())
    if not match:
        raise UserInputError(f"invalid --at {at!r}: expected HH:MM, e.g. 03:30")
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        raise UserInputError(f"invalid --at {at!r}: hours 00-23, minutes 00-59")
    return Schedule(every, hour, minute)  # type: ignore[arg-type]


class Job(msgspec.Struct, frozen=True):
    """The command the scheduler runs: the absolute cachedoctor executable + `clean --scheduled`."""

    argv: tuple[str, ...]
    schedule: Schedule = msgspec.field(default_factory=Schedule)

    def to_json(self) -> dict[str, Any]:
        return {"argv": list(self.argv), **self.schedule.to_json()}


def cachedoctor_command() -> list[str]:
    """The absolute command that runs this installation of cachedoctor.

    The `cachedoctor` script on PATH when it exists, else the script this process was started
    as, else `python -m cachedoctor` with this interpreter.
    """
    found = shutil.which("cachedoctor")
    if found:
        return [os.path.abspath(found)]
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and os.path.basename(argv0).startswith("cachedoctor") and os.path.isfile(argv0):
        return [os.path.abspath(argv0)]
    return [os.path.abspath(sys.executable), "-m", "cachedoctor"]


def make_job(schedule: Schedule, command: list[str] | None = None) -> Job:
    return Job(tuple([*(command or cachedoctor_command()), *JOB_ARGS]), schedule)
