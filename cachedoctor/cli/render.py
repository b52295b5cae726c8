"""Shared rich rendering pieces: sizes, bars, dates."""

from __future__ import annotations

import time

from cachedoctor.sizes import format_size

BAR_WIDTH = 20


def bar_width_for(console_width: int) -> int:
    """Bars give way to paths on a narrow terminal."""
    return BAR_WIDTH if console_width >= 140 else 10 if console_width >= 100 else 4


def bar(value: int, largest: int, width: int = BAR_WIDTH) -> str:
    if largest <= 0:
        return ""
    filled = round(width * value / largest)
    return "█" * filled + "·" * (width - filled)


def size(n: int | None) -> str:
    return "-" if n is None else format_size(n)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    age = time.time() - timestamp
    if age < 0:
        return "in the future"
    for unit, seconds in (("d", 86400), ("h", 3600), ("m", 60)):
        if age >= seconds:
            return f"{int(age // seconds)}{unit} ago"
    return "just now"
