"""The output contract: what one run of a command prints for a program reading `--json`.

Every `--json` run prints exactly one document on stdout, the envelope (docs/json.md):

    {"schema": "cachedoctor.<command>/<version>", "ok": bool, "result": ..., "warnings": [...],
     "errors": [{"code": int, "kind": str, "message": str, "hint": str | null}]}

`<command>` is the command's path (`scan`, `env.set`, `schedule.status`). A command hands its
result over with `set_result`; what it warns about is collected as it is said on stderr; an
error that ends the run becomes `errors` and the document is still printed (`result` null), so
a program never has to parse stderr. `ok` is the exit code being 0 unless the command says
otherwise (`where` with a problem found). No rich, no typer here: a `--json` run pays for
neither.
"""

from __future__ import annotations

import sys
from typing import Any

from cachedoctor.errors import EXIT_FAILED

SCHEMA_PREFIX = "cachedoctor."
VERSIONS: dict[str, int] = {}  # command path -> its result's version, when not 1


class Session:
    """What the current run will print as its envelope (a plain class: `--help` imports no
    msgspec)."""

    __slots__ = ("command", "errors", "json", "ok", "printed", "result", "warnings")

    def __init__(self, command: str = "", json: bool = False) -> None:
        self.command = command
        self.json = json
        self.result: Any = None
        self.ok: bool | None = None  # None: decided by the exit code
        self.warnings: list[str] = []
        self.errors: list[dict[str, Any]] = []
        self.printed = False


SESSION = Session()


def begin(command: str, *, json_out: bool) -> Session:
    global SESSION
    SESSION = Session(command=command, json=json_out)
    return SESSION


def set_result(result: Any, *, ok: bool | None = None) -> None:
    SESSION.result = result
    if ok is not None:
        SESSION.ok = ok


def add_warning(message: str) -> None:
    SESSION.warnings.append(message)


def add_error(code: int, kind: str, message: str, hint: str | None = None) -> None:
    SESSION.errors.append({"code": code, "kind": kind, "message": message, "hint": hint})


def schema_name(command: str) -> str:
    return f"{SCHEMA_PREFIX}{command}/{VERSIONS.get(command, 1)}"


def envelope(exit_code: int) -> dict[str, Any]:
    ok = SESSION.ok if SESSION.ok is not None else exit_code == 0
    return {"schema": schema_name(SESSION.command or "cachedoctor"), "ok": ok and exit_code == 0,
            "result": SESSION.result, "warnings": list(SESSION.warnings),
            "errors": list(SESSION.errors)}


def finish(exit_code: int) -> int:
    """Print the envelope of a `--json` run (once). Returns the exit code: 1 where it was 0 and
    the envelope could not be written (a full disk: said on stderr)."""
    if not SESSION.json or SESSION.printed:
        return exit_code
    SESSION.printed = True
    try:
        write_json(envelope(exit_code))
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError):  # `| head`: the reader has gone, no error
            from cachedoctor.cli import report_lost_output

            report_lost_output(exc)
            exit_code = exit_code or EXIT_FAILED
        silence_stdout()  # what is still buffered goes nowhere, not into a second failure
    return exit_code


def silence_stdout() -> None:
    """Point stdout at the null device, so that the last flush of what nobody will read (the
    reader has gone, the disk is full) does not fail a second time (Python's documented recipe
    for SIGPIPE)."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):  # no real stdout: no flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def write_json(document: Any) -> None:
    """One JSON document on stdout (indented on a terminal, one line into a pipe or file);
    non-ASCII paths stay exact on a stream that is not UTF-8 (a Windows pipe): escaped there."""
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    # Indented for a person at a terminal; on one line for a program (as `gh` does): Python
    # encodes indented JSON in Python code, 4x slower than its C encoder, which is a third of
    # listing a 2,000-repo hub. One write: json.dump would write once per value.
    indent = 2 if sys.stdout.isatty() else None
    sys.stdout.write(dumps(document, indent=indent,
                           ascii_only=encoding not in ("utf8", "utf8sig")) + "\n")


def dumps(document: Any, *, indent: int | None = None, ascii_only: bool = False) -> str:
    """`document` as JSON text, anything JSON has no type for (a path) written as its `str`.
    One line for a UTF-8 stream comes from msgspec's C encoder when the run has imported it
    (13 ms of json.dumps against 1 ms for a 2,000-unit `ls`); json.dumps writes the indented
    form, the ASCII-escaped one, and what msgspec refuses or would write otherwise (a name
    that is not UTF-8, a key that is not a string or a number). The two agree on every type a
    document holds (the suite once ran with each document written both ways); they differ
    only on what none does, where msgspec has a JSON form and json.dumps writes a `str`: a
    plain enum (its value, not `E.A`), a set (an array, not `{1}`), bytes (base64), a date
    (ISO `T`), a struct (an object), an infinite or NaN number (`null`, not the non-JSON
    `NaN`), and a float key with an exponent (`1e16`, not `1e+16`)."""
    if indent is None and not ascii_only and "msgspec" in sys.modules:
        import msgspec

        try:
            text = msgspec.json.encode(document, enc_hook=_as_text).decode("utf-8")
        except Exception:  # json.dumps takes what msgspec refuses, as it always did
            pass
        else:
            return text
    import json  # only here: a command that writes no JSON does not import it (1.2 ms)

    return json.dumps(document, indent=indent, default=str, ensure_ascii=ascii_only)


def _as_text(value: Any) -> str:
    """msgspec's hook for what it has no JSON form for: its `str`, as json.dumps' `default`.
    None and booleans reach it only as dict keys, which json.dumps writes its own way
    (`null`, `true`): refused, so json.dumps writes them."""
    if value is None or isinstance(value, bool):
        raise TypeError(f"{value!r} as a key")
    return str(value)
