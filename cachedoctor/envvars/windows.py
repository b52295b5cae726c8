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
from pathlib import Path
from typing import Any, Protocol

import msgspec

from cachedoctor import statefile as sf

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


class RegistryOp(msgspec.Struct, frozen=True):
    action: str  # set, delete, restore (the value the user had before), keep (left alone)
    name: str
    value: str | None = None
    type: int | None = None

    def describe(self) -> str:
        where = f"HKCU\\Environment\\{self.name}"
        if self.action == "delete":
            return f"delete {where}"
        if self.action == "keep":
            return (f"leave {where} = {self.value}: it was changed since cachedoctor set it")
        kind = "REG_EXPAND_SZ" if self.type == REG_EXPAND_SZ else "REG_SZ"
        if self.action == "restore":
            return f"restore {where} = {self.value} ({kind}, the value it had before)"
        return f"set {where} = {self.value} ({kind})"


class Prior(msgspec.Struct, frozen=True):
    """What `HKCU\\Environment\\NAME` held before cachedoctor first set it (None: nothing),
    and the value cachedoctor set (`ours`). HKCU is the user's only store of their variables:
    a value they had is put back, with its type, when cachedoctor stops managing the name."""

    value: str | None
    type: int | None
    ours: str


Priors = dict[str, Prior]


def plan_ops(values: Mapping[str, str | None], current: Mapping[str, tuple[str, int] | None],
             priors: Mapping[str, Prior] | None = None) -> list[RegistryOp]:
    """Registry operations that bring `current` (name -> (value, type) or None) to `values`
    (name -> value, None meaning "no longer managed"); no op for what is already right. A name
    no longer managed gets back what it had before (`priors`), or is deleted if it had
    nothing, or is left alone if the user changed it since."""
    priors = priors or {}
    ops = []
    for name in sorted(values):
        value = values[name]
        have = current.get(name)
        prior = priors.get(name)
        if value is None:
            if prior is not None and have is not None and have[0] != prior.ours:
                ops.append(RegistryOp("keep", name, have[0], have[1]))
            elif prior is not None and prior.value is not None:
                if have != (prior.value, prior.type):
                    ops.append(RegistryOp("restore", name, prior.value, prior.type))
            elif have is not None:
                ops.append(RegistryOp("delete", name))
            continue
        wanted = (value, value_type(value))
        if have != wanted:
            ops.append(RegistryOp("set", name, value, wanted[1]))
    return ops


def next_priors(priors: Mapping[str, Prior], values: Mapping[str, str | None],
                current: Mapping[str, tuple[str, int] | None]) -> Priors:
    """The priors after `values` are applied: recorded when a name is first set, forgotten when
    it is no longer managed."""
    out = dict(priors)
    for name, value in values.items():
        if value is None:
            out.pop(name, None)
            continue
        have = current.get(name)
        known = out.get(name)
        out[name] = (Prior(have[0], have[1], value) if known is None and have is not None
                     else Prior(None, None, value) if known is None
                     else Prior(known.value, known.type, value))
    return out


def effective_values(ops: list[RegistryOp], values: Mapping[str, str | None]) -> dict[str, str | None]:
    """What each name holds after the operations (a restored value instead of "unset")."""
    out = dict(values)
    for op in ops:
        if op.action in ("restore", "keep"):
            out[op.name] = op.value
    return out


def powershell_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def apply_now(values: Mapping[str, str | None]) -> str:
    """PowerShell line for the current console (new consoles see the registry change).
    PowerShell does not expand `%VAR%` (`$env:X = '%USERPROFILE%\\x'` would make a literal
    folder), so such a value goes through [Environment]::ExpandEnvironmentVariables (.NET)."""
    parts = []
    for name in sorted(values):
        value = values[name]
        if value is None:
            parts.append(f"Remove-Item Env:{name} -ErrorAction SilentlyContinue")
        elif value_type(value) == REG_EXPAND_SZ:
            parts.append(f"$env:{name} = [Environment]::ExpandEnvironmentVariables("
                         f"{powershell_quote(value)})")
        else:
            parts.append(f"$env:{name} = {powershell_quote(value)}")
    return "; ".join(parts)


def priors_file() -> Path:
    from cachedoctor.state import config_dir

    return config_dir() / "env-windows-before.json"


def _parse_prior(value: Any, where: str) -> Prior:
    doc = sf.obj(value, where)
    return Prior(sf.field(doc, "value", sf.optional(sf.text), where),
                 sf.field(doc, "type", sf.optional(sf.integer), where),
                 sf.field(doc, "ours", sf.text, where))


PRIORS = sf.JsonKind[Priors](
    "env-windows-before.json", "record of the variables' earlier values", 1,
    parse=lambda doc: sf.field(doc, "variables", sf.map_of(_parse_prior)),
    dump=lambda priors: {"variables": {n: {"value": p.value, "type": p.type, "ours": p.ours}
                                       for n, p in sorted(priors.items())}},
    migrations=(lambda priors: {"variables": priors},),  # 0: the bare {NAME: {value, type, ours}}
)


def load_priors() -> Priors:
    return PRIORS.read(priors_file()) or {}


def save_priors(priors: Mapping[str, Prior]) -> None:
    PRIORS.write(priors_file(), dict(priors))


def change(values: Mapping[str, str | None], registry: Registry, *, dry_run: bool
           ) -> tuple[list[str], list[str], dict[str, str | None]]:
    """Bring HKCU\\Environment to `values`: (keys changed, messages, what each name holds
    now). Earlier values are recorded first, so a crash between the two leaves a record, never
    a lost value."""
    current = {name: registry.read(name) for name in values}
    priors = load_priors()
    ops = plan_ops(values, current, priors)
    messages = [("would " if dry_run else "") + op.describe() for op in ops]
    changed = [op for op in ops if op.action != "keep"]
    if not dry_run:
        after = next_priors(priors, values, current)
        recorded = {**priors, **{n: p for n, p in after.items() if n not in priors}}
        if recorded != priors:
            save_priors(recorded)  # new records first; forgotten ones only once applied
        if changed and not apply_ops(changed, registry):
            messages.append("the WM_SETTINGCHANGE broadcast timed out: sign out and in to be "
                            "sure every program sees the change")
        if after != recorded:
            save_priors(after)
    return ([f"HKCU\\Environment\\{op.name}" for op in changed], messages,
            effective_values(ops, values))


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
        if op.action == "keep":
            continue
        if op.action == "delete":
            registry.delete(op.name)
        else:
            assert op.value is not None and op.type is not None
            registry.write(op.name, op.value, op.type)
    return registry.broadcast() if ops else True
