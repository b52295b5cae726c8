"""`scan`: what every cache weighs, where it lives, on which drive, how full that drive is."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cachedoctor.drives import DriveInfo, drive_of
from cachedoctor.links import is_broken, link_kind, link_target
from cachedoctor.walker import WalkResult, measure

if TYPE_CHECKING:  # profiles are imported only when scanning them: `scan --path` starts faster
    from cachedoctor.host import Host
    from cachedoctor.profiles.model import Profile

UNCLAIMED_LIMIT = 10
ProgressCallback = Callable[[str, int, int], None]  # (path, entries, bytes)

# Folders where tools drop caches without asking; what no profile claims there is listed too.
USER_CACHE_ROOTS: dict[str, tuple[str, ...]] = {
    "linux": ("${XDG_CACHE_HOME:-~/.cache}",),
    "wsl": ("${XDG_CACHE_HOME:-~/.cache}",),
    "macos": ("~/Library/Caches",),
    "windows": ("%LOCALAPPDATA%", "%TEMP%"),
}


@dataclass
class ScanEntry:
    tool: str | None
    location: str | None
    name: str | None
    path: str
    walk: WalkResult
    link: str | None = None
    target: str | None = None
    broken: bool = False
    drive: DriveInfo | None = None
    safe_to_delete: bool | None = None
    quota_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        w = self.walk
        return {
            "tool": self.tool,
            "location": self.location,
            "name": self.name,
            "path": self.path,
            "link": self.link,
            "target": self.target,
            "broken": self.broken,
            "bytes": w.allocated_bytes,
            "apparent_bytes": w.apparent_bytes,
            "files": w.files,
            "dirs": w.dirs,
            "inodes": w.inodes,
            "newest_mtime": w.newest_mtime,
            "partial": w.partial,
            "errors": list(w.errors),
            "safe_to_delete": self.safe_to_delete,
            "quota_bytes": self.quota_bytes,
            "drive": self.drive.to_json() if self.drive else None,
        }


@dataclass
class ScanReport:
    entries: list[ScanEntry] = field(default_factory=list)
    unclaimed: list[ScanEntry] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        return any(e.walk.partial for e in self.entries + self.unclaimed)

    def totals(self) -> dict[str, int]:
        entries = self.entries + self.unclaimed
        return {
            "bytes": sum(e.walk.allocated_bytes for e in entries),
            "apparent_bytes": sum(e.walk.apparent_bytes for e in entries),
            "files": sum(e.walk.files for e in entries),
            "dirs": sum(e.walk.dirs for e in entries),
            "inodes": sum(e.walk.inodes for e in entries),
            "entries": len(entries),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": [e.to_json() for e in self.entries],
            "unclaimed": [e.to_json() for e in self.unclaimed],
            "totals": self.totals(),
            "partial": self.partial,
        }


def _measure_entry(
    entry: ScanEntry,
    one_file_system: bool,
    progress: ProgressCallback | None,
    *,
    follow_relocation: bool = True,
) -> ScanEntry:
    """Measure one entry; a relocation link is measured at its target unless, like du, we are
    asked about the link itself."""
    path = entry.path
    entry.link = link_kind(path)
    if entry.link:
        entry.target = link_target(path)
        entry.broken = is_broken(path)
    relocated = follow_relocation and entry.link and not entry.broken and entry.target
    measured = entry.target if relocated and entry.target else path
    callback = (lambda n, b: progress(path, n, b)) if progress else None
    entry.walk = measure(measured, one_file_system=one_file_system, on_progress=callback)
    entry.walk.path = path
    entry.drive = drive_of(measured)
    return entry


def scan_profiles(
    profiles: Sequence[Profile],
    host: Host,
    *,
    one_file_system: bool = False,
    include_unclaimed: bool = True,
    quotas: dict[tuple[str, str], int] | None = None,
    progress: ProgressCallback | None = None,
) -> ScanReport:
    """Measure every existing location of `profiles`; a relocated location is measured at its target."""
    from cachedoctor.profiles.resolved import location_paths

    report = ScanReport()
    for profile in profiles:
        for lp in location_paths(profile, host):
            entry = ScanEntry(
                lp.tool,
                lp.location.id,
                lp.location.name,
                lp.path,
                WalkResult(lp.path),
                safe_to_delete=lp.location.safe_to_delete,
                quota_bytes=(quotas or {}).get((lp.tool, lp.location.id)),
            )
            report.entries.append(_measure_entry(entry, one_file_system, progress))
    if include_unclaimed:
        report.unclaimed = scan_unclaimed(
            profiles, host, one_file_system=one_file_system, progress=progress
        )
    report.entries.sort(key=lambda e: e.walk.allocated_bytes, reverse=True)
    return report


def scan_paths(
    paths: Sequence[str], *, one_file_system: bool = False, progress: ProgressCallback | None = None
) -> ScanReport:
    """Measure arbitrary folders, like du."""
    report = ScanReport()
    for path in paths:
        entry = ScanEntry(None, None, None, path, WalkResult(path))
        report.entries.append(
            _measure_entry(entry, one_file_system, progress, follow_relocation=False)
        )
    return report


def unclaimed_candidates(profiles: Sequence[Profile], host: Host) -> list[str]:
    """Folders directly under the user cache roots that no profile location overlaps."""
    from cachedoctor.profiles.resolved import declared_paths
    from cachedoctor.resolve import has_glob, try_expand
    from cachedoctor.safety import is_within

    claimed = [path for p in profiles for _, path in declared_paths(p, host) if not has_glob(path)]
    claimed += [
        path.split("*")[0].rstrip("/\\")
        for p in profiles
        for _, path in declared_paths(p, host)
        if has_glob(path)
    ]
    roots = [r for t in USER_CACHE_ROOTS.get(host.os, ()) if (r := try_expand(t, host))]
    found: list[str] = []
    for root in dict.fromkeys(roots):
        try:
            children = [e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for child in children:
            if child in roots or any(is_within(c, child) or is_within(child, c) for c in claimed):
                continue
            found.append(child)
    return found


def scan_unclaimed(
    profiles: Sequence[Profile],
    host: Host,
    *,
    one_file_system: bool = False,
    progress: ProgressCallback | None = None,
) -> list[ScanEntry]:
    entries = [
        _measure_entry(
            ScanEntry(None, None, None, path, WalkResult(path)), one_file_system, progress
        )
        for path in unclaimed_candidates(profiles, host)
    ]
    entries.sort(key=lambda e: e.walk.allocated_bytes, reverse=True)
    return entries[:UNCLAIMED_LIMIT]
