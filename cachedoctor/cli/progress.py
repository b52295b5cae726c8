"""Rich progress on stderr for long work, used only when a person watches a terminal."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cachedoctor.scan import ProgressCallback

SHOW_AFTER = 0.5  # seconds: a quick scan should not flash a progress line


@contextmanager
def scan_progress() -> Iterator[ProgressCallback]:
    """A spinner on stderr naming the folder being scanned, its entries and bytes so far, from
    SHOW_AFTER on; before that nothing is built (a quick scan does not import rich's progress),
    and it never writes to stdout, which may be a file the report goes to."""
    from cachedoctor.sizes import format_size

    started_at = time.monotonic()
    bar: Any = None
    task: Any = None

    def update(path: str, entries: int, nbytes: int) -> None:
        nonlocal bar, task
        if bar is None and time.monotonic() - started_at < SHOW_AFTER:
            return
        line = f"scanning {path}  {entries:,} entries, {format_size(nbytes)}"
        if bar is None:
            bar, task = _scan_bar(line)
        else:
            bar.update(task, description=line)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


def _scan_bar(line: str) -> tuple[Any, Any]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cachedoctor.cli.common import stderr_console

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                   console=stderr_console(), transient=True, refresh_per_second=8)
    task = bar.add_task(line, total=None)
    bar.start()
    return bar, task


class MoveProgress:
    """What a move or restore is doing: the phase (copy, verify, swap, cleanup), and while it
    copies the bytes done of the total, the percent and an ETA. It always tracks the phase (an
    interruption says where it stopped); it draws a line on stderr only when `shown`, and the
    line is erased when the work ends, however it ends."""

    def __init__(self, total_bytes: int, *, shown: bool) -> None:
        self.total_bytes = max(total_bytes, 0)
        self.phase_name = "plan"
        self._done_before = 0  # bytes of the pairs copied before the one being copied
        self._copied = 0
        self._bar: Any = None
        self._task: Any = None
        if shown:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            from cachedoctor.cli.common import stderr_console

            self._bar = Progress(
                TextColumn("{task.description:<7}"), BarColumn(bar_width=24), TaskProgressColumn(),
                DownloadColumn(binary_units=True), TextColumn("ETA"), TimeRemainingColumn(),
                console=stderr_console(), transient=True, refresh_per_second=8,
            )
            self._task = self._bar.add_task("copy", total=self.total_bytes or None)

    def __enter__(self) -> MoveProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()  # transient: the line is cleared before anything else is said

    def phase(self, name: str) -> None:
        if name == "copy":
            self._done_before += self._copied
            self._copied = 0
        elif self.phase_name == "copy" and self._bar is not None:  # the copy is complete: its
            self._bar.update(self._task, completed=self.total_bytes)  # total was the survey's
        self.phase_name = name
        if self._bar is not None:
            self._bar.update(self._task, description=name)

    def copied(self, entries: int, nbytes: int) -> None:
        self._copied = nbytes
        if self._bar is not None:
            done = self._done_before + nbytes
            self._bar.update(self._task, completed=min(done, self.total_bytes or done))
