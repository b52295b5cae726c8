"""Windows Task Scheduler through `schtasks.exe /Create /XML` (pure construction; run on Windows,
or from WSL through interop as `schtasks.exe`).

`schtasks /Create /SC ... /TR ...` alone gives a task that runs only while the user is logged on
(no /RU: TASK_LOGON_INTERACTIVE_TOKEN), skips runs missed while the computer was off
(StartWhenAvailable defaults to false) and does not start on battery
(DisallowStartIfOnBatteries defaults to true); it sets none of these. The task definition is
therefore written as Task Scheduler XML (learn.microsoft.com, Task Scheduler Schema):
`StartWhenAvailable`, `DisallowStartIfOnBatteries`/`StopIfGoingOnBatteries` false, `Hidden`,
`MultipleInstancesPolicy` IgnoreNew, a time limit, and

* native Windows: `LogonType` S4U, "run whether the user is logged on or not" without storing
  a password (no network access and no encrypted files, which a local cleanup needs neither);
  it runs in a non-interactive desktop, so no console window appears;
* WSL: the task runs `wsl.exe -d <distro> -- <cachedoctor> clean --scheduled` (WSL stops an
  idle VM after `vmIdleTimeout`, so cron inside the distribution does not run at night), as
  `InteractiveToken`: WSL needs the user's session.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, ClassVar
from xml.sax.saxutils import escape

import msgspec

from cachedoctor.errors import OperationFailed
from cachedoctor.host import Host, OsName
from cachedoctor.schedule.backend import Backend, Installed, run
from cachedoctor.schedule.model import JOB_NAME, Job

TASK = JOB_NAME
NAMESPACE = "http://schemas.microsoft.com/windows/2004/02/mit/task"
_START_DATE = "2024-01-01"  # any past day: the trigger repeats from there


class Action(msgspec.Struct, frozen=True):
    """What the task starts: a program and its Windows command line of arguments."""

    command: str
    arguments: str


def native_action(job: Job) -> Action:
    return Action(job.argv[0], subprocess.list2cmdline(list(job.argv[1:])))


def wsl_action(job: Job, distro: str) -> Action:
    """`wsl.exe -d <distro> -- argv...`: `--` passes the rest as the command line to run."""
    return Action("wsl.exe", subprocess.list2cmdline(["-d", distro, "--", *job.argv]))


def _trigger(job: Job) -> str:
    s = job.schedule
    if s.every == "hourly":
        return (f"<CalendarTrigger><StartBoundary>{_START_DATE}T00:{s.minute:02d}:00"
                "</StartBoundary><Enabled>true</Enabled><Repetition><Interval>PT1H</Interval>"
                "<Duration>P1D</Duration><StopAtDurationEnd>false</StopAtDurationEnd>"
                "</Repetition><ScheduleByDay><DaysInterval>1</DaysInterval></ScheduleByDay>"
                "</CalendarTrigger>")
    start = f"<StartBoundary>{_START_DATE}T{s.at}:00</StartBoundary><Enabled>true</Enabled>"
    if s.every == "weekly":
        return (f"<CalendarTrigger>{start}<ScheduleByWeek><WeeksInterval>1</WeeksInterval>"
                "<DaysOfWeek><Monday /></DaysOfWeek></ScheduleByWeek></CalendarTrigger>")
    return (f"<CalendarTrigger>{start}<ScheduleByDay><DaysInterval>1</DaysInterval>"
            "</ScheduleByDay></CalendarTrigger>")


def task_xml(job: Job, action: Action, *, logon: str, user: str | None = None) -> str:
    """The task definition (Task Scheduler Schema 1.2)."""
    user_id = f"<UserId>{escape(user)}</UserId>" if user else ""
    return (
        '<?xml version="1.0" encoding="UTF-16"?>\n'
        f'<Task version="1.2" xmlns="{NAMESPACE}">\n'
        "  <RegistrationInfo><Description>cachedoctor: scheduled cache cleanup "
        f"({escape(job.schedule.describe())})</Description>"
        f"<URI>\\{TASK}</URI></RegistrationInfo>\n"
        f"  <Triggers>{_trigger(job)}</Triggers>\n"
        f'  <Principals><Principal id="Author">{user_id}<LogonType>{logon}</LogonType>'
        "<RunLevel>LeastPrivilege</RunLevel></Principal></Principals>\n"
        "  <Settings>"
        "<MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>"
        "<DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>"
        "<StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>"
        "<StartWhenAvailable>true</StartWhenAvailable>"
        "<RunOnlyIfNetworkAvailable>false</RunOnlyIfNetworkAvailable>"
        "<IdleSettings><StopOnIdleEnd>false</StopOnIdleEnd><RestartOnIdle>false</RestartOnIdle>"
        "</IdleSettings>"
        "<Hidden>true</Hidden>"
        "<ExecutionTimeLimit>PT2H</ExecutionTimeLimit>"
        "<Enabled>true</Enabled>"
        "</Settings>\n"
        f'  <Actions Context="Author"><Exec><Command>{escape(action.command)}</Command>'
        f"<Arguments>{escape(action.arguments)}</Arguments></Exec></Actions>\n"
        "</Task>\n"
    )


def xml_bytes(xml: str) -> bytes:
    """UTF-16 with a byte-order mark, as Task Scheduler writes (and `/XML` reads) its files."""
    return xml.encode("utf-16")


def create_command(xml_path: str, exe: str = "schtasks") -> list[str]:
    return [exe, "/Create", "/XML", xml_path, "/TN", TASK, "/F"]


def delete_command(exe: str = "schtasks") -> list[str]:
    return [exe, "/Delete", "/TN", TASK, "/F"]


def query_command(exe: str = "schtasks") -> list[str]:
    return [exe, "/Query", "/TN", TASK, "/XML"]


def exe_for(host: Host) -> str | None:
    """How to reach Task Scheduler: `schtasks` on Windows, `schtasks.exe` through WSL's interop;
    None where there is neither."""
    if host.os == "windows":
        return "schtasks"
    if host.os == "wsl":
        return shutil.which("schtasks.exe") and "schtasks.exe"
    return None


def task_plan(job: Job, host: Host) -> tuple[Path, str, list[str]]:
    """(where the task XML is written, the XML, the command that registers it)."""
    from cachedoctor.state import config_dir

    path = config_dir() / "schedule-task.xml"
    if host.os == "wsl":
        distro = host.wsl_distro
        if not distro:
            raise OperationFailed("WSL_DISTRO_NAME is not set: cannot name this distribution "
                                  "for wsl.exe -d", hint="run it from a WSL shell")
        xml = task_xml(job, wsl_action(job, distro), logon="InteractiveToken")
        windows = _windows_path_of(str(path))
        return path, xml, create_command(windows, "schtasks.exe")
    user = host.getenv("USERNAME")
    domain = host.getenv("USERDOMAIN")
    xml = task_xml(job, native_action(job), logon="S4U",
                   user=f"{domain}\\{user}" if user and domain else user)
    return path, xml, create_command(str(path))


def _windows_path_of(path: str) -> str:
    """`wslpath -w`: a WSL path as Windows programs reach it (\\\\wsl.localhost\\<distro>\\...)."""
    tool = shutil.which("wslpath")
    if tool is not None:
        done = subprocess.run([tool, "-w", path], capture_output=True, text=True, timeout=10,
                              check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    raise OperationFailed(f"cannot name {path} for Windows: wslpath -w failed")


def _need_exe(host: Host) -> str:
    exe = exe_for(host)
    if exe is None:
        raise OperationFailed("the schtasks backend runs only on Windows, or in WSL with "
                              "its Windows interop (schtasks.exe not found)")
    return exe


class SchtasksBackend(Backend):
    """A Task Scheduler task from an XML definition (Windows, and WSL through interop)."""

    name = "schtasks"
    preference: ClassVar[dict[OsName, int]] = {"windows": 0, "wsl": 0}  # WSL stops an idle VM

    def usable(self, host: Host) -> bool:
        return exe_for(host) is not None

    def state(self, host: Host) -> dict[str, Any]:
        exe = exe_for(host)
        if exe is None:
            return {"installed": False}
        try:
            proc = subprocess.run(query_command(exe), capture_output=True, text=True,
                                  timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OperationFailed(f"`{exe}` could not run: {exc}") from None
        return {"installed": proc.returncode == 0, "query": proc.stdout}

    def preview(self, job: Job, host: Host) -> dict[str, Any]:
        task_file, xml, command = task_plan(job, host)
        return {"files": {str(task_file): xml}, "command": command}

    def install(self, job: Job, host: Host, result: Installed, *, enable: bool) -> None:
        from cachedoctor.fsutil import atomic_write_bytes

        _need_exe(host)
        path, xml, command = task_plan(job, host)
        atomic_write_bytes(path, xml_bytes(xml), mode=0o644)
        result.files.append(str(path))
        run(command, result, check=True)
        if host.os == "wsl":
            result.notes.append(
                f"Windows' Task Scheduler runs `wsl.exe -d {host.wsl_distro} -- ...` while you "
                "are logged on: WSL stops an idle VM, so cron inside it would not run at night")

    def remove(self, host: Host, result: Installed, *, enable: bool) -> None:
        run(delete_command(_need_exe(host)), result, check=False)


BACKEND = SchtasksBackend()
