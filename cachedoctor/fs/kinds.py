"""The one link test: what is a link (removed and copied as itself, never entered).

POSIX: ``S_ISLNK``. Windows (CPython 3.8+, bpo-37834): `os.lstat` opens *name-surrogate*
reparse points itself and reports only ``IO_REPARSE_TAG_SYMLINK`` as ``S_IFLNK``; a junction
(``IO_REPARSE_TAG_MOUNT_POINT``) lstats as ``S_IFDIR`` with ``FILE_ATTRIBUTE_REPARSE_POINT``
in ``st_file_attributes`` and its tag in ``st_reparse_tag`` (the test `shutil.rmtree` uses,
Lib/shutil.py ``_rmtree_isdir``). ``DirEntry.is_junction`` exists only from Python 3.12
(cpython#99547), so it is never relied on. Every reparse point whose tag has the name-surrogate
bit (``IsReparseTagNameSurrogate``, winnt.h: "represents another named entity") is a link here:
junctions, symlinks, WSL's ``IO_REPARSE_TAG_LX_SYMLINK`` and any future surrogate. Other reparse
points (cloud placeholders, deduplicated files) are data: lstat resolves them as stat does.
A stat without ``st_reparse_tag`` that has the reparse attribute is treated as a link: not
entering is the safe answer when the kind is unknown.
"""

from __future__ import annotations

import stat
from typing import Any, Literal

LinkKind = Literal["symlink", "junction"]

FILE_ATTRIBUTE_READONLY = 0x1
FILE_ATTRIBUTE_DIRECTORY = 0x10
FILE_ATTRIBUTE_REPARSE_POINT = 0x400
IO_REPARSE_TAG_MOUNT_POINT = 0xA0000003  # a junction (also a volume mount point)
IO_REPARSE_TAG_SYMLINK = 0xA000000C
NAME_SURROGATE_BIT = 0x20000000

_IFMT, _IFDIR, _IFLNK = 0o170000, 0o040000, 0o120000


def link_kind_of(st: Any) -> LinkKind | None:
    """'junction', 'symlink' or None (not a link) for an lstat result."""
    attrs = getattr(st, "st_file_attributes", 0)
    if attrs & FILE_ATTRIBUTE_REPARSE_POINT:
        tag = getattr(st, "st_reparse_tag", None)
        if tag == IO_REPARSE_TAG_MOUNT_POINT:
            return "junction"
        if tag is None or tag & NAME_SURROGATE_BIT or st.st_mode & _IFMT == _IFLNK:
            return "symlink"
        return None  # a reparse point that stands for data, not for another path
    if st.st_mode & _IFMT == _IFLNK:
        return "symlink"
    return None


def is_link(st: Any) -> bool:
    return link_kind_of(st) is not None


def is_real_dir(st: Any) -> bool:
    """A folder to walk into: a directory that is not a link of any kind."""
    return st.st_mode & _IFMT == _IFDIR and link_kind_of(st) is None


def is_dir_link(st: Any) -> bool:
    """A link that Windows removes with rmdir (a junction, a directory symlink)."""
    return link_kind_of(st) is not None and bool(
        getattr(st, "st_file_attributes", 0) & FILE_ATTRIBUTE_DIRECTORY)


def file_type(st: Any) -> str:
    """A short name of the entry's type, links by kind: for messages and comparisons."""
    kind = link_kind_of(st)
    if kind is not None:
        return kind
    mode = st.st_mode
    for test, name in ((stat.S_ISDIR, "folder"), (stat.S_ISREG, "file"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "entry"
