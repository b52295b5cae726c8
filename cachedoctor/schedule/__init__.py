"""The scheduled cleanup job: one seam over systemd user timers, cron, launchd and schtasks.

`install_schedule`, `remove_schedule` and `schedule_status` are the whole interface; each
backend module builds its files or commands as pure functions, and only the functions below
touch the system. Every install and remove is recorded in the history (kind "schedule") with
`before`/`after` states that `restore_state` can put back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachedoctor.clean import ScheduledPolicy
from cachedoctor.errors import OperationFailed, UserInputError
from cachedoctor.host import Host
from cachedoctor.schedule import cron, launchd, schtasks, systemd
from cachedoctor.schedule.model import (
    BACKENDS,
    EVERY,
    BackendName,
    Job,
    Schedule,
    cachedoctor_command,
    make_job,
    parse_schedule,
)

__all__ = [
    "BACKENDS",
    "EVERY",
    "BackendName",
    "Installed",
    "Job",
    "Schedule",
    "cachedoctor_command",
    "install_schedule",
    "make_job",
    "parse_schedule",
    "pick_backend",
    "remove_schedule",
    "restore_state",
    "schedule_status",
    "state_of",
]


@dataclass
class Installed:
    """The outcome of an install or remove: what is on disk and what was run."""

    backend: BackendName
    job: Job | None
    files: list[str] = field(default_factory=list)
    cron_line: str | None = None
    commands: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    history_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "job": self.job.to_json() if self.job else None,
            "files": self.files,
            "cron_line": self.cron_line,
            "commands": self.commands,
            "notes": self.notes,
            "history_id": self.history_id,
        }


def backends_for(host: Host) -> tuple[BackendName, ...]:
    if host.os == "windows":
        return ("schtasks",)
    if host.os == "macos":
        return ("launchd", "cron")
    if host.os == "wsl":  # Windows' own scheduler first: WSL stops an idle VM at night
        return ("schtasks", "systemd", "cron")
    return ("systemd", "cron")


def _schtasks_exe(host: Host) -> str | None:
    """How to reach Task Scheduler: `schtasks` on Windows, `schtasks.exe` through WSL's interop;
    None where there is neither."""
    if host.os == "windows":
        return "schtasks"
    if host.os == "wsl":
        return shutil.which("schtasks.exe") and "schtasks.exe"
    return None


def schtasks_plan(job: Job, host: Host) -> tuple[Path, str, list[str]]:
    """(where the task XML is written, the XML, the command that registers it)."""
    from cachedoctor.state import config_dir

    path = config_dir() / "schedule-task.xml"
    if host.os == "wsl":
        distro = host.wsl_distro
        if not distro:
            raise OperationFailed("WSL_DISTRO_NAME is not set: cannot name this distribution "
                                  "for wsl.exe -d", hint="run it from a WSL shell")
        xml = schtasks.task_xml(job, schtasks.wsl_action(job, distro), logon="InteractiveToken")
        windows = _windows_path_of(str(path))
        return path, xml, schtasks.create_command(windows, "schtasks.exe")
    user = host.getenv("USERNAME")
    domain = host.getenv("USERDOMAIN")
    xml = schtasks.task_xml(job, schtasks.native_action(job), logon="S4U",
                            user=f"{domain}\\{user}" if user and domain else user)
    return path, xml, schtasks.create_command(str(path))


def _windows_path_of(path: str) -> str:
    """`wslpath -w`: a WSL path as Windows programs reach it (\\\\wsl.localhost\\<distro>\\...)."""
    tool = shutil.which("wslpath")
    if tool is not None:
        done = subprocess.run([tool, "-w", path], capture_output=True, text=True, timeout=10,
                              check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    raise OperationFailed(f"cannot name {path} for Windows: wslpath -w failed")


def pick_backend(requested: str, host: Host) -> BackendName:
    """`auto`: a running systemd user instance, else cron (Linux); launchd (macOS); schtasks."""
    if requested != "auto":
        if requested not in BACKENDS:
            raise UserInputError(f"unknown backend {requested!r}: use auto, {', '.join(BACKENDS)}")
        if requested not in backends_for(host):
            raise UserInputError(f"the {requested} backend is not available on {host.os}")
        return requested  # type: ignore[return-value]
    if _schtasks_exe(host):
        return "schtasks"
    if host.os == "macos":
        return "launchd"
    if shutil.which("systemctl") and systemd.user_instance_running(host):
        return "systemd"
    if cron.available():
        return "cron"
    raise OperationFailed(
        "no scheduler found: no systemd user instance is running and `crontab` is not installed",
        hint="install cron (e.g. `apt-get install cron`) or use --backend systemd in a systemd session",
    )


def _jobs() -> dict[str, Any]:
    from cachedoctor.schedule.jobfile import installed_jobs

    return {backend: job.to_json() for backend, job in installed_jobs().items()}


def _save_job(backend: BackendName, job: Job | None) -> None:
    from cachedoctor.schedule.jobfile import record_job

    record_job(backend, job)


def state_of(backend: BackendName, host: Host) -> dict[str, Any]:
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
    if backend == "systemd":
        files = systemd.read_installed(host)
        state.update(
            installed=bool(files), files=files, on_calendar=systemd.installed_calendar(host)
        )
    elif backend == "cron":
        line = cron.installed_line() if cron.available() else None
        state.update(installed=line is not None, cron_line=line)
    elif backend == "launchd":
        path = launchd.plist_path(host)
        try:
            state.update(installed=True, files={str(path): path.read_text(encoding="utf-8")})
        except FileNotFoundError:
            state.update(files={})
    elif backend == "schtasks" and (exe := _schtasks_exe(host)):
        try:
            proc = subprocess.run(schtasks.query_command(exe), capture_output=True, text=True,
                                  timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OperationFailed(f"`{exe}` could not run: {exc}") from None
        state.update(installed=proc.returncode == 0, query=proc.stdout)
    if state["installed"]:
        state["job"] = _jobs().get(backend)
    return state


def install_schedule(
    backend: BackendName,
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
    if backend == "systemd":
        _install_systemd(job, host, result, enable=enable)
    elif backend == "cron":
        current = cron.read()
        line = cron.cron_line(job)
        cron.write(cron.merge(current, line))
        result.cron_line = line
        result.commands.append(["crontab", "-"])
    elif backend == "launchd":
        _install_launchd(job, host, result, enable=enable)
    else:
        _install_schtasks(job, host, result)
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
    backend: BackendName, host: Host, *, record: bool = True, enable: bool = True
) -> Installed:
    """Remove the job from `backend` (a no-op when it is not installed)."""
    before = state_of(backend, host)
    result = Installed(backend, None)
    if backend == "systemd":
        if enable and shutil.which("systemctl") and systemd.user_instance_running(host):
            _systemctl(result, "disable", "--now", systemd.TIMER)
        for unit_path in systemd.read_installed(host):
            Path(unit_path).unlink()
            result.files.append(unit_path)
        if enable and shutil.which("systemctl") and systemd.user_instance_running(host):
            _systemctl(result, "daemon-reload")
    elif backend == "cron":
        if cron.available():
            current = cron.read()
            if any(cron.is_ours(x) for x in current.splitlines()):
                cron.write(cron.merge(current, None))
                result.commands.append(["crontab", "-"])
    elif backend == "launchd":
        plist = launchd.plist_path(host)
        if plist.exists():
            if enable and sys.platform == "darwin":  # pragma: no cover - macOS only
                _run(launchd.launchctl_unload(plist, os.getuid()), result, check=False)
            plist.unlink()
            result.files.append(str(plist))
    else:
        _run(schtasks.delete_command(_need_schtasks(host)), result, check=False)
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
    if backend not in BACKENDS:
        raise UserInputError(f"not a schedule state: backend {backend!r}")
    name: BackendName = backend
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
        if backend == "systemd":
            entry["files"] = sorted(state.get("files") or {})
            entry["schedule"] = state.get("on_calendar")
            if (
                entry["installed"]
                and shutil.which("systemctl")
                and systemd.user_instance_running(host)
            ):
                entry["enabled"] = systemd.systemctl("is-enabled", systemd.TIMER)[1]
                entry["active"] = systemd.systemctl("is-active", systemd.TIMER)[1]
        elif backend == "cron":
            entry["available"] = cron.available()
            line = state.get("cron_line")
            entry["cron_line"] = line
            entry["schedule"] = " ".join(line.split()[:5]) if line else None
        elif backend == "launchd":
            entry["files"] = sorted(state.get("files") or {})
        if "error" in state:
            entry["error"] = state["error"]
        backends.append(entry)
    return {
        "backends": backends,
        "policy": load_scheduled_policy().to_json(),
        "log": str(log_path()),
        "last_run": last_run(),
    }


# ------------------------------------------------------------------------------------ helpers


def _install_systemd(job: Job, host: Host, result: Installed, *, enable: bool) -> None:
    from cachedoctor.fsutil import atomic_write_text

    for path, text in systemd.unit_files(job, host).items():
        atomic_write_text(path, text, mode=0o644)
        result.files.append(path)
    if enable and shutil.which("systemctl") and systemd.user_instance_running(host):
        _systemctl(result, "daemon-reload")
        _systemctl(result, "enable", "--now", systemd.TIMER)
    else:
        result.notes.append(
            "no systemd user instance is running here; the timer starts with your next login "
            f"session after `systemctl --user enable --now {systemd.TIMER}`"
        )


def _systemctl(result: Installed, *args: str) -> None:
    code, output = systemd.systemctl(*args)
    result.commands.append(["systemctl", "--user", *args])
    if code != 0:
        raise OperationFailed(f"`systemctl --user {' '.join(args)}` failed: {output}")


def _install_launchd(job: Job, host: Host, result: Installed, *, enable: bool) -> None:
    from cachedoctor.clean import log_path
    from cachedoctor.fsutil import atomic_write_bytes

    path = launchd.plist_path(host)
    data = launchd.plist_bytes(job, str(log_path().with_name("launchd.log")))
    atomic_write_bytes(path, data, mode=0o644)
    result.files.append(str(path))
    if shutil.which("plutil"):
        _run(["plutil", "-lint", str(path)], result, check=True)
    if enable and sys.platform == "darwin":  # pragma: no cover - macOS only
        load, bootstrap = launchd.launchctl_load(path, os.getuid())
        _run(load, result, check=False)
        _run(bootstrap, result, check=True)


def _run(argv: Sequence[str], result: Installed, *, check: bool) -> None:
    result.commands.append(list(argv))
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        if check:
            raise OperationFailed(f"`{argv[0]}` could not run: {exc}") from None
        return
    if check and proc.returncode != 0:
        raise OperationFailed(f"`{' '.join(argv)}` failed: {(proc.stdout + proc.stderr).strip()}")


def _need_schtasks(host: Host) -> str:
    exe = _schtasks_exe(host)
    if exe is None:
        raise OperationFailed("the schtasks backend runs only on Windows, or in WSL with "
                              "its Windows interop (schtasks.exe not found)")
    return exe


def _install_schtasks(job: Job, host: Host, result: Installed) -> None:
    from cachedoctor.fsutil import atomic_write_bytes

    _need_schtasks(host)
    path, xml, command = schtasks_plan(job, host)
    atomic_write_bytes(path, schtasks.xml_bytes(xml), mode=0o644)
    result.files.append(str(path))
    _run(command, result, check=True)
    if host.os == "wsl":
        result.notes.append(
            f"Windows' Task Scheduler runs `wsl.exe -d {host.wsl_distro} -- ...` while you are "
            "logged on: WSL stops an idle VM, so cron inside it would not run at night")
