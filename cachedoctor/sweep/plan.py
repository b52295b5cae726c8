"""Planning and carrying out `cachedoctor sweep`: which build outputs go, and deleting them
with the deleter `clean` uses. Nothing here prints.

Planning (`plan_sweep`) walks each folder once (`cachedoctor.sweep.finder`) and then decides,
per output found:

* refused (exit 2), whatever was asked: git tracks files in it (it is the project's sources);
  the git index cannot be read (nobody can tell); it holds a `.git` (a repository), another
  filesystem, a home folder or cachedoctor's own state or environment; a process uses it
  (`cachedoctor.inuse`). (A folder to sweep inside a system folder is refused up front.)
* left alone: with `--older-than`, its project was active more recently (the newest file of the
  project outside its build outputs, or the last HEAD move in its git reflog, whichever is
  later); no file dates the project;
* otherwise it goes.

The project of an output is the git repository it is in (the nearest folder above it with a
`.git`), or, outside any repository, the nearest folder above it with a build file, or the
folder that was swept.

Carrying out (`execute_sweep`): each output under its own lock, with `safedelete.clean_tree`
(fd-relative, never through a link, never into another filesystem, locked files skipped,
`--trash` through `cachedoctor.trash`) refusing a folder that is no longer the one planned
(device and inode), then the emptied folder itself is removed relative to its verified parent.
One history record per run (kind "sweep"; not undoable, `--trash` keeps a way back).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from cachedoctor.errors import CachedoctorError, RefusedError, UserInputError
from cachedoctor.safedelete import Rules, Skipped, clean_tree
from cachedoctor.safety import (
    check_not_protected,
    is_within,
    precious_folders,
    protected_reason,
)
from cachedoctor.sweep import gitmeta
from cachedoctor.sweep.finder import NEVER, Output, ProgressCallback, Survey, survey
from cachedoctor.sweep.kinds import Kind

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.inuse import UseReport

InUse = Callable[[Sequence[str]], "UseReport"]
Status = Literal["done", "partial", "failed"]
_DIR_FLAGS = (
    os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class SweepPolicy(msgspec.Struct, frozen=True):
    """What the user asked for."""

    older_than: float | None = None  # seconds: only outputs of projects idle that long
    kinds: tuple[Kind, ...] | None = None  # None: every kind
    trash: bool = False
    now: float = msgspec.field(default_factory=time.time)


class Target(msgspec.Struct):
    """One build output that goes, with what was measured when planning."""

    output: Output
    activity: float | None  # the project's last activity (Unix time), None: unknown
    activity_from: str  # "files", "git" (the reflog), or "" when unknown

    @property
    def path(self) -> str:
        return self.output.path

    def to_json(self) -> dict[str, Any]:
        o = self.output
        return {
            "path": o.path,
            "kind": o.kind,
            "recognised_by": o.why,
            "project": o.project,
            "last_activity": self.activity,
            "activity_from": self.activity_from or None,
            "bytes": o.bytes,
            "freed_bytes": o.freed,
            "shared_bytes": o.shared,
            "kept_bytes": o.kept,
            "files": o.files,
            "dirs": o.dirs,
            "errors": list(o.errors),
        }


class LeftAlone(msgspec.Struct, frozen=True):
    path: str
    kind: str
    reason: str
    refused: bool  # True: a safety rule refused it (exit 2); False: not an output, or too new

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "reason": self.reason,
                "refused": self.refused}


class SweepPlan(msgspec.Struct):
    dirs: list[str]
    policy: SweepPolicy
    targets: list[Target] = msgspec.field(default_factory=list)
    left_alone: list[LeftAlone] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)  # folders that could not be read
    entries: int = 0

    @property
    def refused(self) -> list[LeftAlone]:
        return [a for a in self.left_alone if a.refused]

    def totals(self) -> dict[str, int]:
        outputs = [t.output for t in self.targets]
        return {
            "outputs": len(outputs),
            "projects": len({o.project for o in outputs}),
            "files": sum(o.files for o in outputs),
            "bytes": sum(o.bytes for o in outputs),
            "freed_bytes": freed_together(outputs),
            "shared_bytes": sum(o.shared for o in outputs),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": True,
            "dirs": self.dirs,
            "trash": self.policy.trash,
            "older_than_seconds": self.policy.older_than,
            "kinds": [k.id for k in self.policy.kinds] if self.policy.kinds else None,
            "entries": self.entries,
            "outputs": [t.to_json() for t in self.targets],
            "left_alone": [a.to_json() for a in self.left_alone],
            "totals": self.totals(),
            "errors": self.errors,
        }


def freed_together(outputs: Sequence[Output]) -> int:
    """What deleting all of `outputs` frees: a file hard-linked between two of them is freed
    when every one of its names is among them (once), not when a name stays elsewhere."""
    links: dict[tuple[int, int], list[int]] = {}
    total = 0
    for o in outputs:
        total += o.single - (o.root_bytes if o.kept_files else 0)
        for key, (size, names, nlink) in o.links.items():
            seen = links.setdefault(key, [size, 0, nlink])
            seen[1] += names
            seen[2] = max(seen[2], nlink)
    return total + sum(size for size, names, nlink in links.values() if names >= nlink)


# ----------------------------------------------------------------------------------- planning


def search_roots(dirs: Sequence[str], host: Host) -> list[str]:
    """The folders to sweep as real paths, each once (one inside another is covered by it).
    Raises UserInputError for a missing folder, RefusedError for a system folder."""
    roots: list[str] = []
    for text in dirs:
        real = os.path.realpath(os.path.expanduser(text))
        if not os.path.isdir(real):
            raise UserInputError(f"{text}: not a folder" if os.path.exists(real)
                                 else f"{text}: no such folder")
        if protected_reason(real, host) == "a system folder":
            raise RefusedError(f"refusing to sweep {text}: it is a system folder",
                               hint="name the folder your projects are in, e.g. ~/src")
        check_not_protected(os.path.join(real, "project"), host, role="folder to sweep",
                            system_subfolders=True)  # anything below a system tree
        if "node_modules" in real.split(os.sep):  # each package's own node_modules would go
            raise RefusedError(f"refusing to sweep {text}: it is inside installed packages "
                               "(node_modules)", hint="name the project folder above it")
        roots.append(real)
    roots = sorted(dict.fromkeys(roots), key=len)
    return [r for i, r in enumerate(roots) if not any(is_within(r, o) for o in roots[:i])]


def plan_sweep(
    dirs: Sequence[str],
    policy: SweepPolicy,
    host: Host,
    *,
    in_use: InUse | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    workers: int | None = None,
) -> SweepPlan:
    """Find the build outputs under `dirs` and decide which go (see the module docstring)."""
    plan = SweepPlan(search_roots(dirs, host), policy)
    for root in plan.dirs:
        progress = _progress_of(root, on_progress) if on_progress is not None else None
        found = survey(root, kinds=policy.kinds, on_progress=progress, workers=workers)
        _decide(plan, found, host)
    _refuse_in_use(plan, in_use)
    plan.targets.sort(key=lambda t: (-t.output.bytes, t.path))
    return plan


def _progress_of(root: str, report: Callable[[str, int, int], None]) -> ProgressCallback:
    return lambda entries, found: report(root, entries, found)


def _decide(plan: SweepPlan, found: Survey, host: Host) -> None:
    plan.entries += found.entries
    plan.errors += found.errors
    plan.left_alone += [LeftAlone(p.path, p.kind, p.reason, False) for p in found.passed]
    activity = found.activity()
    repos = {path: gitmeta.find_gitdir(path) for path, p in found.projects.items() if p.git}
    guards = _Guards.of(host)
    owners = {o.path: _owner(found, o.project) for o in found.outputs.values()}
    tracked = _tracked(found, owners, repos)
    dated = {owner: _latest(activity.get(owner, NEVER), gitmeta.last_head_move(gitdir)
                            if (gitdir := repos.get(owner)) else None)
             for owner in set(owners.values())}
    for output in sorted(found.outputs.values(), key=lambda o: o.path):
        owner = owners[output.path]
        when, source = dated[owner]
        reason = _refusal(output, owner, tracked, guards, host)
        if reason is not None:
            plan.left_alone.append(LeftAlone(output.path, output.kind, reason, True))
            continue
        limit = plan.policy.older_than
        if limit is not None:
            if when is None:
                plan.left_alone.append(LeftAlone(output.path, output.kind, "no file dates its "
                                                 f"project {owner}", False))
                continue
            if when > plan.policy.now - limit:
                plan.left_alone.append(LeftAlone(
                    output.path, output.kind,
                    f"its project {owner} was active {_ago(plan.policy.now - when)} ago "
                    f"({'last HEAD move in its git reflog' if source == 'git' else 'newest file'})",
                    False))
                continue
        plan.targets.append(Target(output, when, source))


def _owner(found: Survey, project: str) -> str:
    """The git repository the project is in, else the project itself."""
    here: str | None = project
    while here is not None:
        node = found.projects[here]
        if node.git:
            return here
        here = node.parent
    return project


def _tracked(found: Survey, owners: dict[str, str],
             repos: dict[str, str | None]) -> dict[str, set[str] | None]:
    """Per repository with outputs: which of its outputs (relative paths) git tracks files in;
    None when its index cannot be read."""
    wanted: dict[str, list[str]] = {}
    for path, owner in owners.items():
        if owner in repos:
            wanted.setdefault(owner, []).append(_rel(path, owner))
    out: dict[str, set[str] | None] = {}
    for owner, rels in wanted.items():
        gitdir = repos[owner]
        out[owner] = gitmeta.tracked_under(gitdir, rels) if gitdir else None
    return out


def _rel(path: str, base: str) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


class _Guards(msgspec.Struct, frozen=True):
    """What no output may hold, computed once per plan (checked for hundreds of outputs)."""

    own: tuple[str, ...]  # where this cachedoctor runs from: its environment and package
    precious: tuple[str, ...]  # homes, cachedoctor's state and settings (`safety`)

    @classmethod
    def of(cls, host: Host) -> _Guards:
        import sys

        import cachedoctor

        own = (sys.prefix, os.path.dirname(cachedoctor.__file__))
        return cls(tuple(os.path.realpath(p) for p in own),
                   tuple(os.path.normpath(folder) for folder, _ in precious_folders(host)))

    @staticmethod
    def inside(paths: tuple[str, ...], folder: str) -> list[str]:
        """Those of `paths` at or below `folder` (normalised absolute paths, as the walk and
        `of` make them: a string test, where `safety.is_within` builds path objects)."""
        prefix = folder.rstrip(os.sep) + os.sep
        return [p for p in paths if p == folder or p.startswith(prefix)]


def _refusal(output: Output, owner: str, tracked: dict[str, set[str] | None],
             guards: _Guards, host: Host) -> str | None:
    running = guards.inside(guards.own, output.path)
    if running:
        return f"cachedoctor itself runs from it ({running[0]})"
    if guards.inside(guards.precious, output.path):
        try:  # the search root passed the system-folder check: holding one is what is left
            check_not_protected(output.path, host, role="build output to sweep",
                                system_subfolders=True)
        except RefusedError as exc:
            return exc.message
    if output.git_inside:
        return f"holds a git repository ({output.git_inside[0]}): not a build output only"
    if output.mounts_inside:
        return f"holds another filesystem ({output.mounts_inside[0]}): never entered"
    if owner in tracked:
        known = tracked[owner]
        if known is None:
            return (f"the git index of {owner} cannot be read: nothing shows git does not track "
                    "files in it")
        if _rel(output.path, owner) in known:
            return "git tracks files in it: it is part of the project's sources"
    return None


def _latest(files: float, git: float | None) -> tuple[float | None, str]:
    if git is not None and git > files:
        return git, "git"
    if files == NEVER:
        return None, ""
    return files, "files"


def _refuse_in_use(plan: SweepPlan, in_use: InUse | None) -> None:
    if not plan.targets:
        return
    if in_use is None:
        from cachedoctor.inuse import find_uses

        in_use = find_uses
    report = in_use([t.path for t in plan.targets])
    if not report.in_use:
        return
    from cachedoctor.inuse import UseReport

    keep: list[Target] = []
    for target in plan.targets:
        real = os.path.realpath(target.path)
        uses = tuple(u for u in report.uses if u.folder == real)
        if uses:
            plan.left_alone.append(LeftAlone(target.path, target.output.kind,
                                             f"in use: {UseReport(uses).describe()}", True))
        else:
            keep.append(target)
    plan.targets = keep


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


# ---------------------------------------------------------------------------------- executing


class TargetResult(msgspec.Struct):
    target: Target
    status: Status
    files: int = 0
    dirs: int = 0
    bytes: int = 0  # freed, as the deleter counted it (hard links: when the last name went)
    removed: bool = False  # the output folder itself is gone
    skipped: list[Skipped] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.target.path,
            "kind": self.target.output.kind,
            "status": self.status,
            "files": self.files,
            "dirs": self.dirs,
            "bytes": self.bytes,
            "removed": self.removed,
            "skipped": [s.to_json() for s in self.skipped],
            "errors": self.errors,
        }


class SweepResult(msgspec.Struct):
    plan: SweepPlan
    results: list[TargetResult] = msgspec.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.status != "done" for r in self.results)

    def totals(self) -> dict[str, int]:
        return {
            "outputs": sum(1 for r in self.results if r.status == "done"),
            "files": sum(r.files for r in self.results),
            "dirs": sum(r.dirs for r in self.results),
            "bytes": sum(r.bytes for r in self.results),
            "skipped": sum(len(r.skipped) for r in self.results),
            "errors": sum(len(r.errors) for r in self.results),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": False,
            "dirs": self.plan.dirs,
            "trash": self.plan.policy.trash,
            "results": [r.to_json() for r in self.results],
            "left_alone": [a.to_json() for a in self.plan.left_alone],
            "totals": self.totals(),
            "errors": self.plan.errors,
        }


def execute_sweep(
    plan: SweepPlan,
    *,
    lock_wait: float = 2.0,
    on_done: Callable[[TargetResult], None] | None = None,
    record_history: bool = True,
) -> SweepResult:
    """Delete (or trash) every target of `plan`, each under its own lock; `on_done` is called
    after each one (so the CLI can show it)."""
    from cachedoctor.locking import exclusive

    result = SweepResult(plan)
    for target in plan.targets:
        try:
            with exclusive(f"sweep:{target.path}", wait=lock_wait,
                           what=f"the build output {target.path}"):
                outcome = _delete(target, plan.policy.trash)
        except CachedoctorError as exc:  # another cachedoctor holds it: the others go on
            outcome = TargetResult(target, "failed", errors=[exc.message])
        result.results.append(outcome)
        if on_done is not None:
            on_done(outcome)
    if record_history and result.results:
        _record(result)
    return result


def _delete(target: Target, trash: bool) -> TargetResult:
    o = target.output
    done = clean_tree(o.path, rules=Rules(only=o.only), trash=trash, expect=(o.dev, o.ino))
    outcome = TargetResult(target, "done", files=done.files, dirs=done.dirs, bytes=done.bytes,
                           skipped=done.skipped, errors=list(done.errors))
    if not done.errors and not done.skipped:
        problem = _remove_folder(o)
        if problem is None:
            outcome.removed = True
            outcome.dirs += 1
            outcome.bytes += o.dir_bytes  # the folders' own blocks, as measured when planning
        elif not o.only:  # a kind that keeps some files keeps its folder too
            outcome.errors.append(problem)
    if outcome.errors or outcome.skipped:
        outcome.status = "partial" if outcome.files or outcome.dirs else "failed"
    return outcome


def _remove_folder(o: Output) -> str | None:
    """rmdir the emptied output folder, relative to its parent, both checked to be the ones
    planned (device and inode); a problem as text, or None."""
    parent, name = os.path.split(o.path)
    if os.name == "nt":  # pragma: no cover - no dir_fd on Windows
        st = os.lstat(o.path)
        if (st.st_dev, st.st_ino) != (o.dev, o.ino):
            return f"{o.path}: replaced since it was planned; left in place"
        try:
            os.rmdir(o.path)
        except OSError as exc:
            return f"{o.path}: {exc.strerror}"
        return None
    try:
        fd = os.open(parent, _DIR_FLAGS)
    except OSError as exc:
        return f"{parent}: {exc.strerror}"
    try:
        top = os.fstat(fd)
        if (top.st_dev, top.st_ino) != (o.parent_dev, o.parent_ino):
            return f"{parent}: replaced since it was planned; {name} left in place"
        st = os.lstat(name, dir_fd=fd)
        if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != (o.dev, o.ino):
            return f"{o.path}: replaced since it was planned; left in place"
        os.rmdir(name, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return f"{o.path}: new files appeared in it while it was swept; they stay"
        return f"{o.path}: {exc.strerror}"
    finally:
        os.close(fd)
    return None


def _record(result: SweepResult) -> None:
    """One record per run, for the history; not undoable (only --trash keeps a way back)."""
    from cachedoctor import history
    from cachedoctor.sizes import format_size

    totals = result.totals()
    how = "to the trash" if result.plan.policy.trash else "deleted"
    history.record(
        "sweep",
        f"swept {len(result.results)} build outputs under {', '.join(result.plan.dirs)}: "
        f"{totals['files']:,} files, {format_size(totals['bytes'])} {how}",
        before={
            "dirs": result.plan.dirs,
            "outputs": [{"path": r.target.path, "kind": r.target.output.kind,
                         "project": r.target.output.project, "bytes": r.target.output.bytes}
                        for r in result.results],
        },
        after={
            "files": totals["files"],
            "bytes": totals["bytes"],
            "trash": result.plan.policy.trash,
            "undoable": False,
            "status": [r.status for r in result.results],
        },
    )


__all__ = ["LeftAlone", "SweepPlan", "SweepPolicy", "SweepResult", "Target",
           "TargetResult", "execute_sweep", "freed_together", "plan_sweep", "search_roots"]
