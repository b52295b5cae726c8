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
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from cachedoctor import statefile as sf
from cachedoctor.state import journal_dir, relocations_file

T = TypeVar("T")

Kind = Literal["move", "restore"]
MOVE_PHASES = ("planned", "copying", "copied", "swapped", "linked", "cleaning", "done")
RESTORE_PHASES = ("planned", "copying", "copied", "unlinked", "placed", "cleaning", "done")


class Pair(msgspec.Struct):
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


class Operation(msgspec.Struct):
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
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    phase: str = "planned"
    profiles_dirs: list[str] = msgspec.field(default_factory=list)
    started: float = msgspec.field(default_factory=time.time)
    updated: float = msgspec.field(default_factory=time.time)
    messages: list[str] = msgspec.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


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


# --- the stored form: read through these, so a damaged file is named, never half-used ----------

_text, _texts = sf.text, sf.list_of(sf.text)
_maybe_text = sf.optional(sf.text)
# The method settings each key may hold (written by relocate.methods and the engine); a key not
# listed is kept as it is.
SETTING_TYPES: dict[str, Callable[[Any, str], Any]] = {
    "link_kind": _text, "vars": sf.map_of(_text), "scope": _text, "service": _texts,
    "browser": _text, "policy": _text, "file": _text, "format": _text, "key": _text,
    "section": _maybe_text, "value": sf.anything, "before": sf.anything, "after": _maybe_text,
    "asked": sf.map_of(_maybe_text), "history_id": sf.integer, "applied": sf.boolean,
    "env_before": sf.map_of(_maybe_text), "foreign": sf.boolean, "reset": _texts,
    "leftovers": _texts,
}


def _settings(value: Any, where: str) -> dict[str, Any]:
    doc = sf.obj(value, where)
    for key, check in SETTING_TYPES.items():
        if key in doc:
            check(doc[key], f"{where}.{key}")
    return dict(doc)


def _pair(value: Any, where: str) -> Pair:
    doc = sf.obj(value, where)
    return Pair(sf.field(doc, "source", _text, where), sf.field(doc, "dest", _text, where),
                sf.field(doc, "same_fs", sf.boolean, where))


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def checked(value: Any, where: str) -> str:
        if sf.text(value, where) not in choices:
            raise sf.Invalid(f"{where}: expected one of {', '.join(choices)}, found {value!r}")
        return str(value)
    return checked


def _method(value: Any, where: str) -> str:
    """A registered relocation method: one this version does not know (a newer cachedoctor's,
    an edit by hand) makes the operation damaged here, never a crash later."""
    from cachedoctor.relocate.methods import NAMES

    return _choice(NAMES)(value, where)


def parse_operation(value: Any, where: str = "") -> Operation:
    """An Operation from its stored form (sf.Invalid, saying where, when it is not one)."""
    doc = sf.obj(value, where or "the operation")
    kind: Kind = "move" if sf.field(doc, "kind", _choice(("move", "restore")), where) == "move" \
        else "restore"

    def req(key: str, check: Callable[[Any, str], T]) -> T:
        return sf.field(doc, key, check, where)

    def opt(key: str, check: Callable[[Any, str], T], default: T) -> T:
        return sf.field_or(doc, key, check, default, where)

    now = time.time()
    return Operation(
        id=req("id", _text), kind=kind, tool=req("tool", _text), location=req("location", _text),
        method=req("method", _method), dest_root=req("dest_root", _text), base=req("base", _text),
        pairs=req("pairs", sf.list_of(_pair)), verify=opt("verify", _text, "size"),
        settings=opt("settings", _settings, {}),
        phase=opt("phase", _choice(MOVE_PHASES if kind == "move" else RESTORE_PHASES), "planned"),
        profiles_dirs=opt("profiles_dirs", _texts, []), started=opt("started", sf.number, now),
        updated=opt("updated", sf.number, now), messages=opt("messages", _texts, []),
    )


JOURNAL = sf.JsonKind[Operation](
    "journal/ID.json", "journal file of an interrupted move or restore", 1,
    parse=parse_operation, dump=Operation.to_json,
    migrations=(lambda doc: doc,),  # 0: the same object without "format"
    hint="its operation cannot be finished from it: the data is complete in the folders named "
         "after it (*.cachedoctor-old-ID, *.cachedoctor-partial-ID; `cachedoctor doctor` lists "
         "them); move the file aside once they are dealt with",
)


class PendingOperation(msgspec.Struct, frozen=True):
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
    JOURNAL.write(_file(op.id), op)
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
    op = JOURNAL.read(path)
    if op is None:
        raise FileNotFoundError(path)
    return op


def load_all() -> list[Operation]:
    """Every unfinished operation; damaged journal files are left out (and left alone: see
    `damaged`, which every command reports and `check_state`, which `move`/`restore` call)."""
    found = []
    for path in _journal_files():
        try:
            found.append(_load(path))
        except (OSError, sf.StateFileDamaged):
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
        except sf.StateFileDamaged as exc:
            out.append((str(path), exc.problem))
        except OSError as exc:
            out.append((str(path), f"{type(exc).__name__}: {exc}"))
    return out


def check_state() -> None:
    """Raise StateFileDamaged (exit 2) for a damaged journal file or relocation registry: a
    move or restore must not start while one may record an operation on the same cache."""
    for path in _journal_files():
        try:
            _load(path)
        except FileNotFoundError:
            continue  # finished and discarded meanwhile
    relocation_records()


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
    return relocations_file()


def _parse_registry(doc: dict[str, Any]) -> dict[str, Operation]:
    return {key: parse_operation(entry, key) for key, entry in doc.items()}


REGISTRY = sf.JsonKind[dict[str, Operation]](
    "relocations.json", "relocation registry", 1, parse=_parse_registry,
    # the records sit beside "format" (their keys are tool/location): an older cachedoctor
    # reads the file as before, passing over "format", and keeps it when it writes
    dump=lambda records: {key: {**op.to_json(), "phase": "done"} for key, op in records.items()},
    migrations=(lambda doc: doc,),  # 0: the same object without "format"
    hint="restore it from a backup, or move it aside: the caches stay where they are, and "
         "`cachedoctor where` shows where each tool really reads them",
)


def relocation_records() -> dict[str, Operation]:
    """Every completed relocation, by "tool/location"; {} when there is none. A damaged file
    raises StateFileDamaged naming it (and what is wrong): treating it as empty would let the
    next move overwrite the record of every cache moved so far."""
    return REGISTRY.read(registry_file()) or {}


def relocation(tool: str, location: str) -> Operation | None:
    return relocation_records().get(f"{tool}/{location}")


def set_relocation(op: Operation | None, tool: str, location: str) -> None:
    """Record (or with None forget) the completed relocation of tool/location. Read, changed
    and written under the registry's lock: two moves of two tools at once keep both records."""
    from cachedoctor.locking import exclusive
    from cachedoctor.relocate import faults

    with exclusive("registry:relocations", wait=30.0, what="the relocation registry"):
        records = relocation_records()
        key = f"{tool}/{location}"
        if op is None:
            records.pop(key, None)
        else:
            records[key] = op
        faults.point("registry")
        REGISTRY.write(registry_file(), records)
