"""What every relocation method is: the profile entry it reads and the strategy the planner,
the engine, the picture and the doctor ask about it.

A method's strategy turns the profile entry into plain data (`settings`, stored in the journal,
so finishing or rolling back never needs the profile again); `apply` and `revert` are
idempotent: after a crash they are simply run again. What existed before is recorded in the
settings (and the journal saved) *before* anything is changed, so `revert` can put it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from cachedoctor.profiles.base import ProfileModel

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.links import LinkKind
    from cachedoctor.locate.effective import Step
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Location
    from cachedoctor.relocate.journal import Operation

SaveCallback = Callable[[], None]


class RelocationEntry(ProfileModel, tag_field="method", kw_only=True):
    """One entry of a location's `relocate:` list; each method's entry is tagged with its own
    name (`method: link`, the discriminator of the profile format)."""

    why: str | None = None

    @property
    def method(self) -> str:
        return str(self.__struct_config__.tag)


def fill(template: str, dest: str) -> str:
    return template.replace("{dest}", dest)


class RelocationMethod:
    """The strategy of one method. The defaults describe a method that points the tool at the
    new folder with a setting (a variable, a config key, a policy) and leaves no link."""

    name: ClassVar[str]
    entry: ClassVar[type[RelocationEntry]]
    leaves_link: ClassVar[bool] = False  # the old path becomes a link to the new folder
    sets_variables: ClassVar[bool] = False  # the tool finds the folder through the environment
    history_kind: ClassVar[str] = "move"  # the kind of the change in `cachedoctor history`
    fallback: ClassVar[bool] = False  # offered for every location the profile does not forbid it

    def usable(self, entry: RelocationEntry, host: Host) -> bool:
        """Whether the profile's entry can be applied on `host` at all."""
        return True

    def forbidden(self, location: Location) -> str | None:
        """Why the profile forbids this method for `location`, if it does."""
        return None

    def settings(self, entry: RelocationEntry, base: str, host: Host, *,
                 link: LinkKind | None = None) -> dict[str, Any]:
        """Plain-data settings for the journal; raises UserInputError/RefusedError when unusable."""
        raise NotImplementedError

    def command_options(self, settings: dict[str, Any]) -> str:
        """The `move` options beyond `--method` that repeat this move (to resume it)."""
        return ""

    def mirrors_layout(self, op: Operation) -> bool:
        """True when each folder goes to its own path below the base (no setting decides it)."""
        return False

    def world_after(self, op: Operation, world: World) -> World:
        """The world as the tool will see it once the method is applied (planning only)."""
        return world

    def ignored_reason(self, op: Operation, location: Location, world: World) -> str | None:
        """Why the tool would not read what the method changes ("skips FILE while ..."), if so."""
        return None

    def replaced(self, entry: RelocationEntry, step: Step) -> str | None:
        """The user's own setting `step` when it is the one this method overwrites, as shown."""
        return None

    def describe(self, op: Operation, host: Host) -> list[str]:
        """What the method will create or set, for the plan."""
        raise NotImplementedError

    def root_files(self, op: Operation, host: Host) -> list[str]:
        """Files only root may write that `apply` and `revert` write (`cachedoctor.rootfiles`):
        sudo is asked for them before the copy's progress line takes the terminal."""
        return []

    def apply(self, op: Operation, host: Host, save: SaveCallback) -> list[str]:
        """Point the tool at the new place; returns messages for the user. Idempotent."""
        raise NotImplementedError

    def revert(self, op: Operation, host: Host) -> list[str]:
        """Undo `apply` (never removing a link's target); returns messages for the user."""
        raise NotImplementedError
