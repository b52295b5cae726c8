"""Modules that start-up imports only because a library imports them as it loads, loaded when
first used instead.

msgspec's package imports each of its codecs and its inspection module as it loads
(`from . import inspect, json, msgpack, structs, toml, yaml`), although a hot command uses at
most its JSON codec; and `urllib.parse`, which pathlib imports, imports `ipaddress` for the
bracketed hosts of URLs. Together that is about 3 ms of a 55 ms start (docs/performance.md,
thirteenth round). Each module named here is still found at once (a missing one fails the
import where it is written, as before) but executed only when one of its attributes is first
read.

This is the importlib documentation's lazy-import recipe, with two differences from the
standard library's `importlib.util.LazyLoader`, which it replaces: the first read takes a lock,
so two threads reading at once wait for one load (the standard one has a lock from 3.12.3
only: before it, the second thread saw a module with nothing in it, measured on 3.10 to 3.12.1);
and a load that fails leaves the module out of `sys.modules`, so the next import tries again,
as after any failed import (the standard one keeps the half-run module for good).

Only the program does this (`run_program`), for its own process: a caller that embeds
cachedoctor imports as it always has.
"""

from __future__ import annotations

import _thread
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec

DEFERRED = frozenset({
    "msgspec.inspect", "msgspec.json", "msgspec.msgpack", "msgspec.structs", "msgspec.toml",
    "msgspec.yaml", "ipaddress",
})


class DeferringFinder:
    """First on `sys.meta_path`: finds a module of `DEFERRED` by the finders after it, and
    defers running its code (`_DeferringLoader`). Every other module it leaves to them."""

    @classmethod
    def find_spec(cls, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in DEFERRED:
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
    attribute read (`DeferredModule`). From then on the module names its own loader."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.lock = _thread.RLock()
        self.loading = False

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is None:  # (the import system sets it before it calls this)
            raise ImportError(f"{module.__name__} has no spec to defer its loading with")
        spec.loader = module.__loader__ = self.loader  # linecache, inspect and reload see it
        spec.loader_state = self
        module.__class__ = DeferredModule


class DeferredModule(ModuleType):
    """A module whose code has not run yet: the first attribute read runs it, under its
    loader's lock, then the module is a plain module again. A read from inside that run (the
    module's own code, an import it makes) sees the module as far as it has got, as during
    any import."""

    def __getattribute__(self, name: str) -> Any:
        spec = object.__getattribute__(self, "__spec__")
        state: _DeferringLoader = spec.loader_state
        with state.lock:
            if type(self) is DeferredModule and not state.loading:
                state.loading = True
                try:
                    state.loader.exec_module(self)
                except BaseException:
                    if sys.modules.get(spec.name) is self:
                        del sys.modules[spec.name]  # the next import tries again
                    raise
                finally:
                    state.loading = False
                    object.__setattr__(self, "__class__", ModuleType)
        return ModuleType.__getattribute__(self, name)


def install() -> None:
    """Defer `DEFERRED` for the rest of this process (once; a module imported already stays)."""
    if DeferringFinder not in sys.meta_path:
        sys.meta_path.insert(0, DeferringFinder)
