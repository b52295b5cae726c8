"""Planning and preflight of a move: which folders go where, by which method, and whether it is
safe to start. Nothing here changes anything on disk."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor.errors import OperationFailed, RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.links import LinkKind, link_kind
from cachedoctor.profiles.model import Location, Profile, Relocation
from cachedoctor.relocate.copy import Survey
from cachedoctor.relocate.journal import Operation, Pair, new_id

if TYPE_CHECKING:
    from cachedoctor.locate.effective import Picture, Place
    from cachedoctor.locate.world import World

RAM_FS = {"tmpfs", "ramfs"}  # emptied at reboot
# kernel interfaces that look like folders (proc(5), sysfs(5), ...): never a destination
PSEUDO_FS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "securityfs", "debugfs",
             "tracefs", "pstore", "bpf", "configfs", "fusectl", "mqueue", "hugetlbfs", "autofs",
             "efivarfs", "binfmt_misc", "rpc_pipefs", "nsfs", "selinuxfs"}
MIN_MARGIN = 1024 * 1024


def margin_for(nbytes: int) -> int:
    """Free space kept in reserve on DEST beyond the cache's size: 5%, at least 1 MiB."""
    return max(nbytes // 20, MIN_MARGIN)


class MovePlan(msgspec.Struct):
    op: Operation
    surveys: dict[str, Survey] = msgspec.field(default_factory=dict)
    needed_bytes: int = 0
    free_bytes: int | None = None
    warnings: list[str] = msgspec.field(default_factory=list)
    already: str | None = None  # set when the location is already relocated: where it lives
    resumes: bool = False  # an interrupted move of this location is being finished
    replaces: str | None = None  # the user's own setting the move overwrites (asked first)

    @property
    def files(self) -> int:
        return sum(s.files for s in self.surveys.values())

    @property
    def allocated_bytes(self) -> int:
        return sum(s.allocated_bytes for s in self.surveys.values())

    def to_json(self, host: Host) -> dict[str, Any]:
        from cachedoctor.relocate.methods import describe

        op = self.op
        return {
            "tool": op.tool, "location": op.location, "method": op.method, "dest": op.base,
            "status": "already_relocated" if self.already else ("resume" if self.resumes else "planned"),
            "already_at": self.already,
            "pairs": [{"source": p.source, "dest": p.dest, "same_filesystem": p.same_fs} for p in op.pairs],
            "files": self.files, "bytes": self.allocated_bytes, "needed_bytes": self.needed_bytes,
            "free_bytes": self.free_bytes, "verify": op.verify, "changes": describe(op, host),
            "settings": op.settings, "warnings": self.warnings, "replaces": self.replaces,
        }


def relocation_methods(location: Location, host: Host) -> list[Relocation]:
    """The ways `location` can move on `host`, in the profile's order of preference; a link
    comes last when the profile lists none (any folder can be linked) unless it forbids one."""
    from cachedoctor.relocate.methods import METHODS, method_of

    usable = [r for r in location.relocate if method_of(r.method).usable(r, host)]
    for name, strategy in METHODS.items():
        if (strategy.fallback and strategy.forbidden(location) is None
                and not any(r.method == name for r in usable)):
            usable.append(strategy.entry())
    return usable


def _how_to_move(location: Location, host: Host) -> str | None:
    steps = location.how_to_move.for_host(host) if location.how_to_move else []
    return "; ".join(steps) or None


def choose_method(location: Location, host: Host, method: str | None) -> Relocation:
    from cachedoctor.relocate.methods import METHODS

    methods = relocation_methods(location, host)
    forbidden = METHODS[method].forbidden(location) if method in METHODS else None
    if forbidden is not None:
        raise RefusedError(f"{location.id!r} must not be moved with a {method}: {forbidden}",
                           hint=_how_to_move(location, host))
    if method is not None:
        for relocation in methods:
            if relocation.method == method:
                return relocation
        offered = ", ".join(r.method for r in methods) or "none"
        raise UserInputError(f"{location.id!r} cannot be relocated with --method {method} on "
                             f"{host.os}; the profile offers: {offered}")
    return _candidates(location, host)[0]


def _candidates(location: Location, host: Host) -> list[Relocation]:
    """The methods a move without `--method` tries, in order: the first one that puts the
    cache where the tool will look is used."""
    methods = relocation_methods(location, host)
    if not methods:
        why = location.link_forbidden or f"no relocation method of {location.id!r} works on {host.os}"
        raise RefusedError(f"cachedoctor does not move {location.id!r} itself: {why}",
                           hint=_how_to_move(location, host))
    return methods


class _NotWhereTheToolLooks(RefusedError):
    """A method whose change the tool would not follow (a higher setting wins, the file is
    skipped): a move without `--method` tries the next one."""

    reason = ""


def choose_locations(profile: Profile, world: World, location_id: str | None) -> list[Location]:
    """The locations to act on: the one asked for, or every present one that can be relocated
    (where the tool really keeps it)."""
    from cachedoctor.locate import picture

    if location_id is not None:
        return [profile.require_location(location_id)]
    if len(profile.locations) == 1:
        return list(profile.locations)
    present = [loc for loc in profile.locations
               if picture(profile, loc.id, world).existing
               and relocation_methods(loc, world.host)]
    if not present:
        raise UserInputError(f"no relocatable {profile.id} cache exists here",
                             hint=f"see `cachedoctor where {profile.id}`")
    return present


def _first_missing(path: str) -> str | None:
    """The outermost folder of `path` that does not exist yet (None: it exists)."""
    missing = None
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        missing, path = path, os.path.dirname(path)
    return missing


def base_folder(dest_root: str, profile: Profile, location: Location) -> str:
    """DEST/<tool>, or DEST/<tool>/<location> for tools with several locations."""
    if len(profile.locations) == 1:
        return os.path.join(dest_root, profile.id)
    return os.path.join(dest_root, profile.id, location.id)


def _is_ours(path: str) -> bool:
    return ".cachedoctor-old-" in path or ".cachedoctor-partial-" in path


def plan_move(profile: Profile, location: Location, host: Host, dest: str, *,
              method: str | None = None, link: LinkKind | None = None, verify: str = "size",
              force: bool = False, profiles_dirs: list[str] | None = None,
              world: World | None = None) -> MovePlan:
    """Build and preflight the move of one location. Raises on anything unsafe."""
    from cachedoctor.locate import observe, picture
    from cachedoctor.relocate import journal
    from cachedoctor.relocate.methods import method_of, resolve_settings
    from cachedoctor.resolve import to_host_path
    from cachedoctor.safety import check_not_protected, is_within

    if verify not in ("size", "hash"):
        raise UserInputError(f"--verify must be size or hash, not {verify!r}")
    if not dest.strip():
        raise UserInputError("DEST is empty: name the folder the cache goes to "
                             "(it lands in DEST/<tool>)")
    dest_root = os.path.abspath(to_host_path(dest, host))
    _check_encodable(dest_root, "DEST")
    pending = journal.find(profile.id, location.id)
    if pending is not None:
        if pending.kind == "restore":
            raise RefusedError(f"a restore of {profile.id} ({location.id}) was interrupted",
                               hint=f"finish it first: {pending.restore_command()}")
        if os.path.normcase(pending.dest_root) != os.path.normcase(dest_root):
            raise RefusedError(
                f"an interrupted move of {profile.id} ({location.id}) to {pending.dest_root} exists",
                hint=f"finish it with `{pending.move_command()}` or roll it back with "
                     f"`{pending.restore_command()}`")
        return MovePlan(pending, resumes=True)

    world = world if world is not None else observe(host)
    if world.problems:  # a damaged registry: a move would overwrite what it still records
        raise OperationFailed("; ".join(world.problems) + "; nothing was changed")
    base = base_folder(dest_root, profile, location)
    candidates = ([choose_method(location, host, method)] if method is not None
                  else _candidates(location, host))
    relocation = candidates[0]
    pic = picture(profile, location.id, world)
    if pic.problems:
        raise RefusedError(f"{profile.id} ({location.id}): " + "; ".join(pic.problems)
                           + "; nothing was changed",
                           hint="fix the setting and run again; see `cachedoctor where "
                                f"{profile.id}`")
    done = pic.record
    places = [p for p in pic.places if p.exists and not _is_ours(p.path)]
    if done is not None and not pic.conflicts:
        new = [p for p in places if p.link is None and not _inside(p.path, done.base)]
        if not new or done.method != relocation.method or not method_of(done.method).leaves_link:
            return MovePlan(done, already=done.base)
        # a folder created since the link move (a new browser profile): move it too
        places, base, dest_root = new, done.base, done.dest_root
    if not places:
        wanted = ", ".join(f"{p.path} ({p.how()})" for p in pic.places) or "no known path"
        unused = f"; an old cache at {', '.join(pic.unused)} is not used any more" if pic.unused else ""
        raise UserInputError(f"nothing to move: {profile.id} keeps {location.id} at {wanted}, "
                             f"which does not exist here{unused}")
    skipped: list[str] = []
    for relocation in candidates:
        settings = resolve_settings(relocation, base, host, link=link)
        settings["asked"] = {"method": method, "link": link}  # a resumed command goes on alike
        settings["made_from"] = _first_missing(dest_root)  # emptied again by a restore
        op = Operation(id=new_id(), kind="move", tool=profile.id, location=location.id,
                       method=relocation.method, dest_root=dest_root, base=base, pairs=[],
                       verify=verify, settings=settings, profiles_dirs=list(profiles_dirs or []))
        for place in places:
            if place.link is not None:
                where = place.data or (place.via[-1].value if place.via else None)
                plan = MovePlan(op, already=where)
                if where and is_within(where, base):
                    return plan
                raise RefusedError(f"{place.path} is already a link to {where}"
                                   + ("" if done is not None else " that cachedoctor did not make"),
                                   hint=f"`cachedoctor restore {profile.id}` puts it back first "
                                        "(it copies the data and leaves the link's target alone)")
        try:
            dests = _destinations(op, profile, location, world, places)
        except _NotWhereTheToolLooks as refused:
            if relocation is candidates[-1]:
                if skipped:
                    raise RefusedError("; ".join([*skipped, refused.message]),
                                       hint=refused.hint) from None
                raise
            skipped.append(f"not by {relocation.method}: {refused.reason}")
            continue
        break
    ungoverned = [p.path for p, d in zip(places, dests, strict=True) if d is None]
    places = [p for p, d in zip(places, dests, strict=True) if d is not None]
    moved_to = [d for d in dests if d is not None]
    if len({os.path.normcase(d) for d in moved_to}) != len(moved_to):
        raise RefusedError(
            f"two folders of {profile.id} ({location.id}) would be moved to one destination; "
            "nothing was changed: " + ", ".join(p.path for p in places))
    for place, dest_path in zip(places, moved_to, strict=True):
        _check_encodable(place.path, "the cache folder")
        op.pairs.append(Pair(place.path, dest_path, same_fs=False))
    plan = MovePlan(op, warnings=[f"moving by {relocation.method}, {m}" for m in skipped] + [
        f"{path} stays where it is: the {relocation.method} method does not govern it "
        f"(`--method link` moves it)" for path in ungoverned])
    plan.replaces = _user_setting_replaced(pic, relocation)
    _preflight(plan, profile, host, force=force, check_not_protected=check_not_protected,
               is_within=is_within)
    return plan


def _inside(path: str, folder: str) -> bool:
    from cachedoctor.safety import is_within

    return is_within(path, folder) or is_within(os.path.realpath(path), os.path.realpath(folder))


def _user_setting_replaced(pic: Picture, relocation: Relocation) -> str | None:
    """The user's own setting this move overwrites (move asks first; restore puts it back)."""
    from cachedoctor.relocate.methods import method_of

    strategy = method_of(relocation.method)
    for place in pic.places:
        for step in place.via:
            if not step.managed and (replaced := strategy.replaced(relocation, step)):
                return replaced
    return None


def _destinations(op: Operation, profile: Profile, location: Location, world: World,
                  places: list[Place]) -> list[str | None]:
    """Where each folder goes. A link keeps the folder's path below the base. For a variable,
    config key or policy, the tool is resolved in the world as the move would leave it, so the
    copy goes exactly where the tool will look — and a setting that would beat the new one (a
    variable over the config file) is found now, before anything changes."""
    from cachedoctor.locate.effective import planned_destinations, resolve_location
    from cachedoctor.relocate.methods import method_of

    strategy = method_of(op.method)
    if strategy.mirrors_layout(op):
        return [os.path.join(op.base, p.rel) if p.rel else op.base for p in places]
    after = strategy.world_after(op, world)
    dests = planned_destinations(location, world, after, places)
    if any(d is not None for d in dests) and all(_inside(d, op.base) for d in dests if d):
        return dests
    after_places = resolve_location(profile, location, after).places
    if all(d is None for d in dests) and any(_inside(p.path, op.base) for p in after_places):
        refused = _NotWhereTheToolLooks(
            f"the {op.method} method does not govern "
            + ", ".join(p.path for p in places) + "; nothing was changed", hint="use --method link")
        refused.reason = "it does not govern " + ", ".join(p.path for p in places)
        raise refused
    shown = "; ".join(f"{p.path} ({p.how()})" for p in after_places) or "nothing"
    skipped = strategy.ignored_reason(op, location, after)
    why = (f"{profile.id} {skipped}" if skipped else
           f"a setting that takes precedence over the {op.method} method decides")
    refused = _NotWhereTheToolLooks(
        f"after a move by {op.method} {profile.id} would still look at {shown}, not at "
        f"{op.base}: {why}; nothing was changed",
        hint="change or remove that setting first, or choose another --method (link always works)")
    refused.reason = f"{why} ({profile.id} would still look at {shown})"
    raise refused


def _check_encodable(path: str, what: str) -> None:
    """The journal stores paths as UTF-8 JSON: a name that is not valid UTF-8 (a byte-string
    name from another locale) cannot be journaled, so it is refused before anything starts."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(f"{what} {path!r} is not a valid UTF-8 name; cachedoctor cannot "
                             "journal the move safely", hint="choose a folder with a UTF-8 name") from None


def _preflight(plan: MovePlan, profile: Profile, host: Host, *, force: bool,
               check_not_protected: Any, is_within: Any) -> None:
    from cachedoctor.drives import drive_of, nearest_existing, same_filesystem
    from cachedoctor.fs.probe import assess, probe_near
    from cachedoctor.relocate.copy import survey

    op = plan.op
    check_not_protected(op.base, host, role="destination")
    for pair in op.pairs:
        src, dst = pair.source, pair.dest
        check_not_protected(src, host, role="cache to move")
        # realpath resolves links in the existing part and keeps a not-yet-created tail as given
        real_src, real_root = os.path.realpath(src), os.path.realpath(op.dest_root)
        if os.path.normcase(real_src) == os.path.normcase(os.path.realpath(dst)) and os.path.lexists(dst):
            raise RefusedError(f"{src} is already at {dst}")
        if is_within(op.dest_root, src) or is_within(real_root, real_src):
            raise RefusedError(f"the destination {op.dest_root} is inside the cache {src}")
        if is_within(src, op.dest_root) or is_within(real_src, real_root):
            raise RefusedError(f"the cache {src} is inside the destination {op.dest_root}",
                               hint="choose a folder on another drive, outside the cache's folders")
        if not os.path.isdir(src):
            raise UserInputError(f"{src} is not a folder")
        if not is_within(dst, op.base):
            raise RefusedError(f"internal error: {dst} is outside {op.base}; nothing was changed")
        if os.path.lexists(dst) and not _empty_dir(dst):
            raise RefusedError(f"{dst} already exists and is not empty",
                               hint="choose another DEST or empty that folder")
        pair.same_fs = same_filesystem(src, dst)
    existing = nearest_existing(op.base)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RefusedError(f"cannot write to {existing}")
    drive = drive_of(op.base)
    if drive is not None:
        if drive.fstype.lower() in PSEUDO_FS:
            raise RefusedError(f"{op.dest_root} is on {drive.fstype} at {drive.mount}, a kernel "
                               "interface, not a drive: it cannot hold a cache",
                               hint="choose a folder on a real drive")
        if drive.remote:
            raise RefusedError(f"{op.dest_root} is on a network drive ({drive.fstype}, "
                               f"{drive.device}); caches need a local drive")
        if "ro" in drive.options:
            raise RefusedError(f"{drive.mount} is mounted read-only")
        if drive.fstype.lower() in RAM_FS:
            plan.warnings.append(f"{drive.mount} is a RAM disk ({drive.fstype}): the cache will be "
                                 "emptied at every reboot; a folder on a real drive keeps it")
        plan.free_bytes = drive.free_bytes
    unreadable: list[str] = []
    undeletable: list[str] = []
    needed_inodes = 0
    caps, refusals = probe_near(op.base), []  # what DEST can hold, tried there (fs.probe)
    requires = profile.require_location(op.location).requires
    for pair in op.pairs:
        result = survey(pair.source, caps.look_for())
        plan.surveys[pair.source] = result
        unreadable += result.unreadable
        if not pair.same_fs:  # a copy: the original is removed afterwards, entry by entry
            undeletable += result.undeletable
        parent = os.path.dirname(pair.source.rstrip(os.sep)) or os.sep
        if not host.is_windows and not os.access(parent, os.W_OK | os.X_OK):
            undeletable.append(f"{parent} (the folder holding the cache: it is renamed there)")
        if result.skipped:
            plan.warnings.append(f"{len(result.skipped)} socket(s) under {pair.source} are not copied")
        if not pair.same_fs:
            verdict = assess(result, caps, requires, what=f"the {profile.name} cache ({op.location})",
                             dest=op.dest_root, dest_folder=pair.dest if host.is_windows else None)
            refusals += verdict.refusals
            plan.warnings += [w for w in verdict.losses if w not in plan.warnings]
            plan.needed_bytes += result.allocated_bytes + verdict.extra_bytes
            needed_inodes += result.files + result.dirs
    if refusals:
        raise RefusedError("cannot move this cache there; nothing was changed:\n  " + "\n  ".join(refusals),
                           hint="choose a destination on another filesystem (NTFS, ext4, APFS...)")
    if unreadable:
        shown = "\n  ".join(unreadable[:10])
        more = f"\n  ... and {len(unreadable) - 10} more" if len(unreadable) > 10 else ""
        raise OperationFailed(f"cannot read every file of the cache; nothing was changed:\n  {shown}{more}",
                              hint="fix the permissions (or run as the owner) and try again")
    if undeletable:
        shown = "\n  ".join(undeletable[:10])
        more = f"\n  ... and {len(undeletable) - 10} more" if len(undeletable) > 10 else ""
        raise OperationFailed(
            "the original could not be removed after the copy: these folders are not writable "
            f"by you; nothing was changed:\n  {shown}{more}",
            hint="give them back to your user (e.g. `sudo chown -R $USER FOLDER`) or run as their "
                 "owner, then try again")
    check_room(drive.mount if drive else op.dest_root, existing, plan.free_bytes,
               plan.needed_bytes, needed_inodes)
    from cachedoctor import history
    from cachedoctor.inuse import check_not_in_use

    history.check()  # a damaged history database stops the move before, not after, the copy
    _check_movable(op)
    warning = check_not_in_use([p.source for p in op.pairs], force=force,
                               what=f"the {profile.name} cache ({op.location})")
    if warning:
        plan.warnings.append(warning)


def _check_movable(op: Operation) -> None:
    """What would otherwise fail after the whole copy: a cache folder that is a mount point
    (it cannot be renamed aside), or one whose parent cannot be written (it cannot be replaced
    by the link)."""
    for pair in op.pairs:
        if os.path.ismount(pair.source):
            raise RefusedError(f"{pair.source} is a mount point: it cannot be moved aside and "
                               "replaced; nothing was changed",
                               hint="move what is mounted there with your system's own tools, "
                                    "or relocate the folder above it")
        parent = os.path.dirname(pair.source) or "."
        if not os.access(parent, os.W_OK | os.X_OK):
            raise RefusedError(f"cannot write to {parent}, which holds {pair.source}; nothing "
                               "was changed", hint="fix the permissions (or run as the owner)")


def check_room(where: str, path: str, free_bytes: int | None, needed_bytes: int,
               needed_inodes: int) -> None:
    """Refuse before anything changes when the copy would not fit: bytes (plus a margin) and,
    where the filesystem has a fixed number, inodes (files and folders)."""
    from cachedoctor.sizes import format_size

    if needed_bytes and free_bytes is not None:
        want = needed_bytes + margin_for(needed_bytes)
        if free_bytes < want:
            raise OperationFailed(
                f"not enough free space on {where}: the cache needs {format_size(needed_bytes)} "
                f"plus a margin of {format_size(want - needed_bytes)}, but only "
                f"{format_size(free_bytes)} is free; nothing was changed")
    free_inodes = _free_inodes(path)
    if needed_inodes and free_inodes is not None and free_inodes < needed_inodes + needed_inodes // 50 + 16:
        raise OperationFailed(
            f"not enough free inodes on {where}: the cache has {needed_inodes:,} files and "
            f"folders, but only {free_inodes:,} more fit there; nothing was changed")


def _free_inodes(path: str) -> int | None:
    """Files and folders that can still be created there; None where the filesystem has no fixed
    number (btrfs, most network and Windows filesystems report 0)."""
    try:
        st = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    return st.f_favail if st.f_files else None


def _empty_dir(path: str) -> bool:
    try:
        return os.path.isdir(path) and link_kind(path) is None and not os.listdir(path)
    except OSError:
        return False
