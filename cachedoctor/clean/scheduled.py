"""The scheduled job's side of `clean`: its settings (written by `schedule install`) and its
rotated log, whose last line per run is a JSON summary."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from cachedoctor import statefile as sf

DEFAULT_SCHEDULE_KINDS = ("cache", "temp", "build", "logs", "downloads")


# ------------------------------------------------------------------------- scheduled settings


def schedule_config_path() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "schedule.json"


class ScheduledPolicy(msgspec.Struct, frozen=True):
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


texts = sf.optional(sf.list_of(sf.text))


def _parse_policy(doc: dict[str, Any]) -> ScheduledPolicy:
    older = sf.field_or(doc, "older_than_seconds", sf.optional(sf.number), None)
    kinds: list[str] | None = sf.field_or(doc, "kinds", texts, None)
    tools: list[str] | None = sf.field_or(doc, "tools", texts, None)
    return ScheduledPolicy(
        older_than=older if older is not None and older > 0 else None,
        kinds=tuple(kinds or DEFAULT_SCHEDULE_KINDS), tools=tuple(tools or ()),
    )


POLICY = sf.JsonKind[ScheduledPolicy](
    "schedule.json", "scheduled clean settings", 1, parse=_parse_policy,
    dump=ScheduledPolicy.to_json,
    migrations=(lambda doc: doc,),  # 0: the same object without "format"
)


def load_scheduled_policy() -> ScheduledPolicy:
    return POLICY.read(schedule_config_path()) or ScheduledPolicy()


def save_scheduled_policy(policy: ScheduledPolicy) -> None:
    POLICY.write(schedule_config_path(), policy)


# ------------------------------------------------------------------------------ scheduled log


def log_path() -> Path:
    from cachedoctor.state import ensure, log_dir

    return ensure(log_dir()) / "clean.log"


RESULT_MARK = "RESULT "


def _parse_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """A run's summary: known fields are checked, the rest (counts by kind) passed on."""
    for key, check in (("status", sf.text), ("exit_code", sf.integer), ("seconds", sf.number),
                       ("files", sf.integer), ("bytes", sf.integer)):
        sf.field_or(doc, key, check, None)
    return doc


RUN_SUMMARY = sf.JsonKind[dict[str, Any]](
    "clean.log", "summary of a scheduled run", 1, parse=_parse_summary, dump=dict,
    migrations=(lambda doc: doc,),  # 0: the same object without "format"
    indent=None,
)


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
        logger.info(RESULT_MARK + json.dumps(RUN_SUMMARY.encode(summary), sort_keys=True))
    finally:
        logger.removeHandler(handler)
        handler.close()
    return path


def last_run() -> dict[str, Any] | None:
    """The summary of the last scheduled run, from the log (None when it never ran). A line
    that cannot be read (cut by a full disk, or from a newer cachedoctor) is passed over: the
    log only informs, the run before it is shown instead."""
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
                    data = RUN_SUMMARY.decode(json.loads(line[index + len(RESULT_MARK) :]),
                                              candidate)
                except (ValueError, sf.StateFileDamaged):
                    continue
                data.setdefault("logged_at", line[:23])
                return data
    return None
