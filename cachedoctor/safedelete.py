"""The deleter that cannot be aimed outside a cache: the one deleter, a visitor of `fs.walk`.

Every operation below a cache root is relative to an open directory descriptor (`fs.walk`):

* directories are opened with ``O_RDONLY | O_DIRECTORY | O_NOFOLLOW`` relative to their parent's
  descriptor, then ``fstat``-ed and compared (st_dev, st_ino) with the ``lstat`` seen while
  listing the parent, so a directory swapped for a link (or another directory) between listing
  and opening is skipped, not entered (no check-then-use race);
* entries are removed with ``unlink(name, dir_fd=...)`` / ``rmdir(name, dir_fd=...)``: a link
  (symlink, junction) is removed as a link (its target untouched) and a hard link loses one
  name only;
* a directory on another device than the root (a nested mount) is never entered, nor (Linux)
  one on another mount of the same device (a bind mount);
* the root itself is never removed (`remove_tree` removes it afterwards, as our own folder);
* a regular file that another process holds with ``flock`` is skipped and reported; on Windows
  a file another program holds open (a sharing violation that outlasts the seam's retries) is
  skipped as "in use", and a read-only file is made writable and deleted, never "in use".

How it is fast (Linux): names come from ``os.listdir(fd)`` (no DirEntry objects) and each entry
costs one ``fstatat`` (needed: the type without trusting d_type, the byte count, the hard-link
dedup, the inode for the lock pre-filter) and one ``unlinkat``; the cyclic garbage collector is
paused during the walk; a big tree is split over forked worker processes (one per usable CPU,
at most `MAX_WORKERS`; `fs.walk` shares the top folders, each worker acting only through
descriptors inherited from the parent and its own O_NOFOLLOW opens below them). Counts,
skipped entries and hard-linked inodes come back per worker and are merged (see
`DeleteResult.bytes` for hard links, exact across workers too). A worker that dies leaves its
folders to the parent, which walks them again itself.

The same walk serves planning (``dry_run=True``: nothing is changed, every candidate is
reported), deleting and trashing (``trash=True``: `cachedoctor.trash` renames each entry into
the trash relative to the same verified folder descriptor, so trashing is as link-proof as
deleting; an entry whose filesystem has no usable trash is skipped, reason ``no trash``). On
Windows the seam's descriptors stand for paths (`fs.windows`); trashing there re-checks the
folders on the path just before the Recycle Bin takes the entry (`trash.trash_path_checked`).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from cachedoctor.fs import kinds, seam
from cachedoctor.fs.posix import flocked_inodes, mount_id
from cachedoctor.fs.seam import InUseError
from cachedoctor.fs.walk import Frame, Task, TreeWalk, usable_cpus

if TYPE_CHECKING:
    from cachedoctor.trash import Trasher

SkipReason = Literal[
    "locked", "in use", "other filesystem", "changed", "kept", "error", "no trash"
]

FILE_ATTRIBUTE_REPARSE_POINT = kinds.FILE_ATTRIBUTE_REPARSE_POINT
_IFMT, _IFDIR, _IFREG = 0o170000, 0o040000, 0o100000


class FileInfo(msgspec.Struct, frozen=True):
    """One non-directory entry found under the root (times and size from its lstat)."""

    rel: str  # relative to the root, '/'-separated
    size: int  # allocated bytes (st_blocks * 512; st_size where blocks are unknown)
    atime: float
    mtime: float
    ctime: float
    dev: int
    ino: int
    nlink: int
    is_link: bool

    @property
    def last_used(self) -> float:
        """The LRU key: access time, or modification time when that is newer (noatime mounts)."""
        return max(self.atime, self.mtime)


class Skipped(msgspec.Struct, frozen=True):
    rel: str
    reason: SkipReason
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"path": self.rel, "reason": self.reason, "detail": self.detail}


class DeleteResult(msgspec.Struct):
    root: str
    files: int = 0  # non-directory entries removed (or that would be, in a dry run)
    dirs: int = 0  # directories removed
    # allocated bytes freed (dry run: that would be): a file counts when its last name goes, so
    # a hard-linked file counts once when all its names are removed, and not at all when a
    # name stays (outside the cache, kept or skipped) — removing the others frees nothing
    bytes: int = 0
    total_bytes: int = 0  # allocated bytes of the whole tree, root folder included (like du)
    kept: int = 0  # entries left alone by `keep`/`only` globs or the selection
    skipped: list[Skipped] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    removed: list[FileInfo] = msgspec.field(default_factory=list)  # only when `collect` is set

    @property
    def partial(self) -> bool:
        return bool(self.errors)


class Rules(msgspec.Struct, frozen=True):
    """Which entries may go: `keep` globs are never deleted; with `only`, only those are.

    A pattern without '/' matches any path component (`*.lock`, `selfcheck.json`); a pattern
    with '/' matches the path relative to the root (`http/*`, `wheels/**`). A directory that
    matches `keep` is not entered; everything below a directory matching `only` is selected.
    """

    keep: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    exclude: frozenset[str] = frozenset()  # exact relative paths never touched (nested locations)

    def _match(self, rel: str, patterns: tuple[str, ...]) -> bool:
        name = rel.rsplit("/", 1)[-1]
        for pattern in patterns:
            pat = pattern.strip("/")
            if pat.endswith("/**"):
                pat = pat[:-3]
            if "/" in pat:
                if fnmatch.fnmatchcase(rel, pat):
                    return True
            elif fnmatch.fnmatchcase(name, pat):
                return True
        return False

    def kept(self, rel: str) -> bool:
        return rel in self.exclude or (bool(self.keep) and self._match(rel, self.keep))

    def in_only(self, rel: str) -> bool:
        return not self.only or self._match(rel, self.only)


Selector = Callable[[FileInfo], bool]


WORKERS = 2  # threads for the top-level folders where there is no fork (trash mode, macOS)
MAX_WORKERS = 4  # forked workers (Linux): one per usable CPU, at most this many
LOCKS_REFRESH = 0.02  # seconds a /proc/locks reading is reused (re-read per folder after that)


def _info(rel: str, st: Any, unit: int) -> FileInfo:
    return FileInfo(rel, st.st_blocks * unit, st.st_atime, st.st_mtime, st.st_ctime, st.st_dev,
                    st.st_ino, st.st_nlink, kinds.is_link(st))


def clean_tree(
    root: str,
    *,
    rules: Rules = Rules(),
    select: Selector | None = None,
    dry_run: bool = False,
    trash: bool = False,
    expect: tuple[int, int] | None = None,
    collect: bool = False,
    check_locks: bool = True,
    workers: int | None = None,
) -> DeleteResult:
    """Delete the entries below `root` (never `root` itself) that the rules and `select` allow.

    `select` (default: everything) decides per non-directory entry; directories are removed
    when they end up empty — all of them when `select` is None, otherwise only those in which
    something was deleted. `expect` is the root's (st_dev, st_ino) seen at planning time: a root
    replaced since then is refused. With `trash`, entries go to the user's trash instead
    (`cachedoctor.trash`, relative to the same verified folder descriptors). With `collect`,
    every removed (or, dry run, selected) entry is listed in `removed`.
    `workers` caps the forked worker processes (default: one per usable CPU; 1: no fork).
    """
    walk = _Deleter(root, rules, select, dry_run, trash, expect, collect, check_locks)
    walk.workers = _worker_count(workers, trash or dry_run, walk.ops)
    walk.threads = WORKERS
    return walk.run()


def remove_tree(path: str) -> None:
    """Delete the folder `path` and everything below it, never following a link: the deleter
    above (no rules, no fork, every file a fault point), then the emptied folder itself.

    A link at `path` itself is refused (ValueError): remove it with `links.remove_link`.
    Read-only folders are made writable first (a Go module cache is 0555). Missing `path` is
    fine (idempotent). Anything left (an error, another filesystem below, a file in use) raises
    OSError naming it, so a journaled step stops there and can be finished by running again."""
    ops = seam.current()
    try:
        top = ops.lstat_path(path)
    except FileNotFoundError:
        return
    if kinds.is_link(top):
        raise ValueError(f"{path} is a link; refusing to delete through it")
    if not stat.S_ISDIR(top.st_mode):
        ops.unlink_path(path)
        return
    walk = _Deleter(path, Rules(), None, False, False, None, False, False)
    walk.removing = True
    walk.workers = 1
    result = walk.run()
    problems = result.errors + [f"{walk.path_of(s.rel)}: {s.reason}"
                                + (f" ({s.detail})" if s.detail else "") for s in result.skipped]
    if problems:
        raise OSError(errno.ENOTEMPTY, f"could not remove everything below {path}: "
                      + "; ".join(problems[:3]), path)
    ops.rmdir_path(path)


def _worker_count(requested: int | None, no_fork: bool, ops: seam.Ops) -> int:
    """Forked workers to use: 0 where fork is not safe or useful (then threads, as before).

    Not for trash mode (each move fsyncs its .trashinfo: the disk is the limit, not the CPU,
    and the trash folders stay open in this process), nor for dry runs (listing
    alone gained nothing from forking on tmpfs, and sending `collect` lists back costs more than
    it saves), nor outside Linux (fork without exec is unsafe on macOS)."""
    if no_fork or not ops.can_fork:
        return 0
    if requested is not None:
        return max(1, requested)
    return max(2, min(usable_cpus(), MAX_WORKERS))


class _Deleter(TreeWalk):
    check_mounts = True

    def __init__(
        self,
        root: str,
        rules: Rules,
        select: Selector | None,
        dry_run: bool,
        trash: bool,
        expect: tuple[int, int] | None,
        collect: bool,
        check_locks: bool,
    ) -> None:
        super().__init__(root)
        self.rules = rules
        self.select = select
        self.dry_run = dry_run
        self.trash = trash
        self.collect = collect
        self.expect = expect
        self.check_locks = check_locks and self.ops.probes_locks
        self.unit = self.ops.block_unit
        self.removing = False  # remove_tree: folders made writable, every file a fault point
        self.result = DeleteResult(root=root)
        # hard-linked files removed: (dev, ino) -> [bytes, names removed, highest st_nlink seen]
        self.links: dict[tuple[int, int], list[int]] = {}
        self.locked_inodes: frozenset[int] | None = None
        self.locks_read = -LOCKS_REFRESH  # monotonic time /proc/locks was last read
        self.trasher: Trasher | None = None  # trash mode: the trash folders, shared by threads
        self.real_root = b""  # trash mode: the root's real path (for the .trashinfo Path=)

    def run(self) -> DeleteResult:
        ops = self.ops
        try:
            root_fd = ops.open_root(self.root)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (
                exc.errno == errno.ENOTDIR and kinds.is_link(ops.lstat_path(self.root))
            ):  # O_DIRECTORY|O_NOFOLLOW on a link to a folder: ENOTDIR on Linux
                self.result.errors.append(f"{self.root}: is a link; refusing to clean through it")
            elif exc.errno == errno.ENOENT:
                return self.result  # nothing to clean
            else:
                self.result.errors.append(f"{self.root}: {exc.strerror}")
            return self.result
        try:
            st = ops.fstat(root_fd)
            if self.expect is not None and (st.st_dev, st.st_ino) != self.expect:
                self.result.errors.append(
                    f"{self.root}: the folder was replaced since it was planned")
                return self.result
            self.result.total_bytes += st.st_blocks * self.unit  # measured like du / scan
            if self.trash and not self.dry_run and not ops.trash_by_path:
                from cachedoctor.trash import Trasher, fd_path, trash_folders_at

                self.trasher = Trasher()
                self.real_root = fd_path(root_fd) or os.fsencode(os.path.realpath(self.root))
                own = trash_folders_at(root_fd)  # a cache that is a mount holds that mount's trash
                if own:
                    self.rules = msgspec.structs.replace(self.rules, exclude=self.rules.exclude | own)
            self._walk(self._open_root(root_fd, st))
            self._count_links()
        finally:
            ops.close(root_fd)
            if self.trasher is not None:
                self.trasher.close()
        return self.result

    def _count_links(self) -> None:
        """Hard-linked files seen with st_nlink > 1: removing a name with nlink == 1 already
        counted it; otherwise it is free (and counted once) only if as many of its names were
        removed as it had (a dry run sees the same nlink for each name, and two workers removing
        the last two names at once both see 2: both cases end here)."""
        for size, removed, most in self.links.values():
            if removed >= most:
                self.result.bytes += size

    # ------------------------------------------------------------------ the engine's hooks

    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        if self.removing:
            self.ops.make_writable(frame.fd, frame.st)
        if parent is None:
            frame.selected_all = not self.rules.only
        else:
            self.result.total_bytes += listed.st_blocks * self.unit
            frame.selected_all = parent.selected_all or (
                bool(self.rules.only) and self.rules.in_only(frame.rel))
        if self.check_locks:
            now = time.monotonic()
            if now - self.locks_read >= LOCKS_REFRESH:
                self.locked_inodes = self.ops.flocked_inodes()
                self.locks_read = now
        frame.names = self._list(frame)

    def _error(self, rel: str, exc: OSError) -> None:
        self.result.errors.append(f"{self.path_of(rel)}: {exc.strerror}")

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        if reason == "too deep":  # part of the tree was not reached: the result is partial
            self.result.errors.append(f"{self.path_of(rel)}: {detail}")
            return
        if reason == "changed":
            detail = "replaced while cleaning; not entered"
        self.result.skipped.append(Skipped(rel, reason, detail))  # type: ignore[arg-type]

    def _unopened(self, parent: Frame) -> None:
        parent.remaining += 1

    def _done(self, parent: Frame, child: Frame) -> None:
        """Remove a folder the walk emptied (all of them when no selection is given)."""
        removable = (
            child.remaining == 0
            and child.selected_all  # with `only`, a folder goes only when it matched
            and (self.select is None or child.deleted > 0)  # a selection removes what it emptied
        )
        if not removable:
            parent.remaining += 1
            return
        if not self.dry_run:
            try:
                self.ops.rmdir(child.name, dir_fd=parent.fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY):
                    self.result.errors.append(f"{self.path_of(child.rel)}: {exc.strerror}")
                parent.remaining += 1
                return
        parent.deleted += 1
        self.result.dirs += 1

    def _task_finished(self, task: Task, removed: bool | None) -> None:
        if removed is None:  # its worker died: walk it here (what it removed is gone)
            try:
                self.ops.lstat(task.name, dir_fd=task.parent.fd)
            except FileNotFoundError:
                task.parent.deleted += 1
                return
            except OSError:
                pass
            self._walk_task(task)
        elif removed:
            task.parent.deleted += 1
        else:
            task.parent.remaining += 1

    def _state(self) -> Any:
        return self.result, self.links

    def _fresh(self) -> None:
        self.result = DeleteResult(root=self.root)
        self.links = {}  # only what this part removed: the parent adds it to its own

    def _absorb(self, state: Any) -> None:
        other, links = state
        for key, (size, removed, most) in links.items():
            mine = self.links.get(key)
            if mine is None:
                self.links[key] = [size, removed, most]
            else:
                mine[1] += removed
                mine[2] = max(mine[2], most)
        r = self.result
        r.files += other.files
        r.dirs += other.dirs
        r.bytes += other.bytes
        r.total_bytes += other.total_bytes
        r.kept += other.kept
        r.skipped.extend(other.skipped)
        r.errors.extend(other.errors)
        r.removed.extend(other.removed)

    # ------------------------------------------------------------------ the hot loop

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        """The entries of one folder in a tight loop, from where it stopped. A subfolder is
        opened and pushed (returns True) or, with `defer`, listed there and left alone."""
        result = self.result
        rules = self.rules
        has_keep = bool(rules.keep or rules.exclude)
        detail = self.select is not None or self.collect
        select = self.select
        # Windows: a listing carries no identity; a selection compares the planned inode
        full_stat = select is not None and not self.ops.listing_identity
        check_locks = self.check_locks
        locked = self.locked_inodes
        fast_unlink = not self.dry_run and not self.trash
        point = _fault_point() if self.removing else None
        links = self.links
        unit = self.unit
        ops = self.ops
        lstat, unlink = ops.lstat, ops.unlink
        entries = frame.names
        count = len(entries)
        fd = frame.fd
        prefix = f"{frame.rel}/" if frame.rel else ""
        selected_all = frame.selected_all
        # counters in locals, written back on the way out (also when a subfolder is pushed)
        i = frame.index
        files = freed = total = kept = deleted = remaining = 0
        try:
            while i < count:
                name = entries[i]
                i += 1
                try:
                    st = lstat(name, dir_fd=fd)
                except OSError as exc:
                    if exc.errno != errno.ENOENT:
                        result.errors.append(f"{self.path_of(prefix + name)}: {exc.strerror}")
                        remaining += 1
                    continue
                if has_keep and rules.kept(prefix + name):
                    kept += 1
                    remaining += 1
                    continue
                mode = st.st_mode
                if mode & _IFMT == _IFDIR:
                    if defer is not None:
                        defer.append(Task(frame, name, prefix + name, st))
                        continue
                    child = self._open(frame, name, prefix + name, st)
                    if child is not None:
                        frames.append(child)
                        return True
                    remaining += 1
                    continue
                size = st.st_blocks * unit
                total += size
                if not (selected_all or rules.in_only(prefix + name)):
                    kept += 1
                    remaining += 1
                    continue
                if full_stat:
                    try:
                        st = ops.lstat_full(name, dir_fd=fd)
                    except OSError:
                        remaining += 1
                        continue
                info = _info(prefix + name, st, unit) if detail else None
                if select is not None and info is not None and not select(info):
                    kept += 1
                    remaining += 1
                    continue
                if (
                    check_locks
                    and mode & _IFMT == _IFREG
                    and (locked is None or st.st_ino in locked)
                    and ops.is_locked(fd, name)
                ):
                    result.skipped.append(
                        Skipped(prefix + name, "locked", "held with flock by another process")
                    )
                    remaining += 1
                    continue
                if fast_unlink:
                    try:
                        unlink(name, dir_fd=fd)
                    except FileNotFoundError:
                        remaining += 1
                        continue
                    except InUseError:
                        result.skipped.append(
                            Skipped(prefix + name, "in use", "open in another program"))
                        remaining += 1
                        continue
                    except OSError as exc:
                        result.errors.append(f"{self.path_of(prefix + name)}: {exc.strerror}")
                        remaining += 1
                        continue
                    if point is not None:
                        point("remove-file")
                elif not self.dry_run and not self._remove_file(frames, frame, name,
                                                                prefix + name, st):
                    remaining += 1
                    continue
                deleted += 1
                files += 1
                nlink = st.st_nlink
                if nlink == 1:  # its last name: the space is free now (the usual case)
                    freed += size
                else:  # decided when the walk is over (`_count_links`)
                    key = (st.st_dev, st.st_ino)
                    seen = links.get(key)
                    if seen is None:
                        links[key] = [size, 1, nlink]
                    else:
                        seen[1] += 1
                        if nlink > seen[2]:
                            seen[2] = nlink
                if info is not None and self.collect:
                    result.removed.append(info)
            return False
        finally:
            frame.index = i
            frame.deleted += deleted
            frame.remaining += remaining
            result.files += files
            result.bytes += freed
            result.total_bytes += total
            result.kept += kept

    def _remove_file(self, frames: list[Frame], frame: Frame, name: str, rel: str,
                     st: Any) -> bool:
        try:
            if self.trash:
                return self._trash(frames, frame, name, rel, st)
            self.ops.unlink(name, dir_fd=frame.fd)
            return True
        except FileNotFoundError:
            return False
        except InUseError:
            self.result.skipped.append(Skipped(rel, "in use", "open in another program"))
            return False
        except OSError as exc:
            self.result.errors.append(f"{self.path_of(rel)}: {exc.strerror}")
            return False

    def _trash(self, frames: list[Frame], frame: Frame, name: str, rel: str, st: Any) -> bool:
        """Move the entry to the trash; True when it went. POSIX: renamed into the trash
        relative to its folder's descriptor (never a path: see `cachedoctor.trash`). Windows:
        the Recycle Bin takes a path, so every folder on it is checked again right before."""
        from cachedoctor.trash import EntryChanged, TrashFailed, TrashRefused, trash_path_checked

        try:
            if self.ops.trash_by_path:
                chain = [(self.path_of(f.rel), (f.st.st_dev, f.st.st_ino))
                         for f in frames if f.depth <= frame.depth]
                listed = self.ops.lstat_full(name, dir_fd=frame.fd)
                trash_path_checked(chain, self.path_of(rel), (listed.st_dev, listed.st_ino),
                                   send=self.ops.trash_path)
                return True
            assert self.trasher is not None
            self.trasher.trash(
                frame.fd, name, st, self.real_root + b"/" + os.fsencode(rel), dev=self.root_dev
            )
        except TrashRefused as exc:
            self.result.skipped.append(Skipped(rel, "no trash", str(exc)))
            return False
        except EntryChanged as exc:
            self.result.skipped.append(Skipped(rel, "changed", str(exc)))
            return False
        except TrashFailed as exc:
            self.result.errors.append(f"{self.path_of(rel)}: {exc}")
            return False
        return True


_PosixWalk = _Deleter  # the name the deleter had before it ran on every OS's seam
_mount_id = mount_id  # for cachedoctor.trash, which finds a mount's top with it
_flocked_inodes = flocked_inodes


def _fault_point() -> Callable[[str], None]:
    from cachedoctor.relocate import faults

    return faults.point


def is_reparse_point(st: Any) -> bool:
    """A Windows junction or symlink (or a POSIX symlink): removed as a link, never entered."""
    return kinds.is_link(st)


def walk_files(root: str, *, rules: Rules = Rules()) -> DeleteResult:
    """Read-only listing with the same rules: every non-directory entry that could go (`removed`)."""
    return clean_tree(root, rules=rules, dry_run=True, collect=True, check_locks=False)


__all__: Sequence[str] = (
    "DeleteResult",
    "FileInfo",
    "Rules",
    "Skipped",
    "clean_tree",
    "is_reparse_point",
    "remove_tree",
    "walk_files",
)
