"""Assembles the CLI: global options, every command module, and error handling."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from cachedoctor.cli.base import app
from cachedoctor.cli.commands import COMMANDS, command_word
from cachedoctor.errors import EXIT_BAD_INPUT

START_HINT = """cachedoctor finds, measures, moves and cleans the caches that fill your drive.

Start with `cachedoctor scan`: what every cache weighs, where it lives, how full its drive is.
Every command: `cachedoctor --help`; one command's options: `cachedoctor COMMAND --help`."""


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
    if ctx.invoked_subcommand is None:
        typer.echo(START_HINT)
        raise typer.Exit(0)
    from cachedoctor.cli.common import start_command

    start_command(ctx.invoked_subcommand, list(profiles_dir or []))


def build_command(args: Sequence[str] | None = None) -> Any:
    """The click command tree a run with `args` needs: only the named command's module is
    imported, every module for anything else (None: the whole CLI, as --help shows it)."""
    word = command_word(args) if args is not None else None
    for module in dict.fromkeys([COMMANDS[word]] if word is not None else COMMANDS.values()):
        importlib.import_module(f"cachedoctor.cli.{module}")
    order = list(COMMANDS)  # registered in import order; listed in COMMANDS order
    app.registered_commands.sort(key=lambda info: order.index(_registered_name(info)))
    app.registered_groups.sort(key=lambda info: order.index(info.name or ""))
    command = typer.main.get_command(app)
    from cachedoctor.cli import completion

    completion.attach(command)
    return command


def _registered_name(info: Any) -> str:
    return str(info.name or info.callback.__name__.replace("_", "-"))


def command_path(command: Any, argv: list[str]) -> tuple[str, bool]:
    """The command an argv names (`env.set`; `quota.set` for the `quota TOOL SIZE` shorthand)
    and whether it asks for `--json`, read with the CLI's own parser in its resilient mode (no
    callback runs, no error is raised; the parse stops at a usage error, so a `--json` anywhere
    counts, in `cli.quickrun` too): the envelope of a run that fails early still names it."""
    try:
        ctx = command.make_context("cachedoctor", list(argv), resilient_parsing=True)
        parts: list[str] = []
        group, args = command, [*getattr(ctx, "_protected_args", ()), *ctx.args]
        while hasattr(group, "resolve_command") and args:
            name, sub, rest = group.resolve_command(ctx, args)
            if sub is None or name is None:
                break
            parts.append(name)
            ctx = sub.make_context(name, list(rest), parent=ctx, resilient_parsing=True)
            group, args = sub, [*getattr(ctx, "_protected_args", ()), *ctx.args]
        return ".".join(parts), bool(ctx.params.get("json_out")) or "--json" in argv
    except Exception:  # an argv the parser cannot even read: a usage error follows
        return "", "--json" in argv


def run(argv: list[str] | None = None, *, keep_specs: bool = False) -> int:
    """Run the CLI and return the exit code; user-facing errors never show a traceback. A
    `--json` run prints its envelope whatever happened (`cachedoctor.cli.output`). With
    `keep_specs` (the console entry point), a Tab or a hot command whose spec is stale keeps
    the spec of what typer built, so the next one runs without typer (`cli.spec`)."""
    from cachedoctor.cli import completion, output, quickcomplete, quickrun, spec

    args = list(sys.argv[1:] if argv is None else argv)
    if completion.requested():
        if (not keep_specs or quickcomplete.spec_is_current()
                or not spec.can_write(quickcomplete.spec_path())):
            command = build_command(completion.words_before_cursor())
        else:  # once per code version: the whole CLI, and the spec the next Tabs read
            stamp = spec.stamp()
            command = build_command(None)
            if stamp is not None:
                with contextlib.suppress(OSError):
                    quickcomplete.write_spec(command, stamp)
    else:
        run_stamp = quickrun.spec_to_keep(args) if keep_specs else None
        command = build_command(args)
        if run_stamp is not None:
            with contextlib.suppress(OSError):
                quickrun.remember(command, args, run_stamp)
    name, json_out = command_path(command, args)
    output.begin(name, json_out=json_out)
    code = _run(command, args)
    return output.finish(code)


def _run(command: Any, argv: list[str]) -> int:
    from cachedoctor.cli import output
    from cachedoctor.cli.guard import guarded

    def call() -> int:
        try:
            result = command.main(args=argv, prog_name="cachedoctor", standalone_mode=False)
        except typer.Exit as exc:
            return exc.exit_code
        except typer.TyperException as exc:  # usage errors: typer prints them with the usage line
            show = getattr(exc, "show", None)
            if callable(show):
                show()
            else:
                sys.stderr.write(f"error: {exc.format_message()}\n")
            output.add_error(exc.exit_code or EXIT_BAD_INPUT, "usage", exc.format_message())
            return exc.exit_code or EXIT_BAD_INPUT
        except typer.Abort:
            raise KeyboardInterrupt from None
        return result if isinstance(result, int) else 0

    return guarded(call)
