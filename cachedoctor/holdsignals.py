"""Functions a Ctrl-C must not interrupt from inside, because a library they call would swallow it.

msgspec 0.23 discards an exception raised while it hashes a typing annotation in `convert`: a
KeyboardInterrupt landing in `typing`'s `__hash__` there was lost, and the command went on
(about 1 run in 300 of a Ctrl-C during start-up, found by a review's stress runs). A function
marked `@holds_signals` is such a place: while it is on the main thread's stack, the CLI's
handler (cli/interrupts.py) holds a signal back and sends it again once the function returns,
as it does during an import. Core code marks; the CLI consults: no import of the CLI here.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

HOLDING: set[CodeType] = set()  # the code of every marked function


def holds_signals(func: F) -> F:
    HOLDING.add(func.__code__)  # type: ignore[attr-defined]
    return func
