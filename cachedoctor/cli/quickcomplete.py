"""A Tab that completes a tool id or a location id, answered without typer.

The shells ask through typer's protocol (`_CACHEDOCTOR_COMPLETE=complete_<shell>`), and typer
with its click is about 80 ms of such a run before any of cachedoctor's own work. The commonest
request needs neither: this module reads the line with a *spec* of the command tree — derived
from the typer CLI itself once after the code changes (`cli.spec`) — follows the steps of click's `_resolve_context` and `_resolve_incomplete` for
the simple parameters cachedoctor has, and prints the shell's answer as typer's completion
classes format it. Anything it cannot read for sure — an option name, an unknown or combined
option, `--`, `=`, a subcommand name, another parameter's value, a word past the arguments, a
shell typer does not know, a spec that is missing or not this code's — returns None, and typer
answers as always. tests/test_quickcomplete.py holds every answer to typer's on every command
that takes a tool or a location, in every shell.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from cachedoctor.cli import spec as specs
from cachedoctor.cli.completion import (
    COMPLETE_VAR,
    TOOL_PARAMS,
    location_candidates,
    tool_candidates,
)

Spec = specs.Spec


def spec_path() -> Path:
    from cachedoctor.state import install_file

    return install_file("completion-spec.marshal")


def write_spec(command: Any, stamp: tuple[Any, ...]) -> None:
    """Keep the spec of the whole CLI (`cli.app.build_command(None)`) with `stamp`
    (`spec.stamp`, taken before the CLI was built)."""
    specs.write(spec_path(), specs.derive(command), stamp)


def read_spec() -> Spec | None:
    found = specs.read(spec_path())
    return found if isinstance(found, dict) else None


def spec_is_current() -> bool:
    return read_spec() is not None


def _split(line: str) -> list[str]:
    """click's `split_arg_string`: shlex's words, the last one kept as typed when a quote or
    an escape is left open."""
    lex = shlex.shlex(line, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    words: list[str] = []
    try:
        words.extend(lex)
    except ValueError:
        words.append(lex.token)
    return words


def _request(shell: str, env: dict[str, str]) -> tuple[list[str], str] | None:
    """(words before the cursor, the word being completed), read as typer's class for the
    shell reads them; None for a shell typer does not know."""
    if shell == "bash":
        words = _split(env["COMP_WORDS"])
        cword = int(env["COMP_CWORD"])
        if cword < 0:
            return None  # typer's reading of a negative index is its own
        return words[1:cword], (words[cword] if cword < len(words) else "")
    if shell in ("zsh", "fish"):
        line = env.get("_TYPER_COMPLETE_ARGS", "")
        args = _split(line)[1:]
        if args and not line.endswith(" "):
            return args[:-1], args[-1]
        return args, ""
    if shell in ("powershell", "pwsh"):
        line = env.get("_TYPER_COMPLETE_ARGS", "")
        incomplete = env.get("_TYPER_COMPLETE_WORD_TO_COMPLETE", "")
        words = _split(line)
        return (words[1:-1] if incomplete else words[1:]), incomplete
    return None


def _format(shell: str, values: list[str], env: dict[str, str]) -> tuple[str | None, int]:
    """What typer's completion class for the shell prints for items without help (None:
    nothing, not even a newline) and the exit code."""
    if shell == "fish":  # the script asks twice: are there values ("is-args"), which ones
        action = env.get("_TYPER_COMPLETE_FISH_ACTION", "")
        if action == "is-args":
            return None, 0 if values else 1
        return ("\n".join(values) if action == "get-args" else ""), 0
    if shell == "zsh":
        if not values:
            return "_files", 0
        escaped = (v.replace('"', '""').replace("'", "''").replace("$", "\\$")
                   .replace("`", "\\`").replace(":", r"\\:") for v in values)
        body = "\n".join(f'"{v}"' for v in escaped)
        return f"_arguments '*: :(({body}))'", 0
    if shell in ("powershell", "pwsh"):
        return "\n".join(f"{v}::: " for v in values), 0
    return "\n".join(values), 0


def answer(env: dict[str, str] | None = None) -> tuple[str | None, int] | None:
    """What typer would print for this completion request (its trailing newline left out;
    None: nothing) and its exit code, or None when typer has to answer it."""
    env = dict(os.environ) if env is None else env
    instruction, _, shell = env.get(COMPLETE_VAR, "").partition("_")
    if instruction != "complete":
        return None
    try:
        request = _request(shell, env)
    except (KeyError, ValueError):
        return None
    if request is None:
        return None
    spec = read_spec()
    if spec is None:
        return None
    values = _complete(spec, *request)
    return None if values is None else _format(shell, values, env)


def _complete(spec: Spec, args: list[str], incomplete: str) -> list[str] | None:
    if incomplete == "=":
        incomplete = ""
    if "=" in incomplete or "--" in args or incomplete.startswith("-"):
        return None
    read = specs.read_line(spec, args)
    if read is None:
        return None
    path, given, positional, cut = read.path, read.given, read.positional, read.cut
    options, arguments, subcommands, completers, _params = spec[path]
    # click: the option whose name is the last word waits for a value...
    waiting = options.get(args[-1]) if args and args[-1].startswith("-") else None
    if waiting is not None and waiting[1] and waiting[2]:
        if completers.get(waiting[0]) != "locations":
            return None
        if cut:  # its value missing stopped click's parse before the arguments got theirs:
            # `complete_locations` takes TOOL as the first word not starting with "-"
            tool = next((v for _, v in positional if not v.startswith("-")), None)
        else:  # it was another option's value
            tool = next((v for name, v in positional if name == "tool"), None)
        return location_candidates(_names(given), tool, incomplete)
    if subcommands is not None:
        return None  # a subcommand's name: typer lists them with their help
    filled = [name for name, _ in positional]
    if "" in filled:
        return None  # words past the arguments
    # ...else the first argument that still takes a value
    for name, nargs in arguments:
        if nargs == -1 or name not in filled:
            if completers.get(name) != "tools" or name not in TOOL_PARAMS:
                return None
            return tool_candidates(_names(given), [v for n, v in positional if n == name],
                                   incomplete)
    return None


def _names(given: list[tuple[str, str, str | None, bool]]) -> Any:
    from cachedoctor.profiles.loader import load_names

    return load_names([v for path, name, v, _ in given
                       if path == "" and name == "profiles_dir" and v is not None])
