"""Tree copy, verification and removal for relocation.

`copy_tree` copies a folder tree to a new path preserving what caches depend on: modes,
timestamps (files at once, folders after they are filled), ownership when running as root,
symlinks *as symlinks* (relative ones stay relative), hard links within the tree (one copy per
(device, inode), the others linked to it), FIFOs and extended attributes where the target
supports them. File data goes through the kernel's fast paths (`copy_file_range`, then
`sendfile`, then a plain read/write loop).

`make_durable` flushes a freshly copied tree to stable storage before anything destructive
happens to the original: `syncfs(2)` of the copy's filesystem on Linux (that filesystem only,
not every dirty page of every drive as `sync(2)` would), per-file `FlushFileBuffers` on Windows
(done by `copy_tree(durable=True)` as each file is written), `sync(2)` elsewhere.

`verify_tree` compares two trees: entry names, types, modes, sizes, mtimes, symlink targets and
hard-link groups; with `content=True` also every file's BLAKE2b digest.

`remove_tree` deletes a tree without ever following a symlink or junction.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cachedoctor.relocate import faults

ProgressCallback = Callable[[int, int], None]  # (entries copied, bytes copied)

_WINDOWS = os.name == "nt"
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
_HAS_XATTR = hasattr(os, "listxattr")
_FALLBACK_ERRNOS = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM,
                    getattr(errno, "ENOTSUP", errno.EOPNOTSUPP), errno.EBADF}
_CHUNK = 1 << 20
_ADVISE_MIN = 1 << 20  # files this big get read-ahead / cache-dropping advice (one syscall each)
_FADV_SEQUENTIAL = getattr(os, "POSIX_FADV_SEQUENTIAL", None)
_FADV_DONTNEED = getattr(os, "POSIX_FADV_DONTNEED", None)
# Where a filesystem cannot be flushed as a whole, each copied file is flushed before it is
# closed (Windows: os.fsync is FlushFileBuffers; directories cannot be flushed there).
_FLUSH_EACH_FILE = _WINDOWS


@dataclass
class Survey:
    """What a tree holds (hard links once), and what could not be read."""

    files: int = 0
    dirs: int = 0
    allocated_bytes: int = 0
    apparent_bytes: int = 0
    unreadable: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # sockets: not copyable, not data


def survey(root: str) -> Survey:
    """Walk `root` (never following links) counting sizes and checking every entry is readable."""
    result = Survey()
    seen: set[tuple[int, int]] = set()
    try:
        top = os.lstat(root)
    except OSError as exc:
        result.unreadable.append(f"{root}: {exc.strerror}")
        return result
    _count(result, top, seen)
    stack = [root]
    while stack:
        current = stack.pop()
        if not os.access(current, os.R_OK | os.X_OK):
            result.unreadable.append(f"{current}: permission denied")
            continue
        try:
            with os.scandir(current) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    _count(result, st, seen)
                    if stat.S_ISDIR(st.st_mode) and not _is_junction(entry):
                        stack.append(entry.path)
                    elif stat.S_ISREG(st.st_mode) and not os.access(entry.path, os.R_OK):
                        result.unreadable.append(f"{entry.path}: permission denied")
                    elif stat.S_ISSOCK(st.st_mode):
                        result.skipped.append(entry.path)
        except OSError as exc:
            result.unreadable.append(f"{current}: {exc.strerror}")
    return result


def _count(result: Survey, st: os.stat_result, seen: set[tuple[int, int]]) -> None:
    if stat.S_ISDIR(st.st_mode):
        result.dirs += 1
    else:
        if st.st_nlink > 1:
            key = (st.st_dev, st.st_ino)
            if key in seen:
                return
            seen.add(key)
        result.files += 1
    result.apparent_bytes += st.st_size
    result.allocated_bytes += getattr(st, "st_blocks", 0) * 512 if hasattr(st, "st_blocks") else st.st_size


def _is_junction(entry: os.DirEntry[str]) -> bool:
    check = getattr(entry, "is_junction", None)
    return bool(check()) if check is not None else False


@dataclass
class CopyResult:
    entries: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)
    xattr_failures: int = 0


def copy_tree(src: str, dst: str, *, progress: ProgressCallback | None = None,
              durable: bool = False, drop_source_cache: bool = False) -> CopyResult:
    """Copy the folder `src` to the new path `dst` (which must not exist).

    With `durable`, files are flushed one by one where `make_durable` cannot flush the whole
    filesystem afterwards (Windows); call `make_durable(dst)` when this returns either way.
    With `drop_source_cache` (for a source that is deleted after the copy and not read again),
    the page cache of each big source file is released as soon as it is copied
    (POSIX_FADV_DONTNEED; the data on disk is untouched): the move then needs memory for one
    copy instead of two, and the next file's copy reuses the pages just released instead of
    claiming fresh memory (which in a VM that hands free memory back to the hypervisor costs
    more than the copy itself; see benchmarks/results/move.md).
    Raises OSError on the first error (ENOSPC included); the caller removes the partial copy.
    """
    flush = durable and _FLUSH_EACH_FILE
    drop = drop_source_cache and _FADV_DONTNEED is not None
    result = CopyResult()
    top = os.lstat(src)
    os.mkdir(dst, 0o700)
    folders: list[tuple[str, str, os.stat_result]] = [(src, dst, top)]
    first_copy: dict[tuple[int, int], str] = {}
    stack = [(src, dst)]
    while stack:
        s_dir, d_dir = stack.pop()
        with os.scandir(s_dir) as it:
            entries = list(it)
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            target = os.path.join(d_dir, entry.name)
            mode = st.st_mode
            if stat.S_ISDIR(mode) and not _is_junction(entry):
                os.mkdir(target, 0o700)
                folders.append((entry.path, target, st))
                stack.append((entry.path, target))
            elif stat.S_ISLNK(mode) or _is_junction(entry):
                _copy_symlink(entry.path, target, st, junction=_is_junction(entry))
            elif stat.S_ISREG(mode):
                if st.st_nlink > 1:
                    key = (st.st_dev, st.st_ino)
                    first = first_copy.get(key)
                    if first is not None:
                        os.link(first, target)
                        result.entries += 1
                        faults.point("copy-file")
                        continue
                    first_copy[key] = target
                result.xattr_failures += _copy_file(entry.path, target, st, flush=flush, drop=drop)
                result.bytes += st.st_size
            elif stat.S_ISFIFO(mode):
                os.mkfifo(target, 0o600)
                _set_meta_path(target, st)
            elif (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and _IS_ROOT:
                os.mknod(target, stat.S_IFMT(mode) | 0o600, st.st_rdev)
                _set_meta_path(target, st)
            else:
                result.skipped.append(entry.path)
                continue
            result.entries += 1
            faults.point("copy-file")
            if progress is not None and result.entries % 256 == 0:
                progress(result.entries, result.bytes)
    for s_path, d_path, st in reversed(folders):  # deepest first: filling a folder changes its mtime
        result.xattr_failures += _copy_xattrs_path(s_path, d_path)
        _set_meta_path(d_path, st)
    if progress is not None:
        progress(result.entries, result.bytes)
    return result


def _copy_symlink(src: str, dst: str, st: os.stat_result, *, junction: bool) -> None:
    target = os.readlink(src)
    if junction:  # pragma: no cover - Windows only
        from cachedoctor.links import create_link, strip_nt_prefix

        create_link(dst, strip_nt_prefix(target), "junction")
        return
    os.symlink(target, dst, target_is_directory=_WINDOWS and os.path.isdir(src))
    if _IS_ROOT and hasattr(os, "lchown"):
        os.lchown(dst, st.st_uid, st.st_gid)
    if os.utime in os.supports_follow_symlinks:
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def _copy_file(src: str, dst: str, st: os.stat_result, *, flush: bool = False,
               drop: bool = False) -> int:
    big = st.st_size >= _ADVISE_MIN
    fin = os.open(src, os.O_RDONLY | _O_BINARY | _O_NOFOLLOW)
    try:
        if big and _FADV_SEQUENTIAL is not None:
            with contextlib.suppress(OSError):  # only a read-ahead hint
                os.posix_fadvise(fin, 0, 0, _FADV_SEQUENTIAL)
        fout = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o600)
        try:
            if not (_is_sparse(st) and _copy_sparse(fin, fout)):
                _copy_data(fin, fout, st.st_size)
            if big and drop and _FADV_DONTNEED is not None:
                with contextlib.suppress(OSError):  # only a cache hint; the file is unchanged
                    os.posix_fadvise(fin, 0, 0, _FADV_DONTNEED)
            failures = _copy_xattrs_fd(fin, fout)
            if flush:
                os.fsync(fout)
            if _WINDOWS:  # pragma: no cover
                os.close(fout)
                fout = -1
                _set_meta_path(dst, st)
            else:
                if _IS_ROOT:
                    os.fchown(fout, st.st_uid, st.st_gid)
                os.fchmod(fout, stat.S_IMODE(st.st_mode))
                os.utime(fout, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            if fout >= 0:
                os.close(fout)
    finally:
        os.close(fin)
    return failures


_use_copy_file_range = hasattr(os, "copy_file_range")
_use_sendfile = hasattr(os, "sendfile") and not _WINDOWS


def _is_sparse(st: os.stat_result) -> bool:
    """A file with fewer allocated blocks than its size: its holes are kept in the copy, so it
    takes as much room there as the free-space check counted (allocated bytes)."""
    blocks = getattr(st, "st_blocks", None)
    return blocks is not None and _SEEK_DATA is not None and blocks * 512 < st.st_size


_SEEK_DATA = getattr(os, "SEEK_DATA", None)
_SEEK_HOLE = getattr(os, "SEEK_HOLE", None)


def _copy_sparse(fin: int, fout: int) -> bool:
    """Copy only the data extents of `fin` (SEEK_DATA/SEEK_HOLE), leaving holes as holes, so a
    sparse file takes no more room in the copy than in the original (which is what the free-space
    check counts). False (nothing written) where the filesystem cannot report holes."""
    assert _SEEK_DATA is not None and _SEEK_HOLE is not None
    pos = 0
    while True:
        try:
            data = os.lseek(fin, pos, _SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after pos: the rest is a hole
                break
            if pos == 0 and exc.errno in _FALLBACK_ERRNOS:
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


def _copy_data(fin: int, fout: int, size: int) -> None:
    global _use_copy_file_range, _use_sendfile
    if size == 0:
        # A file may have grown since it was listed; still copy what is there now.
        size = 1
    done = 0
    if _use_copy_file_range:
        try:
            while True:
                n = os.copy_file_range(fin, fout, max(size - done, _CHUNK))
                if n == 0:
                    return
                done += n
        except OSError as exc:
            if exc.errno not in _FALLBACK_ERRNOS or done:
                raise
            _use_copy_file_range = False
    if _use_sendfile:
        try:
            while True:
                n = os.sendfile(fout, fin, done, max(size - done, _CHUNK))
                if n == 0:
                    return
                done += n
        except OSError as exc:
            if exc.errno not in _FALLBACK_ERRNOS or done:
                raise
            _use_sendfile = False
    os.lseek(fin, done, os.SEEK_SET)
    os.lseek(fout, done, os.SEEK_SET)
    while True:
        chunk = os.read(fin, _CHUNK)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            written = os.write(fout, view)
            view = view[written:]


def _copy_xattrs_fd(fin: int, fout: int) -> int:
    if not _HAS_XATTR:
        return 0
    try:
        names = os.listxattr(fin)
    except OSError:
        return 0
    failures = 0
    for name in names:
        try:
            os.setxattr(fout, name, os.getxattr(fin, name))
        except OSError:
            failures += 1  # e.g. security.* without privileges or a filesystem without xattrs
    return failures


def _copy_xattrs_path(src: str, dst: str) -> int:
    if not _HAS_XATTR:
        return 0
    try:
        names = os.listxattr(src, follow_symlinks=False)
    except OSError:
        return 0
    failures = 0
    for name in names:
        try:
            os.setxattr(dst, name, os.getxattr(src, name, follow_symlinks=False), follow_symlinks=False)
        except OSError:
            failures += 1
    return failures


def _set_meta_path(path: str, st: os.stat_result) -> None:
    if _IS_ROOT and hasattr(os, "chown"):
        os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, stat.S_IMODE(st.st_mode))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def make_durable(path: str) -> str:
    """Flush the tree just written at `path` (data, inodes, folder entries) to stable storage.

    Returns how: "syncfs" (Linux: one flush of the filesystem holding `path`, which also
    reports write-back errors since Linux 5.8), "per-file" (Windows: `copy_tree(durable=True)`
    already flushed every file as it was written) or "sync" (elsewhere: `sync(2)`). Raises
    OSError when the kernel reports the data could not be written.
    """
    if _FLUSH_EACH_FILE:
        return "per-file"
    if _syncfs(path):
        return "syncfs"
    sync = getattr(os, "sync", None)
    if sync is not None:
        sync()
    return "sync"


def _syncfs(path: str) -> bool:
    """syncfs(2) on the filesystem of `path`; False where the call does not exist."""
    if not hasattr(os, "O_DIRECTORY"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if syncfs(ctypes.c_int(fd)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
    finally:
        os.close(fd)
    return True


def verify_tree(src: str, dst: str, *, content: bool = False, mtime_tolerance_ns: int = 0,
                limit: int = 20) -> list[str]:
    """Differences between the trees (empty when `dst` is a faithful copy of `src`)."""
    problems: list[str] = []
    groups: dict[tuple[int, int], tuple[int, int]] = {}
    reverse: dict[tuple[int, int], tuple[int, int]] = {}

    def problem(text: str) -> bool:
        problems.append(text)
        return len(problems) >= limit

    try:
        s_top, d_top = os.lstat(src), os.lstat(dst)
    except OSError as exc:
        return [f"cannot read {exc.filename}: {exc.strerror}"]
    if _differs(src, s_top, d_top, content, mtime_tolerance_ns):
        problems.append(f"{src}: top folder differs")
    stack = [(src, dst)]
    while stack:
        s_dir, d_dir = stack.pop()
        try:
            with os.scandir(s_dir) as it:
                s_entries = {e.name: e for e in it}
            with os.scandir(d_dir) as it:
                d_entries = {e.name: e for e in it}
        except OSError as exc:
            if problem(f"cannot list {exc.filename}: {exc.strerror}"):
                return problems
            continue
        for name in s_entries.keys() - d_entries.keys():
            if stat.S_ISSOCK(s_entries[name].stat(follow_symlinks=False).st_mode):
                continue
            if problem(f"missing in the copy: {os.path.join(s_dir, name)}"):
                return problems
        for name in d_entries.keys() - s_entries.keys():
            if problem(f"not in the original: {os.path.join(d_dir, name)}"):
                return problems
        for name, s_entry in s_entries.items():
            d_entry = d_entries.get(name)
            if d_entry is None:
                continue
            try:
                s_st = s_entry.stat(follow_symlinks=False)
                d_st = d_entry.stat(follow_symlinks=False)
            except OSError as exc:
                if problem(f"cannot stat {exc.filename}: {exc.strerror}"):
                    return problems
                continue
            why = _differs(s_entry.path, s_st, d_st, content, mtime_tolerance_ns, d_entry.path)
            if why is None and stat.S_ISREG(s_st.st_mode) and (s_st.st_nlink > 1 or d_st.st_nlink > 1):
                s_key, d_key = (s_st.st_dev, s_st.st_ino), (d_st.st_dev, d_st.st_ino)
                if groups.setdefault(s_key, d_key) != d_key or reverse.setdefault(d_key, s_key) != s_key:
                    why = "hard-link group differs"
            if why is not None:
                if problem(f"{s_entry.path}: {why}"):
                    return problems
                continue
            if stat.S_ISDIR(s_st.st_mode) and not _is_junction(s_entry):
                stack.append((s_entry.path, d_entry.path))
    return problems


def _differs(s_path: str, s: os.stat_result, d: os.stat_result, content: bool,
             tolerance: int, d_path: str | None = None) -> str | None:
    if stat.S_IFMT(s.st_mode) != stat.S_IFMT(d.st_mode):
        return "type differs"
    if not _WINDOWS and stat.S_IMODE(s.st_mode) != stat.S_IMODE(d.st_mode):
        return f"mode {oct(stat.S_IMODE(s.st_mode))} != {oct(stat.S_IMODE(d.st_mode))}"
    if stat.S_ISLNK(s.st_mode):
        if d_path is not None and os.readlink(s_path) != os.readlink(d_path):
            return "symlink target differs"
        return None
    if stat.S_ISREG(s.st_mode) and s.st_size != d.st_size:
        return f"size {s.st_size} != {d.st_size}"
    if abs(s.st_mtime_ns - d.st_mtime_ns) > tolerance and (stat.S_ISREG(s.st_mode) or stat.S_ISDIR(s.st_mode)):
        return "modification time differs"
    if content and d_path is not None and stat.S_ISREG(s.st_mode) and not same_content(s_path, d_path,
                                                                                      s.st_size):
        return "content differs"
    return None


_hash_pool: Any = None


def same_content(a: str, b: str, size: int) -> bool:
    """Compare two files' BLAKE2b digests; big files are hashed on two threads at once
    (hashlib releases the GIL), which halves the time on a machine with two or more cores."""
    global _hash_pool
    if size < (4 << 20):
        return file_digest(a) == file_digest(b)
    if _hash_pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _hash_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cachedoctor-hash")
    first = _hash_pool.submit(file_digest, a)
    return bool(file_digest(b) == first.result())


def file_digest(path: str) -> bytes:
    h = hashlib.blake2b(digest_size=32)
    fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_NOFOLLOW)
    try:
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return h.digest()
            h.update(chunk)
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """Delete the folder `path` and everything below it, never following a link.

    A link at `path` itself is refused (ValueError): remove it with `links.remove_link`.
    Read-only folders are made writable first. Missing `path` is fine (idempotent).
    """
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        return
    reparse_tag: int = getattr(top, "st_reparse_tag", 0)
    if stat.S_ISLNK(top.st_mode) or reparse_tag:
        raise ValueError(f"{path} is a link; refusing to delete through it")
    if not stat.S_ISDIR(top.st_mode):
        os.unlink(path)
        return
    _remove_dir(path)


def _remove_dir(path: str) -> None:
    _make_writable(path)
    with os.scandir(path) as it:
        entries = list(it)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and not _is_junction(entry):
            _remove_dir(entry.path)
        elif _is_junction(entry):  # pragma: no cover - Windows only
            os.rmdir(entry.path)
        else:
            try:
                os.unlink(entry.path)
            except PermissionError:
                if not _WINDOWS:
                    raise
                os.chmod(entry.path, stat.S_IWRITE)  # pragma: no cover - read-only file on Windows
                os.unlink(entry.path)  # pragma: no cover
            faults.point("remove-file")
    os.rmdir(path)


def _make_writable(path: str) -> None:
    if _WINDOWS or _IS_ROOT:
        return
    try:
        st = os.lstat(path)
        if (st.st_mode & 0o700) != 0o700:
            os.chmod(path, stat.S_IMODE(st.st_mode) | 0o700)
    except OSError:
        pass
