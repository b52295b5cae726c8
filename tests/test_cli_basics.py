"""The CLI shell: version, help, start-up imports, error handling."""

from __future__ import annotations

import os
import subprocess
import sys

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
