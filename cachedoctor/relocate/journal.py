"""The relocation journal: one JSON file per unfinished move or restore.

Light imports only: the CLI calls `pending_operations()` at every start to warn about an
interrupted operation. Each file lives in `state_dir()/journal/<id>.json` and is rewritten
atomically (temp file, fsync, rename, fsync of the folder) *before* every phase begins, so after
a kill -9 or a power loss the file always names a phase whose effects are complete or
idempotently repeatable.

Move phases:    planned -> copying -> copied -> swapped -> linked -> cleaning -> done
Restore phases: planned -> copying -> copied -> unlinked -> placed -> cleaning -> done
A finished operation's file is deleted; the result lives on in `relocations.json` (what is
relocated where, read by `restore`) and in the history database.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from cachedoctor.fsutil import atomic_write_text
from cachedoctor.state import journal_dir, state_dir

Kind = Literal["move", "restore"]
MOVE_PHASES = ("planned", "copying", "copied", "swapped", "linked", "cleaning", "done")
RESTORE_PHASES = ("planned", "copying", "copied", "unlinked", "placed", "cleaning", "done")


@dataclass
class Pair:
    """One folder of the location: where the tool expects it and where the data goes."""

    source: str  # the path the tool uses (becomes a link for the link method)
    dest: str  # the new home of the data
    same_fs: bool

    def partial(self, op_id: str, kind: Kind) -> str:
        """The folder a copy is written into before it is verified and renamed into place."""
        base = self.dest if kind == "move" else self.source
        return f"{base}.cachedoctor-partial-{op_id}"

    def aside(self, op_id: str) -> str:
        """Where the original source waits (same filesystem) until the new place works."""
        return f"{self.source}.cachedoctor-old-{op_id}"


@dataclass
class Operation:
    """Everything needed to finish or roll back an operation without the profile."""

    id: str
    kind: Kind
    tool: str
    location: str
    method: str  # link | env | policy | config
    dest_root: str  # the DEST the user typed (resolved), parent of `base`
    base: str  # DEST/<tool>[/<location>]: what the link/env/policy/config points at
    pairs: list[Pair]
    verify: str = "size"  # size | hash
    settings: dict[str, Any] = field(default_factory=dict)
    phase: str = "planned"
    profiles_dirs: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Operation:
        data = dict(data)
        data["pairs"] = [Pair(**p) for p in data.get("pairs", [])]
        known = set(cls.__dataclass_fields__)
        op = cls(**{k: v for k, v in data.items() if k in known})
        from cachedoctor.relocate.methods import METHODS

        if op.method not in METHODS:  # a newer cachedoctor's, or edited by hand: damaged here
            raise ValueError(f"unknown relocation method {op.method!r}")
        return op

    def at_least(self, phase: str) -> bool:
        phases = MOVE_PHASES if self.kind == "move" else RESTORE_PHASES
        return phases.index(self.phase) >= phases.index(phase)

    def _global_args(self) -> str:
        return "".join(f" --profiles-dir {shlex.quote(d)}" for d in self.profiles_dirs)

    def move_command(self) -> str:
        from cachedoctor.relocate.methods import method_of

        options = method_of(self.method).command_options(self.settings)
        return (f"cachedoctor{self._global_args()} move {self.tool} {shlex.quote(self.dest_root)} "
                f"--location {self.location} --method {self.method}{options}")

    def restore_command(self) -> str:
        return f"cachedoctor{self._global_args()} restore {self.tool} --location {self.location}"


@dataclass(frozen=True)
class PendingOperation:
    """An interrupted operation, as the rest of the CLI shows it."""

    tool: str
    location: str
    phase: str
    summary: str
    finish_command: str
    rollback_command: str
    kind: str = "move"
    id: str = ""
    file: str = ""

    def what_to_do(self) -> str:
        """The commands that end it: a move is finished or rolled back; a restore (itself the
        way back) is only finished."""
        if self.rollback_command == self.finish_command:
            return f"`{self.finish_command}` finishes it"
        return f"`{self.finish_command}` finishes it, `{self.rollback_command}` rolls it back"


def _file(op_id: str) -> Path:
    return journal_dir() / f"{op_id}.json"


def new_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{os.urandom(3).hex()}"


def save(op: Operation, phase: str | None = None) -> None:
    """Durably record `op` (at `phase`, if given) before the phase's work begins."""
    from cachedoctor.relocate import faults

    if phase is not None:
        op.phase = phase
    op.updated = time.time()
    faults.point("journal")
    atomic_write_text(_file(op.id), json.dumps(op.to_json(), indent=2, ensure_ascii=False) + "\n")
    faults.point("journal-done")


def discard(op: Operation) -> None:
    from cachedoctor.fsutil import fsync_dir

    with contextlib.suppress(FileNotFoundError):
        _file(op.id).unlink()
        fsync_dir(journal_dir())


def _journal_files() -> list[Path]:
    directory = journal_dir()
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if not p.name.endswith(".settle.json"))


def _load(path: Path) -> Operation:
    return Operation.from_json(json.loads(path.read_text(encoding="utf-8")))


def load_all() -> list[Operation]:
    """Every unfinished operation; damaged journal files are left out (and left alone: see
    `damaged`, which every command reports)."""
    found = []
    for path in _journal_files():
        try:
            found.append(_load(path))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return found


def damaged() -> list[tuple[str, str]]:
    """(file, what is wrong) for every journal file that cannot be read: the operation it
    recorded is unfinished, and its folders (`*.cachedoctor-old-<id>`, `-partial-<id>`, named
    after the file) hold the data."""
    out = []
    for path in _journal_files():
        try:
            _load(path)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            out.append((str(path), f"{type(exc).__name__}: {exc}"))
    return out


def find(tool: str, location: str) -> Operation | None:
    for op in load_all():
        if op.tool == tool and op.location == location:
            return op
    return None


def pending_operations() -> list[PendingOperation]:
    """Unfinished moves and restores, with the commands that finish or roll them back."""
    out = []
    for op in load_all():
        if op.kind == "move":
            summary = (f"moving {op.tool} ({op.location}) to {op.base} was interrupted "
                       f"at phase {op.phase!r}")
            finish, rollback = op.move_command(), op.restore_command()
        else:
            summary = (f"restoring {op.tool} ({op.location}) from {op.base} was interrupted "
                       f"at phase {op.phase!r}")
            finish = rollback = op.restore_command()
        out.append(PendingOperation(op.tool, op.location, op.phase, summary, finish, rollback,
                                    op.kind, op.id, str(_file(op.id))))
    return out


# Completed relocations: what `restore` reads to know where a cache went and what was set.

def registry_file() -> Path:
    return state_dir() / "relocations.json"


def relocations() -> dict[str, dict[str, Any]]:
    """The registry as stored; {} when there is none. A damaged file raises OperationFailed
    naming it (and what can be recovered): treating it as empty would let the next move
    overwrite the record of every cache moved so far."""
    from cachedoctor.errors import OperationFailed

    path = registry_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise OperationFailed(f"cannot read cachedoctor's relocation registry {path}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OperationFailed(
            f"cachedoctor's relocation registry {path} is damaged ({exc}); nothing was changed",
            hint="restore it from a backup, or move it aside: the caches stay where they are, "
                 "and `cachedoctor where` shows where each tool really reads them",
        ) from None
    if not isinstance(data, dict):
        raise OperationFailed(f"cachedoctor's relocation registry {path} is damaged "
                              "(not a JSON object); nothing was changed")
    return data


def relocation_records() -> dict[str, Operation]:
    """Every completed relocation, by "tool/location" (damaged entries are left out)."""
    out: dict[str, Operation] = {}
    for key, data in relocations().items():
        if isinstance(data, dict):
            try:
                out[key] = Operation.from_json(data)
            except (TypeError, KeyError, ValueError):
                continue
    return out


def relocation(tool: str, location: str) -> Operation | None:
    data = relocations().get(f"{tool}/{location}")
    if not isinstance(data, dict):
        return None
    try:
        return Operation.from_json(data)
    except (TypeError, KeyError, ValueError):
        return None


def set_relocation(op: Operation | None, tool: str, location: str) -> None:
    """Record (or with None forget) the completed relocation of tool/location. Read, changed
    and written under the registry's lock: two moves of two tools at once keep both records."""
    from cachedoctor.locking import exclusive
    from cachedoctor.relocate import faults

    with exclusive("registry:relocations", wait=30.0, what="the relocation registry"):
        data = relocations()
        key = f"{tool}/{location}"
        if op is None:
            data.pop(key, None)
        else:
            entry = op.to_json()
            entry["phase"] = "done"
            data[key] = entry
        faults.point("registry")
        atomic_write_text(registry_file(), json.dumps(data, indent=2, ensure_ascii=False) + "\n")
