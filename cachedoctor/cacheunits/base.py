"""What every unit type shares: the unit, its revisions, garbage, deletion steps, the protocol.

A unit type only says which entries make up each unit (`members`: folders stand for everything
under them; an entry may belong to several units, like an Ollama blob two models use) and in
which order a unit's parts must go (`Step`s). Sizes, what deleting frees, sharing and "last
used" are computed for every type alike from the listing (`cachedoctor.cacheunits.survey`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from cachedoctor.cacheunits.tree import Entry, Tree, read_text


class Step(msgspec.Struct, frozen=True):
    """One call of the deleter: everything below `base` (a folder, relative to the location),
    or only the entries `names` (relative to the location, each with the inode listed);
    `remove_base` then removes the emptied folder itself. A unit's steps run in order and stop
    at the first one that could not remove everything it was given."""

    base: str
    names: dict[str, int] | None = None
    remove_base: bool = False
    what: str = ""


class Revision(msgspec.Struct):
    """A Hugging Face revision: `snapshots/<commit>` and the refs that point to it."""

    commit: str
    refs: list[str]
    bytes: int  # allocated bytes of the blobs and files it uses, each once
    files: int  # files in the snapshot
    last_modified: float
    blobs: set[str] = msgspec.field(default_factory=set)  # rels of the blobs it links to

    @property
    def detached(self) -> bool:
        return not self.refs

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "refs": sorted(self.refs), "bytes": self.bytes,
                "files": self.files, "last_modified": self.last_modified,
                "detached": self.detached}


class Unit(msgspec.Struct):
    """One listable, deletable item of a location."""

    id: str
    type: str
    path: str  # the folder or file that is the unit, relative to the location
    members: list[str]  # entries that belong to it (a folder: everything under it)
    revisions: list[Revision] = msgspec.field(default_factory=list)
    refs: list[str] = msgspec.field(default_factory=list)
    flags: list[str] = msgspec.field(default_factory=list)
    file_level: bool = False  # content-addressed: its files are evicted one by one
    tool_only: str | None = None  # why only the tool's own command may clean it
    # measured by the survey
    bytes: int = 0  # allocated, each inode once (du of its members)
    shared_bytes: int = 0  # of which other units use too, or linked from outside the location
    frees: int = 0  # what deleting it alone frees
    files: int = 0  # non-folder entries (what the deleter counts)
    last_used: float = 0.0
    outside_names: int = 0  # names its files have outside the location (hard links)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "path": self.path,
            "bytes": self.bytes,
            "shared_bytes": self.shared_bytes,
            "frees_bytes": self.frees,
            "files": self.files,
            "last_used": self.last_used,
            "refs": sorted(self.refs),
            "revisions": [r.to_json() for r in self.revisions],
            "flags": self.flags,
            "file_level": self.file_level,
            "tool_only": self.tool_only,
            "outside_names": self.outside_names,
        }


class Garbage(msgspec.Struct):
    """What the tool itself would call garbage (`clean --prune`): a detached revision, an
    interrupted download, a blob no manifest uses, a dangling link, a superseded folder."""

    id: str
    reason: str
    members: list[str]
    steps: list[Step]
    bytes: int = 0  # measured by the survey: what removing it frees
    files: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "reason": self.reason, "bytes": self.bytes, "files": self.files}


Gone = Callable[[Entry], bool]  # True when no unit that stays uses this entry


class UnitType(Protocol):
    """One registered kind of unit (`units: - type: NAME` in a profile). Each type subclasses
    it, so the optional parts below have their defaults (no structure to pin, no revisions)."""

    def find(self, spec: Any, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        """The units and the garbage of one declaration in this listing."""
        ...

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        """The steps that delete `unit`; shared parts only where `gone` says nobody else
        keeps them."""
        ...

    def reads(self, spec: Any) -> Callable[[str], bool] | None:
        """Which folders' small files `find` reads (`read_small`), as a test of the folder's
        rel: the listing reads them while each such folder is open. None: none."""
        return None

    def pinned(self, spec: Any, tree: Tree) -> list[str]:
        """Structure of the store that file rules must leave alone (relative paths)."""
        return []

    def revision_removal(self, unit: Unit, tree: Tree, commit: str, gone: Gone) -> list[Step]:
        """The steps that delete one revision of `unit` (none where units have no revisions)."""
        return []

    def commit_of(self, unit: Unit, wanted: str) -> str | None:
        """The revision of `unit` that `wanted` names (a commit or a ref), if any."""
        return None


def folder_removal(tree: Tree, rel: str, what: str = "") -> list[Step]:
    """Delete one folder with all it holds, or one file."""
    entry = tree.get(rel)
    if entry is None:
        return []
    if entry.is_dir:
        return [Step(rel, None, remove_base=True, what=what)]
    parent = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return [Step(parent, {rel: entry.ino}, what=what)]


def names_step(tree: Tree, base: str, rels: list[str] | set[str], what: str = "") -> list[Step]:
    """Delete these entries (files, or folders with everything under them) below `base`."""
    names: dict[str, int] = {}
    for rel in rels:
        for e in tree.below(rel):
            if not e.is_dir:
                names[e.rel] = e.ino
    return [Step(base, names, what=what)] if names else []


def match_folders(tree: Tree, pattern: str) -> list[str]:
    """Folders of the listing matching a glob relative to the root ('.' is the root)."""
    parts = [p for p in pattern.strip("/").split("/") if p not in ("", ".")]
    current = [""]
    for part in parts:
        current = [
            rel for folder in current for rel in tree.child_rels(folder)
            if fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], part)
            and (e := tree.get(rel)) is not None and e.is_dir
        ]
    return sorted(current)


def read_small(tree: Tree, rel: str) -> str | None:
    """The text of a small file of the listing (a ref, a manifest): as the listing read it
    (`UnitType.reads`), else read now by path (`read_text`: the inode listed, no atime moved,
    no link followed)."""
    text = tree.contents.get(rel)
    if text is not None:
        return text
    entry = tree.get(rel)
    return read_text(os.path.join(tree.root, rel), entry) if entry is not None else None
