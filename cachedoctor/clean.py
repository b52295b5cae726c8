"""Planning and executing `cachedoctor clean`.

`plan_clean` decides, per existing location path, what would go and why (empty the location,
run the tool's own clean command, files older than an age, least-recently-used files above a
cap) and measures it; `execute_plan` carries the plan out under each cache's lock with the
fd-relative deleter (`cachedoctor.safedelete`). Nothing here prints.

Policies:

* a location that is not `safe_to_delete` is never touched by file rules (only the tool's own
  clean command may run there, when the user names the tool);
* a protected root (`/`, home, drive roots, system folders) is refused, whatever a profile says;
* a tool that is running is not cleaned (its files may be in use);
* no age, no size, no quota, tool named: the location is emptied (its folder and `keep:` globs
  stay) — by the tool's own command when the profile names one and it is on PATH;
* `--older-than AGE`: files whose atime, mtime and ctime are all older than AGE;
* `--max-size SIZE` and the user's quotas: least-recently-used files (atime, then mtime) until the
  location is under the smaller cap.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.profiles.model import CleanSpec, Location, Profile
from cachedoctor.safedelete import DeleteResult, FileInfo, Rules, Skipped, clean_tree, walk_files
from cachedoctor.safety import check_not_protected, is_within

if TYPE_CHECKING:
    from cachedoctor.inuse import UseReport
    from cachedoctor.locate.world import World

InUse = Callable[[Sequence[str]], "UseReport"]

Mode = Literal["empty", "command", "policy"]
LARGEST = 5
COMMAND_TIMEOUT = 3600.0
DEFAULT_SCHEDULE_KINDS = ("cache", "temp", "build", "logs", "downloads")


@dataclass(frozen=True)
class Policy:
    """What the user asked for. `explicit`: tools were named on the command line."""

    explicit: bool = False
    older_than: float | None = None  # seconds
    max_size: int | None = None  # bytes
    trash: bool = False
    kinds: tuple[str, ...] | None = None  # only locations of these kinds (scheduled runs)
    force: bool = False  # clean locations that are in use (a process has files open there)
    now: float = field(default_factory=time.time)


@dataclass
class Item:
    path: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes}


@dataclass
class Target:
    """One location path to clean, with what was measured at planning time."""

    tool: str
    location: str
    kind: str
    path: str  # the declared path (may be a relocation link)
    root: str  # the folder that is cleaned (the link's target for a relocated cache)
    mode: Mode
    reasons: list[str]
    rules: Rules
    older_than: float | None = None
    cap: int | None = None
    cap_source: str | None = None  # "quota" or "--max-size"
    command: list[str] | None = None  # argv (argv[0] resolved) in command mode
    root_id: tuple[int, int] | None = None
    measured: bool = False
    files: int = 0
    bytes: int = 0
    total_bytes: int = 0
    largest: list[Item] = field(default_factory=list)
    selection: dict[str, tuple[int, float]] | None = None  # rel -> (inode, last_used) to evict

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "location": self.location,
            "kind": self.kind,
            "path": self.path,
            "root": self.root,
            "mode": self.mode,
            "reasons": self.reasons,
            "older_than_seconds": self.older_than,
            "cap_bytes": self.cap,
            "cap_source": self.cap_source,
            "command": self.command,
            "measured": self.measured,
            "files": self.files if self.measured else None,
            "bytes": self.bytes if self.measured else None,
            "total_bytes": self.total_bytes if self.measured else None,
            "largest": [i.to_json() for i in self.largest],
        }


@dataclass(frozen=True)
class Refusal:
    tool: str
    location: str
    path: str
    reason: str
    refused: bool  # True: a safety rule refused it (exit 2); False: just not applicable
    in_use: bool = False  # refused because a process uses it (the scheduled job just skips)

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "location": self.location,
            "path": self.path,
            "reason": self.reason,
            "refused": self.refused,
            "in_use": self.in_use,
        }


@dataclass
class CleanPlan:
    policy: Policy
    targets: list[Target] = field(default_factory=list)
    left_alone: list[Refusal] = field(default_factory=list)

    @property
    def refused(self) -> list[Refusal]:
        return [r for r in self.left_alone if r.refused]

    def totals(self) -> dict[str, int]:
        return {
            "files": sum(t.files for t in self.targets),
            "bytes": sum(t.bytes for t in self.targets),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "trash": self.policy.trash,
            "older_than_seconds": self.policy.older_than,
            "max_size_bytes": self.policy.max_size,
            "targets": [t.to_json() for t in self.targets],
            "left_alone": [r.to_json() for r in self.left_alone],
            "totals": self.totals(),
        }


@dataclass
class CommandRun:
    argv: list[str]
    returncode: int
    output: str

    def to_json(self) -> dict[str, Any]:
        return {"argv": self.argv, "returncode": self.returncode, "output": self.output}


@dataclass
class TargetResult:
    target: Target
    status: Literal["done", "partial", "failed"]
    files: int = 0
    dirs: int = 0
    bytes: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    command: CommandRun | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.target.tool,
            "location": self.target.location,
            "path": self.target.path,
            "root": self.target.root,
            "mode": self.target.mode,
            "status": self.status,
            "files": self.files,
            "dirs": self.dirs,
            "bytes": self.bytes,
            "skipped": [s.to_json() for s in self.skipped],
            "errors": self.errors,
            "command": self.command.to_json() if self.command else None,
        }


@dataclass
class CleanResult:
    plan: CleanPlan
    results: list[TargetResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.status != "done" for r in self.results)

    def totals(self) -> dict[str, int]:
        return {
            "files": sum(r.files for r in self.results),
            "dirs": sum(r.dirs for r in self.results),
            "bytes": sum(r.bytes for r in self.results),
            "skipped": sum(len(r.skipped) for r in self.results),
            "errors": sum(len(r.errors) for r in self.results),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": False,
            "trash": self.plan.policy.trash,
            "results": [r.to_json() for r in self.results],
            "left_alone": [r.to_json() for r in self.plan.left_alone],
            "totals": self.totals(),
        }


# ----------------------------------------------------------------------------------- planning


def plan_clean(
    profiles: Sequence[Profile],
    host: Host,
    policy: Policy,
    *,
    quotas: dict[tuple[str, str], int] | None = None,
    all_profiles: Iterable[Profile] = (),
    measure: bool = True,
    which: Callable[[str], str | None] = shutil.which,
    in_use: InUse | None = None,
    world: World | None = None,
) -> CleanPlan:
    """Decide what each existing location of `profiles` loses (where the tool really keeps it);
    measure it unless `measure` is off.

    Raises UserInputError when nothing was asked: no tool named, no age, no size and no quota.
    """
    from cachedoctor.locate import observe, pictures

    quotas = quotas or {}
    if not policy.explicit and policy.older_than is None and policy.max_size is None and not quotas:
        raise UserInputError(
            "nothing to clean: name the tools to empty (e.g. `cachedoctor clean pip`), "
            "or give --older-than / --max-size, or set a quota with `cachedoctor quota set`"
        )
    if in_use is None:
        from cachedoctor.inuse import find_uses

        in_use = find_uses
    world = world if world is not None else observe(host)
    everything = pictures(all_profiles or profiles, world)
    others = [place.data or place.path for pic in everything for place in pic.existing]
    plan = CleanPlan(policy=policy)
    for picture in pictures(profiles, world):
        loc, tool = picture.location, picture.tool
        profile = next(p for p in profiles if p.id == tool)
        if picture.pending is not None:
            if picture.existing or policy.explicit:
                plan.left_alone.append(Refusal(
                    tool, loc.id, picture.pending.base,
                    f"an interrupted {picture.pending.kind} of it is unfinished; finish or roll it "
                    "back first (see `cachedoctor doctor`)", True))
            continue
        for place in picture.existing:
            target = _plan_location(profile, loc, place.path, host, policy, quotas, which, plan)
            if target is None:
                continue
            report = in_use([target.root])
            if report.in_use and not policy.force:
                plan.left_alone.append(Refusal(
                    tool, loc.id, place.path, f"in use: {report.describe()} (close it, or pass "
                    "--force)", True, in_use=True))
                continue
            if report.in_use:
                target.reasons.append(f"in use, going ahead because of --force: {report.describe()}")
            target.rules = _with_nested_excluded(target.rules, target.root, others)
            if measure or target.mode == "policy":
                _measure(target, policy.now)
            plan.targets.append(target)
        if policy.explicit:
            for path in picture.unused:
                plan.left_alone.append(Refusal(
                    tool, loc.id, path,
                    f"no longer used by {profile.name} (its settings point elsewhere: "
                    f"{', '.join(p.path for p in picture.places) or 'nowhere'}); "
                    "delete it yourself if you do not need it", False))
    return plan


def _plan_location(
    profile: Profile,
    loc: Location,
    path: str,
    host: Host,
    policy: Policy,
    quotas: dict[tuple[str, str], int],
    which: Callable[[str], str | None],
    plan: CleanPlan,
) -> Target | None:
    def leave(reason: str, refused: bool = False) -> None:
        plan.left_alone.append(Refusal(profile.id, loc.id, path, reason, refused))

    quota = quotas.get((profile.id, loc.id))
    cap, cap_source = _cap(policy.max_size, quota)
    older_than = policy.older_than
    if policy.kinds is not None and loc.kind not in policy.kinds:
        older_than = None  # a scheduled age policy covers only the configured kinds
        if quota is None:
            return None
    spec = loc.clean
    try:
        tool_command = _tool_command(spec, which) if not policy.trash else None
    except RefusedError as exc:
        leave(exc.message, refused=True)
        return None
    by_tool_only = policy.explicit and older_than is None and cap is None and tool_command
    if not loc.safe_to_delete and not by_tool_only:
        # only the tool itself knows what in here is unused (conda's pkgs, for instance)
        if policy.explicit or quota is not None:
            leave("the profile does not mark this location safe to delete")
        return None
    if not policy.explicit and older_than is None and cap is None:
        return None  # `clean` without tools only enforces quotas and the given age/size
    try:
        check_not_protected(path, host, role="cache folder to clean", system_subfolders=True)
    except RefusedError as exc:
        leave(exc.message, refused=True)
        return None
    root = os.path.realpath(path)
    if not os.path.isdir(root):
        if os.path.islink(path):
            leave("relocation link whose target is missing (is the other drive connected?)")
        else:
            leave("not a folder")
        return None
    if os.path.normcase(root) != os.path.normcase(os.path.abspath(path)):
        try:
            check_not_protected(root, host, role="cache folder to clean", system_subfolders=True)
        except RefusedError as exc:
            leave(exc.message, refused=True)
            return None
    if tool_command and _program_inside(tool_command[0], path, root):
        leave(
            f"the profile's clean command {tool_command[0]} lives inside the cache it would clean;"
            " refusing to run it",
            refused=True,
        )
        return None
    st = os.stat(root)
    rules = Rules(keep=tuple(spec.keep), only=tuple(spec.only)) if spec else Rules()
    target = Target(
        tool=profile.id,
        location=loc.id,
        kind=loc.kind,
        path=path,
        root=root,
        mode="empty",
        reasons=[],
        rules=rules,
        root_id=(st.st_dev, st.st_ino),
    )
    if older_than is not None or cap is not None:
        target.mode = "policy"
        target.older_than = older_than
        target.cap, target.cap_source = cap, cap_source
        if older_than is not None:
            target.reasons.append(f"not used for {_age_text(older_than)}")
        if cap is not None:
            target.reasons.append(f"least recently used above the {cap_source} cap")
        return target
    if tool_command:
        target.mode = "command"
        target.command = tool_command
        target.reasons = [f"the tool's own clean command: {' '.join(tool_command)}"]
    else:
        target.reasons.append("empty the location (safe to delete)")
    return target


def _tool_command(spec: CleanSpec | None, which: Callable[[str], str | None]) -> list[str] | None:
    """The profile's clean command with its program found on PATH, or None.

    The program is a bare name looked up in the absolute PATH entries only (an empty or `.`
    entry would make the current folder searched), or an absolute path; a relative path
    (`./x`, `../x`, `bin/x`) depends on where cachedoctor was started and is refused."""
    if spec is None or not spec.command:
        return None
    program = spec.command[0]
    has_folder = "/" in program or "\\" in program
    if has_folder and not (os.path.isabs(program) or _is_windows_abs(program)):
        raise RefusedError(
            f"the profile's clean command {program!r} is a relative path; refusing to run it",
            hint="a profile names a program on PATH or gives its absolute path",
        )
    if which is shutil.which:
        from cachedoctor.locate.ask import absolute_path_entries

        exe = shutil.which(program, path=absolute_path_entries())
    else:
        exe = which(program)
    if exe and not (os.path.isabs(exe) or _is_windows_abs(exe)):
        exe = None
    return [exe, *spec.command[1:]] if exe else None


def _is_windows_abs(path: str) -> bool:
    import ntpath

    return bool(ntpath.splitdrive(path)[0]) and ntpath.isabs(path)


def _program_inside(exe: str, path: str, root: str) -> bool:
    """True when the program is inside the cache (as declared, or where its link points)."""
    places = {exe, os.path.realpath(exe)}
    return any(is_within(p, folder) for p in places for folder in {path, root})


def _cap(max_size: int | None, quota: int | None) -> tuple[int | None, str | None]:
    if max_size is not None and (quota is None or max_size <= quota):
        return max_size, "--max-size"
    if quota is not None:
        return quota, "quota"
    return None, None


def _with_nested_excluded(rules: Rules, root: str, others: list[str]) -> Rules:
    """Other declared locations inside this root are cleaned by their own rules, never by ours."""
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


def _measure(target: Target, now: float) -> None:
    listing = walk_files(target.root, rules=target.rules)
    target.measured = True
    target.total_bytes = listing.total_bytes
    files = listing.removed
    if target.mode == "policy":
        chosen = _select(files, listing.total_bytes, target.older_than, target.cap, now)
        target.selection = {f.rel: (f.ino, f.last_used) for f in chosen}
        files = chosen
    target.files = len(files)
    target.bytes = _bytes(files)
    target.largest = _largest(target.root, files)


def _select(
    files: list[FileInfo], total: int, older_than: float | None, cap: int | None, now: float
) -> list[FileInfo]:
    """Files to evict: all too old ones, then least recently used until under `cap`."""
    chosen: list[FileInfo] = []
    rest = files
    if older_than is not None:
        limit = now - older_than
        chosen = [f for f in files if is_old(f, limit)]
        rest = [f for f in files if not is_old(f, limit)]
    if cap is not None:
        remaining = total - _bytes(chosen)
        for f in sorted(rest, key=lambda f: (f.atime, f.mtime, f.rel)):
            if remaining <= cap:
                break
            chosen.append(f)
            remaining -= f.size
    return chosen


def is_old(info: FileInfo, limit: float) -> bool:
    """systemd-tmpfiles semantics: old only when atime, mtime and ctime are all before `limit`."""
    return info.atime < limit and info.mtime < limit and info.ctime < limit


def _bytes(files: Iterable[FileInfo]) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for f in files:
        if f.nlink > 1:
            if (f.dev, f.ino) in seen:
                continue
            seen.add((f.dev, f.ino))
        total += f.size
    return total


def _largest(root: str, files: list[FileInfo]) -> list[Item]:
    """The biggest top-level entries among what would go."""
    sizes: dict[str, int] = {}
    for f in files:
        top = f.rel.split("/", 1)[0]
        sizes[top] = sizes.get(top, 0) + f.size
    ranked = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:LARGEST]
    return [Item(os.path.join(root, name), size) for name, size in ranked]


def _age_text(seconds: float) -> str:
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


# ---------------------------------------------------------------------------------- executing


def execute_plan(
    plan: CleanPlan,
    *,
    lock_wait: float = 2.0,
    on_command: Callable[[Target], None] | None = None,
    record_history: bool = True,
) -> CleanResult:
    """Carry out `plan` under each cache's lock. `on_command` is called before a tool command runs
    (so the CLI can show it). Raises LockBusyError when another cachedoctor holds a cache."""
    from cachedoctor.locking import cache_lock

    result = CleanResult(plan=plan)
    for target in plan.targets:
        with cache_lock(target.tool, target.location, wait=lock_wait):
            if target.mode == "command":
                if on_command is not None:
                    on_command(target)
                outcome = _run_command(target)
            else:
                outcome = _delete(target, plan.policy)
        result.results.append(outcome)
    if record_history and result.results:
        _record(result)
    return result


def _delete(target: Target, policy: Policy) -> TargetResult:
    select: Callable[[FileInfo], bool] | None = None
    if target.mode == "policy":
        selection = target.selection or {}
        limit = policy.now - target.older_than if target.older_than is not None else None

        def select(info: FileInfo) -> bool:
            planned = selection.get(info.rel)
            if planned is None or planned[0] != info.ino:
                return False
            if planned[1] != info.last_used:
                return limit is not None and is_old(info, limit)  # used since the plan: keep
            return True

        if not selection:
            return TargetResult(target, "done")
    done: DeleteResult = clean_tree(
        target.root, rules=target.rules, select=select, trash=policy.trash, expect=target.root_id
    )
    status: Literal["done", "partial", "failed"] = "done"
    if done.errors:
        status = "partial" if done.files else "failed"
    return TargetResult(
        target,
        status,
        files=done.files,
        dirs=done.dirs,
        bytes=done.bytes,
        skipped=done.skipped,
        errors=done.errors,
    )


def _run_command(target: Target) -> TargetResult:
    argv = target.command or []
    before = target.total_bytes if target.measured else None
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        run = CommandRun(argv, proc.returncode, (proc.stdout + proc.stderr).strip())
    except (OSError, subprocess.TimeoutExpired) as exc:
        run = CommandRun(argv, -1, str(exc))
    freed = 0
    if before is not None:
        after = walk_files(target.root, rules=target.rules).total_bytes
        freed = max(0, before - after)
    ok = run.returncode == 0
    return TargetResult(
        target,
        "done" if ok else "failed",
        files=target.files if ok else 0,
        bytes=freed,
        command=run,
        errors=[] if ok else [f"{argv[0]} exited with status {run.returncode}"],
    )


def _record(result: CleanResult) -> None:
    """Cleaning is recorded for the history, but is not undoable (only --trash keeps a way back)."""
    from cachedoctor import history
    from cachedoctor.sizes import format_size

    by_tool: dict[str, list[TargetResult]] = {}
    for r in result.results:
        by_tool.setdefault(r.target.tool, []).append(r)
    for tool, results in by_tool.items():
        files = sum(r.files for r in results)
        freed = sum(r.bytes for r in results)
        how = "to the trash" if result.plan.policy.trash else "deleted"
        history.record(
            "clean",
            f"cleaned {tool}: {files:,} files, {format_size(freed)} {how}",
            tool=tool,
            before={
                "locations": [
                    {"location": r.target.location, "root": r.target.root, "mode": r.target.mode}
                    for r in results
                ]
            },
            after={
                "files": files,
                "bytes": freed,
                "trash": result.plan.policy.trash,
                "undoable": False,
                "status": [r.status for r in results],
            },
        )


# ------------------------------------------------------------------------- scheduled settings


def schedule_config_path() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "schedule.json"


@dataclass(frozen=True)
class ScheduledPolicy:
    """What `clean --scheduled` does besides enforcing quotas (written by `schedule install`)."""

    older_than: float | None = None
    kinds: tuple[str, ...] = DEFAULT_SCHEDULE_KINDS
    tools: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "older_than_seconds": self.older_than,
            "kinds": list(self.kinds),
            "tools": list(self.tools),
        }


def load_scheduled_policy() -> ScheduledPolicy:
    path = schedule_config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ScheduledPolicy()
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path}: unreadable schedule settings: {exc}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: expected a JSON object")
    older = data.get("older_than_seconds")
    return ScheduledPolicy(
        older_than=float(older) if isinstance(older, (int, float)) and older > 0 else None,
        kinds=tuple(data.get("kinds") or DEFAULT_SCHEDULE_KINDS),
        tools=tuple(data.get("tools") or ()),
    )


def save_scheduled_policy(policy: ScheduledPolicy) -> None:
    from cachedoctor.fsutil import atomic_write_text

    atomic_write_text(schedule_config_path(), json.dumps(policy.to_json(), indent=2) + "\n")


# ------------------------------------------------------------------------------ scheduled log


def log_path() -> Path:
    from cachedoctor.state import ensure, log_dir

    return ensure(log_dir()) / "clean.log"


RESULT_MARK = "RESULT "


def log_scheduled_run(summary: dict[str, Any], lines: Iterable[str]) -> Path:
    """Append a run to the rotated log; the last line of each run is `RESULT {json}`."""
    import logging
    from logging.handlers import RotatingFileHandler

    path = log_path()
    handler = RotatingFileHandler(path, maxBytes=1_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("cachedoctor.scheduled")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        for line in lines:
            logger.info(line)
        logger.info(RESULT_MARK + json.dumps(summary, sort_keys=True))
    finally:
        logger.removeHandler(handler)
        handler.close()
    return path


def last_run() -> dict[str, Any] | None:
    """The summary of the last scheduled run, from the log (None when it never ran)."""
    path = log_path()
    candidates = [path] + [path.with_name(f"{path.name}.{i}") for i in range(1, 4)]
    for candidate in candidates:
        try:
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        for line in reversed(text.splitlines()):
            index = line.find(RESULT_MARK)
            if index >= 0:
                try:
                    data = json.loads(line[index + len(RESULT_MARK) :])
                except ValueError:
                    continue
                if isinstance(data, dict):
                    data.setdefault("logged_at", line[:23])
                    return data
    return None
