"""The CLI shell: version, help, start-up imports, error handling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cachedoctor import __version__
from cachedoctor.cli.commands import COMMANDS, command_word
from tests.conftest import result_of, run_cli

HEAVY = ("rich", "psutil", "yaml", "msgspec", "ruamel", "tomlkit", "cachedoctor.walker", "sqlite3")


def imported_after(*argv: str) -> set[str]:
    code = (
        "import sys\n"
        f"sys.argv = ['cachedoctor', *{list(argv)!r}]\n"
        "from cachedoctor.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('\\n' + ' '.join(sorted(sys.modules)))\n"
    )
    # the environment is passed explicitly: pytest's own COLUMNS (set beside os.environ) is
    # not the piped run this measures
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ))
    return set(out.stdout.strip().splitlines()[-1].split())


def test_version() -> None:
    for flag in ("--version", "-V"):
        result = run_cli(flag)
        assert result.returncode == 0
        assert result.stdout.strip() == f"cachedoctor {__version__}"


def test_version_and_help_import_nothing_heavy() -> None:
    commands = ("scan", "move", "restore", "tune", "env", "quota", "clean", "schedule", "doctor",
                "history", "undo", "profiles")
    for argv in (["--version"], ["--help"], *([c, "--help"] for c in commands)):
        modules = imported_after(*argv)
        heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert heavy == [], f"{argv} imported {heavy}"
    assert "typer" not in imported_after("--version")


def test_a_command_imports_only_its_own_module() -> None:
    commands = {m for m in imported_after("profiles", "list", "--json") if m.startswith("cachedoctor.cli.")}
    assert commands & {f"cachedoctor.cli.{m}" for m in COMMANDS.values()} == {"cachedoctor.cli.profiles"}
    assert "cachedoctor.cli.where" in imported_after("--profiles-dir", "/nonexistent", "which", "/")
    assert {f"cachedoctor.cli.{m}" for m in COMMANDS.values()} <= imported_after("--help")


def test_a_piped_table_builds_no_rich_table() -> None:
    modules = imported_after("profiles", "list")
    assert "rich.table" not in modules and "rich.text" not in modules


def test_the_command_word_skips_global_options() -> None:
    assert command_word(["--profiles-dir", "D", "profiles", "list"]) == "profiles"
    assert command_word(["--profiles-dir=D", "undo"]) == "undo"
    assert command_word(["--help"]) is None and command_word([]) is None
    assert command_word(["scn"]) is None  # a typo: the whole CLI answers, with "did you mean"
    assert command_word(["--", "scan"]) is None
    assert command_word(["-h", "scan"]) is None  # the root's help lists every command


def test_every_command_is_in_the_table_and_listed_in_its_order_whatever_was_imported_first() -> None:
    code = ("import cachedoctor.cli.profiles, cachedoctor.cli.move\n"
            "from cachedoctor.cli.app import build_command\n"
            "print(' '.join(build_command().commands))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == list(COMMANDS)


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("scan", "move", "restore", "tune", "env", "quota", "clean", "schedule",
                    "doctor", "history", "undo", "profiles"):
        assert command in result.stdout, command


def test_usage_errors_exit_2_without_traceback() -> None:
    for argv in (["scan", "--no-such-flag"], ["no-such-command"]):
        result = run_cli(*argv)
        assert result.returncode == 2, argv
        assert "Traceback" not in result.stderr


def test_json_is_one_document_on_stdout() -> None:
    result = run_cli("profiles", "list", "--json")
    assert result.returncode == 0
    assert isinstance(result_of(result)["profiles"], list)


END_OF_PROGRAM = """
import atexit, os, sys, threading, time
from cachedoctor import cli

marks = sys.argv[1]

class Noisy:
    def __del__(self):  # runs only in the interpreter's teardown
        os.write(2, b"torn down\\n")

keep = Noisy()

def fake_main():
    atexit.register(lambda: open(os.path.join(marks, "handler"), "w").close())
    def late():
        time.sleep(0.2)
        open(os.path.join(marks, "thread"), "w").close()
    threading.Thread(target=late).start()  # not a daemon: the interpreter waits for it
    sys.stdout.write("x" * int(os.environ["END_SIZE"]))  # the end of it still in the buffer
    code = eval(os.environ["END_CODE"])
    if code == "raise":
        raise ValueError("boom")
    sys.exit(code)

cli.main = fake_main
cli.run_program()
"""


# stdout buffered, as it is for a program (PYTHONUNBUFFERED would write every byte at once)
BUFFERED = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def test_the_program_ends_with_mains_status_after_the_threads_handlers_and_output(
        tmp_path: Path) -> None:
    """run_program skips the interpreter's teardown (a finalizer does not run) and nothing
    else: the status sys.exit gives, every byte written, the exit handlers and the threads."""
    for code, status in (("0", 0), ("3", 3), ("None", 0), ("300", 44), ("-1", 255),
                         ("'a message'", 1), ("True", 1)):
        marks = tmp_path / f"marks{status}-{len(code)}"
        marks.mkdir()
        done = subprocess.run([sys.executable, "-c", END_OF_PROGRAM, str(marks)],
                              capture_output=True, text=True, timeout=60,
                              env={**BUFFERED, "END_CODE": code, "END_SIZE": "200000"})
        assert done.returncode == status, (code, done.stderr)
        assert done.stdout == "x" * 200_000
        assert sorted(p.name for p in marks.iterdir()) == ["handler", "thread"]
        assert "torn down" not in done.stderr
        if code == "'a message'":
            assert done.stderr == "a message\n"


def test_an_exception_out_of_main_gets_the_usual_teardown(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", END_OF_PROGRAM, str(tmp_path)],
                          capture_output=True, text=True, timeout=60,
                          env={**BUFFERED, "END_CODE": "'raise'", "END_SIZE": "10"})
    assert done.returncode == 1
    assert "ValueError: boom" in done.stderr and "torn down" in done.stderr


def test_output_that_cannot_be_flushed_at_the_end_gives_status_120(tmp_path: Path) -> None:
    """As the interpreter's own flush at exit does: the reader of stdout has gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-c", END_OF_PROGRAM, str(tmp_path)],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=60,
                              env={**BUFFERED, "END_CODE": "0", "END_SIZE": "100"})
    finally:
        os.close(write)
    assert done.returncode == 120
