"""`.npmrc` (npm, pnpm) read and written as npm does it: a format-preserving line editor.

npm parses the file with the `ini` package (npm/ini `lib/ini.js`, v6: `decode`/`unsafe`/`safe`),
then turns each value into what it uses with `@npmcli/config` (`lib/parse-field.js`,
`lib/env-replace.js`). The rules, as those sources have them:

* lines split at CR and LF; blank lines and lines starting (after spaces) with `;` or `#` are
  comments; `[name]` starts a section (a key after it is no longer a top-level key);
  otherwise the key is what comes before the first `=` (a line without `=` sets `true`, a line
  starting with `=` is ignored); the last assignment of a key wins, `key[]` makes a list;
* a value (and a key) is trimmed (JavaScript's `trim`: Unicode spaces and the BOM too); one in
  `"..."` is JSON (`\\"`, `\\u00e9`...), one in `'...'` has its quotes removed and is then read
  as JSON if it parses (`'123'` is a number); any other value ends at the first `;` or `#` that
  is not escaped by a backslash (`\\;`, `\\#` and `\\\\` stand for the character, any other
  backslash stays); `true`, `false` and `null` are not strings;
* npm then trims the string again and replaces `${NAME}` (and `${NAME?}`, empty when unset)
  with its environment — an odd number of backslashes before `$` makes it literal;
* a path-typed key (`cache`, `prefix`, ...) starting with `~/` is below the home folder;
  any other is resolved against the folder npm runs in (`cache=~` is `./~`).

The writer writes a value so that npm reads back exactly that string: plainly when it reads
back unchanged, otherwise as a JSON string; `${` is escaped so npm does not expand it.
"""

from __future__ import annotations

import ntpath
import posixpath
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from cachedoctor.configedit.formats import Format
from cachedoctor.lazyre import lazy_pattern

# JavaScript's String.prototype.trim (ECMA-262 WhiteSpace and LineTerminator).
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
            "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_LINE = lazy_pattern(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_SECTION = lazy_pattern(rf"^\[([^\]]*)\][{_JS_SPACE}]*$")
_COMMENT = lazy_pattern(rf"^[{_JS_SPACE}]*(?:[;#]|$)")
_ENV_EXPR = lazy_pattern(r"(?<!\\)(\\*)\$\{([^${}?]+)(\?)?\}")  # env-replace.js, verbatim
_ENV_LIKE = lazy_pattern(r"(\\*)(\$\{[^${}?]+\??\})")
_ABSENT: Any = object()
# @npmcli/config definitions with `type: path` (parse-field.js resolves them).
PATH_KEYS = frozenset({"cache", "cafile", "globalconfig", "init-module", "init.module",
                       "logs-dir", "node-gyp", "prefix", "provenance-file", "userconfig"})


def js_trim(text: str) -> str:
    return text.strip(_JS_SPACE)


def _json(text: str) -> tuple[bool, Any]:
    """JSON.parse: (parsed, value). Python's extras (NaN, Infinity) are not JSON to it."""
    import json  # only for a quoted value: most .npmrc files hold none

    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        return True, json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError):
        return False, None


def unsafe(raw: str) -> Any:
    """ini.js `unsafe`: a raw key or value as `ini` decodes it."""
    text = js_trim(raw)
    if len(text) >= 1 and text[0] == text[-1] and text[0] in "\"'":
        inner = text[1:-1] if text[0] == "'" else text
        ok, value = _json(inner)
        return value if ok else inner
    out: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            out.append(char if char in "\\;#" else "\\" + char)
            escaped = False
        elif char in ";#":
            break
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    if escaped:
        out.append("\\")
    return js_trim("".join(out))


def decode_value(raw: str) -> Any:
    """A value as `ini.decode` stores it: `true`/`false`/`null` become JSON values."""
    value = unsafe(raw)
    if value in _JSON_WORDS and isinstance(value, str):
        return _JSON_WORDS[value]
    return value


_JSON_WORDS: dict[str, bool | None] = {"true": True, "false": False, "null": None}


class Entry(msgspec.Struct):
    section: str | None
    key: str  # decoded; `name[]` for a list item
    line: int  # index into the lines
    prefix: str  # the line up to the value (key, `=` and the spaces after it)
    value: Any  # decoded


class Parsed(msgspec.Struct):
    lines: list[str]
    entries: list[Entry]
    first_section: int | None  # index of the first `[section]` line


def split_lines(text: str) -> list[str]:
    """Lines with their line ends, split only where `ini` splits them (CR, LF)."""
    return _LINE().findall(text)


def _body(line: str) -> str:
    return line.rstrip("\r\n")


def parse(text: str) -> Parsed:
    lines = split_lines(text)
    entries: list[Entry] = []
    section: str | None = None
    first_section: int | None = None
    for index, raw in enumerate(lines):
        line = _body(raw)
        if _COMMENT().match(line):
            continue
        header = _SECTION().match(line)
        if header:
            section = str(unsafe(header.group(1)))
            first_section = index if first_section is None else first_section
            continue
        key_raw, sep, value_raw = line.partition("=")
        if not key_raw or (sep and ("\u2028" in value_raw or "\u2029" in value_raw)):
            continue  # `^([^=]+)(=(.*))?$` does not match: JavaScript's `.` stops at U+2028
        key = unsafe(key_raw)
        if not isinstance(key, str) or key == "__proto__":
            continue
        value: Any = decode_value(value_raw) if sep else True
        after = value_raw[: len(value_raw) - len(value_raw.lstrip(_JS_SPACE))]
        entries.append(Entry(section, key, index, key_raw + "=" + after, value))
    return Parsed(lines, entries, first_section)


def _find(parsed: Parsed, section: str | None, key: str) -> Entry | None:
    found = None
    for entry in parsed.entries:
        if entry.section == section and entry.key == key:
            found = entry  # the last one wins
    return found


def _base(key: str) -> tuple[str, bool]:
    """(key, is a list item): `name[]` adds to the list `name`."""
    return (key[:-2], True) if len(key) > 2 and key.endswith("[]") else (key, False)


def get_value(text: str, section: str | None, key: str) -> Any:
    """The key's value as `ini.decode` leaves it (a string, true/false/null, a JSON value from
    a quoted string, or a list built from `key[]` lines)."""
    current: Any = _ABSENT
    for entry in parse(text).entries:
        name, is_item = _base(entry.key)
        if entry.section != section or name != key:
            continue
        if is_item and current is _ABSENT:
            current = []
        elif is_item and not isinstance(current, list):
            current = [current]
        if isinstance(current, list):
            current.append(entry.value)  # a plain line after `key[]` lines adds to the list
        else:
            current = entry.value
    if current is _ABSENT:
        raise KeyError(key)
    return current


def env_replace(text: str, env: Mapping[str, str]) -> str:
    """env-replace.js: `${NAME}` from `env` (left as it is when unset), `${NAME?}` (empty when
    unset); an odd number of backslashes before `$` keeps it literal (half of them go)."""
    def one(match: re.Match[str]) -> str:
        escapes, name, optional = match.group(1), match.group(2), match.group(3)
        if len(escapes) % 2:
            return match.group(0)[(len(escapes) + 1) // 2:]
        fallback = "" if optional else "${" + name + "}"
        found = env.get(name)
        return escapes[len(escapes) // 2:] + (fallback if found is None else found)

    return _ENV_EXPR().sub(one, text)


def _env_escape(text: str) -> str:
    """The text env_replace turns back into `text`, whatever the environment."""
    return _ENV_LIKE().sub(lambda m: "\\" * (2 * len(m.group(1)) + 1) + m.group(2), text)


def stored(value: Any) -> str:
    """What the file must hold for npm to use the string `value` (before quoting): `${` made
    literal. Raises ValueError for what npm cannot be given."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ValueError("lists and tables are not supported for .npmrc keys")
    text = str(value)
    if "\n" in text or "\r" in text:
        raise ValueError("a value with a line break cannot be stored in .npmrc")
    if js_trim(text) != text:
        raise ValueError("npm removes spaces at either end of a value; this one cannot be stored")
    if text in ("true", "false", "null"):
        raise ValueError(f"npm reads {text} as a JSON value, quoted or not, never as text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the value is not valid UTF-8 text") from None
    return _env_escape(text)


def quote(text: str) -> str:
    """`text` as it goes after `key=`: plain when `ini` reads it back unchanged, else JSON."""
    if decode_value(text) == text and isinstance(decode_value(text), str) \
            and "\u2028" not in text and "\u2029" not in text:
        return text
    import json

    quoted = json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace(
        "\u2029", "\\u2029")
    if decode_value(quoted) != text:  # pragma: no cover - JSON strings always read back
        raise ValueError("the value cannot be written so that npm reads it back")
    return quoted


def set_value(text: str, section: str | None, key: str, value: Any) -> str:
    if section is not None:
        raise ValueError(".npmrc keys are set at the top level")
    written = ("true" if value else "false") if isinstance(value, bool) else quote(stored(value))
    if not key or any(c in key for c in "=\r\n[]") or js_trim(key) != key:
        raise ValueError(f"{key!r} cannot be an .npmrc key")
    newline = "\r\n" if "\r\n" in text else "\n"
    parsed = parse(text)
    lines = parsed.lines
    if any(e.section is None and e.key == f"{key}[]" for e in parsed.entries):
        raise ValueError(f"{key} is a list in this file ({key}[]=...); a value would be added to it")
    entry = _find(parsed, None, key)
    if entry is not None:
        if entry.value == (value if isinstance(value, bool) else stored(value)):
            return text
        old = lines[entry.line]
        eol = old[len(_body(old)):] or (newline if entry.line + 1 < len(lines) else "")
        lines[entry.line] = entry.prefix + written + eol
        return "".join(lines)
    top = [e for e in parsed.entries if e.section is None]
    sep = "=" if not top else _separator(top[-1])
    at = parsed.first_section if parsed.first_section is not None else len(lines)
    if at > 0 and not lines[at - 1].endswith(("\n", "\r")):
        lines[at - 1] += newline
    lines.insert(at, f"{key}{sep}{written}{newline}")
    return "".join(lines)


def _separator(entry: Entry) -> str:
    match = re.search(r"\s*=\s*$", entry.prefix)
    return match.group() if match else "="


def remove_value(text: str, section: str | None, key: str) -> str:
    parsed = parse(text)
    entries = [e for e in parsed.entries if e.section == section and _base(e.key)[0] == key]
    if not entries:
        return text
    for entry in reversed(entries):  # every line of the key: an earlier one would win again
        del parsed.lines[entry.line]
    return "".join(parsed.lines)


def npm_field(value: Any, key: str, env: Mapping[str, str], home: str, *,
              windows: bool = False, cwd: str | None = None) -> Any:
    """parse-field.js for a string key: what npm uses for a decoded value. A relative path is
    resolved against `cwd` (npm's current folder), or left relative when it is not known."""
    if not isinstance(value, str):
        return value
    text = env_replace(js_trim(value), env)
    if key not in PATH_KEYS:
        return text
    flavour: Any = ntpath if windows else posixpath
    home_prefix = re.match(r"~[/\\]" if windows else r"~/", text)
    if home_prefix and home:
        return flavour.normpath(flavour.join(home, text[2:]))
    if flavour.isabs(text):
        return flavour.normpath(text)
    return flavour.normpath(flavour.join(cwd, text)) if cwd else text


def interpret(value: Any, path: list[str], env: Mapping[str, str], home: str,
              windows: bool) -> Any:
    return npm_field(value, path[-1], env, home, windows=windows)


FORMATS = {"npmrc": Format(
    "npmrc",
    get=lambda text, path, section: get_value(text, section, path[0]),
    set=lambda text, path, value, section: set_value(text, section, path[0], value),
    remove=lambda text, path, section: remove_value(text, section, path[0]),
    flat=True,
    reads_back=lambda value: value if isinstance(value, bool) else stored(value),
    interpret=interpret,
)}
