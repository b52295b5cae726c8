"""Names a person types (tool and location ids): matched without regard to case, and a close
miss answered with the name that was probably meant."""

from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` was most likely a typo of (`hugginface` -> `huggingface`)."""
    import difflib  # only on a miss: not on every start-up

    by_lower = {k.lower(): k for k in known}
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` for a close miss, else nothing."""
    best = closest(name, known)
    return f"; did you mean {best!r}?" if best else ""
