"""Console entry point. `--version` answers before anything heavy is imported."""

from __future__ import annotations

import os
import sys


def run_program() -> None:
    """The console script and `python -m cachedoctor`: `main()`, then the process ends without
    the interpreter's teardown.

    Freeing every module and object one by one at exit took about 20 ms of a 150 ms run of a
    hot command (measured; `python -c pass` tears down in about 1 ms), for memory the
    operating system reclaims at once anyway. `_end_process` is registered before any other
    exit handler, so it runs last: Python has joined every thread and run every other handler
    (a temporary folder's removal, a fault-injection report) when it flushes stdout and stderr
    and ends the process with main's status. Where a handler was registered before it (a
    `sitecustomize`, a `.pth` hook such as coverage's), or `main` raises anything but
    SystemExit, the teardown runs as always. `main` itself exits normally, for a caller
    embedding it. The modules libraries import but a command rarely uses load when first
    used (`cli.deferred`), for this process only."""
    import atexit

    _AS_PROGRAM.append(True)
    if getattr(atexit, "_ncallbacks", lambda: 1)() == 0:  # CPython's count of the handlers
        atexit.register(_end_process)
    try:
        main()
    except SystemExit as exc:
        _EXIT_CODE.append(exit_status(exc.code))
        raise
    _EXIT_CODE.append(0)


_EXIT_CODE: list[int] = []  # set by run_program once main has ended with a code
_AS_PROGRAM: list[bool] = []  # set by run_program: the process ends when main does


def exit_status(code: object) -> int:
    """The status the interpreter exits with for `sys.exit(code)` (`_Py_HandleSystemExit`):
    0 for None, an int as a C long holds it (-1 when it does not fit), 1 for anything else
    (which it prints)."""
    if code is None:
        return 0
    if not isinstance(code, int):
        return 1
    half = 1 << (31 if os.name == "nt" else 63)  # a C long: 32 bits on Windows
    return code if -half <= code < half else -1


def _end_process() -> None:
    if not _EXIT_CODE:
        return
    code = _EXIT_CODE[0]
    try:
        try:
            code = _flush_output(code)
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM while a full pipe held the write
            from cachedoctor.cli.interrupts import Terminated

            code = 128 + exc.signum if isinstance(exc, Terminated) else 130
            _tell("\ninterrupted\n")
    finally:  # a second signal does not get past this handler either
        os._exit(code if os.name == "nt" else code & 0xFF)  # as exit(3) takes it: -1 is 255


def _flush_output(code: int) -> int:
    """Flush what is still buffered, as the interpreter does at exit (a closed stream is
    skipped). Output that cannot be written fails the command (1) and says why; a reader
    that has gone (`| head`) is not an error worth a word, as in `guard`."""
    from cachedoctor.errors import EXIT_FAILED

    for stream in (sys.stdout, sys.stderr):
        if stream is None or getattr(stream, "closed", False):
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            code = code or EXIT_FAILED
        except (OSError, ValueError) as exc:
            code = code or EXIT_FAILED
            if stream is sys.stdout:
                report_lost_output(exc)
    return code


def report_lost_output(exc: Exception) -> None:
    """stdout could not be written (a full disk, an I/O error): say so on stderr."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    _tell(f"error: the output could not be written: {reason}\n")


def _tell(text: str) -> None:
    try:
        if sys.stderr is not None:
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _discard_closed_streams() -> None:
    """Started with stdout or stderr closed (`cachedoctor scan >&-`), Python has None for it:
    what would go there is discarded, and a closed stdout is said once on stderr (not by a
    Tab: a shell shows stderr on the command line being edited)."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the whole run
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the whole run
        if not os.environ.get("_CACHEDOCTOR_COMPLETE"):
            _tell("warning: stdout is closed: the output is discarded\n")


def main() -> None:
    from cachedoctor import collector

    collector.pause_start_up()  # until the profiles are loaded or typer runs the line
    try:
        _main()
    finally:
        collector.resume()  # (for a caller embedding main; the process usually ends here)


def _main() -> None:
    from cachedoctor import collector

    _discard_closed_streams()
    if sys.argv[1:] in (["--version"], ["-V"]):
        from cachedoctor import __version__

        sys.stdout.write(f"cachedoctor {__version__}\n")
        return
    quick = _quick_completion()  # read-only and quick: the default signal handling will do
    if quick is not None:
        sys.exit(quick)
    if _AS_PROGRAM:  # (after the answers above, which load no such library)
        from cachedoctor.cli import deferred

        deferred.install()
    from cachedoctor.cli import interrupts

    try:
        try:
            interrupts.install()
            _never_crash_on_encoding()
            code = _quick_run()
            if code is None:
                from cachedoctor.cli.app import run

                collector.start_up_done()
                code = run(keep_specs=True)
        finally:
            if _AS_PROGRAM:  # from here on a signal stops only _end_process's flush, if any
                interrupts.exiting(interruptible=_flush_output)
    except KeyboardInterrupt as exc:  # during start-up, before run() handles it, or just after
        sys.stderr.write("\ninterrupted\n")
        code = 128 + exc.signum if isinstance(exc, interrupts.Terminated) else 130
    sys.exit(code)


def _quick_completion() -> int | None:
    """A Tab that completes a tool or a location id, answered without typer when the line is
    one `cli.quickcomplete` reads for sure: the exit code, or None for typer to answer."""
    if not os.environ.get("_CACHEDOCTOR_COMPLETE", "").startswith("complete_"):
        return None
    try:
        from cachedoctor.cli.quickcomplete import answer

        answered = answer()
    except KeyboardInterrupt:
        return 130
    except Exception:  # whatever went wrong, typer answers as it always has
        return None
    if answered is None:
        return None
    text, code = answered
    if text is not None and sys.stdout is not None:  # None: started with stdout closed
        try:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        except OSError:  # the shell stopped listening
            pass
    return code


def _quick_run() -> int | None:
    """A hot command (`scan`, `ls`, `doctor`, `profiles list`) run without typer when its line is one
    `cli.quickrun` reads for sure: the exit code, or None for typer to run it."""
    if os.environ.get("_CACHEDOCTOR_COMPLETE"):  # a Tab that quickcomplete left to typer
        return None
    from cachedoctor.cli.quickrun import attempt

    return attempt(sys.argv[1:])


def _never_crash_on_encoding() -> None:
    """On a non-UTF-8 stream (Windows pipes use the ANSI code page, e.g. cp1252) a character it
    cannot encode (the scan bars' block, a path's letter) would raise UnicodeEncodeError
    mid-output: replace it instead. UTF-8 streams (Linux, macOS) are left exactly as they are."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if not is_utf8(stream) and reconfigure is not None:
            reconfigure(errors="replace")


def is_utf8(stream: object) -> bool:
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
    return encoding in ("utf8", "utf8sig")
