"""Every message true, every round trip exact (issue 15): what a demanding new user notices first."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import profile_json, result_of, run_cli, user_cache_root


def df_columns(path: Path, *fields: str) -> list[str]:
    out = subprocess.run(["df", "-B1", f"--output={','.join(fields)}", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()[1].split()


def test_drive_table_used_percent_matches_df_and_shows_reserved(isolated_home: Path,
                                                               make_realfs: Any) -> None:
    drive = make_realfs("ext4", size="64M", name="reserved")  # mkfs.ext4 reserves 5% for root
    folder = drive.path / "cache"
    folder.mkdir()
    (folder / "blob").write_bytes(b"x" * 20_000_000)
    used, avail, size, pcent = df_columns(drive.path, "used", "avail", "size", "pcent")
    entry = result_of(run_cli("scan", "--path", str(folder), "--json"))["entries"][0]["drive"]
    assert entry["used_bytes"] == int(used) and entry["free_bytes"] == int(avail)
    assert entry["reserved_bytes"] == int(size) - int(used) - int(avail) > 0
    percent = math.ceil(100 * int(used) / (int(used) + int(avail)))
    assert pcent == f"{percent}%"
    table = run_cli("scan", "--path", str(folder)).stdout
    [row] = [line for line in table.splitlines() if line.startswith(str(drive.path))]
    assert f" {percent}% " in row
    assert "reserved" in table


def foo_profile(directory: Path, monkeypatch: Any) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "foo.yaml").write_text(
        "id: foo\nname: Foo\ndescription: a test tool\nlocations:\n  - id: cache\n"
        '    paths: {linux: "~/.cache/foo"}\n    safe_to_delete: true\n'
        "    relocate: [{method: link}]\n")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))


def foo_cache(home: Path, files: int = 3) -> Path:
    cache = home / ".cache" / "foo"
    (cache / "sub").mkdir(parents=True)
    for index in range(files):
        (cache / "sub" / f"f{index}").write_bytes(b"x" * 5000)
    return cache


def test_same_drive_move_says_renamed_with_what_moved(isolated_home: Path, tmp_path: Path,
                                                      monkeypatch: Any) -> None:
    foo_profile(tmp_path / "profiles", monkeypatch)
    foo_cache(isolated_home)
    moved = run_cli("move", "foo", str(tmp_path / "dest"), "--yes")
    assert moved.returncode == 0, moved.stderr
    assert "renamed (same drive): 3 files, " in moved.stderr
    assert "0 entries" not in moved.stderr and "copied" not in moved.stderr.splitlines()[-1]


def test_each_size_of_a_move_says_what_it_counts(isolated_home: Path, tmp_path: Path,
                                                 tmpfs: Path, monkeypatch: Any) -> None:
    """Allocated sizes say "on disk" (they change from filesystem to filesystem), copied ones
    "file data": the plan, the result and the restore of one folder never show two bare sizes."""
    import re

    foo_profile(tmp_path / "profiles", monkeypatch)
    foo_cache(isolated_home)
    moved = run_cli("move", "foo", str(tmpfs / "dest"), "--yes")
    assert moved.returncode == 0, moved.stderr
    back = run_cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    sizes = re.compile(r"(\d+(?:\.\d+)? (?:B|KiB|MiB|GiB))(?! free)(.{0,16})")
    for line in (moved.stderr + back.stderr).splitlines():
        for _size, after in sizes.findall(line):
            assert after.startswith((" on disk", " of file data")), line
    assert "14.6 KiB of file data copied" in moved.stderr


def test_env_unset_of_an_unmanaged_variable_does_not_claim_it_is_set(isolated_home: Path) -> None:
    done = run_cli("env", "unset", "NOPE")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "NOPE is not managed by cachedoctor" in said and "nothing to change" in said
    assert "already set" not in said


def test_scan_of_a_missing_folder_says_no_such_folder(isolated_home: Path) -> None:
    missing = isolated_home / "nonexistent"
    done = run_cli("scan", "--path", str(missing))
    assert done.returncode == 2
    assert f"no such folder: {missing}" in done.stderr
    assert "0 B" not in done.stdout and "Traceback" not in done.stderr


def test_tune_yes_says_where_the_backup_went(isolated_home: Path) -> None:
    config = isolated_home / ".cargo" / "config.toml"
    config.parent.mkdir()
    config.write_text("[net]\nretry = 2\n")
    done = run_cli("tune", "cargo", "--yes")
    assert done.returncode == 0, done.stderr
    [said] = [line for line in done.stderr.splitlines() if "backup: " in line]
    backup = Path(said.split("backup: ", 1)[1])
    assert backup.read_text() == "[net]\nretry = 2\n"


def test_restore_and_undo_remove_the_empty_folders_the_move_made(isolated_home: Path,
                                                                tmp_path: Path,
                                                                monkeypatch: Any) -> None:
    foo_profile(tmp_path / "profiles", monkeypatch)
    cache = foo_cache(isolated_home)
    made = tmp_path / "new" / "dest"
    assert run_cli("move", "foo", str(made), "--yes").returncode == 0
    back = run_cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    assert cache.is_dir() and not (tmp_path / "new").exists()

    moved = run_cli("move", "foo", str(made), "--yes", "--json")
    assert moved.returncode == 0, moved.stderr
    change = result_of(moved)["operations"][0]["history_id"]
    undone = run_cli("undo", str(change), "--yes")
    assert undone.returncode == 0, undone.stderr
    assert cache.is_dir() and not (tmp_path / "new").exists()

    mine = tmp_path / "mine"  # a DEST the user made stays, empty or not
    mine.mkdir()
    assert run_cli("move", "foo", str(mine), "--yes").returncode == 0
    assert run_cli("restore", "foo", "--yes").returncode == 0
    assert mine.is_dir() and not any(mine.iterdir())


def test_sizes_are_decimal_or_binary_as_written_and_echoed(isolated_home: Path, tmp_path: Path,
                                                           monkeypatch: Any) -> None:
    from cachedoctor.sizes import explain_size, parse_size

    assert parse_size("1.5G") == parse_size("1.5 GB") == 1_500_000_000
    assert parse_size("1.5GiB") == 1_610_612_736 and parse_size("500mib") == 524_288_000
    assert explain_size("1.5G") == "1.5 GB = 1,500,000,000 bytes (1.40 GiB)"
    foo_profile(tmp_path / "profiles", monkeypatch)
    foo_cache(isolated_home)
    quota = run_cli("quota", "set", "foo", "1.5G", "--dry-run")
    assert quota.returncode == 0, quota.stderr
    assert "1.5 GB = 1,500,000,000 bytes (1.40 GiB)" in quota.stderr
    capped = result_of(run_cli("quota", "set", "foo", "2GiB", "--dry-run", "--json"))
    assert capped["changes"][0]["after_bytes"] == 2 * 1024**3
    clean = run_cli("clean", "foo", "--max-size", "500MiB", "--dry-run")
    assert clean.returncode == 0, clean.stderr
    assert "500 MiB = 524,288,000 bytes (524.29 MB)" in clean.stderr


def login_value(shell: str, home: Path, name: str) -> str:
    """`name` as a real login shell started in `home` sees it (nothing else of this machine)."""
    import os
    import shutil

    import pytest

    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed")
    script = f"printf '%s' \"${name}\""  # the same in sh, zsh and fish
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "USER": "tester", "SHELL": path,
           "XDG_CONFIG_HOME": str(home / ".config")}
    done = subprocess.run([path, "-l", "-c", script], env=env, cwd=home, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    return done.stdout


def test_env_set_then_unset_gives_back_a_file_without_final_newline(isolated_home: Path) -> None:
    profile = isolated_home / ".profile"
    profile.write_bytes(b"# mine\nPATH=$PATH:/opt/bin")
    assert run_cli("env", "set", "HF_HOME", "/data/hf", "--yes").returncode == 0
    assert login_value("sh", isolated_home, "HF_HOME") == "/data/hf"
    assert run_cli("env", "unset", "HF_HOME", "--yes").returncode == 0
    assert profile.read_bytes() == b"# mine\nPATH=$PATH:/opt/bin"


def test_crlf_profile_gives_sh_the_value_without_a_carriage_return(isolated_home: Path) -> None:
    profile = isolated_home / ".profile"
    mine = b"# written on Windows\r\nA=1\r\n"
    profile.write_bytes(mine)
    assert run_cli("env", "set", "HF_HOME", "/data/hf", "--yes").returncode == 0
    assert login_value("sh", isolated_home, "HF_HOME") == "/data/hf"
    assert run_cli("env", "unset", "HF_HOME", "--yes").returncode == 0
    assert profile.read_bytes() == mine


def test_config_move_and_restore_keep_a_crlf_file_exact(isolated_home: Path, tmp_path: Path) -> None:
    """pip.conf and .npmrc written with CRLF: a restore gives the file back byte for byte, and
    after the user's own edit it takes out only cachedoctor's line."""
    import os

    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or isolated_home / ".config")
    cases = {
        "pip": (config_home / "pip" / "pip.conf", user_cache_root(isolated_home) / "pip",
                b"[global]\r\ntimeout = 5\r\n", b"retries = 3\r\n", b"cache-dir"),
        "npm": (isolated_home / ".npmrc", isolated_home / ".npm" / "_cacache",
                b"fund=false\r\n", b"audit=false\r\n", b"cache="),
    }
    for tool, (config, cache, mine, edit, ours) in cases.items():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_bytes(mine)
        (cache / "x").mkdir(parents=True)
        (cache / "x" / "blob").write_bytes(b"data")
        for edited in (False, True):
            moved = run_cli("move", tool, str(tmp_path / "dest"), "--method", "config", "--yes")
            assert moved.returncode == 0, moved.stderr
            assert ours in config.read_bytes()
            if edited:
                config.write_bytes(config.read_bytes() + edit)
            back = run_cli("restore", tool, "--yes")
            assert back.returncode == 0, back.stderr
            assert ("edited since the move" in back.stderr) == edited, back.stderr
            assert config.read_bytes() == mine + (edit if edited else b""), tool
            config.write_bytes(mine)


def chromium_home(home: Path) -> Path:
    cache = home / ".cache" / "chromium" / "Default" / "Cache" / "Cache_Data"
    cache.mkdir(parents=True)
    (cache / "data_0").write_bytes(b"cached")
    return cache


def test_tune_of_a_system_policy_stays_below_the_system_root(isolated_home: Path, tmp_path: Path,
                                                           monkeypatch: Any) -> None:
    root = tmp_path / "root"
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    done = run_cli("tune", "chromium", "--yes")
    assert done.returncode == 0, done.stderr
    assert (root / "etc/chromium/policies/managed/cachedoctor.json").is_file()
    assert str(root) in done.stderr


def test_tune_move_restore_undo_in_any_order_leave_no_policy_file(isolated_home: Path,
                                                                  tmp_path: Path,
                                                                  monkeypatch: Any) -> None:
    root = tmp_path / "root"
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    policy = root / "etc/chromium/policies/managed/cachedoctor.json"
    chromium_home(isolated_home)
    for undo_tune_first in (False, True):
        tuned = run_cli("tune", "chromium", "--yes", "--json")
        assert tuned.returncode == 0, tuned.stderr
        moved = run_cli("move", "chromium", str(tmp_path / "dest"), "--method", "policy", "--yes")
        assert moved.returncode == 0, moved.stderr
        steps = [("tune", "chromium", "--undo", "--yes"), ("restore", "chromium", "--yes")]
        for step in steps if undo_tune_first else steps[::-1]:
            done = run_cli(*step)
            assert done.returncode == 0, done.stderr
        assert not policy.exists(), policy.read_text()


def test_zsh_login_shell_sees_the_variables(isolated_home: Path, monkeypatch: Any) -> None:
    """`zsh -l -c` (scripts, IDEs) reads .zshenv/.zprofile, never .zshrc: both a fresh home
    of a zsh user and one with only a .zshrc get the variable in a non-interactive login zsh."""
    import shutil

    import pytest

    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed")
    monkeypatch.setenv("SHELL", zsh)
    assert run_cli("env", "set", "HF_HOME", "/data/hf", "--yes").returncode == 0
    assert login_value("zsh", isolated_home, "HF_HOME") == "/data/hf"
    assert run_cli("env", "unset", "HF_HOME", "--yes").returncode == 0
    for name in (".zshenv", ".zshrc", ".profile"):
        path = isolated_home / name
        assert not path.exists() or "cachedoctor" not in path.read_text(), name
    (isolated_home / ".zshrc").write_text("setopt autocd\n")
    monkeypatch.setenv("SHELL", "/bin/sh")
    assert run_cli("env", "set", "HF_HOME", "/data/hf2", "--yes").returncode == 0
    assert login_value("zsh", isolated_home, "HF_HOME") == "/data/hf2"


def test_disk_cache_size_is_a_32_bit_integer_everywhere(isolated_home: Path, tmp_path: Path,
                                                        monkeypatch: Any) -> None:
    """Chromium refuses DiskCacheSize 2147483648 ("Expected integer value"): tune writes at
    most 2147483647, doctor flags what Chromium rejects, and no hint recommends such a value."""
    import json
    import re

    from cachedoctor import doctor
    from cachedoctor.host import Host
    from cachedoctor.profiles.loader import builtin_profiles_dir, load_profile_file

    root = tmp_path / "root"
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    host = Host(os="linux", env={"HOME": str(isolated_home)}, home=str(isolated_home))
    for browser, folder in (("chromium", "etc/chromium"), ("chrome", "etc/opt/chrome"),
                            ("edge", "etc/opt/edge")):
        profile = load_profile_file(builtin_profiles_dir() / f"{browser}.yaml")
        text = profile_json(profile)
        assert not [n for n in re.findall(r"\d{10,}", text) if int(n) > 2**31 - 1], browser
        policy = root / folder / "policies/managed/cachedoctor.json"
        policy.parent.mkdir(parents=True, exist_ok=True)
        for value, rejected in ((2147483648, True), (-1, True), (1.5e9, True), ("2000000000", True),
                                (2147483647, False), (1_500_000_000, False)):
            policy.write_text(json.dumps({"DiskCacheSize": value}))
            found = [f.check for f in doctor.check_profile(profile, host)[0]]
            assert ("cache-size-rejected" in found) == rejected, (browser, value, found)
    policy = root / "etc/chromium/policies/managed/cachedoctor.json"
    policy.unlink()
    assert run_cli("tune", "chromium", "--yes").returncode == 0
    assert json.loads(policy.read_text()) == {"DiskCacheSize": 2147483647}


def test_readme_runs_pytest_only_inside_the_venv_it_creates() -> None:
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    quick = readme[readme.index("## Quick start"):readme.index("## What it does")]
    blocks = re.findall(r"```sh\n(.*?)```", quick, re.S)
    commands = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert len(commands) == 2  # exactly two set-up commands: install and scan, test
    assert commands[0] == "python3 -m venv .venv && . .venv/bin/activate && pip install . && cachedoctor scan"
    assert commands[1] == 'pip install -e ".[test]" && python -m pytest'
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci  # the CI runs the README's command, verbatim


def test_a_browser_profile_made_after_a_link_move_moves_on_the_next_move(
        isolated_home: Path, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(tmp_path / "root"))
    chromium_home(isolated_home)
    dest = tmp_path / "dest"
    assert run_cli("move", "chromium", str(dest), "--method", "link", "--yes").returncode == 0
    later = isolated_home / ".cache" / "chromium" / "Profile 1"
    (later / "Cache" / "Cache_Data").mkdir(parents=True)
    (later / "Cache" / "Cache_Data" / "data_0").write_bytes(b"new profile")
    again = run_cli("move", "chromium", str(dest), "--method", "link", "--yes")
    assert again.returncode == 0, again.stderr
    assert later.is_symlink() and "already lives in" not in again.stderr
    assert (Path(str(later.resolve())) / "Cache" / "Cache_Data" / "data_0").read_bytes() == b"new profile"
    back = run_cli("restore", "chromium", "--yes")
    assert back.returncode == 0, back.stderr
    assert not later.is_symlink() and (later / "Cache" / "Cache_Data" / "data_0").is_file()
    assert not (isolated_home / ".cache" / "chromium" / "Default").is_symlink()


def test_env_set_shows_its_diff_and_warns_of_an_orphaned_cache_and_a_ram_disk(
        isolated_home: Path, tmp_path: Path) -> None:
    import os

    hub = user_cache_root(isolated_home) / "huggingface" / "hub"
    (hub / "models--x").mkdir(parents=True)
    (hub / "models--x" / "blob").write_bytes(b"weights")
    done = run_cli("env", "set", "HF_HUB_CACHE", str(tmp_path / "hub"), "--yes")
    assert done.returncode == 0, done.stderr
    assert f"+export HF_HUB_CACHE={tmp_path / 'hub'}" in done.stderr
    assert f"at {hub} stays there, no longer used" in done.stderr
    assert "cachedoctor move huggingface DEST --method env" in done.stderr
    assert done.stdout.strip() == f"export HF_HUB_CACHE={tmp_path / 'hub'}"  # still eval-able
    if os.path.isdir("/dev/shm"):
        ram = run_cli("env", "set", "TMPDIR", "/dev/shm/t", "--dry-run")
        assert "is on a RAM disk" in ram.stderr and "+export TMPDIR=/dev/shm/t" in ram.stdout  # the plan


def test_env_set_says_which_installed_shells_will_see_it_and_which_will_not(
        isolated_home: Path, tmp_path: Path, monkeypatch: Any) -> None:
    """fish without ~/.config/fish (or zsh without a file it reads) gets nothing: say so, with
    what to create; once it exists, the same command covers that shell too."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "fish").write_text("#!/bin/sh\nexit 0\n")  # "installed": found on PATH
    (bin_dir / "fish").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SHELL", "/bin/sh")
    plan = run_cli("env", "set", "CACHEDOCTOR_SEEN", "1", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "sh" in plan.stdout and "(~/.profile)" in plan.stdout
    assert "fish is installed but will not see it" in plan.stdout
    assert "create the folder ~/.config/fish" in plan.stdout
    (isolated_home / ".config" / "fish").mkdir(parents=True)
    done = run_cli("env", "set", "CACHEDOCTOR_SEEN", "1", "--yes")
    assert done.returncode == 0, done.stderr
    assert "fish (~/.config/fish/config.fish)" in done.stderr
    assert "fish is installed but will not see it" not in done.stderr
    assert "set -gx CACHEDOCTOR_SEEN" in (isolated_home / ".config" / "fish" / "config.fish").read_text()
