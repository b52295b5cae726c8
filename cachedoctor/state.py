"""Where cachedoctor keeps its own files: config (quotas), state (journal, history, locks), logs."""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from pathlib import Path
from typing import BinaryIO

APP = "cachedoctor"
STALE_AFTER = 30 * 86400  # seconds: another install's cache no run has written since is pruned


def config_dir() -> Path:
    xdg = _xdg_folder("XDG_CONFIG_HOME", ".config")
    if xdg is not None:
        return Path(xdg, APP)
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP, appauthor=False))


def state_dir() -> Path:
    xdg = _xdg_folder("XDG_STATE_HOME", ".local/state")
    if xdg is not None:
        return Path(xdg, APP)
    from platformdirs import user_state_dir

    return Path(user_state_dir(APP, appauthor=False))


def log_dir() -> Path:
    xdg = _xdg_folder("XDG_STATE_HOME", ".local/state")
    if xdg is not None:
        return Path(xdg, APP, "log")
    from platformdirs import user_log_dir

    return Path(user_log_dir(APP, appauthor=False))


def _xdg_folder(variable: str, default: str) -> str | None:
    """On Linux, the base folder the XDG Base Directory spec names: `variable` when it holds an
    absolute path (a relative one is invalid and ignored), else `default` below an absolute
    HOME, else the passwd entry's home. This is what platformdirs answers there
    (tests/test_state.py compares them), read here because importing platformdirs, with the
    tempfile, shutil and random it imports, is about 4 ms of every hot command's start.
    None elsewhere (Windows asks the shell API, macOS has its own folders, Android an app's),
    and where no home is known: platformdirs answers then."""
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel") or "ANDROID_DATA" in os.environ:
        return None
    value = os.environ.get(variable, "")
    if os.path.isabs(value):
        return value
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        try:
            import pwd

            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError):
            return None
        if not os.path.isabs(home):
            return None
    return os.path.join(home.rstrip("/") or "/", default)


def journal_dir() -> Path:
    """One file per unfinished move or restore (see cachedoctor.relocate.journal)."""
    return state_dir() / "journal"


def relocations_file() -> Path:
    """What is relocated where (see cachedoctor.relocate.journal's registry)."""
    return state_dir() / "relocations.json"


def install_file(name: str) -> Path:
    """`name` in the state folder, tagged with this installation (`install_tag`) before its
    suffix: `profile-index.1a2b3c4d.pickle`. A cache only one install's code can use (the
    profile index, the command specs) is kept per install, so two installs sharing a state
    folder (pipx and a venv, a checkout on PYTHONPATH) do not each find the other's stamp and
    rewrite the file on every run."""
    stem, _, suffix = name.partition(".")
    return state_dir() / f"{stem}.{install_tag()}.{suffix}"


@functools.cache
def install_tag() -> str:
    """Eight hex digits naming the folder this package runs from (a CRC: two installs that
    share one only share their caches, as every install did before)."""
    import zlib

    return f"{zlib.crc32(os.fsencode(os.path.dirname(os.path.abspath(__file__)))):08x}"


def mark_used(file: BinaryIO, path: Path) -> None:
    """A cache read and found current (`file`, open at `path`) counts as written, so another
    install does not prune it as unwritten (`prune_other_installs`): its time is renewed once
    it is older than half STALE_AFTER. Best effort."""
    try:
        if time.time() - os.fstat(file.fileno()).st_mtime > STALE_AFTER / 2:
            os.utime(path)
    except OSError:
        pass


def prune_other_installs(path: Path) -> list[str]:
    """Remove the same cache of other installs (`install_file`), and the untagged one earlier
    versions kept, when no run has written it for STALE_AFTER: an install since removed. Only
    regular files of this user's own are removed, never what a link points to; what cannot be
    examined or removed stays (best effort). Returns the names removed."""
    stem, _, rest = path.name.partition(".")
    suffix = rest.partition(".")[2]
    same_kind = re.compile(rf"{re.escape(stem)}(?:\.[0-9a-f]{{8}})?\.{re.escape(suffix)}")
    removed: list[str] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    old = time.time() - STALE_AFTER
    for name in names:
        if name == path.name or not same_kind.fullmatch(name):
            continue
        other = path.parent / name
        try:
            st = os.lstat(other)
            if (st.st_mode & 0o170000) != 0o100000 or st.st_mtime > old or (
                    hasattr(os, "getuid") and st.st_uid != os.getuid()):
                continue
            os.unlink(other)  # a link put in its place since is removed itself, not followed
        except OSError:
            continue
        removed.append(name)
    return removed


def ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
