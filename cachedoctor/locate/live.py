"""The live `World`: this machine's files, the environment new sessions get, services'
environments, browser policies and cachedoctor's records, read once per command (lazily:
a lookup nobody needs is never made)."""

from __future__ import annotations

import functools
from typing import Any

from cachedoctor.host import Host
from cachedoctor.locate.files import FileView, LiveFiles
from cachedoctor.locate.services import ServiceEnv, unit_environment
from cachedoctor.locate.world import EnvValue, World
from cachedoctor.policies import PolicyRead


def observe(host: Host | None = None, *, files: FileView | None = None) -> World:
    """A fresh look: nothing read before this call (the mount table included) is trusted."""
    from cachedoctor.drives import partitions

    partitions.cache_clear()
    host = host or Host.current()
    view = files or LiveFiles()
    records, pending, problems = _state()
    persistent = (_windows_persistent() if host.is_windows else _posix_persistent(host, view))

    @functools.cache
    def service(unit: str) -> ServiceEnv:
        return unit_environment(unit, view)

    @functools.cache
    def policy(browser: str, name: str) -> PolicyRead:
        from cachedoctor.policies import read_policy

        return read_policy(browser, name, host, view)

    return World(host, view, persistent, service, policy, records, pending, tuple(problems))


def _state() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """cachedoctor's relocation records and unfinished operations; a damaged file is a problem
    to report, not a reason to fail every command."""
    from cachedoctor.errors import CachedoctorError
    from cachedoctor.relocate import journal

    problems: list[str] = []
    records: dict[str, Any] = {}
    try:
        for key, op in journal.relocation_records().items():
            records[key] = op
    except CachedoctorError as exc:
        problems.append(exc.message)
    pending = {f"{op.tool}/{op.location}": op for op in journal.load_all()}
    return records, pending, problems


def _posix_persistent(host: Host, files: FileView) -> Any:
    """name -> EnvValue from the start-up files, parsed on first use."""
    from cachedoctor.locate import shellenv

    @functools.lru_cache(maxsize=1)
    def table() -> dict[str, EnvValue]:
        config_home = host.getenv("XDG_CONFIG_HOME") or ""
        if not config_home.startswith("/"):
            config_home = f"{host.home}/.config"
        known = {k: v for k in host.env if (v := host.env.get(k)) is not None}
        found: dict[str, EnvValue] = {}
        for pattern, kind in shellenv.start_up_files(host.home, config_home, host.os):
            paths = files.glob(pattern) if "*" in pattern else [pattern]
            for path in paths:
                text = files.read_text(path)
                if text is None:
                    continue
                shown = _tilde(path, host.home)
                for item in shellenv.parse(text, kind, shown, known, host.home):
                    known[item.name] = item.value
                    found[item.name] = EnvValue(item.value, item.origin, item.managed)
        return found

    return lambda name: table().get(name)


def _tilde(path: str, home: str) -> str:
    return "~" + path[len(home):] if home and path.startswith(home.rstrip("/") + "/") else path


def _windows_persistent() -> Any:  # pragma: no cover - the registry exists on Windows only
    from cachedoctor.envvars.windows import read_persistent

    return read_persistent
