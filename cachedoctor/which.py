"""`which PATH`: which tool's cache a folder is, whether deleting it is safe, and how to move it.

The answer comes from the same picture every command acts on: where each tool really keeps
its locations (settings, variables and links observed), their default folders, and the
protected roots. Nothing here changes anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from cachedoctor.locate.effective import Picture, Place
from cachedoctor.locate.world import World
from cachedoctor.profiles.model import Profile

Relation = Literal["is", "inside", "contains", "default"]


class Owner(msgspec.Struct, frozen=True):
    tool: str
    tool_name: str
    location: str
    kind: str
    place: str  # the location's folder
    relation: Relation  # PATH is the folder, is inside it, contains it, or is its unused default
    how: str  # how the location's folder was decided
    safe_to_delete: bool
    clean_command: list[str] | None
    move_methods: list[str]
    how_to_move: list[str]
    link_forbidden: str | None

    def to_json(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class WhichResult(msgspec.Struct):
    path: str
    exists: bool
    owners: list[Owner] = msgspec.field(default_factory=list)
    protected: str | None = None  # why cachedoctor never touches it (a system folder...)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "exists": self.exists, "protected": self.protected,
                "owners": [o.to_json() for o in self.owners]}


def which(path: str, profiles: Sequence[Profile], world: World) -> WhichResult:
    from cachedoctor.errors import UserInputError
    from cachedoctor.locate import pictures
    from cachedoctor.relocate.plan import relocation_methods
    from cachedoctor.safety import protected_reason

    if not path.strip():
        raise UserInputError("which needs a path: a folder or file, e.g. the one filling your drive")
    host = world.host
    target = os.path.abspath(os.path.expanduser(path))
    real = os.path.realpath(target)
    result = WhichResult(target, os.path.lexists(target), protected=protected_reason(real, host))
    by_id = {p.id: p for p in profiles}
    for pic in pictures(profiles, world):
        profile = by_id[pic.tool]
        for folder, how, unused in _folders(pic):
            relation = _relation(target, real, folder, world)
            if relation is None or (relation == "contains" and not world.files.lexists(folder)):
                continue  # a folder it would hold if it existed says nothing about PATH
            loc = pic.location
            result.owners.append(Owner(
                pic.tool, profile.name, loc.id, loc.kind, folder,
                "default" if unused and relation == "is" else relation, how,
                loc.safe_to_delete, list(loc.clean.command) if loc.clean and loc.clean.command else None,
                [m.method for m in relocation_methods(loc, host)],
                loc.how_to_move.for_host(host) if loc.how_to_move else [], loc.link_forbidden))
    order = {"is": 0, "inside": 1, "default": 2, "contains": 3}
    result.owners.sort(key=lambda o: (order[o.relation], -len(o.place)))
    return result


def _folders(pic: Picture) -> list[tuple[str, str, bool]]:
    places: list[Place] = [*pic.places, *(pic.shell or ())]
    out = [(p.data or p.path, p.how(), False) for p in places]
    out += [(p.path, p.how(), False) for p in places if p.data and p.data != p.path]
    out += [(path, "default, no longer used", True) for path in pic.unused]
    return list(dict.fromkeys(out))


def _relation(target: str, real: str, folder: str, world: World) -> Relation | None:
    from cachedoctor.safety import is_within

    folder_real = world.files.realpath(folder)
    for t in {target, real}:
        for f in {folder, folder_real}:
            if os.path.normcase(t) == os.path.normcase(f):
                return "is"
    if any(is_within(t, f) for t in {target, real} for f in {folder, folder_real}):
        return "inside"
    if any(is_within(f, t) for t in {target, real} for f in {folder, folder_real}):
        return "contains"
    return None
