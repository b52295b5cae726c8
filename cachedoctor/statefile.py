"""cachedoctor's own stored files: a format version in each, a typed model, migrations on read.

Every kind of file is registered once (`JsonKind` / `SqliteKind`: its name, what it holds, the
current version and one migration per older version) and read and written only through its
registration. A JSON file carries `"format": N`; a file written before formats existed has none
and is version 0. An SQLite database keeps its version in `PRAGMA user_version`. Older files are
migrated when read (and written back in the current format by the next change); a damaged file
or one from a newer cachedoctor is a `StateFileDamaged` naming the file and what is wrong (exit
code 2), never a traceback and never silently treated as empty. docs/state.md lists the kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

from cachedoctor.errors import EXIT_BAD_INPUT, CachedoctorError, OperationFailed

if TYPE_CHECKING:
    import sqlite3

T = TypeVar("T")
FORMAT_KEY = "format"
UPGRADE_HINT = "upgrade cachedoctor (`pip install -U cachedoctor`) to use it"


class StateFileDamaged(CachedoctorError):
    """One of cachedoctor's own files cannot be used as it is: not its format, or newer."""

    exit_code = EXIT_BAD_INPUT
    kind = "damaged_state"

    def __init__(self, message: str, *, path: Path, problem: str,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path
        self.problem = problem  # what is wrong, without the file's name


class Invalid(ValueError):
    """A stored document does not have the shape its format says; the text says where."""


# --- checkers for the parse functions: each returns the value typed, or raises Invalid -----------


def _shown(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false",
            type(None): "null"}.get(type(value), type(value).__name__)


def obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(f"{where}: expected an object, found {_shown(value)}")
    return value


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{where}: expected a string, found {_shown(value)}")
    return value


def integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Invalid(f"{where}: expected an integer, found {_shown(value)}")
    return value


def number(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Invalid(f"{where}: expected a number, found {_shown(value)}")
    return float(value)


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{where}: expected true or false, found {_shown(value)}")
    return value


def anything(value: Any, where: str) -> Any:
    return value


def optional(check: Callable[[Any, str], T]) -> Callable[[Any, str], T | None]:
    return lambda value, where: None if value is None else check(value, where)


def list_of(check: Callable[[Any, str], T]) -> Callable[[Any, str], list[T]]:
    def checked(value: Any, where: str) -> list[T]:
        if not isinstance(value, list):
            raise Invalid(f"{where}: expected a list, found {_shown(value)}")
        return [check(item, f"{where}[{i}]") for i, item in enumerate(value)]
    return checked


def map_of(check: Callable[[Any, str], T]) -> Callable[[Any, str], dict[str, T]]:
    def checked(value: Any, where: str) -> dict[str, T]:
        return {key: check(item, f"{where}.{key}") for key, item in obj(value, where).items()}
    return checked


def field(doc: Mapping[str, Any], key: str, check: Callable[[Any, str], T], where: str = "") -> T:
    """doc[key], checked; Invalid when it is missing."""
    name = f"{where}.{key}" if where else key
    if key not in doc:
        raise Invalid(f"{name}: missing")
    return check(doc[key], name)


def field_or(doc: Mapping[str, Any], key: str, check: Callable[[Any, str], T], default: T,
             where: str = "") -> T:
    """doc[key], checked; `default` when the key is missing (a field added later)."""
    return field(doc, key, check, where) if key in doc else default


# --- registrations ------------------------------------------------------------------------------

KINDS: dict[str, JsonKind[Any] | SqliteKind] = {}


def _register(kind: JsonKind[Any] | SqliteKind) -> None:
    if kind.name in KINDS:
        raise AssertionError(f"state file kind {kind.name!r} registered twice")
    if len(kind.migrations) != kind.version:
        raise AssertionError(f"{kind.name}: one migration per older version is needed")
    KINDS[kind.name] = kind


def _newer(path: Path, what: str, found: int, reads: int) -> StateFileDamaged:
    problem = (f"written by a newer cachedoctor (format {found}; this one reads formats up "
               f"to {reads})")
    return StateFileDamaged(f"{path}: the {what} was {problem}; nothing was changed", path=path,
                            problem=problem, hint=UPGRADE_HINT)


class JsonKind(Generic[T], msgspec.Struct, frozen=True):
    """One kind of JSON file: `parse` turns a current-format document into its model, `dump`
    the model back; `migrations[n]` turns a version-n document into version n+1 (version 0
    may be any JSON value: the files of before formats were not always objects)."""

    name: str  # the file's name, as docs/state.md lists it
    what: str  # what it holds, for messages: "quota file"
    version: int
    parse: Callable[[dict[str, Any]], T]
    dump: Callable[[T], dict[str, Any]]
    migrations: tuple[Callable[[Any], dict[str, Any]], ...] = ()
    hint: str | None = None  # what to do with a damaged one; `{path}` is filled in
    indent: int | None = 2

    def __post_init__(self) -> None:
        _register(self)

    def damaged(self, path: Path, problem: str) -> StateFileDamaged:
        hint = (self.hint or "repair it, or move it aside (`mv {path} {path}.damaged`) to "
                             "start again without it").format(path=path)
        return StateFileDamaged(f"{path}: the {self.what} is damaged ({problem}); nothing was "
                                "changed", path=path, problem=problem, hint=hint)

    def read(self, path: Path) -> T | None:
        """The file's model, migrated to the current format; None when there is no file."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OperationFailed(f"cannot read the {self.what} {path}: {exc.strerror}") from None
        import json  # where a file is there: a run with none (an empty home) does not import it

        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise self.damaged(path, f"not UTF-8 text at byte {exc.start}") from None
        except json.JSONDecodeError as exc:
            problem = f"invalid JSON: {exc.msg}"
            raise StateFileDamaged(
                f"{path}:{exc.lineno}:{exc.colno}: the {self.what} is damaged ({problem}); "
                "nothing was changed", path=path, problem=f"{problem} at line {exc.lineno}",
                hint=self.damaged(path, problem).hint) from None
        return self.decode(data, path)

    def decode(self, data: Any, path: Path) -> T:
        version = data.get(FORMAT_KEY, 0) if isinstance(data, dict) else 0
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise self.damaged(path, f"{FORMAT_KEY}: expected a version number, found {version!r}")
        if version > self.version:
            raise _newer(path, self.what, version, self.version)
        try:
            for migrate in self.migrations[version:]:
                data = migrate(data)
            return self.parse({k: v for k, v in obj(data, "the file").items() if k != FORMAT_KEY})
        except Invalid as exc:
            raise self.damaged(path, str(exc)) from None

    def encode(self, model: T) -> dict[str, Any]:
        return {FORMAT_KEY: self.version, **self.dump(model)}

    def write(self, path: Path, model: T, *, mode: int | None = None) -> None:
        """Replace the file atomically with `model` in the current format."""
        import json

        from cachedoctor.fsutil import atomic_write_text

        separators = (",", ":") if self.indent is None else None
        document = json.dumps(self.encode(model), indent=self.indent, ensure_ascii=False,
                              separators=separators)
        atomic_write_text(path, document + ("\n" if self.indent is not None else ""), mode=mode)


class SqliteKind(msgspec.Struct, frozen=True):
    """One kind of SQLite database: `migrations[n]` brings a version-n database (PRAGMA
    user_version; 0 for one created before versions) to n+1, inside one transaction."""

    name: str
    what: str
    version: int
    migrations: tuple[Callable[[sqlite3.Connection], None], ...]
    hint: str | None = None

    def __post_init__(self) -> None:
        _register(self)

    def migrate(self, conn: sqlite3.Connection, path: Path) -> None:
        """Bring the open database to the current version (raises StateFileDamaged when it
        is newer); two processes migrating at once take turns (BEGIN IMMEDIATE)."""
        if self._version(conn) == self.version:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = self._version(conn)
            if found > self.version:
                raise _newer(path, self.what, found, self.version)
            for migrate in self.migrations[found:]:
                migrate(conn)
            conn.execute(f"PRAGMA user_version = {int(self.version)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def damaged(self, path: Path, problem: str) -> StateFileDamaged:
        return StateFileDamaged(f"{path}: the {self.what} is damaged ({problem})", path=path,
                                problem=problem, hint=(self.hint or "").format(path=path) or None)
