"""The variables a user's start-up files set, read without running them: the explanation of
what a new session gets (file and line of each variable), and the fallback when the login
shell itself cannot be asked (cachedoctor.locate.loginshell runs it: the shell is the truth).

Pure text reading through a `FileView`. Each shell reads its own files in its own order
(`SHELLS`): bash as a login shell the first of `~/.bash_profile`, `~/.bash_login`,
`~/.profile`; zsh `.zshenv`, `.zprofile`, `.zshrc`, `.zlogin` (in `$ZDOTDIR`); fish its
universal variables, `conf.d/*.fish` in name order, then `config.fish` (fish docs,
"Configuration files"); sh, dash and ksh `~/.profile` (ksh then `~/.kshrc`). On Linux the
session starts with `/etc/environment` and `environment.d` (pam_env, systemd).

What is read: `export A=1 B=2`, `NAME=value` (exported when it already was, after
`export NAME`, or under `set -a`), `declare -x`/`typeset -x` (`readonly` alone does not
export), `unset`, `+=`, several statements on a line (`;`, `&&`, `||`), `. file`/`source file`
(followed), a `return` outside any block (the rest of the file does not run), fish's
`set -gx`/`-Ux`/`-e`. `$VAR`, `${VAR}`, `${VAR:-word}` (and `-`, `:=`, `:+`, `+`) and `~` are
expanded with what is known at that point; a value computed by a command (`$(...)`,
backticks) is unknown. Function bodies are skipped (they run only when called); lines inside
`if` blocks count as if they ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping

import msgspec

from cachedoctor.lazyre import lazy_pattern
from cachedoctor.locate.files import FileView

# The lines that open and close cachedoctor's own block in a start-up file: written by
# `cachedoctor env` (cachedoctor.envvars.posix), read here. Defined by the reader, so that
# reading start-up files, which every command does, does not load the writer.
BEGIN = "# >>> cachedoctor >>>"
END = "# <<< cachedoctor <<<"

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME_RE = lazy_pattern(rf"^{_NAME}$")
_ASSIGN_WORD = lazy_pattern(rf"^({_NAME})(\+?)=(.*)$", re.DOTALL)
_FUNCTION = lazy_pattern(rf"^\s*(?:function\s+[^\s(]+(?:\s*\(\s*\))?|{_NAME}[\w.:-]*\s*\(\s*\))\s*")
_FISH_UNIVERSAL = lazy_pattern(rf"^SETUVAR\s+(--export\s+)?({_NAME}):(.*)$")
_SECRET = lazy_pattern(r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|API_?KEY|PRIVATE|AUTH", re.I)
_MAX_DEPTH = 8  # nested `source`s followed


class _Unknown(Exception):
    """The value needs the shell to run something (a command, a function)."""


class Assignment(msgspec.Struct, frozen=True):
    name: str
    value: str | None  # None: unset here (`unset NAME`, fish `set -e NAME`)
    file: str  # as shown (`~/.profile`)
    line: int
    managed: bool  # inside cachedoctor's managed block
    path: str = ""  # the file's path as read

    @property
    def origin(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"{where}, cachedoctor's block" if self.managed else where


Files = tuple[tuple[tuple[str, ...], str], ...]


class Shell(msgspec.Struct, frozen=True):
    """How one shell starts a login session: its syntax and its files in order. Each entry is
    a tuple of alternatives (the first that exists is read; a glob reads every match)."""

    syntax: str  # sh or fish
    files: Files  # ((alternatives), kind)
    system: tuple[str, ...] = ()  # system-wide files it reads (only watched, not parsed)


_PROFILE: Files = ((("{home}/.profile",), "sh"),)
_SH_SYSTEM = ("/etc/profile", "/etc/profile.d", "/etc/profile.d/*.sh", "/etc/bash.bashrc",
              "/etc/bashrc")
SHELLS: dict[str, Shell] = {
    "bash": Shell("sh", ((("{home}/.bash_profile", "{home}/.bash_login", "{home}/.profile"),
                          "sh"),), _SH_SYSTEM),
    "sh": Shell("sh", _PROFILE, _SH_SYSTEM),
    "dash": Shell("sh", _PROFILE, _SH_SYSTEM),
    "ksh": Shell("sh", (*_PROFILE, (("{home}/.kshrc",), "sh")), _SH_SYSTEM),
    "zsh": Shell("sh", tuple(((f"{{zdotdir}}/{n}",), "sh")
                             for n in (".zshenv", ".zprofile", ".zshrc", ".zlogin")),
                 ("/etc/zsh", "/etc/zsh/*", "/etc/zshenv", "/etc/zprofile", "/etc/zshrc",
                  "/etc/zlogin")),
    "fish": Shell("fish", ((("{config}/fish/fish_variables",), "fish-universal"),
                           (("{config}/fish/conf.d/*.fish",), "fish"),
                           (("{config}/fish/config.fish",), "fish")),
                  ("/etc/fish/config.fish", "/etc/fish/conf.d", "/etc/fish/conf.d/*.fish",
                   "{config}/fish/conf.d", "/usr/share/fish/vendor_conf.d")),
}
# A shell cachedoctor does not know: every file any of them reads (an explanation at best).
_ANY = Shell("sh", (
    *(((f"{{home}}/{n}",), "sh") for n in (".profile", ".bash_profile", ".bash_login",
                                          ".bashrc", ".zshenv", ".zprofile", ".zshrc")),
    *SHELLS["fish"].files))
_PRELUDE: Files = ((("/etc/environment",), "envd"), (("{config}/environment.d/*.conf",), "envd"))


class Session(msgspec.Struct, frozen=True):
    """Whose session: the login shell (a `SHELLS` name, None when unknown), the folders, and
    the environment the login starts with (HOME, USER, PATH... not this process's)."""

    shell: str | None
    home: str
    config_home: str
    os: str
    start_env: Mapping[str, str]


class StartUp(msgspec.Struct):
    """What the start-up files do, in the order they run."""

    assignments: list[Assignment] = msgspec.field(default_factory=list)
    session_env: dict[str, str] = msgspec.field(default_factory=dict)  # after /etc/environment, environment.d
    watched: list[str] = msgspec.field(default_factory=list)  # every file or folder that could matter
    block_at: dict[str, int] = msgspec.field(default_factory=dict)  # file -> index where its block runs

    def final(self) -> dict[str, Assignment]:
        """name -> the assignment that decides it (its value None: unset)."""
        out: dict[str, Assignment] = {}
        for item in self.assignments:
            out[item.name] = item
        return out


def is_secret(name: str) -> bool:
    """A name that may hold a credential: never kept or shown (it never names a cache)."""
    return bool(_SECRET().search(name))


# --------------------------------------------------------------------------- loading


def tilde(path: str, home: str) -> str:
    """A path below the home folder as `~/...` (how origins are shown)."""
    return "~" + path[len(home):] if home and path.startswith(home.rstrip("/") + "/") else path


def load(session: Session, files: FileView) -> StartUp:
    """Read the session's start-up files in the order its login shell runs them."""
    shell = SHELLS.get(session.shell or "", _ANY)
    state = _State(session, files, lambda path: tilde(path, session.home),
                   dict(session.start_env))
    if session.os in ("linux", "wsl"):
        for alternatives, kind in _PRELUDE:
            state.read_entry(alternatives, kind)
    state.out.session_env = dict(state.env)
    for alternatives, kind in shell.files:
        state.read_entry(alternatives, kind)
    for pattern in shell.system:
        state.out.watched.append(state.fill(pattern))
    return state.out


def later_assignments(name: str, block_files: Collection[str], files: FileView,
                      session: Session) -> list[Assignment]:
    """The user's own assignments (or unsets) of `name` that the login shell runs after the
    last of cachedoctor's blocks in `block_files` (where the block is, or at the end of the
    file where it would be appended): they would override the block."""
    startup = load(session, files)
    positions = [startup.block_at[path] for path in block_files if path in startup.block_at]
    if not positions:
        return []
    start = max(positions)
    return [a for a in startup.assignments[start:] if a.name == name and not a.managed]


def origin_of(name: str, value: str, startup: StartUp) -> Assignment | None:
    """The last assignment that gives `name` this very value (the explanation of a value the
    login shell reported); None when no line found by reading does."""
    for item in reversed(startup.assignments):
        if item.name == name and item.value == value:
            return item
    return None


class _State:
    def __init__(self, session: Session, files: FileView, shown: Callable[[str], str],
                 env: dict[str, str]) -> None:
        self.session, self.files, self.shown, self.env = session, files, shown, env
        self.exported = set(env)
        self.pending: dict[str, int] = {}  # shell variable -> its line, until `export NAME`
        self.block_marks: dict[str, int] = {}  # file -> index at its BEGIN marker
        self.out = StartUp()
        self.depth = 0

    def fill(self, template: str) -> str:
        zdotdir = self.env.get("ZDOTDIR") or self.session.home
        return template.format(home=self.session.home, config=self.session.config_home,
                               zdotdir=zdotdir)

    def read_entry(self, alternatives: tuple[str, ...], kind: str) -> None:
        for template in alternatives:
            path = self.fill(template)
            self.out.watched.append(path)
            if "*" in path:
                self.out.watched.append(path.rsplit("/", 1)[0])
                for match in self.files.glob(path):
                    self.read_file(match, kind)
                return
            if self.files.read_text(path) is not None:
                self.read_file(path, kind)
                return

    def read_file(self, path: str, kind: str) -> None:
        text = self.files.read_text(path)
        if text is None or self.depth >= _MAX_DEPTH:
            return
        if path not in self.out.watched:
            self.out.watched.append(path)
        self.depth += 1
        try:
            _READERS[kind](self, text, path)
        finally:
            self.depth -= 1
        # where the block runs: at its BEGIN line, or (to be appended) after the whole file
        self.out.block_at[path] = self.block_marks.pop(path, len(self.out.assignments))

    def add(self, name: str, value: str | None, path: str, line: int, managed: bool) -> None:
        if value is None:
            self.env.pop(name, None)
            self.exported.discard(name)
        else:
            self.env[name] = value
            self.exported.add(name)
        self.out.assignments.append(Assignment(name, value, self.shown(path), line, managed, path))

    def mark_block(self, path: str) -> None:
        self.block_marks[path] = len(self.out.assignments)


def _managed_lines(lines: list[str]) -> tuple[set[int], int | None]:
    """Line numbers inside cachedoctor's block, and the BEGIN line."""
    inside, found, begin = False, set(), None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped == BEGIN:
            inside, begin = True, begin or number
        elif stripped == END:
            inside = False
        elif inside:
            found.add(number)
    return found, begin


# --------------------------------------------------------------------------- sh syntax


def _split(line: str, fish: bool = False) -> list[tuple[str, bool]]:
    """(statement, runs only on a condition) pairs: the line cut at `;`, `&&`, `||`, `|` and
    `&` outside quotes and substitutions; a `#` comment ends it."""
    out: list[tuple[str, bool]] = []
    current: list[str] = []
    chained = False
    quote, depth, i = "", 0, 0
    while i < len(line):
        char = line[i]
        if quote:
            current.append(char)
            if char == "\\" and (quote == '"' or fish) and i + 1 < len(line):
                current.append(line[i + 1])
                i += 1
            elif char == quote:
                quote = ""
            i += 1
            continue
        if char == "\\" and i + 1 < len(line):
            current.append(line[i:i + 2])
            i += 2
            continue
        if char in "'\"`":
            quote = char
        elif char in "({":
            depth += 1 if (char == "(" or line[i - 1:i] == "$") else 0
        elif char in ")}" and depth > 0:
            depth -= 1
        elif char == "#" and depth == 0 and (i == 0 or line[i - 1] in " \t;&|("):
            break
        elif char in ";&|" and depth == 0:
            pair = line[i:i + 2] in ("&&", "||")
            out.append(("".join(current), chained))
            chained = chained or pair or char == "|"
            current = []
            i += 2 if pair else 1
            continue
        current.append(char)
        i += 1
    out.append(("".join(current), chained))
    return [(s.strip(), c) for s, c in out if s.strip()]


def _words(statement: str, fish: bool = False) -> list[str]:
    """The statement's words, quotes kept (split at spaces outside quotes and substitutions)."""
    words: list[str] = []
    current: list[str] = []
    quote, depth, i = "", 0, 0
    while i < len(statement):
        char = statement[i]
        if quote:
            current.append(char)
            if char == "\\" and (quote == '"' or fish) and i + 1 < len(statement):
                current.append(statement[i + 1])
                i += 1
            elif char == quote:
                quote = ""
        elif char == "\\" and i + 1 < len(statement):
            current.append(statement[i:i + 2])
            i += 1
        elif char in "'\"`":
            quote = char
            current.append(char)
        elif char in " \t" and depth == 0:
            if current:
                words.append("".join(current))
                current = []
        else:
            if char in "({":
                depth += 1
            elif char in ")}" and depth > 0:
                depth -= 1
            current.append(char)
        i += 1
    if current:
        words.append("".join(current))
    return words


def _expand(raw: str, env: Mapping[str, str], home: str, *, assignment: bool = False) -> str:
    """One sh word as the shell expands it (no field splitting or globbing, as in an
    assignment). Raises _Unknown for command substitution and what needs the shell."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        at_start = i == 0 or (assignment and raw[i - 1] == ":")
        if char == "~" and at_start:
            end = i + 1
            while end < len(raw) and raw[end] not in "/:":
                end += 1
            if end != i + 1:
                raise _Unknown("~user")
            out.append(home)
            i = end
        elif char == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                raise _Unknown("open quote")
            out.append(raw[i + 1:end])
            i = end + 1
        elif char == '"':
            i = _double(raw, i + 1, env, home, out)
        elif char == "\\":
            out.append(raw[i + 1:i + 2])
            i += 2
        elif char == "$":
            i = _dollar(raw, i, env, home, out)
        elif char == "`":
            raise _Unknown("command")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _double(raw: str, i: int, env: Mapping[str, str], home: str, out: list[str]) -> int:
    while i < len(raw):
        char = raw[i]
        if char == '"':
            return i + 1
        if char == "\\" and raw[i + 1:i + 2] in ('"', "\\", "$", "`"):
            out.append(raw[i + 1])
            i += 2
        elif char == "$":
            i = _dollar(raw, i, env, home, out)
        elif char == "`":
            raise _Unknown("command")
        else:
            out.append(char)
            i += 1
    raise _Unknown("open quote")


def _dollar(raw: str, i: int, env: Mapping[str, str], home: str, out: list[str]) -> int:
    """A `$` expansion at `i`: its text to `out`, the index after it."""
    nxt = raw[i + 1:i + 2]
    if nxt == "{":
        depth, end = 1, i + 2
        while end < len(raw) and depth:
            depth += {"{": 1, "}": -1}.get(raw[end], 0)
            end += 1
        if depth:
            raise _Unknown("open ${")
        out.append(_parameter(raw[i + 2:end - 1], env, home))
        return end
    match = re.match(_NAME, raw[i + 1:])
    if match:
        out.append(env.get(match.group(), ""))
        return i + 1 + match.end()
    if nxt in ("(", "'", '"') or nxt.isdigit() or nxt in "@*#?$!-":
        raise _Unknown("$" + nxt)
    out.append("$")
    return i + 1


def _parameter(body: str, env: Mapping[str, str], home: str) -> str:
    """${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:=word}, ${NAME:+word}, ${NAME+word}."""
    match = re.match(rf"^({_NAME})(?:(:?)([-=+?])(.*))?$", body, re.DOTALL)
    if not match:
        raise _Unknown("${" + body + "}")
    name, colon, op, word = match.groups()
    value = env.get(name)
    if op is None:
        return value or ""
    unset = value is None or (colon == ":" and value == "")
    if op in "-=":
        return _expand(word, env, home) if unset else value or ""
    if op == "+":
        return "" if unset else _expand(word, env, home)
    if unset:
        raise _Unknown("${NAME?}")
    return value or ""


def sh_value(raw: str, env: Mapping[str, str], home: str) -> str | None:
    """The value of an sh assignment's right-hand side, or None when it needs the shell."""
    words = _words(raw)
    try:
        return _expand(words[0], env, home, assignment=True) if words else ""
    except _Unknown:
        return None


class _Body:
    """A function body being skipped: `{ ... }` or `( ... )`, counted from its first bracket."""

    def __init__(self) -> None:
        self.depth, self.pair = 0, ""

    def feed(self, line: str) -> _Body | None:
        """This object while the body goes on, None after its last line."""
        stripped = line.strip()
        if not self.pair and stripped:
            self.pair = "()" if stripped[0] == "(" else "{}"
        if self.pair:
            self.depth += stripped.count(self.pair[0]) - stripped.count(self.pair[1])
        return None if self.pair and self.depth <= 0 else self


_OPENERS = ("if", "case", "while", "until", "for", "select")
_CLOSERS = ("fi", "esac", "done")
_PREFIXES = ("then", "do", "else", "{", "(", "!", "time", "elif", "if", "while", "until")


def _read_sh(state: _State, text: str, path: str) -> None:
    lines = text.splitlines()
    managed, begin = _managed_lines(lines)
    allexport = False
    blocks = 0  # open if/case/loops: a `return` inside one may not run
    body: _Body | None = None  # inside a function definition (it runs only when called)
    for number, line in enumerate(lines, 1):
        if number == begin:
            state.mark_block(path)
        if body is not None:
            body = body.feed(line)
            continue
        header = _FUNCTION().match(line)
        if header:
            body = _Body().feed(line[header.end():])
            continue
        for statement, chained in _split(line):
            words = _words(statement)
            while words and words[0] in _PREFIXES:
                if words[0] in ("if", "while", "until"):
                    blocks += 1
                words = words[1:]
            if not words:
                continue
            head = words[0]
            if head in _OPENERS:
                blocks += 1
                continue
            if head in _CLOSERS or head in ("}", ")", ";;"):
                blocks = max(0, blocks - (head in _CLOSERS))
                continue
            if head == "return" and not chained and not blocks:
                return
            at = (path, number, number in managed)
            if head in (".", "source") and len(words) > 1:
                try:
                    target = _expand(words[1], state.env, state.session.home)
                except _Unknown:
                    continue
                if not target.startswith("/"):
                    target = f"{state.session.home}/{target}"
                state.read_file(target, "sh")
            elif head == "set":
                flags = " ".join(words[1:])
                if re.search(r"(^|\s)-[a-zA-Z]*a|-o\s+allexport", flags):
                    allexport = True
                if re.search(r"(^|\s)\+[a-zA-Z]*a|\+o\s+allexport", flags):
                    allexport = False
            elif head == "unset":
                if "-f" not in words[1:]:
                    for name in words[1:]:
                        if _NAME_RE().match(name):
                            state.add(name, None, *at)
            elif head in ("export", "declare", "typeset", "readonly", "local"):
                _declaration(state, words, allexport, at)
            elif all(_ASSIGN_WORD().match(w) for w in words):
                for word in words:
                    _assign(state, word, allexport, at)


def _declaration(state: _State, words: list[str], allexport: bool,
                 at: tuple[str, int, bool]) -> None:
    head = words[0]
    flags = "".join(w[1:] for w in words[1:] if w.startswith("-"))
    if head == "local" or (head == "export" and "n" in flags) or "f" in flags or "a" in flags:
        return
    export = head == "export" or "x" in flags
    for word in (w for w in words[1:] if not w.startswith(("-", "+"))):
        if _ASSIGN_WORD().match(word):
            _assign(state, word, allexport or export, at)
        elif export and _NAME_RE().match(word) and word not in state.exported:
            if word in state.env:  # a shell variable set before: exported from its own line
                state.add(word, state.env[word], at[0], state.pending.pop(word, at[1]), at[2])
            else:
                state.exported.add(word)  # exported once it is set


def _assign(state: _State, word: str, export: bool, at: tuple[str, int, bool]) -> None:
    match = _ASSIGN_WORD().match(word)
    assert match is not None
    name, append, raw = match.groups()
    try:
        value = _expand(raw, state.env, state.session.home, assignment=True)
    except _Unknown:
        return
    if append:
        value = state.env.get(name, "") + value
    if export or name in state.exported:
        state.add(name, value, *at)
    else:  # a shell variable, exported later by `export NAME` (from its own line)
        state.env[name] = value
        state.pending[name] = at[1]


# --------------------------------------------------------------------------- fish syntax

_FISH_OPENERS = ("if", "while", "for", "switch", "begin", "function")


def _fish_expand(raw: str, env: Mapping[str, str], home: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "~" and i == 0 and raw[1:2] in ("", "/"):
            out.append(home)
            i += 1
        elif char == "'":
            i += 1
            while i < len(raw) and raw[i] != "'":
                if raw[i] == "\\" and raw[i + 1:i + 2] in ("'", "\\"):
                    i += 1
                out.append(raw[i])
                i += 1
            if i >= len(raw):
                raise _Unknown("open quote")
            i += 1
        elif char == '"':
            i += 1
            while i < len(raw) and raw[i] != '"':
                if raw[i] == "\\" and raw[i + 1:i + 2] in ('"', "\\", "$"):
                    i += 1
                    out.append(raw[i])
                    i += 1
                elif raw[i] == "$":
                    i = _fish_var(raw, i, env, out)
                else:
                    out.append(raw[i])
                    i += 1
            if i >= len(raw):
                raise _Unknown("open quote")
            i += 1
        elif char == "\\":
            out.append(raw[i + 1:i + 2])
            i += 2
        elif char == "$":
            i = _fish_var(raw, i, env, out)
        elif char in "({*?":
            raise _Unknown("needs fish")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _fish_var(raw: str, i: int, env: Mapping[str, str], out: list[str]) -> int:
    match = re.match(_NAME, raw[i + 1:])
    if not match or raw[i + 1 + match.end():i + 2 + match.end()] == "[":
        raise _Unknown("needs fish")
    out.append(env.get(match.group(), ""))
    return i + 1 + match.end()


def _read_fish(state: _State, text: str, path: str) -> None:
    lines = text.splitlines()
    managed, begin = _managed_lines(lines)
    function_depth = 0
    for number, line in enumerate(lines, 1):
        if number == begin:
            state.mark_block(path)
        for statement, _chained in _split(line, fish=True):
            words = _words(statement, fish=True)
            while words and words[0] in ("and", "or", "not", "else", "command", "builtin"):
                words = words[1:]
            if not words:
                continue
            head = words[0]
            if function_depth:
                function_depth += (head in _FISH_OPENERS) - (head == "end")
                continue
            if head == "function":
                function_depth = 1
                continue
            at = (path, number, number in managed)
            if head in ("source", ".") and len(words) > 1:
                try:
                    target = _fish_expand(words[1], state.env, state.session.home)
                except _Unknown:
                    continue
                state.read_file(target, "fish")
            elif head == "set":
                _fish_set(state, words[1:], at)


def _fish_set(state: _State, args: list[str], at: tuple[str, int, bool]) -> None:
    flags: set[str] = set()
    long = {"--global": "g", "--export": "x", "--universal": "U", "--erase": "e",
            "--local": "l", "--unexport": "u", "--append": "a", "--prepend": "p",
            "--query": "q", "--names": "n", "--show": "S", "--function": "f"}
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option == "--":
            break
        flags |= {long[option]} if option in long else set(option[1:] if option[1:2] != "-" else "")
    if flags & {"q", "n", "S", "l", "f"} or not rest or not _NAME_RE().match(rest[0]):
        return
    name, items = rest[0], rest[1:]
    if "e" in flags:
        state.add(name, None, *at)
        return
    try:
        values = [_fish_expand(item, state.env, state.session.home) for item in items]
    except _Unknown:
        return
    joiner = ":" if name.endswith("PATH") else " "
    old = [v for v in state.env.get(name, "").split(joiner) if v] if flags & {"a", "p"} else []
    values = [*old, *values] if "a" in flags else [*values, *old]
    if "u" in flags or not ("x" in flags or name in state.exported):
        state.env[name] = joiner.join(values)
        return
    state.add(name, joiner.join(values), *at)


def _fish_unescape(text: str) -> str:
    """fish_variables escapes as `\\xHH`; list items are separated by `\\x1e`."""
    value = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)
    return value.split("\x1e")[0]


def _read_fish_universal(state: _State, text: str, path: str) -> None:
    for number, line in enumerate(text.splitlines(), 1):
        match = _FISH_UNIVERSAL().match(line)
        if match and match.group(1):
            state.add(match.group(2), _fish_unescape(match.group(3)), path, number, False)


def _read_envd(state: _State, text: str, path: str) -> None:
    """KEY=VALUE lines (environment.d(5), /etc/environment): `$VAR`/`${VAR}` expanded."""
    managed, begin = _managed_lines(text.splitlines())
    for number, line in enumerate(text.splitlines(), 1):
        if number == begin:
            state.mark_block(path)
        match = _ASSIGN_WORD().match(line.strip())
        if not match or match.group(2):
            continue
        value = sh_value(match.group(3), state.env, state.session.home)
        if value is not None:
            state.add(match.group(1), value, path, number, number in managed)


_READERS: dict[str, Callable[[_State, str, str], None]] = {
    "sh": _read_sh, "fish": _read_fish, "fish-universal": _read_fish_universal,
    "envd": _read_envd,
}


def parse(text: str, kind: str, file: str, known: Mapping[str, str], home: str) -> list[Assignment]:
    """The assignments of one start-up file, in order (`source`d files are not followed).
    `kind`: sh, fish, fish-universal or envd. `known` holds the variables set before it runs
    (they count as exported)."""
    session = Session(None, home, f"{home}/.config", "linux", {"HOME": home, **known})
    state = _State(session, _NoFiles(), lambda _path: file, dict(session.start_env))
    state.depth = _MAX_DEPTH - 1  # this one file only
    _READERS[kind](state, text, file)
    return state.out.assignments


class _NoFiles:
    def read_text(self, path: str) -> str | None:
        return None

    def lexists(self, path: str) -> bool:
        return False

    def isdir(self, path: str) -> bool:
        return False

    def link(self, path: str) -> tuple[str, str] | None:
        return None

    def glob(self, pattern: str) -> list[str]:
        return []

    def realpath(self, path: str) -> str:
        return path
