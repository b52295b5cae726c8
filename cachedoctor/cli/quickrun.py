"""The hot commands run without typer: `scan`, `ls`, `doctor` and `profiles list`, the ones a
person types most and a UI calls on every refresh.

typer and its click are about 45 ms of a run before any of cachedoctor's own work. Here the line
is read with the command's spec (`cli.spec`, derived from typer's own parser by the first run
of the command after the code changes, `remember`), its words are turned into the values typer
would pass — a flag's True or False, the last of a repeated option, a list for a repeatable
one, a number within its range, a `Path` checked as click checks it — and the command's body
(`cli/bodies`) is called with them, between what the global options do
(`common.start_command`) and the failure guard typer's path uses too (`guard.guarded`).
Whatever it does not read for sure — `--help`, an unknown option, a usage error to report, a
parameter whose value click would compute otherwise, a spec that is missing or not this
code's — returns None, and typer runs the line as always.
tests/test_quickrun.py holds the values passed, and what each run prints, to typer's.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cachedoctor.cli import spec as specs
from cachedoctor.cli.commands import command_word

# command path -> "module:function" of its body, which typer's command calls with the same
# values (cli/scan.py, cli/doctor.py, cli/profiles.py)
HOT: dict[str, str] = {
    "scan": "cachedoctor.cli.bodies.scan:scan",
    "ls": "cachedoctor.cli.bodies.ls:ls",
    "doctor": "cachedoctor.cli.bodies.doctor:doctor",
    "profiles list": "cachedoctor.cli.bodies.profiles_list:list_profiles",
}
HOT_WORDS = frozenset(path.split()[0] for path in HOT)


def spec_path() -> Path:
    from cachedoctor.state import install_file

    return install_file("run-spec.marshal")


def attempt(args: list[str]) -> int | None:
    """Run `args` without typer and return the exit code, or None for typer to run them."""
    word = command_word(args)
    if word not in HOT_WORDS:
        return None
    spec = _spec_of(word)
    if spec is None:
        return None
    try:
        call = parse(spec, args)
    except Exception:  # whatever went wrong reading the line, typer reads it as always
        return None
    if call is None:
        return None
    path, profiles_dirs, values = call
    module, _, name = HOT[path].partition(":")
    body: Callable[..., int] = getattr(importlib.import_module(module), name)
    from cachedoctor.cli import common, guard, output

    def run() -> int:
        common.start_command(word, profiles_dirs)
        return body(**values)

    # an envelope whenever `--json` is a word of the line, as `app.command_path` decides
    output.begin(path.replace(" ", "."), json_out=bool(values.get("json_out")) or "--json" in args)
    code = guard.guarded(run)
    return output.finish(code)


def _spec_of(word: str) -> specs.Spec | None:
    kept = specs.read(spec_path())
    spec = kept.get(word) if isinstance(kept, dict) else None
    return spec if isinstance(spec, dict) and "" in spec else None


def parse(spec: specs.Spec, args: list[str]) -> tuple[str, list[str], dict[str, Any]] | None:
    """(the command path, the `--profiles-dir` folders, the values its body takes), as typer
    would pass them; None for a line typer has to run (or to refuse)."""
    line = specs.read_line(spec, args)
    if line is None or line.cut or line.path not in HOT:
        return None
    root = [(name, value) for path, name, value, _ in line.given if path == ""]
    if any(name != "profiles_dir" or value is None for name, value in root):
        return None  # --version, --install-completion: their callbacks act
    if spec[""][4].get("profiles_dir", ("",))[0] != "str":
        return None
    _options, arguments, _subs, _completers, params = spec[line.path]
    if any(nargs == -1 for _, nargs in arguments[:-1]) or any(
            name == "" for name, _ in line.positional):
        return None  # click shares words among such arguments; extra words are an error
    nargs = dict(arguments)
    values: dict[str, Any] = {}
    for name, (kind, multiple, default, required, bounds) in params.items():
        words = [(value, primary) for path, given, value, primary in line.given
                 if path == line.path and given == name]
        words += [(word, True) for given, word in line.positional if given == name]
        if not kind:
            return None  # click computes this value its own way (a choice, a callback, ...)
        if not words:
            if required:
                return None  # typer's usage error
            values[name] = default
        elif kind == "flag":
            values[name] = words[-1][1]
        else:
            converted = [_convert(kind, word, bounds) for word, _ in words if word is not None]
            if None in converted or len(converted) != len(words):
                return None
            values[name] = converted if multiple or nargs.get(name) == -1 else converted[-1]
    return line.path, [value for _, value in root if value is not None], values


def _convert(kind: str, word: str, bounds: tuple[int | None, int | None] = (None, None)
             ) -> str | int | Path | None:
    """`word` as click's type and typer's convertor make it; None where click would refuse it
    (not a number, out of its range; a `Path` that exists but cannot be read: click's
    `readable` check)."""
    if kind == "path":
        if os.path.exists(word) and not os.access(word, os.R_OK):
            return None
        return Path(word)
    if kind == "int":
        try:
            number = int(word)  # click's IntParamType converts with int() itself
        except ValueError:
            return None
        low, high = bounds
        if (low is not None and number < low) or (high is not None and number > high):
            return None
        return number
    return word


def spec_to_keep(args: list[str]) -> tuple[Any, ...] | None:
    """The stamp to keep a spec for the hot command `args` name with (`remember`), taken before
    typer builds the command; None when its spec is current already or cannot be kept."""
    word = command_word(args)
    if word not in HOT_WORDS or _spec_of(word) is not None or not specs.can_write(spec_path()):
        return None
    return specs.stamp()


def remember(command: Any, args: list[str], code: tuple[Any, ...]) -> None:
    """Keep the spec of the command tree typer built for `args` (the root and the command
    `args` name), next to those kept for the other hot commands."""
    word = command_word(args)
    if word is None:
        return
    kept = specs.read(spec_path())
    kept = dict(kept) if isinstance(kept, dict) else {}
    kept[word] = specs.derive(command)
    specs.write(spec_path(), kept, code)
