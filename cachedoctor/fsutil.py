"""Small durable-write helpers shared by every module that changes a file, and the one safe way
to read back a cache cachedoctor keeps (`open_own`)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a rename or create inside `path` durable (no-op where directories can't be opened)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None
) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file, whole.

    Writes a temp file in the same folder, fsyncs it, renames it over the target and fsyncs the
    folder. The target's permission bits are kept unless `mode` is given.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    import tempfile  # here, not at the top: 3 ms of every hot command's start (shutil, random)

    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    fsync_dir(target.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, mode: int | None = None) -> None:
    """Text variant; newline translation is off so CRLF files stay CRLF."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def open_own(path: str | os.PathLike[str]) -> BinaryIO | None:
    """`path` opened for reading when it is a regular file this user owns and only this user
    can write; None otherwise. For the caches cachedoctor keeps in its state folder (a pickle,
    a spec), which a run must never take from another user, nor block on (a FIFO put in their
    place) or read without end (a link to /dev/zero). Raises OSError when it cannot be opened."""
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        theirs = hasattr(os, "geteuid") and (st.st_uid != os.geteuid() or st.st_mode & 0o022)
        if not stat.S_ISREG(st.st_mode) or theirs:
            os.close(fd)
            return None
        return os.fdopen(fd, "rb")
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def read_all(path: str) -> bytes:
    """A small file's bytes by plain reads, no buffered file object (a /proc file: a buffered
    one per process was two thirds of reading the process list). OSError as `os.open` raises."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
