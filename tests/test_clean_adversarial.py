"""Adversarial review of `cachedoctor clean`: hostile profiles, hostile cache contents, races.

Every test aims the cleaner at data outside a cache (or plants something inside one) and checks,
on the real filesystem, that the outside data survives. Profiles are real YAML files loaded by
the real loader; the deleter runs for real (forked workers included).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cachedoctor.clean import CleanPlan, Policy, execute_plan, plan_clean
from cachedoctor.host import Host
from cachedoctor.profiles.loader import load_profile_file
from cachedoctor.safedelete import clean_tree
from tests.conftest import (
    IS_ROOT,
    needs_posix_paths,
    needs_root,
    no_uses,
    trash_files_dir,
)

pytestmark = needs_posix_paths


PROFILE = """\
id: {id}
name: {id}
description: a hostile test profile
locations:
  - id: cache
    kind: cache
    paths:
      linux: '{path}'
      macos: '{path}'
    safe_to_delete: true
{clean}
"""


def profile_file(folder: Path, path: str, *, tool: str = "hostile", clean: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{tool}.yaml"
    file.write_text(PROFILE.format(id=tool, path=path, clean=clean))
    return file


def host_for(home: Path) -> Host:
    return Host(os="linux", env=dict(os.environ), home=str(home))


def plan_for(
    tmp_path: Path,
    home: Path,
    path: str,
    *,
    clean: str = "",
    policy: Policy | None = None,
    which: Any = None,
) -> CleanPlan:
    profile = load_profile_file(profile_file(tmp_path / "profiles", path, clean=clean))
    kwargs: dict[str, Any] = {}
    if which is not None:
        kwargs["which"] = which
    return plan_clean(
        [profile],
        host_for(home),
        policy or Policy(explicit=True),
        in_use=no_uses,
        **kwargs,
    )


def precious(folder: Path, name: str = "precious.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / name
    f.write_text("keep me")
    return f


def clean_all(plan: CleanPlan) -> None:
    execute_plan(plan, record_history=False)


# ------------------------------------------------------------------ where the cleaner is aimed


@pytest.mark.parametrize(
    "template",
    [
        "~/..",  # the folder that holds the home
        "~/.cache/../..",  # the same, spelled with '..' through a cache folder
        "~/.cache/../.",  # the home itself, spelled with '..'
    ],
)
def test_dotdot_templates_that_reach_the_home_or_above_are_refused(
    tmp_path: Path, isolated_home: Path, template: str
) -> None:
    mine = precious(isolated_home / "Projects")
    plan = plan_for(tmp_path, isolated_home, template)
    clean_all(plan)
    assert plan.targets == []
    assert plan.refused, plan.left_alone
    assert mine.read_text() == "keep me"


def test_a_location_that_contains_the_home_is_refused_even_through_a_link(
    tmp_path: Path, isolated_home: Path
) -> None:
    mine = precious(isolated_home / "Projects")
    link = isolated_home / ".cache" / "hostile"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(isolated_home.parent)  # a "relocation link" to the folder above the home
    plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile")
    clean_all(plan)
    assert plan.targets == [] and plan.refused
    assert mine.read_text() == "keep me"


@pytest.mark.parametrize("target", ["/", "~", "~/.cache", "~/Documents"])
def test_relocation_links_to_protected_roots_are_refused(
    tmp_path: Path, isolated_home: Path, target: str
) -> None:
    resolved = Path(target.replace("~", str(isolated_home)))
    resolved.mkdir(parents=True, exist_ok=True)
    mine = precious(isolated_home / "Documents")
    link = isolated_home / ".cache" / "hostile"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(resolved)
    plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile")
    clean_all(plan)
    assert plan.targets == [] and plan.refused
    assert mine.read_text() == "keep me"


@pytest.mark.parametrize("path", ["/etc", "/etc/ssl", "/usr/lib", "/boot", "/proc/self", "/dev"])
def test_system_trees_are_refused(tmp_path: Path, isolated_home: Path, path: str) -> None:
    """Not only the system roots: nothing below /etc, /usr, /boot, /dev, /proc... is a cache."""
    if not os.path.isdir(path):
        pytest.skip(f"{path} does not exist here")
    # dry run only: planning is where the refusal must happen
    plan = plan_for(tmp_path, isolated_home, path)
    assert plan.targets == [] and plan.refused, plan.targets


def test_a_glob_that_matches_the_home_is_refused_for_the_home(
    tmp_path: Path, isolated_home: Path
) -> None:
    mine = precious(isolated_home / "Projects")
    sibling = isolated_home.parent / f"{isolated_home.name}-cache"
    junk = precious(sibling, "junk.bin")
    plan = plan_for(tmp_path, isolated_home, f"{isolated_home}*")
    clean_all(plan)
    assert [t.root for t in plan.targets] == [str(sibling)]  # the real cache is still cleaned
    assert [r.path for r in plan.refused] == [str(isolated_home)]
    assert mine.read_text() == "keep me"
    assert not junk.exists()


def test_the_cachedoctor_state_folder_is_not_a_cache(tmp_path: Path, isolated_home: Path) -> None:
    """Cleaning must not be able to erase cachedoctor's own history and locks."""
    from cachedoctor.state import state_dir

    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    record = precious(state, "history.jsonl")
    plan = plan_for(tmp_path, isolated_home, str(state.parent))
    clean_all(plan)
    assert plan.targets == [] and plan.refused
    assert record.read_text() == "keep me"


# ------------------------------------------------------------- what a cache holds (its content)


def make_cache(home: Path) -> Path:
    cache = home / ".cache" / "hostile"
    (cache / "sub").mkdir(parents=True)
    (cache / "sub" / "junk.bin").write_bytes(b"j" * 5000)
    return cache


@needs_root
def test_a_bind_mount_of_a_same_filesystem_folder_is_not_entered(
    tmp_path: Path, isolated_home: Path
) -> None:
    """A bind mount keeps st_dev: only the mount table tells it is another folder's view."""
    outside = tmp_path / "outside"
    mine = precious(outside)
    cache = make_cache(isolated_home)
    mount = cache / "sub" / "bound"
    mount.mkdir()
    subprocess.run(["mount", "--bind", str(outside), str(mount)], check=True)
    try:
        assert os.stat(mount).st_dev == os.stat(cache).st_dev  # the attack's premise
        plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile")
        result = execute_plan(plan, record_history=False)
        assert mine.read_text() == "keep me"
        skipped = [s for r in result.results for s in r.skipped]
        assert any(s.reason == "other filesystem" for s in skipped), skipped
        assert not (cache / "sub" / "junk.bin").exists()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    assert mine.read_text() == "keep me"


@needs_root
def test_a_bind_mounted_file_is_not_unlinked_through(tmp_path: Path, isolated_home: Path) -> None:
    outside = precious(tmp_path / "outside")
    cache = make_cache(isolated_home)
    over = cache / "sub" / "over.txt"
    over.write_text("placeholder")
    subprocess.run(["mount", "--bind", str(outside), str(over)], check=True)
    try:
        clean_all(plan_for(tmp_path, isolated_home, "~/.cache/hostile"))
    finally:
        subprocess.run(["umount", "-l", str(over)], check=False)
    assert outside.read_text() == "keep me"


def test_special_files_and_links_lose_only_their_names(tmp_path: Path, isolated_home: Path) -> None:
    outside_dir = tmp_path / "outside"
    mine = precious(outside_dir)
    cache = make_cache(isolated_home)
    (cache / "to-file").symlink_to(mine)
    (cache / "to-dir").symlink_to(outside_dir)
    (cache / "to-home").symlink_to(isolated_home)
    (cache / "to-root").symlink_to("/")
    (cache / "dangling").symlink_to(tmp_path / "nothing-here")
    os.link(mine, cache / "hardlink")
    os.mkfifo(cache / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(cache / "sock"))
    if IS_ROOT:
        os.mknod(cache / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null
    try:
        clean_all(plan_for(tmp_path, isolated_home, "~/.cache/hostile"))
    finally:
        sock.close()
    assert list(cache.iterdir()) == []
    assert mine.read_text() == "keep me" and os.stat(mine).st_nlink == 1
    assert sorted(p.name for p in outside_dir.iterdir()) == ["precious.txt"]
    assert (isolated_home / ".cache").is_dir() and os.path.exists("/dev/null")


def test_weird_names_are_deleted_and_reported_without_a_crash(
    tmp_path: Path, isolated_home: Path
) -> None:
    cache = make_cache(isolated_home)
    names = [b"new\nline", b"bad-\xff\xfe-utf8", b"-rf", b"--no-preserve-root", b" space ", b"*"]
    for name in names:
        with open(os.path.join(os.fsencode(cache), name), "wb") as fh:
            fh.write(b"x")
    outside = precious(tmp_path / "outside")
    # one weird name held with flock: it is skipped and must be reportable as JSON
    import fcntl

    held = os.open(os.path.join(os.fsencode(cache), b"held-\xff"), os.O_CREAT | os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        result = execute_plan(
            plan_for(tmp_path, isolated_home, "~/.cache/hostile"), record_history=False
        )
        text = json.dumps(result.to_json())
    finally:
        os.close(held)
    assert os.listdir(os.fsencode(cache)) == [b"held-\xff"]
    assert "held-" in text and outside.read_text() == "keep me"


def test_keep_and_only_globs_cannot_reach_outside(tmp_path: Path, isolated_home: Path) -> None:
    cache = make_cache(isolated_home)
    sibling = precious(isolated_home / ".cache" / "sibling")
    plan = plan_for(
        tmp_path,
        isolated_home,
        "~/.cache/hostile",
        clean="    clean:\n      only: ['../*', '/*/*/..']",
    )
    clean_all(plan)
    assert (cache / "sub" / "junk.bin").exists()  # nothing matched: nothing deleted
    plan = plan_for(
        tmp_path, isolated_home, "~/.cache/hostile", clean="    clean:\n      only: ['**']"
    )
    clean_all(plan)
    assert not (cache / "sub").exists() and cache.is_dir()
    assert sibling.read_text() == "keep me"


def test_future_timestamps_are_not_old(tmp_path: Path, isolated_home: Path) -> None:
    cache = make_cache(isolated_home)
    future = time.time() + 10 * 365 * 86400
    os.utime(cache / "sub" / "junk.bin", (future, future))
    plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile", policy=Policy(older_than=86400.0))
    clean_all(plan)
    assert (cache / "sub" / "junk.bin").exists()


def test_a_deep_tree_with_few_descriptors_fails_partially_without_losing_outside_data(
    tmp_path: Path, isolated_home: Path
) -> None:
    """200 levels with `ulimit -n 64`: the walk runs out of descriptors; it must report, not
    crash, and never act outside."""
    cache = make_cache(isolated_home)
    deep = cache
    for _ in range(200):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "bottom.bin").write_bytes(b"b")
    (deep / "escape").symlink_to(tmp_path / "outside")
    outside = precious(tmp_path / "outside")
    code = (
        "import resource, json, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "from cachedoctor.safedelete import clean_tree\n"
        f"r = clean_tree({str(cache)!r})\n"
        "print(json.dumps({'files': r.files, 'errors': len(r.errors)}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["errors"] >= 1  # too deep for 64 descriptors: reported, not a traceback
    assert outside.read_text() == "keep me"
    assert not (cache / "sub" / "junk.bin").exists()
    # with the normal limit the same tree is emptied completely
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft >= 256
    result = clean_tree(str(cache))
    assert result.errors == [] and list(cache.iterdir()) == []
    assert outside.read_text() == "keep me"


# ------------------------------------------------------------------------ the tool's own command


@pytest.mark.parametrize("program", ["./evil", "../evil", "bin/evil"])
def test_a_relative_command_is_not_run_from_the_current_folder(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, program: str
) -> None:
    work = tmp_path / "cwd" / "inner"
    work.mkdir(parents=True)
    marker = tmp_path / "ran"
    for place in (work / "evil", work.parent / "evil", work / "bin" / "evil"):
        place.parent.mkdir(parents=True, exist_ok=True)
        place.write_text(f"#!/bin/sh\ntouch {marker}\n")
        place.chmod(0o755)
    monkeypatch.chdir(work)
    make_cache(isolated_home)
    plan = plan_for(
        tmp_path,
        isolated_home,
        "~/.cache/hostile",
        clean=f"    clean:\n      command: ['{program}']",
    )
    clean_all(plan)
    assert not marker.exists()
    assert all(t.mode != "command" for t in plan.targets)


def test_a_command_that_lives_in_the_cache_itself_is_not_run(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever writes into a cache must not get its program run by cachedoctor (as root)."""
    cache = make_cache(isolated_home)
    marker = tmp_path / "ran"
    planted = cache / "bin" / "purge-tool"
    planted.parent.mkdir()
    planted.write_text(f"#!/bin/sh\ntouch {marker}\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{planted.parent}{os.pathsep}{os.environ['PATH']}")
    for command in ("purge-tool", str(planted)):
        plan = plan_for(
            tmp_path,
            isolated_home,
            "~/.cache/hostile",
            clean=f"    clean:\n      command: ['{command}']",
        )
        assert all(t.mode != "command" for t in plan.targets), command
        clean_all(plan)
        assert not marker.exists()


def test_an_empty_path_entry_does_not_make_the_current_folder_searched(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    marker = tmp_path / "ran"
    (work / "purge-tool").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (work / "purge-tool").chmod(0o755)
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{os.environ['PATH']}{os.pathsep}{os.pathsep}.")
    make_cache(isolated_home)
    plan = plan_for(
        tmp_path, isolated_home, "~/.cache/hostile", clean="    clean:\n      command: [purge-tool]"
    )
    clean_all(plan)
    assert not marker.exists()


# ------------------------------------------------------------------------------------ races


def test_a_folder_replaced_by_a_link_between_plan_and_clean_is_not_followed(
    tmp_path: Path, isolated_home: Path
) -> None:
    cache = make_cache(isolated_home)
    outside = tmp_path / "outside"
    mine = precious(outside, "junk.bin")  # same name as the planned file
    plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile", policy=Policy(max_size=0))
    assert plan.targets[0].files == 1
    (cache / "sub" / "junk.bin").unlink()
    (cache / "sub").rmdir()
    (cache / "sub").symlink_to(outside)
    clean_all(plan)
    assert mine.read_text() == "keep me"


def test_a_clean_planned_before_a_move_does_not_follow_the_new_link(
    tmp_path: Path, isolated_home: Path
) -> None:
    """`cachedoctor move` ran between planning and executing: the location is now a link to
    the moved folder. The plan's root is gone; the moved files must survive."""
    cache = make_cache(isolated_home)
    plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile")
    moved = tmp_path / "drive" / "hostile"
    moved.parent.mkdir()
    os.rename(cache, moved)
    cache.symlink_to(moved)
    result = execute_plan(plan, record_history=False)
    assert (moved / "sub" / "junk.bin").exists()
    assert result.failed and "link" in result.results[0].errors[0]


def test_a_clean_waits_for_the_lock_a_move_holds_and_gives_up(
    tmp_path: Path, isolated_home: Path
) -> None:
    from cachedoctor.locking import cache_lock

    cache = make_cache(isolated_home)
    plan = plan_for(tmp_path, isolated_home, "~/.cache/hostile")
    with cache_lock("hostile", "cache"):
        result = execute_plan(plan, lock_wait=0.2, record_history=False)
    [busy] = result.results
    assert busy.status == "busy" and "another cachedoctor" in busy.warnings[0]
    assert result.failed and not result.failed_apart_from_busy
    assert (cache / "sub" / "junk.bin").exists()


def test_two_concurrent_cleans_of_one_cache(tmp_path: Path, isolated_home: Path) -> None:
    cache = make_cache(isolated_home)
    for i in range(40):
        d = cache / f"d{i}"
        d.mkdir()
        for j in range(50):
            (d / f"f{j}").write_bytes(b"x" * 100)
    outside = precious(tmp_path / "outside")
    (cache / "d0" / "escape").symlink_to(outside.parent)
    folder = tmp_path / "profiles"
    profile_file(folder, "~/.cache/hostile")
    args = [sys.executable, "-m", "cachedoctor", "--profiles-dir", str(folder)]
    args += ["clean", "hostile", "--yes", "--json"]
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode in (0, 1), err  # done, or "another cachedoctor holds the cache"
        assert "Traceback" not in err
    assert list(cache.iterdir()) == []
    assert outside.read_text() == "keep me"


# -------------------------------------------------------------------------------- --trash


def test_trash_moves_links_not_their_targets(tmp_path: Path, isolated_home: Path) -> None:
    cache = make_cache(isolated_home)
    outside_dir = tmp_path / "outside"
    mine = precious(outside_dir)
    tag = tmp_path.name
    (cache / f"to-file-{tag}").symlink_to(mine)
    (cache / f"to-dir-{tag}").symlink_to(outside_dir)
    (cache / "dangling").symlink_to(tmp_path / "nothing")
    os.link(mine, cache / "hardlink")
    plan = plan_for(
        tmp_path, isolated_home, "~/.cache/hostile", policy=Policy(explicit=True, trash=True)
    )
    execute_plan(plan, record_history=False)
    assert mine.read_text() == "keep me"
    assert sorted(p.name for p in outside_dir.iterdir()) == ["precious.txt"]
    trash = trash_files_dir()
    assert (trash / f"to-dir-{tag}").is_symlink() and (trash / f"to-file-{tag}").is_symlink()
    assert os.readlink(trash / f"to-dir-{tag}") == str(outside_dir)


# ------------------------------------------------------------------------ through the real CLI


def test_cli_refuses_a_user_profile_aimed_above_the_home(
    tmp_path: Path, isolated_home: Path
) -> None:
    folder = tmp_path / "profiles"
    profile_file(folder, "~/.cache/../..")
    mine = precious(isolated_home / "Projects")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cachedoctor",
            "--profiles-dir",
            str(folder),
            "clean",
            "hostile",
            "--yes",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "refus" in (proc.stdout + proc.stderr) and "Traceback" not in proc.stderr
    assert mine.read_text() == "keep me"


def test_trash_from_parallel_folders_keeps_every_same_named_file(
    tmp_path: Path, isolated_home: Path
) -> None:
    """send2trash picks a free name in the trash, then renames: two threads trashing files of
    the same name could pick the same one and the second rename would overwrite the first."""
    cache = isolated_home / ".cache" / "hostile"
    for top in ("a", "b", "c"):
        for i in range(150):
            f = cache / top / f"f{i}" / f"blob-{tmp_path.name}.bin"
            f.parent.mkdir(parents=True)
            f.write_text(f"{top}{i}")
    result = clean_tree(str(cache), trash=True)
    assert result.errors == [] and result.files == 450
    mine = [p for p in trash_files_dir().iterdir() if p.name.startswith(f"blob-{tmp_path.name}")]
    contents = sorted(p.read_text() for p in mine)
    assert len(contents) == 450
    assert contents == sorted(f"{top}{i}" for top in "abc" for i in range(150))


# ------------------------------------------------------------------ other homes, other systems


@needs_root
def test_a_glob_over_all_homes_is_refused_for_every_home(
    tmp_path: Path, isolated_home: Path
) -> None:
    """Run as root, `/home/*` would reach other people's homes: each one is refused."""
    if not os.path.isdir("/home"):
        pytest.skip("no /home here")
    other = Path("/home") / f"cachedoctor-adversarial-{os.getpid()}"
    other.mkdir()
    try:
        mine = precious(other)
        plan = plan_for(tmp_path, isolated_home, "/home/*")  # planning only: no execution
        assert not any(t.root == str(other) for t in plan.targets)
        assert str(other) in [r.path for r in plan.refused]
        assert mine.read_text() == "keep me"
    finally:
        (other / "precious.txt").unlink()
        other.rmdir()


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("C:\\Windows\\SoftwareDistribution\\Download", True),
        ("c:\\windows\\temp", True),
        ("C:\\Users\\bob\\AppData\\Local\\..\\..\\..", True),  # holds bob's home
        ("C:\\Users\\bob\\AppData\\Local\\pip\\cache", False),
        ("D:\\caches\\pip", False),
    ],
)
def test_windows_paths_are_judged_with_windows_rules(path: str, refused: bool) -> None:
    from cachedoctor.errors import RefusedError
    from cachedoctor.safety import check_not_protected

    host = Host(os="windows", env={"SystemRoot": "C:\\Windows"}, home="C:\\Users\\bob")
    if refused:
        with pytest.raises(RefusedError):
            check_not_protected(path, host, system_subfolders=True)
    else:
        check_not_protected(path, host, system_subfolders=True)
