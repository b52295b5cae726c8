"""The live `World`: this machine's files, the environment new sessions get, services'
environments, browser policies and cachedoctor's records, read once per command. Services
and policies are read lazily (a lookup nobody needs is never made); the new-session
environment at once, because asking the login shell may end in a problem to report (it is
cached between commands, so this costs a few `stat`s)."""

from __future__ import annotations

import functools
from typing import Any

from cachedoctor.host import Host
from cachedoctor.locate.files import FileView, LiveFiles
from cachedoctor.locate.services import ServiceEnv, unit_environment
from cachedoctor.locate.world import World
from cachedoctor.policies import PolicyRead


def observe(host: Host | None = None, *, files: FileView | None = None) -> World:
    """A fresh look: nothing read before this call (the mount table included) is trusted."""
    from cachedoctor.drives import partitions

    partitions.cache_clear()
    host = host or Host.current()
    view = files or LiveFiles()
    records, pending, problems = _state()
    if host.is_windows:
        persistent = _windows_persistent()
    else:
        persistent, shell_problems = _posix_persistent(host, view)
        problems += shell_problems

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
    if _nothing_recorded():
        return {}, {}, []
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


def _nothing_recorded() -> bool:
    """Neither a journal folder nor a relocation registry: what most runs find, told by two
    lstats without importing the journal. Anything else there (a file, a damaged one, an
    unreadable folder) is read the whole way, so its problem is reported."""
    import os

    from cachedoctor.state import journal_dir, relocations_file

    for path in (journal_dir(), relocations_file()):
        try:
            os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError:  # ENOTDIR, EACCES: the reader says what is wrong
            pass
        return False
    return True


def _posix_persistent(host: Host, files: FileView) -> tuple[Any, list[str]]:
    """name -> EnvValue as a new session gets it: asked of the login shell (cached until a
    start-up file changes), explained by the start-up files (cachedoctor.locate.loginshell)."""
    from cachedoctor.locate.loginshell import new_session

    table, problems = new_session(host, files)
    return table.get, problems


def _windows_persistent() -> Any:  # pragma: no cover - the registry exists on Windows only
    from cachedoctor.envvars.windows import read_persistent

    return read_persistent
