"""Planning of a restore: find what to undo (an interrupted operation, a finished move, or a link
made by hand) and preflight it. Nothing here changes anything on disk."""

from __future__ import annotations

import os

from cachedoctor.errors import RefusedError
from cachedoctor.host import Host
from cachedoctor.links import link_kind
from cachedoctor.profiles.model import Profile
from cachedoctor.relocate import RestorePlan, journal
from cachedoctor.relocate.journal import Operation, Pair


def plan_restore(profile: Profile, location_id: str, host: Host, *, force: bool = False) -> RestorePlan:
    profile.require_location(location_id)
    pending = journal.find(profile.id, location_id)
    if pending is not None:
        if pending.kind == "restore":
            status = "resume"
        else:
            status = "rollback" if not pending.at_least("cleaning") else "restore"
        plan = RestorePlan(profile.id, location_id, status, pending)
    else:
        done = journal.relocation(profile.id, location_id)
        if done is None:
            done = _foreign_link(profile, location_id, host)
        if done is None:
            return RestorePlan(profile.id, location_id, "not_relocated")
        plan = RestorePlan(profile.id, location_id, "restore", done)
    _preflight(plan, profile, host, force=force)
    return plan


def _foreign_link(profile: Profile, location_id: str, host: Host) -> Operation | None:
    """A location path that is a link made outside cachedoctor: restoring copies the data back
    and replaces the link with the copy, leaving the link's target where it is (others may use
    it: cachedoctor never deletes a folder it does not own)."""
    from cachedoctor.locate import observe, picture

    pairs = [Pair(place.path, place.data or place.via[-1].value or "", same_fs=False)
             for place in picture(profile, location_id, observe(host)).existing
             if place.link is not None]
    if not pairs:
        return None
    target = pairs[0].dest
    kind = link_kind(pairs[0].source) or "symlink"
    return Operation(id=journal.new_id(), kind="move", tool=profile.id, location=location_id,
                     method="link", dest_root=os.path.dirname(target), base=target, pairs=pairs,
                     settings={"link_kind": kind, "foreign": True}, phase="done")


def _preflight(plan: RestorePlan, profile: Profile, host: Host, *, force: bool) -> None:
    from cachedoctor.drives import drive_of, nearest_existing
    from cachedoctor.relocate.copy import survey
    from cachedoctor.relocate.plan import _check_encodable, check_room
    from cachedoctor.safety import check_not_protected

    op = plan.op
    assert op is not None
    if op.settings.get("foreign"):
        plan.warnings.append(f"{op.pairs[0].source} is a link cachedoctor did not create: "
                             "restoring copies its data back and replaces the link with the "
                             f"copy; {op.pairs[0].dest} itself stays where it is")
    missing = [p for p in op.pairs if not p.same_fs and not os.path.isdir(p.dest)]
    if missing and plan.status in ("restore", "resume") and op.kind == "move":
        op.settings["reset"] = [p.source for p in missing]
        for pair in missing:
            plan.warnings.append(
                f"the relocated data at {pair.dest} is missing (is its drive connected?): "
                f"restoring starts again with an empty {pair.source} (nothing is deleted: the "
                "data is not there; connect the drive and restore instead to keep it)")
    for pair in op.pairs:
        check_not_protected(pair.source, host, role="cache to restore")
        check_not_protected(pair.dest, host, role="relocated cache")
        _check_not_nested(pair)
        _check_encodable(pair.source, "the cache folder")
        _check_encodable(pair.dest, "the relocated cache")
    copying_back = plan.status in ("restore", "resume") and not (
        op.kind == "restore" and op.at_least("copied"))
    if copying_back:
        needed_inodes = 0
        for pair in op.pairs:
            if not pair.same_fs and os.path.isdir(pair.dest):
                result = survey(pair.dest)
                plan.needed_bytes += result.allocated_bytes
                needed_inodes += result.files + result.dirs
        original = op.pairs[0].source
        drive = drive_of(original)
        plan.free_bytes = drive.free_bytes if drive is not None else None
        check_room(drive.mount if drive else original, nearest_existing(original),
                   plan.free_bytes, plan.needed_bytes, needed_inodes)
    from cachedoctor import history
    from cachedoctor.inuse import check_not_in_use

    history.check()
    folders = [p.source for p in op.pairs] + [p.dest for p in op.pairs if os.path.isdir(p.dest)]
    warning = check_not_in_use(folders, force=force, what=f"the {profile.name} cache ({op.location})")
    if warning:
        plan.warnings.append(warning)


def _check_not_nested(pair: Pair) -> None:
    """Refuse a link whose target holds the link itself (or lies inside the folder the data goes
    back to): copying it back would copy into itself, renaming it is impossible, and removing the
    target afterwards would delete the restored copy with it."""
    from cachedoctor.safety import is_within

    # the link's own folder resolved, the link itself not followed
    source = os.path.join(os.path.realpath(os.path.dirname(pair.source)),
                          os.path.basename(pair.source))
    dest = os.path.realpath(pair.dest)
    if is_within(source, dest) or is_within(dest, source):
        raise RefusedError(f"{pair.source} and {pair.dest} contain one another; "
                           "restoring would copy the folder into itself; nothing was changed",
                           hint=f"move the data out by hand and remove the link {pair.source}")
