"""`cachedoctor env set/unset/list`: persistent environment variables in one managed block."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

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
)

if TYPE_CHECKING:
    from cachedoctor.envvars import EnvResult
    from cachedoctor.host import Host

env_app = typer.Typer(
    help="Persistent environment variables cachedoctor manages (shell files, environment.d, "
    "or HKCU\\Environment on Windows).",
    no_args_is_help=True,
)
app.add_typer(env_app, name="env")

LaunchctlOption = Annotated[
    bool,
    typer.Option("--launchctl", help="macOS: also run `launchctl setenv` so GUI apps see it now."),
]


@env_app.command("set")
def set_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Variable name, e.g. HF_HOME.")],
    value: Annotated[str, typer.Argument(metavar="VALUE", help="Its value (stored literally, quoted safely).")],
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    launchctl: LaunchctlOption = False,
    json_out: JsonOption = False,
) -> None:
    """Set a variable for every new shell and session (idempotent).

    Prints the line that applies it in the current shell on stdout, so
    `eval "$(cachedoctor env set NAME VALUE --yes)"` applies it right away.
    """
    from cachedoctor.envvars import set_variables
    from cachedoctor.host import Host

    host = Host.current()
    _warn_before_set(name, value, host)
    _run(lambda dry: set_variables({name: value}, host=host, dry_run=dry), host,
         dry_run=dry_run, yes=yes, json_out=json_out, launchctl=launchctl, values={name: value})


def _warn_before_set(name: str, value: str, host: Host) -> None:
    """What setting a cache variable does not do: move the cache already there (it is left
    behind, unused), or keep what goes to a RAM disk across a reboot."""
    import os

    from cachedoctor.cli.base import profile_set, warn
    from cachedoctor.doctor.rules import RAM_FS
    from cachedoctor.drives import drive_of
    from cachedoctor.locate import observe, picture
    from cachedoctor.relocate.methods.env import EnvRelocation
    from cachedoctor.safety import is_within

    drive = drive_of(value) if os.path.isabs(value) else None
    if drive is not None and drive.fstype.lower() in RAM_FS:
        warn(f"{value} is on a RAM disk ({drive.fstype} at {drive.mount}): what is kept there is "
             "emptied at every reboot; a folder on a real drive keeps it")
    world = None
    for profile in profile_set().select([]):
        for location in profile.locations:
            if not any(isinstance(r, EnvRelocation) and name in r.vars for r in location.relocate):
                continue
            world = world or observe(host)
            for place in picture(profile, location.id, world).existing:
                if not is_within(place.data or place.path, value):
                    warn(f"{profile.name}'s {location.id} at {place.path} stays there, no longer "
                         f"used, once {name} points elsewhere; `cachedoctor move {profile.id} DEST "
                         f"--method env` moves it and sets {name}")


@env_app.command("unset")
def unset_command(
    names: Annotated[list[str], typer.Argument(metavar="NAME...", help="Variable names.")],
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    launchctl: LaunchctlOption = False,
    json_out: JsonOption = False,
) -> None:
    """Stop setting variables; the managed block goes away with the last one."""
    from cachedoctor.envvars import managed_variables, unset_variables
    from cachedoctor.host import Host

    host = Host.current()
    unknown = [n for n in names if n not in managed_variables(host)]
    for name in unknown:
        info(f"{name} is not managed by cachedoctor")
    _run(lambda dry: unset_variables(names, host=host, dry_run=dry), host, dry_run=dry_run,
         yes=yes, json_out=json_out, launchctl=launchctl, values=dict.fromkeys(names))


def _run(change: Callable[[bool], EnvResult], host: Host, *, dry_run: bool, yes: bool,
         json_out: bool, launchctl: bool, values: dict[str, str | None]) -> None:
    preview: EnvResult = change(True)
    if dry_run or (not preview.files_changed and not _store_differs(preview)):
        if json_out:
            emit_json(preview.to_json())
        else:
            for line in preview.diff.splitlines():  # a dry run's diff is its plan: stdout
                (say if dry_run else info)(line)
            _show(preview, dry_run=dry_run)
        return
    if not json_out:
        files = preview.files_changed or ["cachedoctor's variable list"]
        info("will change:\n  " + "\n  ".join(files))
        for line in preview.diff.splitlines():  # on stderr: stdout is for `eval "$(...)"`
            info(line)
    if not confirm("Change the environment settings?", yes=yes):
        raise typer.Exit(1)
    result: EnvResult = change(False)
    if launchctl and host.os == "macos":
        _launchctl(values)
    if json_out:
        emit_json(result.to_json())
    else:
        _show(result, dry_run=False)


def _store_differs(result: EnvResult) -> bool:
    return any(result.before.get(k) != v for k, v in result.after.items())


def _show(result: EnvResult, *, dry_run: bool) -> None:
    """A --dry-run's plan on stdout; after a change its notes on stderr, so stdout holds only
    the line to `eval`."""
    for message in result.messages:
        (say if dry_run else info)(message)
    if result.apply_now and not dry_run:
        info("to apply it in this shell now, run:")
        typer.echo(result.apply_now)


def _launchctl(values: dict[str, str | None]) -> None:
    import subprocess

    from cachedoctor.envvars.posix import launchctl_commands

    for command in launchctl_commands(values):
        info("running: " + " ".join(command))
        subprocess.run(command, check=False)


@env_app.command("list")
def list_command(json_out: JsonOption = False) -> None:
    """The variables cachedoctor manages, their values, and whether this process sees them.

    JSON: {"variables": [{"name", "value", "current", "seen"}]} — `current` is the value this
    process has (null when unset), `seen` is true when it equals the managed value.
    """
    from cachedoctor.envvars import managed_variables
    from cachedoctor.host import Host

    host = Host.current()
    rows: list[dict[str, Any]] = []
    for name, value in sorted(managed_variables(host).items()):
        current = host.getenv(name)
        rows.append({"name": name, "value": value, "current": current, "seen": current == value})
    if json_out:
        emit_json({"variables": rows})
        return
    if not rows:
        info("cachedoctor manages no environment variables")
        return
    from cachedoctor.cli.render import Column, path_column, print_table

    table: list[list[str] | None] = []
    for row in rows:
        seen = "yes" if row["seen"] else ("not set" if row["current"] is None else f"differs: {row['current']}")
        table.append([row["name"], row["value"], seen])
    print_table(None, [Column("name"), path_column("value"), Column("this shell", "prose")],
                table)
    if not all(r["seen"] for r in rows):
        info("open a new shell (or log in again) to see the managed values")
