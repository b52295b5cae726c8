"""Moving one entry to the user's trash, relative to the verified folder that holds it.

`clean --trash` must be exactly as link-proof as deleting. The deleter reaches every entry
through a chain of open directory descriptors (``O_NOFOLLOW`` opens, (st_dev, st_ino)
re-checks; see `cachedoctor.safedelete`); send2trash, which it used before, takes a *path* and
resolves it again, so a folder of the cache swapped for a link between the check and the move
sent files from outside the cache to the trash. Here the move is one system call whose source
is ``(parent_fd, name)``::

    os.rename(name, new, src_dir_fd=parent_fd, dst_dir_fd=files_fd)

rename never follows its last component (a link is trashed as the link) and the folder is a
descriptor, so no component of a path can be swapped under it. A rename also never crosses a
filesystem (EXDEV): nothing is ever copied, an entry whose filesystem has no usable trash is
refused (`TrashRefused`; the deleter reports it as skipped with reason ``no trash`` and the file
stays where it is).

Linux and other POSIX systems except macOS follow the freedesktop.org Trash specification 1.0
(https://specifications.freedesktop.org/trash-spec/trashspec-1.0.html):

* an entry on the same filesystem as the *home trash* ``$XDG_DATA_HOME/Trash`` (default
  ``~/.local/share/Trash``; a relative ``XDG_DATA_HOME`` is ignored, as the Base Directory spec
  says) goes there, with an absolute ``Path=`` (the spec allows absolute paths in the home
  trash, and a cache is not under ``$XDG_DATA_HOME``);
* any other entry goes to the trash at the top directory ``$topdir`` of its mount: method (1)
  ``$topdir/.Trash/$uid`` only when ``$topdir/.Trash`` is a real directory (not a link) with
  the sticky bit, else method (2) ``$topdir/.Trash-$uid``, each created 0700 when missing;
  ``Path=`` is relative to ``$topdir``. When neither can be used (typically: no
  ``$topdir/.Trash`` and no right to create ``$topdir/.Trash-$uid``, as in ``/`` for a normal
  user) the spec lets an implementation copy to the home trash or refuse: we refuse. An entry
  on the home filesystem that sits in another mount of it (a bind mount: same st_dev, rename
  says EXDEV) also goes to its own mount's top directory trash;
* `$topdir` is found from the entry's folder descriptor (``..`` opened upwards until the
  device, or on Linux the mount id, changes), never from a path, so the trash a file goes to is
  always on the file's own mount; its path (for ``Path=``) is the longest prefix of the
  entry's real path naming that same directory;
* the name is reserved by creating ``info/<name>.trashinfo`` with ``O_EXCL`` first, as the spec
  requires (another name is tried on EEXIST, so two cachedoctor processes or threads, or
  another trash implementation, never take the same slot); the ``.trashinfo`` holds
  ``[Trash Info]``, ``Path=`` (the file system's bytes, URL-escaped as RFC 2396 says, so
  newlines, ``%`` and non-UTF-8 bytes survive) and ``DeletionDate=`` (local time,
  ``YYYY-MM-DDThh:mm:ss``). It is fsynced before the rename, so a crash can leave a
  ``.trashinfo`` without its file (harmless; trash tools ignore it) but not a trashed file with
  an empty ``.trashinfo`` (ext4's delayed allocation would otherwise commit the name before the
  text). Like GLib's trash (which writes it with ``G_FILE_SET_CONTENTS_CONSISTENT``), ``info/``
  itself is not fsynced: on ext4, XFS and btrfs the file's fsync commits its new directory entry
  too, and one fsync per file is already the cost of trashing (2-3 ms per file measured on an
  ext4 VM; deleting costs none). A failed move removes the reservation;
* the rename itself refuses to replace a file (``renameat2(RENAME_NOREPLACE)``; where the
  filesystem lacks it, a check right before): a file in ``files/`` left without a
  ``.trashinfo`` (say, by a crash of another tool) is never overwritten;
* right before the rename the name is ``lstat``-ed again relative to the folder's descriptor
  and must still be the entry that was listed (st_dev, st_ino); right after, the moved entry is
  checked once more, and an entry swapped into that instant (it can only come from the same
  verified folder) is put back and reported as ``changed``.

Links in the trash folders: the base folder ``$XDG_DATA_HOME`` (or ``$HOME`` on macOS) is the
user's own setting and is opened as configured, links and all. Everything the trash layout
itself defines below it — ``Trash``, ``files``, ``info``, ``.Trash``, ``.Trash/$uid``,
``.Trash-$uid``, ``.Trashes/$uid`` — is created with mode 0700 when missing and opened with
``O_NOFOLLOW``, and must be a real directory that belongs to the user (``.Trash`` and
``.Trashes`` themselves: real directories, shared by design) and is not writable by everyone. A
link there is *refused*, not followed: a symlinked ``~/.local/share/Trash`` would otherwise
send cleaned files wherever the link points (a folder another user can read, another mount).
The spec demands this for ``$topdir/.Trash``; we apply it to every trash folder. Files on the
home filesystem (the filesystem of the folder that holds the trash, so a ``Trash`` linked to
another drive is seen as a link, not as another drive's trash) are then refused with that
reason: they are not sent to another trash.

A cache that is the top directory of a mount of its own holds that mount's trash
(``.Trash-$uid``, ``.Trash``, ``.Trashes``): `trash_folders_at` names them and ``clean --trash``
leaves them out of the walk, or the next clean would trash the trash.

macOS has no ``.trashinfo``. Apple's behaviour (what the Finder and ``NSFileManager
trashItemAtURL:resultingItemURL:error:`` do; Apple documents the call, not the layout): an item
from the volume that holds the home goes to ``~/.Trash``, an item from another volume to
``<volume>/.Trashes/<uid>``, and "Put Back" is recorded in the Finder's own ``.DS_Store``, which
we cannot write: cachedoctor's items appear in the Trash under (nearly) their own names,
without Put Back. The same fd-relative, no-replace rename is used
(``renameatx_np(RENAME_EXCL)``; where it is missing, the check and the rename run under an
flock of the trash folder). A missing ``.Trashes`` is created with mode 01333
(``d-wx-wx-wt``, as the Finder's are commonly found). The macOS privacy controls (TCC) may deny
a terminal access to ``~/.Trash``; the entry is then refused with that reason. This path is
exercised on Linux by the tests (``flavor="macos"``) but has not been run on a Mac.

Windows has no directory descriptors: `trash_path_checked` keeps send2trash (the shell's
Recycle Bin) but re-checks, right before handing it the path, that no folder from the cache
root down to the entry is a reparse point (junction, symlink) and that each folder is still the
one listed (volume serial and file index), and that the entry is the one chosen (a Windows
listing carries no file id: it is read when the entry is chosen). What remains is a window of a
few system calls between that check and the shell opening the path: a folder swapped for a
junction in exactly that instant would send the junction's target's file of the same name to
the Recycle Bin (recoverable from there, never deleted). Closing it would need the shell's
IFileOperation to accept an open handle, which it does not.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Literal
from urllib.parse import quote

import msgspec

Flavor = Literal["freedesktop", "macos"]

INFO_SUFFIX = b".trashinfo"
NAME_MAX = 255  # bytes in one file name on every filesystem we trash on (ext4, xfs, btrfs, APFS)
MIN_NAME = 32  # never shorten a trash name below this (some filesystems allow less than 255)
SEQUENTIAL_NAMES = 8  # name, name.2 ... name.9; then random suffixes (no O(n^2) probing)
MAX_ATTEMPTS = 64  # names tried before giving up on one entry
MAX_DEPTH = 4096  # folders climbed looking for a mount's top directory
DURABLE = True  # fsync each .trashinfo before the move (the default of `Trasher`)

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# the trash folders themselves: readable (info/ is fsynced), never through a link
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
# climbing to a mount's top: Linux O_PATH needs no read permission on the folders on the way
_NAV_FLAGS = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_INFO_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_RENAME_NOREPLACE = 1  # Linux renameat2 flag
_RENAME_EXCL = 0x4  # macOS renameatx_np flag
_AT_FDCWD = -100


class TrashRefused(Exception):
    """No trash on the entry's filesystem can take it: the entry stays where it is."""


class EntryChanged(Exception):
    """The name no longer holds the entry that was listed: it was not trashed."""


class TrashFailed(Exception):
    """The trash itself failed (full, read-only, no free name): the entry stays."""


class _CrossDevice(Exception):
    """rename said EXDEV: this trash is on another mount; try the next one."""


class _Bin(msgspec.Struct):
    """One open trash directory."""

    files_fd: int
    info_fd: int | None  # None on macOS: no .trashinfo
    where: bytes  # the trash directory's path (messages)
    files_where: bytes  # where trashed entries are: files/ (macOS: the trash directory)
    topdir: bytes | None  # Path= is relative to this; None: absolute (the home trash)
    dev: int
    hints: dict[bytes, int] = msgspec.field(default_factory=dict)  # name -> attempts that failed
    name_limit: int = NAME_MAX - len(INFO_SUFFIX)
    lock: threading.Lock = msgspec.field(default_factory=threading.Lock)  # the no-renameat2 fallback


class Trasher:
    """The trash directories of one clean, opened once per filesystem and shared by its threads.

    `env` (default: the process environment, read now — not at import) gives HOME and
    XDG_DATA_HOME; `flavor` is the layout (default: macOS on a Mac, freedesktop elsewhere);
    `durable` fsyncs each .trashinfo before the move (default: `DURABLE`, on)."""

    def __init__(
        self,
        *,
        flavor: Flavor | None = None,
        env: dict[str, str] | None = None,
        durable: bool | None = None,
    ) -> None:
        environ = dict(os.environ) if env is None else env
        self.flavor: Flavor = flavor or ("macos" if sys.platform == "darwin" else "freedesktop")
        self.home = environ.get("HOME") or os.path.expanduser("~")
        data = environ.get("XDG_DATA_HOME", "")
        self.data_home = data if os.path.isabs(data) else os.path.join(self.home, ".local", "share")
        self.uid = os.geteuid()
        self.durable = DURABLE if durable is None else durable
        self._lock = threading.Lock()
        self._home_dev: int | None = None  # the home trash's filesystem (or its nearest parent's)
        self._home: _Bin | TrashRefused | None = None
        self._tops: dict[int, _Bin | TrashRefused] = {}
        self._fds: list[int] = []

    def __enter__(self) -> Trasher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for fd in self._fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()
            self._home = self._home_dev = None
            self._tops.clear()

    # ------------------------------------------------------------------------------ the move

    def trash(
        self,
        parent_fd: int,
        name: str | bytes,
        st: os.stat_result,
        path: str | bytes,
        *,
        dev: int | None = None,
    ) -> bytes:
        """Move `name`, an entry of the open folder `parent_fd` listed as `st`, to the trash of
        its filesystem; `path` is its absolute real path (for the .trashinfo), `dev` the
        folder's st_dev when the caller knows it. Returns where it went in the trash.

        Raises FileNotFoundError (the entry is gone), EntryChanged (another entry has its name
        now), TrashRefused (no usable trash on its filesystem), TrashFailed (the trash failed),
        OSError (the move failed for another reason, e.g. EBUSY on a mount point)."""
        name_b, path_b = os.fsencode(name), os.fsencode(path)
        if dev is None:
            dev = os.fstat(parent_fd).st_dev
        home = self._home_for(dev)
        if home is not None:
            try:
                return self._put(home, parent_fd, name_b, st, path_b)
            except _CrossDevice:  # same filesystem, another mount of it (a bind mount)
                pass
        top = self._top_for(parent_fd, dev, path_b)
        try:
            return self._put(top, parent_fd, name_b, st, path_b)
        except _CrossDevice:
            raise TrashRefused(
                "no trash on the same mount as the file (a rename would have to copy)"
            ) from None

    def _home_for(self, dev: int) -> _Bin | None:
        """The home trash when it is on `dev` (opened, and created, only then); raises when it
        is but cannot be used: the home filesystem's files go to no other trash."""
        with self._lock:
            if self._home_dev is None:  # the folder holding the trash (its link not followed)
                found = _device_of(self._home_base())
                self._home_dev = -1 if found is None else found
            if self._home_dev != dev:
                return None
            home = self._home
            if home is None:
                home = self._home = self._open_home()
        if isinstance(home, TrashRefused):
            raise home
        return home if home.dev == dev else None

    def _top_for(self, parent_fd: int, dev: int, path_b: bytes) -> _Bin:
        with self._lock:
            top = self._tops.get(dev)
            if top is None:
                top = self._tops[dev] = self._open_top(parent_fd, dev, path_b)
        if isinstance(top, TrashRefused):
            raise top
        return top

    def _put(
        self, target: _Bin, parent_fd: int, name_b: bytes, st: os.stat_result, path_b: bytes
    ) -> bytes:
        info = self._info_text(target, path_b) if target.info_fd is not None else None
        attempt = target.hints.get(name_b, 0)
        for _ in range(MAX_ATTEMPTS):
            candidate = _candidate(name_b, attempt, target.name_limit)
            attempt += 1
            if info is not None:
                try:
                    self._reserve(target, candidate, info)
                except FileExistsError:
                    continue
                except OSError as exc:
                    if exc.errno == errno.ENAMETOOLONG and target.name_limit > MIN_NAME:
                        target.name_limit = max(MIN_NAME, target.name_limit // 2)
                        continue
                    raise TrashFailed(
                        f"cannot write to {_show(target.where)}/info: {exc.strerror}"
                    ) from None
            try:
                self._check_listed(parent_fd, name_b, st)
                self._move(parent_fd, name_b, target, candidate)
            except FileExistsError:  # a file of that name in files/ without a .trashinfo
                self._unreserve(target, candidate)
                continue
            except BaseException:
                self._unreserve(target, candidate)
                raise
            if attempt > 1:
                target.hints[name_b] = min(attempt, SEQUENTIAL_NAMES)
            self._check_moved(target, candidate, parent_fd, name_b, st)
            return _join(target.files_where, candidate)
        raise TrashFailed(f"no free name in {_show(target.where)} after {MAX_ATTEMPTS} tries")

    def _info_text(self, target: _Bin, path_b: bytes) -> bytes:
        if target.topdir is None:
            value = path_b
        else:
            top = target.topdir.rstrip(b"/") + b"/"
            if not path_b.startswith(top) or b"/../" in path_b or path_b.endswith(b"/.."):
                raise TrashRefused(
                    f"{_show(path_b)} is not under {_show(target.topdir)}, the top of its mount"
                )
            value = path_b[len(top) :]
        date = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        return (
            b"[Trash Info]\nPath="
            + quote(value, safe="/").encode("ascii")
            + b"\nDeletionDate="
            + date.encode("ascii")
            + b"\n"
        )

    def _reserve(self, target: _Bin, candidate: bytes, info: bytes) -> None:
        assert target.info_fd is not None
        fd = os.open(candidate + INFO_SUFFIX, _INFO_FLAGS, 0o600, dir_fd=target.info_fd)
        try:
            try:
                view = memoryview(info)
                while view:
                    view = view[os.write(fd, view) :]
                if self.durable:
                    os.fsync(fd)  # its text is on disk before the file moves (see above)
            finally:
                os.close(fd)
        except BaseException:
            self._unreserve(target, candidate)
            raise

    def _unreserve(self, target: _Bin, candidate: bytes) -> None:
        if target.info_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(candidate + INFO_SUFFIX, dir_fd=target.info_fd)

    @staticmethod
    def _check_listed(parent_fd: int, name_b: bytes, st: os.stat_result) -> None:
        now = os.lstat(name_b, dir_fd=parent_fd)  # FileNotFoundError: gone, nothing to do
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise EntryChanged("replaced while cleaning")

    def _move(self, parent_fd: int, name_b: bytes, target: _Bin, candidate: bytes) -> None:
        try:
            if not _rename_noreplace(parent_fd, name_b, target.files_fd, candidate):
                with target.lock, _flocked(target.files_fd):  # the check and the move together
                    try:
                        os.lstat(candidate, dir_fd=target.files_fd)
                    except FileNotFoundError:
                        pass
                    else:
                        raise FileExistsError(errno.EEXIST, "exists", candidate)
                    os.rename(
                        name_b, candidate, src_dir_fd=parent_fd, dst_dir_fd=target.files_fd
                    )
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise _CrossDevice() from None
            if exc.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "exists", candidate) from None
            if exc.errno == errno.ENOENT:
                os.lstat(name_b, dir_fd=parent_fd)  # the entry went: FileNotFoundError
                raise TrashFailed(f"{_show(target.where)}/files is gone") from None
            if exc.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
                raise TrashFailed(f"cannot move into {_show(target.where)}: {exc.strerror}") from None
            raise

    def _check_moved(
        self, target: _Bin, candidate: bytes, parent_fd: int, name_b: bytes, st: os.stat_result
    ) -> None:
        """The moved entry must be the listed one; one swapped in the instant between the check
        and the rename (from the same verified folder) is put back."""
        try:
            now = os.lstat(candidate, dir_fd=target.files_fd)
        except OSError:
            return  # already taken out of the trash by someone else: nothing to compare
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            return
        put_back = False
        try:  # never over whatever may have taken the name since
            if _rename_noreplace(target.files_fd, candidate, parent_fd, name_b):
                put_back = True
            else:
                try:
                    os.lstat(name_b, dir_fd=parent_fd)
                except FileNotFoundError:
                    os.rename(candidate, name_b, src_dir_fd=target.files_fd, dst_dir_fd=parent_fd)
                    put_back = True
        except OSError:
            pass
        if put_back:
            self._unreserve(target, candidate)
            raise EntryChanged("replaced while cleaning; the replacement was put back")
        raise EntryChanged(
            "replaced while cleaning; the replacement is in the trash as "
            f"{_show(_join(target.files_where, candidate))}"
        )

    # ------------------------------------------------------------------------ trash folders

    def _home_base(self) -> str:
        return self.home if self.flavor == "macos" else self.data_home

    def _home_trash_path(self) -> str:
        if self.flavor == "macos":
            return os.path.join(self.home, ".Trash")
        return os.path.join(self.data_home, "Trash")

    def _open_home(self) -> _Bin | TrashRefused:
        """The home trash (`$XDG_DATA_HOME/Trash`, macOS `~/.Trash`), created when missing."""
        base = self._home_base()
        where = os.fsencode(self._home_trash_path())
        fds: list[int] = []  # folders on the way, closed once the trash's own are open
        try:
            if self.flavor != "macos":
                os.makedirs(base, 0o700, exist_ok=True)  # Base Directory spec: 0700
            fds.append(os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC))  # as configured
            leaf = b".Trash" if self.flavor == "macos" else b"Trash"
            fds.append(self._subdir(fds[-1], leaf, where))
            return self._bin(fds[-1], where, None)
        except TrashRefused as exc:
            return exc
        except OSError as exc:
            hint = ""
            if self.flavor == "macos" and exc.errno in (errno.EPERM, errno.EACCES):
                hint = " (macOS privacy settings: the terminal may need Full Disk Access)"
            return TrashRefused(f"the home trash {_show(where)} cannot be used: {_why(exc)}{hint}")
        finally:
            _close_all(fds)

    def _open_top(self, parent_fd: int, dev: int, path_b: bytes) -> _Bin | TrashRefused:
        """The trash at the top directory of the mount that holds `parent_fd`."""
        fds: list[int] = []
        try:
            fds.append(_mount_top(parent_fd, dev))
            top_fd = fds[-1]
            topdir = _path_of(top_fd, path_b)
            if topdir is None:
                return TrashRefused(
                    "the top directory of the file's mount is not on its path, so its place in "
                    "a trash there could not be written"
                )
            if self.flavor == "macos":
                return self._open_trashes(top_fd, topdir)
            reasons: list[str] = []
            admin = self._admin_trash(top_fd, topdir, reasons)
            if admin is not None:
                return admin
            where = _join(topdir, b".Trash-%d" % self.uid)
            try:
                fds.append(self._subdir(top_fd, b".Trash-%d" % self.uid, where))
                return self._bin(fds[-1], where, topdir)
            except TrashRefused as exc:
                reasons.append(str(exc))
            except OSError as exc:
                reasons.append(f"cannot create {_show(where)}: {_why(exc)}")
            return TrashRefused(
                f"no usable trash on the filesystem mounted at {_show(topdir)} "
                f"({'; '.join(reasons)}); not copied to the home trash"
            )
        except TrashRefused as exc:
            return exc
        except OSError as exc:
            return TrashRefused(f"the top directory of the file's mount was not found: {_why(exc)}")
        finally:
            _close_all(fds)

    def _admin_trash(self, top_fd: int, topdir: bytes, reasons: list[str]) -> _Bin | None:
        """Method (1): `$topdir/.Trash/$uid`, only when `.Trash` is a sticky real directory."""
        where = _join(topdir, b".Trash")
        try:
            st = os.lstat(b".Trash", dir_fd=top_fd)
        except OSError:
            return None  # absent: method (2), without a word (the spec's "immediate fallback")
        if stat.S_ISLNK(st.st_mode):
            reasons.append(f"{_show(where)} is a symbolic link (not used, as the spec says)")
            return None
        if not stat.S_ISDIR(st.st_mode) or not st.st_mode & stat.S_ISVTX:
            reasons.append(f"{_show(where)} is not a directory with the sticky bit (not used)")
            return None
        fds: list[int] = []
        try:
            fds.append(os.open(b".Trash", _NAV_FLAGS, dir_fd=top_fd))
            now = os.fstat(fds[-1])
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise TrashRefused(f"{_show(where)} changed while it was checked")
            user_where = _join(where, b"%d" % self.uid)
            fds.append(self._subdir(fds[-1], b"%d" % self.uid, user_where))
            return self._bin(fds[-1], user_where, topdir)
        except TrashRefused as exc:
            reasons.append(str(exc))
        except OSError as exc:
            reasons.append(f"{_show(where)}/{self.uid}: {_why(exc)}")
        finally:
            _close_all(fds)
        return None

    def _open_trashes(self, top_fd: int, topdir: bytes) -> _Bin | TrashRefused:
        """macOS, another volume: `<volume>/.Trashes/<uid>` (the Finder's layout)."""
        where = _join(topdir, b".Trashes")
        fds: list[int] = []
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(b".Trashes", 0o700, dir_fd=top_fd)
                fds.append(os.open(b".Trashes", _DIR_FLAGS, dir_fd=top_fd))
                os.fchmod(fds[-1], 0o1333)  # d-wx-wx-wt, as the Finder makes it
                _close_all(fds)
            st = os.lstat(b".Trashes", dir_fd=top_fd)
            if not stat.S_ISDIR(st.st_mode):
                raise TrashRefused(f"{_show(where)} is a link or not a directory; not used")
            fds.append(os.open(b".Trashes", _NAV_FLAGS, dir_fd=top_fd))
            now = os.fstat(fds[-1])
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise TrashRefused(f"{_show(where)} changed while it was checked")
            user_where = _join(where, b"%d" % self.uid)
            fds.append(self._subdir(fds[-1], b"%d" % self.uid, user_where))
            return self._bin(fds[-1], user_where, topdir)
        except TrashRefused as exc:
            return exc
        except OSError as exc:
            return TrashRefused(f"no usable trash on the volume {_show(topdir)}: {_why(exc)}")
        finally:
            _close_all(fds)

    def _bin(self, trash_fd: int, where: bytes, topdir: bytes | None) -> _Bin:
        """A trash directory's files/ and info/ (macOS: the folder itself), opened to stay."""
        if self.flavor == "macos":
            files_fd, info_fd = os.dup(trash_fd), None
            self._fds.append(files_fd)
        else:
            files_fd = self._subdir(trash_fd, b"files", _join(where, b"files"))
            try:
                info_fd = self._subdir(trash_fd, b"info", _join(where, b"info"))
            except BaseException:
                os.close(files_fd)
                raise
            self._fds.extend((files_fd, info_fd))
        files_where = where if info_fd is None else _join(where, b"files")
        return _Bin(files_fd, info_fd, where, files_where, topdir, os.fstat(files_fd).st_dev)

    def _subdir(self, parent_fd: int, name: bytes, where: bytes) -> int:
        """A trash folder: made 0700 if missing; a real directory (never a link), ours, and not
        writable by everyone — else refused."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                try:
                    link = stat.S_ISLNK(os.lstat(name, dir_fd=parent_fd).st_mode)
                except OSError:
                    link = False
                what = "a symbolic link" if link else "not a directory"
                raise TrashRefused(
                    f"the trash folder {_show(where)} is {what}; cachedoctor does not trash "
                    "through links"
                ) from None
            raise
        st = os.fstat(fd)
        problem = None
        if st.st_uid != self.uid:
            problem = f"belongs to uid {st.st_uid}, not to you (uid {self.uid})"
        elif st.st_mode & stat.S_IWOTH:
            problem = "is writable by everyone"
        if problem is not None:
            os.close(fd)
            raise TrashRefused(f"the trash folder {_show(where)} {problem}; not used")
        return fd


# ------------------------------------------------------------------------------ helpers


def fd_path(fd: int) -> bytes | None:
    """The absolute path an open folder has now (Linux /proc), None where unknown."""
    try:
        path = os.readlink(f"/proc/self/fd/{fd}".encode())
    except OSError:
        return None
    if not path.startswith(b"/") or path.endswith(b" (deleted)"):
        return None
    return path


def trash_folders_at(fd: int) -> frozenset[str]:
    """The names in the open folder `fd` that are trash directories of its mount — `.Trash`,
    `.Trash-<uid>`, `.Trashes` — when `fd` is the top directory of a mount (else none).

    A cache that is a mount of its own holds its mount's trash: `clean --trash` leaves it alone
    (it would otherwise move trashed files into the trash again, next to their old entries)."""
    try:
        if not _is_top(fd, os.fstat(fd)):
            return frozenset()
        names = os.listdir(fd)
    except OSError:
        return frozenset()
    return frozenset(
        n
        for n in names
        if n in (".Trash", ".Trashes") or (n.startswith(".Trash-") and n[7:].isdigit())
    )


def _is_top(fd: int, st: os.stat_result, mnt: int | None = None) -> bool:
    """Whether the folder open as `fd` (its fstat `st`) is the top of its filesystem or mount."""
    from cachedoctor.safedelete import _mount_id

    if mnt is None and sys.platform.startswith("linux"):
        mnt = _mount_id(fd)
    up = os.open(b"..", _NAV_FLAGS, dir_fd=fd)
    try:
        up_st = os.fstat(up)
        return (up_st.st_dev, up_st.st_ino) == (st.st_dev, st.st_ino) or (
            up_st.st_dev != st.st_dev or (mnt is not None and _mount_id(up) != mnt)
        )
    finally:
        os.close(up)


def _mount_top(parent_fd: int, dev: int) -> int:
    """A new descriptor for the top directory of the mount holding `parent_fd`: `..` is opened
    upwards while it is on the same device (and, on Linux, the same mount)."""
    from cachedoctor.safedelete import _mount_id

    cur = os.open(".", _NAV_FLAGS, dir_fd=parent_fd)
    try:
        cur_st = os.fstat(cur)
        if cur_st.st_dev != dev:
            raise TrashRefused("the folder is not on the file's filesystem")
        mnt = _mount_id(cur) if sys.platform.startswith("linux") else None
        for _ in range(MAX_DEPTH):
            if _is_top(cur, cur_st, mnt):  # the root of the filesystem, or of its mount
                top, cur = cur, -1
                return top
            up = os.open(b"..", _NAV_FLAGS, dir_fd=cur)
            os.close(cur)
            cur, cur_st = up, os.fstat(up)
        raise TrashRefused("the top directory of the file's mount is too far up")
    finally:
        if cur >= 0:
            os.close(cur)


def _path_of(top_fd: int, path_b: bytes) -> bytes | None:
    """The prefix of the entry's real path that names the directory `top_fd` is open on."""
    want = os.fstat(top_fd)
    prefix = os.path.dirname(path_b)
    while True:
        try:
            st = os.lstat(prefix)
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            return prefix
        parent = os.path.dirname(prefix)
        if parent == prefix:
            return None
        prefix = parent


def _candidate(name: bytes, attempt: int, limit: int) -> bytes:
    """The `attempt`-th name tried for `name` in files/: the name, `stem.2.ext` ... then
    `stem.<random>.ext` (the spec wants names related to the original ones), within `limit`."""
    stem, ext = name, b""
    dot = name.rfind(b".")
    if dot > 0 and 1 < len(name) - dot <= 16:
        stem, ext = name[:dot], name[dot:]
    if attempt == 0:
        suffix = b""
    elif attempt < SEQUENTIAL_NAMES:
        suffix = b".%d" % (attempt + 1)
    else:
        suffix = b"." + secrets.token_hex(4).encode("ascii")
    if len(stem) + len(suffix) + len(ext) > limit:
        if len(ext) + len(suffix) > limit // 2:
            stem, ext = name, b""
        stem = _cut(stem, limit - len(suffix) - len(ext))
    return stem + suffix + ext


def _cut(data: bytes, size: int) -> bytes:
    """`data` shortened to `size` bytes, not in the middle of a UTF-8 character."""
    if len(data) <= size:
        return data
    cut = data[:size]
    i = len(cut)
    while i > 0 and cut[i - 1] & 0xC0 == 0x80:  # continuation bytes at the end
        i -= 1
    if i > 0 and cut[i - 1] >= 0xC0:  # the lead byte of the last character: is it whole?
        lead = cut[i - 1]
        need = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if len(cut) - (i - 1) < need:
            cut = cut[: i - 1]
    return cut or data[:size]


def _device_of(path: str) -> int | None:
    """st_dev of `path`, or of its nearest existing parent (it may not exist yet)."""
    while True:
        try:
            return os.stat(path).st_dev
        except OSError:
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent


def _join(parent: bytes, name: bytes) -> bytes:
    return parent.rstrip(b"/") + b"/" + name


def _show(path: bytes) -> str:
    return os.fsdecode(path)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


@contextlib.contextmanager
def _flocked(fd: int) -> Iterator[None]:
    """An flock on `fd` where the OS and the filesystem have one (the fallback's check and
    rename, across cachedoctor processes); best effort, the threads' lock is held anyway."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows never gets here
        yield None
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        yield None
        return
    try:
        yield None
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


_libc: ctypes.CDLL | None = None
_renameat_fn: Callable[..., int] | None = None
_renameat_known = False
_no_noreplace: set[int] = set()  # devices whose filesystem rejected the no-replace flag


def _renameat_native() -> Callable[..., int] | None:
    global _libc, _renameat_fn, _renameat_known
    if not _renameat_known:
        _renameat_known = True
        name = "renameatx_np" if sys.platform == "darwin" else "renameat2"
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            fn = getattr(_libc, name)
        except (OSError, AttributeError):
            fn = None
        if fn is not None:
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            fn.restype = ctypes.c_int
        _renameat_fn = fn
    return _renameat_fn


def _rename_noreplace(src_fd: int, src: bytes, dst_fd: int, dst: bytes) -> bool:
    """rename that fails with EEXIST instead of replacing; False where the system or the
    filesystem has no such call (the caller checks, then renames)."""
    if not (sys.platform.startswith("linux") or sys.platform == "darwin"):
        return False
    fn = _renameat_native()
    if fn is None:
        return False
    try:
        dev = os.fstat(dst_fd).st_dev
    except OSError:
        dev = -1
    if dev in _no_noreplace:
        return False
    flag = _RENAME_EXCL if sys.platform == "darwin" else _RENAME_NOREPLACE
    if fn(src_fd, src, dst_fd, dst, flag) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        _no_noreplace.add(dev)
        return False
    raise OSError(err, os.strerror(err), os.fsdecode(dst))


# ----------------------------------------------------------------------------- Windows


def trash_path_checked(
    chain: Sequence[tuple[str, tuple[int, int]]],
    path: str,
    expect: tuple[int, int],
    send: Callable[[str], None] | None = None,
) -> None:
    """Windows: send `path` to the Recycle Bin with send2trash, after checking right before
    that every folder of `chain` (the cache root down to the entry's folder, each with the
    (st_dev, st_ino) seen when it was listed) is still that folder and not a reparse point,
    and that the entry is still the one listed (`expect`). Raises EntryChanged otherwise,
    FileNotFoundError when something is gone. The window left is described in the module
    docstring."""
    from cachedoctor.safedelete import is_reparse_point

    for folder, ident in chain:
        st = os.lstat(folder)
        if is_reparse_point(st) or not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != ident:
            raise EntryChanged("a folder on its path was replaced while cleaning")
    st = os.lstat(path)
    if (st.st_dev, st.st_ino) != expect:
        raise EntryChanged("replaced while cleaning")
    if send is None:  # pragma: no cover - Windows only
        from send2trash import send2trash

        send2trash(path)
    else:
        send(path)


__all__: Sequence[str] = (
    "EntryChanged",
    "Flavor",
    "TrashFailed",
    "TrashRefused",
    "Trasher",
    "fd_path",
    "trash_folders_at",
    "trash_path_checked",
)
