"""`cachedoctor clean` end to end: temporary profiles, real files, fake tools on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cachedoctor.cacheunits import Clock
from cachedoctor.clean import Policy, plan_clean
from cachedoctor.host import Host
from cachedoctor.profiles.loader import load_profile_file
from cachedoctor.safedelete import FileInfo
from tests.conftest import IS_LINUX, needs_posix_paths, no_uses, result_of, run_cli

# fake tools are /bin/sh scripts, caches hold symlinks, hosts are POSIX
pytestmark = [needs_posix_paths, pytest.mark.os_doubles("windows", "macos")]

PROFILE = """\
id: {id}
name: {name}
description: a test tool
processes:
  linux: [{process}]
  macos: [{process}]
locations:
  - id: cache
    kind: cache
    paths:
      linux: '{path}'
      macos: '{path}'
    safe_to_delete: true
{clean}
  - id: data
    kind: data
    paths:
      linux: '{data}'
      macos: '{data}'
    safe_to_delete: false
"""


def write_profile(
    folder: Path,
    tool: str = "faketool",
    *,
    path: str = "~/.cache/faketool",
    data: str = "~/.local/share/faketool",
    clean: str = "",
    process: str = "no-such-process-xyz",
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{tool}.yaml"
    file.write_text(
        PROFILE.format(
            id=tool, name=tool.capitalize(), path=path, data=data, clean=clean, process=process
        )
    )
    return file


def fill(root: Path, n: int = 3, size: int = 1000) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        f = root / f"sub{i}" / f"file{i}.bin"
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(b"x" * size)
        files.append(f)
    return files


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "profiles"
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))
    return folder


def test_clean_tool_empties_the_safe_location_and_keeps_the_folder(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles, clean="    clean:\n      keep: ['*.keep']")
    cache = isolated_home / ".cache" / "faketool"
    fill(cache)
    (cache / "index.keep").write_text("stay")
    data = isolated_home / ".local" / "share" / "faketool"
    fill(data)
    proc = run_cli("clean", "faketool", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["index.keep"]
    assert len(list(data.rglob("*.bin"))) == 3  # not safe_to_delete: never touched
    assert "3 files" in proc.stdout


def test_dry_run_lists_and_deletes_nothing_json(profiles: Path, isolated_home: Path) -> None:
    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    fill(cache, n=4, size=5000)
    proc = run_cli("clean", "faketool", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = result_of(proc)
    assert doc["dry_run"] is True
    (target,) = doc["targets"]
    assert (target["tool"], target["location"], target["mode"]) == ("faketool", "cache", "empty")
    assert target["files"] == 4 and target["bytes"] >= 20000
    assert len(target["largest"]) == 4
    assert doc["totals"]["files"] == 4
    assert [a["location"] for a in doc["left_alone"]] == []  # data does not exist: not listed
    assert len(list(cache.rglob("*.bin"))) == 4


def test_without_yes_and_without_terminal_it_refuses_to_guess(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles)
    fill(isolated_home / ".cache" / "faketool")
    proc = run_cli("clean", "faketool")
    assert proc.returncode == 2
    assert "pass --yes" in proc.stderr
    assert "3" in proc.stdout  # the plan was shown first
    assert len(list((isolated_home / ".cache" / "faketool").rglob("*.bin"))) == 3


def test_protected_roots_in_a_hostile_profile_are_refused(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles, "hostile", path="~")
    write_profile(profiles, "rooty", path="/", data="/usr")
    (isolated_home / "precious.txt").write_text("keep me")
    for tool in ("hostile", "rooty"):
        proc = run_cli("clean", tool, "--yes")
        assert proc.returncode == 2, proc.stderr
        assert "refus" in proc.stderr
    assert (isolated_home / "precious.txt").read_text() == "keep me"


def test_relocated_cache_is_cleaned_through_its_link_and_the_link_stays(
    profiles: Path, isolated_home: Path, tmp_path: Path
) -> None:
    write_profile(profiles)
    target = tmp_path / "other-drive" / "faketool"
    fill(target)
    link = isolated_home / ".cache" / "faketool"
    link.parent.mkdir(parents=True)
    link.symlink_to(target, target_is_directory=True)
    proc = run_cli("clean", "faketool", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and target.is_dir()
    assert list(target.iterdir()) == []


def test_tool_command_is_preferred_shown_and_its_status_reported(
    profiles: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls.txt"
    tool = bin_dir / "faketool"
    tool.write_text(
        f'#!/bin/sh\necho "$@" >> {record}\nrm -rf "$HOME/.cache/faketool/"*\n'
        'echo "Files removed: 3"\n'
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    write_profile(profiles, clean="    clean:\n      command: [faketool, cache, purge]")
    cache = isolated_home / ".cache" / "faketool"
    fill(cache)
    proc = run_cli("clean", "faketool", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert record.read_text() == "cache purge\n"
    assert f"{tool} cache purge" in proc.stderr  # shown before running
    assert "exit status 0" in proc.stdout and "Files removed: 3" in proc.stdout
    assert cache.is_dir() and list(cache.iterdir()) == []

    tool.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    fill(cache)
    proc = run_cli("clean", "faketool", "--yes", "--json")
    assert proc.returncode == 1
    (result,) = result_of(proc)["results"]
    assert result["command"]["returncode"] == 3 and "boom" in result["command"]["output"]
    assert result["status"] == "failed"


def test_command_missing_from_path_falls_back_to_file_rules(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles, clean="    clean:\n      command: [no-such-tool-xyz, purge]")
    cache = isolated_home / ".cache" / "faketool"
    fill(cache)
    proc = run_cli("clean", "faketool", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = result_of(proc)["results"]
    assert result["mode"] == "empty" and result["files"] == 3
    assert list(cache.iterdir()) == []


@pytest.mark.native_only("the quota counts the folder's own 4 KiB block; Windows reports no allocation (a folder takes 0 bytes there)", kinds=("windows",))
def test_lru_eviction_to_a_quota(profiles: Path, isolated_home: Path) -> None:
    from cachedoctor.quota import set_quota

    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    cache.mkdir(parents=True)
    now = time.time()
    for i in range(10):  # file0 is the least recently used
        f = cache / f"file{i}.bin"
        f.write_bytes(b"q" * 4096)
        os.utime(f, (now - 10000 + i * 100, now - 20000))
    set_quota("faketool", "cache", 6 * 4096 + 4096)  # room for the folder's own block + 6 files
    proc = run_cli("clean", "--yes", "--json")  # no tool: quota enforcement only
    assert proc.returncode == 0, proc.stderr
    left = sorted(p.name for p in cache.iterdir())
    assert left == [f"file{i}.bin" for i in range(4, 10)]
    assert result_of(proc)["results"][0]["files"] == 4


@pytest.mark.native_only("sizes in 4 KiB blocks; Windows reports apparent sizes only", kinds=("windows",))
def test_max_size_trims_by_lru_and_older_than_takes_only_old_files(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    cache.mkdir(parents=True)
    old = cache / "old.bin"
    old.write_bytes(b"o" * 4096)
    hour_ago = time.time() - 3600  # dated, not slept: a loaded machine must not age `fresh`
    os.utime(old, (hour_ago, hour_ago))
    fresh = cache / "fresh.bin"
    fresh.write_bytes(b"f" * 4096)
    proc = run_cli("clean", "faketool", "--older-than", "30m", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert not old.exists() and fresh.exists()

    for i in range(3):
        f = cache / f"x{i}.bin"
        f.write_bytes(b"x" * 8192)
        os.utime(f, (1000 + i, 1000 + i))
    proc = run_cli("clean", "faketool", "--max-size", "20KiB", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert fresh.exists()  # most recently used
    assert not (cache / "x0.bin").exists() and not (cache / "x1.bin").exists()


def test_age_is_the_last_use_by_the_mounts_clock_and_ignores_ctime() -> None:
    """Copying or moving a cache renews every ctime: that must not make it look used."""
    def info(a: float, m: float, c: float, link: bool = False) -> FileInfo:
        return FileInfo("f", 1, a, m, c, 1, 1, 1, link)

    atime = Clock("atime", "relatime")
    mtime = Clock("mtime", "noatime")
    assert atime.last_used(info(1, 1, 20)) < 10  # ctime new (copied, renamed, chmod-ed): old
    assert atime.last_used(info(20, 1, 1)) >= 10  # read recently
    assert atime.last_used(info(1, 20, 1)) >= 10  # written recently
    assert mtime.last_used(info(20, 1, 1)) < 10  # noatime: the access time means nothing
    assert atime.last_used(info(20, 1, 1, link=True)) < 10  # a link's atime is readlink's


def test_plan_with_injected_clock_selects_by_age(profiles: Path, isolated_home: Path) -> None:
    file = write_profile(profiles)
    profile = load_profile_file(file)
    cache = isolated_home / ".cache" / "faketool"
    fill(cache, n=2)
    host = Host(os="linux", env=dict(os.environ), home=str(isolated_home))
    future = time.time() + 40 * 86400
    plan = plan_clean(
        [profile],
        host,
        Policy(explicit=True, older_than=30 * 86400, now=future),
        in_use=no_uses,
    )
    assert plan.targets[0].files == 2
    plan = plan_clean(
        [profile], host, Policy(explicit=True, older_than=30 * 86400), in_use=no_uses
    )
    assert plan.targets[0].files == 0


def test_a_process_named_like_the_tool_does_not_block_but_one_using_the_cache_does(
    profiles: Path, isolated_home: Path
) -> None:
    import psutil

    write_profile(profiles, process=psutil.Process().name())  # "running" by name only
    cache = isolated_home / ".cache" / "faketool"
    held = fill(cache)[0]
    profile = load_profile_file(profiles / "faketool.yaml")
    host = Host(os="linux", env=dict(os.environ), home=str(isolated_home))
    assert plan_clean([profile], host, Policy(explicit=True), measure=False).targets
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print('ready', flush=True);"
         " time.sleep(60)", str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        plan = plan_clean([profile], host, Policy(explicit=True), measure=False)
        assert not plan.targets
        assert plan.refused and plan.refused[0].in_use
        assert f"pid {holder.pid}" in plan.refused[0].reason and "--force" in plan.refused[0].reason
        forced = plan_clean([profile], host, Policy(explicit=True, force=True), measure=False)
        assert forced.targets and "--force" in forced.targets[0].reasons[-1]
        proc = run_cli("clean", "faketool", "--yes")
        assert proc.returncode == 2 and "in use" in proc.stderr
        assert held.exists()
    finally:
        holder.kill()
        holder.wait()


def test_nothing_asked_is_bad_input(profiles: Path, isolated_home: Path) -> None:
    write_profile(profiles)
    fill(isolated_home / ".cache" / "faketool")
    proc = run_cli("clean", "--yes")
    assert proc.returncode == 2
    assert "nothing to clean" in proc.stderr
    assert run_cli("clean", "faketool", "--older-than", "soon").returncode == 2
    assert run_cli("clean", "faketool", "--max-size", "lots").returncode == 2
    assert run_cli("clean", "nosuchtool", "--yes").returncode == 2


def test_nested_location_of_another_profile_is_left_to_its_own_rules(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles, "outer", path="~/.cache/outer", data="~/.cache/outer/precious")
    outer = isolated_home / ".cache" / "outer"
    fill(outer)
    fill(outer / "precious")
    proc = run_cli("clean", "outer", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in outer.iterdir()) == ["precious"]
    assert len(list((outer / "precious").rglob("*.bin"))) == 3


def test_second_cleaner_waits_then_exits_with_a_clear_message(
    profiles: Path, isolated_home: Path
) -> None:
    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    fill(cache)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom cachedoctor.locking import cache_lock\n"
            "with cache_lock('faketool', 'cache'):\n    print('held', flush=True)\n    time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        proc = run_cli("clean", "faketool", "--yes")
        assert time.monotonic() - started >= 1.5  # it waited
        assert proc.returncode == 1
        assert "another cachedoctor process" in proc.stderr and "faketool" in proc.stderr
        assert len(list(cache.rglob("*.bin"))) == 3
    finally:
        holder.kill()
        holder.wait()
    assert run_cli("clean", "faketool", "--yes").returncode == 0


@pytest.mark.native_only("Windows trashes to the Recycle Bin (tests/test_platform_windows.py)", kinds=("windows",))
def test_trash_sends_to_the_xdg_trash_in_home(profiles: Path, isolated_home: Path) -> None:
    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    fill(cache, n=2)
    proc = run_cli("clean", "faketool", "--trash", "--yes")
    assert proc.returncode == 0, proc.stderr
    trashed = list((isolated_home / ".local" / "share" / "Trash" / "files").iterdir())
    assert sorted(p.name for p in trashed) == ["file0.bin", "file1.bin"]
    info = list((isolated_home / ".local" / "share" / "Trash" / "info").iterdir())
    assert len(info) == 2
    assert cache.is_dir() and list(cache.iterdir()) == []


@pytest.mark.native_only("the freedesktop trash rules; Windows has the Recycle Bin", kinds=("windows",))
def test_trash_refusal_is_explained_and_the_files_stay(
    profiles: Path, isolated_home: Path, tmp_path: Path
) -> None:
    if not IS_LINUX:
        pytest.skip("the freedesktop.org trash layout")
    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    fill(cache, n=2)
    share = isolated_home / ".local" / "share"
    share.mkdir(parents=True)
    (share / "Trash").symlink_to(tmp_path)
    proc = run_cli("clean", "faketool", "--trash", "--yes")
    assert "Traceback" not in proc.stderr
    assert "no trash (the trash folder" in proc.stderr and "symbolic link" in proc.stderr
    assert len(list(cache.rglob("*.bin"))) == 2


def test_scheduled_run_enforces_quotas_and_logs_a_summary(
    profiles: Path, isolated_home: Path
) -> None:
    from cachedoctor.clean import last_run, log_path
    from cachedoctor.quota import set_quota

    write_profile(profiles)
    cache = isolated_home / ".cache" / "faketool"
    fill(cache, n=5, size=4096)
    set_quota("faketool", "cache", 1)
    proc = run_cli("clean", "--scheduled")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""
    assert list(cache.rglob("*.bin")) == []
    text = log_path().read_text()
    assert "faketool/cache" in text and "RESULT " in text
    last = last_run()
    assert last is not None and last["status"] == "ok" and last["files"] == 5


def test_scheduled_run_skips_a_cache_another_cachedoctor_holds_and_cleans_the_rest(
    profiles: Path, isolated_home: Path
) -> None:
    """A long move of one cache holds its lock: the nightly job skips that one (logged, not a
    failure) and still enforces every other quota."""
    import subprocess
    import sys

    from cachedoctor.clean import last_run, log_path
    from cachedoctor.quota import set_quota

    write_profile(profiles)
    write_profile(profiles, "othertool", path="~/.cache/othertool",
                  data="~/.local/share/othertool")
    held = isolated_home / ".cache" / "faketool"
    free = isolated_home / ".cache" / "othertool"
    fill(held, n=4, size=4096)
    fill(free, n=4, size=4096)
    set_quota("faketool", "cache", 1)
    set_quota("othertool", "cache", 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", "from cachedoctor.locking import cache_lock\nimport sys, time\n"
         "with cache_lock('faketool', 'cache'):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = run_cli("clean", "--scheduled")
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 0, proc.stderr
    assert len(list(held.rglob("*.bin"))) == 4 and list(free.rglob("*.bin")) == []
    text = log_path().read_text()
    assert "busy faketool/cache" in text and "another cachedoctor process" in text
    last = last_run()
    assert last is not None and last["status"] == "ok" and last["skipped_busy"] == 1


def test_scheduled_run_with_nothing_configured_is_ok(profiles: Path, isolated_home: Path) -> None:
    from cachedoctor.clean import last_run

    write_profile(profiles)
    fill(isolated_home / ".cache" / "faketool")
    proc = run_cli("clean", "--scheduled")
    assert proc.returncode == 0, proc.stderr
    assert len(list((isolated_home / ".cache" / "faketool").rglob("*.bin"))) == 3
    last = last_run()
    assert last is not None and last["status"] == "ok"


def test_history_records_a_clean(profiles: Path, isolated_home: Path) -> None:
    from cachedoctor import history

    write_profile(profiles)
    fill(isolated_home / ".cache" / "faketool")
    assert run_cli("clean", "faketool", "--yes").returncode == 0
    (change,) = history.changes(kind="clean")
    assert change.tool == "faketool" and change.after["files"] == 3
    assert change.after["undoable"] is False


def test_tool_command_may_clean_a_location_not_safe_for_file_rules(
    profiles: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda's pkgs: deleting files would break environments, `conda clean` knows what is unused."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "calls.txt"
    tool = bin_dir / "fakeconda"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    tool.chmod(0o755)
    profiles.mkdir(parents=True, exist_ok=True)
    (profiles / "fakeconda.yaml").write_text(
        "id: fakeconda\nname: Fakeconda\ndescription: d\nlocations:\n"
        "  - id: pkgs\n    kind: packages\n    paths: {linux: ~/fakeconda/pkgs, macos: ~/fakeconda/pkgs}\n"
        "    safe_to_delete: false\n    clean: {command: [fakeconda, clean, --all, --yes]}\n"
    )
    pkgs = isolated_home / "fakeconda" / "pkgs"
    files = fill(pkgs)
    # without the tool on PATH nothing may touch the location
    refused = run_cli("clean", "fakeconda", "--yes", "--json")
    assert refused.returncode == 0, refused.stderr
    assert all(f.exists() for f in files) and not record.exists()
    # with it, the tool's own command runs (shown first), and cachedoctor deletes nothing itself
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    proc = run_cli("clean", "fakeconda", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert record.read_text() == "clean --all --yes\n"
    assert f"{tool} clean --all --yes" in proc.stderr
    assert all(f.exists() for f in files)
    # an age or size policy is file rules, which this location never gets
    aged = run_cli("clean", "fakeconda", "--older-than", "1s", "--yes", "--json")
    assert aged.returncode == 0 and record.read_text() == "clean --all --yes\n"
    assert all(f.exists() for f in files)
