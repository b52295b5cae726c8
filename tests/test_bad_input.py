"""Bad input of every kind ends in one clear message and a documented exit code, never a
traceback, and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import needs_posix_paths, run_cli

pytestmark = needs_posix_paths


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["scan", "no-such-tool"], 2, "unknown tool"),
        (["move", "no-such-tool", "/tmp/x"], 2, "unknown tool"),
        (["restore", "no-such-tool"], 2, "unknown tool"),
        (["tune", "no-such-tool"], 2, "unknown tool"),
        (["doctor", "no-such-tool"], 2, "unknown tool"),
        (["clean", "no-such-tool", "--dry-run"], 2, "unknown tool"),
        (["quota", "pip", "20XB", "--yes"], 2, "invalid size"),
        (["quota", "pip", "lots", "--yes"], 2, "invalid size"),
        (["clean", "pip", "--older-than", "soon", "--dry-run"], 2, "invalid age"),
        (["clean", "pip", "--max-size", "-3GB", "--dry-run"], 2, "invalid size"),
        (["move", "pip", "D:\\ai-cache", "--dry-run"], 2, "Windows drive path"),
        (["move", "pip", "/tmp/x", "--location", "nope", "--dry-run"], 2, "has no location"),
        (["tune", "grok", "--preset", "nope", "--dry-run"], 2, "nope"),
        (["env", "set", "1BAD", "x", "--yes"], 2, "invalid variable name"),
        (["undo", "999", "--yes"], 2, "no change #999"),
        (["schedule", "install", "--at", "25:99", "--dry-run"], 2, "25:99"),
        (["profiles", "show", "nope"], 2, "unknown tool"),
        (["scan", "--bogus-flag"], 2, "bogus"),
    ],
)
def test_bad_arguments(argv: list[str], code: int, says: str) -> None:
    result = run_cli(*argv)
    assert result.returncode == code, (argv, result.returncode, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert says.lower() in (result.stderr + result.stdout).lower(), (argv, result.stderr)


def test_damaged_state_files_are_named(isolated_home: Path) -> None:
    config = isolated_home / ".config" / "cachedoctor"
    config.mkdir(parents=True)
    (config / "quotas.json").write_text('{"pip": {"cache": 10,}}')
    result = run_cli("quota", "list")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{config / 'quotas.json'}:1:" in result.stderr
    (config / "env.json").write_text("[not json")
    result = run_cli("env", "list")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert str(config / "env.json") in result.stderr


def test_malformed_settings_file_is_refused_and_left_alone(isolated_home: Path) -> None:
    settings = isolated_home / ".config" / "Code" / "User" / "settings.json"
    settings.parent.mkdir(parents=True)
    broken = '{\n  "editor.fontSize": 14\n  "oops": \n'
    settings.write_text(broken)
    result = run_cli("tune", "grok", "--yes")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert str(settings) in result.stderr and ":3:" in result.stderr  # file, line (and column)
    assert settings.read_text() == broken


def test_destination_that_is_a_file(isolated_home: Path, tmp_path: Path) -> None:
    (isolated_home / ".cache" / "pip" / "http").mkdir(parents=True)
    (isolated_home / ".cache" / "pip" / "http" / "x").write_text("x")
    dest = tmp_path / "a-file"
    dest.write_text("not a folder")
    result = run_cli("move", "pip", str(dest), "--method", "link", "--yes")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert dest.read_text() == "not a folder"
    assert (isolated_home / ".cache" / "pip" / "http" / "x").read_text() == "x"
