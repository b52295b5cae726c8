"""One location seen as units: the listing, each declared type's units and garbage, and the
numbers computed alike for every type.

A unit's size is the allocated bytes of its members, each inode once (`du -s` of its folder,
`du -c` of its files); `shared_bytes` is the part another unit uses too or that has names outside
the location (a hard link into a venv): deleting the unit frees `frees` = size - shared.
"Last used" is the newest use of any of its files by the location's clock (`Clock`). Files in no
unit (or in a content-addressed store) are the location's `loose` files: file rules apply there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from cachedoctor import collector
from cachedoctor.cacheunits.base import Garbage, Unit
from cachedoctor.cacheunits.clock import Clock, usage_clock
from cachedoctor.cacheunits.registry import unit_type
from cachedoctor.cacheunits.tree import Entry, Tree, allocated, list_tree
from cachedoctor.safedelete import Rules


class Survey(msgspec.Struct):
    root: str
    tree: Tree
    clock: Clock
    units: list[Unit] = msgspec.field(default_factory=list)
    garbage: list[Garbage] = msgspec.field(default_factory=list)
    loose: list[Entry] = msgspec.field(default_factory=list)  # files evicted one by one
    expanded: dict[str, list[Entry]] = msgspec.field(default_factory=dict)  # unit id -> its entries
    users: dict[tuple[int, int], set[str]] = msgspec.field(default_factory=dict)  # inode -> unit ids
    pinned: list[str] = msgspec.field(default_factory=list)  # a type's own structure: never loose

    @property
    def total(self) -> int:
        return self.tree.total()

    def unit(self, unit_id: str) -> Unit | None:
        return next((u for u in self.units if u.id == unit_id), None)

    @property
    def tool_only(self) -> Unit | None:
        return next((u for u in self.units if u.tool_only is not None), None)

    def to_json(self, units: Sequence[Unit] | None = None) -> dict[str, Any]:
        """`units`: the ones to show (`ls --limit`, sorted), each made once; default all."""
        return {
            "root": self.root,
            "bytes": self.total,
            "files": self.tree.files(),
            "clock": self.clock.to_json(),
            "units": [u.to_json() for u in (self.units if units is None else units)],
            "garbage": [g.to_json() for g in self.garbage],
            "loose_files": len(self.loose),
            "loose_bytes": allocated(self.loose),
            "errors": self.tree.errors,
        }


def survey(root: str, specs: Sequence[Any], *, rules: Rules = Rules(),
           clock: Clock | None = None, tree: Tree | None = None) -> Survey:
    """List `root` once (or take its listing `tree`) and find the units of every declaration
    in `specs`."""
    with collector.paused():  # tens of thousands of objects, no cycles
        tree = tree if tree is not None else list_tree(root, rules=rules, reads=_reads(specs))
        result = Survey(root, tree, clock or usage_clock(root))
        seen: set[str] = set()
        for spec in specs:
            kind = unit_type(spec.type)
            result.pinned.extend(kind.pinned(spec, tree))  # structure file rules leave alone
            units, garbage = kind.find(spec, tree)
            for unit in units:
                if unit.id not in seen:  # two declarations over one folder: the first names it
                    seen.add(unit.id)
                    result.units.append(unit)
            result.garbage.extend(garbage)
        _measure(result)
    return result


def _reads(specs: Sequence[Any]) -> Callable[[str], bool] | None:
    """The folders whose small files any of these declarations reads (`UnitType.reads`)."""
    tests = [test for spec in specs if (test := unit_type(spec.type).reads(spec)) is not None]
    if len(tests) <= 1:
        return tests[0] if tests else None
    return lambda rel: any(test(rel) for test in tests)


def _measure(s: Survey) -> None:
    tree, users, clock = s.tree, s.users, s.clock
    claimed: set[str] = set(s.pinned)  # members of whole units: everything below them is theirs
    files_of: dict[str, list[Entry]] = {}
    for unit in s.units:
        if len(unit.members) == 1:
            entries = list(tree.below(unit.members[0]))
        else:  # members may overlap: each entry once
            entries = list({e.rel: e for m in unit.members for e in tree.below(m)}.values())
        s.expanded[unit.id] = entries
        if not unit.file_level and unit.tool_only is None:
            claimed.update(unit.members)
        uid = unit.id
        files = files_of[uid] = [e for e in entries if not e.is_dir]
        for e in files:
            named = users.get(e.inode)
            if named is None:
                users[e.inode] = {uid}
            else:
                named.add(uid)
    for unit in s.units:
        entries, files = s.expanded[unit.id], files_of[unit.id]
        unit.bytes = allocated(entries)
        unit.files = len(files)
        own = tree.get(unit.path)
        newest = clock.newest(files)
        unit.last_used = newest if newest is not None else own.mtime if own is not None else 0.0
        shared: list[Entry] = []
        outside = 0
        counted: set[tuple[int, int]] = set()
        for e in files:
            inode = e.inode
            if inode in counted:
                continue  # another name of a file already counted
            counted.add(inode)
            names_out = tree.outside_names(e) if e.nlink > 1 else 0
            outside += names_out
            if names_out or len(users[inode]) > 1:
                shared.append(e)
        unit.shared_bytes = allocated(shared)
        unit.frees = unit.bytes - unit.shared_bytes
        unit.outside_names = outside
        if outside:
            unit.flags.append(f"hard-linked: {outside} name{'s' if outside > 1 else ''} outside "
                              "the cache (those files free nothing)")
    s.loose = _unclaimed_files(tree, claimed)
    for g in s.garbage:
        parts = {e.rel: e for member in g.members for e in tree.below(member)}
        g.bytes = allocated(e for e in parts.values() if tree.outside_names(e) == 0)
        g.files = sum(1 for e in parts.values() if not e.is_dir)


def _unclaimed_files(tree: Tree, claimed: set[str]) -> list[Entry]:
    """The files below no claimed entry, in listing order: the walk does not enter what a
    unit holds (a unit's members are most of a cache)."""
    root = tree.get("")
    if root is None:
        return []
    found: list[Entry] = []
    children = tree.children
    stack = [root]
    while stack:
        entry = stack.pop()
        if entry.rel in claimed:
            continue
        if entry.is_dir:
            stack.extend(reversed(children.get(entry.rel, ())))
        else:
            found.append(entry)
    return found
