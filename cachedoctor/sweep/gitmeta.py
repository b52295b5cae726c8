"""What a project's git metadata says, read from the files (git itself is never run).

* `last_head_move`: the time of the last entry of the HEAD reflog (`logs/HEAD`): the last
  commit, checkout, pull, merge or reset. It dates the project as the user last worked on it,
  whatever file mtimes a clone or checkout left behind.
* `tracked_under`: which folders hold files git tracks, from the index (`index`, formats 2, 3
  and 4, SHA-1 and SHA-256 repositories, sparse indexes). A build output that git tracks is
  not a build output: it is the project's sources (a committed `dist/` of a GitHub Action, a
  vendored `node_modules`), and it is never swept.

Both read only regular files, never through a link, up to a size limit. What cannot be read
or understood is reported as unknown (None), never guessed: a split index (its entries live in
a second file) and an index version beyond 4 are unknown.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection

from cachedoctor.cachedirtag import read_head

REFLOG_TAIL = 4096  # bytes read from the end of logs/HEAD
INDEX_LIMIT = 256 * 1024 * 1024  # an index larger than this is not read (unknown)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_BINARY", 0
)


def find_gitdir(project: str) -> str | None:
    """The repository folder of a working tree: `project/.git`, or where a `.git` file
    (`gitdir: ...`, a worktree or submodule) points. None when there is none."""
    dot_git = os.path.join(project, ".git")
    try:
        st = os.lstat(dot_git)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return dot_git
    if not stat.S_ISREG(st.st_mode):
        return None
    head = read_head(dot_git, 4096)
    match = re.match(rb"gitdir:\s*(.+?)\s*$", head or b"", re.MULTILINE)
    if match is None:
        return None
    target = os.path.join(project, os.fsdecode(match.group(1)))
    return os.path.normpath(target) if os.path.isdir(target) else None


def last_head_move(gitdir: str) -> float | None:
    """Unix time of the newest HEAD reflog entry (`<old> <new> Name <mail> <time> <tz>\\t...`)."""
    data = _tail(os.path.join(gitdir, "logs", "HEAD"), REFLOG_TAIL)
    if not data:
        return None
    for line in reversed(data.splitlines()):
        meta = line.split(b"\t", 1)[0]
        match = re.search(rb"> (\d+) [+-]\d{4}$", meta)
        if match:
            return float(match.group(1))
    return None


def _tail(path: str, size: int) -> bytes | None:
    try:
        fd = os.open(path, _FILE_FLAGS | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        os.lseek(fd, max(0, st.st_size - size), os.SEEK_SET)
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def tracked_under(gitdir: str, folders: Collection[str]) -> set[str] | None:
    """Which of `folders` (paths relative to the working tree, `/`-separated) hold a tracked
    file (or are one). None when the index cannot be read or understood; an empty set when
    there is no index (nothing was ever added)."""
    path = os.path.join(gitdir, "index")
    try:
        fd = os.open(path, _FILE_FLAGS)
    except FileNotFoundError:
        return set()
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > INDEX_LIMIT:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    wanted = {os.fsencode(f): f for f in folders}
    # Formats 2 and 3 store whole paths: a folder whose name is nowhere in the file has no
    # tracked file, unless the index is split (a `link` extension: entries live elsewhere).
    if (data[:4] == b"DIRC" and data[4:8] in (b"\0\0\0\2", b"\0\0\0\3")
            and b"link" not in data
            and not any(key + b"/" in data or key + b"\0" in data for key in wanted)):
        return set()
    names = index_paths(data, _hash_size(gitdir))
    if names is None:
        return None
    prefixes = tuple(key + b"/" for key in wanted)
    found: set[str] = set()
    for name in names:
        if name in wanted:
            found.add(wanted[name])
        elif name.startswith(prefixes):
            found.update(wanted[p[:-1]] for p in prefixes if name.startswith(p))
    return found


def _hash_size(gitdir: str) -> int:
    """20 (SHA-1) or 32 (`extensions.objectFormat = sha256`), from the repository's config
    (a worktree's is in its common folder)."""
    common = gitdir
    pointer = read_head(os.path.join(gitdir, "commondir"), 4096)
    if pointer:
        common = os.path.join(gitdir, os.fsdecode(pointer.strip()))
    config = read_head(os.path.join(common, "config"), 1 << 20) or b""
    return 32 if re.search(rb"(?im)^\s*objectformat\s*=\s*sha256\s*$", config) else 20


def index_paths(data: bytes, hash_size: int = 20) -> list[bytes] | None:
    """Every path in a git index (https://git-scm.com/docs/index-format), or None when the
    data is not an index this reader understands (or is cut short)."""
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    fixed = 40 + hash_size + 2  # stat data, object id, flags
    end = len(data) - hash_size  # the trailing checksum
    pos = 12
    names: list[bytes] = []
    previous = b""
    for _ in range(count):
        start = pos
        if pos + fixed > end:
            return None
        flags = int.from_bytes(data[pos + fixed - 2 : pos + fixed], "big")
        pos += fixed
        if flags & 0x4000:  # extended flags (version 3 and later)
            if version < 3:
                return None
            pos += 2
        if version == 4:
            strip, pos = _varint(data, pos)
            nul = data.find(b"\0", pos, end)
            if nul < 0 or strip > len(previous):
                return None
            name = previous[: len(previous) - strip] + data[pos:nul]
            pos = nul + 1
        else:
            nul = data.find(b"\0", pos, end)
            if nul < 0:
                return None
            name = data[pos:nul]
            pos = start + ((nul - start) // 8 + 1) * 8  # 1 to 8 NULs pad the entry to 8 bytes
        names.append(name)
        previous = name
    while pos + 8 <= end:  # extensions: a split index keeps its entries elsewhere
        signature = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "big")
        if signature == b"link":
            return None
        pos += 8 + size
    return names


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset encoding (varint.c): 7 bits a byte, each continuation adds one."""
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos
