"""Shell completion of tool ids and location ids (typer completes commands and options).

The shells run `cachedoctor` with `_CACHEDOCTOR_COMPLETE` set (typer's protocol, for bash,
zsh, fish and PowerShell) at every Tab: this path loads the profiles and nothing that draws
(no rich), and says nothing on stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cachedoctor.profiles.loader import ProfileSet

# typer's click (its own copy since typer 0.24, `click` before): read by duck typing, so either
Command = Any
Context = Any
Param = Any

TOOL_PARAMS = ("tool", "tools")
LOCATION_PARAMS = ("location",)


def attach(command: Command) -> None:
    """Give every TOOL argument and `--location` option of `command` (and of its subcommands)
    their completions. Done once on the assembled CLI, so no command declares it."""
    for param in command.params:
        kind = param.param_type_name
        if param.name in TOOL_PARAMS and kind == "argument":
            param._custom_shell_complete = complete_tools
        elif param.name in LOCATION_PARAMS and kind == "option":
            param._custom_shell_complete = complete_locations
    for sub in (getattr(command, "commands", None) or {}).values():
        attach(sub)


def _profiles(ctx: Context) -> ProfileSet:
    """The profiles this command line would load (`--profiles-dir` is read from the line: no
    callback runs while completing)."""
    from cachedoctor.profiles.loader import load_profiles

    dirs = ctx.find_root().params.get("profiles_dir") or []
    return load_profiles(list(dirs))


def complete_tools(ctx: Context, param: Param, incomplete: str) -> list[str]:
    """Profile ids (and aliases, when one is being typed) not already on the line."""
    profiles = _profiles(ctx)
    given = ctx.params.get(param.name or "") or []
    given = [given] if isinstance(given, str) else list(given)
    typed = incomplete.lower()
    ids = [i for i in sorted(profiles.profiles) if i.lower().startswith(typed)]
    if not ids and typed:
        ids = sorted({a for lp in profiles.profiles.values() for a in lp.profile.aliases
                      if a.lower().startswith(typed)})
    return [i for i in ids if i not in given]


def complete_locations(ctx: Context, param: Param, incomplete: str) -> list[str]:
    """The location ids of the tool named on the line."""
    tool = ctx.params.get("tool")
    if not isinstance(tool, str):  # an option left without its value stops the parse: TOOL,
        tool = next((a for a in ctx.args if not a.startswith("-")), None)  # the first word, is
    if tool is None:  # then among the words not yet given to a parameter
        return []
    profiles = _profiles(ctx)
    tool_id = profiles.resolve(tool)
    if tool_id is None:
        return []
    profile = profiles.profiles[tool_id].profile
    return [loc.id for loc in profile.locations if loc.id.lower().startswith(incomplete.lower())]
