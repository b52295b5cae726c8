"""Where every cache really is, and why: the one picture every command acts on.

`observe()` reads the live world once; `pictures()` resolves profiles in it (pure, see
`effective`). Nothing here changes anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.locate.effective import Picture
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Profile


def observe(host: Host | None = None) -> World:
    from cachedoctor.locate.live import observe as live

    return live(host)


def pictures(profiles: Iterable[Profile], world: World) -> list[Picture]:
    from cachedoctor.locate.effective import resolve_profile

    return [picture for profile in profiles for picture in resolve_profile(profile, world)]


def picture(profile: Profile, location_id: str, world: World) -> Picture:
    from cachedoctor.locate.effective import resolve_location

    return resolve_location(profile, profile.require_location(location_id), world)


def present(profile: Profile, world: World) -> bool:
    """Whether the tool is here: one of its locations exists (where its settings put it), a
    setting of its own names a location, or cachedoctor moved one. (Only the places of each
    location: the rest of its picture is not needed to say so.)"""
    from cachedoctor.locate.effective import located, setting_variables

    for location in profile.locations:
        key = f"{profile.id}/{location.id}"
        if key in world.records or key in world.pending:
            return True
        places, shell = located(location, world, [])
        if any(place.exists for place in (*places, *(shell or ()))):
            return True
        names = {n.upper() for n in setting_variables(location)}
        if any(step.kind in ("config", "policy")
               or (step.kind == "env" and (step.name or "").upper() in names)
               for place in places for step in place.via):
            return True
    return False
