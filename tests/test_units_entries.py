"""Directory entries, content-addressed stores, superseded folders and dangling links, on pip's
own layout (http-v2/ beside an old http/, wheels/) and on a temporary profile."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import needs_du, needs_posix_paths, result_of, run_cli
from tests.layouts import age

pytestmark = needs_posix_paths
DAY = 86400.0
KIB = 1024


def write(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


@pytest.fixture
def pip_cache(isolated_home: Path) -> Path:
    """pip's cache: wheels/<a>/<b>/... per built wheel, http-v2/ entries, pre-23.3 http/."""
    root = isolated_home / ".cache" / "pip"
    now = time.time()
    for i, days in enumerate((50, 40, 3)):
        wheel = write(root / "wheels" / f"{i:02x}" / "cd" / "ef" / f"pkg{i}-1.0-py3-none-any.whl",
                      40 * KIB)
        age(wheel.parents[2], days * DAY, now=now)
    for i, days in enumerate((60, 2)):
        entry = write(root / "http-v2" / "a" / "b" / f"{i}" / f"entry{i}", 20 * KIB)
        write(entry.with_name(entry.name + ".body"), 60 * KIB)
        age(entry.parent, days * DAY, now=now)
    write(root / "http" / "0" / "1" / "old-entry", 30 * KIB)
    age(root / "http", 100 * DAY, now=now)
    return root


def ls_units() -> dict[str, dict]:
    proc = run_cli("ls", "pip", "--json")
    assert proc.returncode == 0, proc.stderr
    (location,) = result_of(proc)["locations"]
    return {u["id"]: u for u in location["units"]}


@needs_du
def test_ls_rows_are_entries_stores_and_superseded_folders_with_du_sizes(pip_cache: Path) -> None:
    units = ls_units()
    assert set(units) == {"http-v2", "wheels/00", "wheels/01", "wheels/02", "http"}
    for unit in units.values():
        du = subprocess.check_output(["du", "-sB1", str(pip_cache / unit["path"])], text=True)
        assert unit["bytes"] == int(du.split()[0]), unit["id"]
    assert units["http-v2"]["file_level"] is True
    assert any("superseded by http-v2" in f for f in units["http"]["flags"])


def test_max_size_evicts_whole_entries_and_single_store_files_least_recently_used_first(
    pip_cache: Path,
) -> None:
    total = int(subprocess.check_output(["du", "-sB1", str(pip_cache)]).split()[0])
    proc = run_cli("clean", "pip", "--max-size", str(total - 100 * KIB), "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    # the oldest: http/ (100 days), then http-v2's entry0 files (60 days): 30 + 80 KiB
    assert not (pip_cache / "http" / "0" / "1" / "old-entry").exists()
    assert not (pip_cache / "http-v2" / "a" / "b" / "0" / "entry0").exists()
    assert (pip_cache / "wheels" / "00").is_dir()  # 50 days: not needed to reach the cap
    assert (pip_cache / "http-v2" / "a" / "b" / "1" / "entry1").exists()
    (result,) = result_of(proc)["results"]
    assert result["measured"]["bytes_after"] <= total - 100 * KIB
    assert result["bytes"] == result["estimated_bytes"]


def test_older_than_takes_whole_wheel_entries(pip_cache: Path) -> None:
    proc = run_cli("clean", "pip", "--older-than", "30d", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (pip_cache / "wheels").iterdir()) == ["02"]
    assert not (pip_cache / "http").exists()
    assert sorted(p.name for p in (pip_cache / "http-v2" / "a" / "b").iterdir()) == ["1"]


def test_prune_removes_the_superseded_http_folder_and_dangling_links(pip_cache: Path) -> None:
    (pip_cache / "wheels" / "02" / "dangling").symlink_to("no-such-file")
    (pip_cache / "wheels" / "02" / "fine").symlink_to("cd")
    plan = run_cli("clean", "pip", "--prune", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    (target,) = result_of(plan)["targets"]
    assert {g["id"] for g in target["garbage"]} == {"http", "dangling links"}
    proc = run_cli("clean", "pip", "--prune", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert not (pip_cache / "http").exists()
    assert not os.path.lexists(pip_cache / "wheels" / "02" / "dangling")
    assert (pip_cache / "wheels" / "02" / "fine").is_symlink()
    assert len(list((pip_cache / "http-v2").rglob("entry*"))) == 4


def test_http_is_not_garbage_while_no_newer_pip_wrote_http_v2(pip_cache: Path) -> None:
    subprocess.run(["rm", "-rf", str(pip_cache / "http-v2")], check=True)
    proc = run_cli("clean", "pip", "--prune", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert (pip_cache / "http" / "0" / "1" / "old-entry").exists()


def test_a_unit_holding_a_kept_file_loses_everything_else(tmp_path: Path, isolated_home: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "kits.yaml").write_text(
        "id: kits\nname: Kits\ndescription: d\nlocations:\n"
        "  - id: cache\n    paths: {linux: ~/.cache/kits, macos: ~/.cache/kits}\n"
        "    safe_to_delete: true\n    units: [{type: directory-entries, under: '.'}]\n"
        "    clean: {keep: ['*.pin']}\n")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    root = isolated_home / ".cache" / "kits"
    write(root / "a" / "big.bin", 10 * KIB)
    write(root / "a" / "keep.pin", 10)
    write(root / "b" / "other.bin", 10 * KIB)
    proc = run_cli("clean", "kits", "--unit", "a", "--unit", "b", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["a", "a/keep.pin"]


def test_tool_only_stores_get_no_file_rules_and_say_why(isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "uv"
    write(cache / "archive-v0" / "x" / "f.py", 5000)
    proc = run_cli("clean", "uv", "--older-than", "1s", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "only uv's own command" in proc.stderr and "hard-links" in proc.stderr
    assert (cache / "archive-v0" / "x" / "f.py").exists()
    listing = run_cli("ls", "uv")
    assert "tool-only" in listing.stdout and "uv cache prune" in listing.stdout
    units = run_cli("clean", "uv", "--unit", "archive-v0", "--yes")
    assert "only uv's own command" in units.stderr
    assert (cache / "archive-v0" / "x" / "f.py").exists()
