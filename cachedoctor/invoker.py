"""Who a run acts for: the user who typed `sudo cachedoctor ...`, not root.

sudo runs cachedoctor as root with root's HOME (or, with HOME kept, the user's HOME but root as
the owner of everything made there). cachedoctor works on one user's caches and keeps that
user's state (journal, history, relocation records), so a run by sudo acts for the invoking
user: `adopt` (once, before any command) checks SUDO_USER against the passwd database and
SUDO_UID/SUDO_GID, and gives this process that user's HOME, USER and LOGNAME, so every place
that resolves "my home" (`Host.current`, platformdirs' state/config folders, `~`) resolves
theirs. The run stays root for what needed sudo (a browser's policy file in /etc), and what it
creates in the user's folders is given back to them (`give_back`, `makedirs`,
`give_back_tree`): a file or folder root made where the user owns the folder becomes theirs.

sudo(8) sets SUDO_USER, SUDO_UID and SUDO_GID to the invoking user's login name, user and group
id. The passwd lookup is `pwd.getpwnam`; with `CACHEDOCTOR_SYSTEM_ROOT` (tests) it is that
root's `etc/passwd`, so tests never need a real account. POSIX only: Windows has no sudo.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass

from cachedoctor.errors import UserInputError


@dataclass(frozen=True)
class InvokingUser:
    name: str
    uid: int
    gid: int
    home: str


PasswdEntry = tuple[int, int, str]  # uid, primary gid, home
Lookup = Callable[[str], "PasswdEntry | None"]

_acting_for: InvokingUser | None = None


def acting_for() -> InvokingUser | None:
    """The sudo user this run acts for (None: it acts for whoever runs it)."""
    return _acting_for


def passwd_entry(name: str) -> PasswdEntry | None:
    """`name`'s passwd entry: the system's, or (tests) the system root's `etc/passwd`."""
    from cachedoctor.locate.files import system_path, system_root

    if system_root():
        try:
            with open(system_path("/etc/passwd"), encoding="utf-8") as fh:
                for line in fh:
                    fields = line.rstrip("\n").split(":")
                    if len(fields) >= 7 and fields[0] == name:
                        return int(fields[2]), int(fields[3]), fields[5]
        except (OSError, ValueError):
            return None
        return None
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid, entry.pw_dir


def invoking_user(env: MutableMapping[str, str], euid: int,
                  lookup: Lookup = passwd_entry) -> InvokingUser | None:
    """The user sudo ran this for: None unless root runs it for SUDO_USER (not root itself).
    Variables that do not agree with the passwd database are refused: they are not sudo's."""
    name = env.get("SUDO_USER")
    if euid != 0 or not name or name == "root":
        return None
    entry = lookup(name)
    hint = "run cachedoctor through sudo itself (which sets these), or as your user without sudo"
    if entry is None:
        raise UserInputError(f"SUDO_USER={name} is not a user of this system (no passwd entry)",
                             hint=hint)
    uid, primary_gid, home = entry
    given_uid, given_gid = env.get("SUDO_UID", ""), env.get("SUDO_GID", "")
    if given_uid != str(uid):
        raise UserInputError(f"SUDO_UID={given_uid or '(unset)'} does not match the passwd entry "
                             f"of SUDO_USER={name} (uid {uid})", hint=hint)
    if not given_gid.isdigit() or int(given_gid) not in _groups(name, primary_gid):
        raise UserInputError(f"SUDO_GID={given_gid or '(unset)'} is not a group of SUDO_USER={name}",
                             hint=hint)
    if not os.path.isabs(home) or not os.path.isdir(home):
        raise UserInputError(f"the home folder of SUDO_USER={name}, {home or '(none)'}, "
                             "does not exist", hint="cachedoctor works on a user's caches; "
                             "run it as a user with a home folder")
    return InvokingUser(name, uid, int(given_gid), home)


def _groups(name: str, primary_gid: int) -> set[int]:
    try:
        return {primary_gid, *os.getgrouplist(name, primary_gid)}
    except (OSError, AttributeError):
        return {primary_gid}


def adopt(env: MutableMapping[str, str] | None = None, euid: int | None = None) -> InvokingUser | None:
    """Act for the sudo user from here on (see the module docstring); None when not under sudo."""
    global _acting_for
    if not hasattr(os, "geteuid"):
        return None
    env = os.environ if env is None else env
    user = invoking_user(env, os.geteuid() if euid is None else euid)
    if user is not None:
        env.update(HOME=user.home, USER=user.name, LOGNAME=user.name)
    _acting_for = user
    return user


def give_back(path: str | os.PathLike[str]) -> None:
    """Make what this run (as root) created the sudo user's when it lies in a folder of theirs;
    elsewhere (/etc) it stays root's. Links themselves are changed, never what they point at."""
    user = _acting_for
    if user is None:
        return
    with contextlib.suppress(OSError):
        path = os.fspath(path)
        if (_made_by_this_run(os.lstat(path))
                and os.lstat(os.path.dirname(os.path.abspath(path))).st_uid == user.uid):
            os.chown(path, user.uid, user.gid, follow_symlinks=False)


def makedirs(path: str | os.PathLike[str]) -> None:
    """`os.makedirs(path, exist_ok=True)`, each folder it creates given back (`give_back`)."""
    path = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    current = path
    while not os.path.isdir(current) and os.path.dirname(current) != current:
        missing.append(current)
        current = os.path.dirname(current)
    os.makedirs(path, exist_ok=True)
    for folder in reversed(missing):
        give_back(folder)


def give_back_tree(root: str | os.PathLike[str]) -> None:
    """Give cachedoctor's own folder (state, config, logs) and everything in it that root owns
    back to the sudo user: its files (the history database, locks) are theirs by definition."""
    user = _acting_for
    if user is None or not os.path.isdir(root):
        return
    from cachedoctor.safety import is_within

    root = os.path.abspath(os.fspath(root))
    if is_within(root, user.home):  # the folders above it the run made (~/.local/state)
        parts = os.path.relpath(root, user.home).split(os.sep)
        for depth in range(1, len(parts) + 1):
            give_back(os.path.join(user.home, *parts[:depth]))
    # fwalk: folders are opened relative to their parent's descriptor, never through a link,
    # so a folder swapped for a link to /etc while this runs as root is not walked into
    for _folder, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                if _made_by_this_run(os.lstat(name, dir_fd=dir_fd)):
                    os.chown(name, user.uid, user.gid, dir_fd=dir_fd, follow_symlinks=False)


def _made_by_this_run(st: os.stat_result) -> bool:
    """Root's, and not a hard link: a second name in the user's folder could be a root file
    from elsewhere (/etc/shadow) that the user linked there to be given it."""
    import stat

    return st.st_uid == 0 and (stat.S_ISDIR(st.st_mode) or st.st_nlink == 1)
