"""Pure path-template resolution: (template, Host) -> concrete path string.

Templates expand `~`, `%VAR%`, `$VAR`, `${VAR}` and `${VAR:-fallback}` (the fallback is itself a
template). An `XDG_*` variable that is unset, empty or relative counts as unset, as the XDG
Base Directory spec says, and so does any optional variable that starts a path but holds no
absolute path (`PLAYWRIGHT_BROWSERS_PATH=0` means "inside each project", not a folder `0`).
Globs (`*`, `?`, `[..]`) are left in place for `expand_globs`.
Nothing here touches the filesystem except `expand_globs`, and `to_host_path` for a Windows
drive path typed on WSL (it asks `wslpath` and the mount table, `drives.windows_path`).
"""

from __future__ import annotations

import contextlib
import glob
import ntpath
import posixpath

from cachedoctor.errors import UserInputError
from cachedoctor.host import Host, OsName
from cachedoctor.lazyre import lazy_pattern

_NAME = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_]*")
_WIN_NAME = lazy_pattern(r"[A-Za-z_][A-Za-z0-9_()]*")


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


Trace = list[tuple[str, "str | None"]]
"""The optional variables (`${NAME:-fallback}`) a template looked at, in order, each with the
value it used (None: unset, so its fallback was taken)."""


def expand(template: str, host: Host, trace: Trace | None = None) -> str:
    """Expand one template for `host`; raises UnresolvedVariable for an unset variable.

    With `trace`, every `${NAME:-fallback}` looked up is appended to it: the first one with a
    value is the variable that decided where the path is."""
    text = _expand_tilde(template, host)
    text = _expand_variables(text, host, trace)
    text = _expand_tilde(text, host)  # a fallback such as ${XDG_CACHE_HOME:-~/.cache}
    return normalize(text, host)


def deciding_variable(trace: Trace) -> tuple[str, str] | None:
    """(name, value) of the variable that decided a traced expansion; None: the default."""
    for name, value in trace:
        if value is not None:
            return name, value
    return None


def _expand_variables(text: str, host: Host, trace: Trace | None = None) -> str:
    """A small scanner rather than a regex, because fallbacks nest: ${A:-${B:-~/x}/y}."""
    if "$" not in text and "%" not in text:  # a third of the templates: nothing to expand
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if text.startswith("${", i):
            end = _closing_brace(text, i + 1)
            name, has_fallback, fallback = text[i + 2 : end].partition(":-")
            if not (name.isascii() and name.isidentifier()):  # _NAME in full, sooner
                raise UserInputError(f"invalid variable reference ${{{name}}} in {text!r}")
            value = lookup(name, host)
            if value is not None and has_fallback and i == 0 and not _is_absolute(
                    _expand_tilde(value, host), host):
                value = None  # a value that starts the path but is no folder (`=0`, `off`)
            if has_fallback and trace is not None:
                trace.append((name, value))
            if value is None:
                if not has_fallback:
                    raise UnresolvedVariable(name)
                value = _expand_tilde(_expand_variables(fallback, host, trace), host)
            out.append(value)
            i = end + 1
        elif char == "$" and (bare := _NAME().match(text, i + 1)):
            out.append(_required(bare.group(), host))
            i = bare.end()
        elif char == "%" and (win := _WIN_NAME().match(text, i + 1)) and text.startswith("%", win.end()):
            out.append(_required(win.group(), host))
            i = win.end() + 1
        else:  # plain text up to the next `$` or `%`, in one step
            stop = min((at for at in (text.find("$", i + 1), text.find("%", i + 1)) if at >= 0),
                       default=len(text))
            out.append(text[i:stop])
            i = stop
    return "".join(out)


def _closing_brace(text: str, open_at: int) -> int:
    """The index of the `}` that closes the `{` at `open_at`, found `}` by `}` (a scan char by
    char was a third of a default scan's template work)."""
    depth, start = 0, open_at
    while (close := text.find("}", start)) >= 0:
        depth += text.count("{", start, close) - 1
        if depth == 0:
            return close
        start = close + 1
    raise UserInputError(f"unbalanced braces in path template {text!r}")


def _required(name: str, host: Host) -> str:
    value = lookup(name, host)
    if value is None:
        raise UnresolvedVariable(name)
    return value


class _AnyValue(dict[str, str]):
    """An environment in which every variable is set: for checking template syntax alone."""

    def __init__(self, value: str) -> None:
        super().__init__()
        self.value = value

    def get(self, key: str, default: object = None) -> str:  # type: ignore[override]
        return self.value


class _NoOptional(dict[str, str]):
    """An environment in which only required variables (`$NAME`, `%NAME%`) are set."""

    def __init__(self, value: str, optional: set[str]) -> None:
        super().__init__()
        self.value, self.optional = value, optional

    def get(self, key: str, default: object = None) -> str | None:  # type: ignore[override]
        return None if key in self.optional else self.value


def check_template(template: str, os_name: OsName | None = None) -> None:
    """Raise UserInputError when a template is malformed (unbalanced braces, bad names), or,
    for a path template of `os_name`, when it can expand to a relative path: a relative path
    would depend on the folder cachedoctor was started in."""
    flavour: OsName = "windows" if os_name == "windows" else "linux"
    root = "C:\\x" if flavour == "windows" else "/x"
    host = Host(flavour, _AnyValue(root), "C:\\Users\\u" if flavour == "windows" else "/home/u")
    trace: Trace = []
    path = expand(template, host, trace)
    if os_name is None:
        return
    candidates = [path]
    optional = {name for name, _ in trace}
    if optional and flavour != "windows":  # every fallback taken: the defaults must be absolute too
        with contextlib.suppress(UnresolvedVariable):
            candidates.append(expand(template, Host(flavour, _NoOptional(root, optional), host.home)))
    for candidate in candidates:
        if not _is_absolute(candidate, host):
            raise UserInputError(
                f"path template {template!r} gives the relative path {candidate!r}: "
                "start it with ~, a variable or an absolute path"
            )


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
    return any(char in path for char in "*?[")


def expand_globs(path: str) -> list[str]:
    """Concrete existing paths for a resolved template (impure: reads the filesystem)."""
    if not has_glob(path):
        return [path]
    return sorted(glob.glob(path))


_WIN_DRIVE = lazy_pattern(r"^(?P<drive>[A-Za-z]):(?:[\\/](?P<rest>.*))?$")
_SHELL_ATE_BACKSLASHES = lazy_pattern(r"^(?P<drive>[A-Za-z]):(?P<rest>[^\\/].*)$")


def to_host_path(text: str, host: Host) -> str:
    """A user-typed destination as a path of this host.

    On WSL, `D:\\ai-cache` means the Windows drive D: as WSL mounted it: translated by
    `wslpath` (honouring `[automount] root`) or the mount table, and refused when no DrvFs
    mount serves it (`drives.windows_path`). Typed unquoted in bash it arrives as `D:ai-cache`
    (the shell ate the backslash): that is refused with "quote the path". On Linux or macOS a
    Windows drive path is a mistake and gets a clear error.
    """
    text = _expand_tilde(text.strip(), host)
    match = _WIN_DRIVE().match(text)
    if match and not host.is_windows:
        if host.os != "wsl":
            raise UserInputError(
                f"{text!r} is a Windows drive path, but this is {host.os}: give a path of this system"
            )
        from cachedoctor.drives import windows_path

        return windows_path(match.group("drive"), match.group("rest") or "")
    eaten = _SHELL_ATE_BACKSLASHES().match(text)
    if eaten and host.os == "wsl":
        drive, rest = eaten.group("drive").upper(), eaten.group("rest")
        raise UserInputError(
            f"{text!r} looks like a Windows path whose backslashes the shell removed: quote "
            "the path", hint=f"write '{drive}:\\{rest}' in single quotes, or {drive}:/{rest}")
    return normalize(text, host)
