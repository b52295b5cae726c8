"""POSIX seam: the managed block in shell start-up files, fish and systemd environment.d.

Pure functions render and splice text; `plan` says which file gets which new content. Nothing
here writes: the caller writes the planned files atomically.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from cachedoctor.host import Host
from cachedoctor.lazyre import lazy_pattern
from cachedoctor.locate.shellenv import BEGIN, END, later_assignments

if TYPE_CHECKING:
    from cachedoctor.locate.files import FileView
    from cachedoctor.locate.shellenv import Assignment

NOTE = "# Managed by cachedoctor (`cachedoctor env set/unset`); edits inside this block are replaced."

SHELL_FILES = (".profile", ".bash_profile", ".bash_login", ".bashrc", ".zshenv", ".zshrc")
# The file a login shell surely reads, created for the block when none of SHELL_FILES it reads
# exists: bash reads the first of .bash_profile, .bash_login, .profile; zsh never reads .profile
# and reads .zshrc only when interactive, but .zshenv always (zsh manual, "Startup Files").
_LOGIN_FILES = {"bash": (".bash_profile", ".bash_login", ".profile"), "sh": (".profile",),
                "dash": (".profile",), "ksh": (".profile",), "zsh": (".zshenv",)}
_ZSH_FILES = (".zshenv", ".zshrc")
NAME_RE = lazy_pattern(r"^[A-Za-z_][A-Za-z0-9_]*$")
ReadFn = Callable[[Path], "str | None"]
_ENVD_BARE = lazy_pattern(r"^[A-Za-z0-9_@%+=:,./-]*$")


class FilePlan(msgspec.Struct, frozen=True):
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is to be deleted (it was ours and is now empty)
    kind: str  # sh, fish, environment.d

    @property
    def changed(self) -> bool:
        return self.before != self.after


def sh_line(name: str, value: str) -> str:
    return f"export {name}={shlex.quote(value)}"


def fish_quote(value: str) -> str:
    """fish single quotes: only `\\` and `'` need a backslash."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_line(name: str, value: str) -> str:
    return f"set -gx {name} {fish_quote(value)}"


def envd_quote(value: str) -> str:
    """A literal value for systemd's environment.d (`KEY=VALUE`).

    systemd expands `$VAR` even inside quotes; `$$` is a literal `$`. Inside double quotes a
    backslash escapes `\\` and `"`.
    """
    if _ENVD_BARE().match(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return f'"{escaped}"'


def render_block(values: Mapping[str, str], kind: str, newline: str = "\n") -> str:
    """The managed block (markers included, ending with a newline); empty for no variables.

    sh and fish split lines only at LF: in a CRLF file (the file's own line endings are kept)
    each assignment ends with ` #`, so the CR is inside a comment, not the end of the value."""
    if not values:
        return ""
    if kind == "environment.d":
        body = [f"{name}={envd_quote(values[name])}" for name in sorted(values)]
    elif kind == "fish":
        body = [fish_line(name, values[name]) for name in sorted(values)]
    else:
        body = [sh_line(name, values[name]) for name in sorted(values)]
    if newline == "\r\n" and kind != "environment.d":
        body = [line + " #" for line in body]
    return newline.join([BEGIN, NOTE, *body, END]) + newline


class MarkerError(ValueError):
    """The file's cachedoctor markers are damaged: a BEGIN without its END (or the reverse), or
    two blocks. Editing it would guess which lines are ours, and could delete the user's own."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line, self.problem = line, problem


def find_block(text: str) -> tuple[int, int] | None:
    """Character span of the managed block, from the start of the BEGIN line through the END
    line's line break; None when the file has no block. Raises MarkerError when the markers
    are not exactly one BEGIN followed by one END."""
    marks = [(m.start(), m.group(1)) for m in _MARKER().finditer(text)]
    if not marks:
        return None
    begins = [pos for pos, kind in marks if kind == BEGIN]
    ends = [pos for pos, kind in marks if kind == END]

    def line(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    if len(begins) > 1 or len(ends) > 1:
        extra = (begins[1:] or ends[1:])[0]
        raise MarkerError(line(extra), "a second cachedoctor block starts or ends here; keep one "
                          f"block ({BEGIN!r} ... {END!r}) and delete the other marker lines")
    if not begins or not ends:
        only = (begins or ends)[0]
        missing = END if begins else BEGIN
        raise MarkerError(line(only), f"this cachedoctor marker has no matching {missing!r} line; "
                          "put it back (or delete this marker line) so the block is whole")
    start, end_line = begins[0], ends[0]
    if end_line < start:
        raise MarkerError(line(end_line), f"{END!r} comes before {BEGIN!r}; put them back in order")
    stop = text.find("\n", end_line)
    return start, len(text) if stop < 0 else stop + 1


_MARKER = lazy_pattern(rf"^({re.escape(BEGIN)}|{re.escape(END)})[ \t]*\r?$", re.MULTILINE)


def splice(text: str, values: Mapping[str, str], kind: str) -> str:
    """`text` with its managed block replaced (or appended, or removed); nothing else changes.

    A file without a final line break keeps that style: the block is appended after a line
    break of its own and itself ends without one, so removing a block that ends the file
    without a line break also removes the one before it, giving back the file byte for byte."""
    newline = "\r\n" if "\r\n" in text else "\n"
    block = render_block(values, kind, newline)
    span = find_block(text)
    if span is not None:
        start, stop = span
        if stop == len(text) and not text.endswith("\n"):
            if not block:
                return text[:start].removesuffix("\n").removesuffix("\r")
            block = block.removesuffix(newline)
        return text[:start] + block + text[stop:]
    if not block:
        return text
    if text and not text.endswith("\n"):
        return text + newline + block.removesuffix(newline)
    return text + block


def block_values(text: str) -> dict[str, str]:
    """Variables set in a managed sh block (for reporting; the store is the source of truth)."""
    span = find_block(text)
    if span is None:
        return {}
    found: dict[str, str] = {}
    for line in text[span[0]:span[1]].splitlines():
        if line.startswith("export ") and "=" in line:
            name, _, quoted = line[len("export "):].partition("=")
            parts = shlex.split(quoted)
            found[name] = parts[0] if parts else ""
    return found


def config_home(host: Host) -> Path:
    xdg = host.getenv("XDG_CONFIG_HOME")
    return Path(xdg) if xdg and xdg.startswith("/") else Path(host.home) / ".config"


def fish_file(host: Host) -> Path:
    """fish runs conf.d/*.fish first and config.fish last (fish docs, "Configuration files"):
    the block goes at the end of config.fish, where a user's `set -gx` before it cannot win."""
    return config_home(host) / "fish" / "config.fish"


def old_fish_file(host: Host) -> Path:
    """Where older versions put the fish block (conf.d runs before config.fish, so a user's
    config.fish won): only removed now."""
    return config_home(host) / "fish" / "conf.d" / "cachedoctor.fish"


def envd_file(host: Host) -> Path:
    return config_home(host) / "environment.d" / "60-cachedoctor.conf"


def target_files(host: Host, files: FileView | None = None) -> list[tuple[Path, str, bool]]:
    """(file, kind, ours) for every file that gets the block on this host.

    Shell files that exist get the block, and so does the file the user's login shell
    (`$SHELL`, else the passwd entry) reads when none of those it reads exists (bash, sh, ksh:
    `~/.profile`; zsh: `~/.zshenv`, which every zsh reads, login or not, interactive or not, and
    which a configured zsh (a `.zshrc`) gets too); with no file and no known shell,
    `~/.profile` (Linux) or `~/.zshenv` (macOS, whose default shell is zsh) is created. fish
    gets the end of its config.fish when fish is configured or is the login shell; systemd user sessions (Linux)
    get an environment.d file. `files`: the view to look in (default: this machine).
    """
    from cachedoctor.locate.loginshell import login_shell, shell_name

    exists = files.lexists if files is not None else os.path.lexists
    home = Path(host.home)
    names = [name for name in SHELL_FILES if exists(str(home / name))]
    shell = shell_name(login_shell(host))
    wanted = _LOGIN_FILES.get(shell or "")
    if wanted and not any(name in names for name in wanted):
        names.append(wanted[-1])
    if any(name in names for name in _ZSH_FILES) and ".zshenv" not in names:
        names.append(".zshenv")  # a configured zsh: `zsh -l -c` (scripts, IDEs) reads only this
    if not names:
        names = [".zshenv" if host.os == "macos" else ".profile"]
    out = [(home / name, "sh", False) for name in names]
    is_dir = files.isdir if files is not None else os.path.isdir
    if shell == "fish" or is_dir(str(config_home(host) / "fish")):
        out.append((fish_file(host), "fish", False))
    if host.os in ("linux", "wsl"):
        out.append((envd_file(host), "environment.d", True))
    return out


# Which shells read a start-up file when a new session starts (bash's own manual and zsh's
# "Startup Files"; bash reads only the first of .bash_profile, .bash_login and .profile, all
# of which get the block when they exist; `.bashrc`/`.zshrc` only for interactive shells).
_READ_BY = {".profile": ("sh", "dash", "ksh", "bash"), ".bash_profile": ("bash",),
            ".bash_login": ("bash",), ".zshenv": ("zsh",)}
# What to create so a shell that gets nothing is covered by the same command run again.
_COVERED_BY = {"bash": "~/.profile", "sh": "~/.profile", "dash": "~/.profile",
               "ksh": "~/.profile", "zsh": "~/.zshenv", "fish": "the folder ~/.config/fish"}


class Coverage(msgspec.Struct, frozen=True):
    """Which installed shells a change to the managed block reaches, through which file."""

    seen_by: dict[str, str]  # shell -> the file it reads the block from
    missed: dict[str, str]  # installed shell -> what to create so it is covered too


def coverage(host: Host, files: FileView | None = None) -> Coverage:
    """The shells installed on `host` (on its PATH) that new sessions will see the block in,
    and those that get nothing (fish without ~/.config/fish, zsh without a .zshenv...)."""
    import shutil

    reads: dict[str, str] = {}
    for path, kind, _ours in target_files(host, files):
        shells = ("fish",) if kind == "fish" else _READ_BY.get(path.name, ())
        for shell in shells:
            reads.setdefault(shell, str(path))
    search = host.getenv("PATH") or os.defpath
    installed = [name for name in _COVERED_BY if shutil.which(name, path=search)]
    return Coverage({name: reads[name] for name in installed if name in reads},
                    {name: _COVERED_BY[name] for name in installed if name not in reads})


def all_files(host: Host) -> list[tuple[Path, str, bool]]:
    """Every file that may hold a block (for removal), whether or not it would get a new one."""
    home = Path(host.home)
    files = [(home / name, "sh", False) for name in SHELL_FILES]
    return [*files, (fish_file(host), "fish", False), (old_fish_file(host), "fish", True),
            (envd_file(host), "environment.d", True)]


def overridden_by(values: Mapping[str, str], host: Host, files: FileView
                  ) -> dict[str, list[Assignment]]:
    """name -> the user's own lines that the login shell runs after cachedoctor's block (as
    setting `values` would write it) and that set (or unset) the variable again: with them, a
    variable cachedoctor writes does not reach new sessions. Read from `files` (the world a
    change is planned in) with the planned block written in."""
    from cachedoctor.locate.files import OverlayFiles
    from cachedoctor.locate.loginshell import session_of

    planned = plan(values, host, lambda path: files.read_text(str(path)))
    after = OverlayFiles(files, {str(p.path): p.after for p in planned if p.changed})
    blocks = [str(p.path) for p in planned if p.kind in ("sh", "fish") and p.after is not None]
    session = session_of(host)
    found = {name: later_assignments(name, blocks, after, session) for name in values}
    return {name: lines for name, lines in found.items() if lines}


def plan(values: Mapping[str, str], host: Host, read: ReadFn,
         created: Collection[str] = ()) -> list[FilePlan]:
    """New content for every file that holds or should hold the block. Files in `created` were
    made by cachedoctor and are deleted, like its own files, once only the block was in them."""
    plans: list[FilePlan] = []
    targets = {path: (kind, ours) for path, kind, ours in target_files(host)}
    for path, kind, ours_by_kind in all_files(host):
        ours = ours_by_kind or str(path) in created
        before = read(path)
        try:
            if path not in targets and (before is None or find_block(before) is None):
                continue
            wanted = values if path in targets else {}
            after: str | None = splice(before or "", wanted, kind)
        except MarkerError as exc:
            from cachedoctor.errors import UserInputError

            raise UserInputError(f"{path}:{exc.line}: {exc.problem}; nothing was changed",
                                 hint="cachedoctor edits only its own block and will not guess "
                                      "which lines are yours") from None
        if ours and not (after or "").strip():
            after = None
        if before is None and after == "":
            after = None
        plans.append(FilePlan(path, before, after, kind))
    return plans


def apply_now(values: Mapping[str, str | None], host: Host) -> str:
    """The line that applies the change in the current shell."""
    fish = (host.getenv("SHELL") or "").endswith("fish")
    sets = {k: v for k, v in values.items() if v is not None}
    unsets = sorted(k for k, v in values.items() if v is None)
    parts: list[str] = []
    if fish:
        parts += [fish_line(k, sets[k]) for k in sorted(sets)]
        parts += [f"set -e {k}" for k in unsets]
        return "; ".join(parts)
    if sets:
        parts.append("export " + " ".join(f"{k}={shlex.quote(sets[k])}" for k in sorted(sets)))
    if unsets:
        parts.append("unset " + " ".join(unsets))
    return "; ".join(parts)


def launchctl_commands(values: Mapping[str, str | None]) -> list[list[str]]:
    """macOS: make GUI apps (started by launchd) see the change (until the next restart)."""
    return [["launchctl", "setenv", k, v] if v is not None else ["launchctl", "unsetenv", k]
            for k, v in sorted(values.items())]
