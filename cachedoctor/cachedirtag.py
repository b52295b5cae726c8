"""The Cache Directory Tagging Specification (https://bford.info/cachedir/): a folder holding a
file `CACHEDIR.TAG` whose first 43 bytes are `Signature: 8a477f597d28d172789f06886806bc55`
says of itself that it is a cache (Cargo, mypy, pytest, ruff, tox, uv, ccache, restic write
one). Backup tools skip such folders (`tar --exclude-caches`); cachedoctor names them.

The tag is read without following a link (a `CACHEDIR.TAG` that is a symlink is not a tag:
the folder would be vouched for by a file elsewhere) and only when it is a regular file; the
read is non-blocking, so a FIFO named CACHEDIR.TAG cannot hang the scan.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Collection, Iterable

TAG_NAME = "CACHEDIR.TAG"
SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def read_head(name: str, limit: int, *, dir_fd: int | None = None) -> bytes | None:
    """The first `limit` bytes of a regular file (never through a link), or None."""
    try:
        if dir_fd is None and os.name == "nt" and not stat.S_ISREG(os.lstat(name).st_mode):
            return None  # pragma: no cover - no O_NOFOLLOW on Windows: look first
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except (OSError, ValueError):
        return None
    try:
        return read_open(fd, limit)
    finally:
        os.close(fd)


def read_open(fd: int, limit: int) -> bytes | None:
    """The first `limit` bytes of the open `fd` when it is a regular file, else None."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None


def is_tag(head: bytes | None) -> bool:
    return head is not None and head.startswith(SIGNATURE)


def has_tag(folder: str, *, dir_fd: int | None = None) -> bool:
    """Whether `folder` carries a valid CACHEDIR.TAG. With `dir_fd`, `folder` is ignored and
    the tag is looked up in the open folder."""
    if dir_fd is not None:
        return is_tag(read_head(TAG_NAME, len(SIGNATURE), dir_fd=dir_fd))
    return is_tag(read_head(os.path.join(folder, TAG_NAME), len(SIGNATURE)))


MAX_DEPTH = 4  # folders below a cache root looked at for a tag (root/a/b/c/d)
MAX_FOLDERS = 2000  # at most this many folders listed per root: the search stays cheap


def tagged_folders(
    roots: Iterable[str],
    *,
    claimed: Callable[[str], bool],
    overlaps: Callable[[str], bool],
    listed: Collection[str] = (),
    depth: int = MAX_DEPTH,
) -> list[str]:
    """Tagged folders below `roots` that nobody accounts for, breadth-first to `depth`.

    `claimed(path)`: the folder is (inside) a profile's location: not looked into.
    `overlaps(path)`: a profile's location lies below it: looked into, never listed itself.
    `listed`: folders the caller lists anyway (the roots' own children): not looked into, so
    nothing is counted twice. A tagged folder is listed and not looked into further (its
    subfolders are part of it); links are never followed."""
    found: list[str] = []
    for root in roots:
        level = [root]
        looked_at = 0
        for _ in range(depth):
            below: list[str] = []
            for folder in level:
                if looked_at >= MAX_FOLDERS:
                    break
                looked_at += 1
                try:
                    with os.scandir(folder) as entries:
                        children = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
                except OSError:
                    continue
                for child in children:
                    if child in listed or claimed(child):
                        continue
                    if not overlaps(child) and has_tag(child):
                        found.append(child)
                    else:
                        below.append(child)
            level = below
    return found
