"""Recognising links: POSIX symlinks and Windows junctions/symlinks (by reparse tag)."""

from __future__ import annotations

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
    if target.startswith("\\\\?\\"):
        target = target[4:]
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def is_broken(path: str) -> bool:
    """A link whose target is missing (e.g. the other drive is unplugged)."""
    return link_kind(path) is not None and not os.path.exists(path)
