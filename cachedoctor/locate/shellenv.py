"""The variables a user's own start-up files export: what new shells, and the tools started
from them, will see — whatever this process (a cron job, the shell that ran `env set`) sees.

Pure text parsing. Only what can be known without running the shell is read: `export NAME=...`,
`NAME=...` later exported, `declare -x`/`typeset -x` (sh, bash, zsh), `set -gx`/`set -Ux` (fish),
`KEY=VALUE` (systemd environment.d, /etc/environment). `$VAR`, `${VAR}` and a leading `~` are
expanded with what is known at that point; a value computed by a command (`$(...)`, backticks)
is skipped. Lines inside `if` blocks count as if they ran (a shell would usually run them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cachedoctor.envvars.posix import BEGIN, END

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ASSIGN = re.compile(rf"^\s*(?:(export|declare\s+-x|typeset\s+-x|readonly)\s+)?({_NAME})=(.*)$")
_EXPORT_ONLY = re.compile(rf"^\s*export\s+((?:{_NAME}\s*)+)\s*(?:#.*)?$")
_FISH_SET = re.compile(rf"^\s*set\s+(?:-[a-zA-Z]*x[a-zA-Z]*\s+)+({_NAME})\s+(.*)$")
_FISH_UNIVERSAL = re.compile(rf"^SETUVAR\s+--export\s+({_NAME}):(.*)$")
_VAR = re.compile(rf"\$(?:\{{({_NAME})\}}|({_NAME}))")


@dataclass(frozen=True)
class Assignment:
    name: str
    value: str
    file: str
    line: int
    managed: bool  # inside cachedoctor's managed block

    @property
    def origin(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where}, cachedoctor's block" if self.managed else where


Lookup = Callable[[str], "str | None"]


def _expand(text: str, lookup: Lookup, home: str) -> str:
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    return _VAR.sub(lambda m: lookup(m.group(1) or m.group(2)) or "", text)


def sh_value(raw: str, lookup: Lookup, home: str) -> str | None:
    """The value of an sh assignment's right-hand side, or None when it needs the shell to run
    a command. Quotes as sh has them: '...' literal, "..." with $VAR and backslash escapes."""
    out: list[str] = []
    i = 0
    first = True
    while i < len(raw):
        char = raw[i]
        if char in " \t;&|" or (char == "#" and (i == 0 or raw[i - 1] in " \t")):
            break
        if char == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                return None
            out.append(raw[i + 1 : end])
            i = end + 1
        elif char == '"':
            j, chunk = i + 1, []
            while j < len(raw) and raw[j] != '"':
                if raw[j] == "\\" and j + 1 < len(raw) and raw[j + 1] in '"\\$`':
                    chunk.append(raw[j + 1])
                    j += 2
                    continue
                chunk.append(raw[j])
                j += 1
            if j >= len(raw):
                return None
            text = "".join(chunk)
            if "$(" in text or "`" in text:
                return None
            out.append(_expand(text, lookup, home) if "$" in text else text)
            i = j + 1
        else:
            j = i
            while j < len(raw) and raw[j] not in " \t;&|'\"":
                j += 1
            text = raw[i:j]
            if "$(" in text or "`" in text:
                return None
            out.append(_expand(text, lookup, home) if first or "$" in text else text)
            i = j
        first = False
    return "".join(out)


def _block_lines(lines: list[str]) -> set[int]:
    inside, found = False, set()
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == BEGIN:
            inside = True
        elif stripped == END:
            inside = False
        elif inside:
            found.add(number)
    return found


def parse(text: str, kind: str, file: str, known: Mapping[str, str], home: str) -> list[Assignment]:
    """The exported assignments of one start-up file, in order. `kind`: sh, fish, fish-universal
    or envd (KEY=VALUE lines). `known` holds the variables set before this file runs."""
    env = {"HOME": home, **known}
    lines = text.splitlines()
    managed = _block_lines(lines)
    pending: dict[str, tuple[str, int]] = {}
    found: list[Assignment] = []

    def add(name: str, value: str, number: int) -> None:
        env[name] = value
        found.append(Assignment(name, value, file, number, number in managed))

    for number, line in enumerate(lines, 1):
        if kind == "fish-universal":
            match = _FISH_UNIVERSAL.match(line)
            if match:
                add(match.group(1), _fish_unescape(match.group(2)), number)
            continue
        if kind == "fish":
            match = _FISH_SET.match(line)
            if match:
                value = sh_value(match.group(2).strip(), env.get, home)
                if value is not None:
                    add(match.group(1), value, number)
            continue
        match = _ASSIGN.match(line)
        if match:
            exported, name, raw = match.groups()
            value = sh_value(raw, env.get, home)
            if value is None:
                continue
            if exported or kind == "envd":
                add(name, value, number)
            else:
                pending[name] = (value, number)
                env[name] = value
            continue
        match = _EXPORT_ONLY.match(line)
        if match and kind == "sh":
            for name in match.group(1).split():
                if name in pending:
                    value, at = pending.pop(name)
                    add(name, value, at)
    return found


def _fish_unescape(text: str) -> str:
    """fish_variables escapes as `\\xHH`; list items are separated by `\\x1e`."""
    value = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)
    return value.split("\x1e")[0]


def start_up_files(home: str, config_home: str, os_name: str) -> list[tuple[str, str]]:
    """(file, kind) in the order a new session reads them; a later assignment wins."""
    files: list[tuple[str, str]] = []
    if os_name in ("linux", "wsl"):
        files += [("/etc/environment", "envd"), (f"{config_home}/environment.d/*.conf", "envd")]
    files += [(f"{home}/{name}", "sh") for name in (
        ".profile", ".bash_profile", ".bash_login", ".bashrc", ".zshenv", ".zprofile", ".zshrc")]
    files += [(f"{config_home}/fish/fish_variables", "fish-universal"),
              (f"{config_home}/fish/config.fish", "fish"),
              (f"{config_home}/fish/conf.d/*.fish", "fish")]
    return files
