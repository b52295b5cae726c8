"""`schedule-jobs.json`: the job cachedoctor installed on each scheduler backend, as it was
installed (what `schedule status` and the history compare the scheduler's state with)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cachedoctor import statefile as sf
from cachedoctor.errors import UserInputError
from cachedoctor.schedule.model import Job, parse_schedule


def jobs_file() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "schedule-jobs.json"


def _job(value: Any, where: str) -> Job:
    doc = sf.obj(value, where)
    argv = sf.field(doc, "argv", sf.list_of(sf.text), where)
    try:
        schedule = parse_schedule(sf.field(doc, "every", sf.text, where),
                                  sf.field(doc, "at", sf.text, where))
    except UserInputError as exc:
        raise sf.Invalid(f"{where}: {exc.message.replace('--', '')}") from None
    return Job(tuple(argv), schedule)


JOBS = sf.JsonKind[dict[str, Job]](
    "schedule-jobs.json", "record of the installed scheduled jobs", 1,
    parse=lambda doc: sf.field(doc, "jobs", sf.map_of(_job)),
    dump=lambda jobs: {"jobs": {backend: job.to_json() for backend, job in sorted(jobs.items())}},
    migrations=(lambda jobs: {"jobs": jobs},),  # 0: the bare {backend: {argv, every, at}}
)


def installed_jobs() -> dict[str, Job]:
    return JOBS.read(jobs_file()) or {}


def record_job(backend: str, job: Job | None) -> None:
    """Remember (or with None forget) the job installed on `backend`."""
    jobs = installed_jobs()
    if job is None:
        jobs.pop(backend, None)
    else:
        jobs[backend] = job
    JOBS.write(jobs_file(), jobs)
