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

if TYPE_CHECKING:
    from cachedoctor.clean import CleanPlan, CleanResult, Policy, Target
    from cachedoctor.profiles.model import Profile


@app.command()
def clean(
    tools: Annotated[
        list[str] | None,
        typer.Argument(
            help="Tool ids to clean (default: quotas and the given age/size on every tool)."
        ),
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Only files not used for AGE (30d, 12h, 2w): atime, mtime and ctime all older.",
        ),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option(
            "--max-size",
            metavar="SIZE",
            help="Trim each location to SIZE, least recently used files first.",
        ),
    ] = None,
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
    """Delete what a cache can lose: empty safe locations, old files, or LRU files above a cap.

    Exit codes: 0 done, 1 failed or partial (or another cachedoctor holds the cache),
    2 bad input or refused (protected folder, tool running).
    """
    from cachedoctor.clean import Policy
    from cachedoctor.sizes import parse_age, parse_size

    age = parse_age(older_than) if older_than is not None else None
    size = parse_size(max_size) if max_size is not None else None
    if scheduled:
        raise typer.Exit(_scheduled(tools or [], age, size, trash, force))
    policy = Policy(explicit=bool(tools), older_than=age, max_size=size, trash=trash, force=force)
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
        question = f"{verb} {totals['files']:,} files ({format_size(totals['bytes'])})?"
        if any(t.mode == "command" for t in plan.targets):
            question = f"{verb} these caches ({format_size(totals['bytes'])}), running the tools' own commands?"
        if not confirm(question, yes=yes):
            info("nothing deleted")
            raise typer.Exit(EXIT_OK)
    from cachedoctor.clean import execute_plan

    def show_command(target: Target) -> None:
        if not json_out:
            info(f"running {target.tool}'s own clean command: {' '.join(target.command or [])}")

    result = execute_plan(plan, on_command=show_command)
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
                    f"{r.status} {t.tool}/{t.location} {t.root}: {r.files} files, "
                    f"{format_size(r.bytes)} ({'; '.join(t.reasons)})"
                )
                lines.extend(f"  skipped {s.rel}: {s.reason}" for s in r.skipped[:20])
                lines.extend(f"  error {e}" for e in r.errors[:20])
            summary.update(result.totals())
            if result.failed or any(not r.in_use for r in plan.refused):
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
    from rich.table import Table

    from cachedoctor.cli.render import size

    console = stdout_console()
    for refusal in plan.left_alone:
        (warn if refusal.refused else info)(
            f"{'refused' if refusal.refused else 'left alone'}: {refusal.tool}/{refusal.location} "
            f"{refusal.path}: {refusal.reason}"
        )
    if not plan.targets:
        console.print("Nothing to clean.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("tool", "location", "what goes", "files", "size", "folder"):
        table.add_column(
            column, justify="right" if column in ("files", "size") else "left", overflow="fold"
        )
    for t in plan.targets:
        files = f"{t.files:,}" if t.measured else "?"
        table.add_row(
            t.tool,
            t.location,
            "; ".join(t.reasons),
            files,
            size(t.bytes) if t.measured else "?",
            t.root,
        )
    console.print(table)
    largest = sorted((i for t in plan.targets for i in t.largest), key=lambda i: -i.bytes)[:5]
    if largest and any(i.bytes for i in largest):
        console.print("\nlargest items:")
        for item in largest:
            console.print(f"  {size(item.bytes):>10}  {item.path}", markup=False, highlight=False)
    totals = plan.totals()
    console.print(
        f"\ntotal: {totals['files']:,} files, {size(totals['bytes'])}"
        + ("  (to the trash)" if plan.policy.trash else ""),
        markup=False,
    )
    for t in plan.targets:
        if t.mode == "command":
            console.print(f"{t.tool}: would run {' '.join(t.command or [])}", markup=False)


def _render_result(result: CleanResult) -> None:
    from cachedoctor.cli.render import size

    console = stdout_console()
    for refusal in result.plan.refused:
        warn(f"refused: {refusal.tool}/{refusal.location} {refusal.path}: {refusal.reason}")
    for r in result.results:
        t = r.target
        console.print(
            f"{t.tool}/{t.location}: {r.status}, {r.files:,} files, {size(r.bytes)} "
            f"freed ({t.root})",
            markup=False,
            highlight=False,
        )
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
    console.print(f"total: {totals['files']:,} files {how}, {size(totals['bytes'])}", markup=False)
