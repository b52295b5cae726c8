"""Where each cache really is: one pure function of the `World` (host, environment, files).

For a location, the tool's own settings are tried in the tool's precedence order — the
location's `set_by` entries, then the variables of its `env` relocations, the files of its
`config` relocations and its browser policies — and the first that is set decides; otherwise
the profile's path templates do (a `${VAR:-default}` inside a template is reported as the
variable that decided). Each path is then looked at: a link is followed to where the bytes
are. The answer says *why*, step by step, and what this very process would see when that
differs (a variable set for new shells that this shell has not loaded yet).
"""

from __future__ import annotations

import fnmatch
import ntpath
import os
import posixpath
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from cachedoctor.host import Host
from cachedoctor.locate.world import EnvWithout, World
from cachedoctor.profiles.model import (
    ConfigKey,
    ConfigRelocation,
    ConfigSetting,
    EnvRelocation,
    EnvSetting,
    Location,
    PolicyRelocation,
    PolicySetting,
    Profile,
    Setting,
)
from cachedoctor.relocate.methods import method_of
from cachedoctor.resolve import (
    Trace,
    UnresolvedVariable,
    deciding_variable,
    expand,
    has_glob,
    normalize,
    try_expand,
)

if TYPE_CHECKING:
    from cachedoctor.relocate.journal import Operation

StepKind = Literal["default", "env", "config", "policy", "link"]


class Step(msgspec.Struct, frozen=True):
    """One reason in the chain that decided a path."""

    kind: StepKind
    name: str | None = None  # the variable, `file key`, policy name or link kind
    origin: str | None = None  # where it is set
    value: str | None = None
    managed: bool = False  # set by cachedoctor

    def describe(self) -> str:
        if self.kind == "default":
            return "default"
        if self.kind == "link":
            return f"{self.name} -> {self.value}"
        who = ", set by cachedoctor" if self.managed else ""
        where = f" (from {self.origin}{who})" if self.origin else ""
        if self.kind == "env":
            return f"env {self.name}{where}"
        if self.kind == "config":
            return f"{self.name}{where}"
        return f"policy {self.name}{where}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "origin": self.origin,
                "value": self.value, "managed": self.managed}


class Place(msgspec.Struct, frozen=True):
    """One folder of a location: where the tool reads and writes, and where the bytes are."""

    path: str
    data: str | None  # `path`, or a link's target; None for a broken link
    exists: bool
    link: str | None = None  # symlink | junction
    via: tuple[Step, ...] = ()
    rel: str = ""  # the path below the location's root folder ("" for a one-folder location)

    @property
    def broken(self) -> bool:
        return self.link is not None and self.data is None

    def how(self) -> str:
        return "; ".join(step.describe() for step in self.via) or "default"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "data": self.data, "exists": self.exists, "link": self.link,
                "broken": self.broken, "how": self.how(), "via": [s.to_json() for s in self.via],
                "rel": self.rel}


class Picture(msgspec.Struct, frozen=True):
    """The truth about one location of one tool."""

    tool: str
    location: Location
    places: tuple[Place, ...]  # for new shells, jobs and services: where the tool will be
    shell: tuple[Place, ...] | None = None  # what this process sees, when that differs
    unused: tuple[str, ...] = ()  # existing folders where the tool would be without its settings
    record: Operation | None = None  # cachedoctor's record of having moved it
    pending: Operation | None = None  # an unfinished move or restore of it
    conflicts: tuple[str, ...] = ()  # settings that disagree with the record
    problems: tuple[str, ...] = ()  # settings that could not be read
    audience: str = "new shells, jobs and the tool itself"

    @property
    def existing(self) -> list[Place]:
        """Every place that exists, for new sessions first, then this shell's own."""
        seen: set[str] = set()
        out: list[Place] = []
        for place in (*self.places, *(self.shell or ())):
            if place.exists and place.path not in seen:
                seen.add(place.path)
                out.append(place)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool, "location": self.location.id, "kind": self.location.kind,
            "places": [p.to_json() for p in self.places],
            "this_shell": [p.to_json() for p in self.shell] if self.shell is not None else None,
            "unused": list(self.unused),
            "record": {"method": self.record.method, "dest": self.record.base}
            if self.record is not None else None,
            "pending": {"kind": self.pending.kind, "phase": self.pending.phase}
            if self.pending is not None else None,
            "conflicts": list(self.conflicts), "problems": list(self.problems),
            "audience": self.audience,
        }


# ----------------------------------------------------------------------------- settings


def settings_of(location: Location) -> list[Setting]:
    """The settings that move `location`, highest precedence first: `set_by`, then the
    variables, config files and policies its relocation methods use (not listed twice).
    Computed once per location (profiles are immutable) and asked for many times a run."""
    known = _SETTINGS.get(id(location))
    if known is None or known[0] is not location:
        known = _SETTINGS[id(location)] = (location, _settings_of(location))
    return list(known[1])


_SETTINGS: dict[int, tuple[Location, list[Setting]]] = {}


def _settings_of(location: Location) -> list[Setting]:
    out: list[Setting] = list(location.set_by)
    names = {n.upper() for s in out if isinstance(s, EnvSetting) for n in s.env}
    keys = {_config_id(s.config) for s in out if isinstance(s, ConfigSetting)}
    browsers = {s.browser for s in out if isinstance(s, PolicySetting)}
    envs: list[Setting] = []
    configs: list[Setting] = []
    policies: list[Setting] = []
    for relocation in location.relocate:
        if isinstance(relocation, EnvRelocation):
            for var, template in relocation.vars.items():
                if template == "{dest}" and var.upper() not in names:
                    names.add(var.upper())
                    envs.append(EnvSetting(env=[var]))
        elif isinstance(relocation, ConfigRelocation) and relocation.value == "{dest}":
            key = ConfigKey(file=relocation.file, format=relocation.format,
                            key=relocation.key, section=relocation.section)
            if _config_id(key) not in keys:
                keys.add(_config_id(key))
                configs.append(ConfigSetting(config=key,
                                             pick="first" if relocation.as_list else "value"))
        elif isinstance(relocation, PolicyRelocation) and relocation.browser not in browsers:
            browsers.add(relocation.browser)
            policies.append(PolicySetting(browser=relocation.browser, policy=relocation.policy))
    return [*out, *envs, *configs, *policies]


def _config_id(key: ConfigKey) -> tuple[str, str, str]:
    return (key.format, repr(key.key), key.section or "")


def setting_variables(location: Location) -> set[str]:
    return {n for s in settings_of(location) if isinstance(s, EnvSetting) for n in s.env}


# --------------------------------------------------------------------------- resolution


def resolve_profile(profile: Profile, world: World) -> list[Picture]:
    return [resolve_location(profile, location, world) for location in profile.locations]


def located(location: Location, world: World, problems: list[str]
            ) -> tuple[tuple[Place, ...], tuple[Place, ...] | None]:
    """The places of a location for new sessions, and this shell's own when they differ
    (the part of its picture that says whether the tool is here: `locate.present`)."""
    asked: set[str] = set()
    places = _places(location, world.new_session_host(asked), world, problems, persistent=True)
    if world.same_in_this_process(asked):  # the usual case: no variable of it differs here
        return places, None
    shell_places = _places(location, world.host, world, [], persistent=False)
    shell = shell_places if [p.path for p in shell_places] != [p.path for p in places] else None
    return places, shell


def resolve_location(profile: Profile, location: Location, world: World) -> Picture:
    new_host = world.new_session_host()
    problems: list[str] = []
    places, shell = located(location, world, problems)
    effective = {_key(p.path, world.host) for p in (*places, *(shell or ()))}
    unused = tuple(
        path for path in _defaults(location, new_host, world)
        if _key(path, world.host) not in effective and world.files.lexists(path)
        and not _inside_any(path, effective, world.host)
    )
    record = world.records.get(f"{profile.id}/{location.id}")
    pending = world.pending.get(f"{profile.id}/{location.id}")
    conflicts = _conflicts(record, places, world) if record is not None and pending is None else ()
    audience = "new shells, jobs and the tool itself"
    service = _service_setting(location, world.host)
    if service is not None and service.service is not None:
        audience = f"the {service.service.systemd} service"
    return Picture(profile.id, location, tuple(places), shell, unused, record, pending,
                   tuple(conflicts), tuple(problems), audience)


class _Pattern(msgspec.Struct, frozen=True):
    """One path of a location (globs not yet expanded) and the step that decided it."""

    path: str
    step: Step
    template: int | None  # the template it stands for; None: a setting made it the one folder


def _patterns(location: Location, host: Host, world: World, problems: list[str], *,
              persistent: bool) -> list[_Pattern]:
    templates = location.paths.for_host(host)
    defaults = [_default_pattern(t, i, host, world, persistent=persistent)
                for i, t in enumerate(templates)]
    for setting in settings_of(location):
        if ignored_reason(setting, host, world) is not None:
            continue
        found = _read_setting(setting, host, world, problems, persistent=persistent)
        if found is None:
            continue
        value, step = found
        out = []
        for index, path in _apply(setting, value, defaults, host):
            default = defaults[index] if index is not None else None
            if default is not None and path == default.path:  # a path the setting does not govern
                out.append(default)
            else:
                out.append(_Pattern(path, step, index))
        return _dedupe_patterns(out)
    return _dedupe_patterns([d for d in defaults if d is not None])


def _default_pattern(template: str, index: int, host: Host, world: World, *,
                     persistent: bool) -> _Pattern | None:
    trace: Trace = []
    try:
        path = expand(template, host, trace)
    except UnresolvedVariable:
        return None
    decided = deciding_variable(trace)
    if decided is None:
        return _Pattern(path, Step("default"), index)
    origin, managed = world.origin(decided[0]) if persistent else (
        "this process's environment", False)
    return _Pattern(path, Step("env", decided[0], origin, decided[1], managed), index)


def _dedupe_patterns(patterns: list[_Pattern]) -> list[_Pattern]:
    seen: set[str] = set()
    out = []
    for pattern in patterns:
        if pattern.path not in seen:
            seen.add(pattern.path)
            out.append(pattern)
    return out


def _places(location: Location, host: Host, world: World, problems: list[str], *,
            persistent: bool) -> tuple[Place, ...]:
    patterns = _patterns(location, host, world, problems, persistent=persistent)
    root = _root_of([p.path for p in patterns], host)
    out: list[Place] = []
    for pattern in patterns:
        out += _look(pattern.path, (pattern.step,), world, root, host)
    return tuple(_dedupe(out))


def planned_destinations(location: Location, before: World, after: World,
                         places: list[Place]) -> list[str | None]:
    """Where each of `places` (existing folders of the location in `before`) would be in
    `after` — the world as a change would leave it (a variable set, a policy written). A folder
    matched by a glob keeps its name below the new folder (`Profile 1`); a location a setting
    makes one folder is that folder; None for a folder the change does not govern (a snap
    browser's cache, which reads its own policy folder)."""
    host = after.host
    new = _patterns(location, after.new_session_host(), after, [], persistent=True)
    if len(new) == 1 and new[0].template is None:
        return [new[0].path for _ in places]
    old = _patterns(location, before.new_session_host(), before, [], persistent=True)
    by_template = {p.template: p for p in new if p.template is not None}
    out: list[str | None] = []
    for place in places:
        source = next((p for p in old if _matches(place.path, p.path, host)), None)
        if source is None and len(old) == 1 and len(by_template) == 1:
            source = _Pattern(place.path, old[0].step, next(iter(by_template)))
        target = (by_template.get(source.template)
                  if source is not None and source.template is not None else None)
        if source is None or target is None or _key(target.path, host) == _key(source.path, host):
            out.append(None)
            continue
        rel = _below(place.path, _fixed_part(source.path, host), host) or ""
        out.append(_join(_fixed_part(target.path, host), rel, host) if rel else target.path)
    return out


def _fixed_part(pattern: str, host: Host) -> str:
    """The folders of a pattern before its first glob (`~/.cache/chromium` of `.../Profile *`)."""
    if not has_glob(pattern):
        return pattern
    sep = "\\" if host.is_windows else "/"
    parts = pattern.split(sep)
    fixed = next(i for i, part in enumerate(parts) if has_glob(part))
    return sep.join(parts[:fixed]) or sep


def _matches(path: str, pattern: str, host: Host) -> bool:
    """Whether `path` is `pattern` or one of its glob's matches, component by component."""
    sep = "\\" if host.is_windows else "/"
    names, parts = path.split(sep), pattern.split(sep)
    if len(names) != len(parts):
        return False
    compare = fnmatch.fnmatch if host.is_windows else fnmatch.fnmatchcase
    return all(compare(name.lower() if host.is_windows else name,
                       part.lower() if host.is_windows else part)
               for name, part in zip(names, parts, strict=True))


def _root_of(paths: list[str], host: Host) -> str | None:
    """The folder a location's several paths (or glob matches) are kept below; None for a
    location of one plain folder (it *is* its root)."""
    if len(paths) == 1 and not has_glob(paths[0]):
        return None
    return _common_folder(paths, host) if paths else None


def _defaults(location: Location, host: Host, world: World) -> list[str]:
    """Where the tool would be with none of its settings: every variable a template could be
    moved by unset (the XDG base folders excepted: they are the user's, not the tool's)."""
    hide = {n.upper() for n in setting_variables(location)}
    out: list[str] = []
    for template in location.paths.for_host(host):
        trace: Trace = []
        path = try_expand_traced(template, host, trace)
        if path is None:
            continue
        names = hide | {name.upper() for name, _ in trace if not name.upper().startswith("XDG_")}
        if names:  # else nothing is hidden: the path is the one just expanded
            path = try_expand(template, Host(host.os, EnvWithout(host.env, frozenset(names)),
                                             host.home))
        if path:
            out += world.files.glob(path) if has_glob(path) else [path]
    return out


def try_expand_traced(template: str, host: Host, trace: Trace) -> str | None:
    try:
        return expand(template, host, trace)
    except UnresolvedVariable:
        return None


def _service_setting(location: Location, host: Host) -> EnvSetting | None:
    if host.os not in ("linux", "wsl"):
        return None
    for setting in settings_of(location):
        if isinstance(setting, EnvSetting) and setting.service is not None:
            return setting
    return None


_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})


def ignored_reason(setting: Setting, host: Host, world: World) -> str | None:
    """Why the tool skips `setting` (`PIP_CONFIG_FILE=/dev/null`), or None when it reads it."""
    for rule in setting.ignored_when:
        value = host.getenv(rule.env) or ""
        if not value:
            continue
        path = _normalise(value, host)
        if rule.holds == "anything":
            return f"{rule.env} is set ({value})"
        if rule.holds == "true" and value.strip().lower() in _TRUE:
            return f"{rule.env}={value}"
        if rule.holds == "devnull" and (
                value.lower() == "nul" if host.is_windows else value == "/dev/null"):
            return f"{rule.env}={value} (no config file at all)"
        if rule.holds == "a-file" and world.files.lexists(path) and not world.files.isdir(path):
            return f"{rule.env} names the existing file {value}"
    return None


def setting_files(setting: ConfigSetting, host: Host) -> list[str]:
    """The files a config setting reads on `host`, highest precedence first."""
    return [p for t in setting.config.file.for_host(host) if (p := try_expand(t, host))]


def _read_setting(setting: Setting, host: Host, world: World, problems: list[str], *,
                  persistent: bool) -> tuple[str, Step] | None:
    if isinstance(setting, EnvSetting):
        found = _read_env(setting, host, world, problems, persistent=persistent)
    elif isinstance(setting, ConfigSetting):
        found = _read_config(setting, host, world, problems)
    else:
        found = _read_policy(setting, host, world, problems)
    if found is None:
        return None
    value, step = found
    kind = _path_kind(value, host, tilde=setting.expands_tilde)
    if kind == "none" and not isinstance(setting, EnvSetting):
        kind = "relative"  # a key that holds a folder holds one even when it is a bare word
    if kind == "absolute":
        return value, step
    if kind == "relative":
        where = f"{step.origin}: " if step.origin else ""
        problems.append(
            f"{where}{step.name} = {value} is a relative path: the tool "
            "reads it against whatever folder it is started in, so there is no one place to "
            "look; cachedoctor ignores the setting (make it an absolute path)")
    return None


def _read_env(setting: EnvSetting, host: Host, world: World, problems: list[str], *,
              persistent: bool) -> tuple[str, Step] | None:
    unit = setting.service.systemd if setting.service is not None else None
    if unit and host.os in ("linux", "wsl"):
        service = world.service(unit)
        problems.extend(service.problems)
        if service.file is not None:  # the service is installed: only its environment counts
            for name in setting.env:
                if name in service.values:
                    value, where = service.values[name]
                    return _first(value, setting.separator, host), Step("env", name, where, value)
            return None
    for name in setting.env:
        seen = host.getenv(name)
        if seen and _path_kind(_first(seen, setting.separator, host), host,
                               tilde=setting.expands_tilde) != "none":
            value = seen
            origin, managed = world.origin(name) if persistent else (
                "this process's environment", False)
            return _first(value, setting.separator, host), Step("env", name, origin, value, managed)
    return None


def _path_kind(value: str, host: Host, *, tilde: bool) -> Literal["absolute", "relative", "none"]:
    """What a setting's value names: an absolute folder; a relative one (`cache`, `./c`, and
    `~/c` for a tool that does not expand `~`) that depends on the directory the tool starts
    in; or no folder at all (`0`, `off`: it does not decide where the cache is)."""
    expanded = _normalise(value, host) if tilde else value
    if ntpath.isabs(expanded) if host.is_windows else expanded.startswith("/"):
        return "absolute"
    if any(c in value for c in "/\\") or value.startswith(("~", ".")):
        return "relative"
    return "none"


def _first(value: str, separator: str | None, host: Host) -> str:
    """The first entry of a list variable; `pathsep` is the OS's path-list separator."""
    if separator is None:
        return value
    if separator == "pathsep":
        separator = ";" if host.is_windows else ":"
    return next((part.strip() for part in value.split(separator) if part.strip()), value)


def _read_config(setting: ConfigSetting, host: Host, world: World,
                 problems: list[str]) -> tuple[str, Step] | None:
    cfg = setting.config
    for path in setting_files(setting, host):
        text = world.files.read_text(path)
        if text is None:
            continue
        # the parsers only once a file is there: most homes have few of the files looked at
        from cachedoctor.configedit import ConfigSyntaxError, get_format, get_in_text, key_path

        try:
            value = get_in_text(text, cfg.format, cfg.key, section=cfg.section)
        except KeyError:
            continue
        except (ConfigSyntaxError, ValueError, RecursionError) as exc:
            problems.append(f"{path}: cannot read {_key_name(cfg)}: {exc}")
            continue
        interpret = get_format(cfg.format).interpret
        if interpret is not None:  # the tool's own reading (npm: `${VAR}`, `~/` below home)
            session = world.new_session_host()
            value = interpret(value, key_path(cfg.key, section=cfg.section, fmt=cfg.format),
                              session.env, host.home, host.is_windows)
        if setting.pick == "first" and isinstance(value, list):
            value = next((v for v in value if isinstance(v, str) and v.strip()), None)
        if not isinstance(value, str) or not value.strip():
            continue
        name = f"{_short(path)} {_key_name(cfg)}"
        return value.strip(), Step("config", name, path, value.strip())
    return None


def _key_name(cfg: ConfigKey) -> str:
    key = cfg.key if isinstance(cfg.key, str) else ".".join(cfg.key)
    return f"[{cfg.section}] {key}" if cfg.section else key


def _short(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _read_policy(setting: PolicySetting, host: Host, world: World,
                 problems: list[str]) -> tuple[str, Step] | None:
    from cachedoctor.policies import expand_policy_path

    found = world.policy(setting.browser, setting.policy)
    problems.extend(found.problems)
    if not isinstance(found.value, str) or not found.value.strip():
        return None
    value = expand_policy_path(found.value.strip(), host)
    return value, Step("policy", setting.policy, found.where, value)


def _apply(setting: Setting, value: str, defaults: list[_Pattern | None],
           host: Host) -> list[tuple[int | None, str]]:
    """The location's paths given a setting's value: with `replaces` (a policy: the folder its
    paths have in common), each default path below it has that part replaced, and a path
    outside it is left as it is (the setting does not govern it); without, the value is the
    location's one folder."""
    filled = _normalise(setting.value.replace("{value}", value), host)
    prefixes: list[str] = []
    known = [d for d in defaults if d is not None]
    if setting.replaces is not None:
        prefixes = [p for t in setting.replaces.for_host(host) if (p := _expand_or_none(t, host))]
    elif isinstance(setting, PolicySetting) and known:
        prefixes = [_common_folder([d.path for d in known], host)]
    if not prefixes:
        return [(None, filled)]
    out: list[tuple[int | None, str]] = []
    for default in known:
        for prefix in prefixes:
            rest = _below(default.path, prefix, host)
            if rest is not None:
                out.append((default.template, _join(filled, rest, host) if rest else filled))
                break
        else:
            out.append((default.template, default.path))
    return out or [(None, filled)]


def _expand_or_none(template: str, host: Host) -> str | None:
    return try_expand(template, host)


def _normalise(path: str, host: Host) -> str:
    if path == "~" or path.startswith(("~/", "~\\")):
        path = host.home + path[1:]
    return normalize(path, host)


def _flavour(host: Host) -> Any:
    return ntpath if host.is_windows else posixpath


def _key(path: str, host: Host) -> str:
    return _flavour(host).normcase(path) if host.is_windows else path


def _below(path: str, prefix: str, host: Host) -> str | None:
    """`path` relative to `prefix` ('' when equal), None when it is not inside it."""
    sep = "\\" if host.is_windows else "/"
    p, q = _key(path, host).rstrip(sep), _key(prefix, host).rstrip(sep)
    if p == q:
        return ""
    if p.startswith(q + sep):
        return path.rstrip(sep)[len(q) + 1:]
    return None


def _join(base: str, rest: str, host: Host) -> str:
    return str(_flavour(host).join(base, rest))


def _inside_any(path: str, roots: set[str], host: Host) -> bool:
    return any(_below(root, path, host) not in (None, "") for root in roots)


def _common_folder(paths: list[str], host: Host) -> str:
    """The deepest folder that holds every path (globs stop it)."""
    sep = "\\" if host.is_windows else "/"
    split = [p.split(sep) for p in paths]
    common: list[str] = []
    for parts in zip(*split, strict=False):
        if len({_key(x, host) for x in parts}) != 1 or has_glob(parts[0]):
            break
        common.append(parts[0])
    if len(paths) == 1 and common == split[0]:
        common = common[:-1]
    return sep.join(common) or sep


def _look(path: str, via: tuple[Step, ...], world: World, root: str | None,
          host: Host) -> list[Place]:
    """The places at `path` (every match of a glob), each with its link followed."""
    matches = world.files.glob(path) if has_glob(path) else [path]
    places = []
    for match in matches:
        rel = (_below(match, root, host) or "") if root is not None else ""
        link = world.files.link(match)
        if link is None:
            exists = world.files.lexists(match)
            places.append(Place(match, match if exists else None, exists, None, via, rel))
            continue
        kind, target = link
        alive = world.files.isdir(match)
        data = world.files.realpath(match) if alive else None
        places.append(Place(match, data, True, kind, (*via, Step("link", kind, None, target)), rel))
    return places


def _dedupe(places: list[Place]) -> list[Place]:
    seen: set[str] = set()
    out = []
    for place in places:
        if place.path not in seen:
            seen.add(place.path)
            out.append(place)
    return out


def _conflicts(record: Operation, places: tuple[Place, ...], world: World) -> list[str]:
    """Where the tool's settings (or links) now disagree with cachedoctor's record of a move."""
    host = world.host
    wanted = {_key(p.dest, host) for p in record.pairs}
    if method_of(record.method).leaves_link:
        out = []
        for pair in record.pairs:
            link = world.files.link(pair.source)
            if link is None:
                out.append(f"cachedoctor linked {pair.source} to {pair.dest}, but it is no "
                           "longer a link")
            elif _key(os.path.normpath(link[1]), host) != _key(pair.dest, host) and not (
                    world.files.isdir(pair.source)
                    and _key(world.files.realpath(pair.source), host)
                    == _key(world.files.realpath(pair.dest), host)):
                out.append(f"cachedoctor linked {pair.source} to {pair.dest}, but it now "
                           f"points at {link[1]}")
        return out
    now = {_key(p.data or p.path, host) for p in places} | {_key(p.path, host) for p in places}
    if wanted & now:
        return []
    shown = ", ".join(p.path for p in places) or "nothing"
    how = "; ".join(p.how() for p in places[:1])
    return [f"cachedoctor moved it to {record.base} ({record.method}), but the tool now uses "
            f"{shown} ({how})"]
