"""Rich progress on stderr for long work, used only when a person watches a terminal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cachedoctor.scan import ProgressCallback


@contextmanager
def scan_progress() -> Iterator[ProgressCallback]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from cachedoctor.units import format_size

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        transient=True,
        refresh_per_second=8,
    ) as progress:
        task = progress.add_task("scanning", total=None)

        def update(path: str, entries: int, nbytes: int) -> None:
            progress.update(
                task, description=f"scanning {path}  {entries:,} entries, {format_size(nbytes)}"
            )

        yield update
