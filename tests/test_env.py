"""Persistent environment variables: managed blocks in real files, real shells, Windows seam."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor import history
from cachedoctor.envvars import (
    managed_variables,
    posix,
    set_variables,
    undo_change,
    unset_variables,
    windows,
)
from cachedoctor.errors import UserInputError
from cachedoctor.host import Host
from tests.conftest import needs_posix_paths, needs_posix_sh, result_of, run_cli

BASHRC = (
    "# ~/.bashrc: executed by bash(1) for non-login shells.\n"
    "[ -z \"$PS1\" ] && return\n"
    "\n"
    "alias ll='ls -alF'   # user content, trailing spaces kept  \n"
    "export PATH=\"$HOME/bin:$PATH\"\n"
)
PROFILE = "# ~/.profile\r\nif [ -n \"$BASH_VERSION\" ]; then . \"$HOME/.bashrc\"; fi\r\n"


def linux_host(home: Path) -> Host:
    return Host(os="linux", env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")},
                home=str(home))


@needs_posix_paths
def test_set_and_unset_keep_user_content_byte_identical(isolated_home):
    home = isolated_home
    (home / ".bashrc").write_text(BASHRC)
    (home / ".profile").write_bytes(PROFILE.encode())
    host = linux_host(home)
    result = set_variables({"HF_HOME": "/mnt/d/hf cache", "TMPDIR": "/mnt/d/tmp"}, host=host)
    bashrc = (home / ".bashrc").read_text()
    assert bashrc.startswith(BASHRC)
    assert bashrc[len(BASHRC):] == (
        f"{posix.BEGIN}\n{posix.NOTE}\nexport HF_HOME='/mnt/d/hf cache'\nexport TMPDIR=/mnt/d/tmp\n{posix.END}\n"
    )
    profile = (home / ".profile").read_bytes().decode()
    assert profile.startswith(PROFILE) and profile.endswith(f"{posix.END}\r\n")  # CRLF file stays CRLF
    assert not (home / ".zshrc").exists()  # only files that exist get the block
    envd = home / ".config" / "environment.d" / "60-cachedoctor.conf"
    assert "HF_HOME=\"/mnt/d/hf cache\"" in envd.read_text()
    assert sorted(result.files_changed) == sorted([str(home / ".bashrc"), str(home / ".profile"), str(envd)])
    assert result.apply_now == "export HF_HOME='/mnt/d/hf cache' TMPDIR=/mnt/d/tmp"
    assert managed_variables(host) == {"HF_HOME": "/mnt/d/hf cache", "TMPDIR": "/mnt/d/tmp"}

    again = set_variables({"HF_HOME": "/mnt/d/hf cache"}, host=host)
    assert again.files_changed == [] and again.change_id is None

    set_variables({"HF_HOME": "/mnt/e/hf"}, host=host)
    assert (home / ".bashrc").read_text().count(posix.BEGIN) == 1
    unset_variables(["HF_HOME", "TMPDIR"], host=host)
    assert (home / ".bashrc").read_text() == BASHRC
    assert (home / ".profile").read_bytes().decode() == PROFILE
    assert not envd.exists()
    assert managed_variables(host) == {}


@needs_posix_paths
def test_a_shell_file_cachedoctor_created_goes_again_with_the_last_variable(isolated_home):
    """No shell file existed: set creates ~/.profile, unset leaves the home as it was."""
    home = isolated_home
    host = linux_host(home)
    before = sorted(p.relative_to(home) for p in home.rglob("*") if p.is_file())
    set_variables({"HF_HOME": "/data/hf"}, host=host)
    assert posix.BEGIN in (home / ".profile").read_text()
    set_variables({"TORCH_HOME": "/data/torch"}, host=host)
    unset_variables(["HF_HOME"], host=host)
    assert (home / ".profile").exists()  # one variable is still managed
    unset_variables(["TORCH_HOME"], host=host)
    assert not (home / ".profile").exists()
    after = sorted(p.relative_to(home) for p in home.rglob("*") if p.is_file()
                   if "cachedoctor" not in p.parts)
    assert after == [p for p in before if "cachedoctor" not in p.parts]


@needs_posix_paths
def test_a_file_the_user_wrote_in_between_is_kept(isolated_home):
    home = isolated_home
    host = linux_host(home)
    set_variables({"HF_HOME": "/data/hf"}, host=host)
    with (home / ".profile").open("a") as fh:
        fh.write("export EDITOR=vim\n")
    unset_variables(["HF_HOME"], host=host)
    assert (home / ".profile").read_text() == "export EDITOR=vim\n"


@needs_posix_paths
def test_history_records_values_and_undo_restores_them(isolated_home):
    host = linux_host(isolated_home)
    set_variables({"ASTRA_CACHE_DIR": "/a"}, host=host)
    second = set_variables({"ASTRA_CACHE_DIR": "/b", "TMPDIR": "/t"}, host=host)
    change = history.get(second.change_id or 0)
    assert change is not None and change.kind == "env"
    assert change.before == {"values": {"ASTRA_CACHE_DIR": "/a", "TMPDIR": None}}
    assert change.after["values"] == {"ASTRA_CACHE_DIR": "/b", "TMPDIR": "/t"}
    undone = undo_change(change, host=host)
    assert managed_variables(host) == {"ASTRA_CACHE_DIR": "/a"}
    assert history.get(second.change_id or 0).undone_by == undone.change_id  # type: ignore[union-attr]


@needs_posix_paths
def test_dry_run_changes_nothing(isolated_home):
    host = linux_host(isolated_home)
    (isolated_home / ".zshrc").write_text("setopt autocd\n")
    result = set_variables({"X": "1"}, host=host, dry_run=True)
    assert str(isolated_home / ".zshrc") in result.files_changed
    assert (isolated_home / ".zshrc").read_text() == "setopt autocd\n"
    assert managed_variables(host) == {} and history.changes(kind="env") == []


@needs_posix_sh
@pytest.mark.parametrize("value", ["plain", "with space", "it's", 'dq"x', "$HOME/x", "back\\slash",
                                   "`cmd`", "ünïcode ✓", "a;b&c|d", ""])
def test_sh_quoting_is_exact_in_a_real_shell(isolated_home, value):
    host = linux_host(isolated_home)
    (isolated_home / ".profile").write_text("")
    set_variables({"CD_TEST": value}, host=host)
    out = subprocess.run(["sh", "-c", '. "$HOME/.profile"; printf %s "$CD_TEST"'],
                         capture_output=True, env={**os.environ, "HOME": str(isolated_home)})
    assert out.stdout.decode() == value


@pytest.mark.skipif(not Path("/usr/lib/systemd/user-environment-generators/"
                             "30-systemd-environment-d-generator").exists(), reason="needs systemd")
def test_environment_d_values_read_back_by_systemd(isolated_home):
    host = linux_host(isolated_home)
    values = {"A_PLAIN": "/mnt/d/cache", "A_SPACE": "x y", "A_DOLLAR": "p$HOME", "A_QUOTE": 'q"b\\s'}
    set_variables(values, host=host)
    out = subprocess.run(
        ["/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"],
        capture_output=True, text=True, check=True,
        env={"XDG_CONFIG_HOME": str(isolated_home / ".config"), "PATH": os.environ["PATH"]},
    ).stdout
    got = {}
    for line in out.splitlines():  # the generator prints shell-quoted KEY=VALUE lines
        name = line.split("=", 1)[0]
        if name in values:
            got[name] = subprocess.run(["sh", "-c", f"{line}; printf %s \"${name}\""],
                                       capture_output=True, text=True).stdout
    assert got == values


@needs_posix_paths
def test_fish_gets_the_block_last_in_config_fish(isolated_home):
    """fish runs conf.d/*.fish before config.fish: the block goes at the end of config.fish,
    after the user's own lines; a block an older version wrote to conf.d is removed."""
    fish_dir = isolated_home / ".config" / "fish"
    (fish_dir / "conf.d").mkdir(parents=True)
    config = fish_dir / "config.fish"
    config.write_text("set -gx HF_HOME /mine\n")
    old = fish_dir / "conf.d" / "cachedoctor.fish"
    old.write_text(posix.render_block({"HF_HOME": "/older"}, "fish"))
    host = linux_host(isolated_home)
    set_variables({"HF_HOME": "it's \\ here"}, host=host)
    assert config.read_text().startswith("set -gx HF_HOME /mine\n" + posix.BEGIN)
    assert "set -gx HF_HOME 'it\\'s \\\\ here'\n" in config.read_text()
    assert not old.exists()
    if shutil.which("fish"):
        out = subprocess.run(["fish", "-l", "-c", "printf %s $HF_HOME"], capture_output=True,
                             text=True, env={**os.environ, "HOME": str(isolated_home)})
        assert out.stdout == "it's \\ here"
    unset_variables(["HF_HOME"], host=host)
    assert config.read_text() == "set -gx HF_HOME /mine\n"
    # no config.fish yet: cachedoctor creates it and deletes it again with the last variable
    config.unlink()
    set_variables({"HF_HOME": "/x"}, host=host)
    assert posix.BEGIN in config.read_text()
    unset_variables(["HF_HOME"], host=host)
    assert not config.exists()


def test_block_splice_is_pure_and_exact():
    text = "a\nb"  # no final newline
    spliced = posix.splice(text, {"X": "1"}, "sh")
    assert spliced.startswith("a\nb\n" + posix.BEGIN)
    assert posix.splice(spliced, {}, "sh") == "a\nb"  # the file's missing final newline too
    middle = f"top\n{posix.BEGIN}\nexport OLD=1\n{posix.END}\nbottom\n"
    assert posix.splice(middle, {"N": "2"}, "sh") == (
        f"top\n{posix.BEGIN}\n{posix.NOTE}\nexport N=2\n{posix.END}\nbottom\n")
    assert posix.splice(middle, {}, "sh") == "top\nbottom\n"
    assert posix.block_values(posix.splice("", {"Q": "a b"}, "sh")) == {"Q": "a b"}


@needs_posix_paths
def test_macos_targets_and_launchctl_advice(isolated_home):
    host = Host(os="macos", env={"HOME": str(isolated_home)}, home=str(isolated_home))
    result = set_variables({"HF_HOME": "/Volumes/ext/hf"}, host=host)
    # zsh reads .zshenv in every session; no environment.d on macOS
    assert result.files_changed == [str(isolated_home / ".zshenv")]
    assert any("launchctl setenv HF_HOME /Volumes/ext/hf" in m for m in result.messages)
    assert posix.launchctl_commands({"A": "1", "B": None}) == [
        ["launchctl", "setenv", "A", "1"], ["launchctl", "unsetenv", "B"]]


@needs_posix_paths
def test_invalid_names_and_values_are_refused(isolated_home):
    host = linux_host(isolated_home)
    for bad in ({"1X": "v"}, {"A-B": "v"}, {"X": "two\nlines"}):
        with pytest.raises(UserInputError):
            set_variables(bad, host=host)
    assert not (isolated_home / ".profile").exists()


# --- Windows seam (pure parts and a fake registry) --------------------------------------------


class FakeRegistry:
    def __init__(self) -> None:
        self.values: dict[str, tuple[str, int]] = {}
        self.broadcasts = 0

    def read(self, name: str) -> tuple[str, int] | None:
        return self.values.get(name)

    def write(self, name: str, value: str, type_: int) -> None:
        self.values[name] = (value, type_)

    def delete(self, name: str) -> None:
        self.values.pop(name, None)

    def broadcast(self) -> bool:
        self.broadcasts += 1
        return True


def test_registry_value_types_and_plan():
    assert windows.value_type(r"D:\ai\hf") == windows.REG_SZ
    assert windows.value_type(r"%USERPROFILE%\hf") == windows.REG_EXPAND_SZ
    assert windows.value_type("100%") == windows.REG_SZ
    ops = windows.plan_ops({"A": "x", "B": None, "C": "%TEMP%\\c", "D": "same"},
                           {"B": ("old", 1), "D": ("same", 1)})
    assert [o.describe() for o in ops] == [
        "set HKCU\\Environment\\A = x (REG_SZ)", "delete HKCU\\Environment\\B",
        "set HKCU\\Environment\\C = %TEMP%\\c (REG_EXPAND_SZ)"]
    assert windows.apply_now({"A": "it's", "B": None}) == (
        "$env:A = 'it''s'; Remove-Item Env:B -ErrorAction SilentlyContinue")
    assert (windows.HWND_BROADCAST, windows.WM_SETTINGCHANGE) == (0xFFFF, 0x1A)


def test_windows_set_unset_through_the_registry_seam(isolated_home):
    host = Host(os="windows", env={"USERPROFILE": str(isolated_home)}, home=str(isolated_home))
    reg = FakeRegistry()
    result = set_variables({"HF_HOME": r"%USERPROFILE%\hf"}, host=host, registry=reg)
    assert reg.values == {"HF_HOME": (r"%USERPROFILE%\hf", windows.REG_EXPAND_SZ)}
    assert reg.broadcasts == 1 and result.files_changed == ["HKCU\\Environment\\HF_HOME"]
    assert result.apply_now == (
        "$env:HF_HOME = [Environment]::ExpandEnvironmentVariables('%USERPROFILE%\\hf')")
    assert not (isolated_home / ".profile").exists()
    assert set_variables({"HF_HOME": r"%USERPROFILE%\hf"}, host=host, registry=reg).files_changed == []
    assert reg.broadcasts == 1
    unset_variables(["HF_HOME"], host=host, registry=reg)
    assert reg.values == {} and reg.broadcasts == 2


def test_a_value_the_user_had_in_hkcu_comes_back_with_its_type(isolated_home):
    """HKCU\\Environment is the user's only store: what they had before cachedoctor set a
    variable is put back, REG_EXPAND_SZ and all, by unset, restore and undo (issue 10, #8)."""
    from cachedoctor import history
    from cachedoctor.envvars import undo_change

    host = Host(os="windows", env={"USERPROFILE": str(isolated_home)}, home=str(isolated_home))
    reg = FakeRegistry()
    reg.values["HF_HOME"] = (r"%USERPROFILE%\mine", windows.REG_EXPAND_SZ)
    reg.values["TMPDIR"] = (r"E:\tmp", windows.REG_SZ)
    set_variables({"HF_HOME": r"D:\hf", "TMPDIR": r"D:\tmp"}, host=host, registry=reg)
    assert reg.values["HF_HOME"] == (r"D:\hf", windows.REG_SZ)
    result = unset_variables(["HF_HOME"], host=host, registry=reg)
    assert reg.values["HF_HOME"] == (r"%USERPROFILE%\mine", windows.REG_EXPAND_SZ)
    assert "restore HKCU\\Environment\\HF_HOME" in " ".join(result.messages)
    assert result.apply_now == (
        "$env:HF_HOME = [Environment]::ExpandEnvironmentVariables('%USERPROFILE%\\mine')")
    reg.values["TMPDIR"] = (r"F:\changed-by-hand", windows.REG_SZ)  # changed since we set it
    kept = unset_variables(["TMPDIR"], host=host, registry=reg)
    assert reg.values["TMPDIR"] == (r"F:\changed-by-hand", windows.REG_SZ)
    assert "leave HKCU\\Environment\\TMPDIR" in " ".join(kept.messages)
    done = set_variables({"HF_HOME": r"D:\hf2"}, host=host, registry=reg)
    assert done.change_id is not None
    recorded = history.get(done.change_id)
    assert recorded is not None
    undo_change(recorded, host=host, registry=reg)
    assert reg.values["HF_HOME"] == (r"%USERPROFILE%\mine", windows.REG_EXPAND_SZ)


# --- CLI --------------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="would write the runner's real HKCU\\Environment "
                    "(the registry path is tested through the seam above)")
def test_cli_env_set_list_unset(isolated_home):
    (isolated_home / ".bashrc").write_text(BASHRC)
    refused = run_cli("env", "set", "HF_HOME", "/data/hf")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert (isolated_home / ".bashrc").read_text() == BASHRC
    done = run_cli("env", "set", "HF_HOME", "/data/hf", "--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "export HF_HOME=/data/hf"
    assert "new shells" in done.stderr
    listed = result_of(run_cli("env", "list", "--json"))
    assert listed == {"variables": [{"name": "HF_HOME", "value": "/data/hf", "current": None, "seen": False}]}
    assert "already set" in run_cli("env", "set", "HF_HOME", "/data/hf", "--yes").stderr
    bad = run_cli("env", "set", "BAD-NAME", "x", "--yes")
    assert bad.returncode == 2 and "error: invalid variable name" in bad.stderr
    assert run_cli("env", "unset", "HF_HOME", "--yes").returncode == 0
    assert (isolated_home / ".bashrc").read_text() == BASHRC


# ------------------------------------------------------- damaged markers, links, unwritable files

BEGIN, END = posix.BEGIN, posix.END


@needs_posix_paths
@pytest.mark.parametrize("damage", ["end removed", "begin removed", "duplicated block", "swapped"])
def test_damaged_markers_are_refused_and_the_users_lines_survive(isolated_home, damage):
    """Reproduces the finding: with its END marker removed, the next two `env set` deleted
    everything the user added after it; a duplicated block was half updated."""
    home = isolated_home
    host = linux_host(home)
    (home / ".bashrc").write_text(BASHRC)
    set_variables({"HF_HOME": "/mnt/d/hf"}, host=host)
    text = (home / ".bashrc").read_text()
    if damage == "end removed":
        text = text.replace(END + "\n", "")
    elif damage == "begin removed":
        text = text.replace(BEGIN + "\n", "")
    elif damage == "duplicated block":
        start = text.index(BEGIN)
        text = text + text[start:]
    else:
        text = text.replace(BEGIN, "@@").replace(END, BEGIN).replace("@@", END)
    damaged = text + "export MINE=1  # the user's own line, after the block\n"
    (home / ".bashrc").write_text(damaged)
    for _ in range(2):
        with pytest.raises(UserInputError, match=r"\.bashrc:\d+: .*(marker|block|comes before)") as info:
            set_variables({"HF_HOME": "/mnt/e/hf"}, host=host)
        assert "nothing was changed" in str(info.value)
        assert (home / ".bashrc").read_text() == damaged
    proc = run_cli("env", "set", "TORCH_HOME", "/x", "--yes")
    assert proc.returncode == 2 and ".bashrc:" in proc.stderr and "Traceback" not in proc.stderr


@needs_posix_paths
def test_every_edited_start_up_file_is_backed_up_first(isolated_home):
    from cachedoctor.state import state_dir

    home = isolated_home
    (home / ".bashrc").write_text(BASHRC)
    result = set_variables({"HF_HOME": "/mnt/d/hf"}, host=linux_host(home))
    backups = list((state_dir() / "backups" / "env").iterdir())
    assert [b.read_text() for b in backups] == [BASHRC]
    assert any("backup of" in m and str(backups[0]) in m for m in result.messages)


@needs_posix_paths
def test_a_linked_dotfile_is_edited_through_the_link_and_a_dangling_one_refused(isolated_home, tmp_path):
    home = isolated_home
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "bashrc").write_text(BASHRC)
    (home / ".bashrc").symlink_to(dotfiles / "bashrc")
    set_variables({"HF_HOME": "/mnt/d/hf"}, host=linux_host(home))
    assert (home / ".bashrc").is_symlink() and BEGIN in (dotfiles / "bashrc").read_text()
    unset_variables(["HF_HOME"], host=linux_host(home))
    (home / ".bashrc").unlink()
    (home / ".profile").symlink_to(tmp_path / "nowhere" / "profile")  # the file that would be made
    with pytest.raises(UserInputError, match="does not exist; nothing was changed"):
        set_variables({"TORCH_HOME": "/x"}, host=linux_host(home))
    assert not (tmp_path / "nowhere").exists() and (home / ".profile").is_symlink()


@needs_posix_paths
def test_a_file_that_cannot_be_written_leaves_every_file_as_it_was(isolated_home, monkeypatch):
    """An immutable `.zshrc` half-way through: the files written before it are put back."""
    from cachedoctor import fsutil

    home = isolated_home
    (home / ".bashrc").write_text(BASHRC)
    (home / ".zshrc").write_text("# zsh\n")
    real = fsutil.atomic_write_bytes

    def fails_on_zshrc(path, data, *, mode=None):
        if str(path).endswith(".zshrc"):
            raise PermissionError(1, "Operation not permitted", str(path))
        real(path, data, mode=mode)

    monkeypatch.setattr(fsutil, "atomic_write_bytes", fails_on_zshrc)
    from cachedoctor.errors import OperationFailed

    with pytest.raises(OperationFailed, match=r"\.zshrc: Operation not permitted"):
        set_variables({"HF_HOME": "/mnt/d/hf"}, host=linux_host(home))
    assert (home / ".bashrc").read_text() == BASHRC
    assert (home / ".zshrc").read_text() == "# zsh\n"
    assert managed_variables(linux_host(home)) == {}
