"""Parsing and formatting of sizes and ages, shared by quota, clean, scan and tune."""

from __future__ import annotations

from cachedoctor.errors import UserInputError
from cachedoctor.lazyre import lazy_pattern

_DECIMAL = {
    "": 1,
    "B": 1,
    "K": 1000,
    "KB": 1000,
    "M": 1000**2,
    "MB": 1000**2,
    "G": 1000**3,
    "GB": 1000**3,
    "T": 1000**4,
    "TB": 1000**4,
    "P": 1000**5,
    "PB": 1000**5,
}
_BINARY = {"KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4, "PIB": 1024**5}
_SIZE_RE = lazy_pattern(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")

_AGE_UNITS = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "ms": 0.001,
    "us": 0.000001,
}
_AGE_RE = lazy_pattern(r"(\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_size(text: str) -> int:
    """Bytes from `20GB`, `20G` (decimal, like disk vendors), `500MiB` (binary) or `1234`.

    `K/M/G/T` and `KB/MB/GB/TB` are powers of 1000; `KiB/MiB/GiB/TiB` powers of 1024.
    """
    number, _unit, factor = _size_parts(text)
    value = float(number) * factor
    if not value < _TOO_LARGE:  # also inf: `int()` of it would raise OverflowError
        raise UserInputError(f"size {text!r} is too large")
    return int(value)


_TOO_LARGE = float(2**63)  # bytes or seconds no filesystem or clock counts to


def _size_parts(text: str) -> tuple[str, str, int]:
    """The number, the unit (upper case) and its factor in a size; bad input is an error."""
    match = _SIZE_RE().match(str(text))
    if not match:
        raise UserInputError(
            f"invalid size {text!r}: expected a number with an optional unit "
            "(B, KB, MB, GB, TB or KiB, MiB, GiB, TiB), e.g. 20GB or 500MiB"
        )
    number, unit = match.groups()
    unit_upper = unit.upper()
    factor = _BINARY.get(unit_upper) or _DECIMAL.get(unit_upper)
    if factor is None:
        raise UserInputError(
            f"invalid size unit {unit!r} in {text!r}: use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
        )
    return number, unit_upper, factor


def explain_size(text: str) -> str:
    """How `parse_size` read `text`, shown before acting on it: `1.5 GB = 1,500,000,000 bytes
    (1.40 GiB)`; a binary size is shown with its decimal reading, and the other way round."""
    number, unit_upper, _factor = _size_parts(text)
    nbytes = parse_size(text)
    if unit_upper in ("", "B"):
        return f"{nbytes:,} bytes ({format_size(nbytes)})"
    binary = unit_upper in _BINARY
    named = (unit_upper[0] + "iB") if binary else ("kB" if unit_upper[0] == "K" else unit_upper[0] + "B")
    other = _two_decimals(nbytes, binary=not binary)
    return f"{number} {named} = {nbytes:,} bytes ({other})"


def _two_decimals(n: int, *, binary: bool) -> str:
    step = 1024.0 if binary else 1000.0
    units = ["KiB", "MiB", "GiB", "TiB", "PiB"] if binary else ["kB", "MB", "GB", "TB", "PB"]
    value = n / step
    for unit in units:
        if value < step or unit == units[-1]:
            return f"{value:.2f} {unit}"
        value /= step
    raise AssertionError("unreachable")


def format_size(n: int | float, *, binary: bool = True) -> str:
    """Short human size: 1.5 GiB. Tables use this; JSON always carries exact integers."""
    step = 1024.0 if binary else 1000.0
    units = (
        ["B", "KiB", "MiB", "GiB", "TiB", "PiB"] if binary else ["B", "kB", "MB", "GB", "TB", "PB"]
    )
    value = float(n)
    for unit in units:
        if abs(value) < step or unit == units[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= step
    raise AssertionError("unreachable")


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2,048 files`."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def parse_age(text: str) -> float:
    """Seconds from `30d`, `12h`, `2w`, `1h30m` (systemd time span style)."""
    compact = str(text).strip().lower().replace(" ", "")
    if not compact:
        raise UserInputError("empty age: expected e.g. 30d, 12h, 2w")
    total = float(compact) if compact.isdigit() else _span_seconds(compact, text)  # digits: seconds
    if not total < _TOO_LARGE:
        raise UserInputError(f"age {text!r} is too large")
    return total


def _span_seconds(compact: str, text: str) -> float:
    total = 0.0
    pos = 0
    for match in _AGE_RE().finditer(compact):
        if match.start() != pos or match.group(2) not in _AGE_UNITS:
            break
        total += float(match.group(1)) * _AGE_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(compact) or total <= 0:
        raise UserInputError(
            f"invalid age {text!r}: expected a number and a unit (s, m, h, d, w), e.g. 30d, 12h, 2w"
        )
    return total
