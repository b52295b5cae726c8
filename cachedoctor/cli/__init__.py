"""Console entry point. `--version` answers before anything heavy is imported."""

from __future__ import annotations

import os
import sys


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: handled exactly like Ctrl-C (a move in its copy phase rolls back)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def run_program() -> None:
    """The console script and `python -m cachedoctor`: `main()`, then the process ends without
    the interpreter's teardown.

    Freeing every module and object one by one at exit took about 20 ms of a 150 ms run of a
    hot command (measured; `python -c pass` tears down in about 1 ms), for memory the
    operating system reclaims at once anyway. `_end_process` is registered before anything else,
    so it is the last exit handler: Python has joined every thread and run every other handler
    (a temporary folder's removal, a fault-injection report) when it flushes stdout and stderr
    and ends the process with the exit code. Where `main` raises anything but SystemExit, the
    teardown runs as always. `main` itself exits normally, for a caller embedding it."""
    import atexit

    atexit.register(_end_process)
    try:
        main()
    except SystemExit as exc:  # the status the interpreter gives each kind of code
        code = exc.code
        _EXIT_CODE.append(0 if code is None else code if isinstance(code, int) else 1)
        raise
    _EXIT_CODE.append(0)


_EXIT_CODE: list[int] = []  # set by run_program once main has ended with a code


def _end_process() -> None:
    if not _EXIT_CODE:
        return
    code = _EXIT_CODE[0]
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # as the interpreter's own flush at exit: status 120
            code = 120
    os._exit(code & 0xFF)  # as exit(3) takes it: -1 is 255


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from cachedoctor import __version__

        sys.stdout.write(f"cachedoctor {__version__}\n")
        return
    quick = _quick_completion()  # read-only and quick: the default signal handling will do
    if quick is not None:
        sys.exit(quick)
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _terminate)
    try:
        _never_crash_on_encoding()
        code = _quick_run()
        if code is None:
            from cachedoctor.cli.app import run

            code = run(keep_specs=True)
    except KeyboardInterrupt as exc:  # during start-up, before run() handles it
        sys.stderr.write("\ninterrupted\n")
        code = 128 + exc.signum if isinstance(exc, Terminated) else 130
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
