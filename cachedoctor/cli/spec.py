"""The command tree as data: derived from the typer CLI itself, read without typer.

typer with its click costs about 45 ms of every run before cachedoctor's own work. A Tab
(`cli.quickcomplete`) and a hot command (`cli.quickrun`) read their line with a *spec* of the
command tree instead: `derive` walks the click commands typer built, once after the code
changes, and the spec is kept in the state folder with the stamp of the code that wrote it
(every module of the package, the interpreter, typer's file), so a spec is only ever read by
the code it describes.

`read_line` follows click's parser for the parameters cachedoctor has — options anywhere among
a command's arguments, a group's options before its subcommand, `--opt=value`, the last of a
repeated option — and gives up (None) on anything else: an unknown or combined option, `--`, a
flag given a value, an unknown subcommand. Its callers then leave the line to typer.
"""

from __future__ import annotations

import marshal
import os
from pathlib import Path
from typing import Any

# One command of the spec: (options, arguments, subcommands, completers, params)
#   options: option string -> (parameter name, takes a value, is one of the parameter's `opts`)
#   arguments: (parameter name, nargs) in order; subcommands: names, or None for a command
#   completers: parameter name -> "tools" | "locations"
#   params: parameter name -> (kind, multiple, default, required, bounds), where kind says how
#     click converts a value: "str", "int" (within bounds, (min, max), either None for none),
#     "path" (typer's Path), "flag", or "" (anything else)
Options = dict[str, tuple[str, bool, bool]]
Params = dict[str, tuple[str, bool, Any, bool, tuple[int | None, int | None]]]
Entry = tuple[Options, list[tuple[str, int]], list[str] | None, dict[str, str], Params]
Spec = dict[str, Entry]
FORMAT = 2


def stamp() -> tuple[Any, ...] | None:
    """The code a spec is derived from: every module of the package (as for the profile index),
    the interpreter, and the typer this process imports (found on the import path, not
    imported: `PYTHONPATH` may shadow the installed one) with its file's size and time (an
    upgrade replaces it), whose parser the spec mirrors. Taken before typer builds the CLI, so
    a change that lands meanwhile makes the spec stale, never a stale spec current. None when
    typer's file cannot be told (a zip, a custom importer): then no spec is kept or read."""
    import sys

    from cachedoctor.profiles.index import code_stamp, file_key

    # the import system's own path finder, as it sits on sys.meta_path (importlib.machinery's
    # import would cost a Tab a millisecond)
    finder: Any = next((f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"),
                       None)
    if finder is None:
        from importlib.machinery import PathFinder

        finder = PathFinder
    found = finder.find_spec("typer")
    if found is None or not found.origin:
        return None
    try:
        key = file_key(os.stat(found.origin))
    except (OSError, ValueError):
        return None
    return (FORMAT, code_stamp(), sys.prefix, found.origin, key)


def can_write(path: Path) -> bool:
    """Whether `path` can be written by this run: its folder (or the nearest that exists)
    takes it, and the run acts for the owner of this home (root in another user's home must
    not leave root's files there; `invoker`). Else every run would derive a spec it cannot
    keep."""
    from cachedoctor import invoker
    from cachedoctor.errors import UserInputError

    try:
        invoker.check_this_run()
        folder = path.parent
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        return os.access(folder, os.W_OK)
    except (UserInputError, OSError):  # refused, or a folder above it cannot be looked into
        return False


def write(path: Path, payload: Any, code: tuple[Any, ...]) -> None:
    """Keep `payload` at `path` (a file of this install's own, `state.install_file`) for the
    code `code`; other installs' stale copies are pruned."""
    from cachedoctor.fsutil import atomic_write_bytes
    from cachedoctor.state import prune_other_installs

    atomic_write_bytes(path, marshal.dumps((code, payload)), mode=0o600)
    prune_other_installs(path)


_LIMIT = 4 << 20  # a spec is a few kilobytes: what is bigger is not one


def read(path: Path) -> Any:
    """What `write` kept at `path`, when the code that wrote it is the code running and the
    file is this user's own (`fsutil.open_own`); None otherwise."""
    from cachedoctor.fsutil import open_own

    try:
        current = stamp()
        opened = open_own(path) if current is not None else None
        if opened is None:
            return None
        with opened as file:
            data = file.read(_LIMIT + 1)
            if len(data) > _LIMIT:
                return None
            code, payload = marshal.loads(data)
            if code != current:
                return None
            from cachedoctor.state import mark_used

            mark_used(file, path)
    except Exception:  # missing, damaged, foreign, another format: not current, never a crash
        return None
    return payload


def derive(command: Any) -> Spec:
    """The spec of an assembled click command tree (`cli.app.build_command`); a command with a
    parameter `read_line` does not handle (nargs > 1, a chained group) is left out, so typer
    reads its lines."""
    spec: Spec = {}

    def walk(cmd: Any, path: str) -> None:
        options: Options = {}
        arguments: list[tuple[str, int]] = []
        completers: dict[str, str] = {}
        params: Params = {}
        for param in cmd.params:
            custom = getattr(param, "_custom_shell_complete", None)
            kind = {"complete_tools": "tools", "complete_locations": "locations"}.get(
                getattr(custom, "__name__", ""))
            if kind:
                completers[param.name] = kind
            params[param.name] = (_kind(param), bool(param.multiple),
                                  param.default if _plain(param.default) else None,
                                  bool(param.required),
                                  (getattr(param.type, "min", None), getattr(param.type, "max", None)))
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
        spec[path] = (options, arguments, list(subs) if subs is not None else None, completers,
                      params)
        for name, sub in (subs or {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(command, "")
    return spec


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, str, int))


# click's Path with none of its checks but `readable` (typer's default for a `Path` parameter)
_PLAIN_PATH = {"exists": False, "file_okay": True, "dir_okay": True, "writable": False,
               "readable": True, "resolve_path": False, "allow_dash": False, "type": None}


def _kind(param: Any) -> str:
    """How click and typer turn this parameter's words into the value the command gets, when
    that is plain enough to do without them; "" otherwise (a callback, an environment variable,
    a count, a choice, a float, a clamped or open range, a default that is not plain)."""
    if (getattr(param, "callback", None) is not None or param.envvar
            or getattr(param, "count", False) or not _plain(param.default)
            or param.param_type_name not in ("argument", "option")):
        return ""
    name = type(param.type).__name__
    if getattr(param, "is_flag", False):
        plain_flag = name == "BoolParamType" and param.default in (False, None)
        return "flag" if plain_flag else ""
    if name == "StringParamType":
        return "str"
    if name == "IntParamType" or (name == "IntRange" and not (
            param.type.clamp or param.type.min_open or param.type.max_open)):
        return "int" if param.default is None or type(param.default) is int else ""
    if name == "TyperPath" and param.default is None and all(
            getattr(param.type, key, value) == value for key, value in _PLAIN_PATH.items()):
        return "path"
    return ""


class Line:
    """A command line as click reads it (`read_line`); a plain class, as a named tuple's class
    costs a millisecond to build at every start."""

    __slots__ = ("cut", "given", "path", "positional")

    def __init__(self, path: str, given: list[tuple[str, str, str | None, bool]],
                 positional: list[tuple[str, str]], cut: bool) -> None:
        self.path = path  # the command it names: "" for the root, "profiles list"
        # (command path, parameter, value or None for a flag, given by one of the parameter's
        # `opts` rather than a `--no-` form), in order
        self.given = given
        self.positional = positional  # (argument, word); argument "": past the arguments
        self.cut = cut  # the last word is an option still waiting for its value


def read_line(spec: Spec, args: list[str]) -> Line | None:
    """Read `args` in click's order: a group's options until its first word, which names the
    subcommand; a command's options anywhere among its arguments. None for a line this does
    not read for sure."""
    path = ""
    given: list[tuple[str, str, str | None, bool]] = []
    positional: list[tuple[str, str]] = []
    cut = False
    words = iter(args)
    for word in words:
        if path not in spec:
            return None
        options, arguments, subcommands, _completers, _params = spec[path]
        if word.startswith("-") and word != "-":
            option, equals, inline = word.partition("=") if word.startswith("--") else (
                word, "", "")
            found = options.get(option)
            if found is None or (equals and not found[1]):
                return None  # unknown here, `--`, combined short flags, a flag given a value
            name, takes_value, primary = found
            value: str | None = None
            if takes_value:
                value = inline if equals else next(words, None)
                if value is None:
                    cut = True  # waiting for its value
                    break
            given.append((path, name, value, primary))
            continue
        if subcommands is not None:
            if word not in subcommands:
                return None  # a shorthand (`quota TOOL SIZE`) or a typo: typer resolves it
            path = f"{path} {word}".strip()
            continue
        filled = {name for name, _ in positional}
        slots = [n for n, nargs in arguments if nargs == -1 or n not in filled]
        positional.append((slots[0] if slots else "", word))
    if path not in spec:
        return None
    return Line(path, given, positional, cut)
