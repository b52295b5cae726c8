"""The real pip and uv are the oracle for how their settings are read: for each way a user can
spell a cache setting (key spellings, PIP_CONFIG_FILE, /dev/null, UV_CONFIG_FILE, UV_NO_CONFIG,
`~` that uv does not expand, relative values), `cachedoctor where` names the folder the tool
itself prints — or, where the tool's answer depends on the directory it is started in, says so
instead of guessing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_real_clients import ASK, clean_env, json_of, tool_path

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="drives the real clients on POSIX")


def real_answer(tool: str, home: Path, env: dict[str, str], cwd: Path) -> str | None:
    """The folder the tool prints, or None when it refuses to run with these settings."""
    argv = [tool_path(a) if i == 0 and tool != "pip" else a for i, a in enumerate(ASK[tool])]
    proc = subprocess.run(argv, capture_output=True, text=True, env={**clean_env(home), **env},
                          timeout=120, cwd=cwd)
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 else None


def where(tool: str, home: Path, env: dict[str, str], cwd: Path) -> dict[str, object]:
    full = {**os.environ, **clean_env(home), "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": "",
            "CACHEDOCTOR_SYSTEM_ROOT": str(home / "sysroot"), **env}
    proc = subprocess.run([sys.executable, "-m", "cachedoctor", "where", tool,
                           "--json"], capture_output=True, text=True, env=full, timeout=120,
                          cwd=cwd)
    location: dict[str, object] = json_of(proc)["locations"][0]
    return location


PIP_FORMS = [
    ("cache-dir = {h}/u0", {}),
    ("cache_dir = {h}/u1", {}),
    ("--cache-dir = {h}/u2", {}),
    ("Cache-Dir = {h}/u3", {}),
    ("cache-dir = {h}/first\ncache_dir = {h}/last", {}),  # pip: "could not be loaded"
    ("cache-dir = ~/tilde", {}),
    ("cache-dir = {h}/user", {"PIP_CONFIG_FILE": "{h}/alt.conf"}),
    ("cache-dir = {h}/user", {"PIP_CONFIG_FILE": "{h}/missing.conf"}),
    ("cache-dir = {h}/user", {"PIP_CONFIG_FILE": "/dev/null"}),
    ("cache-dir = {h}/user", {"PIP_CONFIG_FILE": "{h}/alt-with-key.conf"}),
]


@pytest.mark.parametrize(("line", "env"), PIP_FORMS)
def test_pip_settings_are_read_as_pip_reads_them(line: str, env: dict[str, str],
                                                 isolated_home: Path, tmp_path: Path) -> None:
    home = isolated_home
    (home / ".config" / "pip").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\n" + line.format(h=home) + "\n", encoding="utf-8")
    (home / "alt.conf").write_text("[global]\ntimeout = 30\n", encoding="utf-8")
    (home / "alt-with-key.conf").write_text(f"[global]\ncache_dir = {home}/alt\n", encoding="utf-8")
    env = {k: v.format(h=home) for k, v in env.items()}
    expected = real_answer("pip", home, env, tmp_path)
    found = where("pip", home, env, tmp_path)
    if expected is None:  # pip cannot load the file: cachedoctor says why instead of guessing
        problems = found["problems"]
        assert isinstance(problems, list) and "already exists" in problems[0], found
        return
    places = found["places"]
    assert isinstance(places, list)
    assert places[0]["path"] == expected, found
    assert not found["problems"]


@pytest.mark.parametrize(("toml", "env", "relative"), [
    ('cache-dir = "{h}/u0"', {}, False),
    ('cache-dir = "~/tilde"', {}, True),  # uv does not expand it: ./~/tilde
    ('cache-dir = "rel/c"', {}, True),
    ('cache-dir = "{h}/user"', {"UV_CONFIG_FILE": "{h}/alt.toml"}, False),
    ('cache-dir = "{h}/user"', {"UV_NO_CONFIG": "1"}, False),
    ('cache-dir = "{h}/user"', {"UV_NO_CONFIG": "1", "UV_CONFIG_FILE": "{h}/alt-with-key.toml"},
     False),
    ('cache-dir = "{h}/user"', {"UV_CACHE_DIR": "~/envtilde"}, True),
])
def test_uv_settings_are_read_as_uv_reads_them(toml: str, env: dict[str, str], relative: bool,
                                               isolated_home: Path, tmp_path: Path) -> None:
    home = isolated_home
    (home / ".config" / "uv").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "uv" / "uv.toml").write_text(toml.format(h=home) + "\n", encoding="utf-8")
    (home / "alt.toml").write_text("native-tls = false\n", encoding="utf-8")
    (home / "alt-with-key.toml").write_text(f'cache-dir = "{home}/alt"\n', encoding="utf-8")
    env = {k: v.format(h=home) for k, v in env.items()}
    expected = real_answer("uv", home, env, tmp_path)
    found = where("uv", home, env, tmp_path)
    problems = found["problems"]
    assert isinstance(problems, list)
    assert expected is not None
    if relative:
        assert not os.path.isabs(expected)  # uv itself answers with a relative path
        assert problems and "relative path" in problems[0], found
        return
    places = found["places"]
    assert isinstance(places, list)
    assert places[0]["path"] == expected, found
    assert not problems


def cli(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **clean_env(home), "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": "",
            "CACHEDOCTOR_SYSTEM_ROOT": str(home / "sysroot"), **env}
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args],
                          capture_output=True, text=True, env=full, timeout=300, cwd=home)


def test_a_move_skips_a_config_file_pip_would_not_read(isolated_home: Path,
                                                       tmp_path: Path) -> None:
    """PIP_CONFIG_FILE names a file: pip skips the user config, so a move by config would put
    the cache where pip never looks. Without --method the next method is used, and says why;
    with --method config the move is refused before anything is copied."""
    home = isolated_home
    (home / "alt.conf").write_text("[global]\ntimeout = 30\n", encoding="utf-8")
    env = {"PIP_CONFIG_FILE": str(home / "alt.conf")}
    cache = home / ".cache" / "pip" / "http-v2"
    cache.mkdir(parents=True)
    (cache / "entry").write_bytes(b"x" * 5000)
    dest = tmp_path / "dest"
    refused = cli(home, env, "move", "pip", str(dest), "--method", "config", "--yes")
    assert refused.returncode == 2
    assert "skips" in refused.stderr and "PIP_CONFIG_FILE" in refused.stderr
    assert (cache / "entry").exists() and not (dest / "pip").exists()
    moved = cli(home, env, "move", "pip", str(dest), "--yes")
    assert moved.returncode == 0, moved.stderr
    assert "moving by env, not by config" in moved.stderr
    assert (dest / "pip" / "http-v2" / "entry").read_bytes() == b"x" * 5000
    login = subprocess.run(["sh", "-lc", f"{sys.executable} -m pip cache dir"], capture_output=True,
                           text=True, env={**clean_env(home), **env}, timeout=120, check=True)
    assert login.stdout.strip().splitlines()[-1] == str(dest / "pip")


def test_restore_puts_the_users_own_cache_dir_back_after_other_edits(isolated_home: Path,
                                                                    tmp_path: Path) -> None:
    """The move replaced the user's cache-dir (and said restore puts it back); the user then
    edited pip.conf. The restore must set cache-dir back to the user's value — not remove it,
    which would leave pip at its default while the data goes back to the user's folder."""
    home = isolated_home
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    mine = home / "mine"
    (mine / "http-v2").mkdir(parents=True)
    (mine / "http-v2" / "entry").write_bytes(b"precious")
    conf.write_text(f"[global]\ncache-dir = {mine}\n", encoding="utf-8")
    moved = cli(home, {}, "move", "pip", str(tmp_path / "dest"), "--method", "config", "--yes")
    assert moved.returncode == 0 and "replaces your own setting" in moved.stderr, moved.stderr
    with conf.open("a", encoding="utf-8") as fh:
        fh.write("timeout = 60\n")
    back = cli(home, {}, "restore", "pip", "--yes")
    assert back.returncode == 0, back.stderr
    assert real_answer("pip", home, {}, tmp_path) == str(mine)
    assert (mine / "http-v2" / "entry").read_bytes() == b"precious"
    assert conf.read_text(encoding="utf-8") == f"[global]\ncache-dir = {mine}\ntimeout = 60\n"


def pip_entries(folder: Path) -> None:
    for sub in ("http-v2/a/b", "wheels/c"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / "entry.body").write_bytes(b"x" * 3000)


def test_clean_believes_a_setting_only_where_a_cache_can_be(isolated_home: Path,
                                                           tmp_path: Path) -> None:
    """A stray pip.conf naming ~/Documents/thesis as cache-dir must not get the thesis deleted:
    outside the user's cache/data/config/temp folders and the profiles' own folders, clean acts
    only on a folder named for the tool or a cache."""
    home = isolated_home
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    thesis = home / "Documents" / "thesis"
    thesis.mkdir(parents=True)
    (thesis / "chapter1.tex").write_text("precious", encoding="utf-8")
    conf.write_text(f"[global]\ncache-dir = {thesis}\n", encoding="utf-8")
    refused = cli(home, {}, "clean", "pip", "--max-size", "0", "--yes")
    assert refused.returncode == 2, refused.stderr + refused.stdout
    assert "outside your cache" in refused.stdout + refused.stderr
    assert (thesis / "chapter1.tex").read_text(encoding="utf-8") == "precious"
    cache = tmp_path / "data" / "pip-cache"
    pip_entries(cache)
    conf.write_text(f"[global]\ncache-dir = {cache}\n", encoding="utf-8")
    done = cli(home, {}, "clean", "pip", "--max-size", "0", "--yes")
    assert done.returncode == 0, done.stderr + done.stdout
    assert not any(p.is_file() for p in cache.rglob("*"))


def test_the_tools_own_clean_runs_with_the_variables_new_sessions_get(isolated_home: Path) -> None:
    """~/.profile moves pip's cache; this process has not loaded it. `clean pip` runs
    `pip cache purge` on the folder the picture names — so pip must get PIP_CACHE_DIR as new
    sessions have it, not this process's environment (which would purge the old default
    twice and the new folder never)."""
    home = isolated_home
    new = home / "newcache"
    old = home / ".cache" / "pip"
    pip_entries(new)
    pip_entries(old)
    (home / ".profile").write_text(f"export PIP_CACHE_DIR={new}\n", encoding="utf-8")
    done = cli(home, {}, "clean", "pip", "--yes")
    assert done.returncode == 0, done.stderr + done.stdout
    assert not any(p.is_file() for p in new.rglob("*.body")), "pip purged another folder"
    # the default is what this process (and programs started from it) still use: it is a
    # place of its own, purged by a pip that gets this process's environment
    assert not any(p.is_file() for p in old.rglob("*.body"))


def test_clean_leaves_a_location_alone_whose_setting_is_relative(isolated_home: Path) -> None:
    home = isolated_home
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("[global]\ncache-dir = relcache\n", encoding="utf-8")
    default = home / ".cache" / "pip"
    pip_entries(default)
    done = cli(home, {}, "clean", "pip", "--yes")
    assert done.returncode == 2
    assert "relative path" in done.stdout + done.stderr
    assert len(list(default.rglob("*.body"))) == 2
