"""`undo`: revert one recorded change when it is safe, and say why when it is not.

An undo is refused when
- the change does not exist, was already undone, or is of a kind that cannot be reverted;
- a later change (not itself undone) touched the same thing: undo that one first;
- the current state is no longer what the change left (the file was edited, the variable set
  again, the cache moved again): reverting would throw away something made since.

Every undo is itself recorded (`history.record(..., undoes=ID)`), so `history` shows it and
a second undo of the same change is refused. Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.history import Change
from cachedoctor.host import Host

Subject = tuple[str, ...]

UNDO_LOCK = "history:undo"


class UndoContext(msgspec.Struct, frozen=True):
    host: Host
    profiles_dirs: tuple[str, ...] = ()  # extra profile folders (the CLI's --profiles-dir)


class UndoPlan(msgspec.Struct):
    """What reverting `change` will do; `apply()` does it and returns (before, after) data for
    the history record of the undo."""

    change: Change
    summary: str
    steps: list[str]
    apply: Callable[[], tuple[dict[str, Any], dict[str, Any]]]
    record_kind: str = ""
    records_itself: bool = False  # the capability records the change (with undoes=ID) itself

    def to_json(self) -> dict[str, Any]:
        return {"id": self.change.id, "kind": self.change.kind, "summary": self.summary,
                "steps": list(self.steps)}


class UndoResult(msgspec.Struct, frozen=True):
    undone: int
    record: int | None
    summary: str
    steps: list[str] = msgspec.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"undone": self.undone, "record": self.record, "summary": self.summary,
                "steps": list(self.steps)}


# ------------------------------------------------------------------------------- helpers


def _refuse(change: Change, why: str, hint: str | None = None) -> RefusedError:
    return RefusedError(f"cannot undo change #{change.id} ({change.summary}): {why}", hint=hint)


def _field(change: Change, name: str) -> Any:
    """A value recorded in `after`, else in `before`."""
    return change.after.get(name, change.before.get(name))


# --------------------------------------------------------------------------------- quota


def _quota_subjects(change: Change) -> set[Subject]:
    return {("quota", str(change.tool), str(_field(change, "location")))}


def _quota_plan(change: Change, ctx: UndoContext) -> UndoPlan:
    from cachedoctor import quota
    from cachedoctor.sizes import format_size

    ntfs = change.after.get("ntfs")
    if isinstance(ntfs, dict):
        drive = ntfs.get("drive", "D:")
        raise _refuse(change, "an NTFS volume quota is not reverted by cachedoctor",
                      hint=f"as an administrator: fsutil quota modify {drive} <threshold> <limit> "
                           f"{ntfs.get('user', '<user>')} (or fsutil quota disable {drive})")
    tool, location = change.tool, _field(change, "location")
    if not tool or not isinstance(location, str):
        raise _refuse(change, "the record does not name the tool and location")
    old, new = change.before.get("cap"), change.after.get("cap")
    current = quota.quota_table().get((tool, location))
    if current != new:
        now = "no cap" if current is None else format_size(current)
        raise _refuse(change, f"the quota of {tool} ({location}) has changed since: it is now {now}")

    def text(cap: Any) -> str:
        return "no cap" if cap is None else f"{format_size(int(cap))} ({cap} bytes)"

    def apply() -> tuple[dict[str, Any], dict[str, Any]]:
        result = quota.undo_change(change)
        return ({}, result.to_json())

    return UndoPlan(change, f"set the quota of {tool} ({location}) back to {text(old)}",
                    [f"quota {tool} {location}: {text(new)} -> {text(old)}"], apply,
                    records_itself=True)


# ---------------------------------------------------------------------------------- env


def _env_vars(data: dict[str, Any]) -> dict[str, str | None]:
    """`{"values": {NAME: value-or-null}}` as recorded by `cachedoctor.envvars` (null: not managed)."""
    raw = data.get("values", {})
    if not isinstance(raw, dict):
        return {}
    return {str(k): (None if v is None else str(v)) for k, v in raw.items()}


def _env_subjects(change: Change) -> set[Subject]:
    names = set(_env_vars(change.before)) | set(_env_vars(change.after))
    return {("env", name.upper()) for name in names}


def _env_plan(change: Change, ctx: UndoContext) -> UndoPlan:
    host = ctx.host
    from cachedoctor import envvars

    before, after = _env_vars(change.before), _env_vars(change.after)
    if not before and not after:
        raise _refuse(change, "the record does not say which variables changed")
    managed = envvars.managed_variables(host)
    changed = sorted(n for n, v in after.items() if managed.get(n) != v)
    if changed:
        now = ", ".join(
            f"{n} is now " + (repr(managed[n]) if n in managed else "not set by cachedoctor")
            for n in changed
        )
        raise _refuse(change, f"the variables were changed again since: {now}")
    steps = [
        f"unset {n}" if v is None else f"set {n}={v}" for n, v in sorted(before.items())
    ]

    def apply() -> tuple[dict[str, Any], dict[str, Any]]:
        result = envvars.revert(before, host=host, undoes=change.id)
        return ({"values": result.before}, {"values": result.after})

    return UndoPlan(change, "put the environment variables back: " + "; ".join(steps), steps,
                    apply, records_itself=True)


# --------------------------------------------------------------------------------- tune


def _tune_subjects(change: Change) -> set[Subject]:
    file = _field(change, "file")
    return {("file", str(file))} if file else {("tune", str(change.tool))}


def _tune_plan(change: Change, ctx: UndoContext) -> UndoPlan:
    """Delegates to `cachedoctor.tune.undo_change`, which restores the file whole when it is as
    the tune left it, reverts only the still-tuned keys when it was edited since, and refuses
    when nothing of the tune is left (or the file is gone or no longer parses)."""
    from cachedoctor import tune

    preview = tune.undo_change(change, dry_run=True)
    steps = {
        "restore-backup": [f"put back {preview.file} as it was before the tune"],
        "delete-created-file": [f"delete {preview.file} (the tune created it)"],
        "revert-keys": [f"{preview.file} was edited since: revert only "
                        + ", ".join(preview.reverted)],
    }.get(preview.action, [f"{preview.action} {preview.file}"])
    if preview.skipped:
        steps.append("leave the keys edited since as they are: " + ", ".join(preview.skipped))

    def apply() -> tuple[dict[str, Any], dict[str, Any]]:
        done = tune.undo_change(change)
        return ({}, done.to_json())

    return UndoPlan(change, steps[0], steps, apply, records_itself=True)


# ------------------------------------------------------------------------ move / policy


def _cache_subjects(change: Change) -> set[Subject]:
    return {("cache", str(change.tool), str(_field(change, "location")))}


def _move_plan(change: Change, ctx: UndoContext) -> UndoPlan:
    """Undo a move (or a policy relocation) by restoring the location, if it is still where
    this move put it: the relocation registry must name this very change."""
    host = ctx.host
    from cachedoctor.relocate import engine, journal

    tool, location = change.tool, _field(change, "location")
    if not tool or not isinstance(location, str):
        raise _refuse(change, "the record does not name the tool and location")
    pending = journal.find(tool, location)
    if pending is not None:
        raise _refuse(change, f"an operation on {tool} ({location}) is unfinished",
                      hint=f"finish it ({pending.move_command()}) or roll it back "
                           f"({pending.restore_command()}) first")
    current = journal.relocation(tool, location)
    if current is None:
        raise _refuse(change, f"{tool} ({location}) is not relocated any more")
    moved_by = current.settings.get("history_id")
    if moved_by != change.id:
        raise _refuse(change, f"{tool} ({location}) was moved again since"
                      + (f" (change #{moved_by}), to {current.base}" if moved_by else f", to {current.base}"))
    from cachedoctor.profiles.loader import load_profiles

    loaded = load_profiles(ctx.profiles_dirs).profiles.get(tool)
    profile = loaded.profile if loaded is not None else None
    warnings: list[str] = []
    if profile is not None:
        from cachedoctor.relocate import plan_restore

        try:  # the restore's own preflight: the tool running, free space, protected folders
            warnings = plan_restore(profile, location, host).warnings
        except RefusedError as exc:
            raise _refuse(change, exc.message, exc.hint) from None
    else:
        warnings.append(f"no profile {tool!r} is loaded: restoring from the relocation record, "
                        "without checking whether the tool is running")

    def apply() -> tuple[dict[str, Any], dict[str, Any]]:
        from cachedoctor.locking import cache_lock
        from cachedoctor.relocate import execute_restore, plan_restore

        with cache_lock(tool, location):
            again = journal.relocation(tool, location)
            if again is None or again.settings.get("history_id") != change.id:
                raise _refuse(change, f"{tool} ({location}) changed while undoing; nothing was done")
            if profile is not None:
                outcome = execute_restore(plan_restore(profile, location, host), host)
            else:
                outcome = engine.restore_op(again, host)
        return ({}, outcome.to_json())

    sources = ", ".join(p.source for p in current.pairs)
    step = f"restore {tool} ({location}) from {current.base} to {sources} ({current.method})"
    return UndoPlan(change, step, [step, *warnings], apply, record_kind="restore",
                    records_itself=True)


# ------------------------------------------------------------------------------ schedule


def _schedule_subjects(change: Change) -> set[Subject]:
    return {("schedule", str(_field(change, "backend")))}


_SCHEDULE_KEYS = ("installed", "job", "files", "cron_line", "on_calendar", "policy")


def _schedule_plan(change: Change, ctx: UndoContext) -> UndoPlan:
    """Put the recorded `before` state of the job back (`schedule.restore_state`: reinstall the
    previous job or remove it), if the job is still as the change left it."""
    from cachedoctor import schedule

    backend = _field(change, "backend")
    if backend not in schedule.BACKENDS:
        raise _refuse(change, "the record does not name the scheduler backend")
    now = schedule.state_of(backend, ctx.host)
    differs = [k for k in _SCHEDULE_KEYS if k in change.after and now.get(k) != change.after.get(k)]
    if differs:
        raise _refuse(change, f"the scheduled job ({backend}) was changed since ({', '.join(differs)})",
                      hint="see `cachedoctor schedule status`; install or remove it with "
                           "`cachedoctor schedule`")
    if change.before.get("installed"):
        job = change.before.get("job") or {}
        step = (f"reinstall the previous {backend} job ({job.get('every', '?')} at {job.get('at', '?')})"
                if isinstance(job, dict) else f"reinstall the previous {backend} job")
    else:
        step = f"remove the scheduled cleanup job ({backend})"

    def apply() -> tuple[dict[str, Any], dict[str, Any]]:
        schedule.restore_state(change.before, ctx.host)
        return (now, schedule.state_of(backend, ctx.host))

    return UndoPlan(change, step, [step], apply)


# ------------------------------------------------------------------------------ registry


class Handler(msgspec.Struct, frozen=True):
    subjects: Callable[[Change], set[Subject]]
    plan: Callable[[Change, UndoContext], UndoPlan]


HANDLERS: dict[str, Handler] = {
    "quota": Handler(_quota_subjects, _quota_plan),
    "env": Handler(_env_subjects, _env_plan),
    "tune": Handler(_tune_subjects, _tune_plan),
    "move": Handler(_cache_subjects, _move_plan),
    "policy": Handler(_cache_subjects, _move_plan),
    "schedule": Handler(_schedule_subjects, _schedule_plan),
}

NOT_UNDOABLE: dict[str, str] = {
    "restore": "a restore is undone by moving the cache again with `cachedoctor move`",
    "clean": "deleted files cannot be brought back (a `--trash` clean is in the OS trash)",
}


def plan_undo(change_id: int, host: Host, *, profiles_dirs: Sequence[str] = ()) -> UndoPlan:
    """Check that change `change_id` can be reverted now; raise with the reason when not."""
    from cachedoctor import history

    change = history.get(change_id)
    if change is None:
        raise UserInputError(f"no change #{change_id} in the history", hint="see `cachedoctor history`")
    if change.undone_by is not None:
        raise _refuse(change, f"it was already undone by change #{change.undone_by}")
    if change.kind in NOT_UNDOABLE:
        raise _refuse(change, NOT_UNDOABLE[change.kind])
    handler = HANDLERS.get(change.kind)
    if handler is None:
        raise _refuse(change, f"changes of kind {change.kind!r} cannot be undone")
    mine = handler.subjects(change)
    for later in history.changes():
        if later.id <= change.id or later.undone_by is not None or later.undoes is not None:
            continue
        other = HANDLERS.get(later.kind)
        theirs = other.subjects(later) if other else _fallback_subjects(later)
        if mine & theirs:
            raise _refuse(change, f"the later change #{later.id} ({later.summary}) depends on it",
                          hint=f"undo #{later.id} first")
    return handler.plan(change, UndoContext(host, tuple(profiles_dirs)))


def _fallback_subjects(change: Change) -> set[Subject]:
    if change.kind in ("restore", "clean"):
        return _cache_subjects(change)
    return set()


def undo(change_id: int, host: Host, *, plan: UndoPlan | None = None,
         profiles_dirs: Sequence[str] = ()) -> UndoResult:
    """Revert change `change_id` (re-checked under the undo lock) and record the undo."""
    from cachedoctor import history
    from cachedoctor.locking import exclusive

    with exclusive(UNDO_LOCK, what="the history (another undo)"):
        fresh = plan_undo(change_id, host, profiles_dirs=profiles_dirs)  # state may have changed since the user saw the plan
        if plan is not None and fresh.steps != plan.steps:
            raise _refuse(fresh.change, "it changed while you were deciding; run undo again")
        before, after = fresh.apply()
        record_id: int | None = None
        if not fresh.records_itself:
            record_id = history.record(
                fresh.record_kind or fresh.change.kind,
                f"undo #{change_id}: {fresh.summary}",
                tool=fresh.change.tool,
                before=before,
                after=after,
                undoes=change_id,
            )
        else:
            done = history.get(change_id)
            record_id = done.undone_by if done else None
    return UndoResult(change_id, record_id, fresh.summary, fresh.steps)
