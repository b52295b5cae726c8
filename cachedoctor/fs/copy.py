"""The one copier: a folder tree to a new path, as faithfully as the destination can hold it.

`copy_tree` keeps what caches depend on: modes, timestamps (files at once, folders after they
are filled), ownership when running as root, links *as links* (relative symlinks stay relative;
a Windows junction stays a junction with its absolute target and its own times), hard links
within the tree (one copy per (device, inode), the others linked to it), holes of sparse files,
FIFOs and extended attributes where the target supports them. What the destination cannot
hold is switched off through `CopyOptions` (from `fs.probe`): on exFAT each hard-linked name
becomes a file of its own, on DrvFs no mode is set. The source is read and the copy written
relative to open folder descriptors (`fs.walk`), the data through the seam's fastest path
(Linux: `copy_file_range`, `sendfile`; macOS: `fclonefileat`, `fcopyfile`; then read/write).

`make_durable` flushes a freshly copied tree before anything destructive happens to the
original: `syncfs(2)` of the copy's filesystem on Linux, per-file flushes plus ``F_FULLFSYNC``
on macOS, per-file `FlushFileBuffers` on Windows (the seam decides, see `fs.posix`,
`fs.windows`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from typing import Any

import msgspec

from cachedoctor.fs import kinds, seam
from cachedoctor.fs.walk import Frame, Task, TreeWalk, join_rel

ProgressCallback = Callable[[int, int], None]  # (entries copied, bytes copied)

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
_CHUNK = 1 << 20
_ADVISE_MIN = 1 << 20  # files this big get read-ahead / cache-dropping advice (one syscall each)
_FADV_SEQUENTIAL = getattr(os, "POSIX_FADV_SEQUENTIAL", None)
_FADV_DONTNEED = getattr(os, "POSIX_FADV_DONTNEED", None)
_SEEK_DATA = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE = getattr(os, "SEEK_HOLE", None)


class CopyOptions(msgspec.Struct, frozen=True):
    """What the destination can hold (`fs.probe.Capabilities.copy_options`); all on by default."""

    modes: bool = True
    owner: bool = _IS_ROOT  # chown only as root, and only where ownership can travel
    hardlinks: bool = True
    xattrs: bool = True
    sparse: bool = True
    every_inode: bool = False  # the source's st_nlink may be stale (FUSE): group by inode


class CopyResult(msgspec.Struct):
    entries: int = 0
    bytes: int = 0
    skipped: list[str] = msgspec.field(default_factory=list)
    xattr_failures: int = 0


def copy_tree(src: str, dst: str, *, progress: ProgressCallback | None = None,
              durable: bool = False, drop_source_cache: bool = False,
              options: CopyOptions | None = None) -> CopyResult:
    """Copy the folder `src` to the new path `dst` (which must not exist).

    With `durable`, files are flushed one by one where `make_durable` cannot flush the whole
    filesystem afterwards (Windows, and macOS before its F_FULLFSYNC); call `make_durable(dst)`
    when this returns either way. With `drop_source_cache` (for a source that is deleted after
    the copy and not read again), the page cache of each big source file is released as soon as
    it is copied (POSIX_FADV_DONTNEED; the data on disk is untouched): the move then needs
    memory for one copy instead of two (see benchmarks/results/move.md).
    Raises OSError on the first error (ENOSPC included); the caller removes the partial copy.
    """
    walk = _Copy(src, dst, options or CopyOptions(), progress, durable, drop_source_cache)
    walk.run()
    return walk.result


class _Copy(TreeWalk):
    same_device = False  # whatever the survey let through is copied as it is
    fds_per_level = 2  # the source folder and its copy

    def __init__(self, src: str, dst: str, options: CopyOptions,
                 progress: ProgressCallback | None, durable: bool, drop: bool) -> None:
        super().__init__(src)
        self.dst = dst
        self.options = options
        self.progress = progress
        self.durable = durable
        self.drop = drop and _FADV_DONTNEED is not None
        self.result = CopyResult()
        self.first_copy: dict[tuple[int, int], str] = {}
        self.dst_dev: int | None = None
        from cachedoctor.relocate import faults

        self.point: Callable[[str], None] = faults.point

    def run(self) -> None:
        ops = self.ops
        top = ops.lstat_path(self.root)
        if not kinds.is_real_dir(top):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder (or a link)", self.root)
        parent = ops.open_root(os.path.dirname(self.dst) or ".")
        try:
            name = os.path.basename(self.dst)
            ops.mkdir(name, 0o700, dir_fd=parent)
            dst_fd = ops.open_dir(name, parent)
        finally:
            ops.close(parent)
        try:
            self.dst_dev = ops.fstat(dst_fd).st_dev
            root_fd = ops.open_root(self.root)
            try:
                root = self._open_root(root_fd, ops.fstat(root_fd))
                root.data = dst_fd
                self.result.xattr_failures += self._xattrs(root_fd, dst_fd)
                self._walk(root)
            finally:
                ops.close(root_fd)
            ops.finish_dir(dst_fd, top, modes=self.options.modes, owner=self.options.owner)
        finally:
            ops.close(dst_fd)
        if self.progress is not None:
            self.progress(self.result.entries, self.result.bytes)

    # the engine's hooks: anything the walk could not do fails the copy
    def _skip(self, rel: str, reason: str, detail: str) -> None:
        raise OSError(errno.ELOOP if reason == "too deep" else errno.ESTALE,
                      f"{detail} ({reason})", self.path_of(rel))

    def _error(self, rel: str, exc: OSError) -> None:
        raise exc

    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        frame.names = self.ops.listdir(frame.fd)
        if parent is None:
            return
        ops = self.ops
        ops.mkdir(frame.name, 0o700, dir_fd=parent.data)
        frame.data = ops.open_dir(frame.name, parent.data)
        frame.st = listed  # the times before this walk read the folder
        self.result.xattr_failures += self._xattrs(frame.fd, frame.data)
        self.result.entries += 1
        self.point("copy-file")

    def _done(self, parent: Frame, child: Frame) -> None:
        """Filling a folder changes its mtime: its times are set once it is complete."""
        try:
            self.ops.finish_dir(child.data, child.st, modes=self.options.modes,
                                owner=self.options.owner)
        finally:
            self.ops.close(child.data)

    def _xattrs(self, src_fd: int, dst_fd: int) -> int:
        return self.ops.copy_xattrs(src_fd, dst_fd) if self.options.xattrs else 0

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        ops, result, options = self.ops, self.result, self.options
        fd, dfd = frame.fd, frame.data
        names = frame.names
        while frame.index < len(names):
            name = names[frame.index]
            frame.index += 1
            rel = join_rel(frame.rel, name)
            st = ops.lstat(name, dir_fd=fd)
            mode = st.st_mode
            if kinds.is_real_dir(st):
                child = self._open(frame, name, rel, st)
                assert child is not None  # a failure raised in _skip/_error
                frames.append(child)
                return True
            if kinds.is_link(st):
                ops.copy_link(st, ops.readlink(name, dir_fd=fd), name, dir_fd=dfd,
                              owner=options.owner)
            elif stat.S_ISREG(mode):
                if not ops.listing_identity:
                    st = ops.lstat_full(name, dir_fd=fd)  # Windows: the listing has no nlink
                if options.hardlinks and (st.st_nlink > 1 or options.every_inode):
                    key = (st.st_dev, st.st_ino)
                    first = self.first_copy.get(key)
                    if first is not None:
                        ops.hardlink(first, name, dir_fd=dfd)
                        result.entries += 1
                        self.point("copy-file")
                        continue
                    self.first_copy[key] = os.path.join(self.dst, rel)
                result.xattr_failures += self._copy_file(fd, dfd, name, st)
                result.bytes += st.st_size
            elif not ops.make_special(st, name, dir_fd=dfd, modes=options.modes):
                result.skipped.append(self.path_of(rel))  # a socket: not data
                continue
            result.entries += 1
            self.point("copy-file")
            if self.progress is not None and result.entries % 256 == 0:
                self.progress(result.entries, result.bytes)
        return False

    def _copy_file(self, fd: int, dfd: int, name: str, st: Any) -> int:
        ops, options = self.ops, self.options
        big = st.st_size >= _ADVISE_MIN
        fin = ops.open_file(name, os.O_RDONLY | _O_NOFOLLOW, dir_fd=fd)
        try:
            if big and _FADV_SEQUENTIAL is not None:
                with contextlib.suppress(OSError):  # only a read-ahead hint
                    os.posix_fadvise(fin, 0, 0, _FADV_SEQUENTIAL)
            if st.st_dev == self.dst_dev and ops.clone_file(fin, name, dir_fd=dfd):
                fout = ops.open_file(name, os.O_WRONLY | _O_NOFOLLOW, dir_fd=dfd)
            else:
                fout = ops.open_file(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
                try:
                    if not (options.sparse and _is_sparse(st, ops.block_unit)
                            and _copy_sparse(fin, fout)):
                        ops.copy_data(fin, fout, st.st_size)
                except BaseException:
                    os.close(fout)
                    raise
            try:
                if big and self.drop:
                    with contextlib.suppress(OSError):  # only a cache hint; the file is unchanged
                        os.posix_fadvise(fin, 0, 0, _FADV_DONTNEED)  # type: ignore[arg-type]
                failures = self._xattrs(fin, fout)
                if self.durable:
                    ops.flush_file(fout)
            except BaseException:
                os.close(fout)
                raise
            ops.finish_file(fout, name, dfd, st, modes=options.modes, owner=options.owner)
        finally:
            os.close(fin)
        return failures


def _is_sparse(st: Any, unit: int) -> bool:
    """A file with fewer allocated blocks than its size: its holes are kept in the copy, so it
    takes as much room there as the free-space check counted (allocated bytes)."""
    return unit > 1 and _SEEK_DATA is not None and st.st_blocks * unit < st.st_size


def _copy_sparse(fin: int, fout: int) -> bool:
    """Copy only the data extents of `fin` (SEEK_DATA/SEEK_HOLE), leaving holes as holes. False
    (nothing written) where the filesystem cannot report holes."""
    from cachedoctor.fs.posix import UNSUPPORTED

    assert _SEEK_DATA is not None and _SEEK_HOLE is not None
    pos = 0
    while True:
        try:
            data = os.lseek(fin, pos, _SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                break
            if pos == 0 and exc.errno in UNSUPPORTED:
                return False
            raise
        hole = os.lseek(fin, data, _SEEK_HOLE)
        while data < hole:
            chunk = os.pread(fin, min(_CHUNK, hole - data), data)
            if not chunk:
                break
            view = memoryview(chunk)
            offset = data
            while view:
                written = os.pwrite(fout, view, offset)
                view, offset = view[written:], offset + written
            data += len(chunk)
        pos = hole
    os.ftruncate(fout, os.lseek(fin, 0, os.SEEK_END))  # the trailing hole (and any growth)
    return True


def make_durable(path: str) -> str:
    """Flush the tree just written at `path` (data, inodes, folder entries) to stable storage.

    Returns how: "syncfs" (Linux: one flush of the filesystem holding `path`, which also
    reports write-back errors since Linux 5.8), "fullfsync" (macOS), "per-file" (Windows:
    `copy_tree(durable=True)` already flushed every file as it was written) or "sync"
    (elsewhere). Raises OSError when the kernel reports the data could not be written.
    """
    return seam.current().make_durable(path)
