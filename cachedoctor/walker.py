"""du-exact measurement of a folder tree.

Counts like GNU du: allocated bytes (`du -sB1`), apparent bytes (`du -sb`), inodes
(`du --inodes -s`); hard links once, symlinks as themselves (never followed), directories'
own blocks included; `one_file_system` stops at mount points like `du -x`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

ProgressCallback = Callable[[int, int], None]  # (entries so far, allocated bytes so far)


@dataclass
class WalkResult:
    path: str
    allocated_bytes: int = 0
    apparent_bytes: int = 0
    files: int = 0  # non-directory inodes (regular files, symlinks, others), hard links once
    dirs: int = 0
    newest_mtime: float | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def inodes(self) -> int:
        return self.files + self.dirs

    @property
    def partial(self) -> bool:
        return bool(self.errors)


def measure(path: str, *, one_file_system: bool = False,
            on_progress: ProgressCallback | None = None) -> WalkResult:
    """Measure `path` (a folder, file or link: links are measured as themselves)."""
    result = WalkResult(path=path)
    seen: set[tuple[int, int]] = set()
    try:
        top = os.lstat(path)
    except OSError as exc:
        result.errors.append(f"{path}: {exc.strerror}")
        return result
    _account(result, top, seen)
    if not stat.S_ISDIR(top.st_mode):
        return result
    stack = [path]
    root_dev = top.st_dev
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError as exc:
                        result.errors.append(f"{entry.path}: {exc.strerror}")
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        if one_file_system and st.st_dev != root_dev:
                            continue
                        stack.append(entry.path)
                    _account(result, st, seen)
        except OSError as exc:
            result.errors.append(f"{current}: {exc.strerror}")
        if on_progress is not None:
            on_progress(result.inodes, result.allocated_bytes)
    return result


def _account(result: WalkResult, st: os.stat_result, seen: set[tuple[int, int]]) -> None:
    if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return
        seen.add(key)
    result.allocated_bytes += getattr(st, "st_blocks", 0) * 512 if hasattr(st, "st_blocks") else st.st_size
    result.apparent_bytes += st.st_size
    if stat.S_ISDIR(st.st_mode):
        result.dirs += 1
    else:
        result.files += 1
    if result.newest_mtime is None or st.st_mtime > result.newest_mtime:
        result.newest_mtime = st.st_mtime
