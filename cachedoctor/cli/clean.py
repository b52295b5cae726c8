"""`cachedoctor clean`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from cachedoctor.cli.base import (
    DryRunOption,
    JsonOption,
    YesOption,
    app,
    confirm,
    emit_json,
    info,
    profile_set,
    stdout_console,
    warn,
)
from cachedoctor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from cachedoctor.sizes import count

if TYPE_CHECKING:
    from cachedoctor.clean import CleanPlan, CleanResult, Policy, Target
    from cachedoctor.profiles.model import Profile


@app.command()
def clean(
    tools: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="TOOL...",
            help="Tool ids to clean (default: quotas and the given age/size on every tool)."
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Only what was not used for AGE (30d, 12h, 2w): whole units where the location "
            "declares them, else files; last use by access time where the mount records it.",
        ),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option(
            "--max-size",
            metavar="SIZE",
            help="Trim each location to SIZE, least recently used units (or files) first.",
        ),
    ] = None,
    units: Annotated[
        list[str] | None,
        typer.Option(
            "--unit",
            metavar="ID",
            help="Remove exactly this unit (repeatable; ids as `cachedoctor ls TOOL` shows "
            "them; a Hugging Face revision as REPO@COMMIT or REPO@REF).",
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune",
            help="Remove what the tool itself calls garbage: detached revisions, interrupted "
            "downloads, blobs nothing uses, dangling links, superseded folders.",
        ),
    ] = False,
    trash: Annotated[
        bool, typer.Option("--trash", help="Send to the OS trash instead of deleting (undoable).")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Clean locations even while a process has files open there."),
    ] = False,
    scheduled: Annotated[
        bool,
        typer.Option(
            "--scheduled",
            help="Non-interactive mode for the scheduled job: quotas and the "
            "`schedule install` settings, no prompts, summary to the log.",
        ),
    ] = False,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Delete what a cache can lose: empty it, named units, its garbage, or the least recently
    used units (or files) above a cap or age.

    Exit codes: 0 done, 1 failed or partial (or another cachedoctor holds the cache),
    2 bad input or refused (protected folder, tool running).
    """
    from cachedoctor.clean import Policy
    from cachedoctor.errors import UserInputError
    from cachedoctor.sizes import parse_age, parse_size

    age = parse_age(older_than) if older_than is not None else None
    size = parse_size(max_size) if max_size is not None else None
    if max_size is not None and not json_out and not scheduled:
        from cachedoctor.sizes import explain_size

        info(f"--max-size {explain_size(max_size)}")
    if (units or prune) and (age is not None or size is not None or scheduled):
        raise UserInputError("--unit and --prune are not combined with --older-than, "
                             "--max-size or --scheduled: run them one after the other")
    if units and prune:
        raise UserInputError("--unit or --prune: one at a time")
    if scheduled:
        raise typer.Exit(_scheduled(tools or [], age, size, trash, force))
    policy = Policy(explicit=bool(tools), older_than=age, max_size=size, trash=trash, force=force,
                    units=tuple(units or ()), prune=prune)
    profiles = profile_set().select(tools or [])
    plan = _plan(profiles, policy, measure=dry_run or not yes or json_out)
    if dry_run or not plan.targets:
        if json_out:
            emit_json(plan.to_json())
        else:
            _render_plan(plan)
        raise typer.Exit(EXIT_BAD_INPUT if plan.refused else EXIT_OK)
    if not yes:
        if not json_out:
            _render_plan(plan)
        totals = plan.totals()
        from cachedoctor.sizes import format_size

        verb = "Send to the trash" if trash else "Delete"
        n_units = sum(len(t.units) for t in plan.targets)
        what = f"{n_units:,} units, " if n_units else ""
        question = f"{verb} {what}{count(totals['files'], 'file')} (frees {format_size(totals['bytes'])})?"
        if any(t.mode == "command" for t in plan.targets):
            question = f"{verb} these caches ({format_size(totals['bytes'])}), running the tools' own commands?"
        if not confirm(question, yes=yes):
            info("nothing deleted")
            raise typer.Exit(EXIT_OK)
    from cachedoctor.clean import execute_plan

    def show_command(target: Target) -> None:
        if not json_out:
            info(f"running {target.tool}'s own clean command: {' '.join(target.command or [])}")

    try:
        result = execute_plan(plan, on_command=show_command)
    except KeyboardInterrupt:
        gone = "sent to the trash" if trash else "deleted"
        info(f"the clean was interrupted: what it had {gone} is gone from the caches; the rest "
             f"is where it was, in {', '.join(t.root for t in plan.targets)}; the same command "
             "finishes it")
        raise
    if json_out:
        emit_json(result.to_json())
    else:
        _render_result(result)
    if plan.refused:
        raise typer.Exit(EXIT_BAD_INPUT)
    raise typer.Exit(EXIT_FAILED if result.failed else EXIT_OK)


def _plan(profiles: list[Profile], policy: Policy, *, measure: bool) -> CleanPlan:
    from cachedoctor.clean import plan_clean
    from cachedoctor.host import Host
    from cachedoctor.quota import quota_table

    all_profiles = [lp.profile for lp in profile_set().profiles.values()]
    return plan_clean(
        profiles,
        Host.current(),
        policy,
        quotas=quota_table(),
        all_profiles=all_profiles,
        measure=measure,
    )


def _scheduled(tools: list[str], age: float | None, size: int | None, trash: bool,
               force: bool) -> int:
    """The job's run: no prompts, no colours; a summary in the rotated log; exit 0 or 1.
    A location in use is skipped and logged; it never fails the run."""
    import time

    from cachedoctor.clean import Policy, execute_plan, load_scheduled_policy, log_scheduled_run
    from cachedoctor.errors import CachedoctorError
    from cachedoctor.sizes import format_size

    started = time.time()
    lines: list[str] = []
    summary: dict[str, object] = {"started": started, "status": "ok"}
    code = EXIT_OK
    try:
        settings = load_scheduled_policy()
        age = age if age is not None else settings.older_than
        policy = Policy(
            explicit=False,
            older_than=age,
            max_size=size,
            trash=trash,
            kinds=settings.kinds if age is not None else None,
            force=force,
        )
        profiles = profile_set().select(tools or list(settings.tools))
        try:
            plan = _plan(profiles, policy, measure=False)
        except CachedoctorError as exc:
            if exc.exit_code != EXIT_BAD_INPUT or "nothing to clean" not in exc.message:
                raise
            lines.append(
                "nothing configured: no quotas and no age set (see `cachedoctor schedule install`)"
            )
            plan = None
        if plan is not None:
            for refusal in plan.left_alone:
                verb = "skipped (in use)" if refusal.in_use else "left alone"
                lines.append(
                    f"{verb} {refusal.tool}/{refusal.location} {refusal.path}: {refusal.reason}"
                )
            summary["skipped_in_use"] = sum(1 for r in plan.left_alone if r.in_use)
            result = execute_plan(plan)
            for r in result.results:
                t = r.target
                lines.append(
                    f"{r.status} {t.tool}/{t.location} {t.root}: {count(r.files, 'file')}, "
                    f"{format_size(r.bytes)} ({'; '.join(t.reasons)})"
                )
                lines.extend(f"  skipped {s.rel}: {s.reason}" for s in r.skipped[:20])
                lines.extend(f"  error {e}" for e in r.errors[:20])
                lines.extend(f"  note {w}" for w in r.warnings[:20])
            summary.update(result.totals())
            summary["skipped_busy"] = sum(1 for r in result.results if r.status == "busy")
            if result.failed_apart_from_busy or any(not r.in_use for r in plan.refused):
                code = EXIT_FAILED
    except CachedoctorError as exc:
        lines.append(f"error: {exc}")
        summary["error"] = str(exc)
        code = EXIT_FAILED
    summary["status"] = "ok" if code == EXIT_OK else "failed"
    summary["exit_code"] = code
    summary["seconds"] = round(time.time() - started, 3)
    path = log_scheduled_run(summary, lines)
    if code != EXIT_OK:
        sys.stderr.write("".join(f"{line}\n" for line in lines))
        sys.stderr.write(f"cachedoctor clean --scheduled failed; see {path}\n")
    return code


def _render_plan(plan: CleanPlan) -> None:
    from cachedoctor.cli.render import Column, number_column, path_column, print_table, size

    console = stdout_console()
    for refusal in plan.left_alone:
        (warn if refusal.refused else info)(
            f"{'refused' if refusal.refused else 'left alone'}: {refusal.tool}/{refusal.location} "
            f"{refusal.path}: {refusal.reason}"
        )
    if not plan.targets:
        console.print("Nothing to clean.")
        return
    columns = [Column("tool"), Column("location"), Column("what goes", "prose"),
               number_column("files", drop=1), number_column("size"), path_column("folder")]
    rows: list[list[str] | None] = [
        [t.tool, t.location, "; ".join(t.reasons), f"{t.files:,}" if t.measured else "?",
         size(t.bytes) if t.measured else "?", t.root]
        for t in sorted(plan.targets, key=lambda t: -t.bytes if t.measured else 0)
    ]
    print_table(console, columns, rows)
    largest = sorted((i for t in plan.targets for i in t.largest), key=lambda i: -i.bytes)[:5]
    if largest and any(i.bytes for i in largest):
        console.print("\nlargest items:")
        print_table(console, [number_column("size"), path_column()],
                    [[size(item.bytes), item.path] for item in largest])
    for t in plan.targets:
        _render_target_detail(t)
    totals = plan.totals()
    console.print(
        f"\ntotal: {count(totals['files'], 'file')}, frees {size(totals['bytes'])}"
        + ("  (to the trash)" if plan.policy.trash else ""),
        markup=False,
    )
    for t in plan.targets:
        if t.mode == "command":
            console.print(f"{t.tool}: would run {' '.join(t.command or [])}", markup=False)


UNITS_SHOWN = 20


def _render_target_detail(t: Target) -> None:
    """The units, garbage and notes of one target (what a person checks before saying yes)."""
    from cachedoctor.cli.render import size, when

    console = stdout_console()
    if t.units or t.garbage or t.notes or t.command_why:
        console.print(f"\n{t.tool}/{t.location}:", markup=False, highlight=False)
    for u in t.units[:UNITS_SHOWN]:
        label = f"{u.id}@{u.revision[:12]}" if u.revision else u.id
        frees = f"frees {size(u.frees)}" if u.frees != u.bytes else ""
        extra = "; ".join(x for x in (frees, u.note) if x)
        console.print(f"  {size(u.bytes):>10}  {label}  (last used {when(u.last_used)}; {u.why}"
                      f"{'; ' + extra if extra else ''})", markup=False, highlight=False)
    if len(t.units) > UNITS_SHOWN:
        console.print(f"  ... and {len(t.units) - UNITS_SHOWN} more units", markup=False)
    for g in t.garbage:
        console.print(f"  {size(g.bytes):>10}  {g.id}: {g.reason}", markup=False,
                      highlight=False)
    if t.command_why:
        console.print(f"  program: {t.command_why}", markup=False, highlight=False)
    for note in t.notes:
        console.print(f"  note: {note}", markup=False, highlight=False)


def _render_result(result: CleanResult) -> None:
    from cachedoctor.cli.render import size

    console = stdout_console()
    for refusal in result.plan.refused:
        warn(f"refused: {refusal.tool}/{refusal.location} {refusal.path}: {refusal.reason}")
    for r in result.results:
        t = r.target
        measured = r.measured
        planned = f", planned {size(t.bytes)}" if t.measured and t.bytes != r.bytes else ""
        gained = measured.drive_gained if measured is not None else None
        drive = "" if gained is None else \
            f"; drive free space {'+' if gained >= 0 else '-'}{size(abs(gained))}"
        console.print(
            f"{t.tool}/{t.location}: {r.status}, {count(r.files, 'file')}, {size(r.bytes)} "
            f"freed (measured{planned}{drive}) ({t.root})",
            markup=False,
            highlight=False,
        )
        if r.units_removed:
            shown = ", ".join(r.units_removed[:UNITS_SHOWN])
            more = f" and {len(r.units_removed) - UNITS_SHOWN} more" \
                if len(r.units_removed) > UNITS_SHOWN else ""
            console.print(f"  removed {len(r.units_removed)} units: {shown}{more}",
                          markup=False, highlight=False)
        for unit_id, why in r.units_left[:UNITS_SHOWN]:
            warn(f"kept {unit_id}: {why}")
        for w in r.warnings:
            warn(w)
        if r.command is not None:
            console.print(
                f"  {' '.join(r.command.argv)} -> exit status {r.command.returncode}", markup=False
            )
            for line in r.command.output.splitlines()[:10]:
                console.print(f"    {line}", markup=False, highlight=False)
        for s in r.skipped[:10]:
            why = f" ({s.detail})" if s.reason == "no trash" and s.detail else ""
            warn(f"skipped {t.root}/{s.rel}: {s.reason}{why}")
        if len(r.skipped) > 10:
            warn(f"... and {len(r.skipped) - 10} more skipped under {t.root}")
        for e in r.errors[:10]:
            warn(e)
    totals = result.totals()
    how = "sent to the trash" if result.plan.policy.trash else "deleted"
    console.print(f"total: {count(totals['files'], 'file')} {how}, {size(totals['bytes'])}", markup=False)
