"""Inter-process locks, so two cachedoctor processes never work on the same cache at once."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cachedoctor.errors import LockBusyError
from cachedoctor.state import ensure, state_dir


def lock_path(key: str) -> Path:
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return ensure(state_dir() / "locks") / f"{digest}.lock"


@contextmanager
def exclusive(key: str, *, wait: float = 2.0, what: str | None = None) -> Iterator[None]:
    """Hold an exclusive lock named `key` (e.g. a cache path); wait up to `wait` seconds.

    The OS releases the lock when the process dies, so a kill -9 never leaves it stuck.
    """
    path = lock_path(key)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                holder = _read_holder(fd)
                raise LockBusyError(
                    f"another cachedoctor process{holder} is working on {what or key}; "
                    "try again when it has finished"
                )
            time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip() if hasattr(os, "pread") else ""
    except OSError:
        pid = ""
    return f" (pid {pid})" if pid.isdigit() else ""


if sys.platform == "win32":  # pragma: no cover - exercised on Windows CI only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def cache_key(tool: str, location: str) -> str:
    return f"cache:{tool}/{location}"


def cache_lock(tool: str, location: str, *, wait: float = 2.0) -> Any:
    """The one lock every command that changes a tool's cache takes (move, restore, clean)."""
    return exclusive(cache_key(tool, location), wait=wait, what=f"the {tool} cache ({location})")
