"""The environment a new session gets, asked of real login shells (bash, zsh, fish, dash, ksh)
over a sandbox HOME, explained by the start-up files, and the fallback when the shell cannot
answer. Tests never read the developer's own start-up files: HOME is the test's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cachedoctor.envvars import posix, set_variables
from cachedoctor.host import Host
from cachedoctor.locate import loginshell, shellenv
from cachedoctor.locate.files import LiveFiles
from tests.conftest import IS_LINUX, run_cli

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="runs real POSIX shells")


def shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (.ci/run installs zsh, fish and ksh)")
    return found


@pytest.fixture(autouse=True)
def shells_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CACHEDOCTOR_NO_SHELL")
    loginshell._memo.clear()


def host_for(home: Path, shell_path: str, **extra: str) -> Host:
    return Host("linux", {"HOME": str(home), "SHELL": shell_path, "LANG": "C.UTF-8",
                          "XDG_CONFIG_HOME": str(home / ".config"), **extra}, str(home))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def session_env(home: Path, shell_path: str, **extra: str) -> tuple[dict[str, tuple[str, str]],
                                                                       list[str]]:
    table, problems = loginshell.new_session(host_for(home, shell_path, **extra), LiveFiles())
    return {k: (v.value, v.origin) for k, v in table.items()}, problems


def real_value(home: Path, shell_path: str, name: str) -> str | None:
    """What the real login shell, run by hand, has."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "TERM": "dumb", "SHELL": shell_path}
    command = f"printenv {name} || echo UNSET-{name}"
    out = subprocess.run([shell_path, "-l", "-i", "-c", command], capture_output=True, text=True,
                         env=env, stdin=subprocess.DEVNULL, timeout=30, start_new_session=True)
    last = out.stdout.strip().splitlines()[-1]
    return None if last == f"UNSET-{name}" else last


SHELL_CASES = {
    "bash": (".bash_profile", "export DEMO_CACHE=/from/bash_profile\n"),
    "zsh": (".zshrc", "export DEMO_CACHE=/from/zshrc\n"),
    "fish": (".config/fish/config.fish", "set -gx DEMO_CACHE /from/config.fish\n"),
    "dash": (".profile", "export DEMO_CACHE=/from/profile\n"),
    "ksh": (".kshrc", "export DEMO_CACHE=/from/kshrc\n"),
}


@pytest.mark.parametrize("name", list(SHELL_CASES))
def test_each_login_shell_is_asked_and_explained(isolated_home: Path, name: str) -> None:
    path = shell(name)
    rel, text = SHELL_CASES[name]
    write(isolated_home / rel, "echo noise from the start-up file\n" + text)
    got, problems = session_env(isolated_home, path)
    assert problems == []
    value = text.split()[-1].split("=")[-1]
    assert got["DEMO_CACHE"] == (value, f"~/{rel}:2")
    assert not {"PWD", "SHLVL", "TERM", "_", "A__z"} & set(got)


# (description, files) -> what bash -l -i has; the static reading must not claim a wrong line
BASH_MATRIX = {
    ".bash_profile hides .profile": {".profile": "export PIP_CACHE_DIR=/p1\n",
                                     ".bash_profile": ": no source of .profile\n"},
    "unset later": {".profile": "export PIP_CACHE_DIR=/p2\nunset PIP_CACHE_DIR\n"},
    "set -a": {".profile": "set -a\nPIP_CACHE_DIR=/p3\nset +a\n"},
    "function never called": {".profile": "f() {\n  export PIP_CACHE_DIR=/p4\n}\n"},
    "if false": {".profile": "if false; then\n export PIP_CACHE_DIR=/p5\nfi\n"},
    "config.fish of a shell not used": {".profile": "export PIP_CACHE_DIR=/p6\n",
                                        ".config/fish/config.fish": "set -gx PIP_CACHE_DIR /f\n"},
    ".zshrc of a shell not used": {".profile": "export PIP_CACHE_DIR=/p7\n",
                                   ".zshrc": "export PIP_CACHE_DIR=/z\n"},
    "two names in one export": {".profile": "export A=/p8 PIP_CACHE_DIR=/p8b\n"},
    "${VAR:-default}": {".profile": "export PIP_CACHE_DIR=${XDG_DATA_HOME:-$HOME/.d}/pipc\n"},
    "readonly": {".profile": "readonly PIP_CACHE_DIR=/p12\n"},
    "two on one line": {".profile": "export PIP_CACHE_DIR=/p13; export PIP_CACHE_DIR=/p13b\n"},
    "return when not interactive": {".profile": '[ -z "$PS1" ] && return\nexport PIP_CACHE_DIR=/p15\n'},
    "+=": {".profile": "export PIP_CACHE_DIR=/a\nexport PIP_CACHE_DIR+=/p22\n"},
    ".bashrc sourced by .profile": {".profile": '[ -n "$BASH_VERSION" ] && . "$HOME/.bashrc"\n',
                                    ".bashrc": "case $- in *i*) ;; *) return;; esac\n"
                                               "export PIP_CACHE_DIR=/rc\n"},
    "computed": {".profile": 'export PIP_CACHE_DIR="/c/$(echo sub)"\n'},
    "a file .profile sources": {".profile": ". ~/.config/env.sh\n",
                                ".config/env.sh": "export PIP_CACHE_DIR=/sourced\n"},
}


@pytest.mark.parametrize("case", list(BASH_MATRIX))
def test_bash_login_matrix(isolated_home: Path, case: str) -> None:
    bash = shell("bash")
    for rel, text in BASH_MATRIX[case].items():
        write(isolated_home / rel, text)
    truth = real_value(isolated_home, bash, "PIP_CACHE_DIR")
    got, problems = session_env(isolated_home, bash)
    assert problems == [] and got.get("PIP_CACHE_DIR", (None, ""))[0] == truth
    static, _ = session_env(isolated_home, bash, CACHEDOCTOR_NO_SHELL="1")
    for found in (got.get("PIP_CACHE_DIR"), static.get("PIP_CACHE_DIR")):
        if found is None or not found[1].startswith("~/"):
            continue
        value, origin = found
        file, line = origin.split(",")[0].rsplit(":", 1)  # a line named sets this very value
        text = (isolated_home / file[2:]).read_text().splitlines()[int(line) - 1]
        assert "PIP_CACHE_DIR" in text and value.rsplit("/", 1)[-1] in text


def test_the_process_environment_does_not_leak_into_the_answer(isolated_home: Path) -> None:
    bash = shell("bash")
    write(isolated_home / ".profile", "export FROM_FILE=/f\n")
    got, _ = session_env(isolated_home, bash, LEAKED_CACHE="/from/this/process")
    assert "LEAKED_CACHE" not in got and got["FROM_FILE"] == ("/f", "~/.profile:1")
    # what no file line explains is the shell's own word
    write(isolated_home / ".profile", 'export FROM_SHELL="$(echo /computed)"\n')
    got, _ = session_env(isolated_home, bash)
    assert got["FROM_SHELL"] == ("/computed", "your login shell (bash -l)")


def test_markers_cannot_be_faked_and_bytes_are_replaced(isolated_home: Path) -> None:
    bash = shell("bash")
    write(isolated_home / ".profile",
          "printf 'deadbeef\\0FAKE=1\\0deadbeef'\nexport LATIN=\"$(printf 'caf\\351')\"\n")
    got, problems = session_env(isolated_home, bash)
    assert problems == [] and "FAKE" not in got
    assert got["LATIN"][0] == "caf\ufffd"


def test_a_shell_that_hangs_is_killed_and_the_files_are_read_instead(isolated_home: Path,
                                                                     monkeypatch) -> None:
    bash = shell("bash")
    pid_file = isolated_home / "pid"
    write(isolated_home / ".profile", f"export DEMO_CACHE=/static\necho $$ > {pid_file}\n"
                                      "sleep 60 & sleep 60\n")
    monkeypatch.setattr(loginshell, "TIMEOUT", 0.5)
    began = time.monotonic()
    got, problems = session_env(isolated_home, bash)
    assert time.monotonic() - began < 5
    assert problems == ["could not run your login shell: bash -l gave no answer within 0.5 s; "
                        "the start-up files were read instead"]
    assert got["DEMO_CACHE"] == ("/static", "~/.profile:1")
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the shell and its whole process group are gone
    for _ in range(30):  # the killed `sleep` is reaped by init a moment later
        leftovers = subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True)
        if not leftovers.stdout:
            break
        time.sleep(0.1)
    assert leftovers.stdout == ""


def test_missing_unknown_and_disabled_shells(isolated_home: Path) -> None:
    write(isolated_home / ".profile", "export DEMO_CACHE=/static\n")
    got, problems = session_env(isolated_home, "/no/such/bash")
    assert got["DEMO_CACHE"] == ("/static", "~/.profile:1")
    assert problems and problems[0].startswith("could not run your login shell: /no/such/bash:")
    _, problems = session_env(isolated_home, "/bin/tcsh")
    assert problems == ["your login shell /bin/tcsh is not one cachedoctor runs (bash, dash, "
                        "fish, ksh, sh, zsh); the start-up files were read instead"]
    assert session_env(isolated_home, "/usr/sbin/nologin")[1] == []
    got, problems = session_env(isolated_home, shell("bash"), CACHEDOCTOR_NO_SHELL="1")
    assert problems == [] and got["DEMO_CACHE"] == ("/static", "~/.profile:1")
    assert not Path(loginshell.cache_file()).exists()


def test_another_users_start_up_files_are_not_run(isolated_home: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the home folder to another user")
    write(isolated_home / ".profile", "export DEMO_CACHE=/static\n")
    os.chown(isolated_home, 65534, 65534)
    try:
        got, problems = session_env(isolated_home, shell("bash"))
    finally:
        os.chown(isolated_home, 0, 0)
    assert problems == [f"{isolated_home} belongs to another user: their start-up files are "
                        "read, not run (as this user)"]
    assert got["DEMO_CACHE"] == ("/static", "~/.profile:1")


def test_the_answer_is_cached_until_a_start_up_file_changes(isolated_home: Path) -> None:
    bash = shell("bash")
    profile = write(isolated_home / ".profile", "export DEMO_CACHE=/one\nexport GH_TOKEN=secret\n")
    session = loginshell.session_of(host_for(isolated_home, bash))
    startup = shellenv.load(session, LiveFiles())
    first = loginshell.ask(bash, startup)
    assert not first.cached and first.env is not None and first.env["DEMO_CACHE"] == "/one"
    assert "GH_TOKEN" not in first.env  # credentials are never kept
    saved = json.loads(Path(loginshell.cache_file()).read_text())
    assert saved["env"]["DEMO_CACHE"] == "/one" and "secret" not in json.dumps(saved)
    assert oct(Path(loginshell.cache_file()).stat().st_mode & 0o777) == "0o600"
    loginshell._memo.clear()
    again = loginshell.ask(bash, shellenv.load(session, LiveFiles()))
    assert again.cached and again.env == first.env
    profile.write_text("export DEMO_CACHE=/two\n", encoding="utf-8")
    changed = loginshell.ask(bash, shellenv.load(session, LiveFiles()))
    assert not changed.cached and changed.env is not None and changed.env["DEMO_CACHE"] == "/two"
    # a file it sources counts too, and so does a new file the shell would read first
    write(isolated_home / ".bash_profile", "export DEMO_CACHE=/three\n")
    assert loginshell.ask(bash, shellenv.load(session, LiveFiles())).env["DEMO_CACHE"] == "/three"


def test_block_overrides_found_before_a_move_writes_them(isolated_home: Path) -> None:
    """A user line that runs after cachedoctor's block (later in the same file, in a file
    read after it) wins in the real shell: `overridden_by` says so, from the files alone."""
    bash = shell("bash")
    host = host_for(isolated_home, bash)
    write(isolated_home / ".profile", ". ~/.bashrc\n")
    write(isolated_home / ".bashrc", "export PIP_CACHE_DIR=/mine-before\n")
    set_variables({"PIP_CACHE_DIR": "/dest"}, host=host)  # both files get the block
    assert posix.overridden_by({"PIP_CACHE_DIR": "/dest"}, host, LiveFiles()) == {}
    assert real_value(isolated_home, bash, "PIP_CACHE_DIR") == "/dest"
    write(isolated_home / ".config/late.sh", "export PIP_CACHE_DIR=/mine-after\n")
    with (isolated_home / ".profile").open("a") as fh:
        fh.write(". ~/.config/late.sh\n")  # after .profile's block: its line runs last
    found = posix.overridden_by({"PIP_CACHE_DIR": "/dest", "OTHER": "/x"}, host, LiveFiles())
    assert [a.origin for a in found["PIP_CACHE_DIR"]] == ["~/.config/late.sh:1"]
    assert real_value(isolated_home, bash, "PIP_CACHE_DIR") == "/mine-after"
    # fish: the block is last in config.fish; a line appended after it wins again
    fish = shell("fish")
    fish_host = host_for(isolated_home, fish)
    config = write(isolated_home / ".config/fish/config.fish", "set -gx PIP_CACHE_DIR /early\n")
    set_variables({"PIP_CACHE_DIR": "/dest"}, host=fish_host)
    assert posix.overridden_by({"PIP_CACHE_DIR": "/dest"}, fish_host, LiveFiles()) == {}
    assert real_value(isolated_home, fish, "PIP_CACHE_DIR") == "/dest"
    with config.open("a") as fh:
        fh.write("set -e PIP_CACHE_DIR\n")
    found = posix.overridden_by({"PIP_CACHE_DIR": "/dest"}, fish_host, LiveFiles())
    assert [(a.origin, a.value) for a in found["PIP_CACHE_DIR"]] == [
        ("~/.config/fish/config.fish:6", None)]
    assert real_value(isolated_home, fish, "PIP_CACHE_DIR") is None
    # zsh: the block goes into .zshrc, which runs before .zlogin — found before anything is
    # written (the planned block is read in), so a move by variable is refused or falls back
    zsh = shell("zsh")
    zsh_host = host_for(isolated_home, zsh)
    write(isolated_home / ".zlogin", "export PIP_CACHE_DIR=/mine-zlogin\n")
    found = posix.overridden_by({"PIP_CACHE_DIR": "/dest"}, zsh_host, LiveFiles())
    assert [a.origin for a in found["PIP_CACHE_DIR"]] == ["~/.zlogin:1"]


def test_where_names_the_login_shell_and_the_line(isolated_home: Path, tmp_path: Path) -> None:
    bash = shell("bash")
    os.environ["SHELL"] = bash
    write(isolated_home / ".bash_profile", f"export PIP_CACHE_DIR={tmp_path}/pip\n"
                                           f"export UV_CACHE_DIR=\"$(echo {tmp_path}/uv)\"\n")
    out = run_cli("where", "pip", "uv", "--json")
    rows = {row["tool"]: row for row in json.loads(out.stdout)["result"]["locations"]}
    assert rows["pip"]["places"][0]["path"] == f"{tmp_path}/pip"
    assert "~/.bash_profile:1" in rows["pip"]["places"][0]["how"]
    assert rows["uv"]["places"][0]["how"] == "env UV_CACHE_DIR (from your login shell (bash -l))"
