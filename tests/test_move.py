"""`cachedoctor move` / `restore` end to end: real trees, real filesystems, the real CLI."""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IS_LINUX, IS_ROOT, needs_root, result_of
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = [pytest.mark.skipif(not IS_LINUX, reason="exercised on Linux filesystems"),
              pytest.mark.os_doubles("windows", "macos")]

def cli(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    full_env = os.environ.copy()
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args], capture_output=True, text=True,
                          env=full_env, timeout=300, **kw)


def write_profile(directory: Path, tool: str = "foo", *, paths: str = "~/.cache/foo",
                  relocate: str = "[{method: link}]", processes: str = "[]",
                  extra_locations: str = "") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{tool}.yaml").write_text(textwrap.dedent(f"""\
        id: {tool}
        name: {tool.title()} Tool
        description: test profile
        processes: {{linux: {processes}}}
        locations:
          - id: cache
            paths: {{linux: "{paths}"}}
            safe_to_delete: true
            relocate: {relocate}
        """) + textwrap.indent(textwrap.dedent(extra_locations), "  "))


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "profiles"
    write_profile(directory)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    return directory


@pytest.fixture
def cache(isolated_home: Path) -> Path:
    path = isolated_home / ".cache" / "foo"
    build_tree(path)
    return path


@pytest.fixture
def shm() -> Iterator[Path]:
    if not os.path.isdir("/dev/shm"):
        pytest.skip("needs /dev/shm")
    path = Path("/dev/shm") / f"cachedoctor-test-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def leftovers(*roots: Path) -> list[str]:
    found = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                if ".cachedoctor-" in name:
                    found.append(os.path.join(dirpath, name))
    return found


def pending() -> list[Any]:
    from cachedoctor.relocate.journal import pending_operations

    return pending_operations()


@pytest.mark.parametrize("where", ["same-fs", "dev-shm"])
def test_move_and_restore_round_trip(where: str, profiles: Path, cache: Path, tmp_path: Path,
                                     request: pytest.FixtureRequest) -> None:
    dest_root = tmp_path / "dest" if where == "same-fs" else request.getfixturevalue("shm") / "d"
    before = snapshot(cache)
    inode = os.stat(cache).st_ino
    result = cli("move", "foo", str(dest_root), "--yes")
    assert result.returncode == 0, result.stderr
    # a RAM disk as the destination works, but the user is told what it means
    assert ("emptied at every reboot" in result.stderr) == (where == "dev-shm")
    target = dest_root / "foo"
    assert os.path.islink(cache) and os.path.samefile(cache, target)
    assert snapshot(cache) == before  # read through the link
    assert snapshot(target) == before
    if where == "same-fs":
        assert os.stat(target).st_ino == inode  # one atomic rename, not a copy
    assert leftovers(cache.parent, dest_root) == [] and pending() == []

    again = cli("move", "foo", str(dest_root), "--yes")
    assert again.returncode == 0 and "already lives in" in again.stderr

    back = cli("restore", "foo", "--yes", "--json")
    assert back.returncode == 0, back.stderr
    doc = result_of(back)
    assert doc["operations"][0]["status"] == "restored"
    assert not os.path.islink(cache) and snapshot(cache) == before
    assert not target.exists() and leftovers(cache.parent, dest_root) == []

    from cachedoctor import history

    kinds = [(c.kind, c.undone_by is not None) for c in history.changes(tool="foo")]
    assert kinds == [("move", True), ("restore", False)]
    move_change = history.changes(kind="move")[0]
    assert move_change.before["original_path"] == str(cache)
    assert move_change.after["new_path"] == str(target)


@needs_root
def test_move_to_a_mounted_tmpfs(profiles: Path, cache: Path, tmpfs: Path) -> None:
    before = snapshot(cache)
    result = cli("move", "foo", str(tmpfs), "--yes", "--verify", "hash")
    assert result.returncode == 0, result.stderr
    assert snapshot(tmpfs / "foo") == before and snapshot(cache) == before
    assert cli("restore", "foo", "--yes").returncode == 0
    assert snapshot(cache) == before and not (tmpfs / "foo").exists()


def test_dry_run_changes_nothing_and_reports_the_plan(profiles: Path, cache: Path, shm: Path) -> None:
    before = snapshot(cache)
    result = cli("move", "foo", str(shm), "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = result_of(result)["operations"][0]
    assert plan["status"] == "planned" and plan["method"] == "link"
    assert plan["dest"] == str(shm / "foo")
    assert plan["pairs"] == [{"source": str(cache), "dest": str(shm / "foo"), "same_filesystem": False}]
    assert plan["files"] > 10 and plan["bytes"] > 70_000
    assert any("symlink" in line for line in plan["changes"])
    assert snapshot(cache) == before and not (shm / "foo").exists() and pending() == []
    no_tty = cli("move", "foo", str(shm), stdin=subprocess.DEVNULL)
    assert no_tty.returncode == 2 and "--yes" in no_tty.stderr
    assert snapshot(cache) == before


def test_refusals(profiles: Path, cache: Path, isolated_home: Path, tmp_path: Path) -> None:
    before = snapshot(cache)
    inside = cli("move", "foo", str(cache / "sub"), "--yes")
    assert inside.returncode == 2 and "inside the cache" in inside.stderr
    outer = cli("move", "foo", str(isolated_home), "--yes")
    assert outer.returncode == 2 and "inside the destination" in outer.stderr
    windows = cli("move", "foo", "D:\\ai-cache", "--yes")
    assert windows.returncode == 2 and "Windows drive path" in windows.stderr
    link_kind = cli("move", "foo", str(tmp_path / "x"), "--link", "junction", "--yes")
    assert link_kind.returncode == 2 and "only on Windows" in link_kind.stderr
    method = cli("move", "foo", str(tmp_path / "x"), "--method", "env", "--yes")
    assert method.returncode == 2 and "offers: link" in method.stderr
    unknown = cli("move", "nope", str(tmp_path / "x"), "--yes")
    assert unknown.returncode == 2 and "unknown tool" in unknown.stderr
    occupied = tmp_path / "occ"
    (occupied / "foo").mkdir(parents=True)
    (occupied / "foo" / "mine").write_text("user data")
    busy = cli("move", "foo", str(occupied), "--yes")
    assert busy.returncode == 2 and "not empty" in busy.stderr
    assert (occupied / "foo" / "mine").read_text() == "user data"
    assert snapshot(cache) == before and pending() == []
    restore_nothing = cli("restore", "foo", "--yes")
    assert restore_nothing.returncode == 0 and "not relocated" in restore_nothing.stderr


def test_protected_source_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     isolated_home: Path) -> None:
    directory = tmp_path / "profiles"
    write_profile(directory, "homeish", paths="~/.cache")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    (isolated_home / ".cache").mkdir(exist_ok=True)
    result = cli("move", "homeish", str(tmp_path / "d"), "--yes")
    assert result.returncode == 2 and "refusing" in result.stderr
    assert (isolated_home / ".cache").is_dir() and not os.path.islink(isolated_home / ".cache")


def test_a_process_using_the_cache_blocks_the_move_unless_forced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path, shm: Path) -> None:
    """A process named like the tool does not block a move; one with a file open inside the
    cache does (its pid and the file are named), and --force goes ahead with a warning."""
    directory = tmp_path / "profiles"
    write_profile(directory, processes="[cdmovetestproc]")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    fake = tmp_path / "cdmovetestproc"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", fake)
    namesake = subprocess.Popen([str(fake), "60"])
    held = next(p for p in cache.rglob("*") if p.is_file() and not p.is_symlink())
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'rb'); print('ready', "
         "flush=True); time.sleep(60)", str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        refused = cli("move", "foo", str(shm), "--yes")
        assert refused.returncode == 2 and "in use" in refused.stderr
        assert f"pid {holder.pid}" in refused.stderr and "--force" in refused.stderr
        assert not os.path.islink(cache)
        forced = cli("move", "foo", str(shm), "--yes", "--force")
        assert forced.returncode == 0, forced.stderr
        assert "going ahead because of --force" in forced.stderr and os.path.islink(cache)
    finally:
        for proc in (namesake, holder):
            proc.kill()
            proc.wait()


@needs_root
def test_enospc_for_real_leaves_the_source(profiles: Path, cache: Path, tmpfs: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Another program fills the 8 MiB drive after the preflight passed: a real ENOSPC mid-copy."""
    from cachedoctor.cli.app import run
    from cachedoctor.relocate import faults

    (cache / "big.bin").write_bytes(os.urandom(3 << 20))
    before = snapshot(cache)
    real_point = faults.point

    def fill_the_drive(name: str) -> None:
        if name == "copy-file" and not (tmpfs / "filler").exists():
            with open(tmpfs / "filler", "wb") as fh, pytest.raises(OSError) as exc:
                while True:
                    fh.write(b"\0" * (1 << 20))
                    fh.flush()
            assert exc.value.errno == errno.ENOSPC
        real_point(name)

    monkeypatch.setattr(faults, "point", fill_the_drive)
    code = run(["move", "foo", str(tmpfs), "--yes"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "ran out of space" in err and "needs up to" in err
    assert "free" in err and "untouched" in err
    assert snapshot(cache) == before and not os.path.islink(cache)
    assert os.listdir(tmpfs) == ["filler"]  # the partial copy is gone
    assert leftovers(tmpfs, cache.parent) == [] and pending() == []


def test_not_enough_space_is_caught_in_preflight(profiles: Path, cache: Path, tmpfs: Path) -> None:
    (cache / "big.bin").write_bytes(os.urandom(9 * 1024 * 1024))
    result = cli("move", "foo", str(tmpfs), "--yes")
    assert result.returncode == 1 and "not enough free space" in result.stderr
    assert os.listdir(tmpfs) == [] and not os.path.islink(cache)


@pytest.mark.skipif(not IS_ROOT or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to drop the capability to read anything")
@pytest.mark.native_only("os.access checks only the read-only flag on Windows (Python docs): a "
                         "file its ACL keeps from us is found when the copy opens it, and the "
                         "move is rolled back", kinds=("windows",))
def test_unreadable_file_stops_before_anything_changes(profiles: Path, cache: Path, shm: Path) -> None:
    secret = cache / "secret.bin"
    secret.write_text("owner only")
    secret.chmod(0o000)
    before = snapshot(cache)
    # root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH obeys file modes like any user
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "cachedoctor"]
    result = subprocess.run([*drop, "move", "foo", str(shm), "--yes"], capture_output=True,
                            text=True, env=os.environ.copy(), timeout=300)
    assert result.returncode == 1, result.stderr
    assert "cannot read" in result.stderr and "secret.bin" in result.stderr
    assert "nothing was changed" in result.stderr
    assert snapshot(cache) == before and not os.path.islink(cache)
    assert os.listdir(shm) == [] and pending() == []


@needs_root
def test_failing_link_creation_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          shm: Path) -> None:
    """The link cannot be created (no free inode left where the cache lives): for real."""
    drive = tmp_path / "inodes"
    drive.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=64", "tmpfs", str(drive)], check=True)
    try:
        cache = drive / "foo"
        build_tree(cache)
        before = snapshot(cache)
        filler = drive / "filler"
        filler.mkdir()
        n = 0
        while True:  # use up every inode: renames still work, creating the link cannot
            try:
                (filler / str(n)).touch()
            except OSError:
                break
            n += 1
        directory = tmp_path / "profiles"
        write_profile(directory, paths=str(cache))
        monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
        result = cli("move", "foo", str(shm), "--yes")
        assert result.returncode == 1, result.stderr
        assert "could not point foo at the new place" in result.stderr and "rolled back" in result.stderr
        assert not os.path.islink(cache) and snapshot(cache) == before
        assert not (shm / "foo").exists() and leftovers(drive, shm) == [] and pending() == []
    finally:
        subprocess.run(["umount", "-l", str(drive)], check=False)


def test_ctrl_c_during_copy_rolls_back_at_once(profiles: Path, cache: Path, shm: Path) -> None:
    before = snapshot(cache)
    result = cli("move", "foo", str(shm), "--yes", env={"CACHEDOCTOR_FAULT_AT": "6:sigint"})
    assert result.returncode == 130, result.stderr
    assert snapshot(cache) == before and not os.path.islink(cache)
    assert not (shm / "foo").exists() and leftovers(shm, cache.parent) == [] and pending() == []


def test_interrupted_move_is_announced_and_finished_by_rerunning(profiles: Path, cache: Path,
                                                                  shm: Path) -> None:
    before = snapshot(cache)
    killed = cli("move", "foo", str(shm), "--yes", env={"CACHEDOCTOR_FAULT_AT": "swap-done"})
    assert killed.returncode == -9
    ops = pending()
    assert len(ops) == 1
    op = ops[0]
    assert (op.tool, op.location, op.phase) == ("foo", "cache", "copied")
    assert op.finish_command.startswith("cachedoctor") and f"move foo {shm}" in op.finish_command
    assert op.rollback_command.endswith("restore foo --location cache")
    assert not os.path.lexists(cache)  # set aside, not yet linked: the journal knows where
    blocked = cli("move", "foo", str(shm / "elsewhere"), "--yes")
    assert blocked.returncode == 2 and "interrupted move" in blocked.stderr
    # every other command warns and names the commands that finish or roll it back
    other = cli("profiles", "list", "--json")
    assert other.returncode == 0
    assert "was interrupted" in other.stderr and op.finish_command in other.stderr
    assert op.rollback_command in other.stderr
    finished = cli("move", "foo", str(shm), "--yes")
    assert finished.returncode == 0, finished.stderr
    assert snapshot(cache) == before and os.path.islink(cache) and pending() == []
    assert leftovers(cache.parent, shm) == []


def test_lock_prevents_a_second_process(profiles: Path, cache: Path, shm: Path) -> None:
    from cachedoctor.locking import cache_lock

    with cache_lock("foo", "cache"):
        result = cli("move", "foo", str(shm), "--yes")
    assert result.returncode == 1 and "another cachedoctor process" in result.stderr
    assert not os.path.islink(cache)


def test_hugging_face_layout_and_pip_cache_usable_through_the_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path, shm: Path) -> None:
    directory = tmp_path / "profiles"
    write_profile(directory, "hf", paths="~/.cache/huggingface/hub")
    write_profile(directory, "pipx", paths="~/.cache/pip")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    hub = isolated_home / ".cache" / "huggingface" / "hub"
    repo = hub / "models--org--model"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    weights = os.urandom(300_000)
    (repo / "blobs" / "e3b0c442").write_bytes(weights)
    (repo / "blobs" / "7d865e95").write_text('{"model_type": "bert"}')
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to("../../blobs/e3b0c442")
    (snap / "config.json").symlink_to("../../blobs/7d865e95")
    pip_cache = isolated_home / ".cache" / "pip"
    wheel_dir = pip_cache / "wheels" / "ab" / "cd" / "ef"
    wheel_dir.mkdir(parents=True)
    (wheel_dir / "demo_pkg-1.0-py3-none-any.whl").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (pip_cache / "http-v2" / "a" / "b").mkdir(parents=True)
    (pip_cache / "http-v2" / "a" / "b" / "0123456789abcdef").write_bytes(os.urandom(5000))

    assert cli("move", "hf", str(shm), "--yes").returncode == 0
    assert cli("move", "pipx", str(shm), "--yes").returncode == 0
    assert os.path.islink(hub) and os.path.islink(pip_cache)
    assert os.readlink(shm / "hf" / "models--org--model" / "snapshots" / "abc123" / "model.safetensors") \
        == "../../blobs/e3b0c442"
    assert (snap / "model.safetensors").read_bytes() == weights  # old path, through the link
    assert json.loads((snap / "config.json").read_text()) == {"model_type": "bert"}
    listed = subprocess.run([sys.executable, "-m", "pip", "cache", "list", "--cache-dir", str(pip_cache)],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "demo_pkg-1.0-py3-none-any.whl" in listed.stdout
    assert cli("restore", "hf", "--yes").returncode == 0
    assert (snap / "model.safetensors").read_bytes() == weights and not os.path.islink(hub)


def test_several_locations_go_below_dest_tool_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       isolated_home: Path, shm: Path) -> None:
    directory = tmp_path / "profiles"
    write_profile(directory, paths="~/.cache/foo", extra_locations=textwrap.dedent("""\
          - id: models
            paths: {linux: "~/.local/share/foo/models"}
            safe_to_delete: false
            relocate: [{method: link}]
        """))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    (isolated_home / ".cache" / "foo").mkdir(parents=True)
    (isolated_home / ".cache" / "foo" / "c").write_text("c")
    (isolated_home / ".local" / "share" / "foo" / "models").mkdir(parents=True)
    (isolated_home / ".local" / "share" / "foo" / "models" / "m").write_text("m")
    result = cli("move", "foo", str(shm), "--yes", "--json")
    assert result.returncode == 0, result.stderr
    statuses = {op["location"]: op["status"] for op in result_of(result)["operations"]}
    assert statuses == {"cache": "moved", "models": "moved"}
    assert (shm / "foo" / "cache" / "c").read_text() == "c"
    assert (shm / "foo" / "models" / "m").read_text() == "m"
    assert cli("restore", "foo", "--yes").returncode == 0
    assert not os.path.islink(isolated_home / ".cache" / "foo")
    assert not os.path.islink(isolated_home / ".local" / "share" / "foo" / "models")


def test_policy_method_writes_and_removes_the_policy_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path, shm: Path) -> None:
    root = tmp_path / "policyroot"
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    directory = tmp_path / "profiles"
    write_profile(directory, "chrome", paths="~/.config/google-chrome/*/Cache",
                  relocate="[{method: policy, browser: chrome}, {method: link}]")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    for profile_dir in ("Default", "Profile 1"):
        cache = isolated_home / ".config" / "google-chrome" / profile_dir / "Cache" / "Cache_Data"
        cache.mkdir(parents=True)
        (cache / "data_0").write_bytes(os.urandom(4000))
    before = {p: snapshot(isolated_home / ".config" / "google-chrome" / p / "Cache")
              for p in ("Default", "Profile 1")}
    result = cli("move", "chrome", str(shm), "--yes")
    assert result.returncode == 0, result.stderr
    policy_file = root / "etc" / "opt" / "chrome" / "policies" / "managed" / "cachedoctor.json"
    assert json.loads(policy_file.read_text()) == {"DiskCacheDir": str(shm / "chrome")}
    for profile_dir, snap in before.items():
        assert snapshot(shm / "chrome" / profile_dir / "Cache") == snap
        assert not os.path.lexists(isolated_home / ".config" / "google-chrome" / profile_dir / "Cache")
    from cachedoctor import history

    assert [c.kind for c in history.changes(tool="chrome")] == ["policy"]
    back = cli("restore", "chrome", "--yes")
    assert back.returncode == 0, back.stderr
    assert not policy_file.exists()
    for profile_dir, snap in before.items():
        assert snapshot(isolated_home / ".config" / "google-chrome" / profile_dir / "Cache") == snap


def test_config_method_sets_and_restores_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  isolated_home: Path, shm: Path) -> None:
    pytest.importorskip("cachedoctor.configedit")
    directory = tmp_path / "profiles"
    write_profile(directory, "pipc", paths="~/.cache/pip", relocate=(
        "[{method: config, file: {linux: '~/.config/pip/pip.conf'}, format: ini, "
        "key: cache-dir, section: global}]"))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    conf = isolated_home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    original = "[global]\n# my settings\ntimeout = 60\n"
    conf.write_text(original)
    (isolated_home / ".cache" / "pip" / "http").mkdir(parents=True)
    (isolated_home / ".cache" / "pip" / "http" / "x").write_text("cached")
    result = cli("move", "pipc", str(shm), "--yes")
    assert result.returncode == 0, result.stderr
    text = conf.read_text()
    assert "# my settings" in text and f"cache-dir = {shm / 'pipc'}" in text
    assert (shm / "pipc" / "http" / "x").read_text() == "cached"
    assert not os.path.lexists(isolated_home / ".cache" / "pip")
    assert cli("restore", "pipc", "--yes").returncode == 0
    assert conf.read_text() == original
    assert (isolated_home / ".cache" / "pip" / "http" / "x").read_text() == "cached"


def test_env_method_sets_and_unsets_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 isolated_home: Path, shm: Path) -> None:
    envvars = pytest.importorskip("cachedoctor.envvars")
    directory = tmp_path / "profiles"
    write_profile(directory, "hfenv", paths="~/.cache/hfenv",
                  relocate="[{method: env, vars: {HF_HOME: '{dest}'}}]")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    (isolated_home / ".cache" / "hfenv").mkdir(parents=True)
    (isolated_home / ".cache" / "hfenv" / "token").write_text("t")
    result = cli("move", "hfenv", str(shm), "--yes")
    assert result.returncode == 0, result.stderr
    from cachedoctor.host import Host

    host = Host.current()
    assert envvars.managed_variables(host).get("HF_HOME") == str(shm / "hfenv")
    assert (shm / "hfenv" / "token").read_text() == "t"
    assert cli("restore", "hfenv", "--yes").returncode == 0
    assert "HF_HOME" not in envvars.managed_variables(Host.current())
    assert (isolated_home / ".cache" / "hfenv" / "token").read_text() == "t"


def test_windows_junction_required_refuses_symlink() -> None:
    from cachedoctor.errors import RefusedError
    from cachedoctor.host import Host
    from cachedoctor.profiles.model import LinkRelocation
    from cachedoctor.relocate.methods.link import choose_link_kind

    win = Host(os="windows", env={}, home="C:\\Users\\me")
    needs = LinkRelocation(windows_link="junction",
                           why="WorkBuddy resolves symlinks with GetFinalPathNameByHandle")
    with pytest.raises(RefusedError, match="needs a junction"):
        choose_link_kind(needs, win, "symlink")
    assert choose_link_kind(needs, win, None) == "junction"
    assert choose_link_kind(LinkRelocation(), win, "symlink") == "symlink"
    assert choose_link_kind(LinkRelocation(), Host(os="linux"), None) == "symlink"


def test_policy_paths_and_registry_values_pure() -> None:
    from cachedoctor.relocate.policy import policy_file, registry_value

    assert policy_file("chrome", root="") == "/etc/opt/chrome/policies/managed/cachedoctor.json"
    assert policy_file("chromium", root="") == "/etc/chromium/policies/managed/cachedoctor.json"
    assert policy_file("edge", root="/r") == "/r/etc/opt/edge/policies/managed/cachedoctor.json"
    value = registry_value("edge", "DiskCacheDir", "D:\\ai-cache\\edge")
    assert value.key == r"SOFTWARE\Policies\Microsoft\Edge" and value.name == "DiskCacheDir"
    assert value.hive == "HKEY_CURRENT_USER" and value.type == "REG_SZ"  # per user by default
    assert registry_value("chrome", "DiskCacheDir", "x").key == r"SOFTWARE\Policies\Google\Chrome"


def test_destination_next_to_the_cache_that_does_not_exist_yet(tmp_path: Path, isolated_home: Path) -> None:
    """A new DEST beside the cache (same parent) is neither inside the cache nor around it."""
    directory = tmp_path / "profiles"
    write_profile(directory)
    cache = isolated_home / ".cache" / "foo"
    build_tree(cache)
    before = snapshot(cache)
    dest = isolated_home / ".cache" / "relocated"  # does not exist yet
    result = cli("--profiles-dir", str(directory), "move", "foo", str(dest), "--yes")
    assert result.returncode == 0, result.stderr
    assert cache.is_symlink()
    assert snapshot(dest / "foo") == before


@needs_root
def test_too_few_inodes_is_caught_in_preflight(profiles: Path, cache: Path, tmp_path: Path) -> None:
    drive = tmp_path / "few-inodes"
    drive.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=40", "tmpfs", str(drive)],
                   check=True)
    try:
        for i in range(60):
            (cache / f"small{i}").write_text("x")
        before = snapshot(cache)
        result = cli("move", "foo", str(drive), "--yes")
        assert result.returncode == 1 and "not enough free inodes" in result.stderr
        assert snapshot(cache) == before and not os.path.islink(cache)
        assert os.listdir(drive) == [] and pending() == []
    finally:
        subprocess.run(["umount", "-l", str(drive)], check=False)


def _pipc_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "profiles"
    write_profile(directory, "pipc", paths="~/.cache/pip", relocate=(
        "[{method: config, file: {linux: '~/.config/pip/pip.conf'}, format: ini, "
        "key: cache-dir, section: global}]"))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_linked_or_crlf_config_file_round_trips_byte_for_byte(
        newline: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path,
        shm: Path) -> None:
    """Restoring a symlinked pip.conf used to replace the link with a file (the dotfiles copy
    kept pointing at the deleted DEST); a CRLF file always looked 'edited since the move'."""
    _pipc_profile(tmp_path, monkeypatch)
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    original = newline.join(["[global]", "# mine", "timeout = 60", ""]).encode()
    (dotfiles / "pip.conf").write_bytes(original)
    conf = isolated_home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.symlink_to(dotfiles / "pip.conf")
    (isolated_home / ".cache" / "pip" / "x").parent.mkdir(parents=True)
    (isolated_home / ".cache" / "pip" / "x").write_text("cached")
    assert cli("move", "pipc", str(shm), "--yes").returncode == 0
    assert conf.is_symlink() and b"cache-dir" in (dotfiles / "pip.conf").read_bytes()
    back = cli("restore", "pipc", "--yes")
    assert back.returncode == 0, back.stderr
    assert "edited since" not in back.stderr
    assert conf.is_symlink() and (dotfiles / "pip.conf").read_bytes() == original


def test_a_dangling_config_link_or_an_undecodable_file_is_refused_before_the_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path, shm: Path) -> None:
    _pipc_profile(tmp_path, monkeypatch)
    cache = isolated_home / ".cache" / "pip"
    cache.mkdir(parents=True)
    (cache / "x").write_text("cached")
    conf = isolated_home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.symlink_to(tmp_path / "nowhere" / "pip.conf")
    refused = cli("move", "pipc", str(shm), "--yes")
    assert refused.returncode == 2 and "does not exist" in refused.stderr, refused.stderr
    assert not (tmp_path / "nowhere").exists() and (cache / "x").exists()
    assert not (shm / "pipc").exists()
    conf.unlink()
    conf.write_bytes(b"[global]\ntimeout = 60 # caf\xe9\n")  # one Latin-1 byte
    refused = cli("move", "pipc", str(shm), "--yes")
    assert refused.returncode == 2 and "not UTF-8" in refused.stderr and "Traceback" not in refused.stderr
    assert (cache / "x").exists() and not (shm / "pipc").exists()


def _paused_move(shm: Path, tmp_path: Path, point: str, **kw: Any) -> subprocess.Popen[str]:
    """A real move stopped at fault point `point` (faults.py `pause`), to be sent a real signal."""
    env = {**os.environ, "CACHEDOCTOR_FAULT_AT": f"{point}:pause",
           "CACHEDOCTOR_FAULT_PAUSE_DIR": str(tmp_path), **kw.pop("env", {})}
    proc = subprocess.Popen([sys.executable, "-m", "cachedoctor", "move", "foo", str(shm), "--yes"],
                            text=True, env=env, **kw)
    deadline = time.monotonic() + 60
    while not (tmp_path / "paused").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the move never reached " + point
        time.sleep(0.05)
    return proc


def test_sigint_during_verify_says_it_rolled_back_and_where_the_cache_is(
        profiles: Path, cache: Path, shm: Path, tmp_path: Path) -> None:
    before = snapshot(cache)
    proc = _paused_move(shm, tmp_path, "verify", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted during verify and rolled back" in err
    assert f"the cache is where it was, in {cache}" in err and "interrupted" in err
    assert snapshot(cache) == before and pending() == [] and leftovers(shm, cache.parent) == []


def test_sigint_after_the_swap_leaves_it_resumable_and_says_where_the_data_is(
        profiles: Path, cache: Path, shm: Path, tmp_path: Path) -> None:
    before = snapshot(cache)
    proc = _paused_move(shm, tmp_path, "swap-done", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    (op,) = pending()
    assert "interrupted during swap" in err and "it can be finished or rolled back" in err
    aside = next(p for p in map(str, cache.parent.iterdir()) if ".cachedoctor-old-" in p)
    assert f"the original is intact in {aside}" in err and str(shm / "foo") in err
    assert op.finish_command in err and op.rollback_command in err
    finished = cli("move", "foo", str(shm), "--yes")
    assert finished.returncode == 0, finished.stderr
    assert snapshot(cache) == before and pending() == []


def test_progress_names_the_phase_shows_percent_and_eta_and_is_cleared_on_ctrl_c(
        profiles: Path, cache: Path, shm: Path, tmp_path: Path) -> None:
    """stderr on a real pseudo-terminal: the progress line is drawn, then erased before the
    interruption is reported."""
    import pty

    master, slave = pty.openpty()
    proc = _paused_move(shm, tmp_path, "verify", stdout=subprocess.DEVNULL, stderr=slave,
                        env={"TERM": "xterm", "COLUMNS": "100"})
    os.close(slave)
    screen = b""

    def read_for(seconds: float) -> bytes:
        out, deadline = b"", time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other end closed
                    break
                if not chunk:
                    break
                out += chunk
        return out

    screen += read_for(1.0)  # a few refreshes while it waits in its verify phase
    drawn = screen.decode(errors="replace")
    assert "verify" in drawn and "100%" in drawn and "ETA" in drawn, drawn
    proc.send_signal(signal.SIGINT)
    screen += read_for(10.0)
    proc.wait(timeout=60)
    os.close(master)
    text = screen.decode(errors="replace")
    assert proc.returncode == 130, text
    tail = text[text.rindex("ETA"):]
    said = tail.index("interrupted during verify")
    assert "\x1b[2K" in tail[:said], repr(tail[:said])  # the line was erased before it was said
