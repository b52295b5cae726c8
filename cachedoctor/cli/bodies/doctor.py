"""The body of `cachedoctor doctor`: check, then render (its options: `cli/doctor.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cachedoctor.cli.common import emit_json, profile_set, stdout_console, warn

if TYPE_CHECKING:
    from cachedoctor.doctor import DoctorReport

_STYLE = {"error": "bold red", "warning": "yellow", "hint": "cyan"}


def doctor(*, tools: list[str] | None, workspace: Path | None, json_out: bool) -> int:
    """`cachedoctor doctor`: the exit code (1 when an error-level finding or a failed check)."""
    from cachedoctor.doctor import run_doctor
    from cachedoctor.host import Host

    host = Host.current()
    profiles = profile_set().select(tools or [])
    folder = workspace if workspace is not None else Path.cwd()
    report = run_doctor(profiles, host, explicit=bool(tools), workspace=folder)
    if json_out:
        emit_json(report.to_json())
    else:
        for error in report.errors:
            warn(f"{error.tool}: check {error.check} could not run: {error.error}")
        _render(report)
    return report.exit_code


def _render(report: DoctorReport) -> None:
    from cachedoctor.cli.render import print_text

    if not report.tools and not report.findings:
        print_text("No tool's caches found on this machine; nothing to check.")
        return
    if not report.findings:  # tool ids: no markup in them
        tools = ", ".join(report.tools)
        print_text(f"No problems found in {tools}.", f"[green]No problems found[/green] in {tools}.")
        return
    from rich.markup import escape
    from rich.tree import Tree

    console = stdout_console()
    by_tool: dict[str, list[int]] = {}
    for index, finding in enumerate(report.findings):
        by_tool.setdefault(finding.tool, []).append(index)
    for tool in sorted(by_tool, key=lambda t: min(by_tool[t])):
        tree = Tree(f"[bold]{escape(tool)}[/bold]")
        for index in by_tool[tool]:
            f = report.findings[index]
            where = " ".join(x for x in (f.location, f.path) if x)
            head = (
                f"[{_STYLE[f.severity]}]{f.severity}[/{_STYLE[f.severity]}] "
                f"{escape(f.check)}" + (f" [dim]({escape(where)})[/dim]" if where else "")
            )
            node = tree.add(head)
            node.add(escape(f.message))
            node.add(f"[dim]why:[/dim] {escape(f.why)}")
            if f.fix:
                node.add(f"[bold]fix:[/bold] {escape(f.fix)}")
        console.print(tree)
    console.print(
        f"\n{report.count('error')} error(s), {report.count('warning')} warning(s), "
        f"{report.count('hint')} hint(s) in {len(report.tools)} tool(s) checked",
        highlight=False,
    )
