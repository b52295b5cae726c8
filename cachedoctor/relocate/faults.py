"""Fault injection for the crash-safety tests (documented as for testing only).

`CACHEDOCTOR_FAULT_AT=N` makes the process SIGKILL itself at the N-th fault point it passes (every
copied file, journal write, rename, link and deletion is one); `N:raise` raises OSError(EIO)
there instead, `N:sigint` behaves as a Ctrl-C there, `N:sigterm` sends the process SIGTERM, and
`N:pause` stops there until the test is done acting in that window: it creates
`$CACHEDOCTOR_FAULT_PAUSE_DIR/paused` and waits for `.../resume`. A name instead of N (`link`,
`swap`, `rename-dest` ...) picks the first point with that name.
`CACHEDOCTOR_FAULT_REPORT=FILE` writes the number of points passed to FILE at exit. Without these
variables each point costs one dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal

_count = 0
_report_registered = False


def point(name: str) -> None:
    spec = os.environ.get("CACHEDOCTOR_FAULT_AT")
    report = os.environ.get("CACHEDOCTOR_FAULT_REPORT")
    if not spec and not report:
        return
    global _count
    _count += 1
    if report:
        _register_report(report)
    if not spec:
        return
    target, _, mode = spec.partition(":")
    hit = target == name if not target.isdigit() else int(target) == _count
    if not hit:
        return
    if mode == "raise":
        raise OSError(errno.EIO, f"injected fault at {name}")
    if mode == "sigint":  # as if the user pressed Ctrl-C here
        raise KeyboardInterrupt
    if mode == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if mode == "pause":
        _pause()
        return
    os.kill(os.getpid(), signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)


def _register_report(path: str) -> None:
    global _report_registered
    if _report_registered:
        return
    _report_registered = True
    import atexit

    def write() -> None:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(str(_count))

    atexit.register(write)


def _pause() -> None:
    import time
    from pathlib import Path

    folder = Path(os.environ["CACHEDOCTOR_FAULT_PAUSE_DIR"])
    (folder / "paused").touch()
    deadline = time.monotonic() + 120
    while not (folder / "resume").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
