"""Who a run acts for, observed before anything is read or written: root acts for root.

`sudo cachedoctor ...` was once the way to write a browser's managed policy; cachedoctor now
runs as the user and asks sudo for that one file itself (`cachedoctor.rootfiles`), so nothing
else needs root. Run as root, cachedoctor acts for root:

* HOME is root's own: it goes on, and when sudo started it (SUDO_USER) it says that these are
  root's caches, not that user's, and how to reach theirs;
* HOME, or a folder an XDG variable names for its state, config, cache or data (`sudo -E`), is
  a folder another user owns (sudo with HOME kept, `su` without `-`): it refuses. Every
  file root made there (cachedoctor's state, journal, history, a moved cache's folders) would
  stay root's and break that user's next runs, and root would write through paths that user
  controls (a link in their home to /etc/environment is root's to follow). Acting *as* that
  user would need the privileges dropped for the run, which is what running without sudo does.

sudo(8) sets SUDO_USER to the invoking user's login name. POSIX only: Windows has no sudo.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from cachedoctor.errors import UserInputError

Owner = Callable[[str], "int | None"]  # path -> its owner's uid (None: cannot be read)


def owner_of(path: str) -> int | None:
    try:
        return os.stat(path).st_uid
    except OSError:
        return None


def user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


# where cachedoctor keeps its state and config, and finds caches, when they are set (XDG)
XDG_FOLDERS = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")


def _nearest_owner(path: str, owner: Owner) -> int | None:
    """The owner of `path`, or of its nearest folder that exists (what would hold what root
    made there)."""
    while True:
        uid = owner(path)
        parent = os.path.dirname(path)
        if uid is not None or parent == path:
            return uid
        path = parent


def check(env: Mapping[str, str], euid: int, home: str, owner: Owner = owner_of) -> str | None:
    """Refuse (UserInputError) a root run in another user's home, or with a folder of theirs
    as its XDG state, config, cache or data folder; a note for a root run that sudo started
    for someone (their caches are not these); None otherwise."""
    if euid != 0:
        return None
    hint = ("run cachedoctor as yourself, without sudo (it runs sudo itself for the one policy "
            "file it writes, and shows the command first); or, for root's own caches, with "
            "root's home: `sudo -H cachedoctor ...`")
    # HOME (sudo keeping it, `su` without `-`), then the XDG folders (`sudo -E`: root's HOME,
    # the user's folders kept), each by the owner of what holds it
    places = [(f"HOME={home}", "the home folder of", owner(home))]
    places += [(f"{variable}={folder}", "(sudo -E keeps it) a folder of",
                _nearest_owner(folder, owner))
               for variable in XDG_FOLDERS
               if (folder := env.get(variable, "")).startswith("/")]
    for setting, whose, uid in places:
        if uid is not None and uid != 0:
            name = user_name(uid)
            raise UserInputError(
                f"cachedoctor is running as root with {setting}, {whose} {name}: what root "
                f"wrote there would stay root's and root would follow the links {name} made; "
                "nothing was read or changed", hint=hint)
    sudo_user = env.get("SUDO_USER")
    if sudo_user and sudo_user != "root":
        return (f"running as root, for root's caches (HOME={home}), not {sudo_user}'s: "
                f"for {sudo_user}'s own caches run cachedoctor without sudo (it asks sudo "
                "itself for a browser's policy file)")
    return None


def check_this_run() -> str | None:
    """`check` for this process."""
    if not hasattr(os, "geteuid"):
        return None
    return check(os.environ, os.geteuid(), os.path.expanduser("~"))
