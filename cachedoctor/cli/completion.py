"""Shell completion of tool ids and location ids (typer completes commands and options).

The shells run `cachedoctor` with `_CACHEDOCTOR_COMPLETE` set (typer's protocol, for bash,
zsh, fish and PowerShell) at every Tab: this path reads the names part of the profile index (no
profile model, no YAML on a warm start) and nothing that draws (no rich), says nothing on stderr, and
builds only the command the line names (`cli.app.build_command`). A tool or location id is
usually answered before typer is even imported (`cli.quickcomplete`), with the candidates
of `tool_candidates` and `location_candidates` here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cachedoctor.profiles.loader import ToolNames

# typer's click (its own copy since typer 0.24, `click` before): read by duck typing, so either
Command = Any
Context = Any
Param = Any

TOOL_PARAMS = ("tool", "tools")
LOCATION_PARAMS = ("location",)
COMPLETE_VAR = "_CACHEDOCTOR_COMPLETE"  # typer's `_{PROG}_COMPLETE`


def requested() -> bool:
    """This run answers a shell's completion request (`complete_bash`, `complete_zsh`, ...)."""
    return os.environ.get(COMPLETE_VAR, "").startswith("complete_")


def words_before_cursor() -> list[str] | None:
    """The words of the line being completed before the one under the cursor, read by the
    requesting shell's own completion class (so the CLI builds only the command they name);
    None when they cannot be read."""
    try:
        from typer._click.shell_completion import get_completion_class
        from typer._completion_classes import completion_init

        completion_init()
        shell = os.environ[COMPLETE_VAR].partition("_")[2]
        comp_cls = get_completion_class(shell)
        if comp_cls is None:
            return None
        args, _incomplete = comp_cls(None, {}, "cachedoctor", COMPLETE_VAR).get_completion_args()  # type: ignore[arg-type]
        return list(args)
    except Exception:  # a malformed request: the whole CLI answers it, as typer would
        return None


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


def _tools(ctx: Context) -> dict[str, ToolNames]:
    """The names of the profiles this command line would load (`--profiles-dir` is read from
    the line: no callback runs while completing); plain data from the profile index."""
    from cachedoctor.profiles.loader import load_names

    dirs = ctx.find_root().params.get("profiles_dir") or []
    return load_names(list(dirs))


def complete_tools(ctx: Context, param: Param, incomplete: str) -> list[str]:
    given = ctx.params.get(param.name or "") or []
    return tool_candidates(_tools(ctx), [given] if isinstance(given, str) else list(given),
                           incomplete)


def tool_candidates(tools: dict[str, ToolNames], given: list[str], incomplete: str) -> list[str]:
    """Profile ids (and aliases, when one is being typed) not already on the line."""
    typed = incomplete.lower()
    ids = [i for i in sorted(tools) if i.lower().startswith(typed)]
    if not ids and typed:
        ids = sorted({a for names in tools.values() for a in names.aliases
                      if a.lower().startswith(typed)})
    return [i for i in ids if i not in given]


def complete_locations(ctx: Context, param: Param, incomplete: str) -> list[str]:
    tool = ctx.params.get("tool")
    if not isinstance(tool, str):  # an option left without its value stops the parse: TOOL,
        tool = next((a for a in ctx.args if not a.startswith("-")), None)  # the first word, is
    if tool is None:  # then among the words not yet given to a parameter
        return []
    return location_candidates(_tools(ctx), tool, incomplete)


def location_candidates(tools: dict[str, ToolNames], tool: str | None,
                        incomplete: str) -> list[str]:
    """The location ids of the tool named on the line (by id or alias)."""
    if tool is None:
        return []
    from cachedoctor.profiles.loader import name_table

    tool_id = tool if tool in tools else name_table(
        (names.id, names.aliases) for names in tools.values()).get(tool.lower())
    if tool_id is None:
        return []
    return [loc for loc in tools[tool_id].locations if loc.lower().startswith(incomplete.lower())]
