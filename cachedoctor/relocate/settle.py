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
from pathlib import Path
from typing import Any

import msgspec

from cachedoctor import statefile as sf
from cachedoctor.errors import OperationFailed
from cachedoctor.fs import kinds, seam
from cachedoctor.fs.copy import copy_tree
from cachedoctor.fs.walk import Frame, Task, TreeWalk, join_rel
from cachedoctor.relocate import faults
from cachedoctor.safedelete import remove_tree

Digests = dict[str, str]  # folder path relative to the root ('' for the root) -> digest


def digests(root: str) -> Digests:
    """One digest per folder of the tree at `root` (links not followed, not entered)."""
    walk = _Digest(root)
    walk.run()
    return walk.out


class _Digest(TreeWalk):
    """A visitor of the one walker: each folder's sorted entries (name, type, size, mtime)
    hashed into `out[rel]`; a folder that cannot be listed gets "unreadable:<errno>"."""

    same_device = False  # the copy took every folder the survey let through

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.out: Digests = {}

    def run(self) -> None:
        root = self._walk_root()
        if root is not None:
            self._seal(root)

    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        frame.names = sorted(self._list(frame))
        frame.data = hashlib.blake2b(digest_size=12)

    def _error(self, rel: str, exc: OSError) -> None:
        self.out[rel] = f"unreadable:{exc.errno}"

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        self.out[rel] = f"unreadable:{reason}"

    def _done(self, parent: Frame, child: Frame) -> None:
        self._seal(child)

    def _seal(self, frame: Frame) -> None:
        self.out.setdefault(frame.rel, frame.data.hexdigest())

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        ops, h = self.ops, frame.data
        names = frame.names
        while frame.index < len(names):
            name = names[frame.index]
            frame.index += 1
            try:
                st = ops.lstat(name, dir_fd=frame.fd)
            except OSError:
                continue  # vanished while listed: its folder's digest tells the change
            folder = kinds.is_real_dir(st)
            kind = stat.S_IFMT(st.st_mode)  # the seam shows every link kind as S_IFLNK
            size, mtime = (0, 0) if folder else (st.st_size, st.st_mtime_ns)
            h.update(f"{name}\0{kind}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
            if folder:
                child = self._open(frame, name, join_rel(frame.rel, name), st)
                if child is not None:
                    frames.append(child)
                    return True
        return False


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


class Settled(msgspec.Struct):
    """What changed in the original after its verification, and what was done about it."""

    changed_folders: list[str] = msgspec.field(default_factory=list)
    copied: list[str] = msgspec.field(default_factory=list)  # relative paths merged into the new place
    kept_newer: list[str] = msgspec.field(default_factory=list)  # the new place's copy was newer

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
    ops = seam.current()
    for name in sorted(os.listdir(src_dir)):
        item = os.path.join(rel, name) if rel else name
        source = os.path.join(src_dir, name)
        try:
            st = ops.lstat_path(source)
        except FileNotFoundError:
            continue
        target = os.path.join(dst_dir, name)
        try:
            there = ops.lstat_path(target)
        except FileNotFoundError:
            there = None
        if kinds.is_real_dir(st):
            if there is None:
                faults.point("settle-copy")
                _place_folder(source, target)
                result.copied.append(item)
            elif not kinds.is_real_dir(there):
                raise _conflict(original, item, "a folder in the original is a file in the new place")
            continue  # a folder in both: its own digest says whether it changed
        if there is not None and kinds.is_real_dir(there):
            raise _conflict(original, item, "a file in the original is a folder in the new place")
        if there is not None and (there.st_size, there.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
            continue
        if there is not None and there.st_mtime_ns >= st.st_mtime_ns:
            result.kept_newer.append(item)  # written in the new place after the switch
            continue
        faults.point("settle-copy")
        _replace(ops, source, st, target)
        result.copied.append(item)


def _late_name(dst: str) -> str:
    """The temporary name a late entry is copied to before it takes its place: fixed, so a
    merge killed half-way leaves a name the next run recognises as its own and removes (a
    half-copied file at the real name would look newer than the original and be kept)."""
    return f"{dst}.cachedoctor-late"


def _place_folder(src: str, dst: str) -> None:
    """Copy a folder created late with the one copier (links, modes and times kept), under its
    temporary name first, then rename it into place."""
    tmp = _late_name(dst)
    if os.path.lexists(tmp):
        remove_tree(tmp)
    copy_tree(src, tmp)
    seam.rename(tmp, dst)


def _replace(ops: seam.Ops, src: str, st: Any, dst: str) -> None:
    """Copy one file or link over `dst` atomically (a temporary name beside it, then rename);
    a link is recreated as the same kind of link with its times (`Ops.copy_link`: a junction
    stays a junction, a Windows file symlink stays a file symlink)."""
    tmp = _late_name(dst)
    if os.path.lexists(tmp):
        os.unlink(tmp)
    if kinds.is_link(st):
        folder = ops.open_root(os.path.dirname(tmp))
        try:
            ops.copy_link(st, ops.readlink_path(src), os.path.basename(tmp), dir_fd=folder,
                          owner=False)
        finally:
            ops.close(folder)
    else:
        shutil.copy2(src, tmp, follow_symlinks=False)
    os.replace(tmp, dst)  # replaces an existing file on Windows too (MoveFileEx)


def _conflict(original: str, rel: str, why: str) -> OperationFailed:
    return OperationFailed(
        f"{os.path.join(original, rel)} changed after the copy was verified and cannot be merged "
        f"({why}); the original is kept at {original}, nothing was deleted",
        hint="close the tool, compare the two folders, then run the same command again")
