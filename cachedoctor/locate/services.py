"""The environment a systemd service gets (Ollama's server reads OLLAMA_MODELS there, never
from a shell): `Environment=` and `EnvironmentFile=` of the unit file and its drop-ins, as
systemd.exec(5) and systemd.unit(5) define them. Pure: reads through a `FileView`."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from cachedoctor.locate.files import FileView

# systemd.unit(5), "Unit File Load Path" (system manager), highest priority first.
UNIT_DIRS = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)


@dataclass(frozen=True)
class ServiceEnv:
    unit: str
    file: str | None  # the unit file found, None when the service is not installed
    values: dict[str, tuple[str, str]]  # name -> (value, where it is set)


def unit_environment(unit: str, files: FileView) -> ServiceEnv:
    main = next((f"{d}/{unit}" for d in UNIT_DIRS if files.read_text(f"{d}/{unit}") is not None),
                None)
    if main is None:
        return ServiceEnv(unit, None, {})
    dropins: dict[str, str] = {}  # file name -> path; a higher-priority folder wins a name
    for folder in reversed(UNIT_DIRS):
        for path in files.glob(f"{folder}/{unit}.d/*.conf"):
            dropins[path.rsplit("/", 1)[-1]] = path
    plain: dict[str, tuple[str, str]] = {}
    from_files: dict[str, tuple[str, str]] = {}
    for path in [main, *(dropins[name] for name in sorted(dropins))]:
        _read_unit(files.read_text(path) or "", path, files, plain, from_files)
    return ServiceEnv(unit, main, {**plain, **from_files})  # EnvironmentFile= wins (systemd.exec)


def _read_unit(text: str, path: str, files: FileView, plain: dict[str, tuple[str, str]],
               from_files: dict[str, tuple[str, str]]) -> None:
    section = ""
    for number, raw in enumerate(_joined(text), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if key == "Environment":
            if not value:
                plain.clear()  # an empty assignment resets the list
                continue
            try:
                words = shlex.split(value)
            except ValueError:
                continue
            for word in words:
                name, sep, val = word.partition("=")
                if sep:
                    plain[name] = (val, f"{path}:{number}")
        elif key == "EnvironmentFile" and value:
            env_path = value[1:] if value.startswith("-") else value
            for name, val, at in _env_file(files.read_text(env_path) or "", env_path):
                from_files[name] = (val, at)


def _joined(text: str) -> list[str]:
    """Lines with backslash continuations joined (line numbers of the first line are kept by
    padding the joined ones with empty lines)."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            out.append("")
            continue
        out.append(pending + line)
        pending = ""
    return out


def _env_file(text: str, path: str) -> list[tuple[str, str, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;" or "=" not in stripped:
            continue
        name, _, value = stripped.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found.append((name.strip(), value, f"{path}:{number}"))
    return found
