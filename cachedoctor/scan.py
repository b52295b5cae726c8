"""`scan`: what every cache weighs, where it lives, on which drive, how full that drive is."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor.drives import DriveInfo, drive_of
from cachedoctor.links import is_broken, link_kind, link_target
from cachedoctor.walker import WalkResult, measure

if TYPE_CHECKING:  # profiles are imported only when scanning them: `scan --path` starts faster
    from cachedoctor.host import Host
    from cachedoctor.locate.effective import Picture
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Profile

UNCLAIMED_LIMIT = 10
ProgressCallback = Callable[[str, int, int], None]  # (path, entries, bytes)

# Folders where tools drop caches without asking; what no profile claims there is listed too.
USER_CACHE_ROOTS: dict[str, tuple[str, ...]] = {
    "linux": ("${XDG_CACHE_HOME:-~/.cache}",),
    "wsl": ("${XDG_CACHE_HOME:-~/.cache}", "${WSL_WIN_LOCALAPPDATA}", "${WSL_WIN_TEMP}"),
    "macos": ("~/Library/Caches",),
    "windows": ("%LOCALAPPDATA%", "%TEMP%"),
}


class ScanEntry(msgspec.Struct):
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
    how: str | None = None  # how the path was decided (`env HF_HUB_CACHE (from ~/.profile)`)
    unused: bool = False  # the tool's default folder, no longer used since a setting moved it
    seen_by: str | None = None  # who uses this path, when not everyone ("this shell only")
    tagged: bool = False  # carries a CACHEDIR.TAG (cachedoctor.cachedirtag): a "tagged cache"

    def to_json(self) -> dict[str, Any]:
        w = self.walk
        return {
            "tool": self.tool,
            "location": self.location,
            "name": self.name,
            "path": self.path,
            "how": self.how,
            "unused": self.unused,
            "seen_by": self.seen_by,
            "tagged": self.tagged,
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


class ScanReport(msgspec.Struct):
    entries: list[ScanEntry] = msgspec.field(default_factory=list)
    unclaimed: list[ScanEntry] = msgspec.field(default_factory=list)

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
    world: World | None = None,
) -> ScanReport:
    """Measure every location of `profiles` where the tool really keeps it (its settings,
    variables and links observed); a relocated location is measured at its target. A default
    folder the tool no longer uses (a setting moved it) is listed too, marked unused."""
    from cachedoctor.locate import observe, pictures

    world = world if world is not None else observe(host)
    report = ScanReport()
    seen_pictures = pictures(profiles, world)
    for picture in seen_pictures:
        loc = picture.location
        rows: list[tuple[str, str, bool, str | None]] = [
            (place.path, place.how(), False, None) for place in picture.places if place.exists]
        if picture.shell is not None:
            rows += [(place.path, place.how(), False, "this shell only")
                     for place in picture.shell if place.exists]
        rows += [(path, "default, no longer used", True, None) for path in picture.unused]
        seen: set[str] = set()
        for path, how, unused, seen_by in rows:
            if path in seen:
                continue
            seen.add(path)
            entry = ScanEntry(
                picture.tool, loc.id, loc.name, path, WalkResult(path),
                safe_to_delete=loc.safe_to_delete,
                quota_bytes=None if unused else (quotas or {}).get((picture.tool, loc.id)),
                how=how, unused=unused, seen_by=seen_by,
            )
            report.entries.append(_measure_entry(entry, one_file_system, progress))
    if include_unclaimed:
        report.unclaimed = scan_unclaimed(
            profiles, host, one_file_system=one_file_system, progress=progress, world=world,
            seen=seen_pictures)
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


def claimed_paths(profiles: Sequence[Profile], world: World,
                  seen: Sequence[Picture] | None = None) -> list[str]:
    """Every folder a profile accounts for: where the tools are, where they would be by
    default, and (for globs) the folder the matches are kept in. `seen`: the profiles'
    pictures in `world` when the caller has them already."""
    from cachedoctor.locate import pictures
    from cachedoctor.resolve import has_glob, try_expand

    claimed: list[str] = []
    host, session = world.host, world.new_session_host()
    for picture in seen if seen is not None else pictures(profiles, world):
        claimed += [p.path for p in (*picture.places, *(picture.shell or ()))]
        claimed += list(picture.unused)
        for template in picture.location.paths.for_host(host):
            path = try_expand(template, session)
            if path:
                claimed.append(path.split("*")[0].rstrip("/\\") if has_glob(path) else path)
    return claimed


def unclaimed_candidates(profiles: Sequence[Profile], host: Host,
                         world: World | None = None,
                         seen: Sequence[Picture] | None = None) -> list[str]:
    """Folders directly under the user cache roots that no profile location overlaps, and
    unclaimed folders carrying a CACHEDIR.TAG deeper down (`cachedoctor.cachedirtag`)."""
    from cachedoctor.cachedirtag import tagged_folders
    from cachedoctor.locate import observe
    from cachedoctor.resolve import try_expand

    world = world if world is not None else observe(host)
    claimed = _Claimed(claimed_paths(profiles, world, seen))
    roots = [r for t in USER_CACHE_ROOTS.get(host.os, ()) if (r := try_expand(t, host))]
    found: list[str] = []
    for root in dict.fromkeys(roots):
        try:
            children = [e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for child in children:
            if child in roots or claimed.overlaps(child) or claimed.covers(child):
                continue
            found.append(child)
    found += tagged_folders(dict.fromkeys(roots), listed={*found, *roots},
                            claimed=claimed.covers, overlaps=claimed.overlaps)
    return found


class _Claimed:
    """The claimed folders, asked about thousands of candidates: `safety.is_within` for each
    pair was quadratic (23,000 pathlib comparisons for a home with every built-in location);
    here each question is a few set look-ups of normalised strings (the same lexical test:
    absolute, normalised, case-folded where the OS folds case)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = {_norm(p) for p in paths}
        self.holding = {a for p in self.paths for a in _self_and_ancestors(p)}

    def covers(self, path: str) -> bool:
        """`path` is a claimed folder or below one."""
        return any(a in self.paths for a in _self_and_ancestors(_norm(path)))

    def overlaps(self, path: str) -> bool:
        """A claimed folder is `path` or below it."""
        return _norm(path) in self.holding


def _norm(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def _self_and_ancestors(path: str) -> Iterator[str]:
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def scan_unclaimed(
    profiles: Sequence[Profile],
    host: Host,
    *,
    one_file_system: bool = False,
    progress: ProgressCallback | None = None,
    world: World | None = None,
    seen: Sequence[Picture] | None = None,
) -> list[ScanEntry]:
    from cachedoctor.cachedirtag import has_tag

    entries = [
        _measure_entry(
            ScanEntry(None, None, "tagged cache" if tagged else None, path, WalkResult(path),
                      tagged=tagged), one_file_system, progress
        )
        for path in unclaimed_candidates(profiles, host, world, seen)
        for tagged in (has_tag(path),)
    ]
    entries.sort(key=lambda e: e.walk.allocated_bytes, reverse=True)
    return entries[:UNCLAIMED_LIMIT]
