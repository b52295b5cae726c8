"""Engine-wide rules: what can go wrong with any cache, checked for every location of every
tool — profiles hold only what is specific to one tool.

Each rule looks at a location's `Picture` (where the tool really keeps it, and why) and the
drives under it, and returns findings whose `fix` is a command built from the real values:
the value the user set, a DEST that exists, is on another drive and has room (or the visible
placeholder `<DEST on another drive>` when none is known). A rule is one function plus one
line in `RULES`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from cachedoctor.doctor.fixes import command, suggest_dest
from cachedoctor.doctor.report import Finding, Severity
from cachedoctor.profiles.model import LinkRelocation, Profile
from cachedoctor.relocate.methods import method_of

if TYPE_CHECKING:
    from cachedoctor.drives import DriveInfo
    from cachedoctor.locate.effective import Picture, Place
    from cachedoctor.locate.world import World

RAM_FS = {"tmpfs", "ramfs"}
FULL_PERCENT = 90.0  # a drive this full, holding a big cache, is a warning
FULL_FREE_BYTES = 5 << 30
BIG_CACHE_BYTES = 1 << 30


class RuleContext(msgspec.Struct):
    profile: Profile
    picture: Picture
    world: World
    quotas: dict[tuple[str, str], int]
    _sizes: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def tool(self) -> str:
        return self.profile.id

    @property
    def location(self) -> str:
        return self.picture.location.id

    def size(self, path: str) -> int:
        """Allocated bytes under `path`, measured once (like du)."""
        if path not in self._sizes:
            from cachedoctor.walker import measure

            self._sizes[path] = measure(path).allocated_bytes
        return self._sizes[path]

    def finding(self, check: str, severity: Severity, message: str, why: str,
                fix: str | None, *, path: str | None, value: str | None = None) -> Finding:
        return Finding(self.tool, self.location, path, check, severity, message, why, fix, value)

    def move_fix(self, place: Place) -> str:
        previous = [op.dest_root for op in self.world.records.values()]
        needed = self.size(place.data) if place.data else 0
        dest = suggest_dest(self.world.host, data_path=place.data, needed=needed,
                            previous=previous)
        return command(self.world.host, "cachedoctor", "move", self.tool, dest,
                       "--location", self.location)

    def restore_fix(self) -> str:
        return command(self.world.host, "cachedoctor", "restore", self.tool,
                       "--location", self.location)


Rule = Callable[[RuleContext], list[Finding]]


def _drive(path: str | None) -> DriveInfo | None:
    from cachedoctor.drives import drive_of

    return drive_of(path) if path else None


def broken_link(ctx: RuleContext) -> list[Finding]:
    out = []
    for place in ctx.picture.places:
        if not place.broken:
            continue
        target = place.via[-1].value if place.via else None
        out.append(ctx.finding(
            "relocation-link-broken", "error",
            f"{ctx.profile.name}'s {ctx.location} folder {place.path} is a {place.link} to "
            f"{target}, which is missing (is that drive connected?).",
            f"{ctx.profile.name} cannot use its cache until the target is back; it may fail or "
            "write into a dangling path.",
            f"connect the drive holding {target}; or, to start again with an empty cache "
            f"where it was: {ctx.restore_fix()}",
            path=place.path, value=target))
    return out


def setting_target_missing(ctx: RuleContext) -> list[Finding]:
    """A setting (or cachedoctor's record) points at a folder on a drive that is not there."""
    from cachedoctor.drives import nearest_existing

    out = []
    for place in ctx.picture.places:
        if place.exists or place.link or not any(s.kind in ("env", "config", "policy")
                                                 for s in place.via):
            continue
        parent = os.path.dirname(place.path)
        recorded = ctx.picture.record is not None
        if os.path.isdir(parent) and not recorded:
            continue  # the tool creates its folder there when it first runs
        existing = nearest_existing(place.path)
        out.append(ctx.finding(
            "relocated-folder-missing", "error" if recorded else "warning",
            f"{ctx.profile.name}'s {ctx.location} is set to {place.path} ({place.how()}), which "
            f"does not exist (nothing exists below {existing}).",
            "The tool either fails to start its cache or creates it again on whatever drive "
            "is mounted there; the data that was there is not visible.",
            f"connect the drive that holds {place.path}"
            + (f"; or put the cache back: {ctx.restore_fix()}" if recorded else ""),
            path=place.path))
    return out


def ram_disk(ctx: RuleContext) -> list[Finding]:
    if ctx.picture.location.kind == "temp":
        return []
    out = []
    for place in ctx.picture.existing:
        drive = _drive(place.data)
        if drive is None or drive.fstype.lower() not in RAM_FS:
            continue
        out.append(ctx.finding(
            "cache-on-ram-disk", "warning",
            f"{ctx.profile.name}'s {ctx.location} ({place.data}) is on a RAM disk "
            f"({drive.fstype} at {drive.mount}): it is emptied at every reboot.",
            "Every restart starts cold: downloads, builds or compilations are done again.",
            _off_a_link(ctx, place), path=place.path, value=drive.fstype))
    return out


def _off_a_link(ctx: RuleContext, place: Place) -> str:
    """The move of a cache that is a link (someone's own link onto a RAM disk): `move` refuses
    a link it did not make, so the data is put back first (`restore` copies it and leaves the
    link's target alone), then moved."""
    if place.link is None:
        return ctx.move_fix(place)
    return f"{ctx.restore_fix()} && {ctx.move_fix(place)}"


def env_not_seen(ctx: RuleContext) -> list[Finding]:
    """New shells get a variable that this process does not see yet."""
    pic = ctx.picture
    if pic.shell is None:
        return []
    out = []
    for place in pic.places:
        steps = [s for s in place.via if s.kind == "env" and s.name and s.value is not None]
        if not steps:
            continue
        step = steps[0]
        seen = ", ".join(p.path for p in pic.shell) or "nothing"
        assert step.name is not None and step.value is not None
        out.append(ctx.finding(
            "env-not-seen", "hint",
            f"New shells use {place.path} for {ctx.profile.name}'s {ctx.location} ({step.describe()}), "
            f"but this shell still uses {seen}.",
            "Variables set in start-up files reach shells and programs started after the "
            "change; running programs (Jupyter kernels, IDEs, services) keep the old value.",
            _apply_now(ctx.world, step.name, step.value), path=place.path, value=step.value))
    return out


def _apply_now(world: World, name: str, value: str) -> str:
    if world.host.is_windows:
        from cachedoctor.envvars.windows import apply_now

        return apply_now({name: value})
    from cachedoctor.envvars.posix import apply_now as posix

    return posix({name: value}, world.host)


def service_env(ctx: RuleContext) -> list[Finding]:
    """A cache a service reads (Ollama's models): the service itself must have the variable."""
    from cachedoctor.locate.effective import settings_of
    from cachedoctor.profiles.model import EnvSetting

    host = ctx.world.host
    settings = [s for s in settings_of(ctx.picture.location)
                if isinstance(s, EnvSetting) and s.service and s.service.systemd]
    if not settings or host.os not in ("linux", "wsl"):
        return []
    setting = settings[0]
    assert setting.service is not None and setting.service.systemd is not None
    unit = setting.service.systemd
    service = ctx.world.service(unit)
    if service.file is None:
        return []
    name = setting.env[0]
    record = ctx.picture.record
    wanted = record.base if record is not None and method_of(record.method).sets_variables else None
    have = service.values.get(name, (None, ""))[0]
    user_value = ctx.world.persistent(name)
    if wanted is None:
        if user_value is None or user_value.managed or have == user_value.value:
            return []
        # the user's own shell variable may be meant for `ollama serve` started by hand, not
        # for the service (another user, another folder): said, never "fixed" by default
        return [ctx.finding(
            "service-env-not-set", "hint",
            f"{name}={user_value.value} is set in {user_value.origin}, but {unit} does not "
            f"read shells and uses {', '.join(p.path for p in ctx.picture.places) or 'its default'}.",
            f"If the service should use that folder too, set {name} in a drop-in of {unit} "
            "(`sudo systemctl edit " + unit + "`); the service's own user must be able to write "
            "it. `cachedoctor move` does both for you.",
            None, path=service.file, value=have)]
    if have == wanted:
        return []
    folder = f"/etc/systemd/system/{unit}.d"
    fix = (command(host, "sudo", "mkdir", "-p", folder) + " && printf '%s\\n' "
           + command(host, "[Service]", f'Environment="{name}={wanted}"') + " | "
           + command(host, "sudo", "tee", f"{folder}/cachedoctor.conf") + " >/dev/null && "
           + f"sudo systemctl daemon-reload && sudo systemctl restart {unit}")
    who = "cachedoctor moved the cache there"
    return [ctx.finding(
        "service-env-not-set", "error",
        f"{unit} does not have {name}={wanted} ({who}); the service uses "
        f"{', '.join(p.path for p in ctx.picture.places) or 'its default'}.",
        f"{ctx.profile.name} reads {name} from its service's own environment, never from shells.",
        fix, path=service.file, value=have)]


def store_on_other_filesystem(ctx: RuleContext) -> list[Finding]:
    from cachedoctor.drives import nearest_existing
    from cachedoctor.resolve import try_expand

    loc = ctx.picture.location
    if loc.links_into is None:
        return []
    consumers = try_expand(loc.links_into, ctx.world.host)
    if not consumers:
        return []
    try:
        consumer_dev = os.stat(nearest_existing(consumers)).st_dev
    except OSError:
        return []
    out = []
    for place in ctx.picture.existing:
        if place.data is None:
            continue
        try:
            if os.stat(place.data).st_dev == consumer_dev:
                continue
        except OSError:
            continue
        # a link (cachedoctor's or not) is undone by restore; a setting the user made is theirs
        fix = ctx.restore_fix() if place.link or ctx.picture.record is not None else None
        out.append(ctx.finding(
            "store-on-another-filesystem", "warning",
            f"{ctx.profile.name}'s {ctx.location} ({place.data}) is on another filesystem than "
            f"{consumers}, where what uses it lives.",
            "The store hard-links files into environments and projects; across filesystems "
            "every install copies them instead: slower, and the space is used twice.",
            fix, path=place.path, value=consumers))
    return out


def disagrees_with_record(ctx: RuleContext) -> list[Finding]:
    return [ctx.finding(
        "setting-disagrees-with-record", "warning", conflict,
        "Something other than cachedoctor changed where the tool looks; cachedoctor's copy at "
        "the recorded place is no longer used, and restoring would act on stale facts.",
        ctx.restore_fix(), path=ctx.picture.record.base if ctx.picture.record else None)
        for conflict in ctx.picture.conflicts]


def unreadable_settings(ctx: RuleContext) -> list[Finding]:
    return [ctx.finding(
        "settings-unreadable", "warning", problem,
        "Where the tool keeps this cache cannot be known from it, so move and clean leave the "
        "location alone until the setting is fixed.",
        None, path=problem.split(":", 1)[0]) for problem in ctx.picture.problems]


def drive_nearly_full(ctx: RuleContext) -> list[Finding]:
    from cachedoctor.sizes import format_size

    out = []
    for place in ctx.picture.existing:
        drive = _drive(place.data)
        if drive is None or drive.total_bytes <= 0 or drive.fstype.lower() in RAM_FS:
            continue
        used = drive.used_percent or 0.0
        if used < FULL_PERCENT and drive.free_bytes >= FULL_FREE_BYTES:
            continue
        assert place.data is not None
        size = ctx.size(place.data)
        if size < BIG_CACHE_BYTES:
            continue
        out.append(ctx.finding(
            "drive-nearly-full", "warning",
            f"The drive holding {ctx.profile.name}'s {ctx.location} ({format_size(size)} at "
            f"{place.data}) has only {format_size(drive.free_bytes)} free.",
            "A full drive makes tools fail mid-download or mid-build, and the system itself "
            "misbehave; this cache is one of the things that can go to another drive.",
            ctx.move_fix(place), path=place.path, value=format_size(size)))
    return out


def over_quota(ctx: RuleContext) -> list[Finding]:
    from cachedoctor.sizes import format_size, parse_size

    loc = ctx.picture.location
    cap = ctx.quotas.get((ctx.tool, loc.id))
    source = "your quota"
    if cap is None and loc.quota:
        cap, source = parse_size(loc.quota), "the profile's recommended cap"
    if cap is None:
        return []
    places = [p for p in ctx.picture.existing if p.data]
    total = sum(ctx.size(p.data) for p in places if p.data)
    if total <= cap:
        return []
    return [ctx.finding(
        "over-quota", "warning",
        f"{ctx.profile.name}'s {ctx.location} is {format_size(total)}, above {source} of "
        f"{format_size(cap)}.",
        "A cache over its cap keeps growing into the space other things need.",
        command(ctx.world.host, "cachedoctor", "clean", ctx.tool, "--max-size", str(cap)),
        path=places[0].path, value=f"{format_size(total)} (cap {format_size(cap)})")]


def link_kind_wrong(ctx: RuleContext) -> list[Finding]:
    """Windows: a symlink where the tool needs a junction (it resolves symlinks back)."""
    if not ctx.world.host.is_windows:
        return []
    needs = [r for r in ctx.picture.location.relocate
             if isinstance(r, LinkRelocation) and r.windows_link == "junction"]
    if not needs:
        return []
    return [ctx.finding(
        "symlink-instead-of-junction", "error",
        f"{place.path} is a symlink, but {ctx.profile.name} needs a junction"
        + (f" ({needs[0].why})" if needs[0].why else "") + ".",
        "The tool resolves the symlink back to its target path and keeps writing to the old "
        "drive, or fails to find its cache.",
        ctx.restore_fix(), path=place.path)
        for place in ctx.picture.existing if place.link == "symlink"]


def unused_old_cache(ctx: RuleContext) -> list[Finding]:
    from cachedoctor.sizes import format_size

    out = []
    disposable = ctx.picture.location.safe_to_delete
    for path in ctx.picture.unused:
        if ctx.world.files.link(path) is not None:
            continue
        size = ctx.size(path)
        if size < 1 << 20:
            continue
        now = ", ".join(f"{p.path} ({p.how()})" for p in ctx.picture.places)
        fix: str | None = None
        if disposable:
            fix = (f"Remove-Item -Recurse -Force -LiteralPath '{path}'"
                   if ctx.world.host.is_windows else command(ctx.world.host, "rm", "-rf", "--", path))
        why = ("The old copy takes space and nothing reads it any more." if disposable else
               f"It is {ctx.profile.name}'s own data, not a disposable cache: look through it "
               "and copy what the folder in use lacks before removing it yourself.")
        out.append(ctx.finding(
            "old-cache-unused", "hint",
            f"{path} ({format_size(size)}) is {ctx.profile.name}'s default {ctx.location} folder, "
            f"but the tool now uses {now}.",
            why, fix, path=path, value=format_size(size)))
    return out


STRANDED = re.compile(r"^(?P<base>.+)\.cachedoctor-(?P<kind>old|partial|removing|conflict)-(?P<id>[0-9T]+-\d+-[0-9a-f]+)$")


def stranded_folders(ctx: RuleContext) -> list[Finding]:
    """Folders an interrupted cachedoctor operation left next to a cache and no journal names
    any more (a damaged journal, a deleted state folder): the data in them is findable."""
    pending = {op.id for op in ctx.world.pending.values()}
    seen: set[str] = set()
    out = []
    bases = {p.path for p in (*ctx.picture.places, *(ctx.picture.shell or ()))}
    bases |= set(ctx.picture.unused)
    if ctx.picture.record is not None:
        bases |= {q for pair in ctx.picture.record.pairs for q in (pair.source, pair.dest)}
    for base in sorted(bases):
        for candidate in ctx.world.files.glob(f"{_glob_escape(base)}.cachedoctor-*"):
            match = STRANDED.match(candidate)
            if match is None or match.group("id") in pending or candidate in seen:
                continue
            seen.add(candidate)
            out.append(_stranded(ctx, candidate, match.group("base"), match.group("kind")))
    return out


def _glob_escape(path: str) -> str:
    import glob

    return glob.escape(path)


def _stranded(ctx: RuleContext, folder: str, base: str, kind: str) -> Finding:
    host = ctx.world.host
    what = {
        "old": "the complete original of a cache, set aside during a move",
        "partial": "an incomplete copy made during a move or restore (the original is elsewhere)",
        "removing": "the rest of a copy cachedoctor was deleting",
        "conflict": "files the tool wrote where a restored cache was put back",
    }[kind]
    if kind == "old" and not ctx.world.files.lexists(base):
        fix: str | None = command(host, "mv", "--", folder, base)
    elif kind in ("partial", "removing"):
        fix = command(host, "rm", "-rf", "--", folder)
    else:
        fix = None
    return ctx.finding(
        "stranded-folder", "warning",
        f"{folder} is {what}, left by an interrupted cachedoctor operation that no journal "
        "names any more.",
        "Nothing deletes it on its own; it takes space, and an `old` folder may be the only "
        "complete copy of the cache.",
        fix, path=folder, value=kind)


# The profile condition each rule generalises: a profile check of that type already reported
# the same place, so the rule does not report it twice.
COVERS: dict[str, str] = {
    "relocation-link-broken": "link_target_missing",
    "cache-on-ram-disk": "filesystem_type",
    "env-not-seen": "env_not_seen",
    "store-on-another-filesystem": "filesystem_differs",
    "drive-nearly-full": "free_space_below",
    "over-quota": "over_quota",
    "symlink-instead-of-junction": "link_kind",
}

RULES: dict[str, Rule] = {
    "relocation-link-broken": broken_link,
    "relocated-folder-missing": setting_target_missing,
    "cache-on-ram-disk": ram_disk,
    "env-not-seen": env_not_seen,
    "service-env-not-set": service_env,
    "store-on-another-filesystem": store_on_other_filesystem,
    "setting-disagrees-with-record": disagrees_with_record,
    "settings-unreadable": unreadable_settings,
    "drive-nearly-full": drive_nearly_full,
    "over-quota": over_quota,
    "symlink-instead-of-junction": link_kind_wrong,
    "old-cache-unused": unused_old_cache,
    "stranded-folder": stranded_folders,
}
