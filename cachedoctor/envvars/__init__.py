"""Persistent environment variables that cachedoctor manages.

The variables live in one store (`<config dir>/env.json`), which is the source of truth; each
change re-renders them where the OS reads them:

* POSIX: one marked block (`# >>> cachedoctor >>>` ... `# <<< cachedoctor <<<`) in the shell
  start-up files that exist, a fish `conf.d` file, and (Linux) a systemd `environment.d` file;
* Windows: values in `HKCU\\Environment`, then a `WM_SETTINGCHANGE` broadcast.

Re-running changes nothing; removing the last variable removes the block (and deletes the files
that are cachedoctor's own); text outside the block is never altered. Every change is recorded
in the history (kind `env`) with the values before and after, so it can be undone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor import statefile as sf
from cachedoctor.errors import UserInputError
from cachedoctor.host import Host

if TYPE_CHECKING:
    from cachedoctor.envvars.windows import Registry
    from cachedoctor.history import Change


class EnvResult(msgspec.Struct):
    files_changed: list[str]
    apply_now: str  # the line that applies the change in the current shell
    messages: list[str]
    before: dict[str, str | None] = msgspec.field(default_factory=dict)  # managed values before
    after: dict[str, str | None] = msgspec.field(default_factory=dict)  # None: no longer managed
    dry_run: bool = False
    change_id: int | None = None
    diff: str = ""  # what the change does to each start-up file (unified diffs)

    def to_json(self) -> dict[str, Any]:
        return {
            "files_changed": self.files_changed, "apply_now": self.apply_now, "messages": self.messages,
            "before": self.before, "after": self.after, "dry_run": self.dry_run,
            "change_id": self.change_id,
        }


def store_file() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "env.json"


class ManagedStore(msgspec.Struct, frozen=True):
    """The managed variables, and the shell files cachedoctor created to hold them (deleted
    again when the last variable goes, so set + unset leaves the home as it was)."""

    variables: dict[str, str]
    created_files: list[str]


def _parse_store(doc: dict[str, Any]) -> ManagedStore:
    return ManagedStore(sf.field(doc, "variables", sf.map_of(sf.text)),
                        sf.field_or(doc, "created_files", sf.list_of(sf.text), []))


STORE = sf.JsonKind[ManagedStore](
    "env.json", "managed variables file", 1, parse=_parse_store,
    dump=lambda store: {"variables": dict(sorted(store.variables.items())),
                        "created_files": sorted(set(store.created_files))},
    migrations=(lambda doc: doc,),  # 0: the same object without "format"
)


def _load_document() -> tuple[dict[str, str], list[str]]:
    store = STORE.read(store_file())
    return ({}, []) if store is None else (dict(store.variables), list(store.created_files))


def _load_store() -> dict[str, str]:
    return _load_document()[0]


def _save_store(values: Mapping[str, str], created: list[str]) -> None:
    STORE.write(store_file(), ManagedStore(dict(values), list(created)))


def managed_variables(host: Host) -> dict[str, str]:
    """Every variable cachedoctor manages, with the value it set."""
    return _load_store()


def validate(values: Mapping[str, str | None], host: Host) -> None:
    from cachedoctor.envvars.posix import NAME_RE

    for name, value in values.items():
        if not NAME_RE().match(name):
            raise UserInputError(
                f"invalid variable name {name!r}: use letters, digits and _ (not starting with a digit)"
            )
        if value is not None and any(c in value for c in "\0\n\r"):
            raise UserInputError(f"the value of {name} contains a line break or NUL byte")
        if host.is_windows and value is not None and len(value) > 32766:
            raise UserInputError(f"the value of {name} is longer than Windows allows (32767)")


def set_variables(values: dict[str, str], *, host: Host, dry_run: bool = False,
                  tool: str | None = None, registry: Registry | None = None) -> EnvResult:
    """Set (or change) managed variables persistently."""
    if not values:
        raise UserInputError("no variables to set")
    return _change(dict(values), host=host, dry_run=dry_run, tool=tool, registry=registry)


def unset_variables(names: list[str], *, host: Host, dry_run: bool = False,
                    tool: str | None = None, registry: Registry | None = None) -> EnvResult:
    """Stop managing variables: remove them from the block (or the registry)."""
    if not names:
        raise UserInputError("no variables to unset")
    return _change(dict.fromkeys(names), host=host, dry_run=dry_run, tool=tool, registry=registry)


def revert(before: Mapping[str, str | None], *, host: Host, dry_run: bool = False,
           undoes: int | None = None, registry: Registry | None = None) -> EnvResult:
    """Bring the given variables back to `before` (None: not managed)."""
    return _change(dict(before), host=host, dry_run=dry_run, tool=None, registry=registry, undoes=undoes)


def undo_change(change: Change, *, host: Host | None = None, dry_run: bool = False,
                registry: Registry | None = None) -> EnvResult:
    """Undo a recorded `env` change (history kind "env"): restore the values it replaced."""
    if change.kind != "env":
        raise UserInputError(f"change {change.id} is a {change.kind} change, not an env change")
    before = change.before.get("values")
    if not isinstance(before, dict):
        raise UserInputError(f"change {change.id} holds no variable values to restore")
    return revert(before, host=host or Host.current(), dry_run=dry_run, undoes=change.id,
                  registry=registry)


def _change(wanted: dict[str, str | None], *, host: Host, dry_run: bool, tool: str | None,
            registry: Registry | None, undoes: int | None = None) -> EnvResult:
    from cachedoctor.locking import exclusive

    validate(wanted, host)
    with exclusive("env:managed-variables", what="the managed environment variables"):
        store, created = _load_document()
        before = {name: store.get(name) for name in wanted}
        new_store = dict(store)
        for name, value in wanted.items():
            if value is None:
                new_store.pop(name, None)
            else:
                new_store[name] = value
        effective: Mapping[str, str | None] = wanted
        if host.is_windows:
            files, messages, effective = _windows(wanted, dry_run=dry_run, registry=registry)
            new_created, diff = created, ""
        else:
            files, messages, new_created, diff = _posix(new_store, host, created, dry_run=dry_run)
        store_changed = new_store != store or new_created != created
        if store_changed and not dry_run:
            _save_store(new_store, new_created)
    result = EnvResult(files, "", messages, before, dict(wanted), dry_run, diff=diff)
    changed_values = {k: v for k, v in wanted.items() if before[k] != v}
    if not files and not store_changed:
        unsetting = all(value is None for value in wanted.values())
        result.messages.insert(0, "nothing to change" if unsetting else "already set: nothing to change")
        return result
    result.apply_now = _apply_now({k: effective[k] for k in (changed_values or wanted)}, host)
    result.messages.append(
        "new shells and apps started from now on see the change"
        + ("" if host.is_windows else " (GUI sessions after the next login)")
    )
    if not host.is_windows and any(value is not None for value in wanted.values()):
        result.messages += _coverage_messages(host)
    if host.os == "macos":
        from cachedoctor.envvars.posix import launchctl_commands

        commands = "; ".join(" ".join(c) for c in launchctl_commands(changed_values or wanted))
        result.messages.append(
            f"GUI apps started from the Dock or Finder do not read shell files: run `{commands}` "
            "(or `cachedoctor env set --launchctl ...`) to give them the change until the next restart"
        )
    if not dry_run:
        from cachedoctor import history

        names = ", ".join(sorted(wanted))
        verb = "set" if all(v is not None for v in wanted.values()) else "unset"
        summary = f"env {verb} {names}" if undoes is None else f"undo env change {undoes}: {names}"
        result.change_id = history.record(
            "env", summary, tool=tool, before={"values": before},
            after={"values": dict(wanted), "files": files}, undoes=undoes,
        )
    return result


def _apply_now(values: Mapping[str, str | None], host: Host) -> str:
    if host.is_windows:
        from cachedoctor.envvars.windows import apply_now

        return apply_now(values)
    from cachedoctor.envvars.posix import apply_now as posix_apply_now

    return posix_apply_now(values, host)


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserInputError(f"cannot read {path}: {exc.strerror}") from None


def _coverage_messages(host: Host) -> list[str]:
    """Say which installed shells will see the change, and which will not and why."""
    from cachedoctor.envvars.posix import coverage

    found = coverage(host)
    home = host.home.rstrip("/")
    by_file: dict[str, list[str]] = {}
    for shell, file in found.seen_by.items():
        by_file.setdefault(file.replace(home, "~", 1), []).append(shell)
    out = []
    if by_file:
        out.append("login shells that will see it: " + "; ".join(
            f"{', '.join(shells)} ({file})" for file, shells in by_file.items()))
    for shell, remedy in found.missed.items():
        out.append(f"{shell} is installed but will not see it (it reads none of the files "
                   f"written): create {remedy} and run the same command again")
    return out


def _posix(store: Mapping[str, str], host: Host, created: list[str], *,
           dry_run: bool) -> tuple[list[str], list[str], list[str], str]:
    from cachedoctor.configedit import unified_diff
    from cachedoctor.envvars.posix import FilePlan, plan

    changed = [p for p in plan(store, host, _read, created) if p.changed]
    new_created = [f for f in created if not any(str(p.path) == f and p.after is None for p in changed)]
    new_created += [str(p.path) for p in changed if p.before is None and p.after is not None]
    messages: list[str] = []
    if not dry_run:
        targets = [(p, _write_target(p.path)) for p in changed]  # every file checked first
        for file_plan, target in targets:
            if file_plan.before is not None:
                messages.append(f"backup of {file_plan.path}: {_backup(target, file_plan.before)}")
        done: list[tuple[FilePlan, Path]] = []
        try:
            for file_plan, target in targets:
                _write(target, file_plan.before, file_plan.after)
                done.append((file_plan, target))
        except OSError as exc:  # all files or none: put back those already written
            for file_plan, target in reversed(done):
                with contextlib.suppress(OSError):
                    _write(target, file_plan.after, file_plan.before)
            from cachedoctor.errors import OperationFailed

            raise OperationFailed(f"cannot write {exc.filename or target}: {exc.strerror}; "
                                  "the start-up files were left as they were") from None
    messages += [f"{'would update' if dry_run else 'updated'} {p.path}" if p.after is not None
                 else f"{'would remove' if dry_run else 'removed'} {p.path}" for p in changed]
    diff = "".join(unified_diff(p.before, p.after or "", str(p.path)) for p in changed)
    return [str(p.path) for p in changed], messages, new_created, diff


def _write(target: Path, before: str | None, after: str | None) -> None:
    from cachedoctor.fsutil import atomic_write_bytes, fsync_dir

    if after is None:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        fsync_dir(target.parent)
    else:
        mode = None if before is not None else 0o644
        atomic_write_bytes(target, after.encode("utf-8", "surrogateescape"), mode=mode)


def _write_target(path: Path) -> Path:
    """Where an edit of `path` is written: a linked dotfile's target (the link stays a link);
    a link to nothing is refused (writing would create the target's folders somewhere else),
    and so is a file that cannot be written (checked before any file is changed)."""
    if path.is_symlink() and not path.exists():
        raise UserInputError(f"{path} is a link to {os.readlink(path)}, which does not exist; "
                             "nothing was changed", hint="fix or remove the link, then run again")
    target = Path(os.path.realpath(path))
    probe = target if target.exists() else target.parent
    if probe.exists() and not os.access(probe, os.W_OK):
        raise UserInputError(f"{target} cannot be written (read-only or immutable); nothing was "
                             "changed")
    return target


def _backup(target: Path, text: str) -> Path:
    """A copy of a start-up file as it was before cachedoctor edits it."""
    import time

    from cachedoctor.fsutil import atomic_write_bytes
    from cachedoctor.state import state_dir

    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
    backup = state_dir() / "backups" / "env" / f"{stamp}-{target.name.lstrip('.')}"
    atomic_write_bytes(backup, text.encode("utf-8", "surrogateescape"), mode=0o600)
    return backup


def _windows(wanted: Mapping[str, str | None], *, dry_run: bool, registry: Registry | None
             ) -> tuple[list[str], list[str], dict[str, str | None]]:
    from cachedoctor.envvars.windows import WinRegistry, change

    return change(wanted, registry if registry is not None else WinRegistry(), dry_run=dry_run)


__all__ = ["EnvResult", "managed_variables", "revert", "set_variables", "undo_change", "unset_variables"]
