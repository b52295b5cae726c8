"""Condition types a profile check may name, with their validated parameters.

A profile can only *name* one of these types; it cannot run code. Each type is a struct of
the profile format registered here (its `type:` is the struct's tag); the doctor registers an
evaluator for each name
(`cachedoctor.doctor`), and a test proves every type has one.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union, get_args

from msgspec import Meta

from cachedoctor.host import OsName
from cachedoctor.policies import Browser
from cachedoctor.profiles.base import FieldProblem, ProfileModel


class _Condition(ProfileModel, tag_field="type"):
    @property
    def type(self) -> str:
        """The name a profile gives the condition (`type: mount_option`)."""
        return str(self.__struct_config__.tag)


class LocationCondition(_Condition):
    """A condition about one of the profile's locations (checked to exist when it loads)."""

    location: str

class PresetCondition(_Condition):
    """A condition about one of the profile's tune presets (checked to exist when it loads)."""

    preset: str

class LocationExists(LocationCondition, tag="location_exists"):
    """The location resolves to at least one existing path."""



class MountOption(LocationCondition, tag="mount_option"):
    """The location (or its nearest existing parent) is on a mount with this option, e.g. noexec."""

    option: str


class FilesystemType(LocationCondition, tag="filesystem_type"):
    """The location is on one of these filesystem types (e.g. tmpfs, ramfs: emptied at reboot)."""

    types: Annotated[list[str], Meta(min_length=1)]


class FilesystemDiffers(LocationCondition, tag="filesystem_differs"):
    """The location's data (a relocation link's target) is on another filesystem than `path`:
    a hard-linking store (uv, pnpm, conda) away from the environments that link into it."""

    path: Annotated[str, Meta(description="Path template of what must share the filesystem, e.g. `~`.")]

    def _check(self) -> None:
        from cachedoctor.errors import UserInputError
        from cachedoctor.resolve import check_template

        try:
            check_template(self.path)
        except UserInputError as exc:
            raise FieldProblem("path", exc.message) from None


class LinkKind(LocationCondition, tag="link_kind"):
    """The location has been relocated with this kind of link (e.g. symlink where a junction is required)."""

    kind: Literal["symlink", "junction"]


class LinkTargetMissing(LocationCondition, tag="link_target_missing"):
    """The location is a relocation link whose target is gone (the other drive is unplugged)."""



class FreeSpaceBelow(LocationCondition, tag="free_space_below"):
    """Free space on the location's drive is below a size (`10GB`) or a percentage."""

    size: str | None = None
    percent: Annotated[float, Meta(gt=0, lt=100)] | None = None

    def _check(self) -> None:
        if (self.size is None) == (self.percent is None):
            raise ValueError("give exactly one of `size` (e.g. 10GB) or `percent`")
        if self.size is not None:
            from cachedoctor.errors import UserInputError
            from cachedoctor.sizes import parse_size

            try:
                parse_size(self.size)
            except UserInputError as exc:
                raise FieldProblem("size", exc.message) from None


class OverQuota(LocationCondition, tag="over_quota"):
    """The location is larger than the quota the user set (or the profile recommends)."""



class SettingDiffers(PresetCondition, tag="setting_differs"):
    """A tune preset's setting is missing from its file or has another value."""

    key: str | list[str] | None = None
    unset_counts: Annotated[bool, Meta(
        description="An absent key (or file) counts as differing; false when the tool's own "
        "default is the tuned value (Cargo's auto-clean is daily unless set otherwise).",
    )] = True


class SettingBelow(PresetCondition, tag="setting_below"):
    """A numeric setting is set below a threshold (e.g. a size in MB where bytes are expected)."""

    key: str | list[str]
    below: float


class SettingAbsolutePath(PresetCondition, tag="setting_absolute_path"):
    """A setting that must hold relative paths holds an absolute one."""

    key: str | list[str]


class PolicyValueBelow(_Condition, tag="policy_value_below"):
    """A browser policy (e.g. DiskCacheSize, in bytes) is set below a threshold."""

    browser: Browser
    policy: str
    below: float


class PolicyNotInt32(_Condition, tag="policy_not_int32"):
    """A browser policy the browser reads as a 32-bit integer (DiskCacheSize) holds a value it
    rejects: not an integer, negative, or above 2147483647 (Chromium: "Expected integer
    value", and the policy is ignored)."""

    browser: Literal["chrome", "edge", "chromium"]
    policy: str


class JournalUnfinished(_Condition, tag="journal_unfinished"):
    """A move or restore of this tool was interrupted and is recorded as unfinished."""



class EnvNotSet(_Condition, tag="env_not_set"):
    """A variable is in neither cachedoctor's managed settings nor the current environment."""

    var: str


class EnvNotSeen(_Condition, tag="env_not_seen"):
    """cachedoctor set a variable persistently but this process does not see it (new shell needed)."""

    var: str


class OsIs(_Condition, tag="os_is"):
    """The host OS is one of these."""

    os: Annotated[list[OsName], Meta(min_length=1)]


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
    Meta(description="A condition, told apart by `type`."),
]

CONDITION_TYPES: tuple[type[_Condition], ...] = get_args(get_args(Condition)[0])


def condition_names() -> list[str]:
    return [str(t.__struct_config__.tag) for t in CONDITION_TYPES]
