"""Per-folder quotas: caps stored in cachedoctor's config and enforced by `clean`."""

from __future__ import annotations

import json
from typing import Any

from cachedoctor.errors import UserInputError
from cachedoctor.fsutil import atomic_write_text
from cachedoctor.state import config_dir


def quotas_file() -> Any:
    return config_dir() / "quotas.json"


def _load() -> dict[str, dict[str, int]]:
    path = quotas_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON in the quota file: {exc.msg}") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) and all(isinstance(b, int) for b in v.values()) for v in data.values()
    ):
        raise UserInputError(f"{path}: expected {{tool: {{location: bytes}}}}")
    return data


def quota_table() -> dict[tuple[str, str], int]:
    """(tool, location) -> cap in bytes, for every quota the user set."""
    return {(tool, loc): cap for tool, locs in _load().items() for loc, cap in locs.items()}


def set_quota(tool: str, location: str, cap: int | None) -> int | None:
    """Set (or with None remove) a cap; returns the previous cap."""
    data = _load()
    previous = data.get(tool, {}).get(location)
    if cap is None:
        data.get(tool, {}).pop(location, None)
        if tool in data and not data[tool]:
            del data[tool]
    else:
        data.setdefault(tool, {})[location] = cap
    atomic_write_text(quotas_file(), json.dumps(data, indent=2, sort_keys=True) + "\n")
    return previous
