"""Everything the effective-location resolution reads, gathered in one value.

`World` is plain data plus lookups: the host (OS, this process's environment, home), a read-only
view of files, the environment new sessions get (`persistent`), services' environments, browser
policies and cachedoctor's relocation records. `observe()` (cachedoctor.locate.live) builds
the live one; tests build one by hand (`World.of(...)`), so resolution on Windows or macOS is
testable on Linux.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from cachedoctor.host import Host
from cachedoctor.locate.files import DictFiles, FileView, OverlayFiles
from cachedoctor.locate.services import ServiceEnv
from cachedoctor.policies import PolicyRead

_NOT_SET = PolicyRead()

if TYPE_CHECKING:
    from cachedoctor.relocate.journal import Operation


class EnvValue(msgspec.Struct, frozen=True):
    value: str
    origin: str  # "~/.profile:12, cachedoctor's block", "HKCU\\Environment", a unit file line
    managed: bool = False  # written by cachedoctor (`env set`, `move --method env`)


Persistent = Callable[[str], "EnvValue | None"]
Policy = Callable[[str, str], "PolicyRead"]  # (browser, policy) -> what the browser reads
Services = Callable[[str], ServiceEnv]


class World(msgspec.Struct, frozen=True):
    host: Host
    files: FileView
    persistent: Persistent = lambda _name: None
    service: Services = lambda unit: ServiceEnv(unit, None, {})
    policy: Policy = lambda _browser, _name: _NOT_SET
    records: Mapping[str, Operation] = msgspec.field(default_factory=dict)  # "tool/location" -> record
    pending: Mapping[str, Operation] = msgspec.field(default_factory=dict)  # unfinished operations
    problems: tuple[str, ...] = ()  # state that could not be read (a damaged registry file)

    @classmethod
    def of(cls, host: Host, files: FileView | None = None, *,
           persistent: Mapping[str, str | EnvValue] | None = None,
           services: Mapping[str, ServiceEnv] | None = None,
           policies: Mapping[tuple[str, str], tuple[Any, str] | PolicyRead] | None = None,
           records: Mapping[str, Operation] | None = None) -> World:
        """A world given as plain data (for tests and pure callers)."""
        table = {k: v if isinstance(v, EnvValue) else EnvValue(v, "test")
                 for k, v in (persistent or {}).items()}
        fold = str.upper if host.is_windows else (lambda s: s)
        folded = {fold(k): v for k, v in table.items()}
        svc = dict(services or {})
        pol = {k: v if isinstance(v, PolicyRead) else PolicyRead(*v)
               for k, v in (policies or {}).items()}
        return cls(
            host, files or DictFiles(windows=host.is_windows),
            persistent=lambda name: folded.get(fold(name)),
            service=lambda unit: svc.get(unit, ServiceEnv(unit, None, {})),
            policy=lambda browser, name: pol.get((browser, name), _NOT_SET),
            records=dict(records or {}),
        )

    def new_session_host(self, asked: set[str] | None = None) -> Host:
        """The host as a new shell, a cron job or a freshly started tool sees it: this process's
        environment with what the start-up files (or the registry) set on top. With `asked`,
        every name looked up in it is added there ("" once it is listed whole)."""
        return Host(self.host.os, _Layered(self.host, self.persistent, asked), self.host.home)

    def same_in_this_process(self, asked: set[str]) -> bool:
        """Whether this process's environment gives every name in `asked` (from
        `new_session_host`) what the new sessions' gives: then whatever was read from the one
        reads the same from the other."""
        if "" in asked:
            return False
        env, getenv = self.host.env, self.host.getenv
        for name in asked:
            found = self.persistent(name)
            value = getenv(name)
            if (found is not None and found.value != value) or env.get(name) != value:
                return False
        return True

    def origin(self, name: str) -> tuple[str, bool]:
        """Where a variable of the new-session view comes from, and whether cachedoctor set it."""
        found = self.persistent(name)
        if found is not None:
            return found.origin, found.managed
        return "this process's environment", False


class _EnvView(Mapping[str, str]):
    """An environment computed on lookup, not copied: `get` decides, `[]` follows from it."""

    def get(self, key: str, default: Any = None) -> Any:
        raise NotImplementedError

    def __getitem__(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return str(value)


class _Layered(_EnvView):
    """The process environment with the persistent values on top (names case-insensitive on
    Windows, as there)."""

    def __init__(self, host: Host, persistent: Persistent, asked: set[str] | None = None) -> None:
        self._host, self._persistent, self._asked = host, persistent, asked

    def get(self, key: str, default: Any = None) -> Any:
        if self._asked is not None:
            self._asked.add(key)
        found = self._persistent(key)
        if found is not None:
            return found.value
        value = self._host.getenv(key)
        return default if value is None else value

    def __iter__(self) -> Iterator[str]:
        if self._asked is not None:
            self._asked.add("")
        return iter(self._host.env)

    def __len__(self) -> int:
        if self._asked is not None:
            self._asked.add("")
        return len(self._host.env)


class EnvWithout(_EnvView):
    """`env` with some variables unset (upper-case names, matched in any case): where a tool
    would be without its settings is expanded in this view, not in a copy per template."""

    def __init__(self, env: Mapping[str, str], names: frozenset[str]) -> None:
        self._env, self._names = env, names

    def get(self, key: str, default: Any = None) -> Any:
        if key.upper() in self._names:
            return default
        value = self._env.get(key)
        return default if value is None else value

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._env if self.get(k) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def with_changes(world: World, *, texts: Mapping[str, str | None] | None = None,
                 persistent: Mapping[str, EnvValue | None] | None = None,
                 policies: Mapping[tuple[str, str], PolicyRead] | None = None,
                 service_values: Mapping[str, Mapping[str, tuple[str, str]]] | None = None) -> World:
    """The world as it would be after a change (a config file rewritten, a variable set, a
    policy written): `move` resolves the tool in it before changing anything, to be sure the
    tool would really look where the cache goes."""
    files = OverlayFiles(world.files, dict(texts)) if texts else world.files
    env = dict(persistent or {})
    fold = str.upper if world.host.is_windows else (lambda s: s)
    folded = {fold(k): v for k, v in env.items()}
    base_persistent = world.persistent

    def new_persistent(name: str) -> EnvValue | None:
        if fold(name) in folded:
            return folded[fold(name)]
        return base_persistent(name)

    pol = dict(policies or {})
    base_policy = world.policy

    def new_policy(browser: str, name: str) -> PolicyRead:
        return pol[(browser, name)] if (browser, name) in pol else base_policy(browser, name)

    extra = dict(service_values or {})
    base_service = world.service

    def new_service(unit: str) -> ServiceEnv:
        found = base_service(unit)
        if unit in extra and found.file is not None:
            return ServiceEnv(unit, found.file, {**found.values, **extra[unit]})
        return found

    return World(world.host, files, new_persistent, new_service, new_policy, world.records,
                 world.pending, world.problems)
