"""The history database and `cachedoctor history`."""

from __future__ import annotations

import sqlite3

from cachedoctor import history
from tests.conftest import result_of, run_cli


def test_record_get_and_filter() -> None:
    first = history.record("quota", "cap pip cache at 1 GB", tool="pip",
                           before={"location": "cache", "cap": None},
                           after={"location": "cache", "cap": 10**9})
    second = history.record("env", "set PIP_CACHE_DIR", tool="pip", before={"vars": {"X": None}},
                            after={"vars": {"X": "1"}})
    third = history.record("quota", "undo", tool="pip", undoes=first)
    assert first < second < third
    change = history.get(first)
    assert change is not None
    assert change.undone_by == third and change.undoes is None
    assert change.after == {"location": "cache", "cap": 10**9}
    undo_record = history.get(third)
    assert undo_record is not None and undo_record.undoes == first
    assert [c.id for c in history.changes(kind="quota")] == [first, third]
    assert [c.id for c in history.changes(tool="pip", kind="env")] == [second]
    assert history.get(999) is None


def test_a_database_from_before_undo_is_migrated() -> None:
    path = history.db_path()
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE changes (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, "
        "kind TEXT NOT NULL, tool TEXT, summary TEXT NOT NULL, before TEXT NOT NULL, "
        "after TEXT NOT NULL, undone_by INTEGER)"
    )
    conn.execute("INSERT INTO changes (time, kind, tool, summary, before, after) "
                 "VALUES (1.0, 'quota', 'pip', 'old', '{}', '{}')")
    conn.commit()
    conn.close()
    [old] = history.changes()
    assert old.summary == "old" and old.undoes is None
    new = history.record("quota", "new", undoes=old.id)
    assert history.get(old.id).undone_by == new  # type: ignore[union-attr]


def test_cli_history_json_and_table() -> None:
    empty = run_cli("history", "--json")
    assert empty.returncode == 0 and result_of(empty) == {"changes": []}
    assert "No changes recorded yet." in run_cli("history").stdout

    first = history.record("quota", "cap npm cache at 2 GB", tool="npm",
                           before={"location": "cache", "cap": None},
                           after={"location": "cache", "cap": 2 * 10**9})
    history.record("quota", "undo #1", tool="npm", undoes=first)
    result = run_cli("history", "--json")
    assert result.returncode == 0, result.stderr
    changes = result_of(result)["changes"]
    assert [c["id"] for c in changes] == [1, 2]
    assert set(changes[0]) == {"id", "time", "kind", "tool", "summary", "before", "after",
                               "undone_by", "undoes"}
    assert changes[0]["undone_by"] == 2 and changes[1]["undoes"] == 1
    assert changes[0]["after"] == {"location": "cache", "cap": 2000000000}

    filtered = result_of(run_cli("history", "--json", "--tool", "pip"))
    assert filtered == {"changes": []}

    table = run_cli("history")
    assert table.returncode == 0
    assert "cap npm cache at 2 GB" in table.stdout and "undone by #2" in table.stdout
    assert "undoes #1" in table.stdout
