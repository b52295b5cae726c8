"""The cyclic garbage collector: paused around work that makes many objects and no cycles, and
told by the one-shot program what lives until it exits.

A walk or a survey makes tens of thousands of containers (lists of entries, units, sets) that
reference counting frees; a collection in between only rescans them (full collections over a
2,000-repo hub's survey took 30 ms of `ls`). `paused` stops collection for the work and
restores it after; nothing is frozen there, so a library caller (a long-running UI) loses no
collection of its own cycles.

Freezing (`gc.freeze`: existing objects leave every later collection; reference counting still
frees them, but a cycle through one of them is never collected) is for the command line
process only, at two points where what exists lives until it exits:
- the start (imports, the profile index: tens of thousands of long-lived objects, no garbage;
  collections then were 4.5% of the instructions of `profiles list`): `pause_start_up` when
  the program starts, `start_up_done` once the profiles are loaded or typer runs the line;
- a command's result about to be written out (`ls`'s listing): `keep_until_exit`.
"""

from __future__ import annotations

import gc


class paused:  # used as a function: `with collector.paused():`
    """No collection inside (collection as it was afterwards). A class, not a
    `contextlib.contextmanager`: the program's first import of this module stays light."""

    def __enter__(self) -> None:
        self.was_on = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_on:
            gc.enable()


_PAUSED_AT_START: list[bool] = []


def pause_start_up() -> None:
    """The program starts: no collection until `start_up_done` (if collection is on)."""
    if gc.isenabled() and not _PAUSED_AT_START:
        gc.disable()
        _PAUSED_AT_START.append(True)


def start_up_done() -> None:
    """What the start made stays out of every later collection; collection resumes."""
    if _PAUSED_AT_START:
        _PAUSED_AT_START.clear()
        keep_until_exit()
        gc.enable()


def resume() -> None:
    """Collection as before `pause_start_up`, nothing frozen (`main` ends: for a caller that
    embeds it, and for a run that never loaded the profiles)."""
    if _PAUSED_AT_START:
        _PAUSED_AT_START.clear()
        gc.enable()


def keep_until_exit() -> None:
    """Everything that exists now lives until the process exits (the command line only)."""
    gc.freeze()
