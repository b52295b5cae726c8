"""Carrying out a clean plan under each cache's lock, and measuring what really happened.

Before and after each target the location is measured (du-exact, `cachedoctor.walker`) and the
drive's free space read: "freed" is the difference — less the files that left the
location but live on under other names (hard links) — whatever the deleter or the tool's
command says. Units are re-surveyed under the lock first, so their steps follow what is there now (a
blob a model pulled since the plan now uses stays; a unit used since an age or size rule chose
it stays).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Literal

from cachedoctor.cacheunits import Survey, Tree, list_tree, survey
from cachedoctor.clean.command import COMMAND_TIMEOUT
from cachedoctor.clean.model import (
    CleanPlan,
    CleanResult,
    CommandRun,
    Measured,
    Policy,
    Target,
    TargetResult,
)
from cachedoctor.clean.plan import prune_garbage, unit_steps
from cachedoctor.clean.steps import StepsOutcome, run_steps
from cachedoctor.errors import LockBusyError
from cachedoctor.safedelete import DeleteResult, FileInfo, clean_tree

MOSTLY_LEFT = 0.5  # a tool command that left more than this share of the cache is reported
DIFFERS = 0.05  # estimate and measurement further apart than this (and 64 KiB) are both shown
DIFFERS_BYTES = 64 * 1024


def execute_plan(
    plan: CleanPlan,
    *,
    lock_wait: float = 2.0,
    on_command: Callable[[Target], None] | None = None,
    record_history: bool = True,
) -> CleanResult:
    """Carry out `plan` under each cache's lock. `on_command` is called before a tool command runs
    (so the CLI can show it). A cache another cachedoctor holds is skipped (status `busy`)."""

    result = CleanResult(plan=plan)
    for target in plan.targets:
        try:
            outcome = _clean_one(target, plan, lock_wait, on_command)
        except LockBusyError as exc:  # another cachedoctor is changing it: the others go on
            result.results.append(TargetResult(target, "busy", warnings=[
                f"{exc.message}; left as it is"]))
            continue
        _compare(outcome, plan.policy)
        result.results.append(outcome)
    if record_history and result.results:
        _record(result)
    return result


def _clean_one(target: Target, plan: CleanPlan, lock_wait: float,
               on_command: Callable[[Target], None] | None) -> TargetResult:
    from cachedoctor.locking import cache_lock

    with cache_lock(target.tool, target.location, wait=lock_wait):
        measured = Measured()
        before = _measure_into(measured, target, None)
        assert before is not None
        if target.mode == "command":
            if on_command is not None:
                on_command(target)
            outcome = _run_command(target)
        elif target.unit_specs or target.mode == "prune":
            outcome = _delete_units(target, plan.policy, before)
        else:
            outcome = _delete(target, plan.policy)
        _measure_into(measured, target, before)
    outcome.measured = measured
    outcome.bytes = measured.freed
    if target.mode == "command":
        outcome.files = measured.files_gone  # what the tool really removed
    return outcome


def _measure_into(measured: Measured, target: Target, before: Tree | None) -> Tree | None:
    """Measure the location du-exact (`cachedoctor.walker`) and the drive's free space. Before
    cleaning the location is also listed entry by entry (returned: the units are found in it);
    after, files that left the location but keep names outside it (hard links into venvs) are
    not counted as freed — the drive still holds them."""
    from cachedoctor.walker import measure

    walk = measure(target.root, one_file_system=True)
    try:
        free: int | None = shutil.disk_usage(target.root).free
    except OSError:
        free = None
    if before is None:
        measured.bytes_before, measured.files_before = walk.allocated_bytes, walk.files
        measured.drive_free_before = free
        return list_tree(target.root, rules=target.rules)
    measured.bytes_after, measured.files_after = walk.allocated_bytes, walk.files
    measured.drive_free_after = free
    linked: dict[tuple[int, int], tuple[int, list[str]]] = {}
    for e in before.entries.values():
        if not e.is_dir and e.nlink > 1 and before.outside_names(e):
            linked.setdefault(e.inode, (e.size, []))[1].append(e.rel)
    for inode, (size, rels) in linked.items():
        if not any(_still_there(target.root, rel, inode) for rel in rels):
            measured.still_linked_elsewhere += size
    return None


def _still_there(root: str, rel: str, inode: tuple[int, int]) -> bool:
    import os

    try:
        st = os.lstat(os.path.join(root, rel))
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == inode


def _compare(outcome: TargetResult, policy: Policy) -> None:
    """Say so when what was measured is not what the plan (or the tool's command) promised."""
    from cachedoctor.sizes import format_size

    target, measured = outcome.target, outcome.measured
    assert measured is not None
    if target.mode == "command" and measured.bytes_before:
        left = measured.bytes_after / measured.bytes_before
        if left > MOSTLY_LEFT:
            outcome.warnings.append(
                f"{' '.join(target.command or [])} left {left:.0%} of the cache in place "
                f"({format_size(measured.bytes_after)} of {format_size(measured.bytes_before)})"
                + _largest_left(target.root))
    estimate = target.bytes if target.measured else None
    if estimate is not None and abs(measured.freed - estimate) > max(
            DIFFERS * max(estimate, measured.freed), DIFFERS_BYTES):
        outcome.warnings.append(f"planned to free {format_size(estimate)}, measured "
                                f"{format_size(measured.freed)} freed")
    if policy.trash and measured.freed:
        outcome.warnings.append("sent to the trash: the drive gains the space only when the "
                                "trash is emptied")


def _largest_left(root: str) -> str:
    import os

    from cachedoctor.sizes import format_size
    from cachedoctor.walker import measure

    try:
        names = os.listdir(root)
    except OSError:
        return ""
    sizes = sorted(((measure(os.path.join(root, n), one_file_system=True).allocated_bytes, n)
                    for n in names), reverse=True)[:3]
    shown = ", ".join(f"{n}/ {format_size(b)}" for b, n in sizes if b)
    return f"; largest left: {shown}" if shown else ""


def _status(errors: list[str], removed: int) -> Literal["done", "partial", "failed"]:
    if not errors:
        return "done"
    return "partial" if removed else "failed"


def _delete(target: Target, policy: Policy) -> TargetResult:
    """A location without units: all of it, or the files an age or size rule chose."""
    select: Callable[[FileInfo], bool] | None = None
    if target.mode == "policy":
        if not target.selection:
            return TargetResult(target, "done")
        select = _file_selector(target, policy)
    done: DeleteResult = clean_tree(
        target.root, rules=target.rules, select=select, trash=policy.trash, expect=target.root_id
    )
    return TargetResult(target, _status(done.errors, done.files), files=done.files,
                        dirs=done.dirs, skipped=done.skipped, errors=done.errors)


def _file_selector(target: Target, policy: Policy) -> Callable[[FileInfo], bool]:
    """The planned files only, and only while still unused since the plan (same inode)."""
    selection = target.selection or {}
    limit = policy.now - target.older_than if target.older_than is not None else None
    clock = target.clock

    def select(info: FileInfo) -> bool:
        planned = selection.get(info.rel)
        if planned is None or planned[0] != info.ino:
            return False
        last_used = clock.last_used(info) if clock is not None else info.last_used
        if planned[1] != last_used:
            return limit is not None and last_used < limit  # used since the plan: keep
        return True

    return select


def _delete_units(target: Target, policy: Policy, tree: Tree) -> TargetResult:
    """From the listing taken under the lock: garbage, units (each in its tool's order), loose
    files."""
    s = survey(target.root, target.unit_specs, rules=target.rules, clock=target.clock, tree=tree)
    result = TargetResult(target, "done")
    total = StepsOutcome()
    if target.mode == "prune":
        wanted = {g.id for g in target.garbage}
        for g in prune_garbage(s):
            if g.id in wanted:
                total.add(run_steps(target.root, s.tree, g.steps, trash=policy.trash))
    chosen = _still_wanted(target, s, result)
    for (uid, rev), steps in unit_steps(s, chosen):
        done = run_steps(target.root, s.tree, steps, trash=policy.trash)
        total.add(done)
        label = f"{uid}@{rev}" if rev else uid
        if done.complete:
            result.units_removed.append(label)
        else:
            result.units_left.append((label, "partly removed: "
                                      + "; ".join([*done.errors, *(f"{x.rel}: {x.reason}" for x
                                                                   in done.skipped)][:3])))
    if target.selection:
        done_files = clean_tree(target.root, rules=target.rules,
                                select=_file_selector(target, policy), trash=policy.trash,
                                expect=target.root_id)
        total.add(StepsOutcome(done_files.files, done_files.dirs, done_files.bytes,
                               list(done_files.skipped), list(done_files.errors)))
    if target.mode == "empty":
        rest = clean_tree(target.root, rules=target.rules, trash=policy.trash,
                          expect=target.root_id)
        total.add(StepsOutcome(rest.files, rest.dirs, rest.bytes, list(rest.skipped),
                               list(rest.errors)))
    result.files, result.dirs = total.files, total.dirs
    result.skipped, result.errors = total.skipped, total.errors
    result.status = _status(total.errors, total.files)
    if result.units_left and result.status == "done":
        result.status = "partial"
    return result


def _still_wanted(target: Target, s: Survey, result: TargetResult
                  ) -> list[tuple[str, str | None]]:
    """The planned units that are still there and, where a rule chose them, still unused."""
    chosen: list[tuple[str, str | None]] = []
    for planned in target.units:
        unit = s.unit(planned.id)
        if unit is None:
            continue  # gone meanwhile
        if planned.check_unused and unit.last_used > planned.last_used:
            result.units_left.append((planned.id, "used since the plan"))
            continue
        chosen.append((planned.id, planned.revision))
    return chosen


def _run_command(target: Target) -> TargetResult:
    argv = target.command or []
    env = None
    if target.command_env is not None:  # Windows variable names ignore case
        fold = str.upper if os.name == "nt" else str
        names = {fold(k) for k in target.command_env}
        env = {k: v for k, v in os.environ.items() if fold(k) not in names}
        env.update({k: v for k, v in target.command_env.items() if v is not None})
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
            env=env,
            errors="replace",
        )
        run = CommandRun(argv, proc.returncode, (proc.stdout + proc.stderr).strip())
    except (OSError, subprocess.TimeoutExpired) as exc:
        run = CommandRun(argv, -1, str(exc))
    ok = run.returncode == 0
    return TargetResult(
        target,
        "done" if ok else "failed",
        command=run,
        errors=[] if ok else [f"{argv[0]} exited with status {run.returncode}"],
    )


def _record(result: CleanResult) -> None:
    """Cleaning is recorded for the history with the measured figures (not undoable: only
    --trash keeps a way back)."""
    from cachedoctor import history
    from cachedoctor.sizes import format_size

    by_tool: dict[str, list[TargetResult]] = {}
    for r in result.results:
        by_tool.setdefault(r.target.tool, []).append(r)
    for tool, results in by_tool.items():
        files = sum(r.files for r in results)
        freed = sum(r.bytes for r in results)
        how = "to the trash" if result.plan.policy.trash else "freed"
        history.record(
            "clean",
            f"cleaned {tool}: {files:,} files, {format_size(freed)} {how} (measured)",
            tool=tool,
            before={
                "locations": [
                    {"location": r.target.location, "root": r.target.root, "mode": r.target.mode,
                     "estimated_bytes": r.target.bytes if r.target.measured else None,
                     "units": [u.id for u in r.target.units]}
                    for r in results
                ]
            },
            after={
                "files": files,
                "bytes": freed,
                "measured": [r.measured.to_json() if r.measured else None for r in results],
                "units_removed": [u for r in results for u in r.units_removed],
                "trash": result.plan.policy.trash,
                "undoable": False,
                "status": [r.status for r in results],
            },
        )
