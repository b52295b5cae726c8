"""Which module registers each command, and which command a line names: known without typer,
so that `cli.quickrun` and `cli.app` agree on it."""

from __future__ import annotations

from collections.abc import Sequence

# The module that registers each command or command group on `app` when imported, in the
# order of --help (commands first, then the groups env, quota, schedule, profiles). A run
# imports only the module of the command it names: building every command's parser is start-up
# time that a Tab completion or `profiles list` would otherwise pay.
COMMANDS: dict[str, str] = {
    "scan": "scan", "ls": "ls", "where": "where", "which": "where", "doctor": "doctor",
    "move": "move", "restore": "move", "tune": "tune", "clean": "clean", "sweep": "sweep",
    "history": "history", "undo": "history", "env": "env", "quota": "quota",
    "schedule": "schedule", "profiles": "profiles",
}
_GLOBAL_OPTIONS_WITH_VALUE = ("--profiles-dir",)


def command_word(args: Sequence[str]) -> str | None:
    """The command `args` name (`profiles` of `--profiles-dir D profiles list`), when it is one
    of COMMANDS; None when `args` name none (`--help`, a typo, nothing yet)."""
    words = iter(args)
    for word in words:
        if word in _GLOBAL_OPTIONS_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
        elif word in ("--", "-h", "--help"):  # `-h scan` is the whole CLI's help
            return None
    return None
