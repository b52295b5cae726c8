"""`cachedoctor scan`."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from cachedoctor.cli.base import (
    JsonOption,
    app,
    emit_json,
    profile_set,
    show_progress,
    stdout_console,
    warn,
)
from cachedoctor.errors import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from cachedoctor.scan import ProgressCallback, ScanEntry, ScanReport


@app.command()
def scan(
    tools: Annotated[
        list[str] | None, typer.Argument(help="Tool ids to scan (default: every tool).")
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option("--path", help="Measure these folders instead, like du (repeatable)."),
    ] = None,
    one_file_system: Annotated[
        bool,
        typer.Option(
            "--one-file-system", "-x", help="Don't descend into other mounts, like du -x."
        ),
    ] = False,
    category: Annotated[
        str | None,
        typer.Option("--category", metavar="CATEGORY",
                     help="Only tools of this category (ai, browser, ide, package, build, test, "
                     "container, system)."),
    ] = None,
    no_unclaimed: Annotated[
        bool, typer.Option("--no-unclaimed", help="Skip the big folders no profile claims.")
    ] = False,
    json_out: JsonOption = False,
) -> None:
    """What every cache weighs, where it lives, on which drive, and how full that drive is.

    Exit code 1 when a folder could not be read completely (its total is marked partial).
    """
    from cachedoctor.host import Host
    from cachedoctor.scan import scan_paths, scan_profiles

    if path:
        _check_exist(path)
    with _progress(enabled=not json_out and show_progress()) as progress:
        if path:
            report = scan_paths(path, one_file_system=one_file_system, progress=progress)
        else:
            from cachedoctor.quota import quota_table

            profiles = profile_set().select(tools or [])
            if category is not None:
                from cachedoctor.errors import UserInputError
                from cachedoctor.profiles.model import CATEGORIES

                if category not in CATEGORIES:
                    raise UserInputError(f"unknown category {category!r}; known: {', '.join(CATEGORIES)}")
                profiles = [p for p in profiles if p.category == category]
            report = scan_profiles(
                profiles,
                Host.current(),
                one_file_system=one_file_system,
                include_unclaimed=not tools and not no_unclaimed and category is None,
                quotas=quota_table(),
                progress=progress,
            )
    for entry in report.entries + report.unclaimed:
        for error in entry.walk.errors[:5]:
            warn(f"could not read {error}")
        if len(entry.walk.errors) > 5:
            warn(f"... and {len(entry.walk.errors) - 5} more unreadable entries under {entry.path}")
    if json_out:
        emit_json(report.to_json())
    else:
        _render(report, by_tool=not path)
    raise typer.Exit(EXIT_FAILED if report.partial else EXIT_OK)


def _check_exist(paths: list[str]) -> None:
    """A folder that is not there is a mistyped argument, not a partial 0 B row."""
    import os

    from cachedoctor.errors import UserInputError

    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:
        raise UserInputError("no such folder: " + ", ".join(missing))


def _progress(enabled: bool) -> AbstractContextManager[ProgressCallback | None]:
    if not enabled:
        return nullcontext(None)
    from cachedoctor.cli.progress import scan_progress

    return scan_progress()


def _render(report: ScanReport, *, by_tool: bool) -> None:
    from rich.table import Table

    from cachedoctor.cli.render import bar, bar_width_for, size, when
    from cachedoctor.sizes import format_size

    console = stdout_console()
    if not report.entries and not report.unclaimed:
        console.print("No caches found." if by_tool else "Nothing measured.")
        return
    largest = max(e.walk.allocated_bytes for e in report.entries + report.unclaimed)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    if by_tool:
        table.add_column("tool", no_wrap=True)
        table.add_column("location", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("files", justify="right", no_wrap=True)
    table.add_column("newest", justify="right", no_wrap=True)
    table.add_column("drive", no_wrap=True)
    table.add_column("path", overflow="fold", ratio=1, min_width=24)
    bar_width = bar_width_for(console.width)

    def row(entry: ScanEntry, tool: str, location: str) -> None:
        where = entry.path
        if entry.link:
            state = "BROKEN " if entry.broken else ""
            where = f"{entry.path} -> {state}{entry.link} {entry.target}"
        size_text = size(entry.walk.allocated_bytes) + ("*" if entry.walk.partial else "")
        if entry.quota_bytes:
            size_text += f" / quota {size(entry.quota_bytes)}"
        cells = [
            size_text,
            bar(entry.walk.allocated_bytes, largest, bar_width),
            f"{entry.walk.files:,}",
            when(entry.walk.newest_mtime),
            entry.drive.mount if entry.drive else "-",
            where,
        ]
        table.add_row(*([tool, location] if by_tool else []), *cells)

    for entry in report.entries:
        label = entry.location or ""
        if entry.unused:
            label += " (old, unused)"
        elif entry.seen_by:
            label += f" ({entry.seen_by})"
        row(entry, entry.tool or "", label)
    if report.unclaimed:
        if by_tool:
            table.add_section()
        for entry in report.unclaimed:
            row(entry, "(unclaimed)", entry.name or "")  # "tagged cache": has a CACHEDIR.TAG
    console.print(table)
    _render_drives(report)
    totals = report.totals()
    console.print(
        f"\n[bold]total[/bold] {format_size(totals['bytes'])} allocated "
        f"({format_size(totals['apparent_bytes'])} apparent) in {totals['files']:,} files, "
        f"{totals['dirs']:,} folders"
        + (
            "  [yellow]* partial: some folders could not be read[/yellow]" if report.partial else ""
        ),
        highlight=False,
    )


def _render_drives(report: ScanReport) -> None:
    """How full each drive holding a cache is: the question behind every scan. "used" is df's
    Use% (`used / (used + avail)`); blocks reserved for root get their own column when any drive
    has some, since they are neither used nor free for the user."""
    import math

    from rich.table import Table

    from cachedoctor.cli.render import bar, size

    drives = {e.drive.mount: e.drive for e in report.entries + report.unclaimed if e.drive}
    if not drives:
        return
    reserved = any(drive.reserved_bytes for drive in drives.values())
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold", title_justify="left")
    columns = [("drive", "left"), ("type", "left"), ("used", "right"), ("", "left"),
               ("free", "right")] + ([("reserved", "right")] if reserved else []) + [("total", "right")]
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for mount, drive in sorted(drives.items()):
        percent = drive.used_percent
        shown = "-" if percent is None else f"{math.ceil(percent)}%"  # df rounds up
        cells = [mount, drive.fstype or "-", shown,
                 bar(drive.used_bytes, drive.used_bytes + drive.free_bytes), size(drive.free_bytes)]
        table.add_row(*cells, *([size(drive.reserved_bytes)] if reserved else []),
                      size(drive.total_bytes))
    console = stdout_console()
    console.print()
    console.print(table)
