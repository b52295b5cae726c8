"""`cachedoctor sweep`."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
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
    show_progress,
    stdout_console,
    warn,
)
from cachedoctor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from cachedoctor.scan import ProgressCallback
    from cachedoctor.sweep.plan import SweepPlan, SweepResult, TargetResult

SHOWN_NOT_OUTPUTS = 5  # folders named like outputs that are not, listed before "... and N more"


@app.command()
def sweep(
    dirs: Annotated[list[str], typer.Argument(metavar="DIR...", help="Folders to look in.")],
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Only outputs of projects without activity for AGE (30d, 12h, 2w): the newest "
            "file outside build outputs, or the last commit.",
        ),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            metavar="KIND[,KIND...]",
            help="Only these kinds (node_modules, target, venv, tox, __pycache__, build, dist, "
            "...; see docs/sweep.md). Repeatable.",
        ),
    ] = None,
    trash: Annotated[
        bool, typer.Option("--trash", help="Send to the OS trash instead of deleting.")
    ] = False,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    json_out: JsonOption = False,
) -> None:
    """Delete project build outputs (node_modules, target, .venv, __pycache__, ...), each
    recognised by its markers, never by name alone.

    Exit codes: 0 done, 1 failed or partial, 2 bad input or refused (tracked by git, in use,
    system folder).
    """
    from cachedoctor.host import Host
    from cachedoctor.sizes import parse_age
    from cachedoctor.sweep.kinds import parse_kinds
    from cachedoctor.sweep.plan import SweepPolicy, execute_sweep, plan_sweep

    policy = SweepPolicy(
        older_than=parse_age(older_than) if older_than is not None else None,
        kinds=parse_kinds(kind or []),
        trash=trash,
    )
    with _progress(enabled=not json_out and show_progress()) as progress:
        plan = plan_sweep(dirs, policy, Host.current(), on_progress=progress)
    for error in plan.errors[:5]:
        warn(f"could not read {error}")
    if len(plan.errors) > 5:
        warn(f"... and {len(plan.errors) - 5} more unreadable folders")
    refused = EXIT_BAD_INPUT if plan.refused else EXIT_OK
    if dry_run or not plan.targets:
        if json_out:
            _report_refused(plan)
            emit_json(plan.to_json(), ok=not plan.refused)
        else:
            _render_plan(plan)
        raise typer.Exit(refused)
    if not yes:
        if not json_out:
            _render_plan(plan)
        from cachedoctor.sizes import format_size

        totals = plan.totals()
        verb = "Send to the trash" if trash else "Delete"
        question = (f"{verb} {_count(totals['outputs'], 'build output')} ({_count(totals['files'], 'file')}, "
                    f"frees {format_size(totals['freed_bytes'])})?")
        if not confirm(question, yes=yes):
            info("nothing deleted")
            raise typer.Exit(EXIT_OK)
    result = execute_sweep(plan, on_done=None if json_out else _render_done)
    if json_out:
        from cachedoctor.cli import output

        _report_refused(plan)
        for failure in (e for r in result.results for e in r.errors):
            output.add_error(EXIT_FAILED, "failed", failure)
        emit_json(result.to_json(), ok=not (plan.refused or result.failed))
    else:
        _render_totals(result)
    raise typer.Exit(refused or (EXIT_FAILED if result.failed else EXIT_OK))


def _report_refused(plan: SweepPlan) -> None:
    """Each folder refused (tracked by git, in use, a system folder) as an error of the
    envelope: the run exits 2 for them."""
    from cachedoctor.cli import output

    for item in plan.refused:
        output.add_error(EXIT_BAD_INPUT, "refused", f"{item.path}: {item.reason}")


def _progress(enabled: bool) -> AbstractContextManager[ProgressCallback | None]:
    if not enabled:
        return nullcontext(None)
    from cachedoctor.cli.progress import scan_progress

    return scan_progress()


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _freed_text(freed: int, shared: int) -> str:
    from cachedoctor.cli.render import size

    if shared:  # hard links with a name elsewhere (a uv cache): deleting them frees nothing
        return f"{size(freed)}; {size(shared)} shared, frees 0 B"
    return size(freed)


def _render_plan(plan: SweepPlan) -> None:
    from cachedoctor.cli.render import Column, number_column, path_column, print_table, size, when

    console = stdout_console()
    for item in plan.refused:
        warn(f"refused: {item.path}: {item.reason}")
    passed = [a for a in plan.left_alone if not a.refused]
    for item in passed[:SHOWN_NOT_OUTPUTS]:
        info(f"left alone: {item.path}: {item.reason}")
    if len(passed) > SHOWN_NOT_OUTPUTS:
        info(f"... and {len(passed) - SHOWN_NOT_OUTPUTS} more left alone (--json lists them)")
    if not plan.targets:
        console.print("No build outputs to sweep.")
        return
    columns = [Column("kind"), Column("project active", drop=1), number_column("size"),
               number_column("frees"), path_column()]
    rows: list[list[str] | None] = []
    for t in plan.targets:
        o = t.output
        active = when(t.activity) + (" (git)" if t.activity_from == "git" else "")
        rows.append([o.kind, active, size(o.bytes), _freed_text(o.freed, o.shared), o.path])
    print_table(console, columns, rows)
    totals = plan.totals()
    console.print(
        f"\ntotal: {_count(totals['outputs'], 'build output')} in "
        f"{_count(totals['projects'], 'project')}, "
        f"{_count(totals['files'], 'file')}, {size(totals['bytes'])}; frees "
        f"{size(totals['freed_bytes'])}"
        + (f" ({size(totals['shared_bytes'])} hard-linked with files elsewhere stays)"
           if totals["shared_bytes"] else "")
        + ("  (to the trash)" if plan.policy.trash else ""),
        markup=False, highlight=False,
    )


def _render_done(r: TargetResult) -> None:
    from cachedoctor.cli.render import size

    stdout_console().print(
        f"{r.status}: {r.target.path}: {_count(r.files, 'file')}, {size(r.bytes)} freed",
        markup=False, highlight=False,
    )
    for s in r.skipped[:5]:
        warn(f"skipped {r.target.path}/{s.rel}: {s.reason}" + (f" ({s.detail})" if s.detail else ""))
    if len(r.skipped) > 5:
        warn(f"... and {len(r.skipped) - 5} more skipped under {r.target.path}")
    for e in r.errors[:5]:
        warn(e)


def _render_totals(result: SweepResult) -> None:
    from cachedoctor.cli.render import size

    totals = result.totals()
    how = "sent to the trash" if result.plan.policy.trash else "deleted"
    stdout_console().print(
        f"total: {totals['outputs']} of {_count(len(result.results), 'build output')} {how}, "
        f"{_count(totals['files'], 'file')}, {size(totals['bytes'])} freed",
        markup=False, highlight=False,
    )
