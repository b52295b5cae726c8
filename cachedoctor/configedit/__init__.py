"""Format-preserving set/remove/get of one key in a config file.

Formats: `jsonc` (JSON with comments and trailing commas, e.g. VS Code `settings.json`), `json`,
`yaml`, `toml`, `ini` (pip.conf) and `npmrc`. A string key is ONE key, dots included
(`grok.code.cacheSize`); a list is a path of nested keys (`["cache", "ttl"]`). For `ini`,
`section` names the `[section]`; for the other formats it is a leading key of the path.

Everything outside the changed value or added/removed member stays byte-for-byte as it was
(comments, blank lines, tabs or spaces, CRLF, key order, unicode, trailing commas). The edited
text is re-parsed and checked before it replaces the file, which is written atomically (temp
file in the same folder, fsync, rename). Malformed input raises `UserInputError` naming the
file, line and column, and the file is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from cachedoctor.configedit.common import ConfigSyntaxError
from cachedoctor.configedit.formats import NAMES as FORMATS
from cachedoctor.configedit.formats import Format, get_format, writable_format
from cachedoctor.errors import OperationFailed, UserInputError
from cachedoctor.lazyre import lazy_pattern

Key = str | list[str]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class ConfigEdit(msgspec.Struct):
    path: Path
    before: str | None  # None: the file did not exist
    after: str
    changed: bool
    diff: str  # unified diff, empty when unchanged
    old_value: Any = MISSING  # MISSING when the key was absent

    @property
    def existed(self) -> bool:
        return self.before is not None


def key_path(key: Key, *, section: str | None = None, fmt: str | Format = "json") -> list[str]:
    """The key as a path of names; for formats without INI sections, `section` leads it."""
    spec = get_format(fmt) if isinstance(fmt, str) else fmt
    if isinstance(key, str):
        parts = [key]
    elif isinstance(key, (list, tuple)) and key and all(isinstance(k, str) for k in key):
        parts = list(key)
    else:
        raise UserInputError(f"invalid key {key!r}: expected a string or a list of strings")
    if spec.flat:
        if len(parts) != 1:
            raise UserInputError(f"{spec.name} keys are flat: got the nested key {parts!r}")
        return parts
    return ([section] if section and not spec.sections else []) + parts


def show_key(key: Key) -> str:
    return key if isinstance(key, str) else " > ".join(key)


# --- text level ------------------------------------------------------------------------------


MAX_TEXT = 64 << 20  # a config file bigger than this is not one: refused, not parsed


@contextmanager
def _bounded(text: str) -> Iterator[None]:
    """Hostile input ends in a ConfigSyntaxError, never a RecursionError or a memory blow-up:
    thousands of nested levels, or a huge file."""
    if len(text) > MAX_TEXT:
        raise ConfigSyntaxError(f"the file is larger than {MAX_TEXT >> 20} MiB", 1, 1)
    try:
        yield
    except RecursionError:
        raise ConfigSyntaxError("nested too deeply to be read safely", 1, 1) from None


def get_in_text(text: str, fmt: str, key: Key, *, section: str | None = None) -> Any:
    """The value of `key` in `text`; KeyError when absent, ConfigSyntaxError when malformed."""
    spec = get_format(fmt)
    with _bounded(text):
        return spec.get(text, key_path(key, section=section, fmt=spec), section)


def set_in_text(text: str, fmt: str, key: Key, value: Any, *, section: str | None = None) -> str:
    """`text` with `key` set to `value`, verified by re-parsing; raises ConfigSyntaxError for
    malformed input and ValueError when the value cannot go there."""
    spec = writable_format(fmt)
    assert spec.set is not None
    with _bounded(text):
        after = spec.set(text, key_path(key, section=section, fmt=spec), value, section)
    if after != text:
        _verify(after, fmt, key, section, value)
    return after


def remove_in_text(text: str, fmt: str, key: Key, *, section: str | None = None) -> str:
    spec = writable_format(fmt)
    assert spec.remove is not None
    with _bounded(text):
        after = spec.remove(text, key_path(key, section=section, fmt=spec), section)
    if after != text:
        _verify(after, fmt, key, section, MISSING)
    return after


def get_many_in_text(text: str, fmt: str, keys: list[Key], *, section: str | None = None) -> list[Any]:
    """The values of `keys` (MISSING for absent ones), with one parse where the format can."""
    spec = get_format(fmt)
    paths = [key_path(k, section=section, fmt=spec) for k in keys]
    with _bounded(text):
        if spec.get_many is not None:
            found = spec.get_many(text, paths, section)
        else:
            found = []
            for path in paths:
                try:
                    found.append(spec.get(text, path, section))
                except KeyError as exc:
                    found.append(exc)
    return [MISSING if isinstance(v, KeyError) else v for v in found]


def set_many_in_text(text: str, fmt: str, items: list[tuple[Key, Any]], *,
                     section: str | None = None) -> str:
    """`text` with every key set, checked with one re-parse at the end (linear in the number
    of keys: a 20 MB settings.json is parsed k + 1 times, not 3k)."""
    spec = writable_format(fmt)
    assert spec.set is not None
    after = text
    with _bounded(text):
        for key, value in items:
            after = spec.set(after, key_path(key, section=section, fmt=spec), value, section)
    if after == text:
        return after
    try:
        got = get_many_in_text(after, fmt, [k for k, _ in items], section=section)
    except ConfigSyntaxError as exc:
        raise OperationFailed(f"edit produced invalid {fmt} ({exc}); nothing was written") from None
    for (key, value), now in zip(items, got, strict=True):
        _check_round_trip(fmt, key, value, now)
    return after


def _check_round_trip(fmt: str, key: Key, expected: Any, got: Any) -> None:
    reads_back = get_format(fmt).reads_back
    if reads_back is not None and expected is not MISSING:
        expected = reads_back(expected)
    if got is MISSING and expected is MISSING:
        return
    if got is MISSING or expected is MISSING or got != expected:
        raise OperationFailed(f"edit of {show_key(key)!r} did not round-trip; nothing was written")


def _verify(after: str, fmt: str, key: Key, section: str | None, expected: Any) -> None:
    """Re-parse the edited text: it must be valid and hold exactly the intended value."""
    try:
        got = get_in_text(after, fmt, key, section=section)
    except KeyError:
        got = MISSING
    except ConfigSyntaxError as exc:
        raise OperationFailed(f"edit produced invalid {fmt} ({exc}); nothing was written") from None
    _check_round_trip(fmt, key, expected, got)


# --- file level ------------------------------------------------------------------------------


def read_text(path: Path) -> str | None:
    """The file's text (CRLF kept), or None when it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UserInputError(f"{path} is a folder, not a config file") from None
    except OSError as exc:
        raise UserInputError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserInputError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def syntax_error(path: Path, exc: ConfigSyntaxError) -> UserInputError:
    return UserInputError(
        f"{path}:{exc.line}:{exc.column}: malformed file: {exc.message}",
        hint="the file was left untouched; fix it (or restore it) and run again",
    )


CONTEXT = 3
_HUNK = lazy_pattern(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_diff(before: str | None, after: str, name: str) -> str:
    """A unified diff of the change. The lines both texts share at the start and the end are
    cut off first (keeping the context), so a one-key edit of a 20 MB file compares a few
    lines, not the whole file (difflib is quadratic in the worst case)."""
    if before == after:
        return ""
    import difflib  # only a preview draws one
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    skip = max(0, head - CONTEXT)
    keep_tail = max(0, tail - CONTEXT)
    old_part, new_part = old[skip:len(old) - keep_tail], new[skip:len(new) - keep_tail]
    lines = []
    for line in difflib.unified_diff(old_part, new_part, fromfile=f"{name} (before)" if before is not None
                                     else "/dev/null", tofile=f"{name} (after)", n=CONTEXT):
        match = _HUNK().match(line)
        if match and skip:
            a, b, c, d = match.groups()
            line = f"@@ -{int(a) + skip}{b or ''} +{int(c) + skip}{d or ''} @@" + line[match.end():]
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        lines.append(line.replace("\r\n", "\n"))
    return "".join(lines)


def write_target(path: Path) -> Path:
    """Where writing `path` goes: a symlinked config file's target (dotfile managers: the link
    stays a link). A link to nothing is refused: writing through it would create the target, and
    its folders, wherever the link points."""
    if not path.is_symlink():
        return path
    if not path.exists():
        raise UserInputError(f"{path} is a link to {os.readlink(path)}, which does not exist; "
                             "nothing was changed", hint="fix or remove the link, then run again")
    return Path(os.path.realpath(path))


def write_text(path: Path, text: str) -> None:
    """Atomic replace through a link (see `write_target`)."""
    from cachedoctor.fsutil import atomic_write_text

    atomic_write_text(write_target(path), text)


def remove_file(path: Path) -> None:
    """Delete a config file cachedoctor created; through a link, the link's target goes and the
    link itself (the user's) stays."""
    write_target(path).unlink(missing_ok=True)


def _edit(path: Path, fmt: str, key: Key, value: Any, *, section: str | None, create: bool,
          dry_run: bool, remove: bool) -> ConfigEdit:
    path = Path(path)
    if not dry_run:
        write_target(path)  # a dangling link is refused before anything is computed
    before = read_text(path)
    if before is None and not create:
        raise UserInputError(f"{path} does not exist")
    text = before or ""
    try:
        try:
            old = get_in_text(text, fmt, key, section=section) if text.strip() else MISSING
        except KeyError:
            old = MISSING
        if remove:
            after = remove_in_text(text, fmt, key, section=section)
        else:
            after = set_in_text(text, fmt, key, value, section=section)
    except ConfigSyntaxError as exc:
        raise syntax_error(path, exc) from None
    except ValueError as exc:
        raise UserInputError(f"{path}: cannot set {show_key(key)}: {exc}") from None
    if remove and before is None:
        return ConfigEdit(path, None, "", False, "", MISSING)
    changed = after != before
    edit = ConfigEdit(path, before, after, changed, unified_diff(before, after, str(path)), old)
    if changed and not dry_run:
        write_text(path, after)
    return edit


def set_key(path: Path, fmt: str, key: Key, value: Any, *, section: str | None = None,
            create: bool = True, dry_run: bool = False) -> ConfigEdit:
    """Set one key, creating the file (and its folders) when `create` and it is missing."""
    return _edit(path, fmt, key, value, section=section, create=create, dry_run=dry_run, remove=False)


def remove_key(path: Path, fmt: str, key: Key, *, section: str | None = None,
               dry_run: bool = False) -> ConfigEdit:
    """Remove one key; a missing file or key is no change."""
    return _edit(path, fmt, key, None, section=section, create=True, dry_run=dry_run, remove=True)


def get_key(path: Path, fmt: str, key: Key, *, section: str | None = None) -> Any:
    """The key's value; KeyError when the file or key is absent, UserInputError when malformed."""
    path = Path(path)
    text = read_text(path)
    if text is None:
        raise KeyError(show_key(key))
    try:
        return get_in_text(text, fmt, key, section=section)
    except ConfigSyntaxError as exc:
        raise syntax_error(path, exc) from None


__all__ = [
    "FORMATS",
    "MISSING",
    "ConfigEdit",
    "ConfigSyntaxError",
    "Format",
    "get_format",
    "get_in_text",
    "get_key",
    "remove_in_text",
    "remove_key",
    "set_in_text",
    "set_key",
    "show_key",
    "unified_diff",
]
