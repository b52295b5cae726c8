"""The JSON Schemas (draft 2020-12) of what `--json` prints: `envelope.json` for the document
every run prints, `<command path>.json` (`scan.json`, `env.set.json`) for its `result`, and
`common.json` for the parts several results share. docs/json.md describes them; the tests
validate every command's real output against them.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

ENVELOPE = "envelope"
COMMON = "common"


def names() -> list[str]:
    """Every schema shipped, by name (`scan`, `env.set`, `envelope`, `common`)."""
    return sorted(entry.name.removesuffix(".json") for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith(".json"))


def command_names() -> list[str]:
    """The command paths that have a result schema."""
    return [name for name in names() if name not in (ENVELOPE, COMMON)]


def load(name: str) -> dict[str, Any]:
    """The schema `name` (a command path, `envelope` or `common`)."""
    document: dict[str, Any] = json.loads(resources.files(__name__).joinpath(f"{name}.json")
                                          .read_text(encoding="utf-8"))
    return document
