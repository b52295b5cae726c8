"""A Tab that completes a tool id or a location id, answered without typer.

The shells ask through typer's protocol (`_CACHEDOCTOR_COMPLETE=complete_<shell>`), and typer
with its click is about 80 ms of such a run before any of cachedoctor's own work. The commonest
request needs neither: this module reads the line with a *spec* of the command tree — derived
from the typer CLI itself (`write_spec`, run once after the code changes) and stamped like the
profile index — follows the steps of click's `_resolve_context` and `_resolve_incomplete` for
the simple parameters cachedoctor has, and prints the shell's answer as typer's completion
classes format it. Anything it cannot read for sure — an option name, an unknown or combined
option, `--`, `=`, a subcommand name, another parameter's value, a word past the arguments, a
shell typer does not know, a spec that is missing or not this code's — returns None, and typer
answers as always. tests/test_quickcomplete.py holds every answer to typer's on every command
that takes a tool or a location, in every shell.
"""

from __future__ import annotations

import marshal
import os
import shlex
from pathlib import Path
from typing import Any

from cachedoctor.cli.completion import (
    COMPLETE_VAR,
    TOOL_PARAMS,
    location_candidates,
    tool_candidates,
)

# one command of the spec: (options, arguments, subcommands, completers)
#   options: option string -> (parameter name, takes a value, is one of the parameter's `opts`)
#   arguments: (parameter name, nargs) in order; subcommands: names, or None for a command
#   completers: parameter name -> "tools" | "locations"
Spec = dict[str, tuple[dict[str, tuple[str, bool, bool]], list[tuple[str, int]],
                       list[str] | None, dict[str, str]]]
_FORMAT = 1


def spec_path() -> Path:
    from cachedoctor.state import state_dir

    return state_dir() / "completion-spec.marshal"


def _stamp(typer_file: str) -> tuple[Any, ...]:
    """The code the spec was derived from: every module of the package (as for the profile
    index), the interpreter and its import path, and typer's package file (an upgrade
    replaces it), whose parser the spec mirrors."""
    import sys

    from cachedoctor.profiles.index import code_stamp, file_key

    return (_FORMAT, code_stamp(), sys.prefix, tuple(sys.path), typer_file,
            file_key(os.stat(typer_file)))


def stamp_now() -> tuple[Any, ...]:
    """The stamp of the code running (typer imported): taken before the CLI is built, so a
    change that lands meanwhile makes the spec stale, never a stale spec current."""
    import typer

    return _stamp(typer.__file__ or "")


def can_write_spec() -> bool:
    """Whether the state folder takes the spec (else every Tab would build the whole CLI for
    a spec it cannot keep)."""
    folder = spec_path().parent
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return os.access(folder, os.W_OK)


def write_spec(command: Any, stamp: tuple[Any, ...]) -> None:
    """Derive the spec from the assembled click command tree (`cli.app.build_command(None)`)
    and keep it in the state folder with `stamp` (`stamp_now`); a command with a parameter
    the reader does not handle (nargs > 1, a chained group) is left out, so typer answers
    for it."""
    from cachedoctor.fsutil import atomic_write_bytes

    spec: Spec = {}

    def walk(cmd: Any, path: str) -> None:
        options: dict[str, tuple[str, bool, bool]] = {}
        arguments: list[tuple[str, int]] = []
        completers: dict[str, str] = {}
        for param in cmd.params:
            custom = getattr(param, "_custom_shell_complete", None)
            kind = {"complete_tools": "tools", "complete_locations": "locations"}.get(
                getattr(custom, "__name__", ""))
            if kind:
                completers[param.name] = kind
            if param.param_type_name == "argument":
                if param.nargs not in (1, -1):
                    return
                arguments.append((param.name, param.nargs))
                continue
            if param.nargs != 1:
                return
            takes_value = not (param.is_flag or param.count)
            for opt in param.opts:
                options[opt] = (param.name, takes_value, True)
            for opt in param.secondary_opts:
                options[opt] = (param.name, takes_value, False)
        subs = getattr(cmd, "commands", None)
        if subs is not None and getattr(cmd, "chain", False):
            return
        spec[path] = (options, arguments, list(subs) if subs is not None else None, completers)
        for name, sub in (subs or {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(command, "")
    atomic_write_bytes(spec_path(), marshal.dumps((stamp, spec)), mode=0o600)


def _read_spec() -> Spec | None:
    """The spec, when the code that wrote it is the code running (typer is not imported to
    tell: the stamp names its file)."""
    try:
        stamp, spec = marshal.loads(spec_path().read_bytes())
        current = _stamp(stamp[4])
    except Exception:  # missing, damaged, foreign, another format: not current, never a crash
        return None
    return spec if stamp == current and isinstance(spec, dict) else None


def spec_is_current() -> bool:
    return _read_spec() is not None


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
    spec = _read_spec()
    if spec is None:
        return None
    values = _complete(spec, *request)
    return None if values is None else _format(shell, values, env)


def _complete(spec: Spec, args: list[str], incomplete: str) -> list[str] | None:
    if incomplete == "=":
        incomplete = ""
    if "=" in incomplete or "--" in args or incomplete.startswith("-"):
        return None
    read = _read_line(spec, args)
    if read is None:
        return None
    path, given, positional, cut = read
    options, arguments, subcommands, completers = spec[path]
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


def _names(given: dict[str, list[str]]) -> Any:
    from cachedoctor.profiles.loader import load_names

    return load_names(given.get("profiles_dir", []))


def _read_line(spec: Spec, args: list[str]
               ) -> tuple[str, dict[str, list[str]], list[tuple[str, str]], bool] | None:
    """The command the words name, the root's option values (`--profiles-dir`), the words
    given to that command's arguments, in click's order (a group's options until its first
    word, which names the subcommand; a command's options anywhere among its arguments), and
    whether the last word is an option still waiting for its value (click's parse stops
    there)."""
    path = ""
    given: dict[str, list[str]] = {}
    positional: list[tuple[str, str]] = []
    cut = False
    words = iter(args)
    for word in words:
        options, arguments, subcommands, _completers = spec[path]
        if word.startswith("-") and word != "-":
            option, equals, inline = word.partition("=") if word.startswith("--") else (
                word, "", "")
            found = options.get(option)
            if found is None or (equals and not found[1]):
                return None  # unknown here, combined short flags, a flag given a value: typer
            name, takes_value, _primary = found
            if takes_value:
                value = inline if equals else next(words, None)
                if value is None:
                    cut = True  # waiting for its value: the option completes it
                    break
                if path == "":
                    given.setdefault(name, []).append(value)
            continue
        if subcommands is not None:
            if word not in subcommands:
                return None  # a shorthand (`quota TOOL SIZE`) or a typo: typer resolves it
            path = f"{path} {word}".strip()
            continue
        slots = [n for n, nargs in arguments
                 if nargs == -1 or n not in {p for p, _ in positional}]
        positional.append((slots[0] if slots else "", word))  # "": past the arguments
    if path not in spec:
        return None
    return path, given, positional, cut

