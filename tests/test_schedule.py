"""The scheduled job: real `systemd-analyze verify`, a crontab round trip through the crontab(1)
double with a private spool (tests/doubles/sandbox-bin; never the real user's crontab), plist,
schtasks."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cachedoctor.errors import UserInputError
from cachedoctor.host import Host
from cachedoctor.schedule import (
    Job,
    Schedule,
    cron,
    install_schedule,
    launchd,
    make_job,
    parse_schedule,
    remove_schedule,
    restore_state,
    schtasks,
    state_of,
    systemd,
)
from tests.conftest import (
    IS_MACOS,
    IS_WINDOWS,
    SANDBOX_BIN,
    needs_linux,
    needs_posix_paths,
    result_of,
    run_cli,
)

needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)
needs_crontab = pytest.mark.skipif(IS_WINDOWS, reason="the crontab double is a POSIX script")


TS = "{http://schemas.microsoft.com/windows/2004/02/mit/task}"


def host_for(home: Path, os_name: str = "linux") -> Host:
    return Host(os=os_name, env=dict(os.environ), home=str(home))  # type: ignore[arg-type]


@pytest.fixture
def fake_exe(tmp_path: Path) -> Path:
    """A real executable at a path with a space and a percent sign, standing in for cachedoctor."""
    folder = tmp_path / "my bin%dir"
    folder.mkdir()
    exe = folder / "cachedoctor"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    return exe


def test_parse_schedule_validates() -> None:
    assert parse_schedule("daily", "3:05") == Schedule("daily", 3, 5)
    assert parse_schedule("weekly", "23:59").describe() == "weekly on Mon at 23:59"
    for every, at in (
        ("monthly", "03:00"),
        ("daily", "24:00"),
        ("daily", "3pm"),
        ("daily", "03:60"),
    ):
        with pytest.raises(UserInputError):
            parse_schedule(every, at)


def test_job_runs_the_absolute_cachedoctor_with_clean_scheduled() -> None:
    job = make_job(Schedule())
    assert job.argv[-2:] == ("clean", "--scheduled")
    assert os.path.isabs(job.argv[0]) and os.access(job.argv[0], os.X_OK)


@pytest.mark.parametrize(
    ("every", "calendar"),
    [
        ("hourly", "*-*-* *:07:00"),
        ("daily", "*-*-* 04:07:00"),
        ("weekly", "Mon *-*-* 04:07:00"),
    ],
)
def test_on_calendar(every: str, calendar: str) -> None:
    assert systemd.on_calendar(parse_schedule(every, "04:07")) == calendar


@needs_systemd_analyze
@pytest.mark.parametrize("every", ["hourly", "daily", "weekly"])
def test_generated_units_pass_systemd_analyze_verify(
    tmp_path: Path, fake_exe: Path, isolated_home: Path, every: str
) -> None:
    job = Job((str(fake_exe), "clean", "--scheduled"), parse_schedule(every, "03:30"))
    files = systemd.unit_files(job, host_for(isolated_home))
    for path, text in files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    assert (
        "Persistent=true" in files[str(systemd.unit_dir(host_for(isolated_home)) / systemd.TIMER)]
    )
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    proc = subprocess.run(
        ["systemd-analyze", "--user", "verify", *files],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the verifier really checks: a missing binary fails
    bad = Job(("/nonexistent/cachedoctor", "clean", "--scheduled"), Schedule())
    service = tmp_path / systemd.SERVICE
    service.write_text(systemd.service_text(bad))
    proc = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(service)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode != 0


def test_exec_start_quoting() -> None:
    assert systemd.quote_arg("/usr/bin/cachedoctor") == "/usr/bin/cachedoctor"
    assert systemd.quote_arg("/a b/c%d$e") == '"/a b/c%%d$$e"'
    assert systemd.quote_arg('say "hi"\\') == '"say \\"hi\\"\\\\"'


@needs_posix_paths
def test_systemd_install_replaces_and_remove_cleans_up(isolated_home: Path, fake_exe: Path) -> None:
    from cachedoctor import history

    host = host_for(isolated_home)
    job = Job((str(fake_exe), "clean", "--scheduled"), Schedule("daily", 2, 0))
    first = install_schedule("systemd", job, host, enable=False)
    unit_dir = systemd.unit_dir(host)
    assert sorted(os.listdir(unit_dir)) == [systemd.SERVICE, systemd.TIMER]
    assert first.history_id is not None
    job2 = Job(job.argv, Schedule("weekly", 5, 15))
    install_schedule("systemd", job2, host, enable=False)
    assert sorted(os.listdir(unit_dir)) == [systemd.SERVICE, systemd.TIMER]
    assert systemd.installed_calendar(host) == "Mon *-*-* 05:15:00"
    state = state_of("systemd", host)
    assert state["installed"] and state["job"]["every"] == "weekly"
    removed = remove_schedule("systemd", host, enable=False)
    assert os.listdir(unit_dir) == []
    assert len(removed.files) == 2
    changes = history.changes(kind="schedule")
    assert [c.after["installed"] for c in changes] == [True, True, False]
    assert changes[1].before["job"]["every"] == "daily"  # enough to put the old schedule back
    restore_state(changes[2].before, host)  # undo the removal
    assert systemd.installed_calendar(host) == "Mon *-*-* 05:15:00"


@needs_crontab
def test_tests_reach_only_the_crontab_double() -> None:
    assert shutil.which("crontab") == str(SANDBOX_BIN / "crontab")
    assert shutil.which("systemctl") == str(SANDBOX_BIN / "systemctl")
    assert Path(os.environ["CRONTAB_DOUBLE_SPOOL"]).is_dir()


def _spool() -> Path:
    import pwd

    return Path(os.environ["CRONTAB_DOUBLE_SPOOL"]) / pwd.getpwuid(os.getuid()).pw_name


def test_cron_line_and_merge_are_pure() -> None:
    job = Job(("/opt/my tools/cachedoctor", "clean", "--scheduled"), Schedule("weekly", 4, 5))
    line = cron.cron_line(job)
    assert line == (
        "5 4 * * 1 '/opt/my tools/cachedoctor' clean --scheduled "
        "# cachedoctor-clean (managed by cachedoctor)"
    )
    assert cron.cron_line(Job(("/x%y",), Schedule("hourly", 0, 9))).startswith("9 * * * * /x\\%y ")
    other = "MAILTO=me\n0 1 * * * backup.sh\n"
    merged = cron.merge(other, line)
    assert cron.merge(merged, line) == merged  # replacing never duplicates
    assert cron.merge(merged, None) == other


@needs_crontab
def test_crontab_round_trip(isolated_home: Path, fake_exe: Path) -> None:
    others = '# my own jobs\nMAILTO=""\n17 2 * * * /usr/bin/true backup\n'
    subprocess.run(["crontab", "-"], input=others, text=True, check=True)
    host = host_for(isolated_home)
    job = Job((str(fake_exe), "clean", "--scheduled"), Schedule("daily", 3, 30))
    install_schedule("cron", job, host)
    install_schedule("cron", Job(job.argv, Schedule("hourly", 0, 45)), host)  # re-install replaces
    text = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout
    ours = [x for x in text.splitlines() if cron.is_ours(x)]
    assert len(ours) == 1 and ours[0].startswith("45 * * * * ")
    assert text.startswith(others)
    assert state_of("cron", host)["installed"]
    remove_schedule("cron", host)
    text = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout
    assert text == others
    assert _spool().read_text() == others  # the private spool, not the user's crontab


@needs_crontab
def test_cli_install_status_remove_with_cron(isolated_home: Path) -> None:
    import pwd

    user = pwd.getpwuid(os.getuid()).pw_name
    plan = run_cli("schedule", "install", "--backend", "cron", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert f"rewrites the crontab of user {user}" in plan.stdout
    assert not _spool().exists()
    assert result_of(run_cli("schedule", "install", "--backend", "cron", "--dry-run", "--json"))[
        "crontab_user"] == user
    proc = run_cli(
        "schedule",
        "install",
        "--backend",
        "cron",
        "--every",
        "daily",
        "--at",
        "01:02",
        "--older-than",
        "14d",
        "--yes",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = result_of(proc)
    assert doc["backend"] == "cron" and doc["cron_line"].startswith("2 1 * * * ")
    assert doc["crontab_user"] == user
    assert "cachedoctor-clean" in _spool().read_text()
    assert doc["policy"]["older_than_seconds"] == 14 * 86400
    status = result_of(run_cli("schedule", "status", "--json"))
    (cron_entry,) = [b for b in status["backends"] if b["backend"] == "cron"]
    assert cron_entry["installed"] and cron_entry["schedule"] == "2 1 * * *"
    assert status["last_run"] is None
    assert run_cli("clean", "--scheduled").returncode == 0
    status = result_of(run_cli("schedule", "status", "--json"))
    assert status["last_run"]["status"] == "ok"
    text = run_cli("schedule", "status").stdout
    assert "cron: installed" in text and "last run:" in text
    proc = run_cli("schedule", "remove", "--backend", "cron", "--yes")
    assert proc.returncode == 0, proc.stderr
    listed = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False).stdout
    assert "cachedoctor-clean" not in listed


def test_cli_rejects_bad_input(isolated_home: Path) -> None:
    for args in (
        ["--every", "monthly"],
        ["--at", "25:00"],
        ["--backend", "schtasks" if IS_MACOS else "launchd"],  # a backend of another OS
        ["--older-than", "forever"],
        ["--kind", "everything"],
    ):
        proc = run_cli("schedule", "install", *args, "--dry-run")
        assert proc.returncode == 2, (args, proc.stderr)
        assert "error:" in proc.stderr


@needs_linux
def test_dry_run_shows_units_and_writes_nothing(isolated_home: Path) -> None:
    proc = run_cli("schedule", "install", "--backend", "systemd", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = result_of(proc)
    assert any(path.endswith(".timer") for path in doc["files"])
    assert not (isolated_home / ".config" / "systemd").exists()


@needs_posix_paths
def test_launchd_plist_is_valid_and_installed_in_launch_agents(isolated_home: Path) -> None:
    host = host_for(isolated_home, "macos")
    job = Job(("/usr/local/bin/cachedoctor", "clean", "--scheduled"), Schedule("weekly", 6, 45))
    install_schedule("launchd", job, host, enable=False)
    path = launchd.plist_path(host)
    assert path.parent == isolated_home / "Library" / "LaunchAgents"
    with path.open("rb") as fh:
        data = plistlib.load(fh)
    assert data["Label"] == launchd.LABEL
    assert data["ProgramArguments"] == list(job.argv)
    assert data["StartCalendarInterval"] == {"Weekday": 1, "Hour": 6, "Minute": 45}
    assert launchd.calendar(Job(job.argv, Schedule("hourly", 0, 5))) == {"Minute": 5}
    if shutil.which("plutil"):
        assert subprocess.run(["plutil", "-lint", str(path)], check=False).returncode == 0
    remove_schedule("launchd", host, enable=False)
    assert not path.exists()


def _task(xml: str) -> ET.Element:
    return ET.fromstring(xml.split("?>", 1)[1])


def _get(task: ET.Element, path: str) -> str | None:
    found = task.find("/".join(f"{TS}{p}" for p in path.split("/")))
    return found.text if found is not None else None


def test_schtasks_task_xml() -> None:
    """Issue 10, #11: the task starts when a run was missed, on battery, hidden, and (native)
    whether or not the user is logged on (S4U: no console window, no stored password)."""
    exe = r"C:\Program Files\cachedoctor\cachedoctor.exe"
    job = Job((exe, "clean", "--scheduled"), Schedule("daily", 3, 30))
    task = _task(schtasks.task_xml(job, schtasks.native_action(job), logon="S4U", user="PC\\ana"))
    assert task.tag == f"{TS}Task"
    for path, value in (("Settings/StartWhenAvailable", "true"),
                        ("Settings/DisallowStartIfOnBatteries", "false"),
                        ("Settings/StopIfGoingOnBatteries", "false"),
                        ("Settings/Hidden", "true"),
                        ("Principals/Principal/LogonType", "S4U"),
                        ("Principals/Principal/UserId", "PC\\ana"),
                        ("Actions/Exec/Command", exe),
                        ("Actions/Exec/Arguments", "clean --scheduled"),
                        ("Triggers/CalendarTrigger/StartBoundary", "2024-01-01T03:30:00"),
                        ("Triggers/CalendarTrigger/ScheduleByDay/DaysInterval", "1")):
        assert _get(task, path) == value, path
    weekly = _task(schtasks.task_xml(Job(job.argv, Schedule("weekly", 22, 0)),
                                     schtasks.native_action(job), logon="S4U"))
    assert weekly.find(f"{TS}Triggers/{TS}CalendarTrigger/{TS}ScheduleByWeek/{TS}DaysOfWeek/"
                       f"{TS}Monday") is not None
    hourly = _task(schtasks.task_xml(Job(job.argv, Schedule("hourly", 0, 15)),
                                     schtasks.native_action(job), logon="S4U"))
    assert _get(hourly, "Triggers/CalendarTrigger/Repetition/Interval") == "PT1H"
    assert _get(hourly, "Triggers/CalendarTrigger/StartBoundary") == "2024-01-01T00:15:00"
    wsl = Job(("/home/ana/.local/bin/cachedoctor", "clean", "--scheduled"), Schedule())
    task = _task(schtasks.task_xml(wsl, schtasks.wsl_action(wsl, "Ubuntu 24.04"),
                                   logon="InteractiveToken"))
    assert _get(task, "Actions/Exec/Command") == "wsl.exe"
    assert _get(task, "Actions/Exec/Arguments") == (
        '-d "Ubuntu 24.04" -- /home/ana/.local/bin/cachedoctor clean --scheduled')
    assert schtasks.create_command("C:\\t.xml") == [
        "schtasks", "/Create", "/XML", "C:\\t.xml", "/TN", "cachedoctor-clean", "/F"]
    assert schtasks.delete_command("schtasks.exe") == [
        "schtasks.exe", "/Delete", "/TN", "cachedoctor-clean", "/F"]
    assert schtasks.xml_bytes("<x/>").startswith(b"\xff\xfe")  # UTF-16 with its BOM


@pytest.fixture
def wsl_interop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """WSL with interop: the schtasks.exe and wslpath doubles first on PATH."""
    from tests.doubles import SITE

    monkeypatch.setenv("WSL_DISTRO_NAME", "Ubuntu")
    monkeypatch.setenv("PATH", f"{SITE.parent / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CACHEDOCTOR_TEST_SCHTASKS", str(tmp_path / "tasks"))
    return tmp_path / "tasks"


@needs_posix_paths
def test_wsl_schedules_a_windows_task_running_wsl_exe(wsl_interop: Path, fake_exe: Path,
                                                      isolated_home: Path) -> None:
    host = Host(os="wsl", env=dict(os.environ), home=str(isolated_home))
    from cachedoctor.schedule import pick_backend, schedule_status

    assert pick_backend("auto", host) == "schtasks"
    job = make_job(Schedule("daily", 4, 0), [str(fake_exe)])
    done = install_schedule("schtasks", job, host)
    task = _task((wsl_interop / "cachedoctor-clean.xml").read_text(encoding="utf-8"))
    assert _get(task, "Actions/Exec/Command") == "wsl.exe"
    assert _get(task, "Actions/Exec/Arguments") == (
        f'-d Ubuntu -- "{fake_exe}" clean --scheduled')
    assert _get(task, "Principals/Principal/LogonType") == "InteractiveToken"
    assert any("cron inside it would not run" in n for n in done.notes)
    assert done.commands[0][:3] == ["schtasks.exe", "/Create", "/XML"]
    assert done.commands[0][3].startswith("\\\\wsl.localhost\\Ubuntu\\")
    assert state_of("schtasks", host)["installed"]
    status = schedule_status(host)
    assert status["backends"][0]["backend"] == "schtasks" and status["backends"][0]["installed"]
    remove_schedule("schtasks", host)
    assert not state_of("schtasks", host)["installed"]
    assert (wsl_interop / "calls.log").read_text().count("/Delete") == 1


def test_wsl_without_interop_schedules_inside_linux(isolated_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.schedule import backends_for, pick_backend

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no schtasks.exe: [interop] enabled=false
    wsl = Host(os="wsl", env={"XDG_RUNTIME_DIR": str(isolated_home / "no-bus"),
                              "WSL_DISTRO_NAME": "Ubuntu"}, home=str(isolated_home))
    assert backends_for(wsl)[0] == "schtasks"
    if shutil.which("crontab"):
        assert pick_backend("auto", wsl) == "cron"


def test_auto_backend_per_os(isolated_home: Path) -> None:
    from cachedoctor.schedule import pick_backend

    assert pick_backend("auto", host_for(isolated_home, "windows")) == "schtasks"
    assert pick_backend("auto", host_for(isolated_home, "macos")) == "launchd"
    linux = Host(
        os="linux", env={"XDG_RUNTIME_DIR": str(isolated_home / "no-bus")}, home=str(isolated_home)
    )
    if shutil.which("crontab"):
        assert pick_backend("auto", linux) == "cron"  # no user instance here: cron
    with pytest.raises(UserInputError):
        pick_backend("schtasks", linux)
