"""`cachedoctor quota TOOL [SIZE] | TOOL --off | list`: per-folder caps that `clean` enforces."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cachedoctor.cli.base import (
    DryRunOption,
    JsonOption,
    YesOption,
    app,
    confirm,
    emit_json,
    info,
    profile_set,
    say,
    warn,
)
from cachedoctor.errors import EXIT_OK, RefusedError, UserInputError


class _DefaultToSet(TyperGroup):
    """`quota TOOL ...` means `quota set TOOL ...`; `quota list` stays a subcommand."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["set", *args]
        return super().parse_args(ctx, args)


quota_app = typer.Typer(
    cls=_DefaultToSet,
    help="Per-folder caps: `quota TOOL SIZE`, `quota TOOL --off`, `quota list`. "
    "`cachedoctor clean` enforces them (least recently used files go first).",
    no_args_is_help=True,
)
app.add_typer(quota_app, name="quota")


@quota_app.command("set")
def set_command(
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool id.")],
    size: Annotated[
        str | None,
        typer.Argument(metavar="SIZE", help="Cap: 20GB, 20G (decimal), 500MiB (binary) or bytes. Default: the "
                       "profile's recommended quota."),
    ] = None,
    location: Annotated[
        str | None, typer.Option("--location", metavar="ID", help="Only this location (default: every location that "
                                 "is safe to delete, or the only one).")
    ] = None,
    off: Annotated[bool, typer.Option("--off", help="Remove the quota.")] = False,
    ntfs: Annotated[bool, typer.Option("--ntfs", help="Windows: plan an NTFS volume quota instead.")] = False,
    drive: Annotated[str | None, typer.Option("--drive", metavar="DRIVE", help="--ntfs: the volume (default: the cache's).")] = None,
    user: Annotated[str | None, typer.Option("--user", metavar="USER", help="--ntfs: DOMAIN\\user (default: you).")] = None,
    threshold: Annotated[
        str | None, typer.Option("--threshold", metavar="SIZE", help="--ntfs: warning level (default: 90% of SIZE).")
    ] = None,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Set (or with --off remove) the quota of a tool's cache folders."""
    from cachedoctor.quota import apply_quotas, cap_for, target_locations

    profile = profile_set().get(tool)
    if off and (size or ntfs):
        raise UserInputError("--off takes no SIZE and no --ntfs")
    locations = target_locations(profile, location)
    if ntfs:
        _ntfs(profile, locations, size, drive=drive, user=user, threshold=threshold,
              dry_run=dry_run, yes=yes, json_out=json_out)
        return
    caps: dict[str, int | None] = {loc.id: None if off else cap_for(loc, size) for loc in locations}
    if size and not json_out:
        from cachedoctor.sizes import explain_size

        info(f"quota: {explain_size(size)}")
    for loc in locations:
        if not off and not loc.safe_to_delete:
            warn(f"{tool} {loc.id} is not safe to delete: clean reports it over quota but never evicts from it")
    plan = apply_quotas(tool, caps, dry_run=True)
    todo = [c for c in plan.changes if c.changed]
    if not json_out:
        for change in plan.changes:
            say(f"{tool} {change.location}: {_text(change.before)} -> {_text(change.after)}"
                 + ("" if change.changed else " (unchanged)"))
    if dry_run or not todo:
        if json_out:
            emit_json(plan.to_json())
        return
    if not confirm("Change the quota?", yes=yes):
        raise typer.Exit(1)
    result = apply_quotas(tool, caps)
    if json_out:
        emit_json(result.to_json())
    elif not off:
        info("`cachedoctor clean` enforces it; `cachedoctor quota list` shows usage against it")


def _text(cap: int | None) -> str:
    from cachedoctor.sizes import format_size

    return "no quota" if cap is None else f"{format_size(cap)} ({cap:,} bytes)"


def _ntfs(profile: Any, locations: list[Any], size: str | None, *, drive: str | None, user: str | None,
          threshold: str | None, dry_run: bool, yes: bool, json_out: bool) -> None:
    import subprocess

    from cachedoctor.host import Host
    from cachedoctor.quota import (
        cap_for,
        check_ntfs_drive,
        is_windows_admin,
        ntfs_commands,
        ntfs_target,
        ntfs_user,
    )
    from cachedoctor.sizes import parse_size

    host = Host.current()
    limit = cap_for(locations[0], size)
    warn_at = parse_size(threshold) if threshold else limit * 9 // 10
    explicit = drive is not None
    if drive is None:
        if not host.is_windows:
            raise UserInputError("--ntfs needs --drive D: when not run on Windows")
        from cachedoctor.locate import observe

        drive = ntfs_target(profile, locations[0].id, observe(host))
    fstype = None
    if host.is_windows:
        from cachedoctor.drives import drive_of

        volume = drive_of(drive + "\\")
        fstype = volume.fstype if volume is not None else None
    check_ntfs_drive(drive, explicit=explicit, system_drive=host.getenv("SystemDrive") or "C:",
                     fstype=fstype)
    who = user or ntfs_user(host)
    commands = ntfs_commands(drive, limit, warn_at, who)
    explanation = (f"NTFS quotas are per user per volume: this caps everything {who} stores on {drive}, "
                   "not just the cache folder. Needs an elevated (administrator) prompt.")
    if json_out:
        emit_json({"commands": commands, "drive": drive, "user": who, "limit_bytes": limit,
                   "threshold_bytes": warn_at, "explanation": explanation, "ran": False})
    else:
        info(explanation)
        for command in commands:
            typer.echo(" ".join(f'"{a}"' if " " in a else a for a in command))
    if dry_run or not yes:
        if not json_out:
            info("(plan only: run with --yes, as administrator on Windows, to apply it)")
        return
    if not host.is_windows:
        raise RefusedError("NTFS quotas can only be applied on Windows")
    if not is_windows_admin():
        raise RefusedError("applying an NTFS quota needs administrator rights",
                           hint="run cachedoctor from an elevated prompt")
    from cachedoctor import history

    for command in commands:
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            from cachedoctor.errors import OperationFailed

            raise OperationFailed(f"{' '.join(command)} failed: {completed.stderr.strip() or completed.stdout.strip()}")
    history.record("quota", f"NTFS quota on {drive} for {who}: {limit} bytes", tool=profile.id,
                   before={"ntfs": None}, after={"ntfs": {"drive": drive, "user": who, "limit": limit,
                                                          "threshold": warn_at, "commands": commands}})


@quota_app.command("list")
def list_command(json_out: JsonOption = False) -> None:
    """Every quota with the folder's current size against it (measured like `du`).

    JSON: {"quotas": [{"tool", "location", "cap_bytes", "used_bytes", "percent", "over",
    "paths", "partial", "known"}]}. Exit 1 when a folder could not be read completely.
    """
    from cachedoctor.host import Host
    from cachedoctor.quota import usage

    profiles = {tool: loaded.profile for tool, loaded in profile_set().profiles.items()}
    rows = usage(profiles, Host.current())
    if json_out:
        emit_json({"quotas": [r.to_json() for r in rows]})
    elif not rows:
        info("no quotas set; set one with `cachedoctor quota TOOL SIZE`")
    else:
        from cachedoctor.cli.render import Column, bar, number_column, path_column, print_table
        from cachedoctor.sizes import format_size

        columns = [Column("tool"), Column("location"), number_column("used"), number_column("quota"),
                   Column("", "bar", drop=1), number_column("%"), path_column()]
        table = []
        for row in rows:
            pct = f"{row.percent:.0f}%" + (" OVER" if row.over else "")
            table.append([row.tool, row.location,
                          format_size(row.used_bytes) + ("*" if row.partial else ""),
                          format_size(row.cap_bytes),
                          bar(min(row.used_bytes, row.cap_bytes), row.cap_bytes, 10), pct,
                          ", ".join(row.paths) or ("(not present)" if row.known else "(unknown tool)")])
        print_table(None, columns, table)
    raise typer.Exit(1 if any(r.partial for r in rows) else EXIT_OK)
