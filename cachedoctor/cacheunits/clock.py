"""Which clock says when a cache file was last used: access time where the mount records it,
modification time where it does not.

Linux mounts default to `relatime`: a read updates atime when it was older than mtime or more
than a day old, so atime is a use clock to within a day; `strictatime` updates it on every read.
`noatime` never updates it (and `nodiratime` only spares folders): there only mtime, the time
the file was written (downloaded), means anything. A symbolic link's own times say nothing
about use (`readlink` — by cachedoctor itself, or `find` — counts as an access), so links count
with their mtime (when they were made), and folders not at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

import msgspec


class Timed(Protocol):
    @property
    def atime(self) -> float: ...
    @property
    def mtime(self) -> float: ...
    @property
    def is_link(self) -> bool: ...


NO_ATIME_OPTIONS = ("noatime",)


class Clock(msgspec.Struct, frozen=True):
    name: Literal["atime", "mtime"]
    why: str

    def last_used(self, entry: Timed) -> float:
        """When this file was last used: its access time (or its write time when newer), or
        only the write time where access times are not recorded or mean nothing (links)."""
        if self.name == "mtime" or entry.is_link:
            return entry.mtime
        return max(entry.atime, entry.mtime)

    def newest(self, files: Iterable[Timed]) -> float | None:
        """The latest `last_used` of these files (None for none), without a call per file."""
        if self.name == "mtime":
            return max((f.mtime for f in files), default=None)
        return max((f.mtime if f.is_link or f.mtime > f.atime else f.atime for f in files),
                   default=None)

    def to_json(self) -> dict[str, str]:
        return {"clock": self.name, "why": self.why}


def usage_clock(path: str) -> Clock:
    """The clock for the files under `path`, decided by its mount's options."""
    from cachedoctor.drives import drive_of

    drive = drive_of(path)
    if drive is None:
        return Clock("mtime", "the mount of this folder is unknown, so its access times are not trusted")
    return clock_for(drive.mount, drive.options)


def clock_for(mount: str, options: tuple[str, ...]) -> Clock:
    for option in NO_ATIME_OPTIONS:
        if option in options:
            return Clock("mtime", f"{mount} is mounted {option}: access times are not recorded")
    if "strictatime" in options:
        return Clock("atime", f"{mount} is mounted strictatime: every read updates the access time")
    if "relatime" in options:
        return Clock("atime", f"{mount} is mounted relatime: reads update the access time at most "
                              "once a day")
    return Clock("atime", f"{mount} records access times (mount options: "
                          f"{','.join(options) or 'none reported'})")
