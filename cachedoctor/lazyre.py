"""Regular expressions compiled when first used, not when their module is imported.

A module-level `re.compile` costs 30-150 µs at every start, used or not: a command that loads
the profiles imported 25 patterns it never used (parsers of files that were not there, Windows
and WSL forms on Linux), about 2 ms of a 60 ms start. `lazy_pattern(source)` gives a function
that compiles the pattern on its first call and returns the same pattern after it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


def lazy_pattern(source: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """`re.compile(source, flags)`, made on the first call of the function returned."""

    @functools.cache
    def compiled() -> re.Pattern[str]:
        return re.compile(source, flags)

    return compiled
