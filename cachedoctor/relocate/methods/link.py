"""`link`: move the folder and leave a link at the old path (any folder can be linked)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Literal

from msgspec import Meta

from cachedoctor.errors import OperationFailed, RefusedError, UserInputError
from cachedoctor.links import LinkKind, create_link, link_kind, link_target, points_to, remove_link
from cachedoctor.relocate import faults
from cachedoctor.relocate.methods.base import RelocationEntry, RelocationMethod, SaveCallback

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.profiles.model import Location
    from cachedoctor.relocate.journal import Operation


class LinkRelocation(RelocationEntry, tag="link"):
    """Move the folder and leave a link at the old path."""

    windows_link: Annotated[Literal["junction", "symlink", "any"], Meta(
        description="Link kind required on Windows; `junction` when the tool resolves symlinks "
        "back to their target (e.g. with GetFinalPathNameByHandle).",
    )] = "any"


def choose_link_kind(relocation: LinkRelocation, host: Host, requested: LinkKind | None) -> LinkKind:
    if not host.is_windows:
        if requested == "junction":
            raise UserInputError("junctions exist only on Windows; on this system use --link symlink")
        return "symlink"
    if requested == "symlink" and relocation.windows_link == "junction":
        why = f" ({relocation.why})" if relocation.why else ""
        raise RefusedError(
            f"this tool needs a junction, not a symlink{why}: it resolves symlinks back to their "
            "target and would keep writing to the old drive",
            hint="leave out --link or pass --link junction",
        )
    if requested is not None:
        return requested
    return "symlink" if relocation.windows_link == "symlink" else "junction"


class LinkMethod(RelocationMethod):
    name = "link"
    entry = LinkRelocation
    leaves_link = True
    fallback = True

    def forbidden(self, location: Location) -> str | None:
        return location.link_forbidden

    def settings(self, entry: RelocationEntry, base: str, host: Host, *,
                 link: LinkKind | None = None) -> dict[str, Any]:
        assert isinstance(entry, LinkRelocation)
        return {"link_kind": choose_link_kind(entry, host, link)}

    def command_options(self, settings: dict[str, Any]) -> str:
        return f" --link {settings['link_kind']}" if settings.get("link_kind") else ""

    def mirrors_layout(self, op: Operation) -> bool:
        return True

    def describe(self, op: Operation, host: Host) -> list[str]:
        return [f"create a {op.settings['link_kind']} {p.source} -> {p.dest}" for p in op.pairs]

    def apply(self, op: Operation, host: Host, save: SaveCallback) -> list[str]:
        for pair in op.pairs:
            _link(pair.source, pair.dest, op.settings["link_kind"])
        return []

    def revert(self, op: Operation, host: Host) -> list[str]:
        for pair in op.pairs:
            if link_kind(pair.source) is None:
                continue
            target = link_target(pair.source)
            if not (points_to(pair.source, pair.dest)
                    or (target and os.path.normcase(target) == os.path.normcase(pair.dest))):
                raise OperationFailed(f"{pair.source} links to {target}, not to {pair.dest}; "
                                      "leaving it alone")
            faults.point("unlink")
            remove_link(pair.source)
        return []


def _link(source: str, dest: str, kind: LinkKind) -> None:
    if points_to(source, dest):
        return
    if link_kind(source) is not None:
        raise OperationFailed(f"{source} is a link to {link_target(source)}, not to {dest}")
    if os.path.isdir(source):
        try:
            os.rmdir(source)  # an empty folder the tool re-created meanwhile
        except OSError:
            raise OperationFailed(
                f"{source} was re-created with new files while the cache was being moved "
                "(is the tool running?)"
            ) from None
    faults.point("link")
    create_link(source, dest, kind)
    faults.point("linked")
    if not points_to(source, dest):
        raise OperationFailed(f"the new link {source} does not resolve to {dest}")


METHOD = LinkMethod()
