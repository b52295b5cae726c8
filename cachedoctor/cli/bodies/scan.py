"""The body of `cachedoctor scan`: measure, then render (its options: `cli/scan.py`)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from cachedoctor.cli.common import emit_json, profile_set, show_progress, stdout_console, warn
from cachedoctor.errors import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from cachedoctor.scan import ProgressCallback, ScanEntry, ScanReport


def scan(*, tools: list[str] | None, path: list[str] | None, one_file_system: bool,
         category: str | None, no_unclaimed: bool, json_out: bool) -> int:
    """`cachedoctor scan`: the exit code (1 when a folder could not be read completely)."""
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
    return EXIT_FAILED if report.partial else EXIT_OK


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
    from cachedoctor.cli.render import (
        PIPE_WIDTH,
        Column,
        bar,
        bar_width_for,
        number_column,
        path_column,
        plain_stdout,
        print_table,
        print_text,
        size,
        when,
    )
    from cachedoctor.sizes import format_size

    if not report.entries and not report.unclaimed:
        print_text("No caches found." if by_tool else "Nothing measured.")
        return
    console = None if plain_stdout() else stdout_console()  # a pipe: no console to build
    largest = max(e.walk.allocated_bytes for e in report.entries + report.unclaimed)
    with_quota = any(e.quota_bytes for e in report.entries + report.unclaimed)
    columns = [Column("tool"), Column("location")] if by_tool else []
    columns += [number_column("size"), *([number_column("quota", drop=1)] if with_quota else []),
                Column("", "bar", drop=5), number_column("files", drop=2),
                number_column("newest", drop=4), Column("drive", drop=3), path_column()]
    bar_width = bar_width_for(console.width if console is not None else PIPE_WIDTH)
    rows: list[list[str] | None] = []

    def row(entry: ScanEntry, tool: str, location: str) -> None:
        where = entry.path
        if entry.link:
            state = "BROKEN " if entry.broken else ""
            where = f"{entry.path} -> {state}{entry.link} {entry.target}"
        cells = [
            size(entry.walk.allocated_bytes) + ("*" if entry.walk.partial else ""),
            *([size(entry.quota_bytes) if entry.quota_bytes else ""] if with_quota else []),
            bar(entry.walk.allocated_bytes, largest, bar_width),
            f"{entry.walk.files:,}",
            when(entry.walk.newest_mtime),
            entry.drive.mount if entry.drive else "-",
            where,
        ]
        rows.append([*([tool, location] if by_tool else []), *cells])

    for entry in report.entries:
        label = entry.location or ""
        if entry.unused:
            label += " (old, unused)"
        elif entry.seen_by:
            label += f" ({entry.seen_by})"
        row(entry, entry.tool or "", label)
    if report.unclaimed:
        if by_tool:
            rows.append(None)
        for entry in report.unclaimed:
            row(entry, "(unclaimed)", entry.name or "")  # "tagged cache": has a CACHEDIR.TAG
    print_table(console, columns, rows)
    _render_drives(report)
    totals = report.totals()
    total = (f"{format_size(totals['bytes'])} allocated ({format_size(totals['apparent_bytes'])} "
             f"apparent) in {totals['files']:,} files, {totals['dirs']:,} folders")
    partial = "* partial: some folders could not be read" if report.partial else ""
    print_text(f"\ntotal {total}" + (f"  {partial}" if partial else ""),
               f"\n[bold]total[/bold] {total}" + (f"  [yellow]{partial}[/yellow]" if partial else ""))


def _render_drives(report: ScanReport) -> None:
    """How full each drive holding a cache is: the question behind every scan. "used" is df's
    Use% (`used / (used + avail)`); blocks reserved for root get their own column when any drive
    has some, since they are neither used nor free for the user."""
    import math

    from cachedoctor.cli.render import (
        Column,
        bar,
        number_column,
        path_column,
        plain_stdout,
        print_table,
        print_text,
        size,
    )

    drives = {e.drive.mount: e.drive for e in report.entries + report.unclaimed if e.drive}
    if not drives:
        return
    reserved = any(drive.reserved_bytes for drive in drives.values())
    columns = [path_column("drive"), Column("type", drop=2), number_column("used"),
               Column("", "bar", drop=3), number_column("free")]
    columns += [number_column("reserved", drop=1)] if reserved else []
    columns += [number_column("total", drop=1)]
    rows: list[list[str] | None] = []
    for mount, drive in sorted(drives.items()):
        percent = drive.used_percent
        shown = "-" if percent is None else f"{math.ceil(percent)}%"  # df rounds up
        rows.append([mount, drive.fstype or "-", shown,
                     bar(drive.used_bytes, drive.used_bytes + drive.free_bytes),
                     size(drive.free_bytes), *([size(drive.reserved_bytes)] if reserved else []),
                     size(drive.total_bytes)])
    print_text("")
    print_table(None if plain_stdout() else stdout_console(), columns, rows)
