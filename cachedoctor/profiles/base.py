"""The building blocks of the profile format shared by the model and the relocation methods'
own entries (`cachedoctor.relocate.methods`): the strict base model, per-OS values and the
config-format names (from the `cachedoctor.configedit.formats` registry)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator

from cachedoctor.host import Host, OsName


def _known_format(name: str) -> str:
    from cachedoctor.configedit.formats import NAMES

    if name not in NAMES:
        raise ValueError(f"unknown config format {name!r}; expected one of {', '.join(NAMES)}")
    return name


def _writable_format(name: str) -> str:
    from cachedoctor.configedit.formats import WRITABLE

    if _known_format(name) not in WRITABLE:
        raise ValueError(f"cachedoctor reads {name} files but does not write them; expected one "
                         f"of {', '.join(WRITABLE)}")
    return name


ENV_PRESET = "env"  # a tune preset that sets environment variables, not a file's keys


def _tune_format(name: str) -> str:
    return name if name == ENV_PRESET else _writable_format(name)


# The names of the config-format registry (`cachedoctor.configedit.formats`).
ConfigFormat = Annotated[str, AfterValidator(_known_format)]
# Formats cachedoctor can also write (format-preserving); `properties` and `xml` are read only.
WritableFormat = Annotated[str, AfterValidator(_writable_format)]
# What a tune preset edits: a writable format, or `env` (environment variables).
TuneFormat = Annotated[str, AfterValidator(_tune_format)]


class ProfileModel(BaseModel):
    """Every part of a profile: unknown keys are errors, loaded values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def listify(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class PerOs(ProfileModel):
    """Values per OS. `wsl` falls back to `linux`; a missing OS means "not on that OS"."""

    windows: list[str] | None = None
    macos: list[str] | None = None
    linux: list[str] | None = None
    wsl: list[str] | None = None

    @field_validator("windows", "macos", "linux", "wsl", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return listify(value)

    def for_host(self, host: Host) -> list[str]:
        for key in host.profile_keys:
            values = getattr(self, key)
            if values is not None:
                return list(values)
        return []


class PathsPerOs(PerOs):
    """Per-OS path templates; their syntax is checked when the profile loads."""

    @field_validator("windows", "macos", "linux", "wsl")
    @classmethod
    def _valid_templates(cls, values: list[str] | None, info: ValidationInfo) -> list[str] | None:
        from cachedoctor.resolve import check_template

        os_name: OsName = "linux" if info.field_name == "wsl" else info.field_name  # type: ignore[assignment]
        for template in values or []:
            check_template(template, os_name)  # a UserInputError is a ValueError: pydantic reports it
        return values
