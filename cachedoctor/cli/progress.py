"""Rich progress on stderr for long work, used only when a person watches a terminal."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from cachedoctor.scan import ProgressCallback

SHOW_AFTER = 0.5  # seconds: a quick scan should not flash a progress line


@contextmanager
def scan_progress() -> Iterator[ProgressCallback]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cachedoctor.sizes import format_size

    progress = Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
        transient=True, refresh_per_second=8,
    )
    task = progress.add_task("scanning", total=None)
    started_at = time.monotonic()
    shown = False

    def update(path: str, entries: int, nbytes: int) -> None:
        nonlocal shown
        if not shown and time.monotonic() - started_at >= SHOW_AFTER:
            progress.start()
            shown = True
        progress.update(task, description=f"scanning {path}  {entries:,} entries, {format_size(nbytes)}")

    try:
        yield update
    finally:
        if shown:
            progress.stop()
