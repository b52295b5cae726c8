"""The `--json` document's text (`cli.output.dumps`): msgspec's encoder writes the one-line form
on a UTF-8 stream, json.dumps everything else; both say the same thing. (The full suite once ran
with every document written both ways and compared: no difference.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from cachedoctor.cli import output
from tests.conftest import envelope_of, run_cli

DOCUMENT: dict[str, Any] = {
    "schema": "cachedoctor.ls/1", "ok": True, "none": None, "count": 2 ** 40,
    "time": 1764922803.123456, "tiny": 1e-7, "path": PurePosixPath("/home/é/.cache"),
    "nested": [{"id": "model/org/m", "refs": ["main"], "flags": []}, (1, 2)],
    "text": "tab\t, quote \", backslash \\, newline \n, control \x1b, 漢字, emoji 🙂",
}


def test_one_line_json_says_what_json_dumps_says() -> None:
    text = output.dumps(DOCUMENT)
    assert "\n" not in text and "msgspec" in sys.modules
    assert json.loads(text) == json.loads(json.dumps(DOCUMENT, default=str))
    assert json.loads(text)["path"] == "/home/é/.cache"  # what JSON has no type for: its str


def test_what_msgspec_refuses_is_written_as_json_dumps_writes_it() -> None:
    """A name that is not UTF-8 (a lone surrogate from surrogateescape) and a key that is
    neither a string nor a number go to json.dumps, which writes them as before."""
    for document in ({"name": "caf\udce9"}, {None: 1, "a": [1]}, {"x": {True: 1, False: 0}}):
        assert output.dumps(document) == json.dumps(document, default=str, ensure_ascii=False)


def test_indented_and_ascii_forms_are_json_dumps_own() -> None:
    assert output.dumps(DOCUMENT, indent=2) == json.dumps(DOCUMENT, indent=2, default=str,
                                                            ensure_ascii=False)
    escaped = output.dumps(DOCUMENT, ascii_only=True)
    assert escaped.isascii() and json.loads(escaped) == json.loads(output.dumps(DOCUMENT))


def test_a_run_without_msgspec_does_not_import_it_to_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "msgspec")
    assert output.dumps({"a": 1}) == '{"a": 1}'
    assert "msgspec" not in sys.modules


def test_ls_json_reads_back_whole(isolated_home: Path) -> None:
    """A real `--json` run through the fast path: one line, the envelope parsed whole."""
    result = run_cli("ls", "pip", "--json")
    assert result.stdout.count("\n") == 1
    envelope = envelope_of(result.stdout)
    assert envelope["schema"] == "cachedoctor.ls/1" and "result" in envelope
