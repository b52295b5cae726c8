"""The registry of relocation methods: the one place a method is named.

Each method is one module (`link`, `env`, `policy`, `config`) with its profile entry (the part
of the profile format it reads) and its strategy (`base.RelocationMethod`). The profile model's
`relocate:` entries, the `--method` option, the planner, the engine and the picture all ask
this registry; a new method is one new module plus one line in `_MODULES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cachedoctor.relocate.methods import config, env, link, policy
from cachedoctor.relocate.methods.base import RelocationEntry, RelocationMethod, SaveCallback

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.links import LinkKind
    from cachedoctor.relocate.journal import Operation

# in the order `cachedoctor profiles schema` lists them
_MODULES = (link, env, policy, config)
METHODS: dict[str, RelocationMethod] = {m.METHOD.name: m.METHOD for m in _MODULES}
NAMES: tuple[str, ...] = tuple(METHODS)
ENTRIES: tuple[type[RelocationEntry], ...] = tuple(m.entry for m in METHODS.values())


def method_of(name: str) -> RelocationMethod:
    """The strategy of a method named in a journal, a record or `--method`."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown relocation method {name!r}; expected one of "
                       f"{', '.join(NAMES)}") from None


def resolve_settings(entry: RelocationEntry, base: str, host: Host, *,
                     link: LinkKind | None = None) -> dict[str, Any]:
    """Plain-data settings for the journal; raises UserInputError/RefusedError when unusable."""
    return method_of(entry.method).settings(entry, base, host, link=link)


def describe(op: Operation, host: Host) -> list[str]:
    """What the method will create or set, for the plan."""
    return method_of(op.method).describe(op, host)


def root_files(op: Operation, host: Host) -> list[str]:
    """Files only root may write that the method writes for `op`."""
    return method_of(op.method).root_files(op, host)


def apply(op: Operation, host: Host, save: SaveCallback) -> list[str]:
    """Point the tool at the new place; returns messages for the user. Idempotent."""
    return method_of(op.method).apply(op, host, save)


def revert(op: Operation, host: Host) -> list[str]:
    """Undo `apply`: remove links (never their targets) and the env/policy/config changes."""
    return method_of(op.method).revert(op, host)


__all__ = ["ENTRIES", "METHODS", "NAMES", "RelocationEntry", "RelocationMethod", "SaveCallback",
           "apply", "describe", "method_of", "resolve_settings", "revert", "root_files"]
