"""Read-only Java `.properties` (JetBrains `idea.properties`): `key=value`, `key: value` or
`key value`, `#`/`!` comments, `\\` line continuations and `\\uXXXX` escapes, as
java.util.Properties.load reads them (the last assignment of a key wins)."""

from __future__ import annotations

import re
from typing import Any

from cachedoctor.configedit.formats import Format, KeyPath

_SEPARATOR = re.compile(r"(?<!\\)[=:\s]")


def logical_lines(text: str) -> list[str]:
    """Physical lines joined where a line ends in an odd number of backslashes."""
    out: list[str] = []
    pending = ""
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.lstrip(" \t\f") if pending else raw
        if not pending and (not line.strip() or line.lstrip()[:1] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        out.append((pending + line).lstrip(" \t\f"))
        pending = ""
    if pending:
        out.append(pending.lstrip(" \t\f"))
    return out


def _unescape(text: str) -> str:
    def sub(match: re.Match[str]) -> str:
        code = match.group(1)
        if code.startswith("u"):
            return chr(int(code[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(code, code)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", sub, text)


def parse(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in logical_lines(text):
        match = _SEPARATOR.search(line)
        if match is None:
            key, value = line, ""
        else:
            key, rest = line[: match.start()], line[match.start():]
            value = re.sub(r"^\s*[=:]?\s*", "", rest, count=1)
        values[_unescape(key)] = _unescape(value)
    return values


def get_value(text: str, path: KeyPath, section: str | None = None) -> Any:
    values = parse(text)
    key = ".".join(path)
    if key not in values:
        raise KeyError(key)
    return values[key]


FORMATS = {"properties": Format("properties", get_value, flat=True)}
