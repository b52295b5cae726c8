"""The host a command runs on, as plain data: OS family, environment and home.

Everything that depends on "where am I" takes a `Host`, so Windows, macOS and WSL
behaviour is testable on Linux by building a `Host` by hand.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

OsName = Literal["linux", "macos", "windows", "wsl"]
OS_NAMES: tuple[OsName, ...] = ("linux", "macos", "windows", "wsl")


@dataclass(frozen=True)
class Host:
    os: OsName
    env: Mapping[str, str] = field(default_factory=dict)
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

    @classmethod
    def current(cls) -> Host:
        return cls(os=current_os_name(), env=dict(os.environ), home=str(Path.home()))


def current_os_name() -> OsName:
    if sys.platform == "win32":
        return "windows"
    if sys.platform == "darwin":
        return "macos"
    if os.environ.get("WSL_DISTRO_NAME") or _kernel_mentions_microsoft():
        return "wsl"
    return "linux"


def _kernel_mentions_microsoft() -> bool:
    try:
        with open("/proc/sys/kernel/osrelease", encoding="ascii", errors="replace") as fh:
            return "microsoft" in fh.read().lower()
    except OSError:
        return False
