"""Asking a tool where its cache is: whatever the tool prints or does, an answer, never a raise."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cachedoctor.host import Host
from cachedoctor.locate import ask as asking
from cachedoctor.profiles.model import AskTool
from tests.conftest import needs_posix_sh, run_cli


def fake_tool(folder: Path, name: str, script: str) -> Host:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    tool.chmod(0o755)
    return Host("linux", {"PATH": f"{folder}:/usr/bin:/bin", "HOME": str(folder)}, str(folder))


def spec(*command: str, json_key: str | None = None) -> AskTool:
    return AskTool(command=list(command), json_key=json_key)


@needs_posix_sh
@pytest.mark.parametrize(("script", "path", "error"), [
    ("printf '\\377\\376garbage\\n'\n", "\ufffd\ufffdgarbage", None),
    ("printf 'boom \\377\\n' >&2; exit 3\n", None, "exit status 3: boom \ufffd"),
    ("printf '\\n\\n'\n", None, "no path in its output"),
])
def test_any_output_is_an_answer(tmp_path: Path, script: str, path: str | None,
                                 error: str | None) -> None:
    host = fake_tool(tmp_path / "bin", "tool", script)
    answer = asking.ask(spec("tool", "cache", "dir"), host)
    assert (answer.path, answer.error) == (path, error)


@needs_posix_sh
def test_a_tool_that_hangs_or_cannot_start_is_an_answer(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asking, "TIMEOUT", 0.3)
    host = fake_tool(tmp_path / "bin", "slow", "sleep 5\n")
    assert asking.ask(spec("slow"), host).error == "slow did not answer within 0.3 s"
    broken = tmp_path / "bin" / "broken"
    broken.write_text("#!/no/such/interpreter\n", encoding="utf-8")
    broken.chmod(0o755)
    assert (asking.ask(spec("broken"), host).error or "").startswith("broken could not run:")
    assert asking.ask(spec("absent"), host).error == "absent is not on PATH"
    nul = asking.ask(spec("slow"), host, env={"A": "x\0y", "PATH": "/usr/bin"})
    assert (nul.error or "").startswith("slow could not run:")


def test_json_answers_deep_or_broken_are_no_path() -> None:
    assert asking.parse('{"a": [{"b": "/p"}]}', "a.0.b") == "/p"
    assert asking.parse("[" * 100_000 + "]" * 100_000, "a") is None
    assert asking.parse("{not json", "a") is None


@needs_posix_sh
def test_where_ask_tools_with_garbage_output_ends_without_a_traceback(tmp_path: Path,
                                                                      isolated_home: Path) -> None:
    """Review 08: `where pip --ask-tools` when pip prints bytes that are not UTF-8."""
    bin_dir = tmp_path / "bin"
    fake_tool(bin_dir, "pip", "printf '\\377\\376garbage\\n'\n")
    os.environ["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    try:
        out = run_cli("where", "pip", "--ask-tools", "--json")
    finally:
        os.environ["PATH"] = os.environ["PATH"].split(":", 1)[1]
    assert "Traceback" not in out.stderr
    said = json.loads(out.stdout)["result"]["locations"][0]["tool_says"]
    assert said["path"] == "\ufffd\ufffdgarbage" and said["agrees"] is False
