"""Running a move or restore through its journaled phases, finishing or rolling back after a crash.

Every step checks the filesystem before acting, so running it again after an interruption at
any point does the right thing. See `journal` for the phases.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from cachedoctor.errors import CachedoctorError, OperationFailed, RefusedError
from cachedoctor.fs import seam
from cachedoctor.fs.probe import copy_options, verify_options
from cachedoctor.host import Host
from cachedoctor.links import link_kind, link_target, points_to, remove_link
from cachedoctor.relocate import faults, journal, methods, settle
from cachedoctor.relocate.copy import (
    ProgressCallback,
    copy_tree,
    make_durable,
    remove_tree,
    verify_tree,
)
from cachedoctor.relocate.journal import Operation, Pair


class Outcome(msgspec.Struct):
    """What a move or restore did (for rendering and --json)."""

    tool: str
    location: str
    kind: str  # move | restore
    status: str  # moved | restored | already_relocated | not_relocated | rolled_back | planned
    method: str = ""
    base: str = ""
    pairs: list[dict[str, Any]] = msgspec.field(default_factory=list)
    files: int = 0  # entries copied by this run (0 for a rename, or a resumed move past its copy)
    bytes: int = 0
    seconds: float = 0.0
    # measured afterwards where the data now is (files, allocated bytes): what a rename moved,
    # what a resumed move holds
    at_dest: tuple[int, int] | None = None
    messages: list[str] = msgspec.field(default_factory=list)
    history_id: int | None = None
    now_at: list[dict[str, Any]] | None = None  # where the tool's cache is, observed afterwards

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "location": self.location, "kind": self.kind, "status": self.status,
            "method": self.method, "dest": self.base, "pairs": self.pairs, "files": self.files,
            "bytes": self.bytes, "seconds": round(self.seconds, 3), "messages": self.messages,
            "history_id": self.history_id, "now_at": self.now_at,
            "at_dest": {"files": self.at_dest[0], "bytes": self.at_dest[1]}
            if self.at_dest is not None else None,
        }


def _pairs_json(op: Operation) -> list[dict[str, Any]]:
    return [{"source": p.source, "dest": p.dest, "same_filesystem": p.same_fs} for p in op.pairs]


def _fsync_parent(path: str) -> None:
    from cachedoctor.fsutil import fsync_dir

    with contextlib.suppress(OSError):
        fsync_dir(os.path.dirname(path) or ".")


def _rename(src: str, dst: str, label: str) -> None:
    faults.point(label)
    seam.rename(src, dst)  # Windows: retried while another program holds it
    _fsync_parent(dst)
    faults.point(label + "-done")


def _is_real_dir(path: str) -> bool:
    return link_kind(path) is None and os.path.isdir(path)


def _made_dest_stop(op: Operation) -> str:
    """Where emptying stops: at DEST, or above the first folder of DEST the move created
    (recorded when planned), so a restore leaves no empty folder it made behind."""
    made = op.settings.get("made_from")
    return os.path.dirname(made) if isinstance(made, str) and made else op.dest_root


def _remove_empty_parents(path: str, stop: str) -> None:
    """rmdir the empty folders from `path`'s parent up to (not including) `stop`."""
    from cachedoctor.safety import is_within

    current = os.path.dirname(path)
    while is_within(current, stop) and os.path.normcase(current) != os.path.normcase(stop):
        try:
            os.rmdir(current)
        except OSError:
            return
        current = os.path.dirname(current)


# --------------------------------------------------------------------------- move

PhaseCallback = Callable[[str], None]  # the step starting now: copy, verify, swap or cleanup


def _announce(phase: PhaseCallback | None, name: str) -> None:
    if phase is not None:
        phase(name)



def run_move(op: Operation, host: Host, *, progress: ProgressCallback | None = None,
             phase: PhaseCallback | None = None) -> Outcome:
    """Run (or finish) a move from the phase recorded in `op`."""
    started = time.monotonic()
    outcome = Outcome(op.tool, op.location, "move", "moved", op.method, op.base, _pairs_json(op))

    def save() -> None:
        journal.save(op)

    if not op.at_least("copied"):
        journal.save(op, "copying")
        try:
            for pair in op.pairs:
                files, nbytes = _copy_pair(op, pair, progress, phase)
                outcome.files += files
                outcome.bytes += nbytes
        except BaseException as exc:
            rolled_back = _abort(op, host)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)) or not rolled_back:
                raise
            raise _copy_failure(op, exc) from exc
        journal.save(op, "copied")
    _announce(phase, "swap")
    if not op.at_least("swapped"):
        for pair in op.pairs:
            if not pair.same_fs:
                _swap(op, pair)
        journal.save(op, "swapped")
    if not op.at_least("linked"):
        try:
            outcome.messages += methods.apply(op, host, save)
        except (OSError, CachedoctorError) as exc:
            _abort(op, host)
            raise OperationFailed(
                f"could not point {op.tool} at the new place ({exc}); rolled back: the cache is "
                f"where it was and the copy was removed") from exc
        journal.save(op, "linked")
    journal.save(op, "cleaning")
    _announce(phase, "cleanup")
    for index, pair in enumerate(op.pairs):
        if not pair.same_fs:
            aside = pair.aside(op.id)
            if os.path.lexists(aside):
                outcome.messages += _settled(aside, pair.dest, settle.load(op.id, index))
            remove_tree(aside)
    settle.discard(op.id, len(op.pairs))
    op.messages = outcome.messages
    recorded = journal.relocation(op.tool, op.location)
    if recorded is not None and recorded.id == op.id and "history_id" in recorded.settings:
        outcome.history_id = recorded.settings["history_id"]  # recorded before an interruption
    else:
        if recorded is not None and recorded.base == op.base and recorded.method == op.method:
            # a folder made since an earlier link move (a new browser profile) joins it: the
            # record keeps the earlier folders, so a restore brings every one back
            op.pairs = [p for p in recorded.pairs if p.source not in {q.source for q in op.pairs}
                        ] + op.pairs
        journal.set_relocation(op, op.tool, op.location)
        faults.point("registered")
        try:
            outcome.history_id = _record_move(op)
        except CachedoctorError as exc:  # the move is done and registered: say so, go on
            outcome.messages.append(f"the move is done but not in the history: {exc.message}")
        journal.set_relocation(op, op.tool, op.location)
        faults.point("recorded")
    journal.discard(op)
    outcome.at_dest = _measured(pair.dest for pair in op.pairs)
    outcome.seconds = time.monotonic() - started
    return outcome


def _measured(folders: Iterable[str]) -> tuple[int, int]:
    """Files and allocated bytes in `folders`, as du counts them."""
    from cachedoctor.walker import measure

    files = nbytes = 0
    for folder in folders:
        result = measure(folder)
        files, nbytes = files + result.files, nbytes + result.allocated_bytes
    return files, nbytes


def _copy_pair(op: Operation, pair: Pair, progress: ProgressCallback | None,
               phase: PhaseCallback | None) -> tuple[int, int]:
    src, dst = pair.source, pair.dest
    if pair.same_fs:
        if _is_real_dir(src) and not os.path.lexists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            try:
                _rename(src, dst, "rename-same-fs")
                return 0, 0
            except OSError as exc:
                if exc.errno != errno.EXDEV:  # a bind mount of the same filesystem: copy instead
                    raise
                pair.same_fs = False
                journal.save(op)
        elif os.path.isdir(dst) and not _is_real_dir(src):
            return 0, 0  # renamed before the interruption
        elif _is_real_dir(src) and _empty_real_dir(dst):
            os.rmdir(dst)
            _rename(src, dst, "rename-same-fs")
            return 0, 0
        else:
            raise OperationFailed(f"neither {src} nor {dst} holds the cache as expected")
    partial = pair.partial(op.id, "move")
    if os.path.lexists(dst) and not os.path.lexists(partial) and not _empty_real_dir(dst):
        # renamed into place before the interruption -- or put there by something else since:
        # the original is deleted later, so what is there must match it before it is trusted
        index = op.pairs.index(pair)
        if settle.load(op.id, index) is None:
            settle.save(op.id, index, settle.digests(src))
        problems = verify_tree(src, dst, content=op.verify == "hash",
                               options=verify_options(src, dst))
        if problems:
            raise OperationFailed(
                f"{dst} already exists but is not a copy of {src} ({problems[0]}); "
                "the cache was left where it is",
                hint=f"move {dst} out of the way, then run the same command again",
            )
        return 0, 0
    remove_tree(partial)
    if _empty_real_dir(dst):
        os.rmdir(dst)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    # --verify size never reads the original again, and it is deleted once the move is done
    _announce(phase, "copy")
    result = copy_tree(src, partial, progress=progress, durable=True,
                       drop_source_cache=op.verify != "hash", options=copy_options(src, partial))
    make_durable(partial)  # the copy is on stable storage before the original is touched
    # what the original holds as it is verified: a later write to it is merged, never lost
    settle.save(op.id, op.pairs.index(pair), settle.digests(src))
    _announce(phase, "verify")
    faults.point("verify")
    problems = verify_tree(src, partial, content=op.verify == "hash",
                           options=verify_options(src, partial))
    if problems:
        raise _VerifyFailed(problems)
    _rename(partial, dst, "rename-dest")
    return result.entries, result.bytes


def _empty_real_dir(path: str) -> bool:
    try:
        return _is_real_dir(path) and not os.listdir(path)
    except OSError:
        return False


class _VerifyFailed(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems[:3]))
        self.problems = problems


def _copy_failure(op: Operation, exc: BaseException) -> CachedoctorError:
    from cachedoctor.drives import drive_of
    from cachedoctor.sizes import format_size

    sources = ", ".join(p.source for p in op.pairs)
    if isinstance(exc, _VerifyFailed):
        shown = "\n  ".join(exc.problems[:10])
        return OperationFailed(
            f"the copy did not match the original (is the tool writing to it?):\n  {shown}\n"
            f"the partial copy was removed; {sources} is untouched",
            hint="close the tool and run the move again")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        from cachedoctor.relocate.copy import survey

        needed = sum(survey(p.source).apparent_bytes for p in op.pairs if not p.same_fs)
        drive = drive_of(op.base)
        free = format_size(drive.free_bytes) if drive else "unknown"
        where = drive.mount if drive else op.dest_root
        return OperationFailed(
            f"{where} ran out of space: the cache needs up to {format_size(needed)} "
            f"(apparent size; {free} free after removing the partial copy); "
            f"the partial copy was removed and {sources} is untouched")
    if isinstance(exc, CachedoctorError):
        return exc
    return OperationFailed(f"the copy failed: {exc}; the partial copy was removed and "
                           f"{sources} is untouched")


def _swap(op: Operation, pair: Pair) -> None:
    aside = pair.aside(op.id)
    if _is_real_dir(pair.source) and not os.path.lexists(aside):
        _rename(pair.source, aside, "swap")
    elif os.path.lexists(aside) and not _is_real_dir(pair.source):
        return
    elif os.path.lexists(aside):
        raise OperationFailed(f"both {pair.source} and {aside} exist; the tool re-created its cache "
                              "meanwhile. Close it and run the same command again")


def _abort(op: Operation, host: Host) -> bool:
    """Roll back a move whose original data is still complete (phases before `cleaning`).

    Returns False when that is no longer possible (the caller then keeps the journal).
    """
    if op.at_least("cleaning"):
        return False
    _rollback_pairs(op, host)
    settle.discard(op.id, len(op.pairs))
    journal.discard(op)
    return True


def _rollback_pairs(op: Operation, host: Host) -> list[str]:
    messages: list[str] = []
    if not methods.method_of(op.method).leaves_link and op.at_least("swapped"):  # links: below
        messages += methods.revert(op, host)
    for pair in op.pairs:
        src, dst = pair.source, pair.dest
        if link_kind(src) is not None:
            target = link_target(src)
            if points_to(src, dst) or (target and os.path.normcase(target) == os.path.normcase(dst)):
                faults.point("unlink")
                remove_link(src)
        if pair.same_fs:
            if _empty_real_dir(src) and os.path.isdir(dst):
                os.rmdir(src)
            if not os.path.lexists(src) and _is_real_dir(dst):
                _rename(dst, src, "unrename")
        else:
            aside = pair.aside(op.id)
            if os.path.lexists(aside):
                if _empty_real_dir(src):
                    os.rmdir(src)
                if not os.path.lexists(src):
                    _rename(aside, src, "unswap")
            if not _is_real_dir(src):
                raise OperationFailed(f"cannot roll back: {src} is missing")
            remove_tree(pair.partial(op.id, "move"))
            removing = f"{dst}.cachedoctor-removing-{op.id}"
            remove_tree(removing)  # a rollback killed while deleting the copy: finish that
            if os.path.lexists(dst) and link_kind(dst) is None:
                # only our own copy goes: something else put there after an interruption stays
                if verify_tree(src, dst, content=False, options=verify_options(src, dst)):
                    messages.append(f"left {dst} in place: it is not a copy of {src}")
                else:
                    # renamed first, so a kill half-way leaves a folder named for what it is
                    _rename(dst, removing, "unplace")
                    remove_tree(removing)
        _remove_empty_parents(dst, _made_dest_stop(op))
    return messages


def _record_move(op: Operation) -> int:
    from cachedoctor import history

    kind = methods.method_of(op.method).history_kind
    sources = [p.source for p in op.pairs]
    before = {"tool": op.tool, "location": op.location, "method": op.method,
              "original_path": sources[0], "original_paths": sources}
    after = {"tool": op.tool, "location": op.location, "method": op.method, "new_path": op.base,
             "pairs": _pairs_json(op), "settings": op.settings, "original_path": sources[0]}
    change_id = history.record(kind, f"moved {op.tool} ({op.location}) to {op.base} by {op.method}",
                               tool=op.tool, before=before, after=after)
    op.settings["history_id"] = change_id
    return change_id


# --------------------------------------------------------------------------- restore


def restore_op(op: Operation, host: Host, *, progress: ProgressCallback | None = None,
               phase: PhaseCallback | None = None) -> Outcome:
    """Restore: roll back an unfinished move, finish an unfinished restore, or undo a finished move."""
    if op.kind == "move" and op.phase != "done":
        if not op.at_least("cleaning"):
            messages = _rollback_pairs(op, host)
            settle.discard(op.id, len(op.pairs))
            journal.discard(op)
            return Outcome(op.tool, op.location, "restore", "rolled_back", op.method, op.base,
                           _pairs_json(op), messages=messages)
        leftovers = [p.aside(op.id) for p in op.pairs if not p.same_fs]
        restore = _restore_from(op, leftovers)
        journal.save(restore)
        journal.discard(op)
        op = restore
    elif op.kind == "move":  # a finished move from the registry
        op = _restore_from(op, [])
        journal.save(op)
    return _run_restore(op, host, progress, phase)


def _restore_from(move: Operation, leftovers: list[str]) -> Operation:
    settings = dict(move.settings)
    settings["leftovers"] = leftovers
    return Operation(id=journal.new_id(), kind="restore", tool=move.tool, location=move.location,
                     method=move.method, dest_root=move.dest_root, base=move.base,
                     pairs=[Pair(p.source, p.dest, p.same_fs) for p in move.pairs],
                     verify=move.verify, settings=settings, profiles_dirs=move.profiles_dirs)


def _run_restore(op: Operation, host: Host, progress: ProgressCallback | None,
                 phase: PhaseCallback | None) -> Outcome:
    started = time.monotonic()
    outcome = Outcome(op.tool, op.location, "restore", "restored", op.method, op.base, _pairs_json(op))
    for leftover in op.settings.get("leftovers", []):
        remove_tree(leftover)  # the incomplete rest of an original; the full data is at the dest
    if not op.at_least("copied"):
        journal.save(op, "copying")
        try:
            for pair in op.pairs:
                if pair.same_fs:
                    continue
                if not _is_real_dir(pair.dest):
                    if pair.source in op.settings.get("reset", []):
                        continue  # its data is gone: the cache starts again empty
                    raise OperationFailed(f"the relocated cache {pair.dest} is missing "
                                          "(is its drive connected?); nothing was changed")
                partial = pair.partial(op.id, "restore")
                remove_tree(partial)
                _announce(phase, "copy")
                result = copy_tree(pair.dest, partial, progress=progress, durable=True,
                                   drop_source_cache=op.verify != "hash",
                                   options=copy_options(pair.dest, partial))
                make_durable(partial)
                settle.save(op.id, op.pairs.index(pair), settle.digests(pair.dest))
                _announce(phase, "verify")
                faults.point("verify")
                problems = verify_tree(pair.dest, partial, content=op.verify == "hash",
                                       options=verify_options(pair.dest, partial))
                if problems:
                    raise _VerifyFailed(problems)
                outcome.files += result.entries
                outcome.bytes += result.bytes
        except BaseException as exc:
            for pair in op.pairs:
                if not pair.same_fs:
                    remove_tree(pair.partial(op.id, "restore"))
            journal.discard(op)
            if isinstance(exc, (KeyboardInterrupt, SystemExit, CachedoctorError)):
                raise
            raise OperationFailed(f"copying the cache back failed: {exc}; the partial copy was "
                                  "removed and the relocated cache is untouched") from exc
        journal.save(op, "copied")
    _announce(phase, "swap")
    if not op.at_least("unlinked"):
        outcome.messages += methods.revert(op, host)
        journal.save(op, "unlinked")
    if not op.at_least("placed"):
        for pair in op.pairs:
            outcome.messages += _place(op, pair)
        journal.save(op, "placed")
    journal.save(op, "cleaning")
    _announce(phase, "cleanup")
    for pair in op.pairs:
        if not pair.same_fs:
            if not _is_real_dir(pair.source):
                raise OperationFailed(f"{pair.source} is not in place; not deleting {pair.dest}")
            if op.settings.get("foreign"):
                outcome.messages.append(
                    f"left {pair.dest} where it is: the link to it was not made by cachedoctor "
                    "(delete it yourself once nothing else uses it)")
                continue
            if link_kind(pair.dest) is None and os.path.lexists(pair.dest):
                index = op.pairs.index(pair)
                outcome.messages += _settled(pair.dest, pair.source, settle.load(op.id, index))
                remove_tree(pair.dest)
        _remove_empty_parents(pair.dest, _made_dest_stop(op))
    settle.discard(op.id, len(op.pairs))
    journal.set_relocation(None, op.tool, op.location)
    faults.point("unregistered")
    try:
        outcome.history_id = _record_restore(op)
    except CachedoctorError as exc:
        outcome.messages.append(f"the restore is done but not in the history: {exc.message}")
    faults.point("recorded")
    journal.discard(op)
    outcome.at_dest = _measured(pair.source for pair in op.pairs if _is_real_dir(pair.source))
    outcome.seconds = time.monotonic() - started
    return outcome


def _settled(original: str, new: str, before: settle.Digests | None) -> list[str]:
    """Merge late writes to `original` into `new` (raises, keeping the original, when it
    cannot); the message says what was merged."""
    faults.point("settle")
    done = settle.settle(original, new, before)
    if not done.copied:
        return []
    shown = ", ".join(done.copied[:5]) + (f" and {len(done.copied) - 5} more" if len(done.copied) > 5 else "")
    return [f"{len(done.copied)} file(s) written to {original} after it was copied were kept: {shown}"]


def _place(op: Operation, pair: Pair) -> list[str]:
    src = pair.source
    incoming = pair.dest if pair.same_fs else pair.partial(op.id, "restore")
    if not os.path.lexists(incoming):
        if _is_real_dir(src):
            return []  # placed before the interruption
        if src in op.settings.get("reset", []) and not os.path.lexists(src):
            os.makedirs(src)
            return [f"started again with an empty {src} ({pair.dest} was missing)"]
        raise OperationFailed(f"neither {incoming} nor {src} holds the cache")
    messages = []
    if os.path.lexists(src):
        if _empty_real_dir(src):
            os.rmdir(src)
        elif link_kind(src) is not None:
            raise RefusedError(f"{src} is a link that cachedoctor did not create; leaving it")
        else:
            conflict = f"{src}.cachedoctor-conflict-{op.id}"
            _rename(src, conflict, "conflict")
            messages.append(f"{src} had been re-created by the tool; its files were kept in {conflict}")
    os.makedirs(os.path.dirname(src), exist_ok=True)
    _rename(incoming, src, "place")
    return messages


def _record_restore(op: Operation) -> int:
    from cachedoctor import history

    sources = [p.source for p in op.pairs]
    before = {"tool": op.tool, "location": op.location, "method": op.method, "new_path": op.base,
              "pairs": _pairs_json(op), "original_path": sources[0]}
    after = {"tool": op.tool, "location": op.location, "method": op.method,
             "original_path": sources[0], "original_paths": sources}
    undoes = op.settings.get("history_id")
    return history.record("restore", f"restored {op.tool} ({op.location}) from {op.base}",
                          tool=op.tool, before=before, after=after,
                          undoes=undoes if isinstance(undoes, int) else None)
