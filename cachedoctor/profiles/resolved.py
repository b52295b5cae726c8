"""A profile's locations turned into concrete paths on a host."""

from __future__ import annotations

import msgspec

from cachedoctor.host import Host
from cachedoctor.profiles.model import Location, Profile
from cachedoctor.resolve import expand_globs, try_expand


class LocationPath(msgspec.Struct, frozen=True):
    tool: str
    location: Location
    path: str  # concrete path; for glob templates one entry per match


def declared_paths(profile: Profile, host: Host) -> list[tuple[Location, str]]:
    """Pure: every location's templates expanded for `host` (globs kept, unresolvable ones dropped)."""
    out: list[tuple[Location, str]] = []
    for location in profile.locations:
        for template in location.paths.for_host(host):
            path = try_expand(template, host)
            if path:
                out.append((location, path))
    return out


def location_paths(
    profile: Profile, host: Host, location_id: str | None = None
) -> list[LocationPath]:
    """Existing paths of the profile's locations (globs expanded; links count, even broken ones)."""
    import os

    found: list[LocationPath] = []
    seen: set[str] = set()
    for location, pattern in declared_paths(profile, host):
        if location_id is not None and location.id != location_id:
            continue
        for path in expand_globs(pattern):
            if path not in seen and os.path.lexists(path):
                seen.add(path)
                found.append(LocationPath(profile.id, location, path))
    return found
