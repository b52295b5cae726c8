"""Pure path-template resolution: (template, Host) -> concrete path string.

Templates expand `~`, `%VAR%`, `$VAR`, `${VAR}` and `${VAR:-fallback}` (the fallback is itself a
template). An `XDG_*` variable that is unset, empty or relative counts as unset, as the XDG
Base Directory spec says. Globs (`*`, `?`, `[..]`) are left in place for `expand_globs`.
Nothing here touches the filesystem except `expand_globs`.
"""

from __future__ import annotations

import glob
import ntpath
import posixpath
import re

from cachedoctor.errors import UserInputError
from cachedoctor.host import Host

_TOKEN = re.compile(
    r"%(?P<win>[A-Za-z_][A-Za-z0-9_()]*)%"
    r"|\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<fallback>[^{}]*(?:\{[^{}]*\}[^{}]*)*))?\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)
_GLOB_CHARS = re.compile(r"[*?\[]")


class UnresolvedVariable(LookupError):
    """A template names a variable that is unset and has no fallback."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def lookup(name: str, host: Host) -> str | None:
    """A variable's usable value, or None when it must count as unset."""
    value = host.getenv(name)
    if not value:
        return None
    if name.upper().startswith("XDG_") and not _is_absolute(value, host):
        return None
    return value


def expand(template: str, host: Host) -> str:
    """Expand one template for `host`; raises UnresolvedVariable for an unset variable."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group("win") or match.group("braced") or match.group("bare")
        value = lookup(name, host)
        if value is not None:
            return value
        fallback = match.group("fallback")
        if fallback is not None:
            return expand(fallback, host)
        raise UnresolvedVariable(name)

    text = _expand_tilde(template, host)
    text = _TOKEN.sub(substitute, text)
    text = _expand_tilde(text, host)  # a fallback such as ${XDG_CACHE_HOME:-~/.cache}
    return normalize(text, host)


def try_expand(template: str, host: Host) -> str | None:
    try:
        return expand(template, host)
    except UnresolvedVariable:
        return None


def normalize(path: str, host: Host) -> str:
    if host.is_windows:
        return ntpath.normpath(path.replace("/", "\\"))
    return posixpath.normpath(path) if path else path


def _expand_tilde(text: str, host: Host) -> str:
    if text == "~" or text.startswith(("~/", "~\\")):
        return host.home + text[1:]
    return text


def _is_absolute(path: str, host: Host) -> bool:
    return ntpath.isabs(path) if host.is_windows else path.startswith("/")


def has_glob(path: str) -> bool:
    return bool(_GLOB_CHARS.search(path))


def expand_globs(path: str) -> list[str]:
    """Concrete existing paths for a resolved template (impure: reads the filesystem)."""
    if not has_glob(path):
        return [path]
    return sorted(glob.glob(path))


_WIN_DRIVE = re.compile(r"^(?P<drive>[A-Za-z]):(?:[\\/](?P<rest>.*))?$")


def to_host_path(text: str, host: Host) -> str:
    """A user-typed destination as a path of this host.

    On WSL, `D:\\ai-cache` means the Windows drive mounted at `/mnt/d/ai-cache`. On Linux or
    macOS a Windows drive path is a mistake and gets a clear error.
    """
    text = _expand_tilde(text.strip(), host)
    match = _WIN_DRIVE.match(text)
    if match and not host.is_windows:
        if host.os != "wsl":
            raise UserInputError(
                f"{text!r} is a Windows drive path, but this is {host.os}: give a path of this system"
            )
        rest = (match.group("rest") or "").replace("\\", "/").strip("/")
        return posixpath.normpath(f"/mnt/{match.group('drive').lower()}/{rest}")
    return normalize(text, host)
