"""The four ways of pointing a tool at its relocated cache: link, env, policy, config.

`resolve_settings` turns a profile's relocation entry into plain data (stored in the journal, so
finishing or rolling back never needs the profile again). `apply` and `revert` are idempotent:
after a crash they are simply run again. What existed before is recorded in the settings (and
the journal saved) *before* anything is changed, so `revert` can put it back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cachedoctor.errors import OperationFailed, RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.links import LinkKind, create_link, link_kind, link_target, points_to, remove_link
from cachedoctor.profiles.model import (
    ConfigRelocation,
    EnvRelocation,
    LinkRelocation,
    PolicyRelocation,
    Relocation,
)
from cachedoctor.relocate import faults
from cachedoctor.relocate.journal import Operation

SaveCallback = Callable[[], None]


def fill(template: str, dest: str) -> str:
    return template.replace("{dest}", dest)


def resolve_settings(relocation: Relocation, base: str, host: Host, *,
                     link: LinkKind | None = None) -> dict[str, Any]:
    """Plain-data settings for the journal; raises UserInputError/RefusedError when unusable."""
    if isinstance(relocation, LinkRelocation):
        return {"link_kind": choose_link_kind(relocation, host, link)}
    if isinstance(relocation, EnvRelocation):
        service = relocation.service.for_host(host) if relocation.service else []
        return {"vars": {k: fill(v, base) for k, v in relocation.vars.items()},
                "scope": relocation.scope, "service": [fill(s, base) for s in service]}
    if isinstance(relocation, PolicyRelocation):
        from cachedoctor.relocate import policy

        policy.check_supported(host, relocation.browser)
        return {"browser": relocation.browser, "policy": relocation.policy, "value": base}
    if isinstance(relocation, ConfigRelocation):
        from cachedoctor.resolve import try_expand

        files = [f for f in (try_expand(t, host) for t in relocation.file.for_host(host)) if f]
        if not files:
            raise UserInputError(f"the profile names no config file for {host.os}")
        value: Any = fill(relocation.value, base)
        return {"file": files[0], "format": relocation.format, "key": relocation.key,
                "section": relocation.section, "value": [value] if relocation.as_list else value}
    raise AssertionError(relocation)  # pragma: no cover


def choose_link_kind(relocation: LinkRelocation, host: Host, requested: LinkKind | None) -> LinkKind:
    if not host.is_windows:
        if requested == "junction":
            raise UserInputError("junctions exist only on Windows; on this system use --link symlink")
        return "symlink"
    if requested == "symlink" and relocation.windows_link == "junction":
        why = f" ({relocation.why})" if relocation.why else ""
        raise RefusedError(
            f"this tool needs a junction, not a symlink{why}: it resolves symlinks back to their "
            "target and would keep writing to the old drive",
            hint="leave out --link or pass --link junction",
        )
    if requested is not None:
        return requested
    return "symlink" if relocation.windows_link == "symlink" else "junction"


def describe(op: Operation, host: Host) -> list[str]:
    """What the method will create or set, for the plan."""
    s = op.settings
    if op.method == "link":
        return [f"create a {s['link_kind']} {p.source} -> {p.dest}" for p in op.pairs]
    if op.method == "env":
        lines = [f"set {k}={v}" + (" (for the service)" if s["scope"] == "service" else " persistently")
                 for k, v in s["vars"].items()]
        if s["scope"] == "service":
            lines.append("the service's environment must be changed by you:")
            lines += [f"  {line}" for line in s.get("service") or ["(no instructions in the profile)"]]
        return lines
    if op.method == "policy":
        from cachedoctor.relocate import policy

        return [policy.describe(s["browser"], s["policy"], s["value"], host)]
    if op.method == "config":
        where = f" [{s['section']}]" if s.get("section") else ""
        return [f"set {s['key']}{where} = {s['value']!r} in {s['file']} ({s['format']})"]
    return []  # pragma: no cover


def apply(op: Operation, host: Host, save: SaveCallback) -> list[str]:
    """Point the tool at the new place; returns messages for the user. Idempotent."""
    s = op.settings
    if op.method == "link":
        for pair in op.pairs:
            _link(pair.source, pair.dest, s["link_kind"])
        return []
    if op.method == "env":
        return _apply_env(op, host, save)
    if op.method == "policy":
        from cachedoctor.relocate import policy

        if "before" not in s:
            s["before"] = policy.read_current(s["browser"], s["policy"], host)
            save()
        faults.point("apply")
        policy.apply(s["browser"], s["policy"], s["value"], host)
        if policy.current_value(s["browser"], s["policy"], host) != s["value"]:
            raise OperationFailed(f"the {s['policy']} policy did not read back as {s['value']}")
        return [f"restart {s['browser']} for the policy to take effect "
                f"(check chrome://policy / edge://policy)"]
    if op.method == "config":
        return _apply_config(op, save)
    raise AssertionError(op.method)  # pragma: no cover


def _link(source: str, dest: str, kind: LinkKind) -> None:
    if points_to(source, dest):
        return
    if link_kind(source) is not None:
        raise OperationFailed(f"{source} is a link to {link_target(source)}, not to {dest}")
    if os.path.isdir(source):
        try:
            os.rmdir(source)  # an empty folder the tool re-created meanwhile
        except OSError:
            raise OperationFailed(
                f"{source} was re-created with new files while the cache was being moved "
                "(is the tool running?)"
            ) from None
    faults.point("link")
    create_link(source, dest, kind)
    faults.point("linked")
    if not points_to(source, dest):
        raise OperationFailed(f"the new link {source} does not resolve to {dest}")


def _apply_env(op: Operation, host: Host, save: SaveCallback) -> list[str]:
    from cachedoctor import envvars

    s = op.settings
    if s["scope"] == "service":
        lines = ["this cache is used by a service: change the service's environment yourself:"]
        lines += [f"  {k}={v}" for k, v in s["vars"].items()]
        lines += [f"  {line}" for line in s.get("service") or []]
        s["applied"] = False
        return lines
    if "env_before" not in s:
        # what cachedoctor managed before, recorded BEFORE anything changes: a resumed move must
        # not take its own half-applied values for the state to go back to
        managed = envvars.managed_variables(host)
        s["env_before"] = {name: managed.get(name) for name in s["vars"]}
        s["applied"] = True
        save()
    faults.point("apply")
    result = envvars.set_variables(dict(s["vars"]), host=host, tool=op.tool)
    messages = list(result.messages)
    if result.files_changed:
        messages.append("changed: " + ", ".join(result.files_changed))
    if result.apply_now:
        messages.append(f"to use it in this shell now: {result.apply_now}")
    return messages


def _apply_config(op: Operation, save: SaveCallback) -> list[str]:
    s = op.settings
    path = Path(s["file"])
    if "before" not in s:
        s["before"] = _read(path)
        save()
    from cachedoctor import configedit

    faults.point("apply")
    edit = configedit.set_key(path, s["format"], s["key"], s["value"], section=s.get("section"),
                              create=True)
    s["after"] = edit.after
    save()
    return [f"set {s['key']} in {path}"]


def _read(path: Path) -> str | None:
    """The file byte for byte (CRLF kept: a round trip must restore it exactly)."""
    from cachedoctor.configedit import read_text

    return read_text(path)


def revert(op: Operation, host: Host) -> list[str]:
    """Undo `apply`: remove links (never their targets) and the env/policy/config changes."""
    s = op.settings
    if op.method == "link":
        for pair in op.pairs:
            if link_kind(pair.source) is None:
                continue
            target = link_target(pair.source)
            if not (points_to(pair.source, pair.dest)
                    or (target and os.path.normcase(target) == os.path.normcase(pair.dest))):
                raise OperationFailed(f"{pair.source} links to {target}, not to {pair.dest}; "
                                      "leaving it alone")
            faults.point("unlink")
            remove_link(pair.source)
        return []
    if op.method == "env":
        if not s.get("applied"):
            if s.get("scope") == "service":
                return ["undo the service environment change you made for: " + ", ".join(s["vars"])]
            return ["remove these variables if you set them: " + ", ".join(s["vars"])]
        from cachedoctor import envvars

        before = s.get("env_before")
        if isinstance(before, dict) and set(before) == set(s["vars"]):
            result = envvars.revert(before, host=host)
        else:
            result = envvars.unset_variables(list(s["vars"]), host=host, tool=op.tool)
        return list(result.messages)
    if op.method == "policy":
        from cachedoctor.relocate import policy

        if "before" in s:
            policy.revert(s["browser"], s["policy"], s["before"], host)
        return [f"restart {s['browser']} for the change to take effect"]
    if op.method == "config":
        return _revert_config(op)
    raise AssertionError(op.method)  # pragma: no cover


def _revert_config(op: Operation) -> list[str]:
    s = op.settings
    if "before" not in s:
        return []  # never applied
    path = Path(s["file"])
    current = _read(path)
    before = s["before"]
    if current == before:
        return []
    if s.get("after") is None or current == s["after"]:
        from cachedoctor.configedit import remove_file, write_text

        if before is None:
            remove_file(path)
        else:
            write_text(path, before)  # through a link: the dotfiles copy gets it, the link stays
        return [f"restored {path}"]
    from cachedoctor import configedit

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


def _key_in(text: str | None, fmt: str, key: str | list[str], section: str | None) -> Any:
    """The key's value in a config text; configedit.MISSING when absent (or unreadable)."""
    from cachedoctor import configedit

    if text is None:
        return configedit.MISSING
    try:
        return configedit.get_in_text(text, fmt, key, section=section)
    except (KeyError, configedit.ConfigSyntaxError, ValueError):
        return configedit.MISSING
