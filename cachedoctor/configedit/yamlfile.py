"""YAML editing that keeps comments, key order, anchors, quotes and indentation.

A scalar that replaces a scalar is written as a span edit on the value's own characters (found
through ruamel's line/column marks), so nothing else can move. Anything else (new keys, lists,
mappings, removals) goes through a ruamel.yaml round trip tuned to the file: detected indentation,
no line wrapping, original quotes, CRLF restored. Either way the result is re-parsed and must
equal the intended data, or the ruamel result is used instead of the span edit.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from typing import Any

from cachedoctor.configedit.common import ConfigSyntaxError
from cachedoctor.configedit.formats import Format

_PLAIN_END = re.compile(r"\s+#|\s*$")


def detect_indent(text: str) -> tuple[int, int]:
    """(mapping indent, sequence dash offset) as the file uses them; ruamel's defaults otherwise."""
    content = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    mapping: int | None = None
    offset: int | None = None
    for line, nxt in itertools.pairwise(content):
        body = line.split(" #")[0].rstrip()
        if not body.endswith(":") or body.lstrip().startswith("- "):
            continue
        depth = (len(nxt) - len(nxt.lstrip())) - (len(line) - len(line.lstrip()))
        if nxt.lstrip().startswith("- "):
            offset = depth if offset is None and depth >= 0 else offset
        elif depth > 0 and mapping is None:
            mapping = depth
    return mapping or 2, offset or 0


def _yaml(text: str = "") -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 16
    mapping, offset = detect_indent(text)
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    return yaml


def load(text: str) -> Any:
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return _yaml().load(text.lstrip("\ufeff"))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise ConfigSyntaxError(exc.problem or str(exc).splitlines()[0], line, column) from None
    except YAMLError as exc:
        raise ConfigSyntaxError(str(exc).splitlines()[0], 1, 1) from None


MAX_NODES = 1_000_000  # an alias bomb expands past this: refused, not built


def plain(data: Any, _budget: list[int] | None = None) -> Any:
    """ruamel's round-trip objects as plain Python data (dict, list, str, int, ...). Aliases
    share objects in ruamel's document; written out as plain data they are copied, so a small
    file of nested aliases (a "billion laughs") is refused once it would exceed MAX_NODES."""
    budget = _budget if _budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise ConfigSyntaxError("too many values once its aliases are expanded", 1, 1)
    if isinstance(data, dict):
        return {str(k) if not isinstance(k, (int, float, bool)) else k: plain(v, budget)
                for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [plain(v, budget) for v in data]
    if isinstance(data, bool) or data is None:
        return data
    if isinstance(data, int):
        return int(data)
    if isinstance(data, float):
        return float(data)
    return str(data)


def get_value(text: str, path: list[str]) -> Any:
    current = load(text)
    for key in path:
        if not isinstance(current, dict) or key not in current:
            raise KeyError(".".join(path))
        current = current[key]
    return plain(current)


def _expected(text: str, path: list[str], value: Any, *, remove: bool) -> Any:
    """The data the edited file must hold: the original document with the change, as ruamel
    itself would write and read it back (aliases and `<<` merges resolved the same way)."""
    data = load(text) if text.strip() else None
    if data is None:
        from ruamel.yaml.comments import CommentedMap

        data = CommentedMap()
    parent = _walk(data, path[:-1], create=not remove)
    if remove:
        if parent is not None:
            parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value
    return plain(load(_dump(data, text)))


def _walk(data: Any, path: list[str], *, create: bool) -> Any:
    from ruamel.yaml.comments import CommentedMap

    node = data
    for depth, key in enumerate(path):
        if not isinstance(node, dict):
            where = ".".join(path[:depth]) or "the top level"
            raise ValueError(f"{where} is not a mapping, so {path[depth]!r} cannot be set inside it")
        if key not in node:
            if not create:
                return None
            node[key] = CommentedMap()
        node = node[key]
    if not isinstance(node, dict):
        raise ValueError(f"{'.'.join(path)} is not a mapping")
    return node


def _scalar_text(value: Any, old_text: str) -> str | None:
    """YAML text of a scalar, in the original's quoting style where possible."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if not isinstance(value, str):
        return None
    if old_text.startswith("'"):
        return "'" + value.replace("'", "''") + "'"
    if not old_text.startswith('"') and value and value.strip() == value:
        try:
            if load(f"k: {value}\n")["k"] == value and "#" not in value and "\n" not in value:
                return value
        except ConfigSyntaxError:
            pass
    return json.dumps(value, ensure_ascii=False)


def _span_edit(text: str, parent: Any, key: str, value: Any) -> str | None:
    """Replace a one-line scalar value in place; None when the value isn't that simple."""
    if isinstance(value, (dict, list)) or isinstance(parent[key], (dict, list)):
        return None
    try:
        line_no, col = parent.lc.value(key)
    except (AttributeError, KeyError, TypeError):
        return None
    lines = text.splitlines(keepends=True)
    if line_no >= len(lines):
        return None
    line = lines[line_no]
    body = line.rstrip("\r\n")
    rest = body[col:]
    if not rest or rest[0] in "&*!|>[{":
        return None
    if rest[0] in "'\"":
        end = _quoted_end(rest)
        if end is None:
            return None
    else:
        end = _PLAIN_END.search(rest).start()  # type: ignore[union-attr]
    new = _scalar_text(value, rest)
    if new is None:
        return None
    lines[line_no] = body[:col] + new + rest[end:] + line[len(body):]
    return "".join(lines)


def _quoted_end(text: str) -> int | None:
    quote, i = text[0], 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            if quote == "'" and text[i + 1:i + 2] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return None


def _dump(data: Any, text: str) -> str:
    out = io.StringIO()
    _yaml(text).dump(data, out)
    result = out.getvalue()
    if "\r\n" in text:
        result = result.replace("\r\n", "\n").replace("\n", "\r\n")
    if text.startswith("\ufeff"):
        result = "\ufeff" + result
    return result


def _fragment(key: str, value: Any, text: str, column: int) -> str:
    """`key: value` as block YAML in the file's style, indented to `column`."""
    out = io.StringIO()
    _yaml(text).dump({key: value}, out)
    newline = "\r\n" if "\r\n" in text else "\n"
    return "".join(" " * column + line + newline for line in out.getvalue().splitlines())


def _span_insert(text: str, data: Any, path: list[str], value: Any) -> str | None:
    """Add a missing key as new lines after the last line of its nearest existing parent mapping,
    so no other line is rewritten; None when the layout is not a plain block mapping."""
    parent: Any = data
    depth = 0
    while depth < len(path) - 1 and isinstance(parent.get(path[depth]), dict):
        parent, depth = parent[path[depth]], depth + 1
    if depth < len(path) - 1 and path[depth] in parent:
        return None  # a non-mapping is in the way; let _walk explain
    if not isinstance(parent, dict) or not parent or _is_flow(parent):
        return None
    marks: Any = parent
    try:
        _, column = marks.lc.key(next(k for k in parent if _own(parent, k)))
    except (AttributeError, KeyError, TypeError, StopIteration):
        return None
    lines = text.splitlines(keepends=True)
    own = [k for k in parent if _own(parent, k)]
    if not own:
        return None
    last_key = own[-1]
    start_line, _ = marks.lc.key(last_key)
    end = start_line + 1
    last_content = start_line
    while end < len(lines):
        stripped = lines[end].strip()
        if stripped and not stripped.startswith("#"):
            indent = len(lines[end]) - len(lines[end].lstrip())
            if indent <= column and not (indent == column and stripped.startswith("- ")
                                         and isinstance(parent[last_key], list)):
                break
            last_content = end
        end += 1
    if stripped_start_doc(lines, last_content + 1):
        return None
    rest = path[depth:]
    fragment_value: Any = value
    for key in reversed(rest[1:]):
        fragment_value = {key: fragment_value}
    fragment = _fragment(rest[0], fragment_value, text, column)
    at = last_content + 1
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\r\n" if "\r\n" in text else "\n"
    lines.insert(at, fragment)
    return "".join(lines)


def _own(mapping: Any, key: Any) -> bool:
    """The key is written in this mapping (not only merged in with `<<: *anchor`)."""
    own = getattr(mapping, "_ok", None)
    return key in mapping and (own is None or key in own)


def stripped_start_doc(lines: list[str], index: int) -> bool:
    return any(line.startswith(("---", "...")) for line in lines[index:])


def _is_flow(node: Any) -> bool:
    fa = getattr(node, "fa", None)
    return bool(fa is not None and fa.flow_style())


def set_value(text: str, path: list[str], value: Any) -> str:
    data = load(text) if text.strip() else None
    if data is None:
        from ruamel.yaml.comments import CommentedMap

        data = CommentedMap()
    parent: Any = _walk(data, path[:-1], create=False) if isinstance(data, dict) else None
    key = path[-1]
    if parent is not None and _own(parent, key):
        if plain(parent[key]) == plain(value) and type(plain(parent[key])) is type(value):
            return text
        edited = _span_edit(text, parent, key, value) or _span_replace_block(text, parent, key, value)
    else:
        edited = _span_insert(text, data, path, value) if text.strip() else None
    parent = _walk(data, path[:-1], create=True)
    parent[key] = value
    if edited is not None:
        # the data the edit must hold; with `<<` merges, as ruamel itself writes and reads it
        expected = plain(load(_dump(data, text))) if "<<" in text else plain(data)
        try:
            if plain(load(edited)) == expected:
                return edited
        except ConfigSyntaxError:
            pass
    return _dump(data, text)


def _block_end(lines: list[str], start_line: int, column: int, value: Any) -> int:
    """Index of the last line belonging to the entry whose key starts `start_line`."""
    end = start_line + 1
    last_content = start_line
    while end < len(lines):
        stripped = lines[end].strip()
        if stripped and not stripped.startswith("#"):
            indent = len(lines[end]) - len(lines[end].lstrip())
            if indent < column or (indent == column and not (stripped.startswith("- ")
                                                               and isinstance(value, list))):
                break
            last_content = end
        end += 1
    return last_content


def _entry_lines(text: str, parent: Any, key: str) -> tuple[list[str], int, int, int] | None:
    """The file's lines and where one block entry sits in them: (lines, first line, last line,
    key column); None when the entry is not alone on its lines (flow style, `- key: v`)."""
    if _is_flow(parent):
        return None
    try:
        start_line, column = parent.lc.key(key)
    except (AttributeError, KeyError, TypeError):
        return None
    lines = text.splitlines(keepends=True)
    if start_line >= len(lines) or lines[start_line][:column].strip():
        return None
    return lines, start_line, _block_end(lines, start_line, column, parent[key]), column


def _span_replace_block(text: str, parent: Any, key: str, value: Any) -> str | None:
    """Rewrite just the lines of one entry (key line through its block) with the new value."""
    entry = _entry_lines(text, parent, key)
    if entry is None:
        return None
    lines, first, last, column = entry
    lines[first:last + 1] = [_fragment(key, value, text, column)]
    return "".join(lines)


def _span_remove(text: str, parent: Any, key: str) -> str | None:
    entry = _entry_lines(text, parent, key) if _own(parent, key) else None
    if entry is None:
        return None
    lines, first, last, _ = entry
    del lines[first:last + 1]
    return "".join(lines)


def remove_value(text: str, path: list[str]) -> str:
    if not text.strip():
        return text
    data = load(text)
    parent = _walk(data, path[:-1], create=False) if isinstance(data, dict) else None
    if parent is None or path[-1] not in parent:
        return text
    if not _own(parent, path[-1]):
        raise ValueError(f"{path[-1]!r} is inherited with `<<: *anchor`; change it where it is defined")
    edited = _span_remove(text, parent, path[-1])
    if edited is not None:
        try:
            if plain(load(edited)) == _expected(text, path, None, remove=True):
                return edited
        except ConfigSyntaxError:
            pass
    del parent[path[-1]]
    return _dump(data, text)


FORMATS = {
    "yaml": Format(
        "yaml",
        get=lambda text, path, _section: get_value(text, path),
        set=lambda text, path, value, _section: set_value(text, path, value),  # span edits checked inside
        remove=lambda text, path, _section: remove_value(text, path),
    )
}
