"""Files written to the original after it was verified are not lost.

A tool may write into its cache between the copy's verification and the swap (pip saves a new
HTTP response, a running kernel writes a compiled artefact), or through a file it still holds
open after the swap. The set-aside original is therefore deleted only once it is known to be
unchanged since the verification: just before verifying, a digest of every folder's entries
(name, type, size, modification time) is taken and kept next to the journal; before the
original is deleted, the digests are taken again. A folder that changed is merged into the new
place — an entry the copy lacks is copied, a file newer in the original replaces the copy's —
and only then is the original removed. Whatever cannot be merged safely (a file where the copy
has a folder) keeps the original in place and stops with a message; nothing is deleted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cachedoctor import statefile as sf
from cachedoctor.errors import OperationFailed
from cachedoctor.relocate import faults

Digests = dict[str, str]  # folder path relative to the root ('' for the root) -> digest


def digests(root: str) -> Digests:
    """One digest per folder of the tree at `root`, links not followed."""
    out: Digests = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        folder = os.path.join(root, rel) if rel else root
        h = hashlib.blake2b(digest_size=12)
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out[rel] = f"unreadable:{exc.errno}"
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished while listed: its folder's digest tells the change
            kind = stat.S_IFMT(st.st_mode)
            size = st.st_size if not stat.S_ISDIR(st.st_mode) else 0
            mtime = st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else 0
            h.update(f"{entry.name}\0{kind}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
            if stat.S_ISDIR(st.st_mode) and not _is_reparse_point(st):
                stack.append(os.path.join(rel, entry.name) if rel else entry.name)
        out[rel] = h.hexdigest()
    return out


def _is_reparse_point(st: os.stat_result) -> bool:
    return bool(getattr(st, "st_file_attributes", 0) & 0x400)


def snapshot_file(op_id: str, index: int) -> Path:
    from cachedoctor.state import journal_dir

    return journal_dir() / f"{op_id}.{index}.settle.json"


SNAPSHOT = sf.JsonKind[Digests](
    "journal/ID.N.settle.json", "digest snapshot of a move's original", 1,
    parse=lambda doc: sf.field(doc, "digests", sf.map_of(sf.text)),
    dump=lambda taken: {"digests": taken},
    migrations=(lambda taken: {"digests": taken},),  # 0: the bare {folder: digest}
    hint="move it aside to go on without it; files written to the original after its "
         "verification are then not merged into the new place",
    indent=None,
)


def save(op_id: str, index: int, taken: Digests) -> None:
    faults.point("settle-save")
    SNAPSHOT.write(snapshot_file(op_id, index), taken)


def load(op_id: str, index: int) -> Digests | None:
    """The snapshot taken before the verification; None when none was taken."""
    return SNAPSHOT.read(snapshot_file(op_id, index))


def discard(op_id: str, count: int) -> None:
    for index in range(count):
        snapshot_file(op_id, index).unlink(missing_ok=True)


@dataclass
class Settled:
    """What changed in the original after its verification, and what was done about it."""

    changed_folders: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)  # relative paths merged into the new place
    kept_newer: list[str] = field(default_factory=list)  # the new place's copy was newer

    @property
    def changed(self) -> bool:
        return bool(self.changed_folders)


def settle(original: str, new: str, before: Digests | None) -> Settled:
    """Merge into `new` whatever changed in `original` since `before` was taken. Raises
    OperationFailed (keeping `original`) when that cannot be done without losing something."""
    result = Settled()
    if before is None:
        return result  # no snapshot (a journal of an older version): nothing to compare
    now = digests(original)
    result.changed_folders = sorted(rel for rel, digest in now.items() if before.get(rel) != digest)
    for rel in result.changed_folders:
        _merge_folder(original, new, rel, result)
    return result


def _merge_folder(original: str, new: str, rel: str, result: Settled) -> None:
    src_dir = os.path.join(original, rel) if rel else original
    dst_dir = os.path.join(new, rel) if rel else new
    if not os.path.isdir(dst_dir) or os.path.islink(dst_dir):
        raise _conflict(original, rel, "the new place has no folder there")
    with os.scandir(src_dir) as it:
        entries = list(it)
    for entry in entries:
        item = os.path.join(rel, entry.name) if rel else entry.name
        st = entry.stat(follow_symlinks=False)
        target = os.path.join(dst_dir, entry.name)
        try:
            there = os.lstat(target)
        except FileNotFoundError:
            there = None
        if stat.S_ISDIR(st.st_mode) and not entry.is_symlink():
            if there is None:
                faults.point("settle-copy")
                shutil.copytree(entry.path, target, symlinks=True, copy_function=shutil.copy2)
                result.copied.append(item)
            elif not stat.S_ISDIR(there.st_mode):
                raise _conflict(original, item, "a folder in the original is a file in the new place")
            continue  # a folder in both: its own digest says whether it changed
        if there is not None and stat.S_ISDIR(there.st_mode):
            raise _conflict(original, item, "a file in the original is a folder in the new place")
        if there is not None and (there.st_size, there.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
            continue
        if there is not None and there.st_mtime_ns >= st.st_mtime_ns:
            result.kept_newer.append(item)  # written in the new place after the switch
            continue
        faults.point("settle-copy")
        _replace(entry.path, target)
        result.copied.append(item)


def _replace(src: str, dst: str) -> None:
    """Copy one file or link over `dst` atomically (a temporary name beside it, then rename)."""
    tmp = f"{dst}.cachedoctor-late-{os.getpid()}"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    if os.path.islink(src):
        os.symlink(os.readlink(src), tmp)
    else:
        shutil.copy2(src, tmp, follow_symlinks=False)
    os.replace(tmp, dst)


def _conflict(original: str, rel: str, why: str) -> OperationFailed:
    return OperationFailed(
        f"{os.path.join(original, rel)} changed after the copy was verified and cannot be merged "
        f"({why}); the original is kept at {original}, nothing was deleted",
        hint="close the tool, compare the two folders, then run the same command again")
