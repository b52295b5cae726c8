"""Browser `DiskCacheDir` policies: the one seam for where and how a managed policy is written.

Linux (and WSL): cachedoctor's own file `cachedoctor.json` in the browser's managed-policy folder
(needs root). `CACHEDOCTOR_SYSTEM_ROOT` prefixes system folders, for tests only.
Windows: the registry value under `HKLM\\SOFTWARE\\Policies\\...` (needs an administrator),
through `winreg`, imported lazily. macOS needs a configuration profile, which cachedoctor does
not write: the policy method is refused there.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any

from cachedoctor.drives import nearest_existing
from cachedoctor.errors import RefusedError
from cachedoctor.host import Host
from cachedoctor.policies import REGISTRY_KEYS, own_policy_file


@dataclass(frozen=True)
class RegistryValue:
    """Pure description of a registry write: HKLM\\key, value name, REG_SZ data."""

    key: str
    name: str
    data: str
    hive: str = "HKEY_LOCAL_MACHINE"
    type: str = "REG_SZ"

    def display(self) -> str:
        return f"{self.hive}\\{self.key}\\{self.name} = {self.data!r} ({self.type})"


def policy_file(browser: str, *, root: str | None = None) -> str:
    """The Linux policy file cachedoctor owns for `browser` (below the system root in tests)."""
    from cachedoctor.locate.files import system_path

    return system_path(own_policy_file(browser), root)


def registry_value(browser: str, policy: str, value: str) -> RegistryValue:
    return RegistryValue(REGISTRY_KEYS[browser], policy, value)


def describe(browser: str, policy: str, value: str, host: Host) -> str:
    if host.is_windows:
        return f"set the registry value {registry_value(browser, policy, value).display()}"
    return f"write {policy} = {value!r} into {policy_file(browser)}"


def check_supported(host: Host, browser: str) -> None:
    if host.os == "macos":
        raise RefusedError(
            "the policy method is not available on macOS: Chrome reads managed policies from a "
            "configuration profile there, which cachedoctor does not install",
            hint="use --method link",
        )
    if not host.is_windows:
        target = policy_file(browser)
        existing = nearest_existing(os.path.dirname(target))
        if not os.access(existing, os.W_OK):
            raise RefusedError(
                f"writing the browser policy file {target} needs root",
                hint="run the same command with sudo, or use --method link",
            )


def read_current(browser: str, policy: str, host: Host) -> str | None:
    """The current state to restore later: file text (Linux) or the value's data (Windows)."""
    if host.is_windows:  # pragma: no cover - Windows only
        return _win_query(registry_value(browser, policy, ""))
    try:
        with open(policy_file(browser), encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def apply(browser: str, policy: str, value: str, host: Host) -> None:
    """Set the policy (idempotent)."""
    if host.is_windows:  # pragma: no cover - Windows only
        _win_set(registry_value(browser, policy, value))
        return
    from cachedoctor.fsutil import atomic_write_text

    target = policy_file(browser)
    data: dict[str, Any] = {}
    try:
        with open(target, encoding="utf-8") as fh:
            loaded = json.load(fh)
            if isinstance(loaded, dict):
                data = loaded
    except (FileNotFoundError, ValueError):
        pass
    data[policy] = value
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    atomic_write_text(target, json.dumps(data, indent=2) + "\n", mode=0o644)


def revert(browser: str, policy: str, before: str | None, host: Host) -> None:
    """Put back what was there before `apply` (remove our file or value if there was none)."""
    if host.is_windows:  # pragma: no cover - Windows only
        _win_restore(registry_value(browser, policy, before or ""), before)
        return
    from cachedoctor.fsutil import atomic_write_text

    target = policy_file(browser)
    if before is not None:
        atomic_write_text(target, before, mode=0o644)
        return
    try:
        with open(target, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return
    except ValueError:
        data = {}
    if isinstance(data, dict):
        data.pop(policy, None)
    if isinstance(data, dict) and data:
        atomic_write_text(target, json.dumps(data, indent=2) + "\n", mode=0o644)
    else:
        os.unlink(target)


def current_value(browser: str, policy: str, host: Host) -> str | None:
    """The value the browser will read (for checking that the policy took)."""
    if host.is_windows:  # pragma: no cover - Windows only
        return _win_query(registry_value(browser, policy, ""))
    try:
        with open(policy_file(browser), encoding="utf-8") as fh:
            data = json.load(fh)
    except (FileNotFoundError, ValueError):
        return None
    value = data.get(policy) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _win_query(value: RegistryValue) -> str | None:  # pragma: no cover - Windows only
    winreg = _winreg()

    try:
        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, value.key) as key:
            data, _type = winreg.QueryValueEx(key, value.name)
            return str(data)
    except FileNotFoundError:
        return None


def _win_set(value: RegistryValue) -> None:  # pragma: no cover - Windows only
    winreg = _winreg()

    try:
        with winreg.CreateKeyEx(winreg.HKEY_LOCAL_MACHINE, value.key, 0, winreg.KEY_SET_VALUE) as key:
            winreg.SetValueEx(key, value.name, 0, winreg.REG_SZ, value.data)
    except PermissionError:
        raise RefusedError(
            f"setting {value.display()} needs an administrator",
            hint="run the command from an administrator terminal, or use --method link",
        ) from None


def _win_restore(value: RegistryValue, before: str | None) -> None:  # pragma: no cover
    winreg = _winreg()

    with winreg.CreateKeyEx(winreg.HKEY_LOCAL_MACHINE, value.key, 0, winreg.KEY_SET_VALUE) as key:
        if before is None:
            with contextlib.suppress(FileNotFoundError):
                winreg.DeleteValue(key, value.name)
        else:
            winreg.SetValueEx(key, value.name, 0, winreg.REG_SZ, before)


def _winreg() -> Any:  # pragma: no cover - Windows only
    import importlib

    return importlib.import_module("winreg")
