"""Modules that start-up imports only because a library imports them as it loads, loaded when
first used instead.

msgspec's package imports each of its codecs and its inspection module as it loads
(`from . import inspect, json, msgpack, structs, toml, yaml`), although a hot command uses at
most its JSON codec; and `urllib.parse`, which pathlib imports, imports `ipaddress` for the
bracketed hosts of URLs. Together that is about 3 ms of a 55 ms start (docs/performance.md,
thirteenth round). Each module named here is still found at once (a missing one fails the
import where it is written, as before) but executed only when one of its attributes is first
read: the standard library's `importlib.util.LazyLoader`, as in the "Implementing lazy imports"
recipe of the importlib documentation.

Only the program does this (`run_program`), for its own process: a caller that embeds
cachedoctor imports as it always has.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from importlib.util import LazyLoader
from types import ModuleType

DEFERRED = frozenset({
    "msgspec.inspect", "msgspec.json", "msgspec.msgpack", "msgspec.structs", "msgspec.toml",
    "msgspec.yaml", "ipaddress",
})


class DeferringFinder:
    """First on `sys.meta_path`: finds a module of `DEFERRED` by the finders after it, and hands
    its loader to `LazyLoader`. Every other module it leaves to them."""

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
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):  # as LazyLoader needs
            spec.loader = LazyLoader(spec.loader)
        return spec


def install() -> None:
    """Defer `DEFERRED` for the rest of this process (once; a module imported already stays)."""
    if DeferringFinder not in sys.meta_path:
        sys.meta_path.insert(0, DeferringFinder)
