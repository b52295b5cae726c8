"""Condition types a profile check may name, with their validated parameters.

A profile can only *name* one of these types; it cannot run code. Each type is a pydantic
model registered here; the doctor registers an evaluator for each name
(`cachedoctor.doctor`), and a test proves every type has one.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cachedoctor.host import OsName
from cachedoctor.policies import Browser


class _Condition(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class LocationCondition(_Condition):
    """A condition about one of the profile's locations (checked to exist when it loads)."""

    location: str

class PresetCondition(_Condition):
    """A condition about one of the profile's tune presets (checked to exist when it loads)."""

    preset: str

class LocationExists(LocationCondition):
    """The location resolves to at least one existing path."""

    type: Literal["location_exists"]


class MountOption(LocationCondition):
    """The location (or its nearest existing parent) is on a mount with this option, e.g. noexec."""

    type: Literal["mount_option"]
    option: str


class FilesystemType(LocationCondition):
    """The location is on one of these filesystem types (e.g. tmpfs, ramfs: emptied at reboot)."""

    type: Literal["filesystem_type"]
    types: list[str] = Field(min_length=1)


class FilesystemDiffers(LocationCondition):
    """The location's data (a relocation link's target) is on another filesystem than `path`:
    a hard-linking store (uv, pnpm, conda) away from the environments that link into it."""

    type: Literal["filesystem_differs"]
    path: str = Field(description="Path template of what must share the filesystem, e.g. `~`.")

    @model_validator(mode="after")
    def _valid_template(self) -> FilesystemDiffers:
        from cachedoctor.resolve import check_template

        check_template(self.path)  # a UserInputError is a ValueError
        return self


class LinkKind(LocationCondition):
    """The location has been relocated with this kind of link (e.g. symlink where a junction is required)."""

    type: Literal["link_kind"]
    kind: Literal["symlink", "junction"]


class LinkTargetMissing(LocationCondition):
    """The location is a relocation link whose target is gone (the other drive is unplugged)."""

    type: Literal["link_target_missing"]


class FreeSpaceBelow(LocationCondition):
    """Free space on the location's drive is below a size (`10GB`) or a percentage."""

    type: Literal["free_space_below"]
    size: str | None = None
    percent: float | None = Field(default=None, gt=0, lt=100)

    @model_validator(mode="after")
    def _one_threshold(self) -> FreeSpaceBelow:
        if (self.size is None) == (self.percent is None):
            raise ValueError("give exactly one of `size` (e.g. 10GB) or `percent`")
        if self.size is not None:
            from cachedoctor.sizes import parse_size

            parse_size(self.size)  # a UserInputError is a ValueError
        return self


class OverQuota(LocationCondition):
    """The location is larger than the quota the user set (or the profile recommends)."""

    type: Literal["over_quota"]


class SettingDiffers(PresetCondition):
    """A tune preset's setting is missing from its file or has another value."""

    type: Literal["setting_differs"]
    key: str | list[str] | None = None
    unset_counts: bool = Field(
        default=True,
        description="An absent key (or file) counts as differing; false when the tool's own "
        "default is the tuned value (Cargo's auto-clean is daily unless set otherwise).",
    )


class SettingBelow(PresetCondition):
    """A numeric setting is set below a threshold (e.g. a size in MB where bytes are expected)."""

    type: Literal["setting_below"]
    key: str | list[str]
    below: float


class SettingAbsolutePath(PresetCondition):
    """A setting that must hold relative paths holds an absolute one."""

    type: Literal["setting_absolute_path"]
    key: str | list[str]


class PolicyValueBelow(_Condition):
    """A browser policy (e.g. DiskCacheSize, in bytes) is set below a threshold."""

    type: Literal["policy_value_below"]
    browser: Browser
    policy: str
    below: float


class PolicyNotInt32(_Condition):
    """A browser policy the browser reads as a 32-bit integer (DiskCacheSize) holds a value it
    rejects: not an integer, negative, or above 2147483647 (Chromium: "Expected integer
    value", and the policy is ignored)."""

    type: Literal["policy_not_int32"]
    browser: Literal["chrome", "edge", "chromium"]
    policy: str


class JournalUnfinished(_Condition):
    """A move or restore of this tool was interrupted and is recorded as unfinished."""

    type: Literal["journal_unfinished"]


class EnvNotSet(_Condition):
    """A variable is in neither cachedoctor's managed settings nor the current environment."""

    type: Literal["env_not_set"]
    var: str


class EnvNotSeen(_Condition):
    """cachedoctor set a variable persistently but this process does not see it (new shell needed)."""

    type: Literal["env_not_seen"]
    var: str


class OsIs(_Condition):
    """The host OS is one of these."""

    type: Literal["os_is"]
    os: list[OsName] = Field(min_length=1)


Condition = Annotated[
    Union[  # noqa: UP007 - a discriminated union needs the Union form
        LocationExists,
        MountOption,
        FilesystemType,
        FilesystemDiffers,
        LinkKind,
        LinkTargetMissing,
        FreeSpaceBelow,
        OverQuota,
        SettingDiffers,
        SettingBelow,
        SettingAbsolutePath,
        PolicyValueBelow,
        PolicyNotInt32,
        JournalUnfinished,
        EnvNotSet,
        EnvNotSeen,
        OsIs,
    ],
    Field(discriminator="type"),
]

CONDITION_TYPES: tuple[type[_Condition], ...] = get_args(get_args(Condition)[0])


def condition_names() -> list[str]:
    return [t.model_fields["type"].annotation.__args__[0] for t in CONDITION_TYPES]  # type: ignore[union-attr]
