"""Assembles the CLI: global options, every command module, and error handling."""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

import typer

from cachedoctor.cli.base import OPTIONS, app, warn
from cachedoctor.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, CachedoctorError


@app.callback()
def _global_options(
    ctx: typer.Context,
    profiles_dir: Annotated[
        list[str] | None,
        typer.Option(
            "--profiles-dir",
            metavar="DIR",
            help="Extra folder of profile YAML files (repeatable; also CACHEDOCTOR_PROFILES_DIR). "
            "A profile here overrides a built-in one with the same id.",
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Show the version and exit.")
    ] = False,
) -> None:
    """Find, measure, relocate, tune and clean the caches that fill your system drive."""
    if version:
        from cachedoctor import __version__

        typer.echo(f"cachedoctor {__version__}")
        raise typer.Exit(0)
    OPTIONS.profiles_dirs = list(profiles_dir or [])
    if ctx.invoked_subcommand not in ("move", "restore", "doctor"):  # those handle it themselves
        _warn_about_unfinished_operations()


def _warn_about_unfinished_operations() -> None:
    """An interrupted move must not go unnoticed: every command says how to finish it."""
    from cachedoctor.state import journal_dir

    if not journal_dir().is_dir():  # the common case, decided without importing the journal
        return
    from cachedoctor.relocate.journal import pending_operations

    for op in pending_operations():
        warn(f"{op.summary}; finish it with `{op.finish_command}` or roll it back with `{op.rollback_command}`")


# Command modules register themselves on `app` when imported, in this order in --help
# (commands first, then the command groups: env, quota, schedule, profiles).
COMMAND_MODULES = ("scan", "where", "doctor", "move", "tune", "clean", "sweep", "history", "env", "quota",
                   "schedule", "profiles")
for _name in COMMAND_MODULES:
    importlib.import_module(f"cachedoctor.cli.{_name}")


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code; user-facing errors never show a traceback."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="cachedoctor", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # usage errors: typer prints them with the usage line
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {exc.format_message()}\n")
        return exc.exit_code or EXIT_BAD_INPUT
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("\ninterrupted\n")
        return EXIT_INTERRUPTED
    except CachedoctorError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except BrokenPipeError:
        return 0
