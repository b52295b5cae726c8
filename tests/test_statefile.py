"""cachedoctor's stored state: today's files still load (and are migrated), damaged ones are
named with what is wrong (exit 2 from the CLI), every kind round-trips.

tests/data/state/unversioned/ holds files written by the cachedoctor of before format versions
(a real `move` of pip/npm by config and huggingface/yarn by link, the yarn one killed at its
verification, `quota set`, `env set`, `restore`, and the schedule/priors/log/login-shell
writers called directly), in an isolated HOME under /tmp/gen/home; `history-before-undo` has
the table as it was before the `undoes` column. See tests/data/state/README.md.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cachedoctor import statefile as sf
from tests.conftest import run_cli

SAMPLES = Path(__file__).parent / "data" / "state" / "unversioned"
YARN_OP = "20261201T131152-21643-56817d"


def _config() -> Path:
    from cachedoctor.state import config_dir

    return config_dir()


def _state() -> Path:
    from cachedoctor.state import state_dir

    return state_dir()


@pytest.fixture
def samples(isolated_home: Path) -> Path:
    """Today's (unversioned) files in the isolated HOME's config and state folders."""
    shutil.copytree(SAMPLES / "config", _config())
    shutil.copytree(SAMPLES / "state", _state())
    return isolated_home


def _stored_format(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")).get("format")


def test_todays_files_load_as_before(samples: Path) -> None:
    from cachedoctor import history
    from cachedoctor.clean import last_run, load_scheduled_policy
    from cachedoctor.clean.scheduled import ScheduledPolicy
    from cachedoctor.envvars import _load_document
    from cachedoctor.envvars.windows import Prior, load_priors
    from cachedoctor.locate import loginshell
    from cachedoctor.quota import quota_table
    from cachedoctor.relocate import journal, settle
    from cachedoctor.schedule.jobfile import installed_jobs

    assert quota_table() == {("pip", "cache"): 2_000_000_000}
    assert _load_document() == ({"SAMPLE_VAR": "/tmp/gen/x"}, [
        "/tmp/gen/home/.config/environment.d/60-cachedoctor.conf", "/tmp/gen/home/.profile"])
    assert load_priors() == {"HF_HOME": Prior("D:\\hf", 1, "E:\\hf"),
                             "PIP_CACHE_DIR": Prior(None, None, "E:\\pip")}
    assert load_scheduled_policy() == ScheduledPolicy(30 * 86400.0, ("cache", "temp"), ("pip",))
    jobs = installed_jobs()
    assert jobs["cron"].to_json() == {"argv": ["/usr/bin/cachedoctor", "clean", "--scheduled"],
                                      "every": "daily", "at": "03:30"}
    [pending] = journal.load_all()
    assert (pending.id, pending.tool, pending.kind, pending.phase) == (YARN_OP, "yarn", "move", "copying")
    assert pending.settings == {"link_kind": "symlink", "asked": {"method": "link", "link": None}}
    assert pending.pairs[0].same_fs is False and journal.damaged() == []
    assert settle.load(YARN_OP, 0) == {"": "d27b0c6d8d3f2f4bc4f7786d", "v6": "a9ca75b0ab2f97abab95148f"}
    records = journal.relocation_records()
    assert sorted(records) == ["huggingface/hub", "npm/cache", "pip/cache"]
    pip = records["pip/cache"]
    assert (pip.method, pip.base, pip.phase, pip.settings["history_id"]) == ("config", "/tmp/gen/dest/pip", "done", 1)
    assert pip.settings["section"] == "global" and pip.settings["before"] is None
    assert records["huggingface/hub"].settings["link_kind"] == "symlink"
    summary = last_run()
    assert summary is not None and summary["freed_bytes"] == 1234 and "format" not in summary
    assert loginshell._read_cache("0" * 64) == {"PATH": "/usr/bin:/bin", "HF_HOME": "/data/hf"}
    changes = history.changes()
    assert [c.kind for c in changes] == ["move", "move", "quota", "env", "move", "move", "restore"]
    assert changes[2].after == {"location": "cache", "cap": 2_000_000_000}


def test_todays_files_are_written_back_in_the_current_format(samples: Path) -> None:
    from cachedoctor import history
    from cachedoctor.clean import load_scheduled_policy, save_scheduled_policy
    from cachedoctor.envvars import _load_document, _save_store, store_file
    from cachedoctor.envvars.windows import load_priors, priors_file, save_priors
    from cachedoctor.quota import quota_table, quotas_file, set_quota
    from cachedoctor.relocate import journal
    from cachedoctor.schedule.jobfile import installed_jobs, jobs_file, record_job

    before = quota_table()
    set_quota("npm", "cache", 10)
    assert _stored_format(quotas_file()) == 1 and quota_table() == {**before, ("npm", "cache"): 10}
    variables, created = _load_document()
    _save_store(variables, created)
    assert _stored_format(store_file()) == 1 and _load_document() == (variables, created)
    priors = load_priors()
    save_priors(priors)
    assert _stored_format(priors_file()) == 1 and load_priors() == priors
    policy = load_scheduled_policy()
    save_scheduled_policy(policy)
    assert load_scheduled_policy() == policy
    jobs = installed_jobs()
    record_job("systemd", jobs["cron"])
    assert _stored_format(jobs_file()) == 1 and installed_jobs() == {**jobs, "systemd": jobs["cron"]}
    records = journal.relocation_records()
    journal.set_relocation(None, "npm", "cache")
    stored = json.loads(journal.registry_file().read_text(encoding="utf-8"))
    assert stored["format"] == 1 and sorted(stored) == ["format", "huggingface/hub", "pip/cache"]
    assert journal.relocation_records() == {k: v for k, v in records.items() if k != "npm/cache"}
    [pending] = journal.load_all()
    journal.save(pending)
    assert _stored_format(journal_file(YARN_OP)) == 1 and journal.load_all() == [pending]
    history.check()
    assert _user_version(history.db_path()) == 1 and len(history.changes()) == 7


def journal_file(op_id: str) -> Path:
    from cachedoctor.state import journal_dir

    return journal_dir() / f"{op_id}.json"


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_a_history_from_before_undo_gains_its_column_and_version(samples: Path) -> None:
    from cachedoctor import history

    shutil.copy(_state() / "history-before-undo.sqlite3", history.db_path())
    assert _user_version(history.db_path()) == 0
    [old] = history.changes()
    assert (old.kind, old.tool, old.undoes, old.after["cap"]) == ("quota", "pip", None, 2_000_000_000)
    assert _user_version(history.db_path()) == 1
    new = history.record("quota", "undo", tool="pip", undoes=old.id)
    assert history.get(old.id).undone_by == new  # type: ignore[union-attr]


def test_a_new_history_starts_at_the_current_version(isolated_home: Path) -> None:
    from cachedoctor import history

    history.record("env", "env set X", before={}, after={"values": {"X": "1"}})
    assert _user_version(history.db_path()) == history.DATABASE.version == 1


# --- damaged files ----------------------------------------------------------------------------


def _read_quotas() -> Any:
    from cachedoctor.quota import quota_table

    return quota_table()


def _read_env() -> Any:
    from cachedoctor.envvars import _load_document

    return _load_document()


def _read_priors() -> Any:
    from cachedoctor.envvars.windows import load_priors

    return load_priors()


def _read_policy() -> Any:
    from cachedoctor.clean import load_scheduled_policy

    return load_scheduled_policy()


def _read_jobs() -> Any:
    from cachedoctor.schedule.jobfile import installed_jobs

    return installed_jobs()


def _read_registry() -> Any:
    from cachedoctor.relocate import journal

    return journal.relocation_records()


def _read_journal() -> Any:
    from cachedoctor.relocate import journal

    journal.check_state()


def _read_snapshot() -> Any:
    from cachedoctor.relocate import settle

    return settle.load(YARN_OP, 0)


# (where the file is, how cachedoctor reads it, a current-format document with a wrong type, the
# place the error names)
DAMAGED: dict[str, tuple[Callable[[], Path], Callable[[], Any], dict[str, Any], str]] = {
    "quotas.json": (lambda: _config() / "quotas.json", _read_quotas,
                    {"quotas": {"pip": {"cache": "20GB"}}}, "quotas.pip.cache: expected an integer"),
    "env.json": (lambda: _config() / "env.json", _read_env,
                 {"variables": {"A": 1}}, "variables.A: expected a string"),
    "env-windows-before.json": (lambda: _config() / "env-windows-before.json", _read_priors,
                                {"variables": {"A": {"value": None, "type": None}}},
                                "variables.A.ours: missing"),
    "schedule.json": (lambda: _config() / "schedule.json", _read_policy,
                      {"kinds": "cache"}, "kinds: expected a list"),
    "schedule-jobs.json": (lambda: _config() / "schedule-jobs.json", _read_jobs,
                           {"jobs": {"cron": {"argv": ["x"], "every": "daily", "at": "25:00"}}},
                           "jobs.cron: invalid at '25:00'"),
    "relocations.json": (lambda: _state() / "relocations.json", _read_registry,
                         {"pip/cache": {"kind": "move", "pairs": []}}, "pip/cache.id: missing"),
    "journal/ID.json": (lambda: journal_file(YARN_OP), _read_journal,
                        {"id": YARN_OP, "kind": "move", "tool": "yarn", "location": "c",
                         "method": "link", "dest_root": "/d", "base": "/d/y",
                         "pairs": [{"source": "/s", "dest": "/d/y", "same_fs": "no"}]},
                        "pairs[0].same_fs: expected true or false"),
    "journal/ID.N.settle.json": (lambda: _state() / "journal" / f"{YARN_OP}.0.settle.json",
                                 _read_snapshot, {"digests": [1]}, "digests: expected an object"),
}


def test_every_json_kind_has_a_damaged_file_case() -> None:
    _import_every_kind()
    json_kinds = {name for name, kind in sf.KINDS.items() if isinstance(kind, sf.JsonKind)}
    assert json_kinds - set(DAMAGED) == {"login-env.json", "clean.log"}  # lenient: see below


@pytest.mark.parametrize("name", sorted(DAMAGED))
@pytest.mark.parametrize("damage", ["truncated", "wrong type", "future version", "bad format"])
def test_a_damaged_file_is_named_with_what_is_wrong(isolated_home: Path, name: str,
                                                    damage: str) -> None:
    where, read, wrong, says = DAMAGED[name]
    kind = sf.KINDS[name]
    path = where()
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": kind.version, **wrong}
    if damage == "truncated":
        path.write_text(json.dumps(document, indent=2)[:25], encoding="utf-8")
        says = f"{path}:"
    elif damage == "wrong type":
        path.write_text(json.dumps(document), encoding="utf-8")
    elif damage == "future version":
        path.write_text(json.dumps({**document, "format": kind.version + 1}), encoding="utf-8")
        says = f"written by a newer cachedoctor (format {kind.version + 1}"
    else:
        path.write_text(json.dumps({**document, "format": "one"}), encoding="utf-8")
        says = "format: expected a version number"
    with pytest.raises(sf.StateFileDamaged) as raised:
        read()
    assert str(path) in raised.value.message and says in raised.value.message, raised.value.message
    assert raised.value.exit_code == 2 and raised.value.hint


def test_a_damaged_journal_file_is_listed_and_refuses_a_move(isolated_home: Path, tmp_path: Path) -> None:
    from cachedoctor.relocate import journal

    path = journal_file(YARN_OP)
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "id": "x"', encoding="utf-8")
    [(file, problem)] = journal.damaged()
    assert file == str(path) and "invalid JSON" in problem and journal.load_all() == []
    (isolated_home / ".cache" / "pip").mkdir(parents=True)
    moved = run_cli("move", "pip", str(tmp_path / "dest"), "--yes")
    assert moved.returncode == 2 and "Traceback" not in moved.stderr, moved.stderr
    assert str(path) in moved.stderr and "journal file" in moved.stderr
    assert (isolated_home / ".cache" / "pip").is_dir() and not (tmp_path / "dest").exists()
    path.write_text(json.dumps({"format": 9}), encoding="utf-8")
    restored = run_cli("restore", "pip", "--yes")
    assert restored.returncode == 2 and "written by a newer cachedoctor" in restored.stderr


def test_damaged_quotas_relocations_and_history_exit_2_from_the_cli(isolated_home: Path) -> None:
    from cachedoctor import history
    from cachedoctor.quota import quotas_file
    from cachedoctor.relocate.journal import registry_file

    quotas_file().parent.mkdir(parents=True, exist_ok=True)
    quotas_file().write_text('{"format": 1, "quotas": {"pip": []}}', encoding="utf-8")
    listed = run_cli("quota", "list")
    assert listed.returncode == 2 and f"{quotas_file()}: the quota file is damaged" in listed.stderr
    assert "quotas.pip: expected an object" in listed.stderr and "Traceback" not in listed.stderr
    registry_file().parent.mkdir(parents=True, exist_ok=True)
    registry_file().write_text('{"format": 2}', encoding="utf-8")
    restored = run_cli("restore", "pip", "--yes", "--json")
    assert restored.returncode == 2 and "relocations.json" in restored.stderr
    [error] = json.loads(restored.stdout)["errors"]
    assert error["kind"] == "damaged_state" and "newer cachedoctor" in error["message"]
    history.db_path().write_bytes(b"not a database " * 100)
    shown = run_cli("history")
    assert shown.returncode == 2 and str(history.db_path()) in shown.stderr
    assert "damaged" in shown.stderr and "Traceback" not in shown.stderr
    history.db_path().unlink()
    history.check()
    conn = sqlite3.connect(history.db_path())
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    newer = run_cli("history")
    assert newer.returncode == 2 and "written by a newer cachedoctor (format 7" in newer.stderr


def test_the_lenient_files_pass_over_damage(isolated_home: Path) -> None:
    """The login shell cache is only a cache (asked again), the log only informs (the run
    before a damaged line is shown)."""
    from cachedoctor.clean import last_run, log_path
    from cachedoctor.locate import loginshell

    path = Path(loginshell.cache_file())
    path.parent.mkdir(parents=True, exist_ok=True)
    for text in ('{"key": "k", "env"', '{"format": 5, "key": "k", "shell": "s", "env": {}}',
                 '{"key": "k", "shell": "s", "env": {"A": 1}}'):
        path.write_text(text, encoding="utf-8")
        assert loginshell._read_cache("k") is None
    log_path().write_text('2026-01-01 00:00:00,000 INFO RESULT {"format": 1, "status": "ok"}\n'
                          '2026-01-02 00:00:00,000 INFO RESULT {"format": 3, "status": "x"}\n'
                          '2026-01-03 00:00:00,000 INFO RESULT {"status": 7}\n'
                          '2026-01-04 00:00:00,000 INFO RESULT {"status": "ok", "fil\n',
                          encoding="utf-8")
    assert last_run() == {"status": "ok", "logged_at": "2026-01-01 00:00:00,000"}


# --- round trips ------------------------------------------------------------------------------


def _import_every_kind() -> None:
    import cachedoctor.clean.scheduled
    import cachedoctor.envvars
    import cachedoctor.envvars.windows
    import cachedoctor.history
    import cachedoctor.locate.loginshell
    import cachedoctor.quota
    import cachedoctor.relocate.journal
    import cachedoctor.relocate.settle
    import cachedoctor.schedule.jobfile  # noqa: F401


def _models() -> dict[str, Any]:
    from cachedoctor.clean.scheduled import ScheduledPolicy
    from cachedoctor.envvars import ManagedStore
    from cachedoctor.envvars.windows import Prior
    from cachedoctor.locate.loginshell import _Cached
    from cachedoctor.relocate.journal import Operation, Pair
    from cachedoctor.schedule.model import Schedule, make_job

    op = Operation(id="i", kind="restore", tool="t", location="l", method="env", dest_root="/d",
                   base="/d/t", pairs=[Pair("/s", "/d/t", False)], verify="hash",
                   settings={"vars": {"A": "/d/t"}, "scope": "user", "service": [],
                             "env_before": {"A": None}, "applied": True, "history_id": 3,
                             "custom": {"kept": [1, 2]}},
                   phase="placed", profiles_dirs=["/p"], started=1.5, updated=2.5,
                   messages=["m"])
    done = Operation(**{**op.to_json(), "kind": "move", "phase": "done", "pairs": op.pairs})
    return {
        "quotas.json": {"pip": {"cache": 1, "wheels": 2 << 40}, "npm": {"cache": 3}},
        "env.json": ManagedStore({"A": "ä b", "B": ""}, ["/home/x/.profile"]),
        "env-windows-before.json": {"A": Prior("x", 2, "y"), "B": Prior(None, None, "")},
        "schedule.json": ScheduledPolicy(None, ("logs",), ()),
        "schedule-jobs.json": {"launchd": make_job(Schedule("weekly", 4, 5), ["/bin/cd"])},
        "relocations.json": {"t/l": done},
        "journal/ID.json": op,
        "journal/ID.N.settle.json": {"": "abc", "a/b": "unreadable:13"},
        "login-env.json": _Cached("k", "/bin/zsh", {"PATH": "/bin"}),
        "clean.log": {"status": "ok", "files": 2, "bytes": 10, "by_kind": {"cache": 2}},
    }


@pytest.mark.parametrize("name", sorted(_models()))
def test_every_kind_round_trips(tmp_path: Path, name: str) -> None:
    kind = sf.KINDS[name]
    assert isinstance(kind, sf.JsonKind)
    model = _models()[name]
    path = tmp_path / "file.json"
    kind.write(path, model)
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == kind.version
    assert kind.read(path) == model
    assert kind.read(tmp_path / "missing.json") is None


def test_the_docs_list_every_kind_with_its_version() -> None:
    _import_every_kind()
    docs = (Path(__file__).parents[1] / "docs" / "state.md").read_text(encoding="utf-8")
    for name, kind in sf.KINDS.items():
        assert f"| `{name}` | {kind.version} |" in docs, name
    assert set(_models()) | {"history.sqlite3"} == set(sf.KINDS)


def test_a_kind_needs_one_migration_per_older_version() -> None:
    with pytest.raises(AssertionError):
        sf.JsonKind[int]("test-kind-without-migration", "test file", 1, parse=lambda doc: 0,
                         dump=lambda model: {})
    assert "test-kind-without-migration" not in sf.KINDS
