"""Browser managed policies (`DiskCacheDir`, `DiskCacheSize`): where each browser reads them,
and reading them. The one table for every module that reads or writes a policy.

Linux (and WSL): JSON files in the browser's managed-policy folders, read in name order (a
later file wins a name). Windows: `Software\\Policies\\...` in HKLM, then HKCU (Chromium's
policy_loader_win.cc reads both hives; machine policy wins). macOS: the managed preferences
plist that a configuration profile installs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

import msgspec

from cachedoctor.host import Host
from cachedoctor.locate.files import FileView, OverlayFiles

Browser = Literal["chrome", "edge", "chromium"]
BROWSERS: tuple[Browser, ...] = get_args(Browser)

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
    """Every file of the browser's managed-policy folders, in the order the browser reads them:
    Chromium's ConfigDirPolicyLoader takes every regular file, whatever its name, sorted by
    path, and the last one that sets a policy wins
    (components/policy/core/common/config_dir_policy_loader.cc, LoadFromPath)."""
    found: list[str] = []
    for folder in LINUX_DIRS[browser]:
        found += sorted(p for p in files.glob(f"{folder}/*") if not files.isdir(p))
    return found


class PolicyRead(msgspec.Struct, frozen=True):
    """A managed policy as the browser reads it: its value and file (None: not set), and the
    policy files the browser skips (not JSON, not an object), which are worth saying."""

    value: Any = None
    where: str | None = None
    problems: tuple[str, ...] = ()


def policy_json(text: str) -> Any:
    """A policy file as Chromium's JSON reader takes it: strict JSON, but trailing commas
    allowed (JSON_ALLOW_TRAILING_COMMAS); raises ValueError for anything else."""
    import json  # where a policy file is there: a run with none does not import it

    from cachedoctor.configedit import ConfigSyntaxError
    from cachedoctor.configedit.jsonc import loads

    try:
        return json.loads(text)
    except ValueError:
        try:
            return loads(text, jsonc=True, comments=False)
        except (ConfigSyntaxError, RecursionError) as exc:
            raise ValueError(str(exc)) from None


def read_policy(browser: str, name: str, host: Host, files: FileView,
                registry: RegistryReader | None = None) -> PolicyRead:
    """A managed browser policy where the browser reads it (Windows: HKLM over HKCU; macOS:
    the managed preferences plist; Linux: the policy folders' files in name order)."""
    if host.is_windows:
        reader = registry or read_registry_value
        for hive in HIVES:
            value = reader(hive, REGISTRY_KEYS[browser], name)
            if value is not None:
                return PolicyRead(value, f"{hive}\\{REGISTRY_KEYS[browser]}\\{name}")
        return PolicyRead()
    if host.os == "macos":
        path = f"/Library/Managed Preferences/{MAC_DOMAINS[browser]}.plist"
        text = files.read_text(path)
        if text is None:
            return PolicyRead()
        import plistlib  # macOS only: not paid by every command that reads a policy

        try:
            data = plistlib.loads(text.encode("utf-8", "surrogateescape"))
        except (plistlib.InvalidFileException, ValueError) as exc:
            return PolicyRead(problems=(f"{path}: unreadable managed preferences ({exc})",))
        return (PolicyRead(data[name], path) if isinstance(data, dict) and name in data
                else PolicyRead())
    found = PolicyRead()
    problems: list[str] = []
    for path in linux_policy_files(browser, files):
        text = files.read_text(path)
        if text is None:
            continue
        try:
            data = policy_json(text)
        except ValueError as exc:
            problems.append(f"{path}: the browser skips this policy file: {exc}")
            continue
        if not isinstance(data, dict):
            problems.append(f"{path}: the browser skips this policy file: not a JSON object")
            continue
        if name in data:
            found = PolicyRead(data[name], path)
    return PolicyRead(found.value, found.where, tuple(problems))


def read_policy_after_write(browser: str, name: str, value: Any, host: Host,
                            files: FileView) -> PolicyRead:
    """The policy as the browser would read it once cachedoctor has written `value`: on Linux
    into its own file among the others (a file named after it in the same folder still wins),
    on Windows into HKLM (which beats HKCU)."""
    if host.is_windows:
        return PolicyRead(value, f"HKEY_LOCAL_MACHINE\\{REGISTRY_KEYS[browser]}\\{name}")
    own = own_policy_file(browser)
    try:
        current = policy_json(files.read_text(own) or "{}")
    except ValueError:
        current = {}
    import json

    data = {**(current if isinstance(current, dict) else {}), name: value}
    return read_policy(browser, name, host, OverlayFiles(files, {own: json.dumps(data)}))


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
