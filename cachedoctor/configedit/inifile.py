"""A line-based, format-preserving editor for INI files (pip.conf) and `.npmrc`.

configparser drops comments and reflows the file, so edits here touch only the key's own line
(and its continuation lines); comments, blank lines, order and spacing elsewhere are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cachedoctor.configedit.common import ConfigSyntaxError, newline_of
from cachedoctor.configedit.formats import Format

_SECTION = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*(?:[#;].*)?$")


@dataclass
class Entry:
    section: str | None
    key: str
    line: int  # index into the list of lines
    count: int  # key line plus continuation lines
    prefix: str  # everything up to the value, separator and its spaces included
    value: str


@dataclass
class Parsed:
    lines: list[str]
    entries: list[Entry]
    sections: dict[str, int]  # section name -> index of its header line


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def parse(text: str, *, npmrc: bool) -> Parsed:
    lines = text.splitlines(keepends=True)
    entries: list[Entry] = []
    sections: dict[str, int] = {}
    section: str | None = None
    seps = "=" if npmrc else "=:"
    for index, raw in enumerate(lines):
        line = _body(raw)
        stripped = line.strip()
        if index == 0:
            stripped = stripped.lstrip("\ufeff")
        if not stripped or stripped[0] in "#;":
            continue
        if not npmrc and line[:1] in " \t" and entries and entries[-1].line + entries[-1].count == index:
            entries[-1].count += 1  # continuation of a multi-line value
            entries[-1].value += "\n" + stripped
            continue
        match = _SECTION.match(line)
        if match and not npmrc:
            section = match.group("name").strip()
            sections.setdefault(section, index)
            continue
        cut = min((p for p in (line.find(s) for s in seps) if p > 0), default=-1)
        if cut <= 0 or not line[:cut].strip():
            column = len(line) - len(line.lstrip()) + 1
            what = "a `key=value` line or a comment" if npmrc else "a `[section]`, `key = value` or comment"
            raise ConfigSyntaxError(f"expected {what}, found {stripped[:30]!r}", index + 1, column)
        key = line[:cut].strip().lstrip("\ufeff")
        after = line[cut + 1:]
        value = after.strip()
        prefix = line[: cut + 1] + after[: len(after) - len(after.lstrip())]
        entries.append(Entry(section, key, index, 1, prefix, value))
    return Parsed(lines, entries, sections)


def _same_key(a: str, b: str, *, npmrc: bool) -> bool:
    return a == b if npmrc else a.lower() == b.lower()  # configparser lower-cases option names


def _find(parsed: Parsed, section: str | None, key: str, *, npmrc: bool) -> Entry | None:
    found = None
    for entry in parsed.entries:
        if entry.section == section and _same_key(entry.key, key, npmrc=npmrc):
            found = entry  # the last one wins, as in npm and pip
    return found


def render(value: Any, *, npmrc: bool, newline: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        raise ValueError("a table of values cannot be stored in an INI key")
    if isinstance(value, list):
        if npmrc:
            raise ValueError("lists are not supported for .npmrc keys")
        return (newline + "    ").join(str(v) for v in value)
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ValueError("a value with a line break cannot be stored in an INI key")
    return text


def get_value(text: str, section: str | None, key: str, *, npmrc: bool) -> str:
    entry = _find(parse(text, npmrc=npmrc), section, key, npmrc=npmrc)
    if entry is None:
        raise KeyError(key)
    return entry.value


def set_value(text: str, section: str | None, key: str, value: Any, *, npmrc: bool) -> str:
    newline = newline_of(text)
    parsed = parse(text, npmrc=npmrc)
    rendered = render(value, npmrc=npmrc, newline=newline)
    lines = parsed.lines
    entry = _find(parsed, section, key, npmrc=npmrc)
    if entry is not None:
        if entry.value == rendered.replace(newline + "    ", "\n"):
            return text
        last = lines[entry.line + entry.count - 1]
        eol = last[len(_body(last)):] or (newline if entry.line + entry.count < len(lines) else "")
        lines[entry.line:entry.line + entry.count] = [entry.prefix + rendered + eol]
        return "".join(lines)
    same_section = [e for e in parsed.entries if e.section == section]
    style = next(iter(same_section or parsed.entries), None)
    sep = ("=" if npmrc else " = ") if style is None else _separator(style)
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


def remove_value(text: str, section: str | None, key: str, *, npmrc: bool) -> str:
    parsed = parse(text, npmrc=npmrc)
    entry = _find(parsed, section, key, npmrc=npmrc)
    if entry is None:
        return text
    del parsed.lines[entry.line:entry.line + entry.count]
    return "".join(parsed.lines)


def _format(name: str, npmrc: bool) -> Format:
    return Format(
        name,
        get=lambda text, path, section: get_value(text, section, path[0], npmrc=npmrc),
        set=lambda text, path, value, section: set_value(text, section, path[0], value, npmrc=npmrc),
        remove=lambda text, path, section: remove_value(text, section, path[0], npmrc=npmrc),
        flat=True,
        sections=not npmrc,
    )


FORMATS = {"ini": _format("ini", False), "npmrc": _format("npmrc", True)}
