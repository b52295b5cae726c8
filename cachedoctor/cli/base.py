"""What every typer command shares: the Typer app, the common options, confirmation; and, for
the command modules' convenience, the typer-free helpers of `cli.common`.

Commands stay thin: parse, call a core function, render. Heavy modules (rich tables, psutil,
YAML, the walker) are imported inside command bodies so `--help` stays fast.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cachedoctor.cli.common import (
    OPTIONS,
    emit_json,
    info,
    printable,
    profile_set,
    say,
    show_progress,
    stderr_console,
    stdout_console,
    warn,
)
from cachedoctor.cli.guard import Interrupted
from cachedoctor.errors import EXIT_BAD_INPUT, UserInputError


class _Group(TyperGroup):
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted(exc) from exc


app = typer.Typer(
    cls=_Group,
    name="cachedoctor",
    help="Find, measure, relocate, tune and clean the caches that fill your system drive.",
    invoke_without_command=True,  # `cachedoctor` alone: a hint where to start (cli/app.py)
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking.")]


def confirm(question: str, *, yes: bool) -> bool:
    """Ask on the terminal; `--yes` answers for the user. Without a terminal, refuse clearly."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UserInputError(
            f"{question} — no terminal to ask on; pass --yes to go ahead or --dry-run to preview"
        )
    return typer.confirm(question, default=False, err=True)


def exit_with(code: int) -> None:
    raise typer.Exit(code)


__all__ = [
    "EXIT_BAD_INPUT",
    "OPTIONS",
    "DryRunOption",
    "JsonOption",
    "YesOption",
    "app",
    "confirm",
    "emit_json",
    "exit_with",
    "info",
    "printable",
    "profile_set",
    "say",
    "show_progress",
    "stderr_console",
    "stdout_console",
    "warn",
]
