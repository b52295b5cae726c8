"""The profile format as typed structs (msgspec).

This is the single definition of the format: the loader validates against it
(`cachedoctor.profiles.validation`), and `cachedoctor profiles schema` prints its JSON Schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

import msgspec
from msgspec import Meta

from cachedoctor.conditions import Condition, LocationCondition, PresetCondition
from cachedoctor.host import Host, OsName
from cachedoctor.policies import Browser
from cachedoctor.profiles.base import (
    ENV_PRESET,
    ONE_OR_MANY,
    FieldProblem,
    PathsPerOs,
    PerOs,
    ProfileModel,
    check_format,
    check_writable_format,
    shorthand,
)
from cachedoctor.relocate.methods import ENTRIES, RelocationEntry
from cachedoctor.relocate.methods.config import ConfigRelocation as ConfigRelocation
from cachedoctor.relocate.methods.env import EnvRelocation as EnvRelocation
from cachedoctor.relocate.methods.link import LinkRelocation as LinkRelocation
from cachedoctor.relocate.methods.policy import PolicyRelocation as PolicyRelocation

# `$(?!\n)`: Python's `$` also matches before a final newline (`"pip\n"` is no id)
Identifier = Annotated[str, Meta(
    pattern=r"^[a-z0-9][a-z0-9_.-]*$(?!\n)", max_length=64,
    extra={"means": "an id: up to 64 lower-case letters, digits, `_`, `.` or `-`, starting with a "
                    "letter or digit"})]
Category = Literal[
    "ai", "browser", "ide", "package", "build", "test", "container", "system", "other"
]
CATEGORIES: tuple[str, ...] = get_args(Category)
LocationKind = Literal[
    "cache", "temp", "models", "packages", "build", "logs", "data", "environments", "downloads"
]
LOCATION_KINDS: tuple[str, ...] = get_args(LocationKind)


Capability = Literal["symlinks", "hardlinks", "case_sensitive", "modes"]

# A location's `relocate:` entry: one entry type per registered relocation method (each also
# importable from here), told apart by `method`; `cachedoctor.relocate.methods` lists them.
if TYPE_CHECKING:
    Relocation = RelocationEntry
else:
    Relocation = Union[ENTRIES]  # noqa: UP007 - tagged by `method`


class ConfigKey(ProfileModel):
    """One key of the tool's own config files."""

    file: Annotated[PathsPerOs, Meta(
        description="The files the tool reads, highest precedence first: the first file that "
        "sets the key decides.",
    )]
    format: str
    key: Annotated[str | list[str], Meta(description="A flat key, or a list of nested keys.")]
    section: Annotated[str | None, Meta(description="INI section, e.g. `global`.")] = None

    def _check(self) -> None:
        check_format(self.format)


class ServiceRef(ProfileModel):
    """The background service whose own environment a variable must be in."""

    systemd: Annotated[str | None, Meta(
        description="Linux: the systemd system unit (e.g. `ollama.service`) whose `Environment=` "
        "lines (unit file and drop-ins) the variable is read from.",
    )] = None


class IgnoredWhen(ProfileModel):
    """A variable that makes the tool skip a setting (pip with `PIP_CONFIG_FILE=/dev/null`
    reads no config file; uv with `UV_CONFIG_FILE` set reads that file instead of the user's)."""

    env: str
    holds: Annotated[Literal["anything", "true", "devnull", "a-file"], Meta(
        description="`anything`: set and not empty; `true`: a true boolean (`1`, `true`, `yes`, "
        "`on`); `devnull`: the OS's null device (`/dev/null`, Windows `nul`); `a-file`: the path "
        "of an existing file.",
    )]


# A setting is told apart by the key it has (`env:`, `config:` or `policy:`), which the
# validator reads; msgspec's union needs a tag of its own, which no profile writes.
SETTING_TAG = "$setting"


class _Setting(ProfileModel, tag_field=SETTING_TAG, kw_only=True):
    ignored_when: Annotated[list[IgnoredWhen], Meta(
        description="The tool skips the setting when any of these holds.",
    )] = []
    expands_tilde: Annotated[bool, Meta(
        description="The tool reads a leading `~` of the value as the home folder; `false`: as a "
        "folder named `~` below the directory the tool starts in (uv).",
    )] = True
    value: Annotated[str, Meta(
        description="Path template of the location given the setting's value `{value}`, "
        "e.g. `{value}/hub` for HF_HOME.",
    )] = "{value}"
    replaces: Annotated[PathsPerOs | None, Meta(
        description="The part of the location's paths that the value takes the place of "
        "(default: the whole path; for a policy, the folder the paths have in common).",
    )] = None


class EnvSetting(_Setting, tag="env"):
    """An environment variable the tool reads (the first of `env` that is set decides)."""

    env: Annotated[list[str], Meta(min_length=1), ONE_OR_MANY]
    separator: Annotated[str | None, Meta(
        description="The variable holds a list (`CONDA_PKGS_DIRS=a,b`): its first entry decides; "
        "`pathsep` is the OS's path-list separator (`:`, or `;` on Windows).",
    )] = None
    service: Annotated[ServiceRef | None, Meta(
        description="The variable is read by a service from its own environment, not from shells.",
    )] = None


class ConfigSetting(_Setting, tag="config"):
    """A key in the tool's config files (pip.conf `cache-dir`, .npmrc `cache`, .condarc `pkgs_dirs`)."""

    config: ConfigKey
    pick: Annotated[Literal["value", "first"], Meta(
        description="`first`: the key holds a list; its first entry decides."
    )] = "value"


class PolicySetting(_Setting, tag="policy"):
    """A managed browser policy (`DiskCacheDir`)."""

    browser: Browser
    policy: str = "DiskCacheDir"


Setting = Annotated[
    Union[EnvSetting, ConfigSetting, PolicySetting],  # noqa: UP007
    Meta(extra={"by_key": "a setting names one of `env`, `config` or `policy`"}),
]


class AskTool(ProfileModel):
    """Ask the installed tool where its cache is (`cachedoctor where --ask-tools`)."""

    command: Annotated[list[str], Meta(min_length=1, description="argv; argv[0] is looked up on PATH.")]
    json_key: Annotated[str | None, Meta(
        description="The output is JSON: the dotted key (list indexes as numbers) holding the "
        "path, e.g. `pkgs_dirs.0`. Without it, the first non-empty line of stdout.",
    )] = None


class _Units(ProfileModel, tag_field="type"):
    @property
    def type(self) -> str:
        """The unit type's name (`type: hf-hub`, `cachedoctor.cacheunits.registry`)."""
        return str(self.__struct_config__.tag)


class HfHubUnits(_Units, tag="hf-hub"):
    """Hugging Face hub repos (`models--org--name`, `datasets--...`, `spaces--...`): revisions
    (`snapshots/<rev>` + `refs/*`) over shared `blobs/`."""



class OllamaUnits(_Units, tag="ollama-models"):
    """Ollama models: `manifests/<registry>/<ns>/<model>/<tag>` referencing `blobs/sha256-*`."""



class EntryUnits(_Units, tag="directory-entries"):
    """Each child of `under` (a folder relative to the location; a glob is allowed) is one
    independent unit: pip `wheels/`, Cargo `registry/src/*`, Gradle `caches/modules-2/files-2.1`."""

    under: str = "."


class ContentAddressedUnits(_Units, tag="content-addressed"):
    """A store the tool itself indexes (npm `_cacache`, pip `http-v2`): single files are
    independent, so file-level least-recently-used eviction is right."""

    under: str = "."


class ToolOnlyUnits(_Units, tag="tool-only"):
    """Only the tool's own command may clean this store (hard links or symlinks into its
    consumers, read-only files, an index of its own)."""

    why: str


class SupersededUnits(_Units, tag="superseded"):
    """A folder the tool stopped using once `by` (relative to the location) exists: pip's
    pre-23.3 `http/` beside `http-v2/`. Garbage for `clean --prune` while `by` is there."""

    under: str
    by: str
    why: str


UnitSpec = Union[HfHubUnits, OllamaUnits, EntryUnits, ContentAddressedUnits,  # noqa: UP007
                 ToolOnlyUnits, SupersededUnits]


class CleanSpec(ProfileModel):
    """How a location is emptied: the tool's own command when it exists, otherwise file rules."""

    command: Annotated[list[str], Meta(
        min_length=1,
        description="argv of the tool's own clean command; argv[0] must be on PATH. Shown before it runs.",
    )] | None = None
    keep: Annotated[list[str], Meta(
        description="Glob patterns (relative to the location) that are never deleted.",
    )] = []
    only: Annotated[list[str], Meta(
        description="If given, only these glob patterns (relative to the location) are deleted.",
    )] = []


class Location(ProfileModel, kw_only=True):
    id: Identifier
    name: str | None = None
    description: str | None = None
    kind: LocationKind = "cache"
    paths: PathsPerOs
    safe_to_delete: bool
    relocate: list[Relocation] = []
    set_by: Annotated[list[Setting], Meta(
        description="The tool's own settings that move this location, highest precedence first "
        "(the variables, config keys and policies of `relocate` are added after these).",
    )] = []
    ask: Annotated[AskTool, shorthand("command"), Meta(
        description="The tool's own command that prints where this location is."
    )] | None = None
    requires: Annotated[list[Capability], Meta(
        description="What a destination filesystem must hold for this cache to work there.",
    )] = []
    links_into: Annotated[str | None, Meta(
        description="Path template of where the tool's consumers live (`~`): the store "
        "hard-links into them, so it must stay on their filesystem.",
    )] = None
    link_forbidden: Annotated[str | None, Meta(
        description="Why `move --method link` must not be used for this location."
    )] = None
    how_to_move: Annotated[PerOs | None, Meta(
        description="Per OS, the documented steps that move this location by the tool's own "
        "means (`wsl --manage <distro> --move D:\\wsl`): shown by `move` and `which` when "
        "cachedoctor must not move it itself.",
    )] = None
    outside_user_roots: Annotated[str | None, Meta(
        description="Why `clean` may act outside the user's cache, data, config and temp folders "
        "(a user profile's explicit choice; built-in profiles' folders are allowed as declared).",
    )] = None
    units: Annotated[list[UnitSpec], ONE_OR_MANY, Meta(
        description="What one listable, deletable item of this location is.",
    )] = []
    clean: CleanSpec | None = None
    quota: Annotated[str | None, Meta(description="Recommended cap, e.g. `20GB`.")] = None

    def _check(self) -> None:
        from cachedoctor.errors import UserInputError

        try:
            if self.links_into is not None:
                from cachedoctor.resolve import check_template

                check_template(self.links_into)
        except UserInputError as exc:
            raise FieldProblem("links_into", exc.message) from None
        try:
            if self.quota is not None:
                from cachedoctor.sizes import parse_size

                parse_size(self.quota)
        except UserInputError as exc:
            raise FieldProblem("quota", exc.message) from None


class TuneSetting(ProfileModel):
    key: Annotated[str | list[str], Meta(
        description="A string is ONE key, dots included (`grok.code.cacheSize`); "
        "a list is a path of nested keys (`[cache, ttl]`).",
    )]
    value: Any


class TunePreset(ProfileModel, kw_only=True):
    id: Identifier
    description: str | None = None
    file: Annotated[PathsPerOs | None, Meta(description="Target file per OS.")] = None
    workspace_file: Annotated[str | None, Meta(
        description="Target relative to `--workspace DIR`, e.g. `.vscode/settings.json`.",
    )] = None
    format: Annotated[str, Meta(description="A writable config format, or `env` (environment variables).")]
    create: Annotated[bool, Meta(description="Create the file (and folders) when missing.")] = False
    settings: Annotated[list[TuneSetting], Meta(min_length=1)]
    effect: Annotated[str | None, Meta(description="What the preset changes, as measured.")] = None

    def _check(self) -> None:
        if self.format == ENV_PRESET:
            return
        check_writable_format(self.format)
        if self.file is None and self.workspace_file is None:
            raise ValueError("a preset needs `file` or `workspace_file` (or format `env`)")


class Check(ProfileModel):
    id: Identifier
    severity: Literal["error", "warning", "hint"]
    when: Annotated[list[Condition], Meta(min_length=1, description="All conditions must hold."),
                    ONE_OR_MANY]
    message: str
    why: str
    fix: Annotated[str | None, Meta(
        description="The cachedoctor command that fixes it; `{tool}`, `{location}`, `{path}` are filled in.",
    )] = None


class Profile(ProfileModel, kw_only=True):
    id: Identifier
    name: str
    category: Category = "other"
    aliases: Annotated[list[Identifier], Meta(
        description="Other names accepted on the command line (`hf`)."
    )] = []
    description: str
    homepage: str | None = None
    sources: Annotated[list[str], Meta(description="Where each fact comes from.")] = []
    processes: Annotated[PerOs, Meta(description="Process names meaning 'running'.")] = (
        msgspec.field(default_factory=PerOs))
    locations: Annotated[list[Location], Meta(min_length=1)]
    tune: list[TunePreset] = []
    checks: list[Check] = []
    notes: list[str] = []

    def reference_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Cross-references the schema alone can't check: unique ids, and checks naming
        locations and presets that exist. Each problem comes with the data path it is about."""
        problems: list[tuple[tuple[str | int, ...], str]] = []
        for field, ids in (
            ("locations", [loc.id for loc in self.locations]),
            ("tune", [p.id for p in self.tune]),
            ("checks", [c.id for c in self.checks]),
        ):
            for index, item in enumerate(ids):
                if item in ids[:index]:
                    problems.append(((field, index, "id"), f"duplicate id {item!r}"))
        location_ids = [loc.id for loc in self.locations]
        preset_ids = [p.id for p in self.tune]
        for c_index, check in enumerate(self.checks):
            for w_index, cond in enumerate(check.when):
                where: tuple[str | int, ...] = ("checks", c_index, "when", w_index)
                loc = cond.location if isinstance(cond, LocationCondition) else None
                if loc is not None and loc not in location_ids:
                    problems.append(
                        ((*where, "location"), f"unknown location {loc!r}; known: {', '.join(location_ids)}")
                    )
                preset = cond.preset if isinstance(cond, PresetCondition) else None
                if preset is not None and preset not in preset_ids:
                    known = ", ".join(preset_ids) or "none"
                    problems.append(((*where, "preset"), f"unknown tune preset {preset!r}; known: {known}"))
        return problems

    def location(self, location_id: str) -> Location:
        for loc in self.locations:
            if loc.id == location_id:
                return loc
        raise KeyError(location_id)

    def require_location(self, location_id: str) -> Location:
        """The location a user named (`--location ID`, any case), or a clear error with the one
        they probably meant and the known ones."""
        for loc in self.locations:
            if loc.id == location_id or loc.id.lower() == location_id.lower():
                return loc
        from cachedoctor.errors import UserInputError
        from cachedoctor.names import did_you_mean

        ids = [loc.id for loc in self.locations]
        raise UserInputError(f"{self.id} has no location {location_id!r}"
                             f"{did_you_mean(location_id, ids)} (known: {', '.join(ids)})")

    def preset(self, preset_id: str) -> TunePreset:
        for preset in self.tune:
            if preset.id == preset_id:
                return preset
        raise KeyError(preset_id)

    def processes_for(self, os_name: OsName) -> list[str]:
        return self.processes.for_host(Host(os=os_name))


