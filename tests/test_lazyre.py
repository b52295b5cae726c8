"""Patterns compiled when used: the hot commands compile no pattern at import that they never use."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor.lazyre import lazy_pattern

pytestmark = pytest.mark.usefixtures("isolated_home")


def test_a_lazy_pattern_is_compiled_once_on_its_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real = re.compile

    def compile_(source: str, flags: int = 0) -> re.Pattern[str]:
        compiled.append(source)
        return real(source, flags)

    monkeypatch.setattr(re, "compile", compile_)
    pattern = lazy_pattern(r"^a+b$", re.IGNORECASE)
    assert compiled == []
    assert pattern().match("AaB") and pattern().match("ab") and not pattern().match("ba")
    assert pattern() is pattern() and compiled == [r"^a+b$"]
    assert pattern().flags & re.IGNORECASE


# Each pattern a module of cachedoctor compiles as it is imported is handed out wrapped, and
# the wrapper notes the first use. msgspec compiles the profile ids' pattern (`Meta(pattern=)`)
# for the model's classes: that one is msgspec's to keep, and is handed over unwrapped.
_RECORD = """
import json, re, sys
real, made = re.compile, []
class Noted:
    def __init__(self, where, pattern):
        self.where, self.pattern, self.used = where, pattern, False
    def __getattr__(self, name):
        self.used = True
        return getattr(self.pattern, name)
def compile_(source, flags=0):
    frame = sys._getframe(1)
    pattern = real(source, flags)
    if frame.f_code.co_name != "<module>" or "cachedoctor" not in frame.f_code.co_filename \
            or frame.f_code.co_filename.endswith("model.py"):
        return pattern
    made.append(Noted(f"{frame.f_code.co_filename}:{frame.f_lineno}", pattern))
    return made[-1]
re.compile = compile_
sys.argv = ["cachedoctor", *sys.argv[1:]]
from cachedoctor.cli import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nUNUSED " + json.dumps([n.where for n in made if not n.used]))
"""


@pytest.mark.parametrize("args", [["scan"], ["scan", "--json"], ["doctor"], ["profiles", "list"]])
def test_a_hot_command_compiles_no_pattern_it_does_not_use(isolated_home: Path,
                                                           args: list[str]) -> None:
    def unused() -> list[str]:
        out = subprocess.run([sys.executable, "-c", _RECORD, *args], capture_output=True,
                             text=True, timeout=300, env=dict(os.environ))
        assert out.returncode in (0, 1), out.stderr
        return list(json.loads(out.stderr.rpartition("\nUNUSED ")[2]))

    unused()  # the first run validates the profiles and writes the index
    assert unused() == []
