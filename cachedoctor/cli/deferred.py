"""Modules that start-up imports only because a library imports them as it loads, loaded when
first used instead.

msgspec's package imports each of its codecs and its inspection module as it loads
(`from . import inspect, json, msgpack, structs, toml, yaml`), although a hot command uses at
most its JSON codec; and `urllib.parse`, which pathlib imports, imports `ipaddress` for the
bracketed hosts of URLs. Together that is about 3 ms of a 55 ms start (docs/performance.md,
thirteenth round). Each module named here is still found at once (a missing one fails the
import where it is written, as before) but executed only when one of its attributes is first
read.

This is the importlib documentation's lazy-import recipe, with these differences from the
standard library's `importlib.util.LazyLoader`, which it replaces (each measured, in
tests/test_deferred.py):

* the first read takes the import system's own lock for the module, so two threads reading at
  once wait for one load (the standard one has no lock before 3.12.3: the second thread saw a
  module with nothing in it, on 3.10 to 3.12.1), and a circular wait between threads is found
  and answered as the import system answers it, with the module as far as it has got (with a
  lock of its own, as the standard one has from 3.12.3, two threads each loading a module the
  other imports waited for ever: this module's first version did);
* a load that fails leaves the module out of `sys.modules` and out of its package, so the next
  import tries again, as after any failed import (the standard one keeps the half-run module);
* an assignment to the module, or a `del`, before its first read loads it first; a reload
  loads at once; a module that sets its own class keeps it.

Only the program does this (`run_program`), for its own process: a caller that embeds
cachedoctor imports as it always has.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import _bootstrap  # the import system: its per-module locks, deadlock found
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec

DEFERRED = frozenset({
    "msgspec.inspect", "msgspec.json", "msgspec.msgpack", "msgspec.structs", "msgspec.toml",
    "msgspec.yaml", "ipaddress",
})

# What the import system has used to lock a module and find a circular wait since 3.3 (private,
# so looked up: without them nothing is deferred)
_MODULE_LOCK = getattr(_bootstrap, "_get_module_lock", None)
_DEADLOCK = getattr(_bootstrap, "_DeadlockError", None)


class DeferringFinder:
    """First on `sys.meta_path`: finds a module of `DEFERRED` by the finders after it, and
    defers running its code (`_DeferringLoader`). Every other module, and a reload (which
    names its `target`), it leaves to them."""

    @classmethod
    def find_spec(cls, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in DEFERRED or target is not None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is cls or find is None:
                continue
            spec: ModuleSpec | None = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = cast("Loader", _DeferringLoader(spec.loader))
        return spec


class _DeferringLoader:
    """Creates the module as its own loader would, and leaves running its code to the first
    read (`DeferredModule`). The module names its own loader, and its spec keeps that loader's
    state (a frozen module's has one), from the start."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.loading = False

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is None:  # (the import system sets it before it calls this)
            raise ImportError(f"{module.__name__} has no spec to defer its loading with")
        spec.loader = module.__loader__ = self.loader  # linecache, inspect and reload see it
        _PENDING[module] = self
        module.__class__ = DeferredModule


_PENDING: dict[ModuleType, _DeferringLoader] = {}  # each module whose code has not run yet


class DeferredModule(ModuleType):
    """A module whose code has not run yet: the first read, assignment or `del` of an
    attribute runs it (`_load`), then it is a plain module again."""

    def __getattribute__(self, name: str) -> Any:
        if type(self) is DeferredModule:
            _load(self)
        return ModuleType.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _load(self)
        ModuleType.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        _load(self)
        ModuleType.__delattr__(self, name)


def _load(module: ModuleType) -> None:
    """Run the module's code once, holding the import system's lock for it. A read from inside
    that run (the module's own code, an import it makes), or one the lock finds in a circular
    wait, sees the module as far as it has got, as during any import."""
    state = _PENDING.get(module)
    if state is None:
        return  # loaded, by another thread
    name = object.__getattribute__(module, "__spec__").name
    lock = _MODULE_LOCK(name)  # type: ignore[misc]
    try:
        lock.acquire()
    except _DEADLOCK:  # type: ignore[misc]
        return
    try:
        if _PENDING.get(module) is not state or state.loading:
            return  # loaded meanwhile, by another thread; or a read from inside the load
        state.loading = True
        try:
            state.loader.exec_module(module)
        except BaseException:
            _forget(module, name)
            raise
        finally:
            del _PENDING[module]
            if type(module) is DeferredModule:  # (a module may set a class of its own)
                object.__setattr__(module, "__class__", ModuleType)
    finally:
        lock.release()


def _forget(module: ModuleType, name: str) -> None:
    """A failed load: out of `sys.modules` and its package, so the next import tries again."""
    if sys.modules.get(name) is module:
        del sys.modules[name]
    parent, _, child = name.rpartition(".")
    package = sys.modules.get(parent) if parent else None
    if package is not None and package.__dict__.get(child) is module:
        del package.__dict__[child]


def install() -> None:
    """Defer `DEFERRED` for the rest of this process (once; a module imported already stays),
    where the import system's module locks are there to load them with."""
    if _MODULE_LOCK is not None and _DEADLOCK is not None and DeferringFinder not in sys.meta_path:
        sys.meta_path.insert(0, DeferringFinder)
