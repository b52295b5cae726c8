"""Folders whose every child is one independent unit (pip `wheels/`, Cargo `registry/src/*`,
Gradle `caches/modules-2/files-2.1`, npm `_npx`, JetBrains versions, a browser's versions)."""

from __future__ import annotations

from cachedoctor.cacheunits.base import (
    Garbage,
    Gone,
    Step,
    Unit,
    UnitType,
    folder_removal,
    match_folders,
)
from cachedoctor.cacheunits.tree import Tree
from cachedoctor.profiles.model import EntryUnits


class DirectoryEntries(UnitType):
    def find(self, spec: EntryUnits, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        return [Unit(id=rel, type="directory-entries", path=rel, members=[rel])
                for folder in match_folders(tree, spec.under)
                for rel in sorted(tree.child_rels(folder))], []

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        return folder_removal(tree, unit.path)
