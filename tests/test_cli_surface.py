"""The CLI as a new user meets it: `cachedoctor` alone, --dry-run plans on stdout, `undo`
without an id, and the same metavar for the same thing in every command's --help."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.conftest import envelope_of, needs_posix_paths, result_of, run_cli
from tests.test_journey import make_caches


def test_cachedoctor_alone_says_where_to_start_and_exits_0(isolated_home: Path) -> None:
    proc = run_cli()
    assert proc.returncode == 0, proc.stderr
    assert "cachedoctor scan" in proc.stdout and "cachedoctor --help" in proc.stdout
    assert len(proc.stdout.splitlines()) <= 6


@needs_posix_paths
def test_dry_run_plans_are_on_stdout_and_notes_on_stderr(isolated_home: Path, tmp_path: Path) -> None:
    make_caches(isolated_home)
    dest = tmp_path / "dest"
    move = run_cli("move", "pip", str(dest), "--dry-run")
    assert move.returncode == 0, move.stderr
    assert "Move pip (cache) by" in move.stdout and str(dest / "pip") in move.stdout
    assert "Move pip" not in move.stderr
    assert run_cli("move", "pip", str(dest), "--yes", "--force").returncode == 0
    restore = run_cli("restore", "pip", "--dry-run")
    assert restore.returncode == 0 and "Restore pip (cache)" in restore.stdout, restore.stderr
    planned = result_of(run_cli("restore", "pip", "--dry-run", "--json"))["operations"]
    assert [op["status"] for op in planned] == ["restore"]  # --json --dry-run: the plan is the result

    env = run_cli("env", "set", "CACHEDOCTOR_T", "1", "--dry-run")
    assert env.returncode == 0 and "would update" in env.stdout and not env.stderr.strip(), env
    applied = run_cli("env", "set", "CACHEDOCTOR_T", "1", "--yes")
    assert applied.stdout.strip().startswith("export CACHEDOCTOR_T="), applied.stdout  # eval-able
    quota = run_cli("quota", "pip", "1GB", "--dry-run")
    assert "pip cache: no quota -> " in quota.stdout and "(1,000,000,000 bytes)" in quota.stdout, quota
    [change] = [c for c in result_of(run_cli("history", "--json"))["changes"] if c["kind"] == "env"]
    undo = run_cli("undo", str(change["id"]), "--dry-run")
    assert undo.returncode == 0 and f"would undo change #{change['id']}" in undo.stdout


def test_undo_without_id_offers_the_last_change(isolated_home: Path) -> None:
    nothing = run_cli("undo", "--yes", "--json")
    assert nothing.returncode == 2 and "nothing to undo" in nothing.stderr
    assert [e["kind"] for e in envelope_of(nothing.stdout)["errors"]] == ["refused"]
    assert "Traceback" not in nothing.stderr
    for value in ("1", "2"):
        assert run_cli("env", "set", f"CACHEDOCTOR_U{value}", value, "--yes").returncode == 0
    changes = result_of(run_cli("history", "--json"))["changes"]
    asked = run_cli("undo")  # no terminal: shows the change, then refuses to guess the answer
    assert asked.returncode == 2 and f"#{changes[-1]['id']}" in asked.stderr, asked
    assert "CACHEDOCTOR_U2" in asked.stderr + asked.stdout
    done = result_of(run_cli("undo", "--yes", "--json"))
    assert done["undone"] == changes[-1]["id"]
    again = result_of(run_cli("undo", "--yes", "--json"))
    assert again["undone"] == changes[-2]["id"]  # the undo itself is not offered
    assert "nothing to undo: all 4 recorded" in run_cli("undo", "--yes").stderr


# ------------------------------------------------------------------------------ metavars

CHOICES = re.compile(r"^[a-z0-9_]+(\|[a-z0-9_]+)+$")  # link|env|policy|config
NAME = re.compile(r"^[A-Z][A-Z0-9_]*(:[A-Z]+)?(\.\.\.|\[,[A-Z]+\.\.\.\])?$")  # TOOL, HH:MM, DIR...


def metavars() -> dict[tuple[str, str], str]:
    """(command path, parameter name) -> the metavar --help shows."""
    from cachedoctor.cli.app import build_command

    found: dict[tuple[str, str], str] = {}

    def visit(command: Any, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            visit(sub, [*path, name])
        ctx = command.context_class(command)
        for param in command.params:
            if param.param_type_name == "option":
                if param.is_flag or param.count:
                    continue
                shown = param.make_metavar(ctx=ctx)
            else:
                shown = param.make_metavar(ctx, usage=True).strip("{}[]")
            found[(" ".join(path), param.name)] = shown

    visit(build_command(), [])
    return found


def test_metavars_are_upper_case_names_or_choices_and_the_same_for_the_same_thing() -> None:
    shown = metavars()
    bad = {key: v for key, v in shown.items() if not (NAME.match(v) or CHOICES.match(v))}
    assert not bad, bad
    by_name: dict[str, set[str]] = {}
    for (_, name), value in shown.items():
        by_name.setdefault(name.removesuffix("s"), set()).add(value.removesuffix("..."))
    assert by_name["tool"] == {"TOOL"} and by_name["location"] == {"ID"}
    assert by_name["dest"] == {"DEST"} and by_name["older_than"] == {"AGE"}
    differing = {name: values for name, values in by_name.items() if len(values) > 1}
    # sweep takes a comma list of kinds; `which PATH` a file or folder, `scan --path DIR` folders
    assert differing == {"kind": {"KIND", "KIND[,KIND...]"}, "path": {"DIR", "PATH"}}, differing
    help_text = run_cli("move", "--help").stdout
    assert "TOOL" in help_text and "DEST" in help_text and "<str>" not in help_text
