"""`cachedoctor move` and `cachedoctor restore`: crash-safe cache relocation."""

from __future__ import annotations

import contextlib
from functools import partial
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
    say,
    warn,
)
from cachedoctor.errors import EXIT_OK

if TYPE_CHECKING:
    from collections.abc import Callable

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
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool id (see `cachedoctor profiles list`).")],
    dest: Annotated[str, typer.Argument(
        metavar="DEST", help="Parent folder: the cache lands in DEST/<tool> (or DEST/<tool>/<location>).")],
    location: LocationOption = None,
    method: Annotated[str | None, typer.Option(
        "--method", metavar="METHOD",
        help="How the tool finds the new place: one of the methods `cachedoctor profiles show "
             "TOOL` lists (default: the profile's first choice).")] = None,
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
    from cachedoctor.relocate.methods import NAMES
    from cachedoctor.relocate.plan import choose_locations

    if method is not None and method not in NAMES:
        raise UserInputError(f"--method must be one of {', '.join(NAMES)}, not {method!r}")
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
                    _show_move_plan(plan, host, say)
                continue
            if not json_out or not yes:
                _show_move_plan(plan, host, info if json_out else say)
            question = "Move it?" if not plan.resumes else "Finish the interrupted move?"
            if plan.replaces:
                warn(f"this replaces your own setting {plan.replaces}; `cachedoctor restore "
                     f"{profile.id}` puts it back")
                question = "Replace your setting and move it?"
            if not confirm(question, yes=yes):
                info("nothing changed")
                continue
            total = sum(s.apparent_bytes for s in plan.surveys.values())
            outcome = _watched(partial(execute_move, plan, host), plan.op, total, host)
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
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool id.")],
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
                    _show_restore_plan(plan, host, say)
                continue
            if not json_out or not yes:
                _show_restore_plan(plan, host, info if json_out else say)
            if not confirm("Restore it?", yes=yes):
                info("nothing changed")
                continue
            outcome = _watched(partial(execute_restore, plan, host), plan.op,
                               plan.needed_bytes, host)
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


def _watched(run: Callable[..., Outcome], op: Operation | None, total_bytes: int,
             host: Host) -> Outcome:
    """Run a move or restore under its progress line (phase, bytes of the total, percent,
    ETA); on Ctrl-C the line is cleared and what happened is said before the interruption goes
    on to the app (which names the commands that finish an unfinished operation)."""
    from cachedoctor.cli.base import show_progress
    from cachedoctor.cli.progress import MoveProgress

    if op is not None:  # sudo's password prompt before the progress line, not under it
        from cachedoctor import rootfiles
        from cachedoctor.relocate.methods import root_files

        rootfiles.authorise(root_files(op, host))
    watch = MoveProgress(total_bytes, shown=show_progress())
    try:
        with watch:
            return run(progress=watch.copied, phase=watch.phase)
    except KeyboardInterrupt:
        if op is not None:
            info(_where_it_stands(op, watch.phase_name))
        raise


def _where_it_stands(op: Operation, phase: str) -> str:
    """After an interruption: rolled back or resumable, and where the cache's data is now (read
    from the journal, not assumed)."""
    import os

    from cachedoctor.relocate import journal

    what = f"{'moving' if op.kind == 'move' else 'restoring'} {op.tool} ({op.location})"
    left = journal.find(op.tool, op.location)
    pairs = [p for p in op.pairs if not p.same_fs] or op.pairs
    if left is None:
        if op.kind == "move":
            return (f"{what} was interrupted during {phase} and rolled back: the cache is where "
                    f"it was, in {', '.join(p.source for p in op.pairs)}; the partial copy was removed")
        return (f"{what} was interrupted during {phase} and rolled back: the cache stays in "
                f"{', '.join(p.dest for p in op.pairs)}; the partial copy was removed")
    if left.kind == "move":
        if left.at_least("cleaning"):
            now = f"the cache is in {', '.join(p.dest for p in pairs)}"
        else:
            original = [p.aside(left.id) if os.path.lexists(p.aside(left.id)) else p.source
                        for p in pairs]
            now = (f"the original is intact in {', '.join(original)} and a verified copy is in "
                   f"{', '.join(p.dest for p in pairs)}")
    elif left.at_least("cleaning"):
        now = f"the cache is back in {', '.join(p.source for p in pairs)}"
    else:
        now = f"the relocated cache is intact in {', '.join(p.dest for p in pairs)}"
    return (f"{what} was interrupted during {phase} (journal phase {left.phase}); it can be "
            f"finished or rolled back: {now}")


def _show_move_plan(plan: MovePlan, host: Host, show: Callable[[str], None]) -> None:
    """The plan for a person: `say` (stdout) for a --dry-run or before asking, `info`
    (stderr) when stdout carries the JSON document."""
    from cachedoctor.relocate.methods import describe
    from cachedoctor.sizes import count, format_size

    op = plan.op
    if plan.resumes:
        show(f"An interrupted move of {op.tool} ({op.location}) to {op.base} stopped at phase "
             f"{op.phase!r}; it will be finished.")
        return
    show(f"Move {op.tool} ({op.location}) by {op.method}:")
    for pair in op.pairs:
        how = "rename (same drive)" if pair.same_fs else "copy, verify, then remove the original"
        show(f"  {pair.source}\n    -> {pair.dest}  [{how}]")
    free = f", {format_size(plan.free_bytes)} free there" if plan.free_bytes is not None else ""
    show(f"  {count(plan.files, 'file')}, {format_size(plan.allocated_bytes)} on disk here{free}; "
         f"verify: {op.verify}")
    for line in describe(op, host):
        show(f"  then: {line}")


def _show_restore_plan(plan: RestorePlan, host: Host, show: Callable[[str], None]) -> None:
    from cachedoctor.relocate.methods import describe
    from cachedoctor.sizes import format_size

    op = plan.op
    assert op is not None
    verb = {"rollback": "Roll back the interrupted move of", "resume": "Finish restoring",
            "restore": "Restore"}[plan.status]
    show(f"{verb} {op.tool} ({op.location}) (method {op.method}, phase {op.phase}):")
    for pair in op.pairs:
        show(f"  {pair.dest}\n    -> {pair.source}")
    if plan.needed_bytes:
        show(f"  copies back what takes {format_size(plan.needed_bytes)} on disk there")
    for line in describe(op, host):
        show(f"  and undoes: {line}")


def _report(outcome: Outcome, json_out: bool, documents: list[dict[str, Any]]) -> None:
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
    """What is there now (measured, on disk) and what this run copied (file data): each size
    says which it is, since the two differ and differ again from filesystem to filesystem."""
    from cachedoctor.sizes import count, format_size

    renamed = not outcome.files and any(p["same_filesystem"] for p in outcome.pairs)
    parts = []
    if outcome.at_dest is not None:
        files, nbytes = outcome.at_dest
        there = f"{count(files, 'file')}, {format_size(nbytes)} on disk"
        parts.append(f"renamed (same drive): {there}" if renamed else f"{there} there")
    if not renamed:
        parts.append(f"{format_size(outcome.bytes)} of file data copied" if outcome.files
                     else "nothing copied")
    return "; ".join(parts) + f"; {outcome.seconds:.1f}s"
