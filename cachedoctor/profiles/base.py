"""The building blocks of the profile format shared by the model and the relocation methods'
own entries (`cachedoctor.relocate.methods`): the strict base model, the field annotations the
validator reads (`cachedoctor.profiles.validation`), per-OS values and the config-format names
(from the `cachedoctor.configedit.formats` registry).

The models are msgspec structs: defining them and reading them back from the profile index cost
next to nothing at start-up (pydantic's models took most of a warm `profiles list`). Checks a
type cannot express are `_check` methods, which the validator runs once, when a file is validated
(never when the index is read back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:  # read by type checkers only; typing_extensions need not be installed

    def dataclass_transform(**_: Any) -> Callable[[type], type]:
        return lambda cls: cls

from cachedoctor.host import Host, OsName


class FieldProblem(ValueError):
    """A `_check` finding about one field of the model (reported at that field)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_format(name: str, field: str = "format") -> None:
    from cachedoctor.configedit.formats import NAMES

    if name not in NAMES:
        raise FieldProblem(field, f"unknown config format {name!r}; expected one of {', '.join(NAMES)}")


def check_writable_format(name: str, field: str = "format") -> None:
    from cachedoctor.configedit.formats import WRITABLE

    check_format(name, field)
    if name not in WRITABLE:
        raise FieldProblem(field, f"cachedoctor reads {name} files but does not write them; expected "
                                  f"one of {', '.join(WRITABLE)}")


ENV_PRESET = "env"  # a tune preset that sets environment variables, not a file's keys

# Field annotations the validator reads (msgspec.Meta's `extra`; JSON Schema ignores them):
# a single value where a list is expected is that list's one item (`linux: ~/.cache/x`).
ONE_OR_MANY = msgspec.Meta(extra={"one_or_many": True})


def shorthand(field: str) -> msgspec.Meta:
    """A list given where this mapping is expected is its `field` (`ask: [conda, info]`)."""
    return msgspec.Meta(extra={"shorthand": field})


@dataclass_transform(field_specifiers=(msgspec.field,), frozen_default=True)
class _ProfileStruct(msgspec.StructMeta):
    """Every struct of the format is frozen. msgspec passes `frozen` on to subclasses; this says
    so to type checkers, which read a subclass's options (`tag=...`) as its only ones. (A
    struct with a required field after optional ones, its own or inherited, says `kw_only`.)"""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                **options: Any) -> _ProfileStruct:
        options.setdefault("frozen", True)
        return super().__new__(mcls, name, bases, namespace, **options)


class ProfileModel(msgspec.Struct, metaclass=_ProfileStruct, forbid_unknown_fields=True):
    """Every part of a profile: unknown keys are errors, loaded values never change."""

    def _check(self) -> None:
        """Raise ValueError (FieldProblem for one field) for what the types cannot say."""


class PerOs(ProfileModel):
    """Values per OS. `wsl` falls back to `linux`; a missing OS means "not on that OS"."""

    windows: Annotated[list[str], ONE_OR_MANY] | None = None
    macos: Annotated[list[str], ONE_OR_MANY] | None = None
    linux: Annotated[list[str], ONE_OR_MANY] | None = None
    wsl: Annotated[list[str], ONE_OR_MANY] | None = None

    def for_host(self, host: Host) -> list[str]:
        for key in host.profile_keys:
            values = getattr(self, key)
            if values is not None:
                return list(values)
        return []


class PathsPerOs(PerOs):
    """Per-OS path templates; their syntax is checked when the profile loads."""

    def _check(self) -> None:
        from cachedoctor.errors import UserInputError
        from cachedoctor.resolve import check_template

        for field in ("windows", "macos", "linux", "wsl"):
            os_name: OsName = "linux" if field == "wsl" else field  # type: ignore[assignment]
            for template in getattr(self, field) or []:
                try:
                    check_template(template, os_name)
                except UserInputError as exc:
                    raise FieldProblem(field, exc.message) from None

