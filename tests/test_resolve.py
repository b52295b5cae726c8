"""Pure path resolution: (template, OS, environment, home) -> path, for every OS on Linux."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cachedoctor.errors import UserInputError
from cachedoctor.host import Host
from cachedoctor.resolve import (
    UnresolvedVariable,
    _closing_brace,
    _expand_tilde,
    expand,
    has_glob,
    normalize,
    to_host_path,
    try_expand,
)

LINUX = Host("linux", {"USER": "ann"}, "/home/ann")
WSL = Host("wsl", {"USER": "ann"}, "/home/ann")
MAC = Host("macos", {"USER": "ann"}, "/Users/ann")
WIN = Host(
    "windows",
    {"LOCALAPPDATA": r"C:\Users\ann\AppData\Local", "UserProfile": r"C:\Users\ann", "TEMP": r"C:\Tmp"},
    r"C:\Users\ann",
)
XDG = "${XDG_CACHE_HOME:-~/.cache}/pip"


def test_tilde_and_posix_variables() -> None:
    assert expand("~/.cache/x", LINUX) == "/home/ann/.cache/x"
    assert expand("/tmp/torchinductor_$USER", LINUX) == "/tmp/torchinductor_ann"
    assert expand("/tmp/${USER}-cache/", LINUX) == "/tmp/ann-cache"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "/home/ann/.cache/pip"),  # unset
        ("", "/home/ann/.cache/pip"),  # empty
        ("relative/cache", "/home/ann/.cache/pip"),  # relative: invalid per the XDG spec
        ("/srv/cache", "/srv/cache/pip"),
    ],
)
def test_xdg_fallbacks(value: str | None, expected: str) -> None:
    env = {} if value is None else {"XDG_CACHE_HOME": value}
    assert expand(XDG, Host("linux", env, "/home/ann")) == expected


def test_nested_fallbacks() -> None:
    template = "${HF_HUB_CACHE:-${HF_HOME:-${XDG_CACHE_HOME:-~/.cache}/huggingface}/hub}"
    assert expand(template, LINUX) == "/home/ann/.cache/huggingface/hub"
    assert expand(template, Host("linux", {"HF_HOME": "/data/hf"}, "/home/ann")) == "/data/hf/hub"
    both = Host("linux", {"HF_HOME": "/data/hf", "HF_HUB_CACHE": "/fast/hub"}, "/home/ann")
    assert expand(template, both) == "/fast/hub"


def test_windows_variables_are_case_insensitive_and_normalised() -> None:
    assert expand(r"%LocalAppData%\pip\Cache", WIN) == r"C:\Users\ann\AppData\Local\pip\Cache"
    assert expand("%USERPROFILE%/.cache/huggingface", WIN) == r"C:\Users\ann\.cache\huggingface"
    assert expand(r"~\.ollama\models", WIN) == r"C:\Users\ann\.ollama\models"


def test_unset_variable_without_fallback() -> None:
    with pytest.raises(UnresolvedVariable) as info:
        expand("%APPDATA%\\Code", WIN)
    assert info.value.name == "APPDATA"
    assert try_expand("$NOPE/x", LINUX) is None


def test_globs_are_kept_for_later_expansion() -> None:
    path = expand(r"%LOCALAPPDATA%\Google\Chrome\User Data\Profile *\Cache", WIN)
    assert path == r"C:\Users\ann\AppData\Local\Google\Chrome\User Data\Profile *\Cache"
    assert has_glob(path)


def test_macos_paths() -> None:
    assert expand("~/Library/Caches/pip", MAC) == "/Users/ann/Library/Caches/pip"


def test_windows_drive_destination_on_wsl(monkeypatch: pytest.MonkeyPatch) -> None:
    """D: as WSL mounted it (here: the mount table, as /proc/self/mounts shows a WSL 2 drive);
    the translation against mounts that are not there is in tests/test_platform_wsl.py."""
    from cachedoctor import drives

    table = drives.parse_proc_mounts(
        "C:\\134 /mnt/c 9p rw,noatime,aname=drvfs;path=C:\\;uid=1000 0 0\n"
        "D:\\134 /mnt/d 9p rw,noatime,aname=drvfs;path=D:\\;uid=1000 0 0\n"
        "E:\\134 /mnt/e 9p rw,noatime,aname=drvfs;path=E:\\;uid=1000 0 0\n")
    monkeypatch.setattr(drives, "partitions", lambda: table)
    monkeypatch.setattr(drives, "wslpath", lambda text: None)
    assert to_host_path(r"D:\ai-cache", WSL) == "/mnt/d/ai-cache"
    assert to_host_path("E:/x/y/", WSL) == "/mnt/e/x/y"
    assert to_host_path("D:", WSL) == "/mnt/d"
    assert to_host_path(r"D:\ai-cache", WIN) == r"D:\ai-cache"
    assert to_host_path("~/ai-cache", LINUX) == "/home/ann/ai-cache"
    with pytest.raises(UserInputError, match="Windows drive path"):
        to_host_path(r"D:\ai-cache", LINUX)
    with pytest.raises(UserInputError):
        to_host_path(r"D:\ai-cache", MAC)


def test_wsl_uses_linux_keys_after_its_own() -> None:
    assert WSL.profile_keys == ("wsl", "linux")
    assert LINUX.profile_keys == ("linux",)


def test_literal_percent_and_bad_templates() -> None:
    assert expand("/tmp/100%/x", LINUX) == "/tmp/100%/x"
    with pytest.raises(UserInputError):
        expand("${HOME", LINUX)


def _closing_by_definition(text: str, open_at: int) -> int | None:
    depth = 0
    for index in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return index
    return None


@given(st.text(alphabet="{}$:-~/aZ", max_size=16), st.data())
def test_the_closing_brace_is_the_one_that_balances_the_opening(text: str, data: Any) -> None:
    """`_closing_brace` jumps from `}` to `}`; it finds what counting every character finds."""
    text = "{" + text
    open_at = data.draw(st.sampled_from([i for i, char in enumerate(text) if char == "{"]))
    expected = _closing_by_definition(text, open_at)
    if expected is None:
        with pytest.raises(UserInputError, match="unbalanced braces"):
            _closing_brace(text, open_at)
    else:
        assert _closing_brace(text, open_at) == expected


@given(st.text(alphabet=st.characters(max_codepoint=0x17F), max_size=8))
def test_a_variable_name_is_what_the_name_pattern_matches_in_full(name: str) -> None:
    """`${NAME}` checks its name with `isascii() and isidentifier()`, not `_NAME.fullmatch`."""
    from cachedoctor.resolve import _NAME

    assert (name.isascii() and name.isidentifier()) == (_NAME().fullmatch(name) is not None)


@given(st.text(alphabet="~/\\.:-_{}aZ0 é*", max_size=24))
def test_a_template_without_a_dollar_or_percent_is_only_normalised(template: str) -> None:
    for host in (LINUX, WIN):
        assert expand(template, host) == normalize(_expand_tilde(template, host), host)
