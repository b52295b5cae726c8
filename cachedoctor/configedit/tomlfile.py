"""TOML editing through tomlkit, which keeps comments, order and spacing of everything else."""

from __future__ import annotations

import re
from typing import Any

from cachedoctor.configedit.common import ConfigSyntaxError
from cachedoctor.configedit.formats import Format

_LONE_LF = re.compile(r"(?<!\r)\n")


def load(text: str) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        raise ConfigSyntaxError(str(exc).split(" at line ")[0], exc.line, exc.col) from None


def plain(data: Any) -> Any:
    unwrap = getattr(data, "unwrap", None)
    return unwrap() if callable(unwrap) else data


def get_value(text: str, path: list[str]) -> Any:
    current: Any = load(text)
    for key in path:
        if not isinstance(current, dict) or key not in current:
            raise KeyError(".".join(path))
        current = current[key]
    return plain(current)


def set_value(text: str, path: list[str], value: Any) -> str:
    import tomlkit

    doc = load(text)
    node: Any = doc
    for depth, key in enumerate(path[:-1]):
        if key not in node:
            node[key] = tomlkit.table()
        node = node[key]
        if not isinstance(node, dict):
            raise ValueError(f"{'.'.join(path[:depth + 1])} is not a table")
    key = path[-1]
    if key in node and plain(node[key]) == value and type(plain(node[key])) is type(value):
        return text
    node[key] = value
    return _restore_newlines(tomlkit.dumps(doc), text)


def remove_value(text: str, path: list[str]) -> str:
    import tomlkit

    doc = load(text)
    node: Any = doc
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return text
        node = node[key]
    if not isinstance(node, dict) or path[-1] not in node:
        return text
    del node[path[-1]]
    return _restore_newlines(tomlkit.dumps(doc), text)


def _restore_newlines(result: str, original: str) -> str:
    return _LONE_LF.sub("\r\n", result) if "\r\n" in original else result


def _split_bom(text: str) -> tuple[str, str]:
    return ("\ufeff", text[1:]) if text.startswith("\ufeff") else ("", text)


def _get(text: str, path: list[str], _section: str | None) -> Any:
    return get_value(_split_bom(text)[1], path)


def _set(text: str, path: list[str], value: Any, _section: str | None) -> str:
    bom, body = _split_bom(text)
    return bom + set_value(body, path, value)


def _remove(text: str, path: list[str], _section: str | None) -> str:
    bom, body = _split_bom(text)
    return bom + remove_value(body, path)


FORMATS = {"toml": Format("toml", _get, _set, _remove)}
