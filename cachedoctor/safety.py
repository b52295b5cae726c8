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
from typing import Any

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


# Trees in which nothing is a cache to clean, whatever a profile says (below them, not only the
# roots). Moves may start there: Ollama's Linux service keeps its models in /usr/share/ollama.
_SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin",
    "/sys", "/usr", "/System", "/private/etc",
)
_HOMES_PARENTS = ("/home", "/Users")
FIRST_HUMAN_UID = 1000


def check_not_protected(path: str | os.PathLike[str], host: Host, *, role: str = "target",
                        system_subfolders: bool = False) -> None:
    """Raise RefusedError when `path`, literally or resolved through links, is a protected root,
    anybody's home folder, or a folder that holds your home or cachedoctor's own state (`~/..`,
    a link to the folder above the home). With `system_subfolders`, anything inside a system
    tree (`/etc/ssl`, `/usr/lib`, `C:\\Windows\\...`) is refused too: what `clean` demands."""
    literal = os.fspath(path)
    candidates = [literal]
    if not host.is_windows or os.name == "nt":
        with contextlib.suppress(OSError, ValueError):
            candidates.append(os.path.realpath(literal))
    for candidate in candidates:
        reason = protected_reason(candidate, host) or _holds_precious(candidate, host)
        if reason is None and system_subfolders:
            reason = _inside_system_tree(candidate, host)
        if reason:
            raise RefusedError(
                f"refusing to use {literal} as the {role}: it is {reason}",
                hint="cachedoctor only works on a tool's own cache folders",
            )


def _flavour(host: Host) -> Any:
    return ntpath if host.is_windows else posixpath


def _norm(path: str, host: Host) -> str:
    flavour = _flavour(host)
    folded: str = flavour.normcase(flavour.normpath(path))
    return folded.rstrip("\\/") or flavour.sep


def _within(child: str, parent: str, host: Host) -> bool:
    sep = _flavour(host).sep
    c, p = _norm(child, host), _norm(parent, host)
    return c == p or c.startswith(p if p.endswith(sep) else p + sep)


def precious_folders(host: Host) -> list[tuple[str, str]]:
    """(folder, what it is) for every folder that must survive whatever is cleaned: a folder
    holding one of them is refused. Computed once by callers checking many paths."""
    precious: list[tuple[str, str]] = []
    if host.home:
        precious.append((host.home, "your home folder"))
        if not host.is_windows or os.name == "nt":
            precious.append((os.path.realpath(host.home), "your home folder"))
    if host.is_windows == (os.name == "nt"):  # our own folders, when the host is this machine
        from cachedoctor.state import config_dir, state_dir

        precious += [(str(state_dir()), "cachedoctor's state"), (str(config_dir()), "cachedoctor's settings")]
    if not host.is_windows:
        precious += [(home, "a user's home folder") for home in _human_homes()]
    return precious


def _holds_precious(path: str, host: Host) -> str | None:
    """Why `path` must not be emptied or moved away because of what is in it, or None."""
    for folder, what in precious_folders(host):
        if _within(folder, path, host):
            inside = "" if _norm(folder, host) == _norm(path, host) else " is inside it"
            return f"a folder that must stay: {what} ({folder}){inside}"
    if not host.is_windows and posixpath.dirname(_norm(path, host)) in _HOMES_PARENTS:
        return "a user's home folder"
    return None


def _inside_system_tree(path: str, host: Host) -> str | None:
    if host.is_windows:
        windir = host.getenv("SystemRoot") or "C:\\Windows"
        return f"inside the Windows folder {windir}" if _within(path, windir, host) else None
    for tree in _SYSTEM_TREES:
        if _within(path, tree, host):
            return f"inside the system folder {tree}"
    return None


def _human_homes() -> list[str]:
    """Home folders of the people on this machine (root, and uids from 1000 but nobody)."""
    try:
        import pwd
    except ImportError:  # pragma: no cover - Windows
        return []
    homes: list[str] = []
    for entry in pwd.getpwall():
        uid, home = entry.pw_uid, entry.pw_dir
        human = uid == 0 or (FIRST_HUMAN_UID <= uid < 65534)
        if human and home.startswith("/") and home != "/" and os.path.isdir(home):
            homes.append(home)
    return homes


def is_within(child: str | os.PathLike[str], parent: str | os.PathLike[str]) -> bool:
    """True when `child` is `parent` or below it (lexically, after normalisation)."""
    c, p = Path(os.path.abspath(child)), Path(os.path.abspath(parent))
    return c == p or p in c.parents


# --- where `clean` may act at all -------------------------------------------------------------

_USER_ROOTS: dict[str, tuple[str, ...]] = {
    "linux": ("${XDG_CACHE_HOME:-~/.cache}", "${XDG_DATA_HOME:-~/.local/share}",
              "${XDG_CONFIG_HOME:-~/.config}", "${XDG_STATE_HOME:-~/.local/state}",
              "${TMPDIR:-/tmp}", "/var/tmp"),
    "macos": ("~/Library/Caches", "~/Library/Application Support", "~/Library/Logs",
              "~/Library/Developer", "${XDG_CACHE_HOME:-~/.cache}", "${TMPDIR:-/tmp}", "/var/tmp"),
    "windows": ("%LOCALAPPDATA%", "%APPDATA%", "%TEMP%"),
}
_USER_ROOTS["wsl"] = _USER_ROOTS["linux"]
_SHARED_TEMP = ("/tmp", "/var/tmp", "/private/tmp", "/private/var/tmp")


def user_roots(host: Host) -> list[str]:
    """The user's own cache, data, config, state and temp folders on `host`."""
    from cachedoctor.resolve import try_expand

    return [r for t in _USER_ROOTS.get(host.os, ()) if (r := try_expand(t, host))]


def clean_refusal(path: str, host: Host, *, declared: list[str], reason: str | None) -> str | None:
    """Why `clean` must not act at `path`, or None. Allowed: below the user's own cache, data,
    config, state and temp folders, and the folders the built-in profiles declare (`declared`);
    elsewhere only when the location says why (`reason`, a user profile's explicit choice).
    In a shared temp folder (/tmp), only what belongs to this user."""
    roots = [*user_roots(host), *declared]
    if _within(path, host.home, host):  # inside the home only folders below it count (a home
        roots = [r for r in roots if not _within(host.home, r, host)]  # in /tmp is a home)
    inside = [r for r in roots if _within(path, r, host)]
    if not inside and reason is None:
        return ("outside your cache, data, config and temp folders and not a folder any built-in "
                "profile declares; a profile that really means it says so with `outside_user_roots`")
    if not host.is_windows and hasattr(os, "geteuid"):
        for temp in _SHARED_TEMP:
            if _within(path, temp, host) and _norm(path, host) != _norm(temp, host):
                try:
                    owner = os.lstat(path).st_uid
                except OSError:
                    return None
                if owner != os.geteuid():
                    return f"in the shared temp folder {temp} and owned by another user (uid {owner})"
    return None
