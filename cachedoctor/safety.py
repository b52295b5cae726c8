"""Protected roots: folders that no move, clean or restore may ever take as its target.

Checked on the literal path *and* on its resolved form, so a link pointing at `/` or at the
home folder is refused too.
"""

from __future__ import annotations

import contextlib
import ntpath
import os
import posixpath
import re
from pathlib import Path

from cachedoctor.errors import RefusedError
from cachedoctor.host import Host

_POSIX_SYSTEM = (
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/share",
    "/var",
    "/var/lib",
    "/home",
    "/Users",
    "/System",
    "/Library",
    "/Applications",
    "/private",
    "/private/var",
    "/Volumes",
    "/mnt",
    "/media",
    "/tmp",
    "/var/tmp",
    "/snap",
)
_WIN_SYSTEM_SUFFIXES = (
    "",
    "\\windows",
    "\\program files",
    "\\program files (x86)",
    "\\programdata",
    "\\users",
    "\\windows\\system32",
    "\\$recycle.bin",
    "\\system volume information",
    "\\recovery",
)
_WIN_DRIVE_ROOT = re.compile(r"^[a-z]:$")


def protected_reason(path: str, host: Host) -> str | None:
    """Why `path` is a protected root, or None when it is an ordinary folder."""
    if host.is_windows:
        return _windows_reason(path, host)
    norm = posixpath.normpath(path) if path else "/"
    if norm == "//":
        norm = "/"
    home = posixpath.normpath(host.home) if host.home else None
    if norm in _POSIX_SYSTEM:
        return "a system folder"
    if home and norm == home:
        return "your home folder"
    if home and norm in {
        posixpath.join(home, d)
        for d in (
            ".cache",
            ".config",
            ".local",
            ".local/share",
            "Library",
            "Library/Caches",
            "Documents",
            "Desktop",
            "Downloads",
        )
    }:
        return "a top-level folder of your home, not a single cache"
    if re.fullmatch(r"/mnt/[a-z]", norm) or re.fullmatch(r"/(media|Volumes|run/media)/[^/]+", norm):
        return "a drive root"
    return None


def _windows_reason(path: str, host: Host) -> str | None:
    norm = ntpath.normpath(path).rstrip("\\").lower()
    if _WIN_DRIVE_ROOT.match(norm) or norm in ("", "\\"):
        return "a drive root"
    drive = norm[:2]
    if _WIN_DRIVE_ROOT.match(drive) and norm[2:] in _WIN_SYSTEM_SUFFIXES:
        return "a system folder"
    special = {
        "your home folder": host.getenv("USERPROFILE") or host.home,
        "your AppData folder": host.getenv("APPDATA"),
        "your local AppData folder": host.getenv("LOCALAPPDATA"),
        "your Temp folder root": host.getenv("TEMP"),
        "the Windows folder": host.getenv("SystemRoot"),
    }
    for reason, value in special.items():
        if value and ntpath.normpath(value).rstrip("\\").lower() == norm:
            return reason
    return None


def check_not_protected(path: str | os.PathLike[str], host: Host, *, role: str = "target") -> None:
    """Raise RefusedError when `path`, literally or resolved through links, is a protected root."""
    literal = os.fspath(path)
    candidates = [literal]
    if not host.is_windows or os.name == "nt":
        with contextlib.suppress(OSError, ValueError):
            candidates.append(os.path.realpath(literal))
    for candidate in candidates:
        reason = protected_reason(candidate, host)
        if reason:
            raise RefusedError(
                f"refusing to use {literal} as the {role}: it is {reason}",
                hint="cachedoctor only works on a tool's own cache folders",
            )


def is_within(child: str | os.PathLike[str], parent: str | os.PathLike[str]) -> bool:
    """True when `child` is `parent` or below it (lexically, after normalisation)."""
    c, p = Path(os.path.abspath(child)), Path(os.path.abspath(parent))
    return c == p or p in c.parents
