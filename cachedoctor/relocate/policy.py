"""Browser `DiskCacheDir` policies: the one seam for where and how a managed policy is written.

Linux (and WSL): cachedoctor's own file `cachedoctor.json` in the browser's managed-policy folder.
That needs root: the command runs as the user and only this write is root's, done through
`cachedoctor.rootfiles` (directly as root, else by sudo, shown in the plan).
`CACHEDOCTOR_SYSTEM_ROOT` prefixes system folders, for tests only.
Windows: a registry value under `Software\\Policies\\...`. Chromium reads both hives, machine
first (policy_loader_win.cc `kHives`), so the per-user `HKCU` value is written, which needs no
administrator; only when `HKLM` already sets the policy (and would win) is `HKLM` the one to
change, which needs an elevated terminal and applies to every user of the computer. The right
to write is checked before anything is copied (`check_supported`), and a registry failure is a
clear message, never a traceback. The registry is reached through `PolicyRegistry`
(`winreg`, imported lazily; tests give a double with HKCU/HKLM access rights).
macOS needs a configuration profile, which cachedoctor does not write: the policy method is
refused there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from cachedoctor.errors import OperationFailed, RefusedError
from cachedoctor.host import Host
from cachedoctor.policies import REGISTRY_KEYS, own_policy_file

HKCU, HKLM = "HKEY_CURRENT_USER", "HKEY_LOCAL_MACHINE"


class RegistryValue(msgspec.Struct, frozen=True):
    """Pure description of a registry write: hive\\key, value name, REG_SZ data."""

    key: str
    name: str
    data: str
    hive: str = HKCU
    type: str = "REG_SZ"

    def display(self) -> str:
        return f"{self.hive}\\{self.key}\\{self.name} = {self.data!r} ({self.type})"

    @property
    def scope(self) -> str:
        return "for every user of this computer" if self.hive == HKLM else "for you only"


class PolicyRegistry(Protocol):
    def read(self, hive: str, key: str, name: str) -> str | None: ...
    def write(self, hive: str, key: str, name: str, data: str) -> None: ...
    def delete(self, hive: str, key: str, name: str) -> None: ...
    def writable(self, hive: str, key: str) -> bool: ...


_registry: PolicyRegistry | None = None


def use_registry(registry: PolicyRegistry | None) -> None:
    """The registry the Windows policy calls use (None: the real one); for tests."""
    global _registry
    _registry = registry


def _reg() -> PolicyRegistry:
    return _registry if _registry is not None else WinPolicyRegistry()


def policy_file(browser: str, *, root: str | None = None) -> str:
    """The Linux policy file cachedoctor owns for `browser` (below the system root in tests)."""
    from cachedoctor.locate.files import system_path

    return system_path(own_policy_file(browser), root)


def registry_value(browser: str, policy: str, value: str, hive: str = HKCU) -> RegistryValue:
    return RegistryValue(REGISTRY_KEYS[browser], policy, value, hive)


def target(browser: str, policy: str, value: str = "") -> RegistryValue:
    """Where the policy is written: HKCU, unless HKLM already sets it (HKLM wins there)."""
    machine = registry_value(browser, policy, value, HKLM)
    if _reg().read(HKLM, machine.key, policy) is not None:
        return machine
    return registry_value(browser, policy, value, HKCU)


def describe(browser: str, policy: str, value: str, host: Host) -> list[str]:
    if host.is_windows:
        where = target(browser, policy, value)
        return [f"set the registry value {where.display()} ({where.scope})"]
    from cachedoctor import rootfiles

    file = policy_file(browser)
    lines = [f"write {policy} = {value!r} into {file}"]
    if rootfiles.route(file) == "sudo":
        lines.append("only that file is written as root, by sudo (it may ask for your password): "
                     f"`{rootfiles.shown(rootfiles.write_commands(file))}`; a restore runs the "
                     f"same, or `{rootfiles.shown(rootfiles.remove_commands(file))}` when nothing "
                     "else is left in the file")
    return lines


def check_supported(host: Host, browser: str, policy: str = "DiskCacheDir") -> None:
    if host.os == "macos":
        raise RefusedError(
            "the policy method is not available on macOS: Chrome reads managed policies from a "
            "configuration profile there, which cachedoctor does not install",
            hint="use --method link",
        )
    if host.is_windows:
        where = target(browser, policy)
        if not _reg().writable(where.hive, where.key):
            held = _reg().read(where.hive, where.key, policy)
            raise RefusedError(
                f"{where.hive}\\{where.key}\\{policy} is set to {held!r} and takes precedence "
                "over a per-user policy; changing it needs an administrator and applies to "
                "every user of this computer" if where.hive == HKLM else
                f"cannot write {where.hive}\\{where.key} (access denied); nothing was changed",
                hint="run the command from an administrator terminal, or use --method link")
        return
    from cachedoctor import rootfiles

    file = policy_file(browser)
    if rootfiles.route(file) == "none":  # with sudo, only that one step runs as root
        raise rootfiles.needs_root(file, alternative=", or use --method link")


def read_current(browser: str, policy: str, host: Host) -> str | None:
    """The current state to restore later: file text (Linux), or (Windows) the hive written to
    and the data it held there, as JSON."""
    if host.is_windows:
        where = target(browser, policy)
        return json.dumps({"hive": where.hive,
                           "data": _reg().read(where.hive, where.key, policy)})
    try:
        with open(policy_file(browser), encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def apply(browser: str, policy: str, value: str, host: Host) -> None:
    """Set the policy (idempotent)."""
    if host.is_windows:
        where = target(browser, policy, value)
        _registry_call(where, lambda reg: reg.write(where.hive, where.key, policy, value))
        return
    from cachedoctor import rootfiles

    file = policy_file(browser)
    data: dict[str, Any] = {}
    try:
        with open(file, encoding="utf-8") as fh:
            loaded = json.load(fh)
            if isinstance(loaded, dict):
                data = loaded
    except (FileNotFoundError, ValueError):
        pass
    data[policy] = value
    rootfiles.write(file, json.dumps(data, indent=2) + "\n")


def revert(browser: str, policy: str, before: str | None, host: Host) -> None:
    """Put back what was there before `apply` (remove our file or value if there was none)."""
    if host.is_windows:
        hive, old = _before(before)
        where = registry_value(browser, policy, old or "", hive)
        if old is None:
            _registry_call(where, lambda reg: reg.delete(hive, where.key, policy))
        else:
            _registry_call(where, lambda reg: reg.write(hive, where.key, policy, old))
        return
    from cachedoctor import rootfiles

    # Only our policy goes back: the file may have been edited since (a tune, its undo), and
    # those edits stay. When what remains is what was there, the old text comes back exactly.
    target = policy_file(browser)
    try:
        with open(target, encoding="utf-8") as fh:
            current = _json_object(fh.read())
    except FileNotFoundError:
        if os.path.lexists(target + rootfiles.NEW_SUFFIX):  # a write interrupted half-way
            rootfiles.remove(target)
        return
    was = _json_object(before) if before is not None else None
    wanted = dict(current)
    if was is not None and policy in was:
        wanted[policy] = was[policy]
    else:
        wanted.pop(policy, None)
    if before is not None and was == wanted:
        rootfiles.write(target, before)
    elif wanted:
        rootfiles.write(target, json.dumps(wanted, indent=2) + "\n")
    else:
        rootfiles.remove(target)


def _json_object(text: str) -> dict[str, Any]:
    """A policy file's settings; {} for one that is not a JSON object (Chromium ignores it)."""
    try:
        loaded = json.loads(text)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def current_value(browser: str, policy: str, host: Host) -> str | None:
    """The value the browser will read (for checking that the policy took): HKLM wins."""
    if host.is_windows:
        for hive in (HKLM, HKCU):
            data = _reg().read(hive, REGISTRY_KEYS[browser], policy)
            if data is not None:
                return data
        return None
    try:
        with open(policy_file(browser), encoding="utf-8") as fh:
            data = json.load(fh)
    except (FileNotFoundError, ValueError):
        return None
    value = data.get(policy) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _before(before: str | None) -> tuple[str, str | None]:
    """(hive, data) recorded by `read_current`; a bare string (older records) was HKLM's."""
    if before is None:
        return HKLM, None
    try:
        recorded = json.loads(before)
    except ValueError:
        return HKLM, before
    if isinstance(recorded, dict) and recorded.get("hive") in (HKCU, HKLM):
        data = recorded.get("data")
        return str(recorded["hive"]), data if isinstance(data, str) else None
    return HKLM, before


def _registry_call(where: RegistryValue, call: Callable[[PolicyRegistry], None]) -> None:
    try:
        call(_reg())
    except PermissionError:
        raise RefusedError(
            f"changing {where.hive}\\{where.key}\\{where.name} needs an administrator"
            + (" (it applies to every user of this computer)" if where.hive == HKLM else ""),
            hint="run the command from an administrator terminal, or use --method link",
        ) from None
    except OSError as exc:
        raise OperationFailed(f"the registry refused {where.display()}: {exc.strerror or exc}") from None


class WinPolicyRegistry:  # pragma: no cover - Windows only
    """`Software\\Policies` through winreg."""

    def read(self, hive: str, key: str, name: str) -> str | None:
        winreg = _winreg()
        try:
            with winreg.OpenKey(getattr(winreg, hive), key) as handle:
                data, _type = winreg.QueryValueEx(handle, name)
                return str(data)
        except OSError:
            return None

    def write(self, hive: str, key: str, name: str, data: str) -> None:
        winreg = _winreg()
        with winreg.CreateKeyEx(getattr(winreg, hive), key, 0, winreg.KEY_SET_VALUE) as handle:
            winreg.SetValueEx(handle, name, 0, winreg.REG_SZ, data)

    def delete(self, hive: str, key: str, name: str) -> None:
        winreg = _winreg()
        try:
            with winreg.OpenKey(getattr(winreg, hive), key, 0, winreg.KEY_SET_VALUE) as handle:
                winreg.DeleteValue(handle, name)
        except FileNotFoundError:
            pass

    def writable(self, hive: str, key: str) -> bool:
        """May this process write `key` (or create it below its nearest existing parent)?
        Asked of the registry itself: an access check, nothing is created."""
        winreg = _winreg()
        root = getattr(winreg, hive)
        parts = key.split("\\")
        for depth in range(len(parts), 0, -1):
            sub = "\\".join(parts[:depth])
            access = winreg.KEY_SET_VALUE if depth == len(parts) else winreg.KEY_CREATE_SUB_KEY
            try:
                with winreg.OpenKey(root, sub, 0, access):
                    return True
            except PermissionError:
                return False
            except FileNotFoundError:
                continue
        return False


def _winreg() -> Any:  # pragma: no cover - Windows only
    import importlib

    return importlib.import_module("winreg")
