"""`cachedoctor history` and `cachedoctor undo`."""

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
    stdout_console,
)


@app.command()
def history(
    tool: Annotated[str | None, typer.Option("--tool", metavar="TOOL", help="Only changes of this tool.")] = None,
    kind: Annotated[
        str | None,
        typer.Option("--kind", metavar="KIND", help="Only this kind: move, restore, env, quota, tune, policy, schedule."),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Every change cachedoctor has made, oldest first, and which ones were undone."""
    from cachedoctor import history as store

    found = store.changes(kind=kind, tool=tool)
    if json_out:
        emit_json({"changes": [c.to_json() for c in found]})
        return
    if not found:
        if tool or kind:
            filters = " and ".join(x for x in (f"tool {tool}" if tool else "",
                                               f"kind {kind}" if kind else "") if x)
            total = len(store.changes())
            stdout_console().print(f"No changes of {filters} ({total} change(s) recorded in all).")
        else:
            stdout_console().print("No changes recorded yet.")
        return
    import time

    from cachedoctor.cli.render import Column, number_column, print_table

    columns = [number_column("id"), number_column("when"), Column("kind"), Column("tool", drop=1),
               Column("what", "prose"), Column("undo status", "prose")]
    rows: list[list[str] | None] = []
    for change in found:
        state = ""
        if change.undone_by is not None:
            state = f"undone by #{change.undone_by}"
        elif change.undoes is not None:
            state = f"undoes #{change.undoes}"
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(change.time))
        rows.append([str(change.id), when, change.kind, change.tool or "-", change.summary, state])
    print_table(None, columns, rows)


@app.command()
def undo(
    change_id: Annotated[int | None, typer.Argument(
        metavar="ID", help="The change's id from `history` (default: the last change not undone yet).")] = None,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Revert one change, when it is safe to; otherwise explain why not (exit code 2).

    Without ID it offers the last change not undone yet: shows it and asks (`--yes` does it).
    """
    from cachedoctor.cli.base import OPTIONS
    from cachedoctor.host import Host
    from cachedoctor.undo import plan_undo
    from cachedoctor.undo import undo as do_undo

    if change_id is None:
        change_id = _last_change()
    host = Host.current()
    dirs = list(OPTIONS.profiles_dirs)
    plan = plan_undo(change_id, host, profiles_dirs=dirs)
    if dry_run:
        if json_out:
            emit_json({"dry_run": True, **plan.to_json()})
        else:
            say(f"would undo change #{change_id} ({plan.change.summary}):")
            for step in plan.steps:
                say(f"  {step}")
        return
    if not yes:
        show = info if json_out else say  # stdout carries only the JSON document
        show(f"undo change #{change_id} ({plan.change.summary}):")
        for step in plan.steps:
            show(f"  {step}")
    if not confirm(f"Undo change #{change_id}?", yes=yes):
        raise typer.Exit(1)
    result = do_undo(change_id, host, plan=plan, profiles_dirs=dirs)
    if json_out:
        emit_json({"dry_run": False, **result.to_json()})
    else:
        recorded = f" (recorded as #{result.record})" if result.record else ""
        info(f"undone change #{change_id}: {result.summary}{recorded}")


def _last_change() -> int:
    """The newest change that is neither undone nor itself an undo (undoing an undo is asked
    for by its id)."""
    import time

    from cachedoctor import history as store
    from cachedoctor.errors import RefusedError

    open_changes = [c for c in store.changes() if c.undone_by is None and c.undoes is None]
    if not open_changes:
        recorded = len(store.changes())
        raise RefusedError("nothing to undo: " + (f"all {recorded} recorded change(s) are undone"
                                                  if recorded else "no change is recorded yet"),
                           hint="`cachedoctor history` lists every change")
    last = open_changes[-1]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last.time))
    info(f"the last change is #{last.id} ({when}, {last.kind}): {last.summary}")
    return last.id
