"""Browser managed policies (`DiskCacheDir`, `DiskCacheSize`): where each browser reads them,
and reading them. The one table for every module that reads or writes a policy.

Linux (and WSL): JSON files in the browser's managed-policy folders, read in name order (a
later file wins a name). Windows: `Software\\Policies\\...` in HKLM, then HKCU (Chromium's
policy_loader_win.cc reads both hives; machine policy wins). macOS: the managed preferences
plist that a configuration profile installs.
"""

from __future__ import annotations

import json
import plistlib
from collections.abc import Callable
from typing import Any, Literal

from cachedoctor.errors import CachedoctorError
from cachedoctor.host import Host
from cachedoctor.locate.files import FileView

Browser = Literal["chrome", "edge", "chromium"]
BROWSERS: tuple[Browser, ...] = ("chrome", "edge", "chromium")

LINUX_DIRS: dict[str, tuple[str, ...]] = {
    "chrome": ("/etc/opt/chrome/policies/managed",),
    "chromium": ("/etc/chromium/policies/managed", "/etc/chromium-browser/policies/managed"),
    # Microsoft documents Edge's Linux policy folder poorly; this is the path Edge reads.
    "edge": ("/etc/opt/edge/policies/managed",),
}
REGISTRY_KEYS: dict[str, str] = {
    "chrome": r"SOFTWARE\Policies\Google\Chrome",
    "edge": r"SOFTWARE\Policies\Microsoft\Edge",
    "chromium": r"SOFTWARE\Policies\Chromium",
}
HIVES = ("HKEY_LOCAL_MACHINE", "HKEY_CURRENT_USER")  # machine policy first: it wins
MAC_DOMAINS: dict[str, str] = {
    "chrome": "com.google.Chrome",
    "edge": "com.microsoft.Edge",
    "chromium": "org.chromium.Chromium",
}
OWN_FILE = "cachedoctor.json"  # the Linux policy file cachedoctor writes (and only that one)

RegistryReader = Callable[[str, str, str], Any]  # (hive, subkey, value name) -> data or None


def own_policy_file(browser: str) -> str:
    """The Linux policy file cachedoctor owns for `browser` (system root applied when reading
    through a FileView or `files.system_path`)."""
    return f"{LINUX_DIRS[browser][0]}/{OWN_FILE}"


def linux_policy_files(browser: str, files: FileView) -> list[str]:
    found: list[str] = []
    for folder in LINUX_DIRS[browser]:
        found += [p for p in files.glob(f"{folder}/*.json")]
    return found


def read_policy(browser: str, name: str, host: Host, files: FileView,
                registry: RegistryReader | None = None) -> tuple[Any, str] | None:
    """(value, where it was found) of a managed browser policy, or None when it is not set.

    A policy file that is not valid JSON raises CachedoctorError naming it: the browser
    ignores such a file, which is worth saying rather than guessing."""
    if host.is_windows:
        reader = registry or read_registry_value
        for hive in HIVES:
            value = reader(hive, REGISTRY_KEYS[browser], name)
            if value is not None:
                return value, f"{hive}\\{REGISTRY_KEYS[browser]}\\{name}"
        return None
    if host.os == "macos":
        path = f"/Library/Managed Preferences/{MAC_DOMAINS[browser]}.plist"
        text = files.read_text(path)
        if text is None:
            return None
        try:
            data = plistlib.loads(text.encode("utf-8", "surrogateescape"))
        except (plistlib.InvalidFileException, ValueError):
            return None
        return (data[name], path) if isinstance(data, dict) and name in data else None
    found: tuple[Any, str] | None = None
    for path in linux_policy_files(browser, files):
        text = files.read_text(path)
        if text is None:
            continue
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise CachedoctorError(f"{path}: unreadable policy file (the browser ignores it): {exc}") from None
        if isinstance(data, dict) and name in data:
            found = (data[name], path)
    return found


def read_registry_value(hive: str, subkey: str, name: str) -> Any:  # pragma: no cover - Windows
    import sys

    if sys.platform != "win32":
        return None
    import winreg

    try:
        with winreg.OpenKey(getattr(winreg, hive), subkey) as key:
            value, _kind = winreg.QueryValueEx(key, name)
            return value
    except OSError:
        return None


def expand_policy_path(value: str, host: Host) -> str:
    """Chrome's policy path variables (chromeenterprise.google "Supported directory variables"):
    `${user_home}`, `${user_name}`, `${local_app_data}`, `${roaming_app_data}`, `${machine_name}`."""
    table = {
        "${user_home}": host.home,
        "${user_name}": host.getenv("USERNAME") or host.getenv("USER") or "",
        "${local_app_data}": host.getenv("LOCALAPPDATA") or "",
        "${roaming_app_data}": host.getenv("APPDATA") or "",
        "${machine_name}": host.getenv("COMPUTERNAME") or host.getenv("HOSTNAME") or "",
        "${documents}": f"{host.home}\\Documents" if host.is_windows else f"{host.home}/Documents",
    }
    for variable, replacement in table.items():
        if replacement:
            value = value.replace(variable, replacement)
    return value
