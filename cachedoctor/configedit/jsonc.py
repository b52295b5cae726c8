"""A span-based, format-preserving editor for JSON and JSON with comments (VS Code settings.json).

The text is tokenized (strings with escapes, `//` and `/* */` comments, trailing commas) and
parsed into a tree that remembers the character span of every key and value. An edit replaces
exactly one value span, inserts one member, or removes one member; every other byte of the file
stays as it was. The caller re-parses the result to validate it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cachedoctor.configedit.common import ConfigSyntaxError, position
from cachedoctor.configedit.formats import Format

KeyPath = list[str]

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


@dataclass
class Token:
    kind: str  # one of { } [ ] : , string number literal
    start: int
    end: int
    value: Any = None


@dataclass
class Node:
    start: int
    end: int
    value: Any = None  # plain Python value of the whole node


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None = None  # index of the comma after the value, if any


@dataclass
class ObjectNode(Node):
    members: list[Member] = field(default_factory=list)


@dataclass
class ArrayNode(Node):
    items: list[Node] = field(default_factory=list)
    trailing_comma: bool = False


def tokenize(text: str, *, comments: bool) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in " \t\r\n\ufeff":
            i += 1
        elif ch == "/" and comments and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif ch == "/" and comments and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _error(text, i, "unterminated /* comment")
            i = end + 2
        elif ch in "{}[]:,":
            tokens.append(Token(ch, i, i + 1))
            i += 1
        elif ch == '"':
            end = _string_end(text, i)
            try:
                value = json.loads(text[i:end])
            except json.JSONDecodeError as exc:
                raise _error(text, i + exc.pos, f"invalid string: {exc.msg}") from None
            tokens.append(Token("string", i, end, value))
            i = end
        else:
            match = _NUMBER.match(text, i)
            if match and match.end() > i:
                tokens.append(Token("number", i, match.end(), json.loads(match.group())))
                i = match.end()
                continue
            word = re.match(r"[A-Za-z_]+", text[i:])
            if word and word.group() in _LITERALS:
                tokens.append(Token("literal", i, i + len(word.group()), _LITERALS[word.group()]))
                i += len(word.group())
                continue
            raise _error(text, i, f"unexpected character {ch!r}")
    return tokens


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            return i + 1
        if ch == "\n":
            break
        i += 1
    raise _error(text, start, "unterminated string")


def _error(text: str, index: int, message: str) -> ConfigSyntaxError:
    line, col = position(text, index)
    return ConfigSyntaxError(message, line, col)


class _Parser:
    def __init__(self, text: str, *, comments: bool, trailing_commas: bool) -> None:
        self.text = text
        self.tokens = tokenize(text, comments=comments)
        self.pos = 0
        self.trailing_commas = trailing_commas

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, kind: str | None = None, what: str = "a value") -> Token:
        token = self.peek()
        if token is None:
            raise _error(self.text, len(self.text), f"unexpected end of file: expected {what}")
        if kind is not None and token.kind != kind:
            raise _error(self.text, token.start, f"expected {what}, found {self._show(token)}")
        self.pos += 1
        return token

    def _show(self, token: Token) -> str:
        return repr(self.text[token.start:token.end][:20])

    def document(self) -> Node:
        node = self.value()
        extra = self.peek()
        if extra is not None:
            raise _error(self.text, extra.start, f"unexpected {self._show(extra)} after the top-level value")
        return node

    def value(self) -> Node:
        token = self.take()
        if token.kind == "{":
            return self.obj(token)
        if token.kind == "[":
            return self.array(token)
        if token.kind in ("string", "number", "literal"):
            return Node(token.start, token.end, token.value)
        raise _error(self.text, token.start, f"expected a value, found {self._show(token)}")

    def _comma_or_close(self, close: str) -> tuple[int | None, bool]:
        """After an item: returns (comma index, closed?)."""
        token = self.take(what=f"',' or {close!r}")
        if token.kind == close:
            return None, True
        if token.kind != ",":
            raise _error(self.text, token.start, f"expected ',' or {close!r}, found {self._show(token)}")
        nxt = self.peek()
        if nxt is not None and nxt.kind == close:
            if not self.trailing_commas:
                raise _error(self.text, token.start, "trailing comma is not allowed in strict JSON")
            self.pos += 1
            return token.start, True
        return token.start, False

    def obj(self, open_token: Token) -> ObjectNode:
        node = ObjectNode(open_token.start, open_token.start, {})
        if (nxt := self.peek()) is not None and nxt.kind == "}":
            self.pos += 1
            node.end = nxt.end
            return node
        while True:
            key = self.take("string", "a quoted key")
            self.take(":", "':'")
            value = self.value()
            member = Member(key.value, key.start, value)
            node.members.append(member)
            node.value[key.value] = value.value
            comma, closed = self._comma_or_close("}")
            member.comma = comma
            if closed:
                node.end = self.tokens[self.pos - 1].end
                return node

    def array(self, open_token: Token) -> ArrayNode:
        node = ArrayNode(open_token.start, open_token.start, [])
        if (nxt := self.peek()) is not None and nxt.kind == "]":
            self.pos += 1
            node.end = nxt.end
            return node
        while True:
            item = self.value()
            node.items.append(item)
            node.value.append(item.value)
            comma, closed = self._comma_or_close("]")
            if closed:
                node.trailing_comma = comma is not None
                node.end = self.tokens[self.pos - 1].end
                return node


def parse(text: str, *, jsonc: bool) -> Node | None:
    """The tree of `text`; None for a file holding only whitespace and comments."""
    parser = _Parser(text, comments=jsonc, trailing_commas=jsonc)
    if not parser.tokens:
        return None
    return parser.document()


def loads(text: str, *, jsonc: bool) -> Any:
    node = parse(text, jsonc=jsonc)
    return None if node is None else node.value


# --- editing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    newline: str
    unit: str  # one indentation level


def detect_style(text: str) -> Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    unit = ""
    widths = []
    for line in text.splitlines():
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
    node = parse(text, jsonc=jsonc)
    current: Any = None if node is None else node.value
    for key in path:
        if not isinstance(current, dict) or key not in current:
            raise KeyError(".".join(path))
        current = current[key]
    return current


def _format(name: str, jsonc: bool) -> Format:
    return Format(
        name,
        get=lambda text, path, _section: get_value(text, path, jsonc=jsonc),
        set=lambda text, path, value, _section: set_value(text, path, value, jsonc=jsonc),
        remove=lambda text, path, _section: remove_value(text, path, jsonc=jsonc),
    )


FORMATS = {"json": _format("json", False), "jsonc": _format("jsonc", True)}
