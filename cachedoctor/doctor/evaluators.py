"""Condition evaluators: one per condition type a profile check may name.

An evaluator looks at the real system (where the cache really is, mounts, links, free space,
settings files, policies, the journal, the environment) and returns `Hit`s: one per offending
path, with the facts that fill the check's message and fix. A check holds when every one of
its conditions does; conditions about the same location must hold for the same path.
"""

from __future__ import annotations

import ntpath
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor import conditions as c
from cachedoctor.doctor.report import Hit
from cachedoctor.drives import DriveInfo
from cachedoctor.host import Host
from cachedoctor.profiles.base import ENV_PRESET
from cachedoctor.profiles.model import Check, Location, Profile, TunePreset

if TYPE_CHECKING:
    from cachedoctor.locate.effective import Picture
    from cachedoctor.locate.world import World
    from cachedoctor.relocate.journal import PendingOperation


class Context(msgspec.Struct):
    """What an evaluator may look at. `workspace` is the folder for workspace presets."""

    profile: Profile
    host: Host
    workspace: Path | None = None
    policy_root: str | None = None
    quotas: dict[tuple[str, str], int] | None = None
    world: World | None = None
    _paths: dict[str, list[str]] = msgspec.field(default_factory=dict)

    def the_world(self) -> World:
        if self.world is None:
            from cachedoctor.locate import observe

            self.world = observe(self.host)
        return self.world

    def picture(self, location_id: str) -> Picture:
        from cachedoctor.locate import picture

        return picture(self.profile, location_id, self.the_world())

    def paths(self, location_id: str) -> list[str]:
        """Where the location really is (its settings and links observed), existing or not
        (the nearest existing parent of a missing one decides its drive); a glob with no
        match gives nothing."""
        if location_id not in self._paths:
            from cachedoctor.resolve import has_glob

            pic = self.picture(location_id)
            found = [p.path for p in pic.existing]
            found += [p.path for p in pic.places if not p.exists and not has_glob(p.path)
                      and p.path not in found]
            self._paths[location_id] = found
        return self._paths[location_id]

    def quota_for(self, location: Location) -> int | None:
        from cachedoctor.sizes import parse_size

        if self.quotas is None:
            from cachedoctor.quota import quota_table

            self.quotas = quota_table()
        cap = self.quotas.get((self.profile.id, location.id))
        if cap is not None:
            return cap
        return parse_size(location.quota) if location.quota else None


Evaluator = Callable[[Any, Context], list[Hit]]


# --------------------------------------------------------------------------- path conditions


def _effective(path: str) -> str | None:
    """Where a location's data lives: a relocation link's target, the path itself otherwise;
    None for a broken link (link_target_missing reports those)."""
    from cachedoctor.links import is_broken, link_kind

    if link_kind(path) is None:
        return path
    if is_broken(path):
        return None
    return os.path.realpath(path)


def _location_exists(cond: c.LocationExists, ctx: Context) -> list[Hit]:
    return [Hit(p, cond.location, p) for p in ctx.paths(cond.location) if os.path.lexists(p)]


def _drive_hits(location: str, ctx: Context, value_if_bad: Callable[[DriveInfo], str | None]) -> list[Hit]:
    """One hit per path of `location` whose drive `value_if_bad` finds wrong (it returns the
    value to report, or None)."""
    from cachedoctor.drives import drive_of

    hits = []
    for path in ctx.paths(location):
        where = _effective(path)
        drive = drive_of(where) if where else None
        value = value_if_bad(drive) if drive is not None else None
        if drive is not None and value is not None:
            hits.append(Hit(path, location, value, {"mount": drive.mount}))
    return hits


def _mount_option(cond: c.MountOption, ctx: Context) -> list[Hit]:
    return _drive_hits(cond.location, ctx, lambda d: cond.option if cond.option in d.options else None)


def _filesystem_type(cond: c.FilesystemType, ctx: Context) -> list[Hit]:
    return _drive_hits(cond.location, ctx, lambda d: d.fstype if d.fstype in cond.types else None)


def _filesystem_differs(cond: c.FilesystemDiffers, ctx: Context) -> list[Hit]:
    from cachedoctor.drives import nearest_existing
    from cachedoctor.resolve import try_expand

    other = try_expand(cond.path, ctx.host)
    if not other:
        return []
    try:
        other_dev = os.stat(nearest_existing(other)).st_dev
    except OSError:
        return []
    hits = []
    for path in ctx.paths(cond.location):
        where = _effective(path)
        if where is None:
            continue
        try:
            if os.stat(nearest_existing(where)).st_dev != other_dev:
                hits.append(Hit(path, cond.location, other, {"data": where}))
        except OSError:
            continue
    return hits


def _link_kind(cond: c.LinkKind, ctx: Context) -> list[Hit]:
    from cachedoctor.links import link_kind, link_target

    hits = []
    for path in ctx.paths(cond.location):
        if link_kind(path) == cond.kind:
            target = link_target(path) or ""
            hits.append(Hit(path, cond.location, target, {"target": target}))
    return hits


def _link_target_missing(cond: c.LinkTargetMissing, ctx: Context) -> list[Hit]:
    from cachedoctor.links import is_broken, link_target

    hits = []
    for path in ctx.paths(cond.location):
        if is_broken(path):
            target = link_target(path) or ""
            hits.append(Hit(path, cond.location, target, {"target": target}))
    return hits


def _free_space_below(cond: c.FreeSpaceBelow, ctx: Context) -> list[Hit]:
    from cachedoctor.sizes import format_size, parse_size

    limit = parse_size(cond.size) if cond.size else None

    def low(drive: DriveInfo) -> str | None:
        if drive.total_bytes <= 0:
            return None
        percent_free = 100.0 * drive.free_bytes / drive.total_bytes
        if (limit is not None and drive.free_bytes < limit) or (
            cond.percent is not None and percent_free < cond.percent
        ):
            return f"{format_size(drive.free_bytes)} free ({percent_free:.1f}%)"
        return None

    return _drive_hits(cond.location, ctx, low)


def _over_quota(cond: c.OverQuota, ctx: Context) -> list[Hit]:
    from cachedoctor.sizes import format_size
    from cachedoctor.walker import measure

    cap = ctx.quota_for(ctx.profile.location(cond.location))
    if cap is None:
        return []
    existing = [p for p in ctx.paths(cond.location) if os.path.lexists(p)]
    if not existing:
        return []
    total = 0
    for path in existing:
        where = _effective(path)
        if where is not None:
            total += measure(where).allocated_bytes
    if total <= cap:
        return []
    value = f"{format_size(total)} (cap {format_size(cap)})"
    return [Hit(existing[0], cond.location, value, {"size": str(total), "cap": str(cap)})]


# ------------------------------------------------------------------------ setting conditions


def _settings_of(preset: TunePreset, key: str | list[str] | None) -> list[Any]:
    if key is None:
        return list(preset.settings)
    return [s for s in preset.settings if s.key == key]


def _key_text(key: str | list[str]) -> str:
    return key if isinstance(key, str) else ".".join(key)


class _Missing:
    pass


MISSING = _Missing()


def _read_settings(
    ctx: Context, preset_id: str, key: str | list[str] | None
) -> tuple[str | None, list[tuple[str | list[str], Any, Any]]]:
    """(where, [(key, wanted, current)]) for the preset's settings (all, or the one `key`).

    `current` is MISSING when the key is absent. `where` is None when the preset has no target
    here (a workspace preset without a workspace, a preset for another OS).
    """
    preset = ctx.profile.preset(preset_id)
    # A key the preset does not set is read as is (wanted: None).
    wanted_rows: list[tuple[str | list[str], Any]] = [
        (s.key, s.value) for s in _settings_of(preset, key)
    ] or ([(key, None)] if key is not None else [])
    rows: list[tuple[str | list[str], Any, Any]] = []
    if preset.format == ENV_PRESET:
        for name, wanted in wanted_rows:
            seen = ctx.host.getenv(_key_text(name))
            rows.append((name, wanted, MISSING if seen is None else seen))
        return ("environment", rows)
    from cachedoctor.configedit import get_key
    from cachedoctor.tune import preset_target

    workspace = str(ctx.workspace) if ctx.workspace is not None and preset.file is None else None
    target = preset_target(ctx.profile, preset_id, ctx.host, workspace=workspace)
    if target is None:
        return (None, [])
    if preset.file is None and not target.exists():
        return (None, [])  # no workspace settings here: nothing to judge
    for name, wanted in wanted_rows:
        try:
            current: Any = get_key(target, preset.format, name)
        except (KeyError, FileNotFoundError):
            current = MISSING
        rows.append((name, wanted, current))
    return (str(target), rows)


def _same(wanted: Any, current: Any) -> bool:
    if current is MISSING:
        return False
    if wanted == current:
        return True
    return isinstance(current, str) and not isinstance(wanted, str) and str(wanted) == current


def _setting_differs(cond: c.SettingDiffers, ctx: Context) -> list[Hit]:
    where, rows = _read_settings(ctx, cond.preset, cond.key)
    wrong = []
    for key, wanted, current in rows:
        if current is MISSING and not cond.unset_counts:
            continue
        if wanted is not None and not _same(wanted, current):
            import json  # only for a setting found wrong

            shown = "missing" if current is MISSING else json.dumps(current, default=str)
            wrong.append(f"{_key_text(key)} = {shown} (tuned: {json.dumps(wanted, default=str)})")
    if where is None or not wrong:
        return []
    return [Hit(where, None, "; ".join(wrong), {"file": where, "preset": cond.preset})]


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _setting_below(cond: c.SettingBelow, ctx: Context) -> list[Hit]:
    where, rows = _read_settings(ctx, cond.preset, cond.key)
    if where is None:
        return []
    hits = []
    for key, _wanted, current in rows:
        number = None if current is MISSING else _as_number(current)
        if number is not None and number < cond.below:
            hits.append(Hit(where, None, f"{_key_text(key)} = {current}", {"file": where}))
    return hits


def _is_absolute_any(text: str) -> bool:
    """Absolute on any OS: `/x`, `~/x`, `C:\\x`, `C:/x`, `\\\\server\\share`, `${env:HOME}/x`."""
    return (
        text.startswith(("/", "~", "\\\\"))
        or bool(re.match(r"^[A-Za-z]:[\\/]", text))
        or ntpath.isabs(text)
        or bool(re.match(r"^\$\{(env:)?(HOME|USERPROFILE)\}", text))
    )


def _setting_absolute_path(cond: c.SettingAbsolutePath, ctx: Context) -> list[Hit]:
    where, rows = _read_settings(ctx, cond.preset, cond.key)
    if where is None:
        return []
    hits = []
    for key, _wanted, current in rows:
        if current is MISSING:
            continue
        items = current if isinstance(current, list) else [current]
        absolute = [str(i) for i in items if isinstance(i, str) and _is_absolute_any(i)]
        if absolute:
            value = f"{_key_text(key)}: {', '.join(absolute)}"
            hits.append(Hit(where, None, value, {"file": where}))
    return hits


# ------------------------------------------------------------------------ browser policies

def _policy_value_below(cond: c.PolicyValueBelow, ctx: Context) -> list[Hit]:
    from cachedoctor.locate.files import LiveFiles
    from cachedoctor.policies import read_policy

    found = read_policy(cond.browser, cond.policy, ctx.host, LiveFiles(root=ctx.policy_root))
    if found.value is None or found.where is None:
        return []
    value, where = found.value, found.where
    number = _as_number(value)
    if number is None or number >= cond.below:
        return []
    return [Hit(where, None, f"{cond.policy} = {value}", {"file": where, "policy": cond.policy})]


INT32_MAX = 2**31 - 1  # Chromium's integer policies are ints: 2147483648 is read as a double


def _policy_not_int32(cond: c.PolicyNotInt32, ctx: Context) -> list[Hit]:
    from cachedoctor.locate.files import LiveFiles
    from cachedoctor.policies import read_policy

    found = read_policy(cond.browser, cond.policy, ctx.host, LiveFiles(root=ctx.policy_root))
    if found.value is None or found.where is None:
        return []
    value = found.value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX:
        return []
    return [Hit(found.where, None, f"{cond.policy} = {value!r}",
                {"file": found.where, "policy": cond.policy})]


# ------------------------------------------------------------------ journal, environment, OS


def pending_operations() -> list[PendingOperation]:
    """Every unfinished move or restore in the journal."""
    from cachedoctor.relocate import journal

    return journal.pending_operations()


def journal_hit(op: PendingOperation) -> Hit:
    facts = {"finish_command": op.finish_command, "rollback_command": op.rollback_command,
             "phase": op.phase}
    return Hit(None, op.location, op.summary, facts)


def _journal_unfinished(_cond: c.JournalUnfinished, ctx: Context) -> list[Hit]:
    return [journal_hit(op) for op in pending_operations() if op.tool == ctx.profile.id]


def managed_variables(host: Host) -> dict[str, str]:
    from cachedoctor.envvars import managed_variables as managed

    return dict(managed(host))


def _env_not_set(cond: c.EnvNotSet, ctx: Context) -> list[Hit]:
    if ctx.host.getenv(cond.var) is not None or cond.var in managed_variables(ctx.host):
        return []
    return [Hit(None, None, cond.var, {"var": cond.var})]


def _env_not_seen(cond: c.EnvNotSeen, ctx: Context) -> list[Hit]:
    wanted = managed_variables(ctx.host).get(cond.var)
    if wanted is None or ctx.host.getenv(cond.var) == wanted:
        return []
    seen = ctx.host.getenv(cond.var)
    return [Hit(None, None, wanted, {"var": cond.var, "seen": "" if seen is None else seen})]


def _os_is(cond: c.OsIs, ctx: Context) -> list[Hit]:
    os_name = ctx.host.os
    if os_name in cond.os or (os_name == "wsl" and "linux" in cond.os):
        return [Hit(None, None, os_name)]
    return []


EVALUATORS: dict[str, Evaluator] = {
    "location_exists": _location_exists,
    "mount_option": _mount_option,
    "filesystem_type": _filesystem_type,
    "filesystem_differs": _filesystem_differs,
    "link_kind": _link_kind,
    "link_target_missing": _link_target_missing,
    "free_space_below": _free_space_below,
    "over_quota": _over_quota,
    "setting_differs": _setting_differs,
    "setting_below": _setting_below,
    "setting_absolute_path": _setting_absolute_path,
    "policy_value_below": _policy_value_below,
    "policy_not_int32": _policy_not_int32,
    "journal_unfinished": _journal_unfinished,
    "env_not_set": _env_not_set,
    "env_not_seen": _env_not_seen,
    "os_is": _os_is,
}



_TRIVIAL_VALUES = ("os_is", "location_exists")  # their value says nothing a message needs


def evaluate_check(check: Check, ctx: Context) -> list[Hit]:
    """The hits of a check whose conditions all hold; [] when any does not.

    Conditions about a location give one hit per path; conditions about the same location must
    hold for the same path. The other conditions (settings, policies, environment, journal, OS)
    add their facts and values to every hit, and a settings or policy file they name becomes the
    finding's path (the location's own path stays in the fact `location_path`).
    """
    results: list[tuple[Any, list[Hit]]] = []
    for cond in check.when:
        hits = EVALUATORS[cond.type](cond, ctx)
        if not hits:
            return []
        results.append((cond, hits))
    facts: dict[str, str] = {}
    values: list[str] = []
    file_path: str | None = None
    bound: list[tuple[str, str, list[Hit]]] = []
    for cond, hits in results:
        if isinstance(cond, c.LocationCondition):
            bound.append((cond.location, cond.type, hits))
            continue
        for hit in hits:
            facts.update(hit.facts)
            if hit.value and cond.type not in _TRIVIAL_VALUES:
                values.append(hit.value)
            if file_path is None and hit.path is not None:
                file_path = hit.path
    if not bound:
        first = results[0][1][0]
        return [Hit(file_path, first.location, "; ".join(values) or first.value, facts)]
    first_location, first_type, first_hits = bound[0]
    out = []
    for hit in first_hits:
        merged = dict(facts)
        merged.update(hit.facts)
        found = [hit.value] if hit.value and first_type not in _TRIVIAL_VALUES else []
        holds = True
        for location, cond_type, hits in bound[1:]:
            if location != first_location:
                continue  # about another location: it holds somewhere, which is all it says
            same = [h for h in hits if h.path == hit.path]
            if not same:
                holds = False
                break
            merged.update(same[0].facts)
            if same[0].value and cond_type not in _TRIVIAL_VALUES:
                found.append(same[0].value)
        if holds:
            merged["location_path"] = hit.path or ""
            value = "; ".join(found + values) or hit.value
            out.append(Hit(file_path or hit.path, hit.location, value, merged))
    return out


