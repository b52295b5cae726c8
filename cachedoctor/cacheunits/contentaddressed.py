"""A store the tool indexes itself (npm `_cacache`, pip `http-v2`, ccache): each file is an
independent entry the tool re-fetches or rebuilds when missing, so it is evicted file by file
(least recently used first); the store as a whole is one row of `ls`."""

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
from cachedoctor.profiles.model import ContentAddressedUnits


class ContentAddressed(UnitType):
    def find(self, spec: ContentAddressedUnits, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        return [Unit(id=rel or ".", type="content-addressed", path=rel, members=[rel],
                     file_level=True, flags=["content-addressed: evicted file by file"])
                for rel in match_folders(tree, spec.under)], []

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        if unit.path:
            return folder_removal(tree, unit.path)
        return [Step("", None, what="the whole store")]
