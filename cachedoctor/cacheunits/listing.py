"""`cachedoctor ls`: the units of a tool's locations, where the tool really keeps them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from cachedoctor.cacheunits.base import Unit
from cachedoctor.cacheunits.survey import Survey, survey
from cachedoctor.safedelete import Rules
from cachedoctor.safety import is_within

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Profile

SortKey = Literal["size", "used", "name"]
SORT_KEYS: tuple[str, ...] = ("size", "used", "name")


class LocationUnits(msgspec.Struct):
    tool: str
    location: str
    name: str
    path: str  # as the tool uses it (may be a relocation link)
    root: str  # where the bytes are
    survey: Survey | None = None
    note: str = ""  # why there is no survey, or what kind of location it is

    def to_json(self, units: list[Unit] | None = None) -> dict[str, Any]:
        doc: dict[str, Any] = {"tool": self.tool, "location": self.location, "name": self.name,
                               "path": self.path, "root": self.root, "note": self.note or None}
        if self.survey is not None:
            doc.update(self.survey.to_json(units))
            if units is not None:
                doc["units_total"] = len(self.survey.units)
        return doc


def nested_rules(rules: Rules, root: str, others: Iterable[str]) -> Rules:
    """Other declared locations inside this root belong to their own rules, never to ours."""
    nested: list[str] = []
    for other in others:
        for candidate in {other, os.path.realpath(other)}:
            if candidate != root and is_within(candidate, root):
                rel = os.path.relpath(candidate, root).replace(os.sep, "/")
                if not rel.startswith("..") and rel not in nested:
                    nested.append(rel)
    if not nested:
        return rules
    return Rules(keep=rules.keep, only=rules.only, exclude=rules.exclude | frozenset(nested))


def list_units(profile: Profile, host: Host, *, location: str | None = None,
               all_profiles: Sequence[Profile] = (), world: World | None = None
               ) -> list[LocationUnits]:
    """Survey every existing place of the profile's locations (or of one of them)."""
    from cachedoctor.locate import observe, pictures

    if location is not None:
        location = profile.require_location(location).id  # as named, in any case
    world = world if world is not None else observe(host)
    others = [place.data or place.path
              for pic in pictures(list(all_profiles) or [profile], world) for place in pic.existing]
    found: list[LocationUnits] = []
    for picture in pictures([profile], world):
        loc = picture.location
        if location is not None and loc.id != location:
            continue
        for place in picture.existing:
            root = os.path.realpath(place.path)
            entry = LocationUnits(profile.id, loc.id, loc.name or loc.id, place.path, root)
            found.append(entry)
            if not os.path.isdir(root):
                entry.note = "not a folder (a relocation link whose target is missing?)"
                continue
            if not loc.units:
                entry.note = ("no units declared: clean applies file rules here "
                              "(`cachedoctor scan` measures it)")
                continue
            spec = loc.clean
            rules = Rules(keep=tuple(spec.keep), only=tuple(spec.only)) if spec else Rules()
            entry.survey = survey(root, loc.units, rules=nested_rules(rules, root, others))
            tool_only = entry.survey.tool_only
            if tool_only is not None:
                command = " ".join(loc.clean.command) if loc.clean and loc.clean.command else None
                entry.note = (f"tool-only: {tool_only.tool_only}"
                              + (f" — `cachedoctor clean {profile.id}` runs `{command}`"
                                 if command else ""))
        if location is not None and not picture.existing:
            found.append(LocationUnits(profile.id, loc.id, loc.name or loc.id,
                                       picture.places[0].path if picture.places else "", "",
                                       note="does not exist"))
    return found


def sort_units(units: Iterable[Unit], by: SortKey) -> list[Unit]:
    """`size`: biggest first; `used`: least recently used first (what an age or size rule
    takes first); `name`: by id."""
    if by == "size":
        return sorted(units, key=lambda u: (-u.bytes, u.id))
    if by == "used":
        return sorted(units, key=lambda u: (u.last_used, u.id))
    return sorted(units, key=lambda u: u.id)
