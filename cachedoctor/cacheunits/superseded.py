"""A folder the tool stopped using once its successor exists (pip's pre-23.3 `http/` beside
`http-v2/`): a unit of its own, and garbage for `clean --prune` while the successor is there."""

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
from cachedoctor.profiles.model import SupersededUnits


class Superseded(UnitType):
    def find(self, spec: SupersededUnits, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        successor = tree.get(spec.by.strip("/"))
        units: list[Unit] = []
        garbage: list[Garbage] = []
        for rel in match_folders(tree, spec.under):
            unit = Unit(id=rel, type="superseded", path=rel, members=[rel])
            if successor is not None:
                unit.flags.append(f"superseded by {spec.by}: garbage (clean --prune)")
                garbage.append(Garbage(rel, f"superseded by {spec.by}: {spec.why}", [rel],
                                       folder_removal(tree, rel, "superseded folder")))
            units.append(unit)
        return units, garbage

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        return folder_removal(tree, unit.path)
