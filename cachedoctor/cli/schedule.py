"""`cachedoctor schedule install|status|remove`: the scheduled cleanup job."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cachedoctor.cli.base import (
    DryRunOption,
    JsonOption,
    YesOption,
    app,
    confirm,
    emit_json,
    info,
    say,
    stdout_console,
)
from cachedoctor.errors import EXIT_OK

schedule_app = typer.Typer(
    help="Install, inspect or remove the scheduled cleanup job.", no_args_is_help=True
)
app.add_typer(schedule_app, name="schedule")

BackendOption = Annotated[
    str, typer.Option("--backend", metavar="auto|systemd|cron|launchd|schtasks", help="auto, systemd, cron, launchd or schtasks.")
]


@schedule_app.command("install")
def install(
    every: Annotated[
        str, typer.Option("--every", metavar="hourly|daily|weekly", help="hourly, daily or weekly (Mondays).")
    ] = "daily",
    at: Annotated[
        str, typer.Option("--at", metavar="HH:MM", help="Time of day (hourly: the minute).")
    ] = "03:30",
    backend: BackendOption = "auto",
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Each run also deletes files unused for AGE in safe locations of the "
            "chosen kinds; `off` for quotas only.",
        ),
    ] = "30d",
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            metavar="KIND",
            help="Location kinds the age rule covers (repeatable; "
            "default cache, temp, build, logs, downloads).",
        ),
    ] = None,
    tool: Annotated[
        list[str] | None, typer.Option("--tool", metavar="TOOL", help="Limit the job to these tools (repeatable).")
    ] = None,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Run `cachedoctor clean --scheduled` on a schedule (re-installing replaces the job)."""
    from cachedoctor.clean import DEFAULT_SCHEDULE_KINDS, ScheduledPolicy
    from cachedoctor.errors import UserInputError
    from cachedoctor.host import Host
    from cachedoctor.profiles.model import LOCATION_KINDS
    from cachedoctor.schedule import (
        install_schedule,
        make_job,
        parse_schedule,
        pick_backend,
        preview_install,
    )
    from cachedoctor.sizes import parse_age

    host = Host.current()
    schedule = parse_schedule(every, at)
    age = None if older_than.strip().lower() in ("off", "none", "0") else parse_age(older_than)
    kinds = tuple(kind or DEFAULT_SCHEDULE_KINDS)
    allowed = set(LOCATION_KINDS)
    bad = [k for k in kinds if k not in allowed]
    if bad:
        raise UserInputError(
            f"unknown location kind {bad[0]!r}; known: {', '.join(sorted(allowed))}"
        )
    if tool:
        from cachedoctor.cli.base import profile_set

        profile_set().select(tool)  # unknown tools are an error now, not at 3 a.m.
    policy = ScheduledPolicy(older_than=age, kinds=kinds, tools=tuple(tool or ()))
    name = pick_backend(backend, host)
    job = make_job(schedule)
    preview: dict[str, Any] = {"backend": name, "job": job.to_json(), "policy": policy.to_json()}
    preview.update(preview_install(job, host, name))
    if dry_run or not yes:
        if json_out and dry_run:
            emit_json({"dry_run": True, **preview})
            raise typer.Exit(EXIT_OK)
        if not json_out:
            _show_preview(preview, schedule.describe())
        if dry_run:
            raise typer.Exit(EXIT_OK)
        if not confirm(f"Install the scheduled cleanup with {name}?", yes=yes):
            info("nothing changed")
            raise typer.Exit(EXIT_OK)
    result = install_schedule(name, job, host, policy=policy)
    if json_out:
        emit_json({"dry_run": False, **result.to_json(), "policy": policy.to_json()})
        return
    info(f"installed ({name}): {schedule.describe()}")
    for path in result.files:
        info(f"  wrote {path}")
    if result.cron_line:
        info(f"  crontab of user {result.crontab_user}: {result.cron_line}")
    for note in result.notes:
        info(f"  note: {note}")


@schedule_app.command("remove")
def remove(
    backend: BackendOption = "auto",
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Remove the scheduled cleanup job (from every backend of this system with `auto`)."""
    from cachedoctor.host import Host
    from cachedoctor.schedule import backends_for, remove_schedule, state_of

    host = Host.current()
    names = list(backends_for(host)) if backend == "auto" else [_checked(backend, host)]
    installed = []
    for name in names:
        try:
            if state_of(name, host).get("installed"):
                installed.append(name)
        except Exception:  # an unusable backend (e.g. crontab missing) has nothing installed
            continue
    if not installed:
        if json_out:
            emit_json({"dry_run": dry_run, "removed": []})
        else:
            info("no scheduled cleanup is installed")
        return
    if dry_run:
        if json_out:
            emit_json({"dry_run": True, "removed": installed})
        else:
            say(f"would remove the scheduled cleanup from: {', '.join(installed)}")
        return
    if not confirm(f"Remove the scheduled cleanup from {', '.join(installed)}?", yes=yes):
        info("nothing changed")
        return
    results = [remove_schedule(name, host) for name in installed]
    if json_out:
        emit_json({"dry_run": False, "removed": [r.to_json() for r in results]})
        return
    for r in results:
        info(f"removed ({r.backend})" + (f": {', '.join(r.files)}" if r.files else ""))


@schedule_app.command("status")
def status(json_out: JsonOption = False) -> None:
    """Backend, schedule, installed files and the last run's result (from the log)."""
    from cachedoctor.host import Host
    from cachedoctor.schedule import schedule_status

    report = schedule_status(Host.current())
    if json_out:
        emit_json(report)
        return
    console = stdout_console()
    any_installed = False
    for b in report["backends"]:
        if not b["installed"]:
            continue
        any_installed = True
        console.print(
            f"{b['backend']}: installed, schedule {b.get('schedule') or '?'}", markup=False
        )
        for path in b.get("files") or []:
            console.print(f"  {path}", markup=False)
        if b.get("cron_line"):
            console.print(f"  {b['cron_line']}", markup=False)
        for key in ("enabled", "active"):
            if key in b:
                console.print(f"  {key}: {b[key]}", markup=False)
    if not any_installed:
        console.print("no scheduled cleanup installed (`cachedoctor schedule install`)")
    policy = report["policy"]
    age = policy["older_than_seconds"]
    console.print(
        f"policy: quotas{'' if age is None else f' + files unused for {age / 86400:g} days'}"
        f" in {', '.join(policy['kinds'])} locations"
        + (f" of {', '.join(policy['tools'])}" if policy["tools"] else ""),
        markup=False,
    )
    last = report["last_run"]
    if last:
        from cachedoctor.sizes import format_size

        console.print(
            f"last run: {last.get('logged_at', '?')}: {last.get('status')}, "
            f"{last.get('files', 0):,} files, {format_size(last.get('bytes', 0))} freed",
            markup=False,
        )
    else:
        console.print("last run: never")
    console.print(f"log: {report['log']}", markup=False)


def _checked(backend: str, host: Any) -> Any:
    from cachedoctor.schedule import pick_backend

    return pick_backend(backend, host)


def _show_preview(preview: dict[str, Any], when: str) -> None:
    console = stdout_console()
    console.print(f"backend: {preview['backend']}, {when}", markup=False)
    console.print(f"command: {' '.join(preview['job']['argv'])}", markup=False)
    files = preview.get("files") or {}
    for path, text in files.items():
        console.print(f"--- {path}", markup=False)
        console.print(text.rstrip(), markup=False, highlight=False)
    if preview.get("cron_line"):
        console.print(f"crontab line (rewrites the crontab of user {preview['crontab_user']}, "
                      "keeping its other lines): " + preview["cron_line"], markup=False)
    if preview.get("command"):
        console.print(f"command: {' '.join(preview['command'])}", markup=False)
