"""The tool's own clean command — run by the program that serves *this* cache.

The first `pip` on PATH is not necessarily the one whose cache this is: an old pip (before
23.3) purges `http/` and `wheels/` and leaves the `http-v2/` a newer pip wrote. So every copy
of the program is a candidate — each PATH entry's, and the interpreters the cache itself names
as its users (`OWNER_HINTS`: pip records each interpreter's prefix in `selfcheck/*.json`) — and,
when there is more than one, each is asked where its cache is (the location's `ask` command) and
for its version: the newest one that serves this location runs the command. What it really did
is measured afterwards (`cachedoctor.clean.execute`).
"""

from __future__ import annotations

import json
import ntpath
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import msgspec

from cachedoctor.errors import RefusedError
from cachedoctor.profiles.model import CleanSpec, Location

ASK_TIMEOUT = 20.0
COMMAND_TIMEOUT = 3600.0
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


class ToolCommand(msgspec.Struct, frozen=True):
    argv: list[str]  # argv[0] resolved to an absolute path
    why: str = ""  # which program was chosen among several, and why


def _pip_selfcheck_owners(root: str) -> list[str]:
    """The interpreters whose pip used this cache: pip's self_outdated_check writes
    `<cache>/selfcheck/<sha224(prefix)>.json` holding `{"key": sys.prefix, ...}`."""
    folder = Path(root) / "selfcheck"
    found: list[str] = []
    try:
        files = sorted(folder.iterdir())
    except OSError:
        return found
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        prefix = data.get("key") if isinstance(data, dict) else None
        if isinstance(prefix, str) and os.path.isabs(prefix):
            for sub in ("bin/pip", "bin/pip3", "Scripts/pip.exe"):
                found.append(os.path.join(prefix, sub))
    return found


# program name -> the programs a cache names as its users (beside PATH's copies)
OWNER_HINTS: dict[str, Callable[[str], list[str]]] = {"pip": _pip_selfcheck_owners}


def resolve_command(spec: CleanSpec | None, loc: Location, root: str,
                    which: Callable[[str], str | None]) -> ToolCommand | None:
    """The profile's clean command with the program that serves this cache, or None.

    The program is a bare name looked up in the absolute PATH entries only (an empty or `.`
    entry would make the current folder searched), or an absolute path; a relative path
    (`./x`, `../x`, `bin/x`) depends on where cachedoctor was started and is refused."""
    if spec is None or not spec.command:
        return None
    program = spec.command[0]
    has_folder = "/" in program or "\\" in program
    if has_folder and not _is_abs(program):
        raise RefusedError(
            f"the profile's clean command {program!r} is a relative path; refusing to run it",
            hint="a profile names a program on PATH or gives its absolute path",
        )
    command = list(spec.command)
    if which is not shutil.which:  # a test's (or caller's) own lookup decides alone
        exe = program if has_folder else which(program)
        return ToolCommand([exe, *command[1:]]) if exe and _is_abs(exe) else None
    if has_folder:
        ok = os.path.isfile(program) and os.access(program, os.X_OK)
        return ToolCommand(command) if ok else None
    found = candidates(program, root)
    if not found:
        return None
    if len(found) == 1:
        return ToolCommand([found[0], *command[1:]])
    return _choose(found, command, loc, root)


def candidates(program: str, root: str) -> list[str]:
    """Every executable copy of `program`: each absolute PATH entry's, then the cache's owners."""
    from cachedoctor.locate.ask import absolute_path_entries

    found: list[str] = []
    seen: set[str] = set()
    entries = absolute_path_entries()
    names = [os.path.join(folder, program) for folder in entries.split(os.pathsep) if folder]
    hint = OWNER_HINTS.get(program)
    names.extend(hint(root) if hint else [])
    for name in names:
        exe = shutil.which(name) if os.name == "nt" else name
        if not exe or not os.path.isfile(exe) or not os.access(exe, os.X_OK):
            continue
        real = os.path.realpath(exe)
        if real in seen:
            continue
        seen.add(real)
        found.append(exe)
    return found


def _choose(found: list[str], command: list[str], loc: Location, root: str) -> ToolCommand | None:
    ask = loc.ask.command if loc.ask is not None else None
    serving: list[tuple[tuple[int, ...], int, str, str]] = []
    others: list[str] = []
    for order, exe in enumerate(found):
        version = _version(exe)
        label = f"{exe} ({version_text(version)})"
        if ask and ask[0] == command[0]:
            answer = _run_ask([exe, *ask[1:]])
            if answer is not None and not _same_folder(answer, root):
                others.append(f"{label} serves {answer}")
                continue
        serving.append((version or (), -order, exe, label))
    if not serving:
        return None
    serving.sort(reverse=True)
    _, _, exe, label = serving[0]
    rest = [s[3] for s in serving[1:]] + others
    why = f"{label}, the newest of {len(serving)} that serve this cache"
    if rest:
        why += f" (also found: {'; '.join(rest)})"
    return ToolCommand([exe, *command[1:]], why)


def version_text(version: tuple[int, ...] | None) -> str:
    return "version unknown" if not version else "version " + ".".join(map(str, version))


def _version(exe: str) -> tuple[int, ...] | None:
    out = _run_ask([exe, "--version"])
    match = _VERSION.search(out or "")
    if match is None:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def _run_ask(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=ASK_TIMEOUT,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return lines[0] if lines else None


def _same_folder(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _is_abs(path: str) -> bool:
    return os.path.isabs(path) or (bool(ntpath.splitdrive(path)[0]) and ntpath.isabs(path))


def program_inside(exe: str, path: str, root: str) -> bool:
    """True when the program is inside the cache (as declared, or where its link points)."""
    from cachedoctor.safety import is_within

    places = {exe, os.path.realpath(exe)}
    return any(is_within(p, folder) for p in places for folder in {path, root})
