"""Links: recognise, create and remove POSIX symlinks and Windows junctions/symlinks.

This is the one seam for links. Windows specifics (junctions through CPython's
`_winapi.CreateJunction`, detection by reparse tag, removal with `rmdir`) are imported lazily;
their pure parts (`junction_target`, `windows_link_plan`) are testable anywhere.
"""

from __future__ import annotations

import ntpath
import os
import stat
from typing import Literal

LinkKind = Literal["symlink", "junction"]

_IO_REPARSE_TAG_MOUNT_POINT = 0xA0000003  # a junction
_IO_REPARSE_TAG_SYMLINK = 0xA000000C


def link_kind(path: str) -> LinkKind | None:
    """'junction', 'symlink', or None for an ordinary entry (or one that does not exist)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    tag = getattr(st, "st_reparse_tag", 0)
    if tag == _IO_REPARSE_TAG_MOUNT_POINT:
        return "junction"
    if stat.S_ISLNK(st.st_mode) or tag == _IO_REPARSE_TAG_SYMLINK:
        return "symlink"
    return None


def link_target(path: str) -> str | None:
    """The link's target as an absolute path (relative symlinks resolved against their folder)."""
    if link_kind(path) is None:
        return None
    try:
        target = os.readlink(path)
    except OSError:
        return None
    target = strip_nt_prefix(target)
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def strip_nt_prefix(target: str) -> str:
    """`\\\\?\\D:\\x` or `\\??\\D:\\x` (how junction targets are stored) -> `D:\\x`."""
    for prefix in ("\\\\?\\", "\\??\\"):
        if target.startswith(prefix):
            return target[len(prefix):]
    return target


def is_broken(path: str) -> bool:
    """A link whose target is missing (e.g. the other drive is unplugged)."""
    return link_kind(path) is not None and not os.path.exists(path)


def points_to(path: str, target: str) -> bool:
    """True when `path` is a link that resolves to the existing folder `target`."""
    if link_kind(path) is None or not os.path.isdir(target):
        return False
    try:
        return os.path.samefile(path, target)
    except OSError:
        return False


def junction_target(target: str) -> str:
    """Pure: the absolute, normalised target a junction must store (junctions can't be relative
    and can only point at local drive paths, not at UNC shares)."""
    norm = ntpath.normpath(strip_nt_prefix(target).replace("/", "\\"))
    drive, _rest = ntpath.splitdrive(norm)
    if not ntpath.isabs(norm) or not drive or drive.startswith("\\\\"):
        raise ValueError(f"a junction needs an absolute local drive path, got {target!r}")
    return norm


def windows_link_plan(path: str, target: str, kind: LinkKind) -> tuple[str, tuple[str, ...]]:
    """Pure: which Windows call creates the link and with which arguments.

    ('CreateJunction', (target, path)) for a junction (no admin rights needed), or
    ('symlink', (target, path)) for a directory symlink (needs Developer Mode or admin).
    """
    if kind == "junction":
        return "CreateJunction", (junction_target(target), ntpath.normpath(path))
    return "symlink", (ntpath.normpath(target), ntpath.normpath(path))


def create_link(path: str, target: str, kind: LinkKind = "symlink") -> None:
    """Create a directory link at `path` pointing at `target` (which should exist).

    POSIX only knows symlinks; asking for a junction there is an error. Raises OSError when the
    link cannot be created; never replaces an existing entry.
    """
    if os.name != "nt":
        if kind == "junction":
            raise OSError(f"junctions exist only on Windows; cannot create one at {path}")
        os.symlink(target, path, target_is_directory=True)
        return
    _create_windows_link(path, target, kind)  # pragma: no cover - Windows only


def _create_windows_link(path: str, target: str, kind: LinkKind) -> None:  # pragma: no cover
    call, args = windows_link_plan(path, target, kind)
    if call == "CreateJunction":
        import _winapi

        _winapi.CreateJunction(*args)  # type: ignore[attr-defined,unused-ignore]
    else:
        os.symlink(args[0], args[1], target_is_directory=True)


def remove_link(path: str) -> None:
    """Remove the link at `path` without touching what it points at.

    Refuses (ValueError) when `path` is not a link, so it can never delete real data. A junction
    and a directory symlink on Windows are removed with rmdir (which deletes the reparse point
    only); a POSIX symlink with unlink.
    """
    kind = link_kind(path)
    if kind is None:
        raise ValueError(f"{path} is not a link; refusing to remove it")
    if os.name == "nt" and (kind == "junction" or os.path.isdir(path)):  # pragma: no cover
        os.rmdir(path)
        return
    os.unlink(path)


def default_kind(os_name: str) -> LinkKind:
    """The link `move` creates by default: a junction on Windows, a symlink elsewhere."""
    return "junction" if os_name == "windows" else "symlink"
