"""The host a command runs on, as plain data: OS family, environment and home.

Everything that depends on "where am I" takes a `Host`, so Windows, macOS and WSL
behaviour is testable on Linux by building a `Host` by hand.

WSL is recognised by its interop (`/proc/sys/fs/binfmt_misc/WSLInterop`, or `WSLInterop-late`
on newer versions) or by `WSL_DISTRO_NAME`, which WSL sets in every session; not by "microsoft"
in the kernel release alone, which a Docker Desktop container on the WSL 2 backend shares
(git-credential-manager #1813 / PR #2064). On WSL the Windows user's folders, as this side
sees them (`/mnt/c/Users/<winuser>/AppData/...`), are added to the environment as
`WSL_WIN_USERPROFILE`, `WSL_WIN_LOCALAPPDATA`, `WSL_WIN_APPDATA` and `WSL_WIN_TEMP` when they
can be found without starting a Windows process: from the variables themselves when WSLENV
passes them with `/p` (learn.microsoft.com, "Share environment variables between WSL and
Windows"), else from the `.../AppData/Local/Microsoft/WindowsApps` folder WSL puts on PATH
(`appendWindowsPath`, on by default).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import msgspec

from cachedoctor.lazyre import lazy_pattern

OsName = Literal["linux", "macos", "windows", "wsl"]
OS_NAMES: tuple[OsName, ...] = ("linux", "macos", "windows", "wsl")


class Host(msgspec.Struct, frozen=True):
    os: OsName
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    home: str = ""

    @property
    def is_windows(self) -> bool:
        return self.os == "windows"

    @property
    def profile_keys(self) -> tuple[OsName, ...]:
        """Keys to look up in a profile's per-OS tables, most specific first (WSL is Linux)."""
        return ("wsl", "linux") if self.os == "wsl" else (self.os,)

    def getenv(self, name: str) -> str | None:
        """Environment lookup; case-insensitive on Windows, as the OS does it."""
        if self.is_windows:
            exact = self.env.get(name)
            if exact is not None:
                return exact
            upper = name.upper()
            for key, value in self.env.items():
                if key.upper() == upper:
                    return value
            return None
        return self.env.get(name)

    @property
    def wsl_distro(self) -> str | None:
        """The WSL distribution this runs in (what `wsl.exe -d` takes)."""
        return self.env.get("WSL_DISTRO_NAME") if self.os == "wsl" else None

    @classmethod
    def current(cls) -> Host:
        name = current_os_name()
        env = dict(os.environ)
        if name == "wsl":
            env = {**windows_side(env), **env}
        return cls(os=name, env=env, home=str(Path.home()))


WSL_INTEROP = ("/proc/sys/fs/binfmt_misc/WSLInterop", "/proc/sys/fs/binfmt_misc/WSLInterop-late")


def current_os_name() -> OsName:
    if sys.platform == "win32":
        return "windows"
    if sys.platform == "darwin":
        return "macos"
    if is_wsl(os.environ):
        return "wsl"
    return "linux"


def is_wsl(env: Mapping[str, str]) -> bool:
    """Inside WSL (1 or 2): its interop is registered, or it named the distribution."""
    return bool(env.get("WSL_DISTRO_NAME")) or any(os.path.exists(p) for p in WSL_INTEROP)


_WINDOWS_APPS = lazy_pattern(r"^(?P<profile>/.+/Users/[^/]+)/AppData/Local/Microsoft/WindowsApps/?$",
                           re.IGNORECASE)


def windows_side(env: Mapping[str, str]) -> dict[str, str]:
    """The Windows user's folders as WSL paths (see the module docstring); {} when unknown."""
    def posix(name: str) -> str | None:
        value = env.get(name, "")
        return value.rstrip("/") if value.startswith("/") else None

    profile = posix("USERPROFILE")
    if profile is None:
        for entry in env.get("PATH", "").split(":"):
            found = _WINDOWS_APPS().match(entry)
            if found:
                profile = found.group("profile")
                break
    if profile is None:
        return {}
    local = posix("LOCALAPPDATA") or f"{profile}/AppData/Local"
    return {"WSL_WIN_USERPROFILE": profile, "WSL_WIN_LOCALAPPDATA": local,
            "WSL_WIN_APPDATA": posix("APPDATA") or f"{profile}/AppData/Roaming",
            "WSL_WIN_TEMP": posix("TEMP") or f"{local}/Temp"}
