"""What every command's body shares, without typer: global options, the profiles, output for a
person (rich, imported when first used) and for a program (the `--json` envelope).

A hot command (`scan`, `ls`, `doctor`, `profiles list`) runs without importing typer
(`cli.quickrun`), so its body and everything it calls import from here, never `cli.base`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from cachedoctor import collector
from cachedoctor.lazyre import lazy_pattern

if TYPE_CHECKING:
    from rich.console import Console

    from cachedoctor.profiles.loader import ProfileSet


class Options:
    """Global options, set by the app callback (a plain class: `--help` imports no msgspec)."""

    __slots__ = ("_profiles", "profiles_dirs")

    def __init__(self) -> None:
        self.profiles_dirs: list[str] = []
        self._profiles: ProfileSet | None = None


OPTIONS = Options()


def profile_set() -> ProfileSet:
    """All profiles (loaded once per process); invalid ones are reported on stderr and skipped."""
    if OPTIONS._profiles is None:
        from cachedoctor.profiles.loader import load_profiles

        OPTIONS._profiles = load_profiles(OPTIONS.profiles_dirs)
        for error in OPTIONS._profiles.errors:
            warn(f"skipping profile: {error}")
        collector.start_up_done()  # the index was the last of what the program starts with
    return OPTIONS._profiles


def _console(**options: Any) -> Console:
    """A rich Console that shows every string it renders (print, table cells, tree labels)
    through `printable`: a file name holding an ESC sequence is displayed, never obeyed; nor
    is one holding an emoji code (`:cd:` would be shown as a disc, even with markup off, and
    rich's table of codes is 2 ms to import)."""
    from rich.console import Console

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(printable(text), **kwargs)

    return SafeConsole(**{"emoji": False, **options})


def stdout_console() -> Console:
    """Rich output for stdout. Piped output is not cut to 80 columns: a table keeps its natural
    width so `cachedoctor scan | less` or a log shows whole paths."""
    terminal = sys.stdout.isatty()
    width = None if terminal or os.environ.get("COLUMNS") else 4096
    if terminal:
        return _console(highlight=False, soft_wrap=False, width=width)
    return _console(highlight=False, soft_wrap=False, width=width, file=TrimmedLines(sys.stdout))


class TrimmedLines:
    """A text stream that drops the spaces a line ends with: rich pads every table cell to its
    column's width, which a file or a pipe should not carry. Spaces are held back until the
    line goes on (they were inside it) or ends (they were padding)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._held = ""

    def write(self, text: str) -> int:
        lines = (self._held + text).split("\n")
        last = lines.pop()
        out = "".join(line.rstrip(" ") + "\n" for line in lines)
        kept = last.rstrip(" ")
        self._held = last[len(kept):]
        self._stream.write(out + kept)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, errors: the real stream's
        return getattr(self._stream, name)


def stderr_console() -> Console:
    return _console(stderr=True, highlight=False)


_CONTROL = lazy_pattern(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LONE_SURROGATE = lazy_pattern("[\ud800-\udc7f\udd00-\udfff]")  # not an undecodable byte


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (an ESC in a file name would recolour or
    rewrite the screen) and undecodable bytes are shown as escapes, `\\x1b`; so is a lone
    surrogate, which a Windows file name may hold (`\\ud800`)."""
    if text.isprintable():
        return text
    text = _LONE_SURROGATE().sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL().sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def warn(message: str) -> None:
    """A warning on stderr for a person; a `--json` run also lists it in the envelope."""
    from rich.markup import escape

    from cachedoctor.cli import output

    output.add_warning(message)
    stderr_console().print(f"[yellow]warning:[/yellow] {escape(printable(message))}", soft_wrap=True)


def info(message: str) -> None:
    """A line for a person on stderr (kept out of stdout so --json and pipes stay clean)."""
    stderr_console().print(printable(message), markup=False, highlight=False, soft_wrap=True)


def say(message: str) -> None:
    """A line of the command's own output for a person (a `--dry-run` plan), on stdout, where
    it can be piped or saved; notes and warnings stay on stderr (`info`, `warn`)."""
    sys.stdout.write(printable(message) + "\n")


def emit_json(document: Any, *, ok: bool | None = None) -> None:
    """The result of a `--json` run: printed once, in the envelope, when the run ends
    (`cachedoctor.cli.output`; docs/json.md)."""
    from cachedoctor.cli import output

    if output.SESSION.json:
        output.set_result(document, ok=ok)
    else:  # a command whose plain output is JSON itself (`profiles schema`)
        output.write_json(document)


def show_progress() -> bool:
    """Rich progress only for a person watching a terminal."""
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def start_command(name: str, profiles_dirs: list[str]) -> None:
    """What the global options and checks do before any command named `name` runs, whether
    typer parsed the line or `cli.quickrun` did: refuse root in another user's home (exit 2),
    take the extra profile folders, and say how to finish an interrupted move."""
    from cachedoctor import invoker

    note = invoker.check_this_run()
    if note is not None:
        warn(note)
    OPTIONS.profiles_dirs = list(profiles_dirs)
    if name not in ("move", "restore", "doctor"):  # those handle it themselves
        _warn_about_unfinished_operations()


def _warn_about_unfinished_operations() -> None:
    """An interrupted move must not go unnoticed: every command says how to finish it."""
    from cachedoctor.state import journal_dir

    if not journal_dir().is_dir():  # the common case, decided without importing the journal
        return
    from cachedoctor.relocate.journal import damaged, pending_operations

    for op in pending_operations():
        warn(f"{op.summary}; {op.what_to_do()}")
    for file, problem in damaged():
        op_id = file.rsplit("/", 1)[-1].removesuffix(".json")
        warn(f"the journal file {file} is damaged ({problem}): an interrupted move or restore "
             f"cannot be finished from it; its data is in the folders named *.cachedoctor-old-{op_id} "
             f"or *.cachedoctor-partial-{op_id} (`cachedoctor doctor` finds them)")
