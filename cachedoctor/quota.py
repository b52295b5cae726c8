"""Per-folder quotas: caps stored in cachedoctor's config and enforced by `clean`.

`<config dir>/quotas.json` holds `{"format": 1, "quotas": {tool: {location: bytes}}}`; `quota_table()` is what `scan`,
`doctor` and `clean` read. `apply_quotas` changes it with a history record (kind `quota`),
`usage` measures each capped location, and `ntfs_commands` builds the Windows volume-quota
commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor import statefile as sf
from cachedoctor.errors import UserInputError
from cachedoctor.lazyre import lazy_pattern
from cachedoctor.state import config_dir


def quotas_file() -> Path:
    return config_dir() / "quotas.json"


Caps = dict[str, dict[str, int]]  # tool -> location -> cap in bytes

QUOTAS = sf.JsonKind[Caps](
    "quotas.json", "quota file", 1,
    parse=lambda doc: sf.field(doc, "quotas", sf.map_of(sf.map_of(sf.integer))),
    dump=lambda caps: {"quotas": caps},
    migrations=(lambda caps: {"quotas": caps},),  # 0: the bare {tool: {location: bytes}}
)


def _load() -> Caps:
    return QUOTAS.read(quotas_file()) or {}


def quota_table() -> dict[tuple[str, str], int]:
    """(tool, location) -> cap in bytes, for every quota the user set."""
    return {(tool, loc): cap for tool, locs in _load().items() for loc, cap in locs.items()}


def set_quota(tool: str, location: str, cap: int | None) -> int | None:
    """Set (or with None remove) a cap; returns the previous cap."""
    data = _load()
    previous = data.get(tool, {}).get(location)
    if cap is None:
        data.get(tool, {}).pop(location, None)
        if tool in data and not data[tool]:
            del data[tool]
    else:
        data.setdefault(tool, {})[location] = cap
    QUOTAS.write(quotas_file(), {tool: dict(sorted(locs.items())) for tool, locs in sorted(data.items())})
    return previous


# --- planning, history and usage (used by `cachedoctor quota`) ------------------------------

if TYPE_CHECKING:
    from cachedoctor.history import Change
    from cachedoctor.host import Host
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Location, Profile


class QuotaChange(msgspec.Struct):
    tool: str
    location: str
    before: int | None
    after: int | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


class QuotaResult(msgspec.Struct):
    changes: list[QuotaChange]
    dry_run: bool
    change_ids: list[int] = msgspec.field(default_factory=list)  # one history record per location
    warnings: list[str] = msgspec.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": [{"tool": c.tool, "location": c.location, "before_bytes": c.before,
                         "after_bytes": c.after, "changed": c.changed} for c in self.changes],
            "dry_run": self.dry_run, "change_ids": self.change_ids, "warnings": self.warnings,
        }


def target_locations(profile: Profile, location_id: str | None) -> list[Location]:
    """The locations a quota command applies to: the named one; else the profile's single
    location; else every location that is safe to delete (a cap is enforced by deleting)."""
    if location_id is not None:
        return [profile.require_location(location_id)]
    if len(profile.locations) == 1:
        return list(profile.locations)
    safe = [loc for loc in profile.locations if loc.safe_to_delete]
    if not safe:
        raise UserInputError(f"{profile.id} has no location that is safe to delete; name one with --location")
    return safe


def cap_for(location: Location, size: str | None) -> int:
    """The cap in bytes: the given size, or the profile's recommended `quota`."""
    from cachedoctor.sizes import parse_size

    if size is None:
        if location.quota is None:
            raise UserInputError(
                f"no size given and the profile recommends no quota for {location.id}: give one, e.g. 20GB"
            )
        size = location.quota
    cap = parse_size(size)
    if cap <= 0:
        raise UserInputError(f"a quota must be larger than 0 bytes (got {size!r})")
    return cap


def apply_quotas(tool: str, caps: dict[str, int | None], *, dry_run: bool = False,
                 undoes: int | None = None) -> QuotaResult:
    """Set (int) or remove (None) the caps of `tool`'s locations.

    Each location that changes gets one history record (kind `quota`) holding
    `{"location": ID, "cap": bytes-or-null}` before and after.
    """
    from cachedoctor import history
    from cachedoctor.locking import exclusive

    with exclusive("quota:table", what="the quota table"):
        table = quota_table()
        changes = [QuotaChange(tool, loc, table.get((tool, loc)), cap) for loc, cap in caps.items()]
        result = QuotaResult(changes, dry_run)
        if dry_run:
            return result
        for change in changes:
            if not change.changed:
                continue
            set_quota(tool, change.location, change.after)
            summary = f"quota {tool} {change.location}: {_show(change.before)} -> {_show(change.after)}"
            if undoes is not None:
                summary = f"undo change {undoes}: {summary}"
            result.change_ids.append(history.record(
                "quota", summary, tool=tool, undoes=undoes,
                before={"location": change.location, "cap": change.before},
                after={"location": change.location, "cap": change.after},
            ))
    return result


def _show(cap: int | None) -> str:
    from cachedoctor.sizes import format_size

    return "none" if cap is None else format_size(cap)


def undo_change(change: Change, *, dry_run: bool = False) -> QuotaResult:
    """Undo a recorded `quota` change: put back the cap it replaced, if the cap is still the one
    the change set (otherwise RefusedError)."""
    from cachedoctor.errors import RefusedError

    location = change.after.get("location", change.before.get("location"))
    if change.kind != "quota" or not change.tool or not isinstance(location, str):
        raise UserInputError(f"change {change.id} is not a quota change this version can undo")
    now = quota_table().get((change.tool, location))
    if now != change.after.get("cap"):
        raise RefusedError(f"the quota of {change.tool} ({location}) was changed again since "
                           f"(now {_show(now)}); set it with `cachedoctor quota` instead")
    old = change.before.get("cap")
    return apply_quotas(change.tool, {location: None if old is None else int(old)},
                        dry_run=dry_run, undoes=change.id)


class QuotaUsage(msgspec.Struct):
    tool: str
    location: str
    cap_bytes: int
    used_bytes: int
    paths: list[str]
    partial: bool
    known: bool  # the tool and location are in a loaded profile

    @property
    def over(self) -> bool:
        return self.used_bytes > self.cap_bytes

    @property
    def percent(self) -> float:
        return round(100.0 * self.used_bytes / self.cap_bytes, 1) if self.cap_bytes else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "location": self.location, "cap_bytes": self.cap_bytes,
            "used_bytes": self.used_bytes, "percent": self.percent, "over": self.over,
            "paths": self.paths, "partial": self.partial, "known": self.known,
        }


def usage(profiles: dict[str, Profile], host: Host) -> list[QuotaUsage]:
    """Every quota with the allocated size of its location now (measured like `du`), where the
    tool really keeps it."""
    from cachedoctor.locate import observe, picture
    from cachedoctor.walker import measure

    world = observe(host)
    rows = []
    for (tool, loc), cap in sorted(quota_table().items()):
        profile = profiles.get(tool)
        known = profile is not None and any(x.id == loc for x in profile.locations)
        places = picture(profile, loc, world).existing if profile and known else []
        paths = [p.path for p in places]
        used, partial = 0, False
        for place in places:
            if place.data is None:
                continue  # a broken relocation link: nothing is there
            walk = measure(place.data)
            used += walk.allocated_bytes
            partial = partial or walk.partial
        rows.append(QuotaUsage(tool, loc, cap, used, paths, partial, known))
    return rows


# --- NTFS volume quotas (Windows) -------------------------------------------------------------


_DRIVE_RE = lazy_pattern(r"^[A-Za-z]:$")


def ntfs_commands(drive: str, limit: int, threshold: int, user: str) -> list[list[str]]:
    """The `fsutil` commands for an NTFS quota: enforce quotas on the volume, then set the user's
    warning threshold and hard limit (both in bytes). NTFS quotas are per user per volume."""
    drive = drive.rstrip("\\/")
    if not _DRIVE_RE().match(drive):
        raise UserInputError(f"invalid drive {drive!r}: expected a drive letter such as D:")
    if limit <= 0 or not 0 < threshold <= limit:
        raise UserInputError("the NTFS warning threshold must be above 0 and at most the limit")
    if not user.strip():
        raise UserInputError("an NTFS quota needs a user name (DOMAIN\\user)")
    drive = drive.upper()
    return [
        ["fsutil", "quota", "enforce", drive],
        ["fsutil", "quota", "modify", drive, str(threshold), str(limit), user],
    ]


def ntfs_target(profile: Profile, location_id: str, world: World) -> str:
    """The drive an NTFS quota for the location belongs on: where its bytes are now (a link's
    or a setting's target, `cachedoctor.locate`), not where the profile declares it (after a
    move, C: would cap the user's whole profile there)."""
    from cachedoctor.locate import picture

    pic = picture(profile, location_id, world)
    places = [p.data or p.path for p in pic.existing] or [p.path for p in pic.places]
    if not places:
        raise UserInputError(f"{profile.id} {location_id} has no path on this system; pass --drive")
    return ntfs_drive(places[0])


def check_ntfs_drive(drive: str, *, explicit: bool, system_drive: str, fstype: str | None) -> None:
    """Refuse what an NTFS quota must not be set on: the system drive unless `--drive` named it
    (NTFS quotas are per user per volume, so a cap there caps everything the user keeps on C:),
    and a ReFS volume (a Dev Drive: ReFS has no disk quotas; fsutil quota needs NTFS)."""
    from cachedoctor.errors import RefusedError

    if fstype is not None and fstype.upper() == "REFS":
        raise RefusedError(f"{drive} is ReFS (a Dev Drive?): ReFS has no disk quotas",
                           hint="use `cachedoctor quota TOOL SIZE` (enforced by clean) instead")
    if fstype is not None and fstype.upper() != "NTFS":
        raise RefusedError(f"{drive} is {fstype}, not NTFS: volume quotas exist only on NTFS")
    if not explicit and drive.upper() == system_drive.rstrip("\\").upper():
        raise RefusedError(
            f"the cache is on the system drive {drive}: an NTFS quota caps everything you "
            f"store on {drive} (your whole profile), not just the cache",
            hint=f"pass --drive {drive} to do it anyway, or use `cachedoctor quota TOOL SIZE`")


def ntfs_drive(path: str) -> str:
    """The drive letter (`D:`) of a Windows path; UserInputError for a UNC or relative path."""
    import ntpath

    drive = ntpath.splitdrive(path)[0]
    if not _DRIVE_RE().match(drive):
        raise UserInputError(f"{path} is not on a lettered drive; pass --drive D:")
    return drive.upper()


def ntfs_user(host: Host) -> str:
    user = host.getenv("USERNAME") or ""
    domain = host.getenv("USERDOMAIN")
    return f"{domain}\\{user}" if domain and user else user


def is_windows_admin() -> bool:  # pragma: no cover - Windows only
    import ctypes

    try:
        return bool(ctypes.windll.shell32.IsUserAnAdmin())  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return False
