"""systemd user units: `cachedoctor-clean.service` + `.timer` in the user unit folder."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from cachedoctor.errors import OperationFailed
from cachedoctor.host import Host, OsName
from cachedoctor.schedule.backend import Backend, Installed
from cachedoctor.schedule.model import JOB_NAME, WEEKDAY, Job, Schedule

SERVICE = f"{JOB_NAME}.service"
TIMER = f"{JOB_NAME}.timer"
_PLAIN = re.compile(r"^[A-Za-z0-9/._:+@=,-]+$")


def unit_dir(host: Host) -> Path:
    config = host.getenv("XDG_CONFIG_HOME")
    base = Path(config) if config and config.startswith("/") else Path(host.home) / ".config"
    return base / "systemd" / "user"


def on_calendar(schedule: Schedule) -> str:
    if schedule.every == "hourly":
        return f"*-*-* *:{schedule.minute:02d}:00"
    day = f"{WEEKDAY} " if schedule.every == "weekly" else ""
    return f"{day}*-*-* {schedule.hour:02d}:{schedule.minute:02d}:00"


def quote_arg(arg: str) -> str:
    """One ExecStart word: specifiers (%) and variables ($) escaped, quoted when needed."""
    text = arg.replace("%", "%%").replace("$", "$$")
    if _PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def service_text(job: Job) -> str:
    exec_start = " ".join(quote_arg(a) for a in job.argv)
    return (
        "# Written by `cachedoctor schedule install`; remove with `cachedoctor schedule remove`.\n"
        "[Unit]\n"
        "Description=cachedoctor scheduled cache cleanup\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart={exec_start}\n"
        "Nice=10\n"
        "IOSchedulingClass=idle\n"
    )


def timer_text(job: Job) -> str:
    return (
        "# Written by `cachedoctor schedule install`; remove with `cachedoctor schedule remove`.\n"
        "[Unit]\n"
        f"Description=cachedoctor scheduled cache cleanup ({job.schedule.describe()})\n"
        "\n"
        "[Timer]\n"
        f"OnCalendar={on_calendar(job.schedule)}\n"
        "Persistent=true\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def unit_files(job: Job, host: Host) -> dict[str, str]:
    directory = unit_dir(host)
    return {str(directory / SERVICE): service_text(job), str(directory / TIMER): timer_text(job)}


def user_instance_running(host: Host) -> bool:
    """A systemd user manager answers for this user (`systemctl --user is-system-running`)."""
    runtime = host.getenv("XDG_RUNTIME_DIR")
    if not runtime or (
        not os.path.exists(os.path.join(runtime, "systemd", "private"))
        and not os.path.exists(os.path.join(runtime, "bus"))
    ):
        return False
    try:
        proc = subprocess.run(
            ["systemctl", "--user", "is-system-running"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.stdout.strip() in ("running", "degraded", "starting", "initializing")


def systemctl(*args: str) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            ["systemctl", "--user", *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def read_installed(host: Host) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in (SERVICE, TIMER):
        path = unit_dir(host) / name
        with contextlib.suppress(FileNotFoundError):
            out[str(path)] = path.read_text(encoding="utf-8")
    return out


def installed_calendar(host: Host) -> str | None:
    text = read_installed(host).get(str(unit_dir(host) / TIMER), "")
    match = re.search(r"^OnCalendar=(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


class SystemdBackend(Backend):
    """A user timer and service in ~/.config/systemd/user, enabled with `systemctl --user`."""

    name = "systemd"
    preference: ClassVar[dict[OsName, int]] = {"linux": 0, "wsl": 1}

    def usable(self, host: Host) -> bool:
        return shutil.which("systemctl") is not None and user_instance_running(host)

    def state(self, host: Host) -> dict[str, Any]:
        files = read_installed(host)
        return {"installed": bool(files), "files": files, "on_calendar": installed_calendar(host)}

    def preview(self, job: Job, host: Host) -> dict[str, Any]:
        return {"files": unit_files(job, host)}

    def install(self, job: Job, host: Host, result: Installed, *, enable: bool) -> None:
        from cachedoctor.fsutil import atomic_write_text

        for path, text in unit_files(job, host).items():
            atomic_write_text(path, text, mode=0o644)
            result.files.append(path)
        if enable and self.usable(host):
            _systemctl(result, "daemon-reload")
            _systemctl(result, "enable", "--now", TIMER)
        else:
            result.notes.append(
                "no systemd user instance is running here; the timer starts with your next login "
                f"session after `systemctl --user enable --now {TIMER}`"
            )

    def remove(self, host: Host, result: Installed, *, enable: bool) -> None:
        if enable and self.usable(host):
            _systemctl(result, "disable", "--now", TIMER)
        for unit_path in read_installed(host):
            Path(unit_path).unlink()
            result.files.append(unit_path)
        if enable and self.usable(host):
            _systemctl(result, "daemon-reload")

    def status(self, state: dict[str, Any], host: Host) -> dict[str, Any]:
        entry: dict[str, Any] = {"files": sorted(state.get("files") or {}),
                                 "schedule": state.get("on_calendar")}
        if state.get("installed") and self.usable(host):
            entry["enabled"] = systemctl("is-enabled", TIMER)[1]
            entry["active"] = systemctl("is-active", TIMER)[1]
        return entry


def _systemctl(result: Installed, *args: str) -> None:
    code, output = systemctl(*args)
    result.commands.append(["systemctl", "--user", *args])
    if code != 0:
        raise OperationFailed(f"`systemctl --user {' '.join(args)}` failed: {output}")


BACKEND = SystemdBackend()
