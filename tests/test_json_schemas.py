"""Every command's `--json` output against its shipped JSON Schema (cachedoctor/schemas).

`tests.conftest.envelope_of` checks every `--json` document any test reads; here every command
runs for real once more (an isolated HOME with real small caches, a `crontab` double on PATH),
in success and failure, dry-run and real, and every command path must have a schema.
"""

from __future__ import annotations

import json
import os
import stat
import typing
from pathlib import Path
from typing import Any

import pytest

from cachedoctor import schemas
from tests.conftest import envelope_of, needs_du, needs_posix_paths, run_cli
from tests.jsonschemas import validator
from tests.test_journey import make_caches


def json_commands() -> dict[str, Any]:
    """Every command path of the CLI that takes `--json`, from the click command tree."""
    from cachedoctor.cli.app import build_command

    found: dict[str, Any] = {}

    def visit(command: Any, path: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            visit(sub, [*path, name])
        if any(param.name == "json_out" for param in command.params):
            found[".".join(path)] = command

    visit(build_command(), [])
    return found


def test_every_command_with_json_has_a_result_schema_and_every_schema_a_command() -> None:
    commands = set(json_commands())
    assert {"scan", "env.set", "schedule.status", "profiles.validate"} <= commands
    assert commands == set(schemas.command_names()), (
        f"without a schema: {sorted(commands - set(schemas.command_names()))}; "
        f"a schema of no command: {sorted(set(schemas.command_names()) - commands)}")


@pytest.mark.parametrize("name", schemas.names())
def test_each_schema_is_valid_draft_2020_12_and_says_what_it_describes(name: str) -> None:
    schema = schemas.load(name)
    validator(name)  # check_schema raises on an invalid schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f"/{name}.json")
    if name != schemas.COMMON:
        assert schema.get("description") and len(schema) > 4, f"{name}: a placeholder"


def _enums(node: Any, key: str) -> list[list[Any]]:
    """Every `enum` under the property `key` anywhere in a schema."""
    found: list[list[Any]] = []
    if isinstance(node, dict):
        for name, value in node.items():
            if name == "properties" and isinstance(value, dict) and key in value:
                found += [value[key]["enum"]] if "enum" in value[key] else []
            found += _enums(value, key)
    elif isinstance(node, list):
        for item in node:
            found += _enums(item, key)
    return found


def test_enums_are_the_codes_own_lists() -> None:
    """A value added in the code without the schema (or the other way round) fails here."""
    from cachedoctor.clean.model import Mode, Status
    from cachedoctor.doctor.report import Severity
    from cachedoctor.host import OsName
    from cachedoctor.locate.effective import StepKind
    from cachedoctor.profiles.model import LOCATION_KINDS
    from cachedoctor.safedelete import SkipReason
    from cachedoctor.schedule import BACKENDS
    from cachedoctor.schedule.model import Every
    from cachedoctor.which import Relation

    common = schemas.load("common")["$defs"]
    kinds = LOCATION_KINDS
    assert common["location_kind"]["enum"] == list(kinds)
    assert common["backend"]["enum"] == list(BACKENDS)
    assert common["job"]["properties"]["every"]["enum"] == list(typing.get_args(Every))
    assert common["step"]["properties"]["kind"]["enum"] == list(typing.get_args(StepKind))
    assert common["skipped"]["properties"]["reason"]["enum"] == list(typing.get_args(SkipReason))
    assert _enums(schemas.load("clean"), "mode") == [list(typing.get_args(Mode))] * 2
    assert _enums(schemas.load("clean"), "status") == [list(typing.get_args(Status))]
    assert _enums(schemas.load("doctor"), "severity") == [list(typing.get_args(Severity))]
    assert _enums(schemas.load("which"), "relation") == [list(typing.get_args(Relation))]
    assert _enums(schemas.load("profiles.show"), "os") == [list(typing.get_args(OsName))]


def test_error_kinds_are_every_kind_the_cli_reports() -> None:
    import ast
    import inspect

    from cachedoctor import errors
    from cachedoctor.cli import app, guard

    kinds = {cls.kind for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.CachedoctorError)}
    calls = [node for module in (app, guard)
             for node in ast.walk(ast.parse(inspect.getsource(module)))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_error"]
    kinds |= {c.args[1].value for c in calls if isinstance(c.args[1], ast.Constant)}
    envelope = schemas.load("envelope")
    assert set(envelope["properties"]["errors"]["items"]["properties"]["kind"]["enum"]) == kinds


# ------------------------------------------------------------------ every command, for real

CRONTAB = """#!/bin/sh
# A crontab double (crontab(1): -l prints the table, `-` replaces it from stdin, -r removes
# it; "no crontab for USER" and exit 1 when there is none), kept in $CRONTAB_SPOOL.
case "$1" in
  -l) [ -f "$CRONTAB_SPOOL" ] || { echo "no crontab for $USER" >&2; exit 1; }; cat "$CRONTAB_SPOOL" ;;
  -r) rm -f "$CRONTAB_SPOOL" ;;
  -) cat > "$CRONTAB_SPOOL" ;;
  *) echo "usage: crontab [-l|-r|-]" >&2; exit 1 ;;
esac
"""


@pytest.fixture
def sandbox(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Real small caches (hub, pip, VS Code settings) and a private crontab."""
    make_caches(isolated_home)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    crontab = bin_dir / "crontab"
    crontab.write_text(CRONTAB)
    crontab.chmod(crontab.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CRONTAB_SPOOL", str(tmp_path / "crontab.spool"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def json_run(*args: str, code: int | set[int] = 0) -> dict[str, Any]:
    """Run `cachedoctor ARGS --json`: one valid envelope on stdout, the expected exit code."""
    proc = run_cli(*args, "--json")
    codes = {code} if isinstance(code, int) else code
    assert proc.returncode in codes, (args, proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    document = envelope_of(proc.stdout)  # validated against the schemas
    assert document["ok"] is (proc.returncode == 0), document
    assert bool(document["errors"]) is (document["result"] is None), document
    return document


@needs_du
@needs_posix_paths
def test_every_command_json_validates_in_success_and_failure(sandbox: Path) -> None:
    seen: dict[str, set[str]] = {}

    def run(*args: str, code: int | set[int] = 0, expect: str = "ok") -> dict[str, Any]:
        document = json_run(*args, code=code)
        seen.setdefault(document["schema"].split("/")[0].removeprefix("cachedoctor."),
                        set()).add(expect)
        return document

    dest, project = sandbox / "dest", sandbox / "proj"
    (project / "node_modules" / "dep").mkdir(parents=True)
    (project / "package.json").write_text('{"name": "p"}')
    (project / "node_modules" / "dep" / "index.js").write_text("x" * 5000)
    bad_profile = sandbox / "bad.yaml"
    bad_profile.write_text("id: Not An Id\nlocations: 3\n")
    good_profile = Path(__file__).resolve().parents[1] / "profiles" / "pip.yaml"

    run("scan")
    run("scan", "pip", "huggingface")
    run("scan", "--path", str(project))
    run("scan", "no-such-tool", code=2, expect="failed")
    run("ls", "huggingface")
    run("ls", "pip", "--sort", "used", "--limit", "2")
    run("ls", "huggingface", "--sort", "bogus", code=2, expect="failed")
    run("where")
    run("where", "pip", "huggingface")
    run("where", "no-such-tool", code=2, expect="failed")
    run("which", str(Path.home() / ".cache" / "pip"))
    run("which", str(sandbox), code=1, expect="no owner")
    run("doctor", code={0, 1})
    run("doctor", "no-such-tool", code=2, expect="failed")
    run("profiles", "list")
    run("profiles", "show", "huggingface")
    run("profiles", "show", "no-such-tool", code=2, expect="failed")
    run("profiles", "validate", str(good_profile))
    run("profiles", "validate", str(good_profile), str(bad_profile), code=2, expect="invalid")

    # move and restore: dry-run, real, and again (nothing to do), and refused
    run("move", "pip", str(dest), "--dry-run")
    run("move", "pip", str(dest), "--yes", "--force")
    assert (dest / "pip").is_dir()
    run("move", "pip", str(dest), "--yes", "--force", expect="already")
    run("move", "pip", str(dest), "--method", "teleport", code=2, expect="failed")
    run("restore", "pip", "--dry-run")
    run("restore", "pip", "--yes", "--force")
    run("restore", "pip", "--yes", expect="nothing to restore")
    run("restore", "no-such-tool", code=2, expect="failed")

    # clean: plan, real (units, prune, age), refused
    run("clean", "pip", "--dry-run")
    run("clean", "pip", "--older-than", "1d", "--yes")
    run("clean", "huggingface", "--prune", "--dry-run")
    run("clean", "huggingface", "--unit", "model/org/tiny", "--yes")
    run("clean", "--older-than", "bogus", code=2, expect="failed")
    run("clean", "pip", "--unit", "x", "--prune", code=2, expect="failed")

    run("sweep", str(project), "--dry-run")
    run("sweep", str(project), "--yes")
    run("sweep", str(sandbox / "missing"), code=2, expect="failed")

    run("tune", "grok", "--dry-run")
    run("tune", "grok", "--yes")
    run("tune", "grok", "--yes", expect="already tuned")
    run("tune", "grok", "--undo", "--dry-run")
    run("tune", "grok", "--undo", "--yes")
    run("tune", "grok", "--preset", "no-such-preset", code=2, expect="failed")

    run("env", "set", "CACHEDOCTOR_T", "1", "--dry-run")
    run("env", "set", "CACHEDOCTOR_T", "1", "--yes")
    run("env", "list")
    run("env", "unset", "CACHEDOCTOR_T", "--dry-run")
    run("env", "unset", "CACHEDOCTOR_T", "--yes")
    run("env", "set", "1-BAD", "x", "--yes", code=2, expect="failed")
    run("env", "unset", "CACHEDOCTOR_T", "--yes", expect="not managed")

    run("quota", "set", "pip", "100MB", "--dry-run")
    run("quota", "pip", "100MB", "--yes")
    run("quota", "list")
    run("quota", "set", "pip", "20GB", "--ntfs", "--drive", "D:", "--user", "PC\\ann",
        "--dry-run", expect="ntfs plan")
    run("quota", "set", "pip", "lots", "--yes", code=2, expect="failed")

    run("schedule", "status")
    run("schedule", "install", "--backend", "cron", "--dry-run")
    run("schedule", "install", "--backend", "cron", "--yes")
    run("schedule", "status")
    run("schedule", "install", "--at", "25:99", "--dry-run", code=2, expect="failed")
    run("schedule", "remove", "--backend", "cron", "--dry-run")
    run("schedule", "remove", "--backend", "cron", "--yes")
    run("schedule", "remove", "--backend", "cron", "--yes", expect="nothing installed")
    run("schedule", "remove", "--backend", "nope", code=2, expect="failed")

    changes = run("history")["result"]["changes"]
    assert changes
    run("history", "--kind", "quota")
    last = max(c["id"] for c in changes if c["undone_by"] is None and c["kind"] == "quota")
    run("undo", str(last), "--dry-run")
    run("undo", str(last), "--yes")
    run("undo", "99999", code=2, expect="failed")

    missing = {path for path in json_commands() if path not in seen}
    assert not missing, f"not run: {sorted(missing)}"
    no_failure = {path for path, kinds in seen.items() if kinds == {"ok"}}
    assert not no_failure - {"history", "env.list", "quota.list", "schedule.status",
                             "profiles.list"}, sorted(no_failure)


@pytest.mark.parametrize("path", sorted(json_commands()))
def test_a_usage_error_is_an_error_document_naming_its_command(path: str) -> None:
    proc = run_cli(*path.split("."), "--no-such-option", "--json")
    assert proc.returncode == 2, proc.stderr
    document = envelope_of(proc.stdout)
    assert document["schema"] == f"cachedoctor.{path}/1"
    assert document["result"] is None and document["ok"] is False
    assert [e["kind"] for e in document["errors"]] == ["usage"]
    json.dumps(document)


def test_docs_json_md_describes_every_command_from_its_schema() -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("json_reference", root / "docs" / "json_reference.py")
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    text = (root / "docs" / "json.md").read_text(encoding="utf-8")
    assert text == reference.written(text), "docs/json.md is stale: run python docs/json_reference.py"
    for path in json_commands():
        assert f"`cachedoctor.{path}/1`" in text
