"""The config-format registry: one `Format` per name, provided by the module that parses it.

A new format is one module that defines `FORMATS = {name: Format(...)}` plus one line in
`PROVIDERS`. Modules are imported when their format is first used, so start-up never pays for
ruamel or tomlkit. Read-only formats (`properties`, `xml`) have no `set`/`remove`: settings are
read from them (where a tool keeps its cache), never written.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from cachedoctor.errors import UserInputError

KeyPath = list[str]


class Format(msgspec.Struct, frozen=True):
    name: str
    get: Callable[[str, KeyPath, str | None], Any]  # text, key path, INI section -> value
    set: Callable[[str, KeyPath, Any, str | None], str] | None = None
    remove: Callable[[str, KeyPath, str | None], str] | None = None
    flat: bool = False  # one level of keys (INI, .npmrc, .properties)
    sections: bool = False  # `section` is an INI section, not a leading key
    # several keys with one parse (big files); None: `get` is called once per key
    get_many: Callable[[str, list[KeyPath], str | None], list[Any]] | None = None
    # what a value written by `set` reads back as (INI stores text): None, the value itself
    reads_back: Callable[[Any], Any] | None = None
    # What the tool makes of a value `get` returned, given the environment and home folder it
    # runs with (npm: `${VAR}` expanded, `~/` below home); None: the value is used as it is.
    # Arguments: value, key path, environment, home, Windows?
    interpret: Callable[[Any, KeyPath, Mapping[str, str], str, bool], Any] | None = None

    @property
    def writable(self) -> bool:
        return self.set is not None and self.remove is not None


PROVIDERS: dict[str, str] = {
    "json": "jsonc",
    "jsonc": "jsonc",
    "yaml": "yamlfile",
    "toml": "tomlfile",
    "ini": "inifile",
    "pipconf": "inifile",
    "npmrc": "npmrc",
    "keyvalue": "inifile",
    "properties": "properties",
    "xml": "xmlfile",
}
NAMES: tuple[str, ...] = tuple(PROVIDERS)
WRITABLE: tuple[str, ...] = ("jsonc", "json", "yaml", "toml", "ini", "pipconf", "npmrc", "keyvalue")


def get_format(name: str) -> Format:
    module = PROVIDERS.get(name)
    if module is None:
        raise UserInputError(f"unknown config format {name!r}; expected one of {', '.join(NAMES)}")
    formats: dict[str, Format] = importlib.import_module(f"cachedoctor.configedit.{module}").FORMATS
    return formats[name]


def writable_format(name: str) -> Format:
    fmt = get_format(name)
    if not fmt.writable:
        raise UserInputError(f"cachedoctor reads {name} files but does not edit them")
    return fmt
