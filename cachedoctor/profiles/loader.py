"""Load profiles from the built-in set, the user's folder and extra folders.

Every problem becomes a `ProfileError` naming the file, line, field and what was expected;
a broken profile is skipped and the others still load. What a file validated to (its profile or
its errors) is kept in an index in cachedoctor's state folder, keyed by the file's size and mtime, so
a command start-up does not parse YAML or validate (`cachedoctor.profiles.index`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    import yaml

    from cachedoctor.profiles.model import Profile
    from cachedoctor.profiles.validation import Problem

Origin = Literal["builtin", "user", "extra"]
PROFILES_DIR_ENV = "CACHEDOCTOR_PROFILES_DIR"


# The records here are named tuples and a plain class, not msgspec structs: shell completion
# imports this module (for the names) and must not import msgspec.


class ProfileError(NamedTuple):
    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        what = f"{self.field}: " if self.field else ""
        return f"{where}: {what}{self.message}"


class LoadedProfile(NamedTuple):
    profile: Profile
    file: str
    origin: Origin


class ToolNames(NamedTuple):
    """What a command line can name of a profile (plain data: read without the model)."""

    id: str
    aliases: tuple[str, ...]
    locations: tuple[str, ...]


def name_table(tools: Iterable[tuple[str, Iterable[str]]]) -> dict[str, str]:
    """{lower-case id or alias: id} of (id, aliases) pairs: ids win over aliases, and of two
    profiles with the same alias the first id in sorted order."""
    names: dict[str, str] = {}
    pairs = sorted((tool_id, list(aliases)) for tool_id, aliases in tools)
    for tool_id, aliases in pairs:
        for alias in aliases:
            names.setdefault(alias.lower(), tool_id)
    names.update((tool_id.lower(), tool_id) for tool_id, _ in pairs)
    return names


class ProfileSet:
    """The profiles a command sees, by id, and the files that failed to load."""

    __slots__ = ("_names", "errors", "profiles")

    def __init__(self) -> None:
        self.profiles: dict[str, LoadedProfile] = {}
        self.errors: list[ProfileError] = []
        self._names: dict[str, str] | None = None  # resolve()'s table, built on first use

    def resolve(self, name: str) -> str | None:
        """The id of the profile `name` means: its id in any case, or one of its aliases."""
        if name in self.profiles:
            return name
        if self._names is None:
            self._names = name_table((i, lp.profile.aliases) for i, lp in self.profiles.items())
        return self._names.get(name.lower())

    def loaded(self, name: str) -> LoadedProfile:
        """The profile a user named, or a clear error with the name they probably meant."""
        tool_id = self.resolve(name)
        if tool_id is not None:
            return self.profiles[tool_id]
        from cachedoctor.errors import UserInputError
        from cachedoctor.names import closest

        known = [*self.profiles, *(a for lp in self.profiles.values() for a in lp.profile.aliases)]
        best = closest(name, known)
        meant = self.resolve(best) if best is not None else None  # an alias names its profile
        raise UserInputError(f"unknown tool {name!r}" + (f"; did you mean {meant!r}?" if meant else ""),
                             hint="`cachedoctor profiles list` lists the tools")

    def get(self, tool_id: str) -> Profile:
        return self.loaded(tool_id).profile

    def select(self, tool_ids: Sequence[str]) -> list[Profile]:
        if not tool_ids:
            return [lp.profile for _, lp in sorted(self.profiles.items())]
        return [self.get(tool_id) for tool_id in tool_ids]


class ProfileFileError(Exception):
    def __init__(self, errors: list[ProfileError]) -> None:
        super().__init__("\n".join(map(str, errors)))
        self.errors = errors


def builtin_profiles_dir() -> Path:
    """The profiles shipped in the wheel, or the repository's `profiles/` in a source checkout.
    (The package's own folder, as `importlib.resources.files` gives for a package on disk,
    without importing importlib.resources and zipfile at every start.)"""
    packaged = Path(__file__).resolve().parents[1] / "builtin_profiles"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "profiles"


def user_profiles_dir() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "profiles"


def profile_dirs(extra: Sequence[str | Path] = ()) -> list[tuple[Path, Origin]]:
    """Folders in override order: built-in, user, `CACHEDOCTOR_PROFILES_DIR`, `--profiles-dir`."""
    dirs: list[tuple[Path, Origin]] = [
        (builtin_profiles_dir(), "builtin"),
        (user_profiles_dir(), "user"),
    ]
    env_value = os.environ.get(PROFILES_DIR_ENV, "")
    dirs += [(Path(p).expanduser(), "extra") for p in env_value.split(os.pathsep) if p]
    dirs += [(Path(p).expanduser(), "extra") for p in extra]
    return dirs


def load_names(extra_dirs: Sequence[str | Path] = ()) -> dict[str, ToolNames]:
    """{id: names} of the profiles `load_profiles(extra_dirs)` gives, from the names part of
    the index when it covers every file as it is now (no msgspec, no YAML), else by loading."""
    from cachedoctor.profiles.index import file_key, read_names

    known = read_names()
    found: dict[str, ToolNames] = {}
    for directory, _origin in profile_dirs(extra_dirs):
        if not directory.is_dir():
            continue
        for path in _yaml_files(directory):
            entry = known.get(str(path))
            try:
                current = file_key(os.stat(path))
            except OSError:
                current = None
            if entry is None or entry[0] != current:
                return {tool_id: names_of(lp.profile)
                        for tool_id, lp in load_profiles(extra_dirs).profiles.items()}
            if entry[1] is not None:
                found[entry[1].id] = entry[1]
    return found


def names_of(profile: Profile) -> ToolNames:
    return ToolNames(profile.id, tuple(profile.aliases), tuple(loc.id for loc in profile.locations))


def load_profiles(extra_dirs: Sequence[str | Path] = ()) -> ProfileSet:
    from cachedoctor.profiles.index import ProfileIndex

    result = ProfileSet()
    with ProfileIndex.open() as index:
        for directory, origin in profile_dirs(extra_dirs):
            if not directory.is_dir():
                if origin == "extra":
                    result.errors.append(
                        ProfileError(str(directory), None, None, "profiles folder not found")
                    )
                continue
            for path in _yaml_files(directory):
                outcome = index.outcome(path, load_profile_file)
                if isinstance(outcome, list):
                    result.errors.extend(outcome)
                    continue
                result.profiles[outcome.id] = LoadedProfile(outcome, str(path), origin)
    return result


def _yaml_files(directory: Path) -> list[Path]:
    """The profile files of a folder, in the order their paths sort (case-insensitively where
    the OS folds case). From one listing: each entry's type comes with it, and a name is
    compared as a string (a `Path` per entry, stat'ed again and compared part by part, was a
    millisecond of every start with 79 profiles)."""
    with os.scandir(directory) as listing:
        names = [entry.name for entry in listing if entry.name.endswith((".yaml", ".yml"))
                 and entry.name not in (".yaml", ".yml") and _is_file(entry)]
    return [directory / name for name in sorted(names, key=os.path.normcase)]


_NOT_THERE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def _is_file(entry: os.DirEntry[str]) -> bool:
    """`Path.is_file` of the entry: a link that loops or passes through a file is no profile
    file (as pathlib says), not an error that stops every profile from loading; a folder
    that cannot be read (EACCES) still is one."""
    try:
        return entry.is_file()
    except OSError as exc:
        if exc.errno in _NOT_THERE:
            return False
        raise


def load_profile_file(path: str | Path) -> Profile:
    """Parse and validate one file; raises ProfileFileError with file/line/field for each problem."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileFileError([ProfileError(name, None, None, f"cannot read: {exc}")]) from None
    return parse_profile(text, name)


MAX_PROFILE_BYTES = 1 << 20  # far above any real profile; refused before parsing
MAX_NODES = 20_000  # values once aliases are expanded (a 340-byte alias bomb has billions)
MAX_DEPTH = 64


class _BadNode(Exception):
    def __init__(self, line: int, message: str) -> None:
        self.line, self.message = line, message


def parse_profile(text: str, name: str) -> Profile:
    import yaml

    from cachedoctor.profiles.model import Profile
    from cachedoctor.profiles.validation import validate

    if len(text) > MAX_PROFILE_BYTES:
        raise ProfileFileError([ProfileError(
            name, None, None, f"larger than {MAX_PROFILE_BYTES >> 20} MiB: not a profile")])
    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except RecursionError:
        raise ProfileFileError([ProfileError(name, None, None, "nested too deeply")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileFileError(
            [ProfileError(name, line, None, f"invalid YAML: {problem}")]
        ) from None
    if node is None:
        raise ProfileFileError(
            [ProfileError(name, 1, None, "empty file: expected a profile mapping")]
        )
    lines: dict[tuple[Any, ...], int] = {}
    try:
        data = _to_python(node, (), lines, [MAX_NODES])
    except _DuplicateKey as dup:
        raise ProfileFileError([ProfileError(name, dup.line, dup.field, "duplicate key")]) from None
    except _BadNode as big:
        raise ProfileFileError([ProfileError(name, big.line, None, big.message)]) from None
    if not isinstance(data, dict):
        raise ProfileFileError(
            [ProfileError(name, 1, None, "expected a mapping with id, name, locations, ...")]
        )
    profile, found = validate(data, Profile)
    if profile is None:
        raise ProfileFileError([_error_from(name, problem, data, lines) for problem in found])
    problems = profile.reference_problems()
    if problems:
        raise ProfileFileError(
            [ProfileError(name, _line_of(path, lines), _dotted(path), msg) for path, msg in problems]
        )
    return profile


def _line_of(path: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int | None:
    """The line of `path`, or of its nearest recorded parent (a `when` given as one mapping)."""
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path)


class _DuplicateKey(Exception):
    def __init__(self, field: str, line: int) -> None:
        self.field, self.line = field, line


def _to_python(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int],
               budget: list[int]) -> Any:
    """Build plain data from a YAML node tree, recording the line of every value. Aliases
    are expanded here, so the number of values and the depth are bounded: an alias bomb (a few
    hundred bytes that expand to billions of values) is an error, not a machine out of memory."""
    import yaml

    line = node.start_mark.line + 1
    budget[0] -= 1
    if budget[0] < 0:
        raise _BadNode(line, f"more than {MAX_NODES} values once its aliases are expanded: not a profile")
    if len(path) > MAX_DEPTH:
        raise _BadNode(line, f"nested more than {MAX_DEPTH} levels deep: not a profile")
    lines[path] = line
    if isinstance(node, yaml.MappingNode):
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merged.update(_merge(value_node, path, lines, budget))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise _BadNode(key_node.start_mark.line + 1, "a key must be a plain word")
            key = _scalar(key_node)
            if key in result:
                raise _DuplicateKey(_dotted((*path, key)), key_node.start_mark.line + 1)
            result[key] = _to_python(value_node, (*path, key), lines, budget)
        return {**{k: v for k, v in merged.items() if k not in result}, **result}
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*path, i), lines, budget) for i, item in enumerate(node.value)]
    return _scalar(node)


_MERGE = "tag:yaml.org,2002:merge"


def _merge(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int],
           budget: list[int]) -> dict[Any, Any]:
    """The keys a YAML merge (`<<: *anchor` or `<<: [*a, *b]`) brings in; the explicit keys of
    the mapping win, and of several merged mappings the first one does (YAML 1.1 merge)."""
    import yaml

    sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
    out: dict[Any, Any] = {}
    for source in reversed(sources):
        value = _to_python(source, path, lines, budget)
        if not isinstance(value, dict):
            raise _BadNode(source.start_mark.line + 1, "`<<` merges a mapping (an `&anchor`)")
        out.update(value)
    return out


def _scalar(node: yaml.Node) -> Any:
    import yaml

    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)  # type: ignore[no-untyped-call]
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise _BadNode(node.start_mark.line + 1, f"invalid value: {problem}") from None


def _error_from(name: str, problem: Problem, data: Any, lines: dict[tuple[Any, ...], int]) -> ProfileError:
    """A problem at its line. Its path is the model's; in the file, a one-item list may be
    written as the item itself (`when: {type: ...}`), so steps the data lacks are left out."""
    at: tuple[Any, ...] = ()
    current = data
    for part in problem.at:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and part < len(current):
            current = current[part]
        else:
            continue
        at += (part,)
    field = (*at, *problem.field[len(problem.at):])
    return ProfileError(name, _line_of(at, lines), _dotted(field) or None, problem.message)


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def json_schema() -> dict[str, Any]:
    from cachedoctor.profiles.schema import profile_schema

    return profile_schema()
