"""Filling a finding's message and fix with the facts found, quoted for the user's shell."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cachedoctor.host import Host

DEST_PLACEHOLDER = "<DEST on another drive>"
# Filesystems a cache can be moved to (not pseudo, not network, not a RAM disk).
_DRIVE_FS = {"ext4", "ext3", "ext2", "xfs", "btrfs", "zfs", "f2fs", "ntfs", "ntfs3", "fuseblk",
             "exfat", "vfat", "9p", "drvfs", "apfs", "hfs", "refs", "fuse.bindfs"}
_NOT_DRIVES = ("/boot", "/snap", "/proc", "/sys", "/dev", "/run", "/var/lib/docker", "/usr")

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(template: str, facts: Mapping[str, str | None], *, quote: Callable[[str], str] | None = None) -> str:
    """Replace `{name}` with a fact; unknown placeholders (and JSON braces) stay as written."""

    def sub(match: re.Match[str]) -> str:
        value = facts.get(match.group(1))
        if value is None:
            return match.group(0)
        return quote(value) if quote and match.group(1) == "path" else value

    return _PLACEHOLDER.sub(sub, template)


def shell_quote(text: str, host: Host) -> str:
    """Quote a path for the host's shell when it needs it."""
    if not text or re.fullmatch(r"[A-Za-z0-9_@%+=:,./\\~-]+", text):
        return text
    if host.is_windows:
        return '"' + text.replace('"', '""') + '"'
    return shlex.quote(text)



@dataclass(frozen=True)
class Candidate:
    """A drive a cache could go to."""

    mount: str
    device: int  # st_dev of the mount point
    free_bytes: int
    fstype: str


def choose_dest(candidates: Iterable[Candidate], *, source_device: int | None, needed: int,
                previous: Sequence[str] = (), host: Host) -> str | None:
    """Pure: a DEST for a move that exists, is on another drive than the cache and has room
    for it (with a 5% margin): a folder cachedoctor moved caches to before when one fits
    (the user's own `D:\\ai-cache`), else `ai-cache` on the drive with the most free space."""
    room = [c for c in candidates if c.device != source_device and c.free_bytes > needed * 1.05]
    for folder in previous:
        for candidate in room:
            if _inside(folder, candidate.mount, host):
                return folder
    if not room:
        return None
    best = max(room, key=lambda c: c.free_bytes)
    sep = "\\" if host.is_windows else "/"
    return best.mount.rstrip("\\/") + sep + "ai-cache"


def _inside(path: str, mount: str, host: Host) -> bool:
    sep = "\\" if host.is_windows else "/"
    p, m = path.rstrip(sep), mount.rstrip(sep)
    if host.is_windows:
        p, m = p.lower(), m.lower()
    return p == m or p.startswith(m + sep) or m == ""


def live_candidates(host: Host) -> list[Candidate]:
    """This machine's drives (mounted local filesystems one can write to)."""
    from cachedoctor.drives import partitions

    out: list[Candidate] = []
    seen: set[int] = set()
    for mount, _device, fstype, options in partitions():
        if fstype.lower() not in _DRIVE_FS or "ro" in options or (mount == "/" and not host.is_windows):
            continue
        if not host.is_windows and mount.startswith(_NOT_DRIVES):
            continue
        try:
            st = os.stat(mount)
            usage = os.statvfs(mount) if hasattr(os, "statvfs") else None
        except OSError:
            continue
        if st.st_dev in seen or not os.access(mount, os.W_OK):
            continue
        seen.add(st.st_dev)
        free = usage.f_bavail * usage.f_frsize if usage is not None else _free(mount)
        out.append(Candidate(mount, st.st_dev, free, fstype))
    return out


def _free(path: str) -> int:
    import shutil

    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0


def suggest_dest(host: Host, *, data_path: str | None, needed: int,
                 previous: Sequence[str] = ()) -> str:
    """A real DEST for a `move` fix, or the visible placeholder when none is known."""
    from cachedoctor.drives import nearest_existing

    device = None
    if data_path:
        try:
            device = os.stat(nearest_existing(data_path)).st_dev
        except OSError:
            device = None
    found = choose_dest(live_candidates(host), source_device=device, needed=needed,
                        previous=previous, host=host)
    return found or DEST_PLACEHOLDER


def command(host: Host, *argv: str) -> str:
    """A command line with each argument quoted for the user's shell (placeholders stay)."""
    return " ".join(a if a == DEST_PLACEHOLDER else shell_quote(a, host) for a in argv)
