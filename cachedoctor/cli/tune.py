"""`cachedoctor tune TOOL`: apply (or --undo) a profile's preset of tuned cache settings."""

from __future__ import annotations

from typing import Annotated

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


@app.command()
def tune(
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool id.")],
    preset: Annotated[str | None, typer.Option("--preset", metavar="PRESET", help="Preset id (see `profiles show TOOL`).")] = None,
    file: Annotated[str | None, typer.Option("--file", metavar="FILE", help="Edit this file instead of the preset's.")] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", metavar="DIR", help="Edit the workspace file under DIR.")
    ] = None,
    undo: Annotated[bool, typer.Option("--undo", help="Undo the latest tune of this tool.")] = False,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Set a tool's cache settings from a preset, keeping the file's comments and formatting.

    Shows a diff first; a backup is kept and the change is recorded in the history.
    """
    from cachedoctor.cli.base import profile_set
    from cachedoctor.host import Host

    profile = profile_set().get(tool)
    host = Host.current()
    if undo:
        _undo(profile, preset, host, file=file, workspace=workspace, dry_run=dry_run, yes=yes,
              json_out=json_out)
        return
    from cachedoctor.tune import apply_tune, plan_tune

    plan = plan_tune(profile, preset, host, file=file, workspace=workspace)
    where = str(plan.target) if plan.target else "the environment"
    if plan.already_tuned:
        if json_out:
            emit_json({**plan.to_json(), "applied": False})
        else:
            info(f"already tuned: {where} has every setting of preset {plan.preset.id!r}")
        return
    if not json_out:
        say(f"preset {plan.preset.id!r} for {profile.name}: {where}" + (" (new file)" if plan.creates else ""))
        if plan.preset.effect:
            say(f"effect: {plan.preset.effect}")
        print_diff(plan.diff)
        for command in plan.sudo:
            say(f"{where} needs root: only it is written as root, by sudo (it may ask for your "
                f"password): `{command}`")
    if dry_run:
        if json_out:
            emit_json({**plan.to_json(), "applied": False})
        return
    if not confirm(f"Apply these changes to {where}?", yes=yes):
        raise typer.Exit(1)
    result = apply_tune(plan)
    if json_out:
        emit_json(result.to_json())
        return
    info(f"tuned {where}" + (f"; backup: {result.backup}" if result.backup else ""))
    if result.env is not None:
        for message in result.env.messages:
            info(message)
        if result.env.apply_now:
            info("to apply it in this shell now, run:")
            typer.echo(result.env.apply_now)
    if result.change_id is not None:
        info(f"recorded as change {result.change_id}; undo with `cachedoctor tune {tool} --undo`")


def _undo(profile: object, preset: str | None, host: object, *, file: str | None,
          workspace: str | None, dry_run: bool, yes: bool, json_out: bool) -> None:
    from cachedoctor.envvars import EnvResult
    from cachedoctor.tune import undo_latest

    preview = undo_latest(profile, preset, host, file=file, workspace=workspace,  # type: ignore[arg-type]
                          dry_run=True)
    if isinstance(preview, EnvResult):
        if not json_out:
            info("will restore the environment variables: " + ", ".join(
                f"{k}={'(unset)' if v is None else v}" for k, v in sorted(preview.before.items())))
    elif not json_out:
        if preview.changed_since:
            info(f"{preview.file} was edited after the tune; what changed since:")
            print_diff(preview.changed_since)
            info("only the preset's keys that still hold the tuned values are put back"
                 + (f"; left alone (edited since): {', '.join(preview.skipped)}" if preview.skipped else ""))
        info(f"undo ({preview.action}) of change {preview.change.id}:")
        print_diff(preview.diff)
        from pathlib import Path

        from cachedoctor.tune import root_step

        for command in root_step(Path(preview.file) if preview.file else None,
                                 removes=preview.action == "delete-created-file"):
            info(f"{preview.file} needs root: only it is written as root, by sudo (it may ask "
                 f"for your password): `{command}`")
    if dry_run:
        if json_out:
            emit_json(preview.to_json())
        return
    if not confirm("Undo the tune?", yes=yes):
        raise typer.Exit(1)
    result = undo_latest(profile, preset, host, file=file, workspace=workspace)  # type: ignore[arg-type]
    if json_out:
        emit_json(result.to_json())
    else:
        info(f"undone; recorded as change {result.change_id}")


def print_diff(diff: str) -> None:
    """A unified diff, coloured on a terminal; exact text (tabs kept) when piped."""
    import sys

    from cachedoctor.cli.base import stdout_console

    console = stdout_console()
    if not console.is_terminal:
        sys.stdout.write(diff)
        sys.stdout.flush()
        return
    styles = {"+++": "bold", "---": "bold", "@@": "cyan", "+": "green", "-": "red"}
    for line in diff.splitlines():
        style = next((s for prefix, s in styles.items() if line.startswith(prefix)), None)
        console.print(line, style=style, markup=False, highlight=False, soft_wrap=True)
