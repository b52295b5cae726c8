"""Quotas: size parsing, storage with history, usage measured against du, NTFS commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cachedoctor import history
from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.profiles.loader import load_profile_file
from cachedoctor.quota import (
    apply_quotas,
    cap_for,
    ntfs_commands,
    ntfs_drive,
    ntfs_user,
    quota_table,
    target_locations,
    undo_change,
    usage,
)
from cachedoctor.sizes import parse_size
from tests.conftest import IS_WINDOWS, needs_du, result_of, run_cli, user_cache_root

PROFILE = """\
id: demo
name: Demo tool
description: a tool with three folders
locations:
  - id: cache
    paths: {linux: "~/.cache/demo", macos: "~/Library/Caches/demo", windows: '%LOCALAPPDATA%\\demo'}
    safe_to_delete: true
    quota: 2MB
  - id: tmp
    kind: temp
    paths: {linux: "~/.cache/demo-tmp"}
    safe_to_delete: true
  - id: models
    kind: models
    paths: {linux: "~/demo-models"}
    safe_to_delete: false
"""


@pytest.fixture
def profiles_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "demo.yaml").write_text(PROFILE)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))
    return folder


@pytest.mark.parametrize(("text", "expected"), [
    ("20GB", 20 * 10**9), ("20G", 20 * 10**9), ("20gb", 20 * 10**9), ("500MiB", 500 * 2**20),
    ("1.5GiB", int(1.5 * 2**30)), ("1234", 1234), ("10 KB", 10_000), ("2TiB", 2 * 2**40),
])
def test_sizes_accept_decimal_and_binary_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "-5GB", "20XB", "1e3", "twenty"])
def test_bad_sizes_are_refused(text):
    with pytest.raises(UserInputError):
        parse_size(text)


def test_targets_default_to_safe_locations_and_recommended_cap(profiles_dir):
    profile = load_profile_file(profiles_dir / "demo.yaml")
    assert [loc.id for loc in target_locations(profile, None)] == ["cache", "tmp"]
    assert [loc.id for loc in target_locations(profile, "models")] == ["models"]
    with pytest.raises(UserInputError, match="no location 'nope'"):
        target_locations(profile, "nope")
    assert cap_for(profile.location("cache"), None) == 2 * 10**6
    assert cap_for(profile.location("cache"), "1GiB") == 2**30
    with pytest.raises(UserInputError, match="recommends no quota"):
        cap_for(profile.location("tmp"), None)
    with pytest.raises(UserInputError, match="larger than 0"):
        cap_for(profile.location("tmp"), "0")


def test_apply_records_history_per_location_and_undo(profiles_dir):
    first = apply_quotas("demo", {"cache": 100, "tmp": 200})
    assert quota_table() == {("demo", "cache"): 100, ("demo", "tmp"): 200}
    assert len(first.change_ids) == 2
    again = apply_quotas("demo", {"cache": 100})
    assert again.change_ids == [] and not again.changes[0].changed
    second = apply_quotas("demo", {"cache": 300})
    change = history.get(second.change_ids[0])
    assert change is not None and change.kind == "quota" and change.tool == "demo"
    assert (change.before, change.after) == ({"location": "cache", "cap": 100}, {"location": "cache", "cap": 300})
    undo_change(change)
    assert quota_table()[("demo", "cache")] == 100
    apply_quotas("demo", {"cache": 999})
    stale = history.get(second.change_ids[0])
    assert stale is not None and stale.undone_by is not None
    later = history.get(apply_quotas("demo", {"tmp": 5}).change_ids[0])
    apply_quotas("demo", {"tmp": 6})
    with pytest.raises(RefusedError, match="changed again"):  # the cap is no longer what it set
        undo_change(later)  # type: ignore[arg-type]
    dry = apply_quotas("demo", {"tmp": None}, dry_run=True)
    assert dry.changes[0].changed and quota_table()[("demo", "tmp")] == 6


@needs_du
def test_usage_matches_du(profiles_dir, isolated_home):
    folder = isolated_home / ".cache" / "demo"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"x" * 300_000)
    (folder / "sub" / "b.bin").write_bytes(b"y" * 5000)
    apply_quotas("demo", {"cache": 100_000, "tmp": 10**9})
    profile = load_profile_file(profiles_dir / "demo.yaml")
    host = Host(os="linux", env={"HOME": str(isolated_home)}, home=str(isolated_home))
    rows = {r.location: r for r in usage({"demo": profile}, host)}
    du = int(subprocess.run(["du", "-sB1", str(folder)], capture_output=True, text=True).stdout.split()[0])
    assert rows["cache"].used_bytes == du and rows["cache"].over and rows["cache"].paths == [str(folder)]
    assert rows["tmp"].used_bytes == 0 and rows["tmp"].paths == [] and not rows["tmp"].over


def test_ntfs_command_construction():
    assert ntfs_commands("d:", 20 * 10**9, 18 * 10**9, "PC\\ana") == [
        ["fsutil", "quota", "enforce", "D:"],
        ["fsutil", "quota", "modify", "D:", "18000000000", "20000000000", "PC\\ana"],
    ]
    for drive, limit, threshold, user in (("D", 10, 5, "u"), ("D:", 10, 11, "u"), ("D:", 10, 5, " ")):
        with pytest.raises(UserInputError):
            ntfs_commands(drive, limit, threshold, user)
    assert ntfs_drive(r"d:\ai-cache\hf") == "D:"
    with pytest.raises(UserInputError):
        ntfs_drive(r"\\server\share\x")
    assert ntfs_user(Host(os="windows", env={"USERNAME": "ana", "USERDOMAIN": "PC"})) == "PC\\ana"


def test_cli_quota_set_list_off(profiles_dir, isolated_home):
    (user_cache_root(isolated_home) / "demo").mkdir(parents=True)
    (user_cache_root(isolated_home) / "demo" / "f").write_bytes(b"z" * 10_000)
    assert run_cli("quota", "demo", "20GB").returncode == 2  # no terminal, no --yes
    assert quota_table() == {}
    dry = run_cli("quota", "demo", "--location", "cache", "--dry-run")
    assert dry.returncode == 0 and "(2,000,000 bytes)" in dry.stdout  # the plan: stdout
    assert quota_table() == {}
    done = run_cli("quota", "demo", "--location", "cache", "500MiB", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert result_of(done)["changes"][0]["after_bytes"] == 500 * 2**20
    listed = run_cli("quota", "list", "--json")
    row = result_of(listed)["quotas"][0]
    assert (row["tool"], row["location"], row["cap_bytes"], row["over"]) == ("demo", "cache", 500 * 2**20, False)
    assert row["used_bytes"] >= 10_000 and row["known"]
    assert run_cli("quota", "demo", "--off", "--yes").returncode == 0
    assert quota_table() == {}
    assert run_cli("quota", "demo", "lots", "--yes").returncode == 2
    assert run_cli("quota", "nosuchtool", "1GB", "--yes").returncode == 2


@pytest.mark.skipif(IS_WINDOWS, reason="on Windows --yes would run fsutil on a real drive")
def test_cli_ntfs_plan_on_linux(profiles_dir):
    plan = run_cli("quota", "demo", "20GB", "--location", "cache", "--ntfs", "--drive", "D:",
                   "--user", "PC\\ana", "--json")
    assert plan.returncode == 0, plan.stderr
    doc = result_of(plan)
    assert doc["commands"][1] == ["fsutil", "quota", "modify", "D:", "18000000000", "20000000000", "PC\\ana"]
    assert "per user per volume" in doc["explanation"] and doc["ran"] is False
    refused = run_cli("quota", "demo", "20GB", "--location", "cache", "--ntfs", "--drive", "D:",
                      "--user", "ana", "--yes")
    assert refused.returncode == 2 and "only be applied on Windows" in refused.stderr
    assert quota_table() == {}


def test_ntfs_quota_goes_where_the_cache_lives_now_and_not_on_the_system_drive():
    """Issue 10, #6: after a move the cache is on D:, and a quota on C: (the declared path)
    would cap the user's whole profile. ReFS (a Dev Drive) has no quotas."""
    from cachedoctor.errors import RefusedError
    from cachedoctor.locate.files import DictFiles
    from cachedoctor.locate.world import World
    from cachedoctor.profiles.model import Profile
    from cachedoctor.profiles.validation import validate
    from cachedoctor.quota import check_ntfs_drive, ntfs_target

    profile, problems = validate({
        "id": "pip", "name": "pip", "description": "x",
        "locations": [{"id": "cache", "paths": {"windows": "%LOCALAPPDATA%\\pip\\Cache"},
                       "safe_to_delete": True}]}, Profile)
    assert profile is not None, problems
    host = Host(os="windows", env={"LOCALAPPDATA": "C:\\Users\\ana\\AppData\\Local"},
                home="C:\\Users\\ana")
    declared = "C:\\Users\\ana\\AppData\\Local\\pip\\Cache"
    moved = World.of(host, DictFiles(links={declared: ("junction", "D:\\caches\\pip")},
                                     dirs=frozenset({"D:\\caches\\pip"}), windows=True))
    assert ntfs_target(profile, "cache", moved) == "D:"
    at_home = World.of(host, DictFiles(dirs=frozenset({declared}), windows=True))
    assert ntfs_target(profile, "cache", at_home) == "C:"
    with pytest.raises(RefusedError, match="system drive"):
        check_ntfs_drive("C:", explicit=False, system_drive="C:", fstype="NTFS")
    check_ntfs_drive("C:", explicit=True, system_drive="C:", fstype="NTFS")  # asked for it
    check_ntfs_drive("D:", explicit=False, system_drive="C:", fstype="NTFS")
    with pytest.raises(RefusedError, match="ReFS"):
        check_ntfs_drive("D:", explicit=True, system_drive="C:", fstype="ReFS")
    with pytest.raises(RefusedError, match="not NTFS"):
        check_ntfs_drive("E:", explicit=True, system_drive="C:", fstype="exFAT")


@pytest.mark.parametrize("text", ["9" * 400 + "GB", "1e400", "9" * 30 + "TiB"])
def test_a_size_too_large_for_any_drive_is_bad_input_not_a_crash(text: str) -> None:
    with pytest.raises(UserInputError, match=r"too large|invalid size"):
        parse_size(text)


@pytest.mark.parametrize("text", ["9" * 400, "9" * 400 + "d", "9" * 20 + "w"])
def test_an_age_too_large_for_any_clock_is_bad_input_not_a_crash(text: str) -> None:
    from cachedoctor.sizes import parse_age

    with pytest.raises(UserInputError, match="too large"):
        parse_age(text)
    assert parse_age("90") == 90.0 and parse_age("1h30m") == 5400.0
