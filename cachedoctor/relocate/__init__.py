"""Crash-safe relocation of caches: `move` and `restore`.

This package's `__init__` stays light (the CLI imports `cachedoctor.relocate.journal` at every
start); the entry points below import the engine when called.

- `plan_move(...)` / `move_location(...)`: plan (preflight) and run a move of one location.
- `plan_restore(...)` / `restore_location(...)`: put a location back where the tool expects it,
  rolling back an interrupted move or finishing an interrupted restore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.links import LinkKind
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Location, Profile
    from cachedoctor.relocate.copy import ProgressCallback
    from cachedoctor.relocate.engine import Outcome, PhaseCallback
    from cachedoctor.relocate.journal import Operation
    from cachedoctor.relocate.plan import MovePlan


def plan_move(profile: Profile, location: Location, host: Host, dest: str, *,
              method: str | None = None, link: LinkKind | None = None, verify: str = "size",
              force: bool = False, profiles_dirs: list[str] | None = None,
              world: World | None = None) -> MovePlan:
    from cachedoctor.relocate.plan import plan_move as impl

    return impl(profile, location, host, dest, method=method, link=link, verify=verify,
                force=force, profiles_dirs=profiles_dirs, world=world)


def execute_move(plan: MovePlan, host: Host, *, progress: ProgressCallback | None = None,
                 phase: PhaseCallback | None = None) -> Outcome:
    """Run a planned move (call inside `cache_lock`); a plan for an existing relocation is a no-op."""
    from cachedoctor.relocate.engine import Outcome, _pairs_json, run_move

    op = plan.op
    if plan.already is not None:
        return Outcome(op.tool, op.location, "move", "already_relocated", op.method,
                       plan.already, _pairs_json(op),
                       messages=[f"{op.tool} ({op.location}) already lives in {plan.already}"])
    return run_move(op, host, progress=progress, phase=phase)


def move_location(profile: Profile, location_id: str, host: Host, dest: str, *,
                  method: str | None = None, link: LinkKind | None = None, verify: str = "size",
                  force: bool = False, dry_run: bool = False,
                  progress: ProgressCallback | None = None) -> Outcome:
    """Plan and run the move of one location under its cache lock (no questions asked)."""
    from cachedoctor.locking import cache_lock
    from cachedoctor.relocate.engine import Outcome

    with cache_lock(profile.id, location_id):
        plan = plan_move(profile, profile.location(location_id), host, dest, method=method,
                         link=link, verify=verify, force=force)
        if dry_run and plan.already is None:
            op = plan.op
            return Outcome(op.tool, op.location, "move", "planned", op.method, op.base,
                           plan.to_json(host)["pairs"], plan.files, plan.allocated_bytes)
        return execute_move(plan, host, progress=progress)


class RestorePlan(msgspec.Struct):
    tool: str
    location: str
    status: str  # restore | rollback | resume | not_relocated
    op: Operation | None = None
    needed_bytes: int = 0
    free_bytes: int | None = None
    warnings: list[str] = msgspec.field(default_factory=list)

    def to_json(self, host: Host) -> dict[str, Any]:
        op = self.op
        return {
            "tool": self.tool, "location": self.location, "status": self.status,
            "method": op.method if op else None, "dest": op.base if op else None,
            "phase": op.phase if op else None,
            "pairs": [{"source": p.source, "dest": p.dest, "same_filesystem": p.same_fs}
                      for p in op.pairs] if op else [],
            "needed_bytes": self.needed_bytes, "free_bytes": self.free_bytes,
            "warnings": self.warnings,
        }


def plan_restore(profile: Profile, location_id: str, host: Host, *, force: bool = False) -> RestorePlan:
    from cachedoctor.relocate.restoreplan import plan_restore as impl

    return impl(profile, location_id, host, force=force)


def restore_location(profile: Profile, location_id: str, host: Host, *, dry_run: bool = False,
                     force: bool = False, progress: ProgressCallback | None = None) -> Outcome:
    """Put `location_id` of `profile` back where the tool expects it, under the cache lock.

    Rolls back an interrupted move, finishes an interrupted restore, or undoes a finished move
    (copying the data back, removing the link / env var / policy / config key). A location that
    is not relocated gives status `not_relocated`; `dry_run` gives status `planned`.
    """
    from cachedoctor.locking import cache_lock

    with cache_lock(profile.id, location_id):
        plan = plan_restore(profile, location_id, host, force=force)
        return execute_restore(plan, host, dry_run=dry_run, progress=progress)


def execute_restore(plan: RestorePlan, host: Host, *, dry_run: bool = False,
                    progress: ProgressCallback | None = None,
                    phase: PhaseCallback | None = None) -> Outcome:
    from cachedoctor.relocate.engine import Outcome, _pairs_json, restore_op

    op = plan.op
    if op is None:
        return Outcome(plan.tool, plan.location, "restore", "not_relocated",
                       messages=[f"{plan.tool} ({plan.location}) is not relocated; nothing to restore"])
    if dry_run:
        return Outcome(op.tool, op.location, "restore", "planned", op.method, op.base, _pairs_json(op))
    return restore_op(op, host, progress=progress, phase=phase)


__all__ = ["RestorePlan", "execute_move", "execute_restore", "move_location", "plan_move",
           "plan_restore", "restore_location"]
