"""`cachedoctor undo`: reverting recorded changes, and refusing when it is not safe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cachedoctor import history, undo
from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.quota import quota_table, set_quota
from tests.conftest import IS_MACOS, needs_linux, needs_posix_paths, result_of, run_cli


def host() -> Host:
    return Host(os="linux", env=dict(os.environ), home=os.environ["HOME"])


def quota_change(tool: str, location: str, cap: int | None) -> int:
    """What `cachedoctor quota` does: change the cap and record before/after."""
    from cachedoctor.quota import apply_quotas

    [change_id] = apply_quotas(tool, {location: cap}).change_ids
    return change_id


def test_undo_quota_reverts_and_is_recorded() -> None:
    first = quota_change("pip", "cache", 5_000_000_000)
    second = quota_change("pip", "cache", 1_000_000_000)
    assert quota_table() == {("pip", "cache"): 1_000_000_000}

    result = undo.undo(second, host())
    assert quota_table() == {("pip", "cache"): 5_000_000_000}
    record = history.get(result.record or 0)
    assert record is not None and record.undoes == second and record.kind == "quota"
    assert record.before == {"location": "cache", "cap": 1_000_000_000}
    assert record.after == {"location": "cache", "cap": 5_000_000_000}
    assert history.get(second).undone_by == result.record  # type: ignore[union-attr]

    with pytest.raises(RefusedError, match="already undone by change"):
        undo.plan_undo(second, host())

    undo.undo(first, host())  # the later change is undone: the first may go too
    assert quota_table() == {}


def test_undo_refuses_when_a_later_change_depends_on_it() -> None:
    first = quota_change("npm", "cache", 3_000_000_000)
    second = quota_change("npm", "cache", 4_000_000_000)
    other = quota_change("pip", "cache", 1_000)  # another cache: no dependency
    with pytest.raises(RefusedError, match=f"later change #{second}") as err:
        undo.plan_undo(first, host())
    assert err.value.hint == f"undo #{second} first"
    undo.plan_undo(other, host())  # fine


def test_undo_refuses_when_the_state_changed_since() -> None:
    change = quota_change("uv", "cache", 2_000_000_000)
    set_quota("uv", "cache", 7_000_000_000)  # edited by hand / by another program, unrecorded
    with pytest.raises(RefusedError, match=r"has changed since: it is now 6\.5 GiB"):
        undo.plan_undo(change, host())
    assert quota_table() == {("uv", "cache"): 7_000_000_000}


def test_undo_refuses_unknown_and_irreversible_changes() -> None:
    with pytest.raises(UserInputError, match="no change #42"):
        undo.plan_undo(42, host())
    cleaned = history.record("clean", "cleaned pip", tool="pip")
    with pytest.raises(RefusedError, match="cannot be brought back"):
        undo.plan_undo(cleaned, host())
    restored = history.record("restore", "restored pip", tool="pip", after={"location": "cache"})
    with pytest.raises(RefusedError, match="moving the cache again"):
        undo.plan_undo(restored, host())
    ntfs = history.record("quota", "NTFS quota on D:", tool="workbuddy", before={"ntfs": None},
                          after={"ntfs": {"drive": "D:", "user": "PC\\me", "limit": 1}})
    with pytest.raises(RefusedError, match="NTFS volume quota") as err:
        undo.plan_undo(ntfs, host())
    assert "fsutil quota disable D:" in (err.value.hint or "")
    odd = history.record("mystery", "something")
    with pytest.raises(RefusedError, match="kind 'mystery' cannot be undone"):
        undo.plan_undo(odd, host())


TUNE_PROFILE = """\
id: demo
name: Demo
description: test
locations:
  - id: cache
    paths:
      linux: '{cache}'
    safe_to_delete: true
tune:
  - id: fast
    file:
      linux: '{file}'
    format: jsonc
    create: true
    settings:
      - key: demo.cacheSize
        value: 8192
      - key: demo.cacheStrategy
        value: lfu
"""


def _tune(tmp_path: Path, file: Path) -> int:
    from cachedoctor import tune
    from cachedoctor.profiles.loader import parse_profile

    profile = parse_profile(TUNE_PROFILE.format(cache=tmp_path / "c", file=file), "demo.yaml")
    result = tune.apply_tune(tune.plan_tune(profile, "fast", host()))
    assert result.change_id is not None
    return result.change_id


@needs_posix_paths
def test_undo_tune_restores_the_file_whole(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    original = '{\n  // mine\n  "editor.fontSize": 14,\n}\n'
    settings.write_text(original, encoding="utf-8")
    change = _tune(tmp_path, settings)
    assert '"demo.cacheSize": 8192' in settings.read_text(encoding="utf-8")
    plan = undo.plan_undo(change, host())
    assert plan.steps == [f"put back {settings} as it was before the tune"]
    result = undo.undo(change, host(), plan=plan)
    assert settings.read_text(encoding="utf-8") == original
    record = history.get(result.record or 0)
    assert record is not None and record.undoes == change and record.kind == "tune"
    with pytest.raises(RefusedError, match="already undone"):
        undo.plan_undo(change, host())


@needs_posix_paths
def test_undo_tune_after_edits_reverts_only_untouched_keys(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{}\n", encoding="utf-8")
    change = _tune(tmp_path, settings)
    text = settings.read_text(encoding="utf-8").replace("8192", "4096")  # the user edits one key
    settings.write_text(text, encoding="utf-8")
    plan = undo.plan_undo(change, host())
    assert plan.steps == [
        f"{settings} was edited since: revert only demo.cacheStrategy",
        "leave the keys edited since as they are: demo.cacheSize",
    ]
    undo.undo(change, host(), plan=plan)
    after = settings.read_text(encoding="utf-8")
    assert "4096" in after and "cacheStrategy" not in after

    created = tmp_path / "new" / "settings.json"
    change = _tune(tmp_path, created)
    undo.undo(change, host())
    assert not created.exists()


@needs_posix_paths
def test_undo_tune_refuses_when_the_file_is_gone(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{}\n", encoding="utf-8")
    change = _tune(tmp_path, settings)
    settings.unlink()
    with pytest.raises(RefusedError, match="no longer exists"):
        undo.plan_undo(change, host())


def test_cli_undo_dry_run_yes_and_refusals() -> None:
    change = quota_change("cargo", "registry", 9_000_000_000)

    dry = run_cli("undo", str(change), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = result_of(dry)
    assert plan["dry_run"] is True and plan["id"] == change and plan["kind"] == "quota"
    assert plan["steps"] == ["quota cargo registry: 8.4 GiB (9000000000 bytes) -> no cap"]
    assert quota_table() == {("cargo", "registry"): 9_000_000_000}

    no_tty = run_cli("undo", str(change))  # no terminal to ask on, no --yes
    assert no_tty.returncode == 2 and "pass --yes" in no_tty.stderr
    assert quota_table() == {("cargo", "registry"): 9_000_000_000}

    done = run_cli("undo", str(change), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    result = result_of(done)
    assert result["undone"] == change and isinstance(result["record"], int)
    assert quota_table() == {}

    again = run_cli("undo", str(change), "--yes")
    assert again.returncode == 2
    assert f"error: cannot undo change #{change}" in again.stderr
    assert f"already undone by change #{result['record']}" in again.stderr
    missing = run_cli("undo", "4242", "--yes")
    assert missing.returncode == 2 and "no change #4242" in missing.stderr
    bad = run_cli("undo", "abc")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@needs_posix_paths
def test_undo_env_with_the_real_env_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor import envvars

    profile_file = Path(os.environ["HOME"]) / ".profile"
    profile_file.write_text("# mine\n", encoding="utf-8")
    first = envvars.set_variables({"DEMO_A": "/one"}, host=host()).change_id
    second = envvars.set_variables({"DEMO_A": "/two", "DEMO_B": "/b"}, host=host()).change_id
    assert first and second
    assert envvars.managed_variables(host()) == {"DEMO_A": "/two", "DEMO_B": "/b"}

    with pytest.raises(RefusedError, match=f"later change #{second}"):
        undo.plan_undo(first, host())
    plan = undo.plan_undo(second, host())
    assert plan.steps == ["set DEMO_A=/one", "unset DEMO_B"]
    result = undo.undo(second, host(), plan=plan)
    assert envvars.managed_variables(host()) == {"DEMO_A": "/one"}
    assert "DEMO_A" in profile_file.read_text(encoding="utf-8")
    assert "DEMO_B" not in profile_file.read_text(encoding="utf-8")
    assert profile_file.read_text(encoding="utf-8").startswith("# mine\n")
    record = history.get(result.record or 0)
    assert record is not None and record.undoes == second and record.kind == "env"

    # Changed again outside this record: refused, nothing touched.
    envvars.set_variables({"DEMO_A": "/three"}, host=host())
    with pytest.raises(RefusedError, match="later change"):
        undo.plan_undo(first, host())
    from cachedoctor.envvars import _load_document, _save_store

    _, created = _load_document()
    _save_store({"DEMO_A": "/edited"}, created)  # a hand edit of the store, unrecorded
    third = history.changes(kind="env")[-1].id
    with pytest.raises(RefusedError, match="DEMO_A is now '/edited'"):
        undo.plan_undo(third, host())


def _demo_profile(cache: Path) -> object:
    from cachedoctor.profiles.loader import parse_profile

    text = ("id: demo\nname: Demo\ndescription: test\nlocations:\n  - id: cache\n    paths:\n"
            f"      linux: '{cache}'\n    safe_to_delete: true\n    relocate:\n      - method: link\n")
    folder = cache.parent / "profiles"
    folder.mkdir(exist_ok=True)
    (folder / "demo.yaml").write_text(text, encoding="utf-8")
    return parse_profile(text, "demo.yaml")


def _move(profile: object, dest: Path) -> int:
    from cachedoctor.relocate.engine import run_move
    from cachedoctor.relocate.plan import plan_move

    dest.mkdir(parents=True, exist_ok=True)  # see the report: a missing DEST's parent is compared
    plan = plan_move(profile, profile.locations[0], host(), str(dest))  # type: ignore[attr-defined]
    outcome = run_move(plan.op, host())
    assert outcome.history_id is not None
    return outcome.history_id


@needs_posix_paths
def test_undo_a_real_move_restores_the_folder(tmp_path: Path) -> None:
    cache = tmp_path / "home" / "cache"
    cache.mkdir(parents=True)
    (cache / "blob").write_bytes(b"data" * 1000)
    profile = _demo_profile(cache)
    change = _move(profile, tmp_path / "other")
    assert cache.is_symlink()

    dirs = [str(cache.parent / "profiles")]
    plan = undo.plan_undo(change, host(), profiles_dirs=dirs)
    assert plan.steps[0].startswith(f"restore demo (cache) from {tmp_path / 'other'}")
    result = undo.undo(change, host(), plan=plan, profiles_dirs=dirs)
    assert cache.is_dir() and not cache.is_symlink()
    assert (cache / "blob").read_bytes() == b"data" * 1000
    record = history.get(result.record or 0)
    assert record is not None and record.kind == "restore" and record.undoes == change
    with pytest.raises(RefusedError, match="already undone"):
        undo.plan_undo(change, host())
    with pytest.raises(RefusedError, match="moving the cache again"):
        undo.plan_undo(result.record or 0, host())


@needs_posix_paths
def test_undo_a_move_refuses_when_moved_again(tmp_path: Path) -> None:
    from cachedoctor.relocate import engine, journal

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "f").write_text("x")
    profile = _demo_profile(cache)
    first = _move(profile, tmp_path / "d1")
    restore = engine.restore_op(journal.relocation("demo", "cache"), host())  # type: ignore[arg-type]
    assert restore.history_id is not None
    assert history.get(first).undone_by == restore.history_id  # type: ignore[union-attr]
    second = _move(profile, tmp_path / "d2")
    with pytest.raises(RefusedError, match="already undone"):
        undo.plan_undo(first, host())
    # The registry says another move put the cache where it is (e.g. the history was reset).
    current = journal.relocation("demo", "cache")
    assert current is not None and current.settings["history_id"] == second
    current.settings["history_id"] = 999
    journal.set_relocation(current, "demo", "cache")
    with pytest.raises(RefusedError, match="moved again since \\(change #999\\)"):
        undo.plan_undo(second, host())
    current.settings["history_id"] = second
    journal.set_relocation(current, "demo", "cache")
    undo.undo(second, host())
    assert cache.is_dir() and not cache.is_symlink() and (cache / "f").read_text() == "x"


@needs_posix_paths
@pytest.mark.skipif(IS_MACOS, reason="would load a real launchd job into the "
                    "runner's session (launchctl bootstrap)")
def test_undo_schedule_install_and_replace_with_real_launchd_files() -> None:
    """The launchd backend writes a real plist under the (isolated) home on any OS; launchctl
    itself only runs on macOS."""
    from cachedoctor import schedule

    mac = Host(os="macos", env=dict(os.environ), home=os.environ["HOME"])
    plist = schedule.launchd.plist_path(mac)
    daily = schedule.make_job(schedule.parse_schedule("daily", "03:30"), ["/usr/bin/cachedoctor"])
    weekly = schedule.make_job(schedule.parse_schedule("weekly", "04:00"), ["/usr/bin/cachedoctor"])
    first = schedule.install_schedule("launchd", daily, mac).history_id
    second = schedule.install_schedule("launchd", weekly, mac).history_id
    assert first and second and plist.exists()
    weekly_text = plist.read_text(encoding="utf-8")

    with pytest.raises(RefusedError, match=f"later change #{second}"):
        undo.plan_undo(first, mac)
    plan = undo.plan_undo(second, mac)
    assert plan.steps == ["reinstall the previous launchd job (daily at 03:30)"]
    result = undo.undo(second, mac, plan=plan)
    assert plist.read_text(encoding="utf-8") != weekly_text
    assert schedule.state_of("launchd", mac)["job"]["every"] == "daily"
    record = history.get(result.record or 0)
    assert record is not None and record.undoes == second and record.kind == "schedule"

    plist.write_text(plist.read_text(encoding="utf-8").replace("30", "45"), encoding="utf-8")
    with pytest.raises(RefusedError, match=r"was changed since \(files\)"):
        undo.plan_undo(first, mac)
    schedule.install_schedule("launchd", daily, mac, record=False)  # back as recorded
    undo.undo(first, mac)
    assert not plist.exists()
    assert schedule.state_of("launchd", mac)["installed"] is False


@needs_linux
def test_undo_a_move_refuses_while_the_cache_is_in_use(tmp_path: Path) -> None:
    """A process with a file open in the moved cache blocks the undo (named, with its pid);
    once it is gone, the undo goes through."""
    import subprocess
    import sys

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "f").write_text("x")
    profile = _demo_profile(cache)
    change = _move(profile, tmp_path / "other")
    folder = tmp_path / "profiles"
    held = tmp_path / "other" / "demo" / "f"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print('ready', flush=True);"
         " time.sleep(60)", str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(RefusedError, match=rf"cannot undo change #\d+ .*in use.*pid {proc.pid}"):
            undo.plan_undo(change, host(), profiles_dirs=[str(folder)])
    finally:
        proc.kill()
        proc.wait()
    undo.undo(change, host(), profiles_dirs=[str(folder)])
    assert cache.is_dir() and not cache.is_symlink()
