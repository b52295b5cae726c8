"""A store only the tool's own command may clean (hard links or symlinks into its consumers,
read-only files, an index of its own): one row, and no file rules."""

from __future__ import annotations

from cachedoctor.cacheunits.base import Garbage, Gone, Step, Unit, UnitType
from cachedoctor.cacheunits.tree import Tree
from cachedoctor.profiles.model import ToolOnlyUnits


class ToolOnly(UnitType):
    def find(self, spec: ToolOnlyUnits, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        return [Unit(id=".", type="tool-only", path="", members=[""], tool_only=spec.why,
                     flags=["tool-only: cleaned by the tool's own command"])], []

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        return []  # never by file rules
