"""The record of every change cachedoctor makes, in SQLite under the user state folder.

Each capability records what it did with enough `before`/`after` data for `undo` to revert it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from cachedoctor.errors import CachedoctorError, OperationFailed
from cachedoctor.state import ensure, state_dir
from cachedoctor.statefile import SqliteKind

SCHEMA = """
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    kind TEXT NOT NULL,          -- move, restore, env, quota, tune, policy, schedule
    tool TEXT,
    summary TEXT NOT NULL,
    before TEXT NOT NULL,        -- JSON
    after TEXT NOT NULL,         -- JSON
    undone_by INTEGER,           -- id of the change that reverted this one
    undoes INTEGER               -- id of the change this one reverted (an undo)
)
"""
_COLUMNS = "id, time, kind, tool, summary, before, after, undone_by, undoes"


class Change(msgspec.Struct, frozen=True):
    id: int
    time: float
    kind: str
    tool: str | None
    summary: str
    before: dict[str, Any]
    after: dict[str, Any]
    undone_by: int | None
    undoes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "time": self.time,
            "kind": self.kind,
            "tool": self.tool,
            "summary": self.summary,
            "before": self.before,
            "after": self.after,
            "undone_by": self.undone_by,
            "undoes": self.undoes,
        }


def db_path() -> Path:
    return ensure(state_dir()) / "history.sqlite3"


class HistoryDamaged(OperationFailed):
    """The history database cannot be read or written now (read-only, locked, full disk)."""


def _create_or_add_undoes(conn: sqlite3.Connection) -> None:
    """0 -> 1: the table (a new database), and the `undoes` column of one written before undo."""
    conn.execute(SCHEMA)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(changes)")}
    if "undoes" not in columns:
        conn.execute("ALTER TABLE changes ADD COLUMN undoes INTEGER")


_MOVE_ASIDE = ("move it aside (`mv {path} {path}.damaged`) to start a new history; the caches "
               "and cachedoctor's record of where they are (relocations.json) are not in it")
DATABASE = SqliteKind("history.sqlite3", "history database", 1,
                      migrations=(_create_or_add_undoes,), hint=_MOVE_ASIDE)


@contextmanager
def _connect() -> Iterator[sqlite3.Connection]:
    path = db_path()
    try:
        conn = sqlite3.connect(path, timeout=10)
    except sqlite3.Error as exc:
        raise _damaged(path, exc) from None
    try:
        DATABASE.migrate(conn, path)
        with conn:
            yield conn
    except sqlite3.Error as exc:
        raise _damaged(path, exc) from None
    finally:
        conn.close()


def _damaged(path: Path, exc: sqlite3.Error) -> CachedoctorError:
    """Not a database (or a damaged one): StateFileDamaged, exit 2; a database that cannot be
    used now (locked, read-only, full disk): HistoryDamaged, exit 1."""
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return DATABASE.damaged(path, str(exc))
    return HistoryDamaged(f"cachedoctor's history database {path} cannot be used ({exc})",
                          hint=_MOVE_ASIDE.format(path=path))


def check() -> None:
    """Raise HistoryDamaged (or StateFileDamaged) now, before a change, rather than after its
    work is done."""
    with _connect() as conn:
        conn.execute("SELECT count(*) FROM changes").fetchone()


def record(
    kind: str,
    summary: str,
    *,
    tool: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    undoes: int | None = None,
) -> int:
    """Store one change; returns its id. `undoes` marks an earlier change as reverted by this one."""
    with _connect() as conn:
        cur = conn.execute(
            "INSERT INTO changes (time, kind, tool, summary, before, after, undoes)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                time.time(),
                kind,
                tool,
                summary,
                json.dumps(before or {}),
                json.dumps(after or {}),
                undoes,
            ),
        )
        new_id = int(cur.lastrowid or 0)
        if undoes is not None:
            conn.execute("UPDATE changes SET undone_by = ? WHERE id = ?", (new_id, undoes))
        return new_id


def changes(*, kind: str | None = None, tool: str | None = None) -> list[Change]:
    query, args = f"SELECT {_COLUMNS} FROM changes", []
    where = []
    if kind:
        where.append("kind = ?")
        args.append(kind)
    if tool:
        where.append("tool = ?")
        args.append(tool)
    if where:
        query += " WHERE " + " AND ".join(where)
    with _connect() as conn:
        rows = conn.execute(query + " ORDER BY id", args).fetchall()
    return [_change(row) for row in rows]


def get(change_id: int) -> Change | None:
    with _connect() as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM changes WHERE id = ?", (change_id,)).fetchone()
    return _change(row) if row else None


def _change(row: tuple[Any, ...]) -> Change:
    return Change(row[0], row[1], row[2], row[3], row[4], _json(row[5]), _json(row[6]), row[7], row[8])


def _json(text: Any) -> dict[str, Any]:
    """A stored before/after; a damaged one reads as empty (undo then refuses: nothing to use)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
