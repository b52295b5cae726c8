"""The CLI shell: version, help, start-up imports, error handling."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

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


def test_a_scan_with_nothing_relocated_reads_no_journal(isolated_home: Path) -> None:
    """No journal folder and no relocation registry: two lstats tell, and the journal's code
    is not loaded; a registry there is read (and a damaged one reported)."""
    assert "cachedoctor.relocate.journal" not in imported_after("scan")
    from cachedoctor.state import relocations_file

    registry = relocations_file()
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_text("{broken", encoding="utf-8")
    assert "cachedoctor.relocate.journal" in imported_after("scan")
    shown = run_cli("where", "pip").stdout
    assert "relocations.json" in shown and "damaged" in shown


def test_reading_start_up_files_loads_neither_the_env_writer_nor_a_shell_quoter(
        isolated_home: Path) -> None:
    """Every command reads the start-up files (locate.shellenv, with the block's markers);
    writing the block (envvars) and asking the login shell (shlex) load their code only when
    they are done."""
    (isolated_home / ".profile").write_text(
        "# >>> cachedoctor >>>\nexport HF_HOME=/srv/hf\n# <<< cachedoctor <<<\n")
    imported_after("scan")  # the first run in a home remembers the command's spec, with typer
    modules = imported_after("scan")
    assert "typer" not in modules and "cachedoctor.locate.shellenv" in modules
    assert {"cachedoctor.envvars", "cachedoctor.envvars.posix", "shlex"} & modules == set()


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
    if os.environ.get("END_CLOSE"):
        sys.stdout.close()
    if os.environ.get("END_READY"):  # main is done: the last flush comes next
        open(os.path.join(marks, "ready"), "w").close()
    sys.exit(code)

if os.environ.get("END_EARLY"):  # a handler before run_program's (sitecustomize, coverage)
    atexit.register(lambda: open(os.path.join(marks, "early"), "w").close())
cli.main = fake_main
cli.run_program()
"""

def buffered() -> dict[str, str]:
    """This test's environment (its sandboxed home) with stdout buffered, as it is for a
    program (PYTHONUNBUFFERED would write every byte at once). Taken when called: at import
    the environment is still the real home's."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}


def end_of_program(marks: Path, code: str, size: int = 200_000, stdout: Any = subprocess.PIPE,
                   **extra: str) -> subprocess.CompletedProcess[str]:
    marks.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-c", END_OF_PROGRAM, str(marks)], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60,
                          env={**buffered(), "END_CODE": code, "END_SIZE": str(size), **extra})


def test_the_program_ends_with_mains_status_after_the_threads_handlers_and_output(
        tmp_path: Path) -> None:
    """run_program skips the interpreter's teardown (a finalizer does not run) and nothing
    else: the status sys.exit gives, every byte written, the exit handlers and the threads."""
    for n, (code, status) in enumerate((("0", 0), ("3", 3), ("None", 0), ("300", 44),
                                        ("-1", 255), ("2**63", 255), ("'a message'", 1),
                                        ("True", 1))):
        marks = tmp_path / f"marks{n}"
        done = end_of_program(marks, code)
        assert done.returncode == status, (code, done.stderr)
        assert done.stdout == "x" * 200_000
        assert sorted(p.name for p in marks.iterdir()) == ["handler", "thread"]
        assert "torn down" not in done.stderr
        if code == "'a message'":
            assert done.stderr == "a message\n"


def test_a_handler_registered_before_the_program_runs_and_so_does_the_teardown(
        tmp_path: Path) -> None:
    done = end_of_program(tmp_path, "3", END_EARLY="1")
    assert done.returncode == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["early", "handler", "thread"]
    assert "torn down" in done.stderr


def test_an_exception_out_of_main_gets_the_usual_teardown(tmp_path: Path) -> None:
    done = end_of_program(tmp_path, "'raise'", size=10)
    assert done.returncode == 1
    assert "ValueError: boom" in done.stderr and "torn down" in done.stderr


def test_a_stdout_closed_by_main_keeps_its_status(tmp_path: Path) -> None:
    done = end_of_program(tmp_path, "3", size=10, END_CLOSE="1")
    assert done.returncode == 3 and done.stderr == ""


def test_output_that_cannot_be_written_at_the_end_fails_the_command_and_says_why(
        tmp_path: Path) -> None:
    """A full disk: status 1 and the reason (a report cut short is never silent); a reader
    that has gone (`| head`) is no error worth a word: status 1, quiet."""
    with open("/dev/full", "w") as full:
        done = end_of_program(tmp_path, "0", size=100, stdout=full)
    assert done.returncode == 1
    assert done.stderr == "error: the output could not be written: No space left on device\n"
    read, write = os.pipe()
    os.close(read)
    try:
        done = end_of_program(tmp_path, "0", size=100, stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 1 and done.stderr == ""


def test_ctrl_c_while_the_last_write_waits_on_a_full_pipe(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write, b"\0" * 65536)  # nobody reads: the program's last flush waits
    os.set_blocking(write, True)
    try:
        proc = subprocess.Popen([sys.executable, "-c", END_OF_PROGRAM, str(tmp_path)],
                                stdout=write, stderr=subprocess.PIPE, text=True,
                                env={**buffered(), "END_CODE": "0", "END_SIZE": "100", "END_READY": "1"})
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # past main and the other handlers: blocked in the final flush
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(write)
        os.close(read)
    assert proc.returncode == 130, err
    assert err == "\ninterrupted\n"


@pytest.mark.parametrize("args", [("profiles", "list"), ("scan", "--json")])
def test_a_real_command_into_a_full_disk_says_so_without_a_traceback(args: tuple[str, ...]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "cachedoctor", *args], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300, env=buffered())
    assert done.returncode == 1  # mid-run (a long table) or at the end (the envelope)
    assert done.stderr.startswith("error: ") and "No space left on device" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_closed_stdout_is_said_and_the_command_runs() -> None:
    done = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m",
                           "cachedoctor", "profiles", "list"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "warning: stdout is closed: the output is discarded\n"
