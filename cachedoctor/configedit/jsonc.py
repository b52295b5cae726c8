"""A span-based, format-preserving editor for JSON and JSON with comments (VS Code settings.json).

The text is tokenized (strings with escapes, `//` and `/* */` comments, trailing commas) and
parsed into a tree that remembers the character span of every key and value. An edit replaces
exactly one value span, inserts one member, or removes one member; every other byte of the file
stays as it was. The caller re-parses the result to validate it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from cachedoctor.configedit.common import ConfigSyntaxError, position
from cachedoctor.configedit.formats import Format

KeyPath = list[str]
_LITERALS = {"true": True, "false": False, "null": None}

# Reading is done by the C scanner of the standard json module wherever it can: every value is
# first decoded with json's raw_decode. Only a value holding a comment or a trailing comma (JSON
# with comments), which the scanner refuses, is split into its members or items here, and each
# of those is again tried with raw_decode first. A big machine-written settings.json is thus
# decoded at C speed; Python walks only where the comments are, and an object is split into
# members (key spans, value spans, commas) only when an edit looks inside it.
_BLANK = re.compile(r"[ \t\n\r\ufeff]*")
_BLANK_OR_COMMENT = re.compile(r"(?:[ \t\n\r\ufeff]+|//[^\n]*|/\*[\s\S]*?\*/)*")
_DECODER = json.JSONDecoder()


class Node:
    """A value of the document: its span, and its plain Python value."""

    __slots__ = ("_value", "end", "start")

    def __init__(self, start: int, end: int, value: Any) -> None:
        self.start, self.end, self._value = start, end, value

    @property
    def value(self) -> Any:
        return self._value


class Member:
    __slots__ = ("comma", "key", "key_start", "value")

    def __init__(self, key: str, key_start: int, value: Node, comma: int | None = None) -> None:
        self.key, self.key_start, self.value, self.comma = key, key_start, value, comma


class ObjectNode(Node):
    """An object; its members are split out of its span the first time they are asked for."""

    __slots__ = ("_members", "_reader")

    def __init__(self, start: int, end: int, value: Any, reader: _Reader,
                 members: list[Member] | None = None) -> None:
        super().__init__(start, end, value)
        self._reader = reader
        self._members = members

    @property
    def members(self) -> list[Member]:
        if self._members is None:
            self._members = self._reader.members(self.start)[0]
        return self._members

    def member(self, key: str) -> Member | None:
        return next((m for m in reversed(self.members) if m.key == key), None)


def _error(text: str, index: int, message: str) -> ConfigSyntaxError:
    line, col = position(text, index)
    return ConfigSyntaxError(message, line, col)


class _Reader:
    """`jsonc`: trailing commas allowed, and comments unless `comments` is false (Chromium's
    policy files: trailing commas only)."""

    def __init__(self, text: str, *, jsonc: bool, comments: bool = True) -> None:
        self.text = text
        self.jsonc = jsonc
        self.comments = jsonc and comments
        self.blank = _BLANK_OR_COMMENT if self.comments else _BLANK

    def skip(self, i: int) -> int:
        found = self.blank.match(self.text, i)
        end = found.end() if found else i
        if self.comments and self.text.startswith("/*", end):
            raise _error(self.text, end, "unterminated /* comment")
        return end

    def value(self, i: int) -> Node:
        """The value at `i`: decoded by the C scanner, or split where it holds comments."""
        text = self.text
        try:
            value, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if self.jsonc and text.startswith("{", i):
                members, end = self.members(i)
                node = ObjectNode(i, end, None, self, members)
                node._value = {m.key: m.value.value for m in members}  # a repeated key: the last
                return node
            if self.jsonc and text.startswith("[", i):
                items, end = self.items(i)
                return Node(i, end, [item.value for item in items])
            raise self.decode_error(exc) from None
        except RecursionError:
            raise _error(text, i, "nested too deeply to be read safely") from None
        if text.startswith("{", i):
            return ObjectNode(i, end, value, self)
        return Node(i, end, value)

    def members(self, start: int) -> tuple[list[Member], int]:
        """The members of the object whose `{` is at `start`, and the end of the object."""
        text = self.text
        members: list[Member] = []
        i = self.skip(start + 1)
        if text.startswith("}", i):
            return members, i + 1
        while True:
            if not text.startswith('"', i):
                raise _error(text, i, "expected a quoted key" if i < len(text) else
                             "unexpected end of file: expected a quoted key")
            try:
                key, key_end = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            except json.JSONDecodeError as exc:
                raise self.decode_error(exc) from None
            j = self.skip(key_end)
            if not text.startswith(":", j):
                raise _error(text, j, "expected ':'")
            value = self.value(self.skip(j + 1))
            member = Member(key, i, value)
            members.append(member)
            k = self.skip(value.end)
            if text.startswith("}", k):
                return members, k + 1
            if not text.startswith(",", k):
                raise _error(text, k, "expected ',' or '}'" if k < len(text) else
                             "unexpected end of file: expected ',' or '}'")
            member.comma = k
            i = self.skip(k + 1)
            if text.startswith("}", i):
                if not self.jsonc:
                    raise _error(text, k, "trailing comma is not allowed in strict JSON")
                return members, i + 1

    def items(self, start: int) -> tuple[list[Node], int]:
        text = self.text
        items: list[Node] = []
        i = self.skip(start + 1)
        if text.startswith("]", i):
            return items, i + 1
        while True:
            item = self.value(i)
            items.append(item)
            k = self.skip(item.end)
            if text.startswith("]", k):
                return items, k + 1
            if not text.startswith(",", k):
                raise _error(text, k, "expected ',' or ']'" if k < len(text) else
                             "unexpected end of file: expected ',' or ']'")
            i = self.skip(k + 1)
            if text.startswith("]", i):
                return items, i + 1

    def decode_error(self, exc: json.JSONDecodeError) -> ConfigSyntaxError:
        """json's message, placed where a person looks: an unterminated string at its opening
        quote, a comment or trailing comma in strict JSON named as such."""
        text, pos, msg = self.text, exc.pos, exc.msg
        if msg.startswith(("Invalid control character", "Unterminated string")):
            line_start = text.rfind("\n", 0, pos) + 1
            quote = text.rfind('"', line_start, pos)
            return _error(text, quote if quote >= 0 else pos, "unterminated string")
        if text.startswith(("//", "/*"), pos):
            if self.comments and text.startswith("/*", pos):
                return _error(text, pos, "unterminated /* comment")
            return _error(text, pos, "comments are not allowed here")
        before = text[:pos].rstrip()
        if before.endswith(",") and text[pos:pos + 1] in ("}", "]"):
            return _error(text, len(before) - 1, "trailing comma is not allowed in strict JSON")
        return _error(text, pos, msg)


def parse(text: str, *, jsonc: bool, comments: bool = True) -> Node | None:
    """The tree of `text`; None for a file holding only whitespace and comments. The whole
    document is decoded, so a malformed value anywhere is an error with its line and column."""
    reader = _Reader(text, jsonc=jsonc, comments=comments)
    start = reader.skip(0)
    if start >= len(text):
        return None
    node = reader.value(start)
    rest = reader.skip(node.end)
    if rest < len(text):
        raise _error(text, rest, "unexpected text after the top-level value")
    return node


def loads(text: str, *, jsonc: bool, comments: bool = True) -> Any:
    node = parse(text, jsonc=jsonc, comments=comments)
    return None if node is None else node.value


# --- editing ---------------------------------------------------------------------------------


class Style(msgspec.Struct, frozen=True):
    newline: str
    unit: str  # one indentation level


STYLE_SAMPLE = 200_000  # characters read to learn the file's indentation


def detect_style(text: str) -> Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    unit = ""
    widths = []
    for line in text[:STYLE_SAMPLE].splitlines():
        stripped = line.lstrip(" \t")
        if not stripped or stripped == line:
            continue
        lead = line[: len(line) - len(stripped)]
        if lead.startswith("\t"):
            unit = "\t"
            break
        widths.append(len(lead))
    if not unit:
        unit = " " * min(widths) if widths else "\t"
    return Style(newline, unit)


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _indent_of_line(text: str, index: int) -> str:
    start = _line_start(text, index)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _starts_line(text: str, index: int) -> bool:
    return text[_line_start(text, index):index].strip(" \t") == ""


def _end_of_line_after(text: str, index: int) -> int | None:
    """If only blanks and comments follow `index` on its line, the index of the line break;
    otherwise None (more JSON follows on the same line)."""
    i = index
    while i < len(text):
        ch = text[i]
        if ch in " \t":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            return end - 1 if end > 0 and text[end - 1] == "\r" else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0 or "\n" in text[i:end]:
                return None
            i = end + 2
        elif ch in "\r\n":
            return i
        else:
            return None
    return len(text)


def render_value(value: Any, indent: str, style: Style) -> str:
    """JSON text for `value`; objects span lines at `indent` + one unit, short lists stay inline."""
    if isinstance(value, dict) and value:
        inner = indent + style.unit
        parts = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {render_value(v, inner, style)}"
                 for k, v in value.items()]
        return "{" + style.newline + ("," + style.newline).join(parts) + style.newline + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        inner = indent + style.unit
        parts = [inner + render_value(v, inner, style) for v in value]
        return "[" + style.newline + ("," + style.newline).join(parts) + style.newline + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _nest(path: KeyPath, value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def set_value(text: str, path: KeyPath, value: Any, *, jsonc: bool) -> str:
    """`text` with the member at `path` set to `value` (created, with parent objects, if missing)."""
    style = detect_style(text)
    root = parse(text, jsonc=jsonc)
    if root is None:
        body = render_value(_nest(path, value), "", style)
        prefix = text if text.strip() else ""
        if prefix and not prefix.endswith(("\n", "\r")):
            prefix += style.newline
        return prefix + body + style.newline
    node: Node = root
    for depth, key in enumerate(path):
        if not isinstance(node, ObjectNode):
            where = ".".join(path[:depth]) or "the top level"
            raise ValueError(f"{where} is not an object, so {key!r} cannot be set inside it")
        member = next((m for m in reversed(node.members) if m.key == key), None)
        if member is None:
            return _insert_member(text, node, key, _nest(path[depth + 1:], value), style)
        if depth == len(path) - 1:
            indent = _indent_of_line(text, member.key_start)
            rendered = render_value(value, indent, style)
            if text[member.value.start:member.value.end] == rendered:
                return text
            if member.value.value == value and type(member.value.value) is type(value):
                return text  # same value, maybe spelled differently (1e3 vs 1000): leave it
            return text[:member.value.start] + rendered + text[member.value.end:]
        node = member.value
    raise AssertionError("unreachable")


def _insert_member(text: str, obj: ObjectNode, key: str, value: Any, style: Style) -> str:
    key_text = json.dumps(key, ensure_ascii=False)
    if obj.members:
        first, last = obj.members[0], obj.members[-1]
        multiline = _starts_line(text, first.key_start)
        indent = _indent_of_line(text, first.key_start) if multiline else ""
        member_text = f"{key_text}: {render_value(value, indent, style)}"
        trailing = last.comma is not None
        anchor = last.comma + 1 if last.comma is not None else last.value.end
        eol = _end_of_line_after(text, anchor) if multiline else None
        if eol is None:  # inline object: `{"a": 1}` -> `{"a": 1, "k": v}`
            if trailing:
                return text[:anchor] + f" {member_text}," + text[anchor:]
            return text[:anchor] + f", {member_text}" + text[anchor:]
        addition = style.newline + indent + member_text + ("," if trailing else "")
        if not trailing:
            text = text[:anchor] + "," + text[anchor:]
            eol += 1
        return text[:eol] + addition + text[eol:]
    # empty object
    close = obj.end - 1
    open_indent = _indent_of_line(text, obj.start)
    indent = open_indent + style.unit
    member_text = f"{key_text}: {render_value(value, indent, style)}"
    if "\n" not in text[obj.start:obj.end]:
        return (text[:obj.start + 1] + style.newline + indent + member_text + style.newline
                + open_indent + text[close:])
    if _starts_line(text, close):
        at = _line_start(text, close)
        return text[:at] + indent + member_text + style.newline + text[at:]
    return text[:close] + style.newline + indent + member_text + style.newline + open_indent + text[close:]


def remove_value(text: str, path: KeyPath, *, jsonc: bool) -> str:
    """`text` without the member at `path`; unchanged when it is absent."""
    root = parse(text, jsonc=jsonc)
    node: Node | None = root
    for key in path[:-1]:
        if not isinstance(node, ObjectNode):
            return text
        member = next((m for m in reversed(node.members) if m.key == key), None)
        if member is None:
            return text
        node = member.value
    if not isinstance(node, ObjectNode):
        return text
    index = next((i for i in range(len(node.members) - 1, -1, -1) if node.members[i].key == path[-1]), None)
    if index is None:
        return text
    member = node.members[index]
    end = member.comma + 1 if member.comma is not None else member.value.end
    start = member.key_start
    prev_comma: int | None = None
    if member.comma is None and index > 0:
        prev_comma = node.members[index - 1].comma  # the member before becomes the last
    eol = _end_of_line_after(text, end)
    if _starts_line(text, start) and eol is not None:
        start = _line_start(text, start)
        end = eol
        if text.startswith("\r\n", end):
            end += 2
        elif text.startswith("\n", end):
            end += 1
    elif member.comma is not None:
        while end < len(text) and text[end] in " \t":
            end += 1
    elif prev_comma is not None:  # inline last member: drop `, "k": v`
        start, prev_comma = prev_comma, None
    text = text[:start] + text[end:]
    if prev_comma is not None and prev_comma < start:
        text = text[:prev_comma] + text[prev_comma + 1:]
    return text


def get_value(text: str, path: KeyPath, *, jsonc: bool) -> Any:
    """The value at `path`, decoding only that part of the document."""
    node = parse(text, jsonc=jsonc)
    for key in path:
        member = node.member(key) if isinstance(node, ObjectNode) else None
        if member is None:
            raise KeyError(".".join(path))
        node = member.value
    return None if node is None else node.value


def get_values(text: str, paths: list[KeyPath], *, jsonc: bool) -> list[Any]:
    """The values at `paths` (KeyError instances for the absent ones) from one parse."""
    root = parse(text, jsonc=jsonc)
    out: list[Any] = []
    for path in paths:
        node: Node | None = root
        for key in path:
            member = node.member(key) if isinstance(node, ObjectNode) else None
            node = member.value if member is not None else None
            if node is None:
                break
        out.append(KeyError(".".join(path)) if node is None else node.value)
    return out


def _format(name: str, jsonc: bool) -> Format:
    return Format(
        name,
        get=lambda text, path, _section: get_value(text, path, jsonc=jsonc),
        set=lambda text, path, value, _section: set_value(text, path, value, jsonc=jsonc),
        remove=lambda text, path, _section: remove_value(text, path, jsonc=jsonc),
        get_many=lambda text, paths, _section: get_values(text, paths, jsonc=jsonc),
    )


FORMATS = {"json": _format("json", False), "jsonc": _format("jsonc", True)}
