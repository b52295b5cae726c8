"""The verifier: is `dst` a faithful copy of `src` — as far as the filesystems can hold it?

Both trees are walked together, relative to open folder descriptors (`fs.walk`): names, entry
types (links by kind), sizes, mtimes, link targets and hard-link groups; with `content` also
every file's BLAKE2b digest. What a filesystem cannot keep is not compared (`VerifyOptions`,
from `fs.probe`): modes where DrvFs, NTFS through ntfs-3g or exFAT show 0777 whatever was set,
hard-link groups where the copy had to take each name as a file, mtimes only to the coarser of
the two filesystems' measured steps (exFAT through FUSE keeps whole seconds, NTFS 100 ns).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from typing import Any

import msgspec

from cachedoctor.fs import kinds, seam
from cachedoctor.fs.walk import Frame, Task, TreeWalk, join_rel

_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 20


class VerifyOptions(msgspec.Struct, frozen=True):
    modes: bool = True
    hardlinks: bool = True
    mtime_tolerance_ns: int = 0
    every_inode: bool = False  # a side's st_nlink may be stale (FUSE): compare every file


class _Enough(Exception):
    """The problem limit was reached: stop walking."""


def verify_tree(src: str, dst: str, *, content: bool = False, mtime_tolerance_ns: int = 0,
                limit: int = 20, options: VerifyOptions | None = None) -> list[str]:
    """Differences between the trees (empty when `dst` is a faithful copy of `src`)."""
    ops = seam.current()
    options = options or VerifyOptions(modes=ops.modes_meaningful)
    if mtime_tolerance_ns > options.mtime_tolerance_ns:
        options = VerifyOptions(options.modes, options.hardlinks, mtime_tolerance_ns,
                                options.every_inode)
    walk = _Verify(src, dst, content, options, limit)
    with contextlib.suppress(_Enough):
        walk.run()
    return walk.problems


class _Verify(TreeWalk):
    same_device = False
    fds_per_level = 2  # the original folder and its copy

    def __init__(self, src: str, dst: str, content: bool, options: VerifyOptions,
                 limit: int) -> None:
        super().__init__(src)
        self.dst = dst
        self.content = content
        self.options = options
        self.limit = limit
        self.problems: list[str] = []
        self.groups: dict[tuple[int, int], tuple[int, int]] = {}
        self.reverse: dict[tuple[int, int], tuple[int, int]] = {}

    def problem(self, text: str) -> None:
        self.problems.append(text)
        if len(self.problems) >= self.limit:
            raise _Enough

    def run(self) -> None:
        ops = self.ops
        try:
            s_top, d_top = ops.lstat_path(self.root), ops.lstat_path(self.dst)
        except OSError as exc:
            self.problems.append(f"cannot read {exc.filename}: {exc.strerror}")
            return
        if self._differs(s_top, d_top, None, None, None) is not None:
            self.problems.append(f"{self.root}: top folder differs")
        try:
            src_fd = ops.open_root(self.root)
            try:
                dst_fd = ops.open_root(self.dst)
            except OSError:
                ops.close(src_fd)
                raise
        except OSError as exc:
            self.problems.append(f"cannot list {exc.filename}: {exc.strerror}")
            return
        try:
            root = Frame(src_fd, "", "", [], owned=False, st=ops.fstat(src_fd))
            self.root_dev = root.st.st_dev
            root.data = (dst_fd, set())
            self._compare_names(root)
            self._loop([root], base=0)
        finally:
            ops.close(src_fd)
            ops.close(dst_fd)

    def _compare_names(self, frame: Frame) -> None:
        ops = self.ops
        dst_fd = frame.data[0]
        try:
            names = ops.listdir(frame.fd)
            theirs = set(ops.listdir(dst_fd))
        except OSError as exc:
            self.problem(f"cannot list {self.path_of(frame.rel)}: {exc.strerror}")
            return
        frame.data = (dst_fd, theirs)
        mine = set(names)
        for name in sorted(mine - theirs):
            try:
                if stat.S_ISSOCK(ops.lstat(name, dir_fd=frame.fd).st_mode):
                    continue  # sockets are not copied
            except OSError:
                continue
            self.problem(f"missing in the copy: {self.path_of(join_rel(frame.rel, name))}")
        for name in sorted(theirs - mine):
            self.problem("not in the original: "
                         + os.path.join(self.dst, join_rel(frame.rel, name)))
        frame.names = [n for n in names if n in theirs]

    # engine hooks
    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        assert parent is not None
        try:
            frame.data = (self.ops.open_dir(frame.name, parent.data[0]), set())
        except OSError as exc:
            frame.names = []
            frame.data = None
            self.problem(f"cannot list {os.path.join(self.dst, frame.rel)}: {exc.strerror}")
            return
        self._compare_names(frame)

    def _done(self, parent: Frame, child: Frame) -> None:
        if child.data is not None:
            self.ops.close(child.data[0])

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        self.problem(f"{self.path_of(rel)}: {detail}")

    def _error(self, rel: str, exc: OSError) -> None:
        self.problem(f"cannot list {self.path_of(rel)}: {exc.strerror}")

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        if frame.data is None:
            return False
        ops = self.ops
        fd, dfd = frame.fd, frame.data[0]
        names = frame.names
        while frame.index < len(names):
            name = names[frame.index]
            frame.index += 1
            rel = join_rel(frame.rel, name)
            try:
                s_st = ops.lstat_full(name, dir_fd=fd)
                d_st = ops.lstat_full(name, dir_fd=dfd)
            except OSError as exc:
                self.problem(f"cannot stat {exc.filename or self.path_of(rel)}: {exc.strerror}")
                continue
            why = self._differs(s_st, d_st, fd, dfd, name)
            if (why is None and self.options.hardlinks and stat.S_ISREG(s_st.st_mode)
                    and (s_st.st_nlink > 1 or d_st.st_nlink > 1 or self.options.every_inode)):
                s_key, d_key = (s_st.st_dev, s_st.st_ino), (d_st.st_dev, d_st.st_ino)
                if (self.groups.setdefault(s_key, d_key) != d_key
                        or self.reverse.setdefault(d_key, s_key) != s_key):
                    why = "hard-link group differs"
            if why is not None:
                self.problem(f"{self.path_of(rel)}: {why}")
                continue
            if kinds.is_real_dir(s_st):
                child = self._open(frame, name, rel, s_st)
                if child is not None:
                    frames.append(child)
                    return True
        return False

    def _differs(self, s: Any, d: Any, fd: Any, dfd: Any, name: str | None) -> str | None:
        s_type, d_type = kinds.file_type(s), kinds.file_type(d)
        if s_type != d_type:
            return f"type differs ({s_type} / {d_type})"
        if self.options.modes and not kinds.is_link(s) and \
                stat.S_IMODE(s.st_mode) != stat.S_IMODE(d.st_mode):
            return f"mode {oct(stat.S_IMODE(s.st_mode))} != {oct(stat.S_IMODE(d.st_mode))}"
        ops = self.ops
        if kinds.is_link(s):
            if name is not None and ops.readlink(name, dir_fd=fd) != ops.readlink(name, dir_fd=dfd):
                return "link target differs"
            return None
        if stat.S_ISREG(s.st_mode) and s.st_size != d.st_size:
            return f"size {s.st_size} != {d.st_size}"
        if (stat.S_ISREG(s.st_mode) or stat.S_ISDIR(s.st_mode)) and \
                abs(s.st_mtime_ns - d.st_mtime_ns) > self.options.mtime_tolerance_ns:
            return "modification time differs"
        if (self.content and name is not None and stat.S_ISREG(s.st_mode)
                and not _same_content_at(fd, dfd, name, s.st_size)):
            return "content differs"
        return None


def _same_content_at(fd: Any, dfd: Any, name: str, size: int) -> bool:
    ops = seam.current()
    flags = os.O_RDONLY | _O_BINARY | _O_NOFOLLOW
    a = ops.open_file(name, flags, dir_fd=fd)
    try:
        b = ops.open_file(name, flags, dir_fd=dfd)
        try:
            return same_content_fds(a, b, size)
        finally:
            os.close(b)
    finally:
        os.close(a)


_hash_pool: Any = None


def same_content_fds(a: int, b: int, size: int) -> bool:
    """Compare two open files' BLAKE2b digests; big files are hashed on two threads at once
    (hashlib releases the GIL), which halves the time on a machine with two or more cores."""
    global _hash_pool
    if size < (4 << 20):
        return digest_fd(a) == digest_fd(b)
    if _hash_pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _hash_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cachedoctor-hash")
    first = _hash_pool.submit(digest_fd, a)
    return bool(digest_fd(b) == first.result())


def same_content(a: str, b: str, size: int) -> bool:
    """`same_content_fds` for two paths."""
    flags = os.O_RDONLY | _O_BINARY | _O_NOFOLLOW
    fa = os.open(a, flags)
    try:
        fb = os.open(b, flags)
        try:
            return same_content_fds(fa, fb, size)
        finally:
            os.close(fb)
    finally:
        os.close(fa)


def digest_fd(fd: int) -> bytes:
    h = hashlib.blake2b(digest_size=32)
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return h.digest()
        h.update(chunk)


def file_digest(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_NOFOLLOW)
    try:
        return digest_fd(fd)
    finally:
        os.close(fd)
