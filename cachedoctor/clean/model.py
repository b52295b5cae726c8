"""What `clean` plans and what it reports: the policy asked for, one target per location path,
the units, garbage and files chosen there, and the measured outcome."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from cachedoctor.safedelete import Rules, Skipped

if TYPE_CHECKING:
    from cachedoctor.cacheunits import Clock

Mode = Literal["empty", "command", "policy", "units", "prune"]
Status = Literal["done", "partial", "failed", "busy"]  # busy: another cachedoctor held it


class Policy(msgspec.Struct, frozen=True):
    """What the user asked for. `explicit`: tools were named on the command line."""

    explicit: bool = False
    older_than: float | None = None  # seconds
    max_size: int | None = None  # bytes
    trash: bool = False
    kinds: tuple[str, ...] | None = None  # only locations of these kinds (scheduled runs)
    force: bool = False  # clean locations that are in use (a process has files open there)
    units: tuple[str, ...] = ()  # `--unit ID`: remove exactly these units
    prune: bool = False  # `--prune`: what the tool itself calls garbage
    now: float = msgspec.field(default_factory=time.time)


class Item(msgspec.Struct):
    path: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes}


class PlannedUnit(msgspec.Struct):
    """A unit (or one revision of it) chosen for deletion, as measured when planning."""

    id: str
    path: str
    bytes: int  # its size
    frees: int  # what deleting it frees (shared parts and outside hard links excluded)
    files: int
    last_used: float
    why: str
    revision: str | None = None  # a Hugging Face commit: only that revision goes
    check_unused: bool = False  # an age or size rule chose it: keep it if used since the plan
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "path": self.path, "bytes": self.bytes, "frees_bytes": self.frees,
                "files": self.files, "last_used": self.last_used, "why": self.why,
                "revision": self.revision, "note": self.note}


class PlannedGarbage(msgspec.Struct):
    id: str
    reason: str
    bytes: int
    files: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "reason": self.reason, "bytes": self.bytes, "files": self.files}


class Target(msgspec.Struct):
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
    command_why: str = ""  # which program was chosen and why
    # the location's variables as the command must see them (None: unset); None: inherit
    command_env: dict[str, str | None] | None = None
    root_id: tuple[int, int] | None = None
    measured: bool = False
    files: int = 0
    bytes: int = 0  # estimated bytes freed
    total_bytes: int = 0
    largest: list[Item] = msgspec.field(default_factory=list)
    selection: dict[str, tuple[int, float]] | None = None  # loose files: rel -> (inode, last used)
    unit_specs: tuple[Any, ...] = ()  # the location's `units:` declarations
    units: list[PlannedUnit] = msgspec.field(default_factory=list)
    garbage: list[PlannedGarbage] = msgspec.field(default_factory=list)
    clock: Clock | None = None
    notes: list[str] = msgspec.field(default_factory=list)

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
            "command_why": self.command_why or None,
            "measured": self.measured,
            "files": self.files if self.measured else None,
            "bytes": self.bytes if self.measured else None,
            "total_bytes": self.total_bytes if self.measured else None,
            "largest": [i.to_json() for i in self.largest],
            "units": [u.to_json() for u in self.units],
            "garbage": [g.to_json() for g in self.garbage],
            "clock": self.clock.to_json() if self.clock else None,
            "notes": self.notes,
        }


class Refusal(msgspec.Struct, frozen=True):
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


class CleanPlan(msgspec.Struct):
    policy: Policy
    targets: list[Target] = msgspec.field(default_factory=list)
    left_alone: list[Refusal] = msgspec.field(default_factory=list)

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
            "units": list(self.policy.units),
            "prune": self.policy.prune,
            "targets": [t.to_json() for t in self.targets],
            "left_alone": [r.to_json() for r in self.left_alone],
            "totals": self.totals(),
        }


class CommandRun(msgspec.Struct):
    argv: list[str]
    returncode: int
    output: str

    def to_json(self) -> dict[str, Any]:
        return {"argv": self.argv, "returncode": self.returncode, "output": self.output}


class Measured(msgspec.Struct):
    """The location and its drive, measured just before and just after cleaning."""

    bytes_before: int = 0
    bytes_after: int = 0
    files_before: int = 0
    files_after: int = 0
    drive_free_before: int | None = None
    drive_free_after: int | None = None
    # left the location but not the drive: hard-linked files whose other names live outside
    still_linked_elsewhere: int = 0

    @property
    def freed(self) -> int:
        return max(0, self.bytes_before - self.bytes_after - self.still_linked_elsewhere)

    @property
    def files_gone(self) -> int:
        return max(0, self.files_before - self.files_after)

    @property
    def drive_gained(self) -> int | None:
        if self.drive_free_before is None or self.drive_free_after is None:
            return None
        return self.drive_free_after - self.drive_free_before

    def to_json(self) -> dict[str, Any]:
        return {"bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "files_before": self.files_before, "files_after": self.files_after,
                "freed_bytes": self.freed, "files_gone": self.files_gone,
                "still_linked_elsewhere_bytes": self.still_linked_elsewhere,
                "drive_free_before": self.drive_free_before,
                "drive_free_after": self.drive_free_after, "drive_gained_bytes": self.drive_gained}


class TargetResult(msgspec.Struct):
    target: Target
    status: Status
    files: int = 0  # entries the deleter removed (a tool command: files measured gone)
    dirs: int = 0
    bytes: int = 0  # freed, as measured (the location before minus after)
    skipped: list[Skipped] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    command: CommandRun | None = None
    measured: Measured | None = None
    units_removed: list[str] = msgspec.field(default_factory=list)
    units_left: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (id, why it stayed)
    warnings: list[str] = msgspec.field(default_factory=list)

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
            "estimated_bytes": self.target.bytes if self.target.measured else None,
            "measured": self.measured.to_json() if self.measured else None,
            "units_removed": self.units_removed,
            "units_left": [{"id": i, "why": w} for i, w in self.units_left],
            "skipped": [s.to_json() for s in self.skipped],
            "errors": self.errors,
            "warnings": self.warnings,
            "command": self.command.to_json() if self.command else None,
        }


class CleanResult(msgspec.Struct):
    plan: CleanPlan
    results: list[TargetResult] = msgspec.field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.status != "done" for r in self.results)

    @property
    def failed_apart_from_busy(self) -> bool:
        """Something went wrong other than a cache another cachedoctor was changing (which the
        scheduled job skips until its next run, like a cache in use)."""
        return any(r.status not in ("done", "busy") for r in self.results)

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
