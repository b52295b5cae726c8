"""The scheduled job's side of `clean`: its settings (written by `schedule install`) and its
rotated log, whose last line per run is a JSON summary."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachedoctor.errors import UserInputError

DEFAULT_SCHEDULE_KINDS = ("cache", "temp", "build", "logs", "downloads")


# ------------------------------------------------------------------------- scheduled settings


def schedule_config_path() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "schedule.json"


@dataclass(frozen=True)
class ScheduledPolicy:
    """What `clean --scheduled` does besides enforcing quotas (written by `schedule install`)."""

    older_than: float | None = None
    kinds: tuple[str, ...] = DEFAULT_SCHEDULE_KINDS
    tools: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "older_than_seconds": self.older_than,
            "kinds": list(self.kinds),
            "tools": list(self.tools),
        }


def load_scheduled_policy() -> ScheduledPolicy:
    path = schedule_config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ScheduledPolicy()
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path}: unreadable schedule settings: {exc}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: expected a JSON object")
    older = data.get("older_than_seconds")
    return ScheduledPolicy(
        older_than=float(older) if isinstance(older, (int, float)) and older > 0 else None,
        kinds=tuple(data.get("kinds") or DEFAULT_SCHEDULE_KINDS),
        tools=tuple(data.get("tools") or ()),
    )


def save_scheduled_policy(policy: ScheduledPolicy) -> None:
    from cachedoctor.fsutil import atomic_write_text

    atomic_write_text(schedule_config_path(), json.dumps(policy.to_json(), indent=2) + "\n")


# ------------------------------------------------------------------------------ scheduled log


def log_path() -> Path:
    from cachedoctor.state import ensure, log_dir

    return ensure(log_dir()) / "clean.log"


RESULT_MARK = "RESULT "


def log_scheduled_run(summary: dict[str, Any], lines: Iterable[str]) -> Path:
    """Append a run to the rotated log; the last line of each run is `RESULT {json}`."""
    import logging
    from logging.handlers import RotatingFileHandler

    path = log_path()
    handler = RotatingFileHandler(path, maxBytes=1_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("cachedoctor.scheduled")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        for line in lines:
            logger.info(line)
        logger.info(RESULT_MARK + json.dumps(summary, sort_keys=True))
    finally:
        logger.removeHandler(handler)
        handler.close()
    return path


def last_run() -> dict[str, Any] | None:
    """The summary of the last scheduled run, from the log (None when it never ran)."""
    path = log_path()
    candidates = [path] + [path.with_name(f"{path.name}.{i}") for i in range(1, 4)]
    for candidate in candidates:
        try:
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        for line in reversed(text.splitlines()):
            index = line.find(RESULT_MARK)
            if index >= 0:
                try:
                    data = json.loads(line[index + len(RESULT_MARK) :])
                except ValueError:
                    continue
                if isinstance(data, dict):
                    data.setdefault("logged_at", line[:23])
                    return data
    return None
