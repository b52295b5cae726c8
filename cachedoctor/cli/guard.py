"""How a run ends, whichever parser read its line: the exit code of every failure, said on stderr
and in the `--json` envelope, never a traceback (`cli.app` adds what is typer's own: usage
errors and `typer.Exit`)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from cachedoctor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, CachedoctorError


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM/SIGHUP) raised inside a command, carried past typer, which would turn
    it into a silent exit code, to the one place that says what happened."""

    def __init__(self, cause: KeyboardInterrupt) -> None:
        super().__init__(str(cause))
        self.cause = cause


def guarded(call: Callable[[], int]) -> int:
    """`call()`'s exit code, or the code of what it raised, told to the user and the envelope."""
    from cachedoctor.cli import output

    try:
        return call()
    except Interrupted as exc:
        return _interrupted(exc.cause)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except CachedoctorError as exc:
        sys.stderr.write(f"error: {exc}\n")
        output.add_error(exc.exit_code, exc.kind, exc.message, exc.hint)
        return exc.exit_code
    except BrokenPipeError:  # `| head` has read enough: quiet, and the code typer's own gives
        from cachedoctor.cli.output import silence_stdout

        silence_stdout()
        return EXIT_FAILED
    except OSError as exc:  # a drive turned read-only, full, or failing: say which file, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"error: {where}{exc.strerror or exc}\n")
        output.add_error(EXIT_FAILED, "os", f"{where}{exc.strerror or exc}")
        _tell_what_is_unfinished()
        return EXIT_FAILED
    except (RecursionError, MemoryError) as exc:
        message = f"the input is too deeply nested or too large ({type(exc).__name__})"
        sys.stderr.write(f"error: {message}\n")
        output.add_error(EXIT_BAD_INPUT, "bad_input", message)
        return EXIT_BAD_INPUT
    except Exception as exc:
        log = _crash_log(exc)
        sys.stderr.write(f"error: unexpected {type(exc).__name__}: {exc}\n"
                         f"  the details are in {log}; please report it\n")
        output.add_error(EXIT_FAILED, "crash", f"unexpected {type(exc).__name__}: {exc}",
                         f"the details are in {log}")
        _tell_what_is_unfinished()
        return EXIT_FAILED


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Ctrl-C, SIGTERM or SIGHUP: say so, and where any interrupted operation stands (a move in
    its copy phase has already rolled back; a later phase is left to finish or roll back)."""
    from cachedoctor.cli import output
    from cachedoctor.cli.interrupts import Terminated

    sys.stderr.write("\ninterrupted\n")
    _tell_what_is_unfinished()
    code = 128 + exc.signum if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    output.add_error(code, "interrupted", "interrupted")
    return code


def _tell_what_is_unfinished() -> None:
    """After an interruption or a failure, say where each interrupted operation stands."""
    try:
        from cachedoctor.relocate.journal import pending_operations

        for op in pending_operations():
            sys.stderr.write(f"{op.summary}; nothing is lost: {op.what_to_do()}\n")
    except Exception:
        return


def _crash_log(exc: BaseException) -> str:
    import time
    import traceback

    from cachedoctor.state import log_dir

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        folder = log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}.log"
        path.write_text(text, encoding="utf-8")
        return str(path)
    except OSError:
        return "(the log folder is not writable; the traceback follows)\n" + text
