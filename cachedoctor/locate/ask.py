"""Ask the installed tool itself where its cache is (`pip cache dir`, `npm config get cache`,
`uv cache dir`, `go env GOCACHE`, `conda info --json`) — a second opinion on the resolution,
declared per location in the profile (`ask:`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import msgspec

from cachedoctor.host import Host
from cachedoctor.profiles.model import AskTool

TIMEOUT = 20.0


class Answer(msgspec.Struct, frozen=True):
    command: list[str]
    path: str | None  # None when the tool could not be asked or gave no path
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "path": self.path, "error": self.error}


def absolute_path_entries(path: str | None = None) -> str:
    """PATH without empty, `.` or other relative entries (which would search the current folder)."""
    entries = (path if path is not None else os.environ.get("PATH", os.defpath)).split(os.pathsep)
    return os.pathsep.join(e for e in entries if e and os.path.isabs(e))


def ask(spec: AskTool, host: Host, *, env: dict[str, str] | None = None) -> Answer:
    argv = list(spec.command)
    exe = shutil.which(argv[0], path=absolute_path_entries(host.getenv("PATH")))
    if exe is None:
        return Answer(argv, None, f"{argv[0]} is not on PATH")
    try:
        proc = subprocess.run([exe, *argv[1:]], capture_output=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL, env=env, check=False)
    except subprocess.TimeoutExpired:
        return Answer(argv, None, f"{argv[0]} did not answer within {TIMEOUT:g} s")
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument or variable
        return Answer(argv, None, f"{argv[0]} could not run: {exc}")
    # A tool may print bytes that are not UTF-8 (a Latin-1 path, a garbled locale): they are
    # shown as U+FFFD, so such an answer names no existing folder and simply disagrees.
    stdout, stderr = (stream.decode("utf-8", "replace") for stream in (proc.stdout, proc.stderr))
    if proc.returncode != 0:
        detail = (stderr or stdout).strip().splitlines()
        return Answer(argv, None, f"exit status {proc.returncode}" + (f": {detail[-1]}" if detail else ""))
    path = parse(stdout, spec.json_key)
    return Answer(argv, path, None if path else "no path in its output")


def parse(output: str, json_key: str | None) -> str | None:
    """The path in a tool's output: the first non-empty line, or a dotted key of its JSON."""
    if json_key is None:
        return next((line.strip() for line in output.splitlines() if line.strip()), None)
    try:
        data: Any = json.loads(output)
    except (ValueError, RecursionError):
        return None
    for part in json_key.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return data if isinstance(data, str) and data else None
