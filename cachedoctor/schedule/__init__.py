"""The scheduled cleanup job: one seam over systemd user timers, cron, launchd and schtasks.

`install_schedule`, `remove_schedule` and `schedule_status` are the whole interface. Each
backend is a `backend.Backend` registered in `REGISTRY` (its module builds its files or
commands as pure functions; only its Backend methods touch the system). Every install and remove is recorded in the history (kind "schedule") with
`before`/`after` states that `restore_state` can put back.
"""

from __future__ import annotations

from typing import Any

from cachedoctor.clean import ScheduledPolicy
from cachedoctor.errors import OperationFailed, UserInputError
from cachedoctor.host import Host
from cachedoctor.schedule import cron, launchd, schtasks, systemd
from cachedoctor.schedule.backend import Backend, Installed
from cachedoctor.schedule.model import (
    EVERY,
    Job,
    Schedule,
    cachedoctor_command,
    make_job,
    parse_schedule,
)

__all__ = [
    "BACKENDS",
    "EVERY",
    "REGISTRY",
    "Backend",
    "Installed",
    "Job",
    "Schedule",
    "cachedoctor_command",
    "install_schedule",
    "make_job",
    "parse_schedule",
    "pick_backend",
    "preview_install",
    "remove_schedule",
    "restore_state",
    "schedule_status",
    "state_of",
]


# the one list of scheduler backends: a new backend is one module ending in `BACKEND = ...`
# (a `backend.Backend`) plus its entry here
_MODULES = (systemd, cron, launchd, schtasks)
REGISTRY: dict[str, Backend] = {m.BACKEND.name: m.BACKEND for m in _MODULES}
BACKENDS: tuple[str, ...] = tuple(REGISTRY)


def backend_of(name: str) -> Backend:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserInputError(f"unknown backend {name!r}: use auto, {', '.join(BACKENDS)}") from None


def backends_for(host: Host) -> tuple[str, ...]:
    """The backends of this system, the preferred first (`auto` tries them in this order)."""
    offered = [b for b in REGISTRY.values() if host.os in b.preference]
    return tuple(b.name for b in sorted(offered, key=lambda b: b.preference[host.os]))


def pick_backend(requested: str, host: Host) -> str:
    """`auto`: the first backend of this system whose scheduler answers (Task Scheduler where
    it can be reached, launchd on macOS, a running systemd user instance, else cron)."""
    if requested != "auto":
        backend_of(requested)
        if requested not in backends_for(host):
            raise UserInputError(f"the {requested} backend is not available on {host.os}")
        return requested
    for name in backends_for(host):
        if REGISTRY[name].usable(host):
            return name
    raise OperationFailed(
        "no scheduler found: no systemd user instance is running and `crontab` is not installed",
        hint="install cron (e.g. `apt-get install cron`) or use --backend systemd in a systemd session",
    )


def preview_install(job: Job, host: Host, backend: str) -> dict[str, Any]:
    """What installing `job` with `backend` would write or run (the plan of `--dry-run`)."""
    return backend_of(backend).preview(job, host)


def _jobs() -> dict[str, Any]:
    from cachedoctor.schedule.jobfile import installed_jobs

    return {backend: job.to_json() for backend, job in installed_jobs().items()}


def _save_job(backend: str, job: Job | None) -> None:
    from cachedoctor.schedule.jobfile import record_job

    record_job(backend, job)


def state_of(backend: str, host: Host) -> dict[str, Any]:
    """What the backend has installed now, as JSON data (the history's before/after).

    Keys: backend, installed, job ({argv, every, at} when cachedoctor installed it), policy (the
    scheduled-clean settings), and per backend files ({path: text}) or cron_line.
    """
    from cachedoctor.clean import load_scheduled_policy

    state: dict[str, Any] = {
        "backend": backend,
        "installed": False,
        "policy": load_scheduled_policy().to_json(),
    }
    state.update(backend_of(backend).state(host))
    if state["installed"]:
        state["job"] = _jobs().get(backend)
    return state


def install_schedule(
    backend: str,
    job: Job,
    host: Host,
    *,
    policy: ScheduledPolicy | None = None,
    record: bool = True,
    enable: bool = True,
) -> Installed:
    """Install (or replace) the job, and save `policy` (what the scheduled clean does).

    Re-installing never duplicates the job.
    """
    from cachedoctor.clean import save_scheduled_policy

    before = state_of(backend, host)
    result = Installed(backend, job)
    if policy is not None:
        save_scheduled_policy(policy)
    backend_of(backend).install(job, host, result, enable=enable)
    _save_job(backend, job)
    if record:
        from cachedoctor import history

        after = state_of(backend, host)
        result.history_id = history.record(
            "schedule",
            f"scheduled cleanup installed ({backend}, {job.schedule.describe()})",
            before=before,
            after=after,
        )
    return result


def remove_schedule(
    backend: str, host: Host, *, record: bool = True, enable: bool = True
) -> Installed:
    """Remove the job from `backend` (a no-op when it is not installed)."""
    before = state_of(backend, host)
    result = Installed(backend, None)
    backend_of(backend).remove(host, result, enable=enable)
    _save_job(backend, None)
    if record and before.get("installed"):
        from cachedoctor import history

        result.history_id = history.record(
            "schedule",
            f"scheduled cleanup removed ({backend})",
            before=before,
            after=state_of(backend, host),
        )
    return result


def restore_state(state: dict[str, Any], host: Host) -> Installed:
    """Put a recorded before/after state back (for `undo`): reinstall its job or remove it."""
    backend = state.get("backend")
    if not isinstance(backend, str) or backend not in REGISTRY:
        raise UserInputError(f"not a schedule state: backend {backend!r}")
    name = backend
    policy_data = state.get("policy")
    if isinstance(policy_data, dict):
        from cachedoctor.clean import ScheduledPolicy, save_scheduled_policy

        older = policy_data.get("older_than_seconds")
        save_scheduled_policy(
            ScheduledPolicy(
                older_than=float(older) if isinstance(older, (int, float)) else None,
                kinds=tuple(policy_data.get("kinds") or ()),
                tools=tuple(policy_data.get("tools") or ()),
            )
        )
    if not state.get("installed"):
        return remove_schedule(name, host, record=False)
    job_data = state.get("job")
    if not isinstance(job_data, dict):
        raise OperationFailed("the recorded schedule has no job to reinstall")
    schedule = parse_schedule(str(job_data["every"]), str(job_data["at"]))
    job = Job(tuple(str(a) for a in job_data["argv"]), schedule)
    return install_schedule(name, job, host, record=False)


def schedule_status(host: Host) -> dict[str, Any]:
    """Backends of this OS with what each has installed, the job settings and the last run."""
    from cachedoctor.clean import last_run, load_scheduled_policy, log_path

    backends = []
    for backend in backends_for(host):
        entry: dict[str, Any] = {"backend": backend}
        try:
            state = state_of(backend, host)
        except OperationFailed as exc:
            state = {"installed": False, "error": exc.message}
        entry["installed"] = bool(state.get("installed"))
        entry.update(REGISTRY[backend].status(state, host))
        if "error" in state:
            entry["error"] = state["error"]
        backends.append(entry)
    return {
        "backends": backends,
        "policy": load_scheduled_policy().to_json(),
        "log": str(log_path()),
        "last_run": last_run(),
    }
