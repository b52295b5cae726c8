"""Reading start-up files without running them (the explanation, and the fallback when the
login shell cannot be asked): each shell's own files and order, over plain data."""

from __future__ import annotations

import pytest

from cachedoctor.envvars.posix import render_block
from cachedoctor.locate import shellenv
from cachedoctor.locate.files import DictFiles

HOME = "/home/ann"
CONFIG = f"{HOME}/.config"
BASE = {"HOME": HOME, "PATH": "/usr/bin:/bin", "USER": "ann"}


def session(shell: str | None, os_name: str = "linux") -> shellenv.Session:
    return shellenv.Session(shell, HOME, CONFIG, os_name, BASE)


def values(shell: str | None, texts: dict[str, str], os_name: str = "linux") -> dict[str, tuple[str | None, str]]:
    startup = shellenv.load(session(shell, os_name), DictFiles(texts={f"{HOME}/{k}" if not k.startswith("/") else k: v
                                                                     for k, v in texts.items()}))
    return {name: (a.value, a.origin) for name, a in startup.final().items()}


def test_each_shell_reads_its_own_files_in_its_own_order() -> None:
    files = {".profile": "export X=profile\n", ".bash_profile": "export Y=bash_profile\n",
             ".bashrc": "export X=bashrc\n", ".zshenv": "export X=zshenv\n",
             ".zshrc": "export Z=zshrc\n", ".zlogin": "export X=zlogin\n",
             ".kshrc": "export K=kshrc\n",
             ".config/fish/conf.d/b.fish": "set -gx X conf-b\n",
             ".config/fish/conf.d/a.fish": "set -gx X conf-a\nset -gx A a\n",
             ".config/fish/config.fish": "set -gx F config\n"}
    assert values("bash", files) == {"Y": ("bash_profile", "~/.bash_profile:1")}
    assert values("dash", files) == {"X": ("profile", "~/.profile:1")}
    assert values("ksh", files) == {"X": ("profile", "~/.profile:1"), "K": ("kshrc", "~/.kshrc:1")}
    assert values("zsh", files) == {"X": ("zlogin", "~/.zlogin:1"), "Z": ("zshrc", "~/.zshrc:1")}
    assert values("fish", files) == {"X": ("conf-b", "~/.config/fish/conf.d/b.fish:1"),
                                     "A": ("a", "~/.config/fish/conf.d/a.fish:2"),
                                     "F": ("config", "~/.config/fish/config.fish:1")}
    # a shell cachedoctor does not know: every file any of them reads
    assert values(None, files)["X"] == ("conf-b", "~/.config/fish/conf.d/b.fish:1")


def test_zdotdir_sourcing_cycles_and_the_session_prelude() -> None:
    files = {".zshenv": "export ZDOTDIR=$HOME/.zsh\n", ".zsh/.zshrc": "export Z=/in/zdotdir\n",
             ".zshrc": "export Z=/not/read\n"}
    assert values("zsh", files)["Z"] == ("/in/zdotdir", "~/.zsh/.zshrc:1")
    cycle = {".profile": ". ~/.a\nexport P=1\n", ".a": "source $HOME/.profile\nexport A=1\n"}
    assert values("sh", cycle)["A"] == ("1", "~/.a:2")  # followed, and the loop ends
    envd = {"/etc/environment": "E=/etc\n", ".config/environment.d/10.conf": "E=$E/user\nD=${E}\n",
            ".profile": "export P=$E\n"}
    linux = values("sh", envd)
    assert linux["E"] == ("/etc/user", "~/.config/environment.d/10.conf:1")
    assert linux["P"] == ("/etc/user", "~/.profile:1")
    assert "E" not in values("sh", envd, "macos")


@pytest.mark.parametrize(("text", "expected"), [
    ("X=1\nexport X\n", ("1", 1)),
    ("export X\nX=2\n", ("2", 2)),
    ("PATH=$HOME/bin:$PATH\n", None),  # PATH was exported: changed, still exported
    ("X=$(date)\nexport X\n", None),
    ("export X=`date`\n", None),
    ("export X=~/a:~/b\n", ("/home/ann/a:/home/ann/b", 1)),
    ("export X=\"$HOME\"'/$q'\n", ("/home/ann/$q", 1)),
    ("export X=${NOPE-dflt} Y=${HOME:+set}\n", ("dflt", 1)),
    ("declare -x X=d\n", ("d", 1)),
    ("typeset -gx X=t\n", ("t", 1)),
    ("local X=l\n", None),
    ("declare -a X=(1 2)\n", None),
    ("X=1 some-command\n", None),
    ("if [ -d /x ]; then export X=/x; fi\n", ("/x", 1)),
    ("function f {\n export X=no\n}\nf2() (\n export X=no2\n)\ng()\n{\n X=3\n}\n", None),
    ("f() ( export X=no )\nexport X=after\n", ("after", 2)),
    ("unset -f X\n", None),
    ("export X=1 # export X=2\n", ("1", 1)),
    ("[ -f ~/.x ] && export X=chained\n", ("chained", 1)),
])
def test_sh_forms(text: str, expected: tuple[str, int] | None) -> None:
    found = {a.name: a for a in shellenv.parse(text, "sh", "f", BASE, HOME)}
    if text.startswith("PATH"):
        assert found["PATH"].value == "/home/ann/bin:/usr/bin:/bin"
        return
    got = (found["X"].value, found["X"].line) if "X" in found else None
    assert got == expected


def test_fish_forms() -> None:
    text = ("set -gx PATH $PATH ~/bin\nset -Ux U u\nset -g G g\nset -gx L a b\n"
            "set -gx -a L c\nset -gx Q 'it\\'s' \"$HOME/q\"\nset -e L\nset -gx C (date)\n"
            "test -d /x; and set -gx AND yes\nfunction f\n  if true\n    set -gx NO 1\n  end\nend\n")
    found = shellenv.parse(text, "fish", "config.fish", BASE, HOME)
    final = {a.name: a.value for a in found}
    assert final == {"PATH": "/usr/bin:/bin:/home/ann/bin", "U": "u", "L": None,
                     "Q": "it's /home/ann/q", "AND": "yes"}


def test_later_assignments_say_what_would_override_the_block() -> None:
    block = render_block({"PIP_CACHE_DIR": "/dest"}, "sh")
    files = DictFiles(texts={
        f"{HOME}/.profile": "export PIP_CACHE_DIR=/before\n" + block + ". ~/.late\n",
        f"{HOME}/.late": "unset PIP_CACHE_DIR\nexport OTHER=1\n",
        f"{HOME}/.bashrc": "export PIP_CACHE_DIR=/bashrc-never-read\n",
    })
    later = shellenv.later_assignments("PIP_CACHE_DIR", [f"{HOME}/.profile", f"{HOME}/.bashrc"],
                                       files, session("bash"))
    assert [(a.origin, a.value) for a in later] == [("~/.late:1", None)]
    # no block yet: it would be appended at the end of the file, after every line of it
    plain = DictFiles(texts={f"{HOME}/.profile": "export PIP_CACHE_DIR=/mine\n"})
    assert shellenv.later_assignments("PIP_CACHE_DIR", [f"{HOME}/.profile"], plain,
                                      session("sh")) == []
    # the zsh user's .zlogin runs after .zshrc's block
    zsh = DictFiles(texts={f"{HOME}/.zshrc": "", f"{HOME}/.zlogin": "export PIP_CACHE_DIR=/z\n"})
    assert [a.origin for a in shellenv.later_assignments(
        "PIP_CACHE_DIR", [f"{HOME}/.zshrc"], zsh, session("zsh"))] == ["~/.zlogin:1"]


def test_origin_of_and_secrets() -> None:
    startup = shellenv.load(session("sh"), DictFiles(texts={
        f"{HOME}/.profile": "export A=/one\nexport A=/two\n"}))
    found = shellenv.origin_of("A", "/one", startup)
    assert found is not None and found.origin == "~/.profile:1"
    assert shellenv.origin_of("A", "/three", startup) is None
    assert all(shellenv.is_secret(n) for n in ("GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY",
                                               "PGPASSWORD", "NPM_AUTH"))
    assert not any(shellenv.is_secret(n) for n in ("PIP_CACHE_DIR", "HF_HOME", "KEYTIMEOUT"))
