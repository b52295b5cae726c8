"""Links: recognise, create and remove POSIX symlinks and Windows junctions/symlinks.

The one link test is `cachedoctor.fs.kinds`; the calls go through the tree layer's seam
(`cachedoctor.fs.seam`), so a junction is recognised by its reparse tag, removed with rmdir and
created with `_winapi.CreateJunction` on Windows (and by the same code over the Windows double
in the tests). The pure parts (`junction_target`, `strip_nt_prefix`) are testable anywhere.
"""

from __future__ import annotations

import ntpath
import os
import posixpath
from typing import TYPE_CHECKING

from cachedoctor.fs import kinds
from cachedoctor.fs.kinds import LinkKind

if TYPE_CHECKING:
    from cachedoctor.fs.seam import Ops

__all__ = ["LinkKind", "create_link", "default_kind", "is_broken", "junction_target",
           "link_kind", "link_target", "points_to", "remove_link", "strip_nt_prefix"]


def _seam() -> Ops:
    from cachedoctor.fs import seam

    return seam.current()


def link_kind(path: str) -> LinkKind | None:
    """'junction', 'symlink', or None for an ordinary entry (or one that does not exist)."""
    try:
        st = _seam().lstat_path(path)
    except OSError:
        return None
    return kinds.link_kind_of(st)


def link_target(path: str) -> str | None:
    """The link's target as an absolute path (relative symlinks resolved against their folder;
    a ``\\\\?\\Volume{GUID}\\`` junction target is absolute as it is, cpython gh-89760)."""
    if link_kind(path) is None:
        return None
    try:
        target = strip_nt_prefix(_seam().readlink_path(path))
    except OSError:
        return None
    if _is_volume_path(target):
        return target
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def _is_volume_path(path: str) -> bool:
    return path.startswith("\\\\?\\Volume{") or path.startswith("\\??\\Volume{")


def strip_nt_prefix(target: str) -> str:
    """How Windows stores a junction's target -> the path a user knows: ``\\\\?\\D:\\x`` and
    ``\\??\\D:\\x`` -> ``D:\\x``, ``\\\\?\\UNC\\srv\\share`` -> ``\\\\srv\\share``. A volume GUID
    path (``\\\\?\\Volume{...}\\x``) has no shorter absolute form and is kept as it is."""
    for prefix in ("\\\\?\\", "\\??\\"):
        if target.startswith(prefix):
            rest = target[len(prefix):]
            if rest.upper().startswith("UNC\\"):
                return "\\\\" + rest[4:]
            if ntpath.splitdrive(rest)[0] or rest.startswith("/"):  # "/": the tests' double
                return rest
            return "\\\\?\\" + rest  # Volume{GUID}\\...: absolute only with its prefix
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
    """Pure: the absolute, normalised target a junction must store. Junctions cannot be
    relative and can only point at local volumes (a drive path or a volume GUID path), not at
    UNC shares. On a POSIX host (the tests' Windows double) an absolute POSIX path stands for a
    local drive path."""
    stripped = strip_nt_prefix(target)
    if _is_volume_path(stripped):
        return stripped
    if os.name != "nt" and posixpath.isabs(stripped) and "\\" not in stripped:
        return posixpath.normpath(stripped)
    norm = ntpath.normpath(stripped.replace("/", "\\"))
    drive, _rest = ntpath.splitdrive(norm)
    if not ntpath.isabs(norm) or not drive or drive.startswith("\\\\"):
        raise ValueError(f"a junction needs an absolute local drive path, got {target!r}")
    return norm


def create_link(path: str, target: str, kind: LinkKind = "symlink") -> None:
    """Create a directory link at `path` pointing at `target` (which should exist).

    POSIX only knows symlinks; asking for a junction there is an error. Raises OSError when the
    link cannot be created; never replaces an existing entry.
    """
    _seam().create_link(path, target, kind)


def remove_link(path: str) -> None:
    """Remove the link at `path` without touching what it points at.

    Refuses (ValueError) when `path` is not a link, so it can never delete real data. A junction
    and a directory symlink on Windows are removed with rmdir (which deletes the reparse point
    only); a POSIX symlink with unlink.
    """
    ops = _seam()
    try:
        st = ops.lstat_path(path)
    except FileNotFoundError:
        st = None
    if st is None or not kinds.is_link(st):
        raise ValueError(f"{path} is not a link; refusing to remove it")
    ops.remove_link(path, st)


def default_kind(os_name: str) -> LinkKind:
    """The link `move` creates by default: a junction on Windows, a symlink elsewhere."""
    return "junction" if os_name == "windows" else "symlink"
