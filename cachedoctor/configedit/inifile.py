"""A line-based, format-preserving editor for INI files (pip.conf) and `KEY=VALUE` files.

configparser drops comments and reflows the file, so edits here touch only the key's own line
(and its continuation lines); comments, blank lines, order and spacing elsewhere are kept.

`keyvalue` is the plain `KEY=VALUE` file the Go command (`go env -w`, cmd/go/internal/cfg
`readEnvFile`) and Homebrew (`brew.env`, bin/brew `export_homebrew_env_file`) read: the value is
everything after the first `=`, taken literally (no quotes, no comments, no expansion). `.npmrc`
has rules of its own (cachedoctor.configedit.npmrc).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from cachedoctor.configedit.common import ConfigSyntaxError, newline_of
from cachedoctor.configedit.formats import Format
from cachedoctor.lazyre import lazy_pattern

_SECTION = lazy_pattern(r"^\s*\[(?P<name>[^\]]+)\]\s*(?:[#;].*)?$")


class Entry(msgspec.Struct):
    section: str | None
    key: str
    line: int  # index into the list of lines
    count: int  # key line plus continuation lines
    prefix: str  # everything up to the value, separator and its spaces included
    value: str


class Parsed(msgspec.Struct):
    lines: list[str]
    entries: list[Entry]
    sections: dict[str, int]  # section name -> index of its header line


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def parse(text: str, *, plain: bool) -> Parsed:
    lines = text.splitlines(keepends=True)
    entries: list[Entry] = []
    sections: dict[str, int] = {}
    section: str | None = None
    seps = "=" if plain else "=:"
    for index, raw in enumerate(lines):
        line = _body(raw)
        stripped = line.strip()
        if index == 0:
            stripped = stripped.lstrip("\ufeff")
        if not stripped or stripped[0] in "#;":
            continue
        if not plain and line[:1] in " \t" and entries and entries[-1].line + entries[-1].count == index:
            entries[-1].count += 1  # continuation of a multi-line value
            entries[-1].value += "\n" + stripped
            continue
        match = _SECTION().match(line)
        if match and not plain:
            section = match.group("name").strip()
            sections.setdefault(section, index)
            continue
        cut = min((p for p in (line.find(s) for s in seps) if p > 0), default=-1)
        if cut <= 0 or not line[:cut].strip():
            column = len(line) - len(line.lstrip()) + 1
            what = "a `KEY=VALUE` line or a comment" if plain else "a `[section]`, `key = value` or comment"
            raise ConfigSyntaxError(f"expected {what}, found {stripped[:30]!r}", index + 1, column)
        key = line[:cut].strip().lstrip("\ufeff")
        after = line[cut + 1:]
        value = after.strip()
        prefix = line[: cut + 1] + after[: len(after) - len(after.lstrip())]
        entries.append(Entry(section, key, index, 1, prefix, value))
    return Parsed(lines, entries, sections)


Spelling = Callable[[str], str]
"""What a dialect makes of a key's name before comparing: keys with the same result are one."""


def _pip_spelling(key: str) -> str:
    """pip's own rule (`pip._internal.configuration._normalize_name`): lower case, `_` is `-`,
    a leading `--` dropped — `cache_dir`, `Cache-Dir` and `--cache-dir` are all `cache-dir`."""
    key = key.lower().replace("_", "-")
    return key[2:] if key.startswith("--") else key


def check_unique(parsed: Parsed, spelling: Spelling) -> None:
    """configparser's strict mode, which pip uses: a section or an option (as spelled by the
    dialect) given twice makes the whole file unreadable to the tool."""
    seen_sections: set[str] = set()
    for index, raw in enumerate(parsed.lines):
        match = _SECTION().match(_body(raw))
        if match is None:
            continue
        name = match.group("name").strip()
        if name in seen_sections:
            raise ConfigSyntaxError(f"section {name!r} already exists", index + 1, 1)
        seen_sections.add(name)
    seen: set[tuple[str | None, str]] = set()
    for entry in parsed.entries:
        key = (entry.section, spelling(entry.key))
        if key in seen:
            raise ConfigSyntaxError(f"option {key[1]!r} in section {entry.section!r} already "
                                    "exists", entry.line + 1, 1)
        seen.add(key)


def _find(parsed: Parsed, section: str | None, key: str, spelling: Spelling) -> Entry | None:
    found = None
    wanted = spelling(key)
    for entry in parsed.entries:
        if entry.section == section and spelling(entry.key) == wanted:
            found = entry  # the last one wins, as in npm and pip
    return found


def _render(value: Any, *, plain: bool, newline: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        raise ValueError("a table of values cannot be stored in an INI key")
    if isinstance(value, list):
        if plain:
            raise ValueError("lists are not supported in a KEY=VALUE file")
        return (newline + "    ").join(str(v) for v in value)
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ValueError("a value with a line break cannot be stored in an INI key")
    if plain and text != text.strip(" \t"):
        raise ValueError("brew drops spaces at either end of a KEY=VALUE line; this value cannot be stored")
    return text


def get_value(text: str, section: str | None, key: str, *, plain: bool,
              spelling: Spelling) -> str:
    entry = _find(parse(text, plain=plain), section, key, spelling)
    if entry is None:
        raise KeyError(key)
    return entry.value


def set_value(text: str, section: str | None, key: str, value: Any, *, plain: bool,
              spelling: Spelling) -> str:
    newline = newline_of(text)
    parsed = parse(text, plain=plain)
    rendered = _render(value, plain=plain, newline=newline)
    lines = parsed.lines
    entry = _find(parsed, section, key, spelling)
    if entry is not None:
        if entry.value == rendered.replace(newline + "    ", "\n"):
            return text
        last = lines[entry.line + entry.count - 1]
        eol = last[len(_body(last)):] or (newline if entry.line + entry.count < len(lines) else "")
        lines[entry.line:entry.line + entry.count] = [entry.prefix + rendered + eol]
        return "".join(lines)
    same_section = [e for e in parsed.entries if e.section == section]
    style = next(iter(same_section or parsed.entries), None)
    sep = ("=" if plain else " = ") if style is None else _separator(style)
    new_line = f"{key}{sep}{rendered}{newline}"
    if same_section:
        at = same_section[-1].line + same_section[-1].count
    elif section is None:
        at = next(iter(sorted(parsed.sections.values())), len(lines))
    elif section in parsed.sections:
        at = parsed.sections[section] + 1
    else:
        at = len(lines)
        new_line = f"[{section}]{newline}{new_line}"
        if lines and "".join(lines).strip():
            new_line = newline + new_line if _body(lines[-1]).strip() else new_line
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += newline
    lines.insert(at, new_line)
    return "".join(lines)


def _separator(entry: Entry) -> str:
    match = re.search(r"\s*[=:]\s*$", entry.prefix)
    return match.group() if match else " = "


def remove_value(text: str, section: str | None, key: str, *, plain: bool,
                 spelling: Spelling) -> str:
    parsed = parse(text, plain=plain)
    entry = _find(parsed, section, key, spelling)
    if entry is None:
        return text
    del parsed.lines[entry.line:entry.line + entry.count]
    return "".join(parsed.lines)


def _format(name: str, *, plain: bool, spelling: Spelling, strict: bool = False) -> Format:
    def parsed_ok(text: str) -> str:
        if strict:
            check_unique(parse(text, plain=plain), spelling)
        return text

    return Format(
        name,
        get=lambda text, path, section: get_value(parsed_ok(text), section, path[0],
                                                  plain=plain, spelling=spelling),
        set=lambda text, path, value, section: set_value(parsed_ok(text), section, path[0], value,
                                                         plain=plain, spelling=spelling),
        remove=lambda text, path, section: remove_value(parsed_ok(text), section, path[0],
                                                        plain=plain, spelling=spelling),
        flat=True,
        sections=not plain,
        reads_back=lambda value: _render(value, plain=plain, newline="\n").replace("\n    ", "\n"),
    )


FORMATS = {
    "ini": _format("ini", plain=False, spelling=str.lower),  # configparser lower-cases names
    # pip reads its files with configparser in strict mode: a repeated option is an error
    "pipconf": _format("pipconf", plain=False, spelling=_pip_spelling, strict=True),
    "keyvalue": _format("keyvalue", plain=True, spelling=lambda key: key),
}
