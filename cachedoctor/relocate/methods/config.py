"""`config`: a key in the tool's own config file (pip.conf `cache-dir`, .npmrc `cache`, .condarc
`pkgs_dirs`), edited format-preserving through `cachedoctor.configedit`; the file is kept byte
for byte so a restore puts it back exactly, and a key the user changed since stays theirs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from msgspec import Meta

from cachedoctor.errors import UserInputError
from cachedoctor.profiles.base import PathsPerOs, check_writable_format
from cachedoctor.relocate import faults
from cachedoctor.relocate.methods.base import (
    RelocationEntry,
    RelocationMethod,
    SaveCallback,
    fill,
)

if TYPE_CHECKING:
    from cachedoctor.host import Host
    from cachedoctor.links import LinkKind
    from cachedoctor.locate.effective import Step
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Location
    from cachedoctor.relocate.journal import Operation


class ConfigRelocation(RelocationEntry, tag="config"):
    """A key in the tool's own config file (pip.conf `cache-dir`, .npmrc `cache`, .condarc `pkgs_dirs`)."""

    file: PathsPerOs
    format: str
    key: Annotated[str | list[str], Meta(description="A flat key, or a list of nested keys.")]
    section: Annotated[str | None, Meta(description="INI section, e.g. `global` for pip.conf.")] = None
    value: Annotated[str, Meta(description="Value template; `{dest}` is the new folder.")] = "{dest}"
    as_list: Annotated[bool, Meta(description="Store the value as the first item of a list.")] = False

    def _check(self) -> None:
        check_writable_format(self.format)


class ConfigMethod(RelocationMethod):
    name = "config"
    entry = ConfigRelocation

    def usable(self, entry: RelocationEntry, host: Host) -> bool:
        assert isinstance(entry, ConfigRelocation)
        return bool(entry.file.for_host(host))

    def settings(self, entry: RelocationEntry, base: str, host: Host, *,
                 link: LinkKind | None = None) -> dict[str, Any]:
        from cachedoctor.resolve import try_expand

        assert isinstance(entry, ConfigRelocation)
        files = [f for f in (try_expand(t, host) for t in entry.file.for_host(host)) if f]
        if not files:
            raise UserInputError(f"the profile names no config file for {host.os}")
        value: Any = fill(entry.value, base)
        return {"file": files[0], "format": entry.format, "key": entry.key,
                "section": entry.section, "value": [value] if entry.as_list else value}

    def world_after(self, op: Operation, world: World) -> World:
        from cachedoctor.configedit import ConfigSyntaxError, read_text, set_in_text, write_target
        from cachedoctor.locate.world import with_changes

        s = op.settings
        write_target(Path(s["file"]))  # a dangling link: refused now, not after the copy
        before = read_text(Path(s["file"]))  # not UTF-8 (a Latin-1 byte): refused now, not after the copy
        try:
            text = set_in_text(before or "", s["format"], s["key"], s["value"],
                               section=s.get("section"))
        except ConfigSyntaxError as exc:
            raise UserInputError(f"{s['file']}:{exc.line}:{exc.column}: malformed file: "
                                 f"{exc.message}; nothing was changed",
                                 hint="fix the file (or use --method link) and run again") from None
        except ValueError as exc:
            raise UserInputError(f"{s['file']}: cannot set {s['key']}: {exc}") from None
        return with_changes(world, texts={s["file"]: text})

    def ignored_reason(self, op: Operation, location: Location, world: World) -> str | None:
        from cachedoctor.locate.effective import ignored_reason, setting_files, settings_of
        from cachedoctor.profiles.model import ConfigSetting

        host = world.new_session_host()
        wanted = os.path.normcase(op.settings["file"])
        for setting in settings_of(location):
            if isinstance(setting, ConfigSetting) and wanted in {
                    os.path.normcase(p) for p in setting_files(setting, host)}:
                reason = ignored_reason(setting, host, world)
                if reason is not None:
                    return f"skips {op.settings['file']} while {reason}"
        return None

    def replaced(self, entry: RelocationEntry, step: Step) -> str | None:
        assert isinstance(entry, ConfigRelocation)
        if step.kind == "config" and step.origin and os.path.normcase(step.origin) in _files(entry):
            return f"{step.name} = {step.value} (in {step.origin})"
        return None

    def describe(self, op: Operation, host: Host) -> list[str]:
        s = op.settings
        where = f" [{s['section']}]" if s.get("section") else ""
        return [f"set {s['key']}{where} = {s['value']!r} in {s['file']} ({s['format']})"]

    def apply(self, op: Operation, host: Host, save: SaveCallback) -> list[str]:
        from cachedoctor import configedit

        s = op.settings
        path = Path(s["file"])
        if "before" not in s:
            s["before"] = _read(path)
            save()
        faults.point("apply")
        edit = configedit.set_key(path, s["format"], s["key"], s["value"],
                                  section=s.get("section"), create=True)
        s["after"] = edit.after
        save()
        return [f"set {s['key']} in {path}"]

    def revert(self, op: Operation, host: Host) -> list[str]:
        from cachedoctor import configedit

        s = op.settings
        if "before" not in s:
            return []  # never applied
        path = Path(s["file"])
        current = _read(path)
        before = s["before"]
        if current == before:
            return []
        if s.get("after") is None or current == s["after"]:
            if before is None:
                configedit.remove_file(path)
            else:
                configedit.write_text(path, before)  # through a link: the dotfiles copy gets it
            return [f"restored {path}"]
        fmt, key, section = s["format"], s["key"], s.get("section")
        now = _key_in(current, fmt, key, section)
        if now != s["value"]:  # the user set the key themselves since: theirs stays
            return [f"{path}: {key} was changed since the move (to {now!r}); left as it is"]
        was = _key_in(before, fmt, key, section)
        if was is configedit.MISSING:
            configedit.remove_key(path, fmt, key, section=section)
            return [f"{path} was edited since the move; removed only {key}"]
        configedit.set_key(path, fmt, key, was, section=section)
        return [f"{path} was edited since the move; set only {key} back to {was!r}"]


def _files(entry: ConfigRelocation) -> set[str]:
    from cachedoctor.host import Host
    from cachedoctor.resolve import try_expand

    host = Host.current()
    return {os.path.normcase(p) for t in entry.file.for_host(host) if (p := try_expand(t, host))}


def _read(path: Path) -> str | None:
    """The file byte for byte (CRLF kept: a round trip must restore it exactly)."""
    from cachedoctor.configedit import read_text

    return read_text(path)


def _key_in(text: str | None, fmt: str, key: str | list[str], section: str | None) -> Any:
    """The key's value in a config text; configedit.MISSING when absent (or unreadable)."""
    from cachedoctor import configedit

    if text is None:
        return configedit.MISSING
    try:
        return configedit.get_in_text(text, fmt, key, section=section)
    except (KeyError, configedit.ConfigSyntaxError, ValueError):
        return configedit.MISSING


METHOD = ConfigMethod()
