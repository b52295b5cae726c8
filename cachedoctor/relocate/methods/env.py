"""`env`: point the tool at the new folder with environment variables (cachedoctor's managed
block in the start-up files, or the user's environment on Windows); a service's own environment
is changed by the user, following the profile's instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from msgspec import Meta

from cachedoctor.profiles.base import PerOs
from cachedoctor.relocate import faults
from cachedoctor.relocate.methods.base import (
    RelocationEntry,
    RelocationMethod,
    SaveCallback,
    fill,
)

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.links import LinkKind
    from cachedoctor.locate.effective import Step
    from cachedoctor.locate.world import World
    from cachedoctor.relocate.journal import Operation


class EnvRelocation(RelocationEntry, tag="env"):
    """Point the tool at the new folder with environment variables."""

    vars: Annotated[dict[str, str], Meta(
        min_length=1,
        description="Variable name -> value template; `{dest}` is the new cache folder.",
    )]
    scope: Annotated[Literal["user", "service"], Meta(
        description="`service`: the variable is read by a background service, which needs its own change.",
    )] = "user"
    service: Annotated[PerOs | None, Meta(
        description="Per OS, the exact instructions to change the service's environment.",
    )] = None


class EnvMethod(RelocationMethod):
    name = "env"
    entry = EnvRelocation
    sets_variables = True

    def settings(self, entry: RelocationEntry, base: str, host: Host, *,
                 link: LinkKind | None = None) -> dict[str, Any]:
        assert isinstance(entry, EnvRelocation)
        service = entry.service.for_host(host) if entry.service else []
        return {"vars": {k: fill(v, base) for k, v in entry.vars.items()},
                "scope": entry.scope, "service": [fill(s, base) for s in service]}

    def mirrors_layout(self, op: Operation) -> bool:
        # a service's variable is set by the user: the copy goes where the plan says
        return bool(op.settings.get("scope") == "service")

    def world_after(self, op: Operation, world: World) -> World:
        from cachedoctor.locate.world import EnvValue, with_changes

        s = op.settings
        later: dict[str, Any] = {}
        if not world.host.is_windows:  # a user's own line run after cachedoctor's block wins
            from cachedoctor.envvars.posix import overridden_by

            later = overridden_by(s["vars"], world.host, world.files)
        persistent: dict[str, EnvValue | None] = {}
        for name, value in s["vars"].items():
            last = later[name][-1] if later.get(name) else None
            if last is None:
                persistent[name] = EnvValue(value, "cachedoctor (this move)", True)
            else:  # the line that would win (an `unset`: the variable goes, which is None)
                persistent[name] = None if last.value is None else EnvValue(last.value, last.origin)
        return with_changes(world, persistent=persistent)

    def replaced(self, entry: RelocationEntry, step: Step) -> str | None:
        assert isinstance(entry, EnvRelocation)
        if step.kind == "env" and step.name in entry.vars:
            return f"{step.name}={step.value} (set in {step.origin})"
        return None

    def describe(self, op: Operation, host: Host) -> list[str]:
        s = op.settings
        lines = [f"set {k}={v}" + (" (for the service)" if s["scope"] == "service" else " persistently")
                 for k, v in s["vars"].items()]
        if s["scope"] == "service":
            lines.append("the service's environment must be changed by you:")
            lines += [f"  {line}" for line in s.get("service") or ["(no instructions in the profile)"]]
        return lines

    def apply(self, op: Operation, host: Host, save: SaveCallback) -> list[str]:
        from cachedoctor import envvars

        s = op.settings
        if s["scope"] == "service":
            lines = ["this cache is used by a service: change the service's environment yourself:"]
            lines += [f"  {k}={v}" for k, v in s["vars"].items()]
            lines += [f"  {line}" for line in s.get("service") or []]
            s["applied"] = False
            return lines
        if "env_before" not in s:
            # what cachedoctor managed before, recorded BEFORE anything changes: a resumed move
            # must not take its own half-applied values for the state to go back to
            managed = envvars.managed_variables(host)
            s["env_before"] = {name: managed.get(name) for name in s["vars"]}
            s["applied"] = True
            save()
        faults.point("apply")
        result = envvars.set_variables(dict(s["vars"]), host=host, tool=op.tool)
        messages = list(result.messages)
        if result.files_changed:
            messages.append("changed: " + ", ".join(result.files_changed))
        if result.apply_now:
            messages.append(f"to use it in this shell now: {result.apply_now}")
        return messages

    def revert(self, op: Operation, host: Host) -> list[str]:
        s = op.settings
        if not s.get("applied"):
            if s.get("scope") == "service":
                return ["undo the service environment change you made for: " + ", ".join(s["vars"])]
            return ["remove these variables if you set them: " + ", ".join(s["vars"])]
        from cachedoctor import envvars

        before = s.get("env_before")
        if isinstance(before, dict) and set(before) == set(s["vars"]):
            result = envvars.revert(before, host=host)
        else:
            result = envvars.unset_variables(list(s["vars"]), host=host, tool=op.tool)
        return list(result.messages)


METHOD = EnvMethod()
