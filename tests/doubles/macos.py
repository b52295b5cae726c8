"""A macOS double: the calls `cachedoctor.fs.posix.MacOps` makes (`MacApi`), and the Linux
copy calls macOS does not have, behaving as Apple and CPython document them.

* **No `copy_file_range`** (a Linux system call; `os.copy_file_range` exists only there, Python
  docs: "Availability: Linux >= 4.5").
* **`sendfile` writes to sockets only**: "sendfile -- send a file to a socket ... out a stream
  socket" and ENOTSOCK "The s argument is not a socket" (macOS sendfile(2)). The double makes
  `os.sendfile` raise exactly that, so any use of it to copy a file fails as on a Mac.
* **`fcopyfile(3)`** (what CPython's shutil uses on macOS, Lib/shutil.py
  ``_fastcopy_fcopyfile``, flags COPYFILE_DATA) copies the data; shutil falls back to
  read/write on EINVAL/ENOTSUP. `unsupported` makes it say ENOTSUP (a filesystem without it).
* **`fclonefileat(2)`** clones only within one APFS volume: EXDEV across volumes, ENOTSUP on a
  filesystem that cannot clone (clonefile(2)); `apfs` says whether this one can.
* **`fcntl(F_FULLFSYNC)`** asks the drive to flush everything it buffered (Apple fsync(2));
  the double records the descriptors it was asked for.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path


def forbid_linux_copy_calls() -> None:
    """Make this process's `os` look like macOS's for copying: no copy_file_range, and
    sendfile to anything but a socket fails with ENOTSOCK."""
    if hasattr(os, "copy_file_range"):
        del os.copy_file_range

    def sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        raise OSError(errno.ENOTSOCK, "Socket operation on non-socket")

    os.sendfile = sendfile  # type: ignore[assignment]


class MacApi:
    def __init__(self, state: Path, *, unsupported: bool = False, apfs: bool = False) -> None:
        state.mkdir(parents=True, exist_ok=True)
        self.log = state / "macos.json"
        self.unsupported = unsupported
        self.apfs = apfs

    def _record(self, what: str) -> None:
        data = self.calls()
        data[what] = data.get(what, 0) + 1
        self.log.write_text(json.dumps(data), encoding="utf-8")

    def calls(self) -> dict[str, int]:
        try:
            loaded: dict[str, int] = json.loads(self.log.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return loaded

    def fcopyfile(self, fin: int, fout: int) -> None:
        if self.unsupported:
            raise OSError(errno.ENOTSUP, "Operation not supported")
        self._record("fcopyfile")
        os.lseek(fin, 0, os.SEEK_SET)
        while chunk := os.read(fin, 1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(fout, view):]

    def fullfsync(self, fd: int) -> None:
        os.fsync(fd)
        self._record("fullfsync")

    def fclonefileat(self, src_fd: int, dst_dir_fd: int, name: str) -> None:
        if os.fstat(src_fd).st_dev != os.fstat(dst_dir_fd).st_dev:
            raise OSError(errno.EXDEV, "Cross-device link")
        if not self.apfs:
            raise OSError(errno.ENOTSUP, "Operation not supported")
        self._record("fclonefileat")
        fout = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dst_dir_fd)
        try:
            os.lseek(src_fd, 0, os.SEEK_SET)
            while chunk := os.read(src_fd, 1 << 20):
                os.write(fout, chunk)
        finally:
            os.close(fout)
