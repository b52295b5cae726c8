"""`doctor`: evaluate the checks of the profiles and report what is wrong, why, and the fix.

A profile check names condition types (`cachedoctor.conditions`); this module holds one
evaluator per type in `EVALUATORS`. An evaluator looks at the real system (mounts, links, free
space, settings files, policies, the journal, the environment) and returns `Hit`s: one per
offending path, with the facts that fill the check's message and fix. A check is a finding
when every one of its conditions holds; conditions about the same location must hold for the
same path.

Nothing here prints; the CLI renders `DoctorReport`.
"""

from __future__ import annotations

import json
import ntpath
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cachedoctor import conditions as c
from cachedoctor.drives import DriveInfo
from cachedoctor.errors import CachedoctorError
from cachedoctor.host import Host
from cachedoctor.profiles.model import Check, Location, Profile, TunePreset

Severity = Literal["error", "warning", "hint"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "hint": 2}

POLICY_ROOT_ENV = "CACHEDOCTOR_POLICY_ROOT"
"""Folder standing in for `/` when reading Linux managed browser policies (tests, containers)."""

GLOBAL_TOOL = "(cachedoctor)"


@dataclass(frozen=True)
class Hit:
    """One place where a condition holds, with the facts found there."""

    path: str | None = None
    location: str | None = None
    value: str | None = None
    facts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    tool: str
    location: str | None
    path: str | None
    check: str
    severity: Severity
    message: str
    why: str
    fix: str | None
    value: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "location": self.location,
            "path": self.path,
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
            "value": self.value,
        }


@dataclass(frozen=True)
class CheckError:
    """A check that could not be evaluated (unreadable settings file, broken policy JSON...)."""

    tool: str
    check: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"tool": self.tool, "check": self.check, "error": self.error}


@dataclass
class DoctorReport:
    tools: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    errors: list[CheckError] = field(default_factory=list)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def exit_code(self) -> int:
        return 1 if self.count("error") or self.errors else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tools": list(self.tools),
            "findings": [f.to_json() for f in self.findings],
            "errors": [e.to_json() for e in self.errors],
            "summary": {
                "errors": self.count("error"),
                "warnings": self.count("warning"),
                "hints": self.count("hint"),
                "check_errors": len(self.errors),
            },
        }


@dataclass
class Context:
    """What an evaluator may look at. `workspace` is the folder for workspace presets."""

    profile: Profile
    host: Host
    workspace: Path | None = None
    policy_root: str | None = None
    quotas: dict[tuple[str, str], int] | None = None
    _paths: dict[str, list[str]] = field(default_factory=dict)

    def paths(self, location_id: str) -> list[str]:
        """Existing paths of a location, plus declared paths that don't exist yet (their nearest
        existing parent decides the drive); glob templates with no match give nothing."""
        if location_id not in self._paths:
            from cachedoctor.profiles.resolved import declared_paths, location_paths
            from cachedoctor.resolve import has_glob

            found = [lp.path for lp in location_paths(self.profile, self.host, location_id)]
            for location, pattern in declared_paths(self.profile, self.host):
                if location.id == location_id and not has_glob(pattern) and pattern not in found:
                    found.append(pattern)
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
    if preset.format == "env":
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
        if wanted is not None and not _same(wanted, current):
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

_POLICY_DIRS: dict[str, tuple[str, ...]] = {
    "chrome": ("etc/opt/chrome/policies/managed",),
    "chromium": ("etc/chromium/policies/managed", "etc/chromium-browser/policies/managed"),
    "edge": ("etc/opt/edge/policies/managed",),
}
_POLICY_REGISTRY: dict[str, str] = {
    "chrome": r"Software\Policies\Google\Chrome",
    "edge": r"Software\Policies\Microsoft\Edge",
    "chromium": r"Software\Policies\Chromium",
}
_POLICY_MAC_DOMAINS: dict[str, str] = {
    "chrome": "com.google.Chrome",
    "edge": "com.microsoft.Edge",
    "chromium": "org.chromium.Chromium",
}


def policy_root(root: str | None = None) -> str:
    return root or os.environ.get(POLICY_ROOT_ENV) or "/"


def linux_policy_files(browser: str, root: str | None = None) -> list[Path]:
    """The managed policy JSON files a browser reads on Linux, in the order it reads them."""
    base = Path(policy_root(root))
    files: list[Path] = []
    for rel in _POLICY_DIRS[browser]:
        folder = base / rel
        if folder.is_dir():
            files += sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file())
    return files


def registry_policy_keys(browser: str) -> list[tuple[str, str]]:
    """(hive, subkey) pairs read on Windows, machine policy first (it wins over user policy)."""
    sub = _POLICY_REGISTRY[browser]
    return [("HKEY_LOCAL_MACHINE", sub), ("HKEY_CURRENT_USER", sub)]


def _read_registry_value(hive: str, subkey: str, name: str) -> Any:  # pragma: no cover - Windows
    if sys.platform != "win32":
        return None
    import winreg

    root = getattr(winreg, hive)
    try:
        with winreg.OpenKey(root, subkey) as key:
            value, _kind = winreg.QueryValueEx(key, name)
            return value
    except OSError:
        return None


def read_policy(
    browser: str, policy: str, host: Host, *, root: str | None = None,
    registry: Callable[[str, str, str], Any] | None = None,
) -> tuple[Any, str] | None:
    """(value, where it was found) of a managed browser policy, or None when it is not set."""
    if host.is_windows:
        reader = registry or _read_registry_value
        for hive, subkey in registry_policy_keys(browser):
            value = reader(hive, subkey, policy)
            if value is not None:
                return value, f"{hive}\\{subkey}\\{policy}"
        return None
    if host.os == "macos":
        import plistlib

        base = Path(policy_root(root)) / "Library" / "Managed Preferences"
        plist = base / f"{_POLICY_MAC_DOMAINS[browser]}.plist"
        try:
            with plist.open("rb") as fh:
                data = plistlib.load(fh)
        except (OSError, plistlib.InvalidFileException, ValueError):
            return None
        return (data[policy], str(plist)) if isinstance(data, dict) and policy in data else None
    found: tuple[Any, str] | None = None
    for file in linux_policy_files(browser, root):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CachedoctorError(f"{file}: unreadable policy file: {exc}") from None
        if isinstance(data, dict) and policy in data:
            found = (data[policy], str(file))
    return found


def _policy_value_below(cond: c.PolicyValueBelow, ctx: Context) -> list[Hit]:
    found = read_policy(cond.browser, cond.policy, ctx.host, root=ctx.policy_root)
    if found is None:
        return []
    value, where = found
    number = _as_number(value)
    if number is None or number >= cond.below:
        return []
    return [Hit(where, None, f"{cond.policy} = {value}", {"file": where, "policy": cond.policy})]


# ------------------------------------------------------------------ journal, environment, OS


def pending_operations() -> list[Any]:
    """The move engineer's journal of unfinished operations ([] until that module exists)."""
    try:
        from cachedoctor.relocate import journal
    except ImportError:
        return []
    return list(journal.pending_operations())


def _journal_hit(op: Any) -> Hit:
    facts = {
        "finish_command": str(getattr(op, "finish_command", "") or ""),
        "rollback_command": str(getattr(op, "rollback_command", "") or ""),
        "phase": str(getattr(op, "phase", "") or ""),
    }
    return Hit(None, getattr(op, "location", None), str(getattr(op, "summary", "")), facts)


def _journal_unfinished(_cond: c.JournalUnfinished, ctx: Context) -> list[Hit]:
    return [_journal_hit(op) for op in pending_operations() if op.tool == ctx.profile.id]


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
    "journal_unfinished": _journal_unfinished,
    "env_not_set": _env_not_set,
    "env_not_seen": _env_not_seen,
    "os_is": _os_is,
}


# ----------------------------------------------------------------------- combining and filling

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(template: str, facts: Mapping[str, str | None], *, quote: Callable[[str], str] | None = None) -> str:
    """Replace `{name}` with a fact; unknown placeholders (and JSON braces) stay as written."""

    def sub(match: re.Match[str]) -> str:
        value = facts.get(match.group(1))
        if value is None:
            return match.group(0)
        return quote(value) if quote and match.group(1) == "path" else value

    return _PLACEHOLDER.sub(sub, template)


def shell_quote(text: str, host: Host) -> str:
    """Quote a path for the host's shell when it needs it."""
    if not text or re.fullmatch(r"[A-Za-z0-9_@%+=:,./\\~-]+", text):
        return text
    if host.is_windows:
        return '"' + text.replace('"', '""') + '"'
    return shlex.quote(text)


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
        location = getattr(cond, "location", None)
        if isinstance(location, str):
            bound.append((location, cond.type, hits))
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


def _finding(check: Check, profile: Profile, hit: Hit, host: Host) -> Finding:
    facts: dict[str, str | None] = dict(hit.facts)
    facts.update({"tool": profile.id, "location": hit.location, "path": hit.path, "value": hit.value})
    return Finding(
        tool=profile.id,
        location=hit.location,
        path=hit.path,
        check=check.id,
        severity=check.severity,
        message=fill(check.message.strip(), facts),
        why=fill(check.why.strip(), facts),
        fix=fill(check.fix, facts, quote=lambda p: shell_quote(p, host)) if check.fix else None,
        value=hit.value,
    )


def check_profile(
    profile: Profile, host: Host, *, workspace: Path | None = None, policy_root: str | None = None,
    quotas: dict[tuple[str, str], int] | None = None,
) -> tuple[list[Finding], list[CheckError]]:
    ctx = Context(profile, host, workspace=workspace, policy_root=policy_root, quotas=quotas)
    findings: list[Finding] = []
    errors: list[CheckError] = []
    for check in profile.checks:
        try:
            hits = evaluate_check(check, ctx)
        except ImportError as exc:
            errors.append(CheckError(profile.id, check.id, f"not available in this build: {exc}"))
            continue
        except (CachedoctorError, OSError, ValueError) as exc:
            errors.append(CheckError(profile.id, check.id, str(exc)))
            continue
        findings += [_finding(check, profile, hit, host) for hit in hits]
    return findings, errors


def journal_findings(tools: Sequence[str] | None, already: set[tuple[str, str | None]]) -> list[Finding]:
    """Global check: every unfinished move/restore in the journal (for `tools`, or all)."""
    out = []
    for op in pending_operations():
        tool = str(op.tool)
        if tools is not None and tool not in tools:
            continue
        if (tool, getattr(op, "location", None)) in already:
            continue
        hit = _journal_hit(op)
        finish, rollback = hit.facts["finish_command"], hit.facts["rollback_command"]
        out.append(Finding(
            tool=tool,
            location=hit.location,
            path=None,
            check="journal-unfinished",
            severity="error",
            message=f"An operation on {tool} was interrupted and is unfinished: {hit.value}"
            + (f" (phase {hit.facts['phase']})" if hit.facts["phase"] else ""),
            why="Until it is finished or rolled back, the cache may be split between two places "
            "and the tool may not find it. Nothing has been deleted; both commands are safe to run."
            + (f" To roll back instead: {rollback}" if rollback else ""),
            fix=finish or rollback or None,
            value=hit.value,
        ))
    return out


def run_doctor(
    profiles: Sequence[Profile], host: Host, *, explicit: bool = False, workspace: Path | None = None,
    policy_root: str | None = None,
) -> DoctorReport:
    """Evaluate every check of `profiles` (only present ones unless `explicit`) and the global
    checks. Findings are sorted by severity, then tool."""
    from cachedoctor.profiles.resolved import is_present

    report = DoctorReport()
    quotas: dict[tuple[str, str], int] | None = None
    for profile in profiles:
        if not explicit and not is_present(profile, host):
            continue
        report.tools.append(profile.id)
        if quotas is None:
            from cachedoctor.quota import quota_table

            try:
                quotas = quota_table()
            except CachedoctorError as exc:
                report.errors.append(CheckError(GLOBAL_TOOL, "quota-file", str(exc)))
                quotas = {}
        findings, errors = check_profile(
            profile, host, workspace=workspace, policy_root=policy_root, quotas=quotas
        )
        report.findings += findings
        report.errors += errors
    journal_checks = {
        (p.id, check.id)
        for p in profiles
        for check in p.checks
        if any(cond.type == "journal_unfinished" for cond in check.when)
    }
    already = {(f.tool, f.location) for f in report.findings if (f.tool, f.check) in journal_checks}
    journal_tools = [p.id for p in profiles] if explicit else None
    try:
        report.findings += journal_findings(journal_tools, already)
    except (CachedoctorError, OSError, ValueError) as exc:
        report.errors.append(CheckError(GLOBAL_TOOL, "journal-unfinished", str(exc)))
    report.findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.tool, f.check, f.path or ""))
    return report
