"""Filling a finding's message and fix with the facts found, quoted for the user's shell."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence

import msgspec

from cachedoctor.host import Host
from cachedoctor.lazyre import lazy_pattern

DEST_PLACEHOLDER = "<DEST on another drive>"
# Filesystems a cache can be moved to (not pseudo, not network, not a RAM disk).
_DRIVE_FS = {"ext4", "ext3", "ext2", "xfs", "btrfs", "zfs", "f2fs", "ntfs", "ntfs3", "fuseblk",
             "exfat", "vfat", "9p", "drvfs", "apfs", "hfs", "refs", "fuse.bindfs"}
_NOT_DRIVES = ("/boot", "/snap", "/proc", "/sys", "/dev", "/run", "/var/lib/docker", "/usr")

_PLACEHOLDER = lazy_pattern(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(template: str, facts: Mapping[str, str | None], *, quote: Callable[[str], str] | None = None) -> str:
    """Replace `{name}` with a fact; unknown placeholders (and JSON braces) stay as written."""

    def sub(match: re.Match[str]) -> str:
        value = facts.get(match.group(1))
        if value is None:
            return match.group(0)
        return quote(value) if quote and match.group(1) == "path" else value

    return _PLACEHOLDER().sub(sub, template)


def shell_quote(text: str, host: Host) -> str:
    """Quote a path for the host's shell when it needs it."""
    if not text or re.fullmatch(r"[A-Za-z0-9_@%+=:,./\\~-]+", text):
        return text
    if host.is_windows:
        return '"' + text.replace('"', '""') + '"'
    return shlex.quote(text)



class Candidate(msgspec.Struct, frozen=True):
    """A drive a cache could go to."""

    mount: str
    device: int  # st_dev of the mount point
    free_bytes: int
    fstype: str
    total_bytes: int = 0  # 0: unknown
    folder: str | None = None  # where on it a new `ai-cache` goes (your home on the system drive)


RESERVE_BYTES = 2 << 30  # a drive is never suggested if the move would leave it with less
RESERVE_SHARE = 0.10  # ... or with less than this share of its size free


def has_room(candidate: Candidate, needed: int) -> bool:
    """Room for `needed` bytes with the drive still usable afterwards."""
    reserve = max(RESERVE_BYTES, int(candidate.total_bytes * RESERVE_SHARE))
    return candidate.free_bytes - needed >= reserve


def choose_dest(candidates: Iterable[Candidate], *, source_device: int | None, needed: int,
                previous: Sequence[str] = (), host: Host) -> str | None:
    """Pure: a DEST for a move that exists, is on another drive than the cache and has room
    for it with a reserve left: a folder cachedoctor moved caches to before when its drive (the
    deepest mount holding it) fits (the user's own `D:\\ai-cache`), else `ai-cache` on the
    drive with the most free space (in your home when that is the system drive)."""
    candidates = list(candidates)
    room = [c for c in candidates if c.device != source_device and has_room(c, needed)]
    for folder in previous:
        holder = _holder(folder, candidates, host)
        if holder is not None and holder in room:
            return folder
    if not room:
        return None
    best = max(room, key=lambda c: c.free_bytes)
    sep = "\\" if host.is_windows else "/"
    return (best.folder or best.mount).rstrip("\\/") + sep + "ai-cache"


def _holder(path: str, candidates: list[Candidate], host: Host) -> Candidate | None:
    """The drive `path` is on: the deepest mount that holds it."""
    holding = [c for c in candidates if _inside(path, c.mount, host)]
    return max(holding, key=lambda c: len(c.mount.rstrip("\\/")), default=None)


def _inside(path: str, mount: str, host: Host) -> bool:
    sep = "\\" if host.is_windows else "/"
    p, m = path.rstrip(sep), mount.rstrip(sep)
    if host.is_windows:
        p, m = p.lower(), m.lower()
    return p == m or p.startswith(m + sep) or m == ""


def live_candidates(host: Host) -> list[Candidate]:
    """This machine's drives (mounted local filesystems one can write to). On the drive that
    holds the home folder, a new folder goes in the home folder (a user cannot write `/`)."""
    from cachedoctor.drives import partitions

    mounts = [(m, fstype, options) for m, _device, fstype, options in partitions()]
    home_mount = max((m for m, _f, _o in mounts if _inside(host.home, m, host)),
                     key=lambda m: len(m.rstrip("\\/")), default=None)
    out: list[Candidate] = []
    seen: set[int] = set()
    for mount, fstype, options in mounts:
        if fstype.lower() not in _DRIVE_FS or "ro" in options:
            continue
        if not host.is_windows and mount.startswith(_NOT_DRIVES):
            continue
        folder = host.home if mount == home_mount and not host.is_windows else None
        try:
            st = os.stat(mount)
            usage = os.statvfs(mount) if hasattr(os, "statvfs") else None
        except OSError:
            continue
        if st.st_dev in seen or not os.access(folder or mount, os.W_OK):
            continue
        seen.add(st.st_dev)
        if usage is not None:
            free, total = usage.f_bavail * usage.f_frsize, usage.f_blocks * usage.f_frsize
        else:
            free, total = _usage(mount)
        out.append(Candidate(mount, st.st_dev, free, fstype, total, folder))
    return out


def _usage(path: str) -> tuple[int, int]:
    import shutil

    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0, 0
    return usage.free, usage.total


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
