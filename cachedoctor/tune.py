"""`tune`: apply a profile's preset of cache settings to the tool's own config file, and undo it.

A plan is computed entirely in memory (every setting applied in turn with the format-preserving
editor, the result re-parsed); applying it re-checks that the file has not changed since, keeps
a timestamped backup under the state folder, replaces the file atomically and records a history
entry (kind `tune`) with the file's text and SHA-256 before and after, the backup path and each
key's value before and after. Presets of format `env` set managed environment variables instead
(recorded as kind `env`). Nothing here prints.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor.configedit import (
    MISSING,
    ConfigSyntaxError,
    get_in_text,
    get_many_in_text,
    read_text,
    remove_file,
    remove_in_text,
    set_in_text,
    set_many_in_text,
    show_key,
    syntax_error,
    unified_diff,
    write_target,
    write_text,
)
from cachedoctor.errors import OperationFailed, RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.profiles.base import ENV_PRESET

if TYPE_CHECKING:
    from cachedoctor.envvars import EnvResult
    from cachedoctor.history import Change
    from cachedoctor.profiles.model import Profile, TunePreset

Key = str | list[str]


class SettingChange(msgspec.Struct):
    key: Key
    before: Any  # MISSING when the key was absent
    after: Any

    @property
    def changed(self) -> bool:
        return self.before is MISSING or self.before != self.after

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "present_before": self.before is not MISSING,
                "before": None if self.before is MISSING else self.before, "after": self.after,
                "changed": self.changed}


class TunePlan(msgspec.Struct):
    tool: str
    preset: TunePreset
    host: Host
    target: Path | None  # None for an `env` preset
    format: str
    changes: list[SettingChange]
    before_text: str | None  # None: the file does not exist yet
    after_text: str
    diff: str
    already_tuned: bool
    env: dict[str, str] = msgspec.field(default_factory=dict)  # for an `env` preset

    @property
    def creates(self) -> bool:
        return self.target is not None and self.before_text is None

    @property
    def sudo(self) -> list[str]:
        """The commands sudo runs to write a file only root may (a browser's policy in /etc)."""
        return root_step(self.target, removes=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "preset": self.preset.id, "format": self.format,
            "target": str(self.target) if self.target else None, "creates": self.creates,
            "already_tuned": self.already_tuned, "settings": [c.to_json() for c in self.changes],
            "diff": self.diff, "effect": self.preset.effect, "sudo": self.sudo,
        }


class TuneResult(msgspec.Struct):
    plan: TunePlan
    applied: bool
    backup: Path | None = None
    change_id: int | None = None
    env: EnvResult | None = None

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "applied": self.applied,
                "backup": str(self.backup) if self.backup else None, "change_id": self.change_id,
                "env": self.env.to_json() if self.env else None}


class UndoResult(msgspec.Struct):
    change: Change
    action: str  # restore-backup, delete-created-file, revert-keys, unset-env
    file: str | None
    diff: str  # what the undo changes
    changed_since: str  # diff from the tuned file to the file now ("" when untouched)
    reverted: list[str] = msgspec.field(default_factory=list)
    skipped: list[str] = msgspec.field(default_factory=list)  # keys edited since: left as they are
    dry_run: bool = False
    change_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"undoes": self.change.id, "action": self.action, "file": self.file,
                "diff": self.diff, "changed_since": self.changed_since, "reverted": self.reverted,
                "skipped": self.skipped, "dry_run": self.dry_run, "change_id": self.change_id}


# --- writing -----------------------------------------------------------------------------------


def root_step(target: Path | None, *, removes: bool) -> list[str]:
    """The sudo commands that write (or remove) `target` when only root may ([] otherwise)."""
    from cachedoctor import rootfiles

    if target is None:
        return []
    real = str(write_target(target))
    if rootfiles.route(real) != "sudo":
        return []
    return [rootfiles.shown(rootfiles.remove_commands(real) if removes
                            else rootfiles.write_commands(real))]


def _write(target: Path, text: str) -> None:
    """Write a tuned file; one only root may write (a browser's policy in /etc) through
    `cachedoctor.rootfiles` (sudo), the rest of the tune staying the user's."""
    from cachedoctor import rootfiles

    real = str(write_target(target))
    if rootfiles.route(real) == "direct":
        write_text(target, text)
    else:
        rootfiles.write(real, text)


def _remove(target: Path) -> None:
    from cachedoctor import rootfiles

    real = str(write_target(target))
    if rootfiles.route(real) == "direct":
        remove_file(target)
    else:
        rootfiles.remove(real)


# --- targets -----------------------------------------------------------------------------------


def choose_preset(profile: Profile, preset_id: str | None, *, workspace: str | None = None) -> TunePreset:
    """The named preset; otherwise the only one that fits (a workspace preset with --workspace)."""
    if not profile.tune:
        raise UserInputError(f"{profile.id} has no tune presets")
    names = ", ".join(p.id for p in profile.tune)
    if preset_id is not None:
        try:
            return profile.preset(preset_id)
        except KeyError:
            raise UserInputError(f"{profile.id} has no preset {preset_id!r}; presets: {names}") from None
    fitting = [p for p in profile.tune if (p.workspace_file is not None) == (workspace is not None)]
    if len(fitting) == 1:
        return fitting[0]
    same = [p for p in fitting if p.id == profile.id]
    if len(same) == 1:
        return same[0]
    raise UserInputError(f"{profile.id} has several presets; choose one with --preset: {names}")


def _template_paths(preset: TunePreset, host: Host) -> list[Path]:
    """The preset's files on this host; system-wide ones (a browser's managed policy in /etc)
    below the system root when one is set, as everywhere else (tests never write /etc)."""
    from cachedoctor.locate.files import system_path
    from cachedoctor.resolve import try_expand

    if preset.file is None:
        return []
    paths = [try_expand(t, host) for t in preset.file.for_host(host)]
    return [Path(system_path(p)) for p in paths if p]


def preset_target(profile: Profile, preset: TunePreset | str, host: Host, *, file: str | None = None,
                  workspace: str | None = None) -> Path | None:
    """The file a preset edits: `file` if given; `workspace/<workspace_file>` with a workspace;
    else the first of the preset's per-OS files that exists, or the first one that resolves.
    None for `env` presets and when nothing applies on this host."""
    from cachedoctor.resolve import to_host_path

    if isinstance(preset, str):
        preset = profile.preset(preset)
    if preset.format == ENV_PRESET:
        return None
    if file is not None:
        return Path(to_host_path(file, host))
    if workspace is not None:
        if preset.workspace_file is None:
            return None
        return Path(to_host_path(workspace, host)) / preset.workspace_file
    candidates = _template_paths(preset, host)
    for candidate in candidates:
        if candidate.exists():
            return candidate
    return candidates[0] if candidates else None


# --- planning ----------------------------------------------------------------------------------


def plan_tune(profile: Profile, preset_id: str | None, host: Host, *, file: str | None = None,
              workspace: str | None = None) -> TunePlan:
    """What applying the preset would change, computed without touching anything."""
    preset = choose_preset(profile, preset_id, workspace=workspace)
    if preset.format == ENV_PRESET:
        return _plan_env(profile, preset, host)
    if workspace is not None and preset.workspace_file is None and file is None:
        raise UserInputError(f"preset {preset.id!r} edits a user file, not a workspace: drop --workspace")
    target = preset_target(profile, preset, host, file=file, workspace=workspace)
    if target is None:
        if preset.workspace_file is not None and preset.file is None:
            raise UserInputError(f"preset {preset.id!r} edits a workspace file: pass --workspace DIR")
        raise UserInputError(f"preset {preset.id!r} names no file for {host.os}; pass --file PATH")
    from cachedoctor import rootfiles

    real = str(write_target(target))  # a link to nothing is refused before anything is planned
    if rootfiles.route(real) == "none":
        raise rootfiles.needs_root(real)
    before = read_text(target)
    if before is None and not preset.create:
        looked = [str(p) for p in _template_paths(preset, host)] if file is None and workspace is None else []
        where = ", ".join(looked) if looked else str(target)
        raise UserInputError(
            f"{profile.name}'s {preset.format} file was not found (looked at: {where})",
            hint="is the tool installed and started once? or point at the file with --file PATH",
        )
    text = before or ""
    try:
        keys = [s.key for s in preset.settings]
        olds = get_many_in_text(text, preset.format, keys) if text.strip() else [MISSING] * len(keys)
        changes = [SettingChange(s.key, old, s.value) for s, old in zip(preset.settings, olds, strict=True)]
        text = set_many_in_text(text, preset.format, [(s.key, s.value) for s in preset.settings])
    except ConfigSyntaxError as exc:
        raise syntax_error(target, exc) from None
    except ValueError as exc:
        raise UserInputError(f"{target}: cannot apply preset {preset.id!r}: {exc}") from None
    return TunePlan(profile.id, preset, host, target, preset.format, changes, before, text,
                    unified_diff(before, text, str(target)), before is not None and text == before)


def _plan_env(profile: Profile, preset: TunePreset, host: Host) -> TunePlan:
    from cachedoctor.envvars import managed_variables

    managed = managed_variables(host)
    env: dict[str, str] = {}
    changes = []
    for setting in preset.settings:
        if not isinstance(setting.key, str):
            raise UserInputError(f"preset {preset.id!r}: an environment variable name must be a string")
        value = _env_text(setting.value)
        env[setting.key] = value
        old = managed.get(setting.key, host.getenv(setting.key))
        changes.append(SettingChange(setting.key, MISSING if old is None else old, value))
    lines = []
    for change in changes:
        if change.changed or managed.get(str(change.key)) != change.after:
            if change.before is not MISSING:
                lines.append(f"-{change.key}={change.before}\n")
            lines.append(f"+{change.key}={change.after}\n")
    already = all(managed.get(k) == v for k, v in env.items())
    diff = "" if already else "--- environment (before)\n+++ environment (after)\n" + "".join(lines)
    return TunePlan(profile.id, preset, host, None, ENV_PRESET, changes, None, "", diff, already, env)


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


# --- applying ----------------------------------------------------------------------------------


def sha256_text(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def backup_dir() -> Path:
    from cachedoctor.state import state_dir

    return state_dir() / "backups" / "tune"


INLINE_TEXT = 256 << 10  # bigger files live in the backup only (the history keeps their hash)


def _inline(text: str | None) -> str | None:
    """A file's text for the history record: small files inline; a big one only by its backup
    and SHA-256, so a 20 MB settings.json is not copied into the database twice."""
    return text if text is None or len(text) <= INLINE_TEXT else None


def _lock(target: Path) -> Any:
    import os

    from cachedoctor.locking import exclusive

    return exclusive(f"config:{os.path.realpath(target)}", what=str(target))


def apply_tune(plan: TunePlan, *, dry_run: bool = False) -> TuneResult:
    """Write the planned file (or set the variables); refuses when the file changed meanwhile."""
    if plan.already_tuned or dry_run:
        return TuneResult(plan, applied=False)
    if plan.target is None:
        from cachedoctor.envvars import set_variables

        env = set_variables(plan.env, host=plan.host, tool=plan.tool)
        return TuneResult(plan, applied=True, change_id=env.change_id, env=env)
    from cachedoctor import history
    from cachedoctor.fsutil import atomic_write_bytes

    target = plan.target
    with _lock(target):
        if read_text(target) != plan.before_text:
            raise OperationFailed(f"{target} changed while the plan was shown; nothing was written",
                                  hint="run the command again")
        backup: Path | None = None
        if plan.before_text is not None:
            stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.time_ns() % 1_000_000_000:09d}"
            backup = backup_dir() / f"{stamp}-{plan.tool}-{plan.preset.id}-{target.name}"
            atomic_write_bytes(backup, plan.before_text.encode("utf-8"), mode=0o600)
        _write(target, plan.after_text)
        change_id = history.record(
            "tune", f"tune {plan.tool} --preset {plan.preset.id}: {target}", tool=plan.tool,
            before={
                "file": str(target), "existed": plan.before_text is not None,
                "text": _inline(plan.before_text),
                "sha256": sha256_text(plan.before_text), "backup": str(backup) if backup else None,
                "values": [{"key": c.key, "present": c.before is not MISSING,
                            "value": None if c.before is MISSING else c.before} for c in plan.changes],
            },
            after={
                "file": str(target), "text": _inline(plan.after_text),
                "sha256": sha256_text(plan.after_text),
                "preset": plan.preset.id, "format": plan.format,
                "values": [{"key": c.key, "present": True, "value": c.after} for c in plan.changes],
            },
        )
    return TuneResult(plan, applied=True, backup=backup, change_id=change_id)


# --- undo --------------------------------------------------------------------------------------


def latest_change(tool: str, *, preset_id: str | None = None, target: Path | None = None) -> Change | None:
    """The most recent tune of `tool` (optionally of that preset or file) not undone yet."""
    from cachedoctor import history

    for change in reversed(history.changes(kind="tune", tool=tool)):
        if change.undone_by is not None or change.after.get("undo_of") is not None:
            continue
        if preset_id is not None and change.after.get("preset") != preset_id:
            continue
        if target is not None and change.after.get("file") != str(target):
            continue
        return change
    return None


def undo_change(change: Change, *, dry_run: bool = False) -> UndoResult:
    """Undo a recorded tune (history kind `tune`).

    If the file is exactly as the tune left it, the previous file comes back whole (or a file
    the tune created is deleted). If it was edited since, only the preset's keys that still hold
    the tuned values are put back; keys edited since are left alone and reported. A file that
    is gone or no longer parses is refused with the reason.
    """
    from cachedoctor import history

    if change.kind != "tune" or change.undone_by is not None:
        raise RefusedError(f"change {change.id} is not a tune that can still be undone")
    file = change.after.get("file")
    fmt = change.after.get("format")
    if not isinstance(file, str) or not isinstance(fmt, str):
        raise RefusedError(f"change {change.id} does not record its file and format")
    target = Path(file)
    before_text = _recorded_before(change)
    after_text = change.after.get("text")
    with _lock(target):
        current = read_text(target)
        if current is None:
            raise RefusedError(f"{target} no longer exists, so the tune cannot be undone",
                               hint=f"the file before the tune is kept at {change.before.get('backup')}"
                               if change.before.get("backup") else None)
        since = unified_diff(after_text, current, str(target)) if isinstance(after_text, str) else ""
        if sha256_text(current) == change.after.get("sha256"):
            action = "restore-backup" if before_text is not None else "delete-created-file"
            new_text = before_text
            result = UndoResult(change, action, file, unified_diff(current, new_text or "", file),
                                "", [show_key(v["key"]) for v in change.after.get("values", [])],
                                dry_run=dry_run)
        else:
            new_text, result = _revert_keys(change, target, fmt, current, since, dry_run)
        if dry_run:
            return result
        if new_text is None:
            _remove(target)
        else:
            _write(target, new_text)
        result.change_id = history.record(
            "tune", f"undo tune {change.id}: {file}", tool=change.tool, undoes=change.id,
            before={"file": file, "existed": True, "text": current, "sha256": sha256_text(current)},
            after={"file": file, "existed": new_text is not None, "text": new_text,
                   "sha256": sha256_text(new_text), "format": fmt, "undo_of": change.id,
                   "action": result.action},
        )
    return result


def _recorded_before(change: Change) -> str | None:
    if not change.before.get("existed"):
        return None
    text = change.before.get("text")
    if isinstance(text, str):
        return text
    backup = change.before.get("backup")
    if isinstance(backup, str):
        restored = read_text(Path(backup))
        if restored is not None and sha256_text(restored) == change.before.get("sha256"):
            return restored
    raise RefusedError(f"the contents before change {change.id} were not kept (backup missing)")


def _revert_keys(change: Change, target: Path, fmt: str, current: str, since: str,
                 dry_run: bool) -> tuple[str, UndoResult]:
    before_values = {show_key(v["key"]): v for v in change.before.get("values", [])}
    text = current
    reverted, skipped = [], []
    try:
        for entry in change.after.get("values", []):
            key = entry["key"]
            try:
                now = get_in_text(text, fmt, key)
            except KeyError:
                now = MISSING
            if now is MISSING or now != entry["value"]:
                skipped.append(show_key(key))
                continue
            old = before_values.get(show_key(key), {"present": False})
            if old.get("present"):
                text = set_in_text(text, fmt, key, old.get("value"))
            else:
                text = remove_in_text(text, fmt, key)
            reverted.append(show_key(key))
    except ConfigSyntaxError as exc:
        raise RefusedError(
            f"{target} was edited since the tune and no longer parses "
            f"(line {exc.line}, column {exc.column}: {exc.message}); nothing was changed",
            hint="fix the file first, or restore the backup "
            f"{change.before.get('backup') or '(none: the file was created by the tune)'} by hand",
        ) from None
    if not reverted:
        raise RefusedError(
            f"{target} was edited since the tune and every tuned key has another value now "
            f"({', '.join(skipped)}); there is nothing of the tune left to undo",
        )
    return text, UndoResult(change, "revert-keys", str(target), unified_diff(current, text, str(target)),
                            since, reverted, skipped, dry_run=dry_run)


def undo_latest(profile: Profile, preset_id: str | None, host: Host, *, file: str | None = None,
                workspace: str | None = None, dry_run: bool = False) -> UndoResult | EnvResult:
    """`tune TOOL --undo`: undo the latest tune of this tool (and preset / file when given)."""
    preset = None
    if preset_id is not None or len(profile.tune) == 1:
        preset = choose_preset(profile, preset_id, workspace=workspace)
    if preset is not None and preset.format == ENV_PRESET:
        return _undo_env(profile, preset, host, dry_run=dry_run)
    target = None
    if file is not None or workspace is not None:
        if preset is None:
            preset = choose_preset(profile, None, workspace=workspace)
        target = preset_target(profile, preset, host, file=file, workspace=workspace)
    change = latest_change(profile.id, preset_id=preset.id if preset else None, target=target)
    if change is None:
        raise UserInputError(f"no tune of {profile.id} to undo" + (f" for {target}" if target else ""),
                             hint="see `cachedoctor history --kind tune`")
    return undo_change(change, dry_run=dry_run)


def _undo_env(profile: Profile, preset: TunePreset, host: Host, *, dry_run: bool) -> EnvResult:
    from cachedoctor import history
    from cachedoctor.envvars import undo_change as env_undo

    names = {s.key for s in preset.settings if isinstance(s.key, str)}
    for change in reversed(history.changes(kind="env", tool=profile.id)):
        values = change.after.get("values", {})
        if change.undone_by is None and isinstance(values, dict) and names & set(values):
            return env_undo(change, host=host, dry_run=dry_run)
    raise UserInputError(f"no environment change of preset {preset.id!r} to undo")
