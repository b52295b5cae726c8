"""The environment a systemd service gets (Ollama's server reads OLLAMA_MODELS there, never
from a shell), read as systemd reads it. Pure: reads through a `FileView`.

Sources (systemd 252 man pages; the behaviour was checked against `systemd --test`):

* systemd.unit(5) "Unit File Load Path": the unit file is the first found in `UNIT_DIRS`
  (an instance `name@x.service` falls back to its template `name@.service`); an empty unit
  file or one linked to /dev/null is masked.
* systemd.unit(5) "Description": drop-ins are the `*.conf` files of `<unit>.d/`, the
  template's `<name@>.service.d/`, the dash prefixes' `<foo->.service.d/`, and then the
  type's `service.d/`, in every unit folder. One name is one drop-in (the first folder in that
  order wins: a unit's own folder, folder by folder, then the type folders); they are applied
  in the order of their file names.
* systemd.syntax(7): `#`/`;` comment lines, a trailing backslash continues the line (with a
  space; comment lines inside are skipped), words are split at spaces, `"..."` and `'...'`
  quote, C escapes (`\\n`, `\\s`, `\\xNN`, `\\NNN`, `\\uNNNN`) apply in and out of quotes; a
  bad escape or an open quote drops the rest of the line.
* systemd.exec(5) `Environment=`: assignments in order, a later one wins, an empty value resets
  the list; specifiers are resolved after unquoting (`%h` is /root for the system manager,
  whatever `User=` says; `%%` is `%`; an unknown one drops the assignment); no `$` expansion.
  `EnvironmentFile=`: files (`-` for optional, globs allowed) read just before the process
  starts; "Settings from these files override settings made with Environment=" (systemd.exec(5),
  EnvironmentFile=). `UnsetEnvironment=` is applied last.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from cachedoctor.lazyre import lazy_pattern
from cachedoctor.locate.files import FileView

# systemd.unit(5), "System Unit Search Path", highest priority first.
UNIT_DIRS = (
    "/etc/systemd/system.control",
    "/run/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
)

_NAME = lazy_pattern(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", '"': '"', "'": "'", "s": " "}
# systemd.unit(5) "Specifiers" for the system manager. The ones cachedoctor cannot know
# without asking the running system (host name, machine and boot id, OS release fields,
# unescaped names) are left in the value and reported.
_HOST_SPECIFIERS = frozenset("aAbBdfHIJlmMoPqvwWyY")


class ServiceEnv(msgspec.Struct, frozen=True):
    unit: str
    file: str | None  # the unit file found, None when the service is not installed
    values: dict[str, tuple[str, str]]  # name -> (value, where it is set)
    problems: tuple[str, ...] = ()  # what could not be read as systemd would


class _Syntax(ValueError):
    """A word systemd refuses: the rest of the line is dropped."""


def unit_environment(unit: str, files: FileView) -> ServiceEnv:
    main = _unit_file(unit, files)
    if main is None:
        return ServiceEnv(unit, None, {})
    problems: list[str] = []
    plain: dict[str, tuple[str, str]] = {}
    env_files: list[tuple[str, bool, str]] = []  # (pattern, optional, where)
    unset: list[tuple[str, str | None]] = []
    for path in [main, *_dropins(unit, files)]:
        _read_unit(files.read_text(path) or "", path, unit, plain, env_files, unset, problems)
    values = dict(plain)
    for pattern, optional, where in env_files:
        paths = files.glob(pattern) if any(c in pattern for c in "*?[") else [pattern]
        for env_path in paths:
            text = files.read_text(env_path)
            if text is None:
                if not optional:
                    state = "cannot be read" if files.lexists(env_path) else "does not exist"
                    problems.append(f"{where}: EnvironmentFile {env_path} {state} (systemd "
                                    "will not start the service)")
                continue
            for name, value, line in env_file_assignments(text):
                values[name] = (value, f"{env_path}:{line}")  # files win over Environment=
    for name, only_value in unset:
        if name in values and (only_value is None or values[name][0] == only_value):
            del values[name]
    return ServiceEnv(unit, main, values, tuple(problems))


def _split(unit: str) -> tuple[str, str, str | None]:
    """(stem before `@` or the suffix, type, instance or None)."""
    name, _, kind = unit.rpartition(".")
    stem, at, instance = name.partition("@")
    return stem, kind, instance if at else None


def _unit_file(unit: str, files: FileView) -> str | None:
    stem, kind, instance = _split(unit)
    names = [unit] if instance is None else [unit, f"{stem}@.{kind}"]
    for name in names:
        for folder in UNIT_DIRS:
            path = f"{folder}/{name}"
            if files.read_text(path) is None:
                continue
            link = files.link(path)
            if files.read_text(path) == "" or (link is not None and link[1] == "/dev/null"):
                return None  # masked: systemd will not start it
            return path
    return None


def _dropins(unit: str, files: FileView) -> list[str]:
    """Drop-in paths in the order systemd applies them."""
    stem, kind, instance = _split(unit)
    own = [unit] if instance is None else [unit, f"{stem}@.{kind}"]
    prefixes = [f"{stem[:i + 1]}.{kind}" for i in range(len(stem) - 1, -1, -1) if stem[i] == "-"]
    order = [f"{folder}/{name}.d" for folder in UNIT_DIRS for name in [*own, *prefixes]]
    order += [f"{folder}/{kind}.d" for folder in UNIT_DIRS]
    chosen: dict[str, str] = {}  # file name -> path; the first folder in `order` wins
    for folder in order:
        for path in files.glob(f"{folder}/*.conf"):
            chosen.setdefault(path.rsplit("/", 1)[-1], path)
    return [chosen[name] for name in sorted(chosen)]


def _lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line): continuations joined as systemd joins them."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if pending is not None and stripped[:1] in ("#", ";"):
            continue  # a comment inside a continued line is skipped
        if pending is None:
            start = number
            if not stripped or stripped[0] in "#;":
                continue
        line = raw if pending is None else pending + raw
        if _continues(line):
            pending = line[:-1] + " "
            continue
        out.append((start, line.strip()))
        pending = None
    if pending is not None:
        out.append((start, pending.strip()))
    return out


def _continues(line: str) -> bool:
    """The line ends with a backslash that is not itself escaped (a space after it ends
    the line as it is)."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _read_unit(text: str, path: str, unit: str, plain: dict[str, tuple[str, str]],
               env_files: list[tuple[str, bool, str]], unset: list[tuple[str, str | None]],
               problems: list[str]) -> None:
    section = ""
    for number, line in _lines(text):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        where = f"{path}:{number}"
        if key == "Environment":
            if not value:
                plain.clear()  # an empty assignment resets the list
                continue
            for word in _words(value, where, problems):
                resolved = _specifiers(word, unit, where, problems)
                name, sep, val = (resolved or "").partition("=")
                if resolved is not None and sep and _NAME().match(name):
                    plain[name] = (val, where)
        elif key == "EnvironmentFile":
            if not value:
                env_files.clear()
                continue
            optional = value.startswith("-")
            resolved = _specifiers(value[1:] if optional else value, unit, where, problems)
            if resolved is not None and resolved.startswith("/"):
                env_files.append((resolved, optional, where))
        elif key == "UnsetEnvironment":
            if not value:
                unset.clear()
                continue
            for word in _words(value, where, problems):
                resolved = _specifiers(word, unit, where, problems)
                if resolved is not None:
                    name, sep, val = resolved.partition("=")
                    unset.append((name, val if sep else None))


def _words(value: str, where: str, problems: list[str]) -> list[str]:
    """extract_first_word(EXTRACT_UNQUOTE | EXTRACT_CUNESCAPE), word by word: what comes
    before a syntax error is kept."""
    words: list[str] = []
    i = 0
    while True:
        while i < len(value) and value[i] in " \t\n\r":
            i += 1
        if i >= len(value):
            return words
        try:
            word, i = _word(value, i)
        except _Syntax as exc:
            problems.append(f"{where}: systemd ignores the rest of this line ({exc})")
            return words
        try:
            words.append(word.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(f"{where}: an assignment that is not UTF-8 is ignored")


def _word(value: str, i: int) -> tuple[bytes, int]:
    out = bytearray()
    quote = ""
    while i < len(value):
        char = value[i]
        if char == "\\":
            decoded, i = _escape(value, i + 1)
            out += decoded
            continue
        if quote:
            if char == quote:
                quote = ""
            else:
                out += char.encode("utf-8", "surrogateescape")
        elif char in "'\"":
            quote = char
        elif char in " \t\n\r":
            return bytes(out), i
        else:
            out += char.encode("utf-8", "surrogateescape")
        i += 1
    if quote:
        raise _Syntax(f"a {quote} is not closed")
    return bytes(out), i


def _escape(value: str, i: int) -> tuple[bytes, int]:
    """cunescape_one: the bytes of one C escape starting after its backslash."""
    if i >= len(value):
        raise _Syntax("a backslash ends the line")
    char = value[i]
    if char in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[char].encode(), i + 1
    digits = {"x": 2, "u": 4, "U": 8}.get(char)
    if digits is not None:
        text = value[i + 1:i + 1 + digits]
        if len(text) != digits or not re.fullmatch(r"[0-9a-fA-F]+", text) or int(text, 16) == 0:
            raise _Syntax(f"bad escape \\{char}{text}")
        code = int(text, 16)
        if char == "x":
            return bytes([code]), i + 1 + digits
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise _Syntax(f"bad escape \\{char}{text}")
        return chr(code).encode("utf-8"), i + 1 + digits
    text = value[i:i + 3]
    if len(text) == 3 and re.fullmatch(r"[0-7]{3}", text) and 0 < int(text, 8) < 256:
        return bytes([int(text, 8)]), i + 3
    raise _Syntax(f"unknown escape \\{char}")


def _specifiers(word: str, unit: str, where: str, problems: list[str]) -> str | None:
    """The word with systemd's specifiers resolved (system manager), None when systemd would
    drop the assignment (an unknown specifier)."""
    stem, _kind, instance = _split(unit)
    known: dict[str, Callable[[], str]] = {
        "%": lambda: "%", "h": lambda: "/root", "u": lambda: "root", "U": lambda: "0",
        "g": lambda: "root", "G": lambda: "0", "s": lambda: "/bin/sh", "t": lambda: "/run",
        "S": lambda: "/var/lib", "C": lambda: "/var/cache", "L": lambda: "/var/log",
        "E": lambda: "/etc", "T": lambda: "/tmp", "V": lambda: "/var/tmp", "n": lambda: unit,
        "N": lambda: unit.rsplit(".", 1)[0], "p": lambda: stem, "i": lambda: instance or "",
        "j": lambda: stem.rsplit("-", 1)[-1],
    }
    out: list[str] = []
    i = 0
    while i < len(word):
        if word[i] != "%":
            out.append(word[i])
            i += 1
            continue
        letter = word[i + 1:i + 2]
        if letter in known:
            out.append(known[letter]())
        elif letter and letter in _HOST_SPECIFIERS:
            problems.append(f"{where}: %{letter} is left as it is (it depends on the running "
                            "system)")
            out.append("%" + letter)
        else:
            problems.append(f"{where}: systemd ignores {word!r}: unknown specifier %{letter}")
            return None
        i += 2
    return "".join(out)


def env_file_assignments(text: str) -> list[tuple[str, str, int]]:
    """(name, value, line) of an EnvironmentFile=, as systemd's parse_env_file_internal reads
    it (src/basic/env-file.c): `#`/`;` comment lines, no `export`, unquoted values keep inner
    spaces and quotes and lose outer spaces, `\\` keeps the next character, `'...'` is
    literal, `"..."` unescapes only `"\\`$`, a backslash-newline continues; names that are not
    valid variable names are ignored."""
    found: list[tuple[str, str, int]] = []
    state = "pre_key"
    key: list[str] = []
    value: list[str] = []
    trailing: int | None = None  # where trailing spaces of an unquoted value start
    key_end: int | None = None
    line = start = 1

    def push() -> None:
        name = "".join(key[:key_end] if key_end is not None else key)
        if _NAME().match(name):
            found.append((name, "".join(value), start))

    for char in text:
        newline = char in "\n\r"
        if state == "pre_key":
            if char in "#;":
                state = "comment"
            elif char not in " \t\n\r":
                state, key, value, key_end, start = "key", [char], [], None, line
        elif state == "key":
            if newline:
                state = "pre_key"
            elif char == "=":
                state, trailing = "pre_value", None
            else:
                if char not in " \t":
                    key_end = None
                elif key_end is None:
                    key_end = len(key)
                key.append(char)
        elif state == "pre_value":
            if newline:
                push()
                state = "pre_key"
            elif char == "'":
                state = "single"
            elif char == '"':
                state = "double"
            elif char == "\\":
                state = "value_escape"
            elif char not in " \t":
                state = "value"
                value.append(char)
        elif state == "value":
            if newline:
                if trailing is not None:
                    del value[trailing:]
                push()
                state = "pre_key"
            elif char == "\\":
                state, trailing = "value_escape", None
            else:
                if char not in " \t":
                    trailing = None
                elif trailing is None:
                    trailing = len(value)
                value.append(char)
        elif state == "value_escape":
            state = "value"
            if not newline:
                value.append(char)
        elif state == "single":
            if char == "'":
                state = "pre_value"
            else:
                value.append(char)
        elif state == "double":
            if char == '"':
                state = "pre_value"
            elif char == "\\":
                state = "double_escape"
            else:
                value.append(char)
        elif state == "double_escape":
            state = "double"
            if char in '"\\`$':
                value.append(char)
            elif char != "\n":
                value += ["\\", char]
        elif state == "comment":
            if char == "\\":
                state = "comment_escape"
            elif newline:
                state = "pre_key"
        elif state == "comment_escape":
            state = "pre_key" if newline else "comment"
        if char == "\n":
            line += 1
    if state in ("pre_value", "value", "value_escape", "single", "double", "double_escape"):
        if state == "value" and trailing is not None:
            del value[trailing:]
        push()
    return found
