"""Windows seam: user environment variables in `HKCU\\Environment`, then a `WM_SETTINGCHANGE`
broadcast so Explorer (and programs it starts) pick them up.

The decisions (value type, the plan, the PowerShell line) are pure and tested on every OS; the
registry and the broadcast go through `Registry`, whose real implementation imports `winreg`
and `ctypes.windll` lazily and only on Windows.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

ENV_KEY = "Environment"  # under HKEY_CURRENT_USER
REG_SZ = 1
REG_EXPAND_SZ = 2
HWND_BROADCAST = 0xFFFF
WM_SETTINGCHANGE = 0x001A
SMTO_ABORTIFHUNG = 0x0002
BROADCAST_TIMEOUT_MS = 5000

_WIN_VAR = re.compile(r"%[^%\s]+%")


def value_type(value: str) -> int:
    """REG_EXPAND_SZ when the value refers to another variable (`%USERPROFILE%\\x`), else REG_SZ."""
    return REG_EXPAND_SZ if _WIN_VAR.search(value) else REG_SZ


@dataclass(frozen=True)
class RegistryOp:
    action: str  # set, delete
    name: str
    value: str | None = None
    type: int | None = None

    def describe(self) -> str:
        if self.action == "delete":
            return f"delete HKCU\\Environment\\{self.name}"
        kind = "REG_EXPAND_SZ" if self.type == REG_EXPAND_SZ else "REG_SZ"
        return f"set HKCU\\Environment\\{self.name} = {self.value} ({kind})"


def plan_ops(values: Mapping[str, str | None], current: Mapping[str, tuple[str, int] | None]
             ) -> list[RegistryOp]:
    """Registry operations that bring `current` (name -> (value, type) or None) to `values`
    (name -> value, None meaning delete); no op for what is already right."""
    ops = []
    for name in sorted(values):
        value = values[name]
        have = current.get(name)
        if value is None:
            if have is not None:
                ops.append(RegistryOp("delete", name))
            continue
        wanted = (value, value_type(value))
        if have != wanted:
            ops.append(RegistryOp("set", name, value, wanted[1]))
    return ops


def powershell_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def apply_now(values: Mapping[str, str | None]) -> str:
    """PowerShell line for the current console (new consoles see the registry change)."""
    parts = []
    for name in sorted(values):
        value = values[name]
        if value is None:
            parts.append(f"Remove-Item Env:{name} -ErrorAction SilentlyContinue")
        else:
            parts.append(f"$env:{name} = {powershell_quote(value)}")
    return "; ".join(parts)


class Registry(Protocol):
    def read(self, name: str) -> tuple[str, int] | None: ...
    def write(self, name: str, value: str, type_: int) -> None: ...
    def delete(self, name: str) -> None: ...
    def broadcast(self) -> bool: ...


def _winreg() -> Any:  # pragma: no cover - Windows only
    import importlib

    return importlib.import_module("winreg")


class WinRegistry:  # pragma: no cover - runs on Windows only
    """HKCU\\Environment through winreg; the broadcast through user32.SendMessageTimeoutW."""

    def read(self, name: str) -> tuple[str, int] | None:
        winreg = _winreg()
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, ENV_KEY, 0, winreg.KEY_READ) as key:
            try:
                value, kind = winreg.QueryValueEx(key, name)
            except FileNotFoundError:
                return None
        return str(value), int(kind)

    def write(self, name: str, value: str, type_: int) -> None:
        winreg = _winreg()
        with winreg.CreateKeyEx(winreg.HKEY_CURRENT_USER, ENV_KEY, 0, winreg.KEY_SET_VALUE) as key:
            winreg.SetValueEx(key, name, 0, type_, value)

    def delete(self, name: str) -> None:
        winreg = _winreg()
        with winreg.OpenKey(winreg.HKEY_CURRENT_USER, ENV_KEY, 0, winreg.KEY_SET_VALUE) as key, \
                contextlib.suppress(FileNotFoundError):
            winreg.DeleteValue(key, name)

    def broadcast(self) -> bool:
        import ctypes
        from ctypes import wintypes

        result = wintypes.DWORD()  # type: ignore[attr-defined,unused-ignore]
        ok = ctypes.windll.user32.SendMessageTimeoutW(  # type: ignore[attr-defined,unused-ignore]
            HWND_BROADCAST, WM_SETTINGCHANGE, 0, "Environment", SMTO_ABORTIFHUNG,
            BROADCAST_TIMEOUT_MS, ctypes.byref(result),
        )
        return bool(ok)


SYSTEM_ENV_KEY = r"SYSTEM\CurrentControlSet\Control\Session Manager\Environment"  # HKLM


def read_persistent(name: str) -> Any:  # pragma: no cover - Windows only
    """What a new process started by Explorer gets for `name`: the user value (HKCU), else
    the machine value (HKLM), expanded when it is REG_EXPAND_SZ."""
    from cachedoctor.locate.world import EnvValue

    winreg = _winreg()
    for hive, key, where in ((winreg.HKEY_CURRENT_USER, ENV_KEY, "HKCU\\Environment"),
                             (winreg.HKEY_LOCAL_MACHINE, SYSTEM_ENV_KEY, "HKLM\\" + SYSTEM_ENV_KEY)):
        try:
            with winreg.OpenKey(hive, key, 0, winreg.KEY_READ) as handle:
                value, kind = winreg.QueryValueEx(handle, name)
        except OSError:
            continue
        text = str(value)
        if kind == REG_EXPAND_SZ:
            text = winreg.ExpandEnvironmentStrings(text)
        from cachedoctor.envvars import managed_variables
        from cachedoctor.host import Host

        managed = managed_variables(Host.current()).get(name) == str(value)
        return EnvValue(text, f"{where}\\{name}", managed)
    return None


def apply_ops(ops: list[RegistryOp], registry: Registry) -> bool:
    """Run the operations, then broadcast once; returns whether the broadcast was delivered."""
    for op in ops:
        if op.action == "delete":
            registry.delete(op.name)
        else:
            assert op.value is not None and op.type is not None
            registry.write(op.name, op.value, op.type)
    return registry.broadcast() if ops else True
