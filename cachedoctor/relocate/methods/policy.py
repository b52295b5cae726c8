"""`policy`: a browser's managed `DiskCacheDir` policy (written through `relocate.policy`, the
one seam for policy files and the Windows registry; macOS needs a configuration profile, which
cachedoctor does not write)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cachedoctor.errors import OperationFailed
from cachedoctor.policies import Browser
from cachedoctor.relocate import faults
from cachedoctor.relocate.methods.base import RelocationEntry, RelocationMethod, SaveCallback

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.links import LinkKind
    from cachedoctor.locate.world import World
    from cachedoctor.relocate.journal import Operation


class PolicyRelocation(RelocationEntry, tag="policy"):
    """A browser's managed `DiskCacheDir` policy."""

    browser: Browser
    policy: str = "DiskCacheDir"


class PolicyMethod(RelocationMethod):
    name = "policy"
    entry = PolicyRelocation
    history_kind = "policy"

    def usable(self, entry: RelocationEntry, host: Host) -> bool:
        return host.os != "macos"

    def settings(self, entry: RelocationEntry, base: str, host: Host, *,
                 link: LinkKind | None = None) -> dict[str, Any]:
        from cachedoctor.relocate import policy

        assert isinstance(entry, PolicyRelocation)
        policy.check_supported(host, entry.browser)
        return {"browser": entry.browser, "policy": entry.policy, "value": base}

    def world_after(self, op: Operation, world: World) -> World:
        from cachedoctor.locate.world import with_changes
        from cachedoctor.policies import read_policy_after_write

        s = op.settings
        after = read_policy_after_write(s["browser"], s["policy"], s["value"], world.host,
                                        world.files)
        return with_changes(world, policies={(s["browser"], s["policy"]): after})

    def describe(self, op: Operation, host: Host) -> list[str]:
        from cachedoctor.relocate import policy

        s = op.settings
        return policy.describe(s["browser"], s["policy"], s["value"], host)

    def root_files(self, op: Operation, host: Host) -> list[str]:
        from cachedoctor.relocate import policy

        return [] if host.is_windows else [policy.policy_file(op.settings["browser"])]

    def apply(self, op: Operation, host: Host, save: SaveCallback) -> list[str]:
        from cachedoctor.relocate import policy

        s = op.settings
        if "before" not in s:
            s["before"] = policy.read_current(s["browser"], s["policy"], host)
            save()
        faults.point("apply")
        policy.apply(s["browser"], s["policy"], s["value"], host)
        if policy.current_value(s["browser"], s["policy"], host) != s["value"]:
            raise OperationFailed(f"the {s['policy']} policy did not read back as {s['value']}")
        return [f"restart {s['browser']} for the policy to take effect "
                f"(check chrome://policy / edge://policy)"]

    def revert(self, op: Operation, host: Host) -> list[str]:
        from cachedoctor.relocate import policy

        s = op.settings
        if "before" in s:
            policy.revert(s["browser"], s["policy"], s["before"], host)
        return [f"restart {s['browser']} for the change to take effect"]


METHOD = PolicyMethod()
