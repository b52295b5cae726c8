"""`cachedoctor move` and `cachedoctor restore`: crash-safe cache relocation."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cachedoctor.cli.base import (
    OPTIONS,
    DryRunOption,
    JsonOption,
    YesOption,
    app,
    confirm,
    emit_json,
    info,
    profile_set,
    warn,
)
from cachedoctor.errors import EXIT_OK

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.relocate import RestorePlan
    from cachedoctor.relocate.engine import Outcome
    from cachedoctor.relocate.journal import Operation
    from cachedoctor.relocate.plan import MovePlan

LocationOption = Annotated[
    str | None, typer.Option("--location", "-l", metavar="ID", help="Only this location of the tool.")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Go ahead even though the tool is running (with a warning).")
]


@app.command()
def move(
    tool: Annotated[str, typer.Argument(help="Tool id (see `cachedoctor profiles list`).")],
    dest: Annotated[str, typer.Argument(
        help="Parent folder: the cache lands in DEST/<tool> (or DEST/<tool>/<location>).")],
    location: LocationOption = None,
    method: Annotated[str | None, typer.Option(
        "--method", metavar="link|env|policy|config",
        help="How the tool finds the new place (default: the profile's first choice).")] = None,
    link: Annotated[str | None, typer.Option(
        "--link", metavar="junction|symlink",
        help="Link kind for --method link (default: junction on Windows, symlink elsewhere).")] = None,
    verify: Annotated[str, typer.Option(
        "--verify", metavar="size|hash",
        help="Check every copied file by size and mtime, or also by content hash.")] = "size",
    force: ForceOption = False,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Move a tool's cache to DEST and point the tool at it; crash-safe and journaled.

    Re-running a move that was interrupted finishes it; `cachedoctor restore` rolls it back.
    Exit codes: 0 moved (or already there), 1 failed (nothing lost), 2 refused or bad input,
    130 interrupted.
    """
    from cachedoctor.errors import UserInputError
    from cachedoctor.host import Host
    from cachedoctor.locking import cache_lock
    from cachedoctor.relocate import execute_move, plan_move
    from cachedoctor.relocate.plan import choose_locations

    if method is not None and method not in ("link", "env", "policy", "config"):
        raise UserInputError(f"--method must be link, env, policy or config, not {method!r}")
    if link is not None and link not in ("junction", "symlink"):
        raise UserInputError(f"--link must be junction or symlink, not {link!r}")
    if verify not in ("size", "hash"):
        raise UserInputError(f"--verify must be size or hash, not {verify!r}")
    from cachedoctor.locate import observe
    from cachedoctor.relocate import journal

    host = Host.current()
    profile = profile_set().get(tool)
    journal.check_state()
    documents: list[dict[str, Any]] = []
    unfinished = [op for op in journal.load_all() if op.tool == profile.id
                  and (location is None or op.location == location)]
    locations = []
    if unfinished:  # the same command finishes an interrupted move, whatever its phase
        locations = [profile.require_location(op.location) for op in unfinished]
        method, link, verify = _as_interrupted(unfinished[0], method, link, verify)
    if location is not None or not unfinished:
        locations = locations or choose_locations(profile, observe(host), location)
    else:  # then the locations the interrupted command had not reached yet
        with contextlib.suppress(UserInputError):
            locations += [loc for loc in choose_locations(profile, observe(host), None)
                          if loc not in locations]
    for loc in locations:
        with cache_lock(profile.id, loc.id):
            plan = plan_move(profile, loc, host, dest, method=method, link=link,  # type: ignore[arg-type]
                             verify=verify, force=force, profiles_dirs=_profiles_dirs(),
                             world=observe(host))
            for line in plan.warnings:
                warn(line)
            if plan.already is not None:
                outcome = execute_move(plan, host)
                _report(outcome, json_out, documents)
                continue
            if dry_run:
                if json_out:
                    documents.append(plan.to_json(host))
                else:
                    _show_move_plan(plan, host)
                continue
            if not json_out or not yes:
                _show_move_plan(plan, host)
            question = "Move it?" if not plan.resumes else "Finish the interrupted move?"
            if plan.replaces:
                warn(f"this replaces your own setting {plan.replaces}; `cachedoctor restore "
                     f"{profile.id}` puts it back")
                question = "Replace your setting and move it?"
            if not confirm(question, yes=yes):
                info("nothing changed")
                continue
            outcome = execute_move(plan, host, progress=_progress())
            _observe_after(profile, loc.id, host, outcome, expected=outcome.base)
            _report(outcome, json_out, documents)
    if json_out:
        emit_json({"operations": documents})
    raise typer.Exit(EXIT_OK)


def _as_interrupted(op: Operation, method: str | None, link: str | None,
                    verify: str) -> tuple[str | None, str | None, str]:
    """The options the interrupted command was given: it is finished as journaled, and the
    locations it had not reached yet are moved the same way. Options that differ are said."""
    asked = op.settings.get("asked") or {"method": op.method, "link": None}
    for name, given, journaled in (("--method", method, op.method), ("--verify", verify, op.verify)):
        if given is not None and given != journaled and not (name == "--verify" and given == "size"):
            warn(f"the interrupted move of {op.tool} ({op.location}) is finished by its journal "
                 f"({name} {journaled}); {name} {given} is not used for it")
    return (method if method is not None else asked.get("method"),
            link if link is not None else asked.get("link"),
            op.verify if verify == "size" else verify)


@app.command()
def restore(
    tool: Annotated[str, typer.Argument(help="Tool id.")],
    location: LocationOption = None,
    force: ForceOption = False,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Put a relocated cache back where the tool expects it and remove the link, env var, policy
    or config key that `move` created. Also rolls back an interrupted move.

    Exit codes: 0 restored (or nothing to restore), 1 failed (nothing lost), 2 refused or bad
    input, 130 interrupted.
    """
    from cachedoctor.host import Host
    from cachedoctor.locking import cache_lock
    from cachedoctor.relocate import execute_restore, journal, plan_restore

    host = Host.current()
    profile = profile_set().get(tool)
    journal.check_state()
    if location is not None:
        location_ids = [location]
    else:
        relocated = {key.split("/", 1)[1] for key in journal.relocation_records()
                     if key.startswith(f"{tool}/")}
        relocated |= {op.location for op in journal.load_all() if op.tool == tool}
        location_ids = [loc.id for loc in profile.locations if loc.id in relocated] or \
            [loc.id for loc in profile.locations]
    documents: list[dict[str, Any]] = []
    for location_id in location_ids:
        with cache_lock(profile.id, location_id):
            plan = plan_restore(profile, location_id, host, force=force)
            for line in plan.warnings:
                warn(line)
            if plan.op is None or dry_run:
                outcome = execute_restore(plan, host, dry_run=True)
                if json_out:
                    documents.append(plan.to_json(host))
                elif plan.op is None:
                    info(outcome.messages[0])
                else:
                    _show_restore_plan(plan, host)
                continue
            if not json_out or not yes:
                _show_restore_plan(plan, host)
            if not confirm("Restore it?", yes=yes):
                info("nothing changed")
                continue
            outcome = execute_restore(plan, host, progress=_progress())
            _observe_after(profile, location_id, host, outcome, expected=None)
            _report(outcome, json_out, documents)
    if json_out:
        emit_json({"operations": documents})
    raise typer.Exit(EXIT_OK)


def _observe_after(profile: Any, location_id: str, host: Host, outcome: Outcome, *,
                   expected: str | None) -> None:
    """Look again once the change is made, and say where the tool will really find its cache
    (measured, not planned); a move the tool does not follow is a warning, not a success."""
    import os

    from cachedoctor.locate import observe, picture

    pic = picture(profile, location_id, observe(host))
    outcome.now_at = [p.to_json() for p in pic.places]
    shown = "; ".join(f"{p.path} ({p.how()})" for p in pic.places) or "nowhere on this system"
    outcome.messages.append(f"{profile.id} ({location_id}) is now at: {shown}")
    if expected is not None and not any(
            (p.data or "").startswith(expected) or p.path.startswith(expected) for p in pic.places):
        warn(f"{profile.id} does not look in {expected} yet: {shown}"
             + ("; open a new shell" if os.name != "nt" else ""))


def _profiles_dirs() -> list[str]:
    import os

    return [os.path.abspath(d) for d in OPTIONS.profiles_dirs]


def _progress() -> Any:
    from cachedoctor.cli.base import show_progress

    if not show_progress():
        return None
    from cachedoctor.sizes import format_size

    def update(entries: int, nbytes: int) -> None:
        import sys

        sys.stderr.write(f"\r  copied {entries:,} entries, {format_size(nbytes)}   ")
        sys.stderr.flush()

    return update


def _show_move_plan(plan: MovePlan, host: Host) -> None:
    from cachedoctor.relocate.methods import describe
    from cachedoctor.sizes import count, format_size

    op = plan.op
    if plan.resumes:
        info(f"An interrupted move of {op.tool} ({op.location}) to {op.base} stopped at phase "
             f"{op.phase!r}; it will be finished.")
        return
    info(f"Move {op.tool} ({op.location}) by {op.method}:")
    for pair in op.pairs:
        how = "rename (same drive)" if pair.same_fs else "copy, verify, then remove the original"
        info(f"  {pair.source}\n    -> {pair.dest}  [{how}]")
    free = f", {format_size(plan.free_bytes)} free there" if plan.free_bytes is not None else ""
    info(f"  {count(plan.files, 'file')}, {format_size(plan.allocated_bytes)}{free}; verify: {op.verify}")
    for line in describe(op, host):
        info(f"  then: {line}")


def _show_restore_plan(plan: RestorePlan, host: Host) -> None:
    from cachedoctor.relocate.methods import describe
    from cachedoctor.sizes import format_size

    op = plan.op
    assert op is not None
    verb = {"rollback": "Roll back the interrupted move of", "resume": "Finish restoring",
            "restore": "Restore"}[plan.status]
    info(f"{verb} {op.tool} ({op.location}) (method {op.method}, phase {op.phase}):")
    for pair in op.pairs:
        info(f"  {pair.dest}\n    -> {pair.source}")
    if plan.needed_bytes:
        info(f"  copies {format_size(plan.needed_bytes)} back")
    for line in describe(op, host):
        info(f"  and undoes: {line}")


def _report(outcome: Outcome, json_out: bool, documents: list[dict[str, Any]]) -> None:
    import sys


    if sys.stderr.isatty():
        sys.stderr.write("\n")
    if json_out:
        documents.append(outcome.to_json())
        return
    for message in outcome.messages:
        info(message)
    if outcome.status == "moved":
        info(f"moved {outcome.tool} ({outcome.location}) to {outcome.base} ({_totals(outcome)})")
    elif outcome.status == "restored":
        info(f"restored {outcome.tool} ({outcome.location}) from {outcome.base} "
             f"({_totals(outcome)})")
    elif outcome.status == "rolled_back":
        info(f"rolled back the interrupted move of {outcome.tool} ({outcome.location}); "
             "the cache is where it was")


def _totals(outcome: Outcome) -> str:
    """What is there now (measured) and what this run copied."""
    from cachedoctor.sizes import count, format_size

    parts = []
    if outcome.at_dest is not None:
        files, nbytes = outcome.at_dest
        parts.append(f"{count(files, 'file')}, {format_size(nbytes)} there")
    parts.append(f"{format_size(outcome.bytes)} copied" if outcome.files
                 else "renamed, nothing copied" if any(p["same_filesystem"] for p in outcome.pairs)
                 else "nothing copied")
    return "; ".join(parts) + f"; {outcome.seconds:.1f}s"
