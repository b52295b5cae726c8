"""The profile format as typed, validated models.

This is the single definition of the format: the loader validates against it, and
`cachedoctor profiles schema` prints its JSON Schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

from pydantic import (
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from cachedoctor.conditions import Condition, LocationCondition, PresetCondition
from cachedoctor.host import Host, OsName
from cachedoctor.policies import Browser
from cachedoctor.profiles.base import (
    ConfigFormat,
    PathsPerOs,
    PerOs,
    ProfileModel,
    TuneFormat,
    listify,
)
from cachedoctor.relocate.methods import ENTRIES, RelocationEntry
from cachedoctor.relocate.methods.config import ConfigRelocation as ConfigRelocation
from cachedoctor.relocate.methods.env import EnvRelocation as EnvRelocation
from cachedoctor.relocate.methods.link import LinkRelocation as LinkRelocation
from cachedoctor.relocate.methods.policy import PolicyRelocation as PolicyRelocation

Identifier = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", max_length=64)]
PathTemplates = Annotated[list[str], Field(min_length=1)]
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
    Relocation = Annotated[Union[ENTRIES], Field(discriminator="method")]  # noqa: UP007


class ConfigKey(ProfileModel):
    """One key of the tool's own config files."""

    file: PathsPerOs = Field(
        description="The files the tool reads, highest precedence first: the first file that "
        "sets the key decides.",
    )
    format: ConfigFormat
    key: str | list[str] = Field(description="A flat key, or a list of nested keys.")
    section: str | None = Field(default=None, description="INI section, e.g. `global`.")


class ServiceRef(ProfileModel):
    """The background service whose own environment a variable must be in."""

    systemd: str | None = Field(
        default=None,
        description="Linux: the systemd system unit (e.g. `ollama.service`) whose `Environment=` "
        "lines (unit file and drop-ins) the variable is read from.",
    )


class IgnoredWhen(ProfileModel):
    """A variable that makes the tool skip a setting (pip with `PIP_CONFIG_FILE=/dev/null`
    reads no config file; uv with `UV_CONFIG_FILE` set reads that file instead of the user's)."""

    env: str
    holds: Literal["anything", "true", "devnull", "a-file"] = Field(
        description="`anything`: set and not empty; `true`: a true boolean (`1`, `true`, `yes`, "
        "`on`); `devnull`: the OS's null device (`/dev/null`, Windows `nul`); `a-file`: the path "
        "of an existing file.",
    )


class _Setting(ProfileModel):
    ignored_when: list[IgnoredWhen] = Field(
        default_factory=list,
        description="The tool skips the setting when any of these holds.",
    )
    expands_tilde: bool = Field(
        default=True,
        description="The tool reads a leading `~` of the value as the home folder; `false`: as a "
        "folder named `~` below the directory the tool starts in (uv).",
    )
    value: str = Field(
        default="{value}",
        description="Path template of the location given the setting's value `{value}`, "
        "e.g. `{value}/hub` for HF_HOME.",
    )
    replaces: PathsPerOs | None = Field(
        default=None,
        description="The part of the location's paths that the value takes the place of "
        "(default: the whole path; for a policy, the folder the paths have in common).",
    )


class EnvSetting(_Setting):
    """An environment variable the tool reads (the first of `env` that is set decides)."""

    env: list[str] = Field(min_length=1)
    separator: str | None = Field(
        default=None,
        description="The variable holds a list (`CONDA_PKGS_DIRS=a,b`): its first entry decides; "
        "`pathsep` is the OS's path-list separator (`:`, or `;` on Windows).",
    )
    service: ServiceRef | None = Field(
        default=None,
        description="The variable is read by a service from its own environment, not from shells.",
    )

    @field_validator("env", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return listify(value)


class ConfigSetting(_Setting):
    """A key in the tool's config files (pip.conf `cache-dir`, .npmrc `cache`, .condarc `pkgs_dirs`)."""

    config: ConfigKey
    pick: Literal["value", "first"] = Field(
        default="value", description="`first`: the key holds a list; its first entry decides."
    )


class PolicySetting(_Setting):
    """A managed browser policy (`DiskCacheDir`)."""

    policy: str = "DiskCacheDir"
    browser: Browser


def _setting_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        for tag in ("env", "config", "policy"):
            if tag in value:
                return tag
        return None
    for tag, cls in (("env", EnvSetting), ("config", ConfigSetting), ("policy", PolicySetting)):
        if isinstance(value, cls):
            return tag
    return None


Setting = Annotated[
    Union[  # noqa: UP007 - a discriminated union needs the Union form
        Annotated[EnvSetting, Tag("env")],
        Annotated[ConfigSetting, Tag("config")],
        Annotated[PolicySetting, Tag("policy")],
    ],
    Discriminator(_setting_tag, custom_error_type="setting_kind",
                  custom_error_message="a setting names one of `env`, `config` or `policy`"),
]


class AskTool(ProfileModel):
    """Ask the installed tool where its cache is (`cachedoctor where --ask-tools`)."""

    command: list[str] = Field(min_length=1, description="argv; argv[0] is looked up on PATH.")
    json_key: str | None = Field(
        default=None,
        description="The output is JSON: the dotted key (list indexes as numbers) holding the "
        "path, e.g. `pkgs_dirs.0`. Without it, the first non-empty line of stdout.",
    )

    @model_validator(mode="before")
    @classmethod
    def _argv_shorthand(cls, value: Any) -> Any:
        return {"command": value} if isinstance(value, list) else value


class HfHubUnits(ProfileModel):
    """Hugging Face hub repos (`models--org--name`, `datasets--...`, `spaces--...`): revisions
    (`snapshots/<rev>` + `refs/*`) over shared `blobs/`."""

    type: Literal["hf-hub"]


class OllamaUnits(ProfileModel):
    """Ollama models: `manifests/<registry>/<ns>/<model>/<tag>` referencing `blobs/sha256-*`."""

    type: Literal["ollama-models"]


class EntryUnits(ProfileModel):
    """Each child of `under` (a folder relative to the location; a glob is allowed) is one
    independent unit: pip `wheels/`, Cargo `registry/src/*`, Gradle `caches/modules-2/files-2.1`."""

    type: Literal["directory-entries"]
    under: str = "."


class ContentAddressedUnits(ProfileModel):
    """A store the tool itself indexes (npm `_cacache`, pip `http-v2`): single files are
    independent, so file-level least-recently-used eviction is right."""

    type: Literal["content-addressed"]
    under: str = "."


class ToolOnlyUnits(ProfileModel):
    """Only the tool's own command may clean this store (hard links or symlinks into its
    consumers, read-only files, an index of its own)."""

    type: Literal["tool-only"]
    why: str


class SupersededUnits(ProfileModel):
    """A folder the tool stopped using once `by` (relative to the location) exists: pip's
    pre-23.3 `http/` beside `http-v2/`. Garbage for `clean --prune` while `by` is there."""

    type: Literal["superseded"]
    under: str
    by: str
    why: str


UnitSpec = Annotated[
    Union[HfHubUnits, OllamaUnits, EntryUnits, ContentAddressedUnits, ToolOnlyUnits,  # noqa: UP007
          SupersededUnits],
    Field(discriminator="type"),
]


class CleanSpec(ProfileModel):
    """How a location is emptied: the tool's own command when it exists, otherwise file rules."""

    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description="argv of the tool's own clean command; argv[0] must be on PATH. Shown before it runs.",
    )
    keep: list[str] = Field(
        default_factory=list,
        description="Glob patterns (relative to the location) that are never deleted.",
    )
    only: list[str] = Field(
        default_factory=list,
        description="If given, only these glob patterns (relative to the location) are deleted.",
    )


class Location(ProfileModel):
    id: Identifier
    name: str | None = None
    description: str | None = None
    kind: LocationKind = "cache"
    paths: PathsPerOs
    safe_to_delete: bool
    relocate: list[Relocation] = Field(default_factory=list)
    set_by: list[Setting] = Field(
        default_factory=list,
        description="The tool's own settings that move this location, highest precedence first "
        "(the variables, config keys and policies of `relocate` are added after these).",
    )
    ask: AskTool | None = Field(
        default=None, description="The tool's own command that prints where this location is."
    )
    requires: list[Capability] = Field(
        default_factory=list,
        description="What a destination filesystem must hold for this cache to work there.",
    )
    links_into: str | None = Field(
        default=None,
        description="Path template of where the tool's consumers live (`~`): the store "
        "hard-links into them, so it must stay on their filesystem.",
    )
    link_forbidden: str | None = Field(
        default=None, description="Why `move --method link` must not be used for this location."
    )
    how_to_move: PerOs | None = Field(
        default=None,
        description="Per OS, the documented steps that move this location by the tool's own "
        "means (`wsl --manage <distro> --move D:\\wsl`): shown by `move` and `which` when "
        "cachedoctor must not move it itself.",
    )
    outside_user_roots: str | None = Field(
        default=None,
        description="Why `clean` may act outside the user's cache, data, config and temp folders "
        "(a user profile's explicit choice; built-in profiles' folders are allowed as declared).",
    )
    units: list[UnitSpec] = Field(
        default_factory=list,
        description="What one listable, deletable item of this location is.",
    )
    clean: CleanSpec | None = None
    quota: str | None = Field(default=None, description="Recommended cap, e.g. `20GB`.")

    @field_validator("units", mode="before")
    @classmethod
    def _units_one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    @field_validator("links_into")
    @classmethod
    def _valid_links_into(cls, value: str | None) -> str | None:
        if value is not None:
            from cachedoctor.resolve import check_template

            check_template(value)
        return value

    @field_validator("quota")
    @classmethod
    def _valid_size(cls, value: str | None) -> str | None:
        if value is not None:
            from cachedoctor.sizes import parse_size

            parse_size(value)  # a UserInputError is a ValueError
        return value


class TuneSetting(ProfileModel):
    key: str | list[str] = Field(
        description="A string is ONE key, dots included (`grok.code.cacheSize`); "
        "a list is a path of nested keys (`[cache, ttl]`).",
    )
    value: Any


class TunePreset(ProfileModel):
    id: Identifier
    description: str | None = None
    file: PathsPerOs | None = Field(default=None, description="Target file per OS.")
    workspace_file: str | None = Field(
        default=None,
        description="Target relative to `--workspace DIR`, e.g. `.vscode/settings.json`.",
    )
    format: TuneFormat
    create: bool = Field(default=False, description="Create the file (and folders) when missing.")
    settings: list[TuneSetting] = Field(min_length=1)
    effect: str | None = Field(default=None, description="What the preset changes, as measured.")

    @model_validator(mode="after")
    def _has_target(self) -> TunePreset:
        if self.format != "env" and self.file is None and self.workspace_file is None:
            raise ValueError("a preset needs `file` or `workspace_file` (or format `env`)")
        return self


class Check(ProfileModel):
    id: Identifier
    severity: Literal["error", "warning", "hint"]
    when: list[Condition] = Field(min_length=1, description="All conditions must hold.")
    message: str
    why: str
    fix: str | None = Field(
        default=None,
        description="The cachedoctor command that fixes it; `{tool}`, `{location}`, `{path}` are filled in.",
    )

    @field_validator("when", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value


class Profile(ProfileModel):
    id: Identifier
    name: str
    category: Category = "other"
    aliases: list[Identifier] = Field(
        default_factory=list, description="Other names accepted on the command line (`hf`)."
    )
    description: str
    homepage: str | None = None
    sources: list[str] = Field(default_factory=list, description="Where each fact comes from.")
    processes: PerOs = Field(default_factory=PerOs, description="Process names meaning 'running'.")
    locations: list[Location] = Field(min_length=1)
    tune: list[TunePreset] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

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


