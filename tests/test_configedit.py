"""Format-preserving config editing: real files of every format, byte-for-byte checks."""

from __future__ import annotations

import difflib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cachedoctor.configedit import (
    ConfigSyntaxError,
    get_in_text,
    get_key,
    remove_in_text,
    remove_key,
    set_in_text,
    set_key,
)
from cachedoctor.configedit.jsonc import loads
from cachedoctor.errors import UserInputError
from tests.conftest import needs_symlinks

DATA = Path(__file__).parent / "data" / "settings"


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """Lines removed and added (line endings kept), from a line diff."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    removed, added = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += old[i1:i2]
            added += new[j1:j2]
    return removed, added


def strip_jsonc(text: str) -> object:
    return loads(text, jsonc=True)


# --- JSONC: VS Code settings ------------------------------------------------------------------


def test_jsonc_replace_flat_dotted_key_keeps_every_other_byte():
    text = (DATA / "vscode-tabs-crlf.json").read_bytes().decode()
    after = set_in_text(text, "jsonc", "grok.code.cacheSize", 8192)
    removed, added = changed_lines(text, after)
    assert removed == ['\t"grok.code.cacheSize": 2048, // the default\r\n']
    assert added == ['\t"grok.code.cacheSize": 8192, // the default\r\n']
    # the commented-out fake key inside the block comment is untouched
    assert '"grok.code.cacheSize": 1 */' in after


def test_jsonc_insert_matches_tabs_crlf_and_trailing_comma_habit():
    text = (DATA / "vscode-tabs-crlf.json").read_bytes().decode()
    after = set_in_text(text, "jsonc", "grok.code.cacheStrategy", "lfu")
    removed, added = changed_lines(text, after)
    assert removed == []
    assert added == ['\t"grok.code.cacheStrategy": "lfu",\r\n']
    assert "\n" not in after.replace("\r\n", "")  # no bare LF sneaked in
    assert strip_jsonc(after)["grok.code.cacheStrategy"] == "lfu"  # type: ignore[index]
    assert strip_jsonc(after)["workbench.colorTheme"] == "Solarized — Dark ✓"  # type: ignore[index]


def test_jsonc_insert_without_trailing_comma_adds_one_comma_only(tmp_path):
    text = (DATA / "vscode-spaces.json").read_text()
    after = set_in_text(text, "jsonc", "grok.code.cacheTTL", 300000)
    removed, added = changed_lines(text, after)
    assert removed == ["    }\n"]
    assert added == ["    },\n", '    "grok.code.cacheTTL": 300000\n']
    data = strip_jsonc(after)
    assert data["grok.code"] == {"nested": "an object named grok.code, distinct from flat keys"}  # type: ignore[index]


def test_jsonc_flat_and_nested_keys_are_distinct():
    text = (DATA / "vscode-spaces.json").read_text()
    flat = set_in_text(text, "jsonc", "grok.code.nested", "flat")
    nested = set_in_text(text, "jsonc", ["grok.code", "nested"], "inner")
    assert get_in_text(flat, "jsonc", "grok.code.nested") == "flat"
    assert get_in_text(flat, "jsonc", ["grok.code", "nested"]).startswith("an object")
    assert get_in_text(nested, "jsonc", ["grok.code", "nested"]) == "inner"
    with pytest.raises(KeyError):
        get_in_text(nested, "jsonc", "grok.code.nested")


def test_jsonc_nested_insert_into_object_with_comment_after_last_member():
    text = '{\n  "a": {\n    "x": 1 // keep me\n  }\n}\n'
    after = set_in_text(text, "jsonc", ["a", "y"], [1, 2])
    assert after == '{\n  "a": {\n    "x": 1, // keep me\n    "y": [1, 2]\n  }\n}\n'


def test_jsonc_creates_missing_parents_and_empty_object_members():
    text = (DATA / "vscode-empty.json").read_text()
    after = set_in_text(text, "jsonc", ["cache", "ttl"], 5)
    assert after.startswith("{\n  // VS Code creates this for a fresh profile\n")
    assert get_in_text(after, "jsonc", ["cache", "ttl"]) == 5
    assert set_in_text("", "jsonc", "k", True) == '{\n\t"k": true\n}\n'
    assert set_in_text('{"a": 1}', "json", "b", "c") == '{"a": 1, "b": "c"}'


def test_jsonc_set_is_idempotent_and_remove_restores_original():
    text = (DATA / "vscode-tabs-crlf.json").read_bytes().decode()
    once = set_in_text(text, "jsonc", "grok.code.cacheStrategy", "lfu")
    assert set_in_text(once, "jsonc", "grok.code.cacheStrategy", "lfu") == once
    assert remove_in_text(once, "jsonc", "grok.code.cacheStrategy") == text
    spaces = (DATA / "vscode-spaces.json").read_text()
    added = set_in_text(spaces, "jsonc", "new.key", {"deep": [1, {"x": None}]})
    assert remove_in_text(added, "jsonc", "new.key") == spaces


def test_jsonc_remove_inline_and_middle_members():
    assert remove_in_text('{"a": 1, "b": 2, "c": 3}', "json", "b") == '{"a": 1, "c": 3}'
    assert remove_in_text('{"a": 1, "b": 2}', "json", "b") == '{"a": 1}'
    text = '{\n\t"a": 1,\n\t"b": 2 // note\n}\n'
    assert remove_in_text(text, "jsonc", "b") == '{\n\t"a": 1\n}\n'
    assert remove_in_text(text, "jsonc", "missing") == text


def test_jsonc_value_replacement_of_object_reindents():
    text = '{\n\t"x": {\n\t\t"old": true,\n\t},\n}'
    after = set_in_text(text, "jsonc", "x", {"a": 1})
    assert after == '{\n\t"x": {\n\t\t"a": 1\n\t},\n}'


@pytest.mark.parametrize(("text", "line", "column"), [
    ('{\n  "a": 1,\n  "b": [1, 2\n}\n', 4, 1),
    ('{\n  "a": "unterminated\n}', 2, 8),
    ('{\n  /* never closed\n  "a": 1\n}', 2, 3),
    ('{\n  "a" 1\n}', 2, 7),
    ('{"a": 1} trailing', 1, 10),
])
def test_jsonc_malformed_reports_line_and_column(text, line, column):
    with pytest.raises(ConfigSyntaxError) as info:
        set_in_text(text, "jsonc", "k", 1)
    assert (info.value.line, info.value.column) == (line, column)


def test_strict_json_refuses_comments_and_trailing_commas():
    with pytest.raises(ConfigSyntaxError):
        set_in_text('{"a": 1, // c\n}', "json", "k", 1)
    with pytest.raises(ConfigSyntaxError, match="trailing comma"):
        set_in_text('{"a": 1,}', "json", "k", 1)


def test_set_key_malformed_file_is_left_untouched(tmp_path):
    path = tmp_path / "settings.json"
    original = b'{\r\n\t"a": 1,\r\n\t"b": \r\n}\r\n'
    path.write_bytes(original)
    before = path.stat()
    with pytest.raises(UserInputError, match=r"settings\.json:4:1: malformed file"):
        set_key(path, "jsonc", "grok.code.cacheSize", 8192)
    assert path.read_bytes() == original
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(os.listdir(tmp_path)) == ["settings.json"]  # no temp file left behind


def test_set_key_file_roundtrip_dry_run_and_diff(tmp_path):
    path = tmp_path / "User" / "settings.json"
    path.parent.mkdir()
    original = (DATA / "vscode-tabs-crlf.json").read_bytes()
    path.write_bytes(original)
    os.chmod(path, 0o600)
    preview = set_key(path, "jsonc", "grok.code.cacheSize", 8192, dry_run=True)
    assert preview.changed and path.read_bytes() == original
    assert "-\t\"grok.code.cacheSize\": 2048, // the default" in preview.diff
    assert "+\t\"grok.code.cacheSize\": 8192, // the default" in preview.diff
    edit = set_key(path, "jsonc", "grok.code.cacheSize", 8192)
    assert edit.old_value == 2048
    assert path.read_bytes() == edit.after.encode()
    if sys.platform != "win32":  # Windows keeps only a read-only bit
        assert path.stat().st_mode & 0o777 == 0o600
    assert get_key(path, "jsonc", "grok.code.cacheSize") == 8192
    again = set_key(path, "jsonc", "grok.code.cacheSize", 8192)
    assert not again.changed and again.diff == ""
    back = set_key(path, "jsonc", "grok.code.cacheSize", 2048)
    assert path.read_bytes() == original and back.changed
    assert not remove_key(tmp_path / "absent.json", "json", "k").changed
    with pytest.raises(KeyError):
        get_key(tmp_path / "absent.json", "json", "k")


def test_set_key_creates_file_and_folders_and_respects_create_false(tmp_path):
    target = tmp_path / "a" / "b" / "settings.json"
    with pytest.raises(UserInputError, match="does not exist"):
        set_key(target, "jsonc", "k", 1, create=False)
    assert not target.parent.exists()
    edit = set_key(target, "jsonc", "k", 1)
    assert edit.before is None and json.loads(target.read_text()) == {"k": 1}


@needs_symlinks
def test_symlinked_config_stays_a_link(tmp_path):
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"a": 1}\n')
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    set_key(link, "json", "b", 2)
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {"a": 1, "b": 2}


# --- YAML -------------------------------------------------------------------------------------


def test_yaml_comments_anchors_and_quotes_survive():
    text = (DATA / "claude-config.yaml").read_text()
    after = text
    for key, value in ((["cache", "ttl"], 3600000), (["cache", "eviction_policy"], "none"),
                       (["cache", "warmup_on_start"], True)):
        after = set_in_text(after, "yaml", key, value)
    removed, added = changed_lines(text, after)
    assert removed == []
    assert added == ["  ttl: 3600000\n", "  eviction_policy: none\n", "  warmup_on_start: true\n"]
    assert get_in_text(after, "yaml", ["defaults", "ttl"]) == 600000  # the anchor is untouched
    assert get_in_text(after, "yaml", ["cache", "ttl"]) == 3600000


def test_yaml_scalar_replacement_is_a_span_edit_keeping_quotes_and_comment():
    text = (DATA / "claude-config.yaml").read_text()
    after = set_in_text(text, "yaml", ["cache", "dir"], "/mnt/d/claude cache")
    removed, added = changed_lines(text, after)
    assert removed == ['  dir: "~/.claude/cache"   # quoted on purpose\n']
    assert added == ['  dir: "/mnt/d/claude cache"   # quoted on purpose\n']
    after = set_in_text(text, "yaml", ["defaults", "ttl"], 1)
    assert changed_lines(text, after) == (["  ttl: 600000       # 10 minutes\n"],
                                          ["  ttl: 1       # 10 minutes\n"])
    # through the alias, the merged value changes too: that is what the file means
    assert get_in_text(after, "yaml", ["cache", "ttl"]) == 1


def test_yaml_crlf_list_values_and_remove():
    text = "# conda\r\nchannels:\r\n  - conda-forge\r\npkgs_dirs:\r\n  - /old/pkgs\r\n\r\nauto_update_conda: false\r\n"
    after = set_in_text(text, "yaml", "pkgs_dirs", ["/mnt/d/conda/pkgs"])
    assert get_in_text(after, "yaml", "pkgs_dirs") == ["/mnt/d/conda/pkgs"]
    assert "\n" not in after.replace("\r\n", "")
    assert after.startswith("# conda\r\nchannels:\r\n  - conda-forge\r\n")
    assert after.endswith("\r\n\r\nauto_update_conda: false\r\n")
    removed = remove_in_text(text, "yaml", "pkgs_dirs")
    assert removed == "# conda\r\nchannels:\r\n  - conda-forge\r\n\r\nauto_update_conda: false\r\n"


def test_yaml_new_file_and_malformed():
    assert set_in_text("", "yaml", ["cache", "ttl"], 5) == "cache:\n  ttl: 5\n"
    with pytest.raises(ConfigSyntaxError) as info:
        set_in_text("cache:\n  ttl: 1\n   bad: [\n", "yaml", "k", 1)
    assert info.value.line >= 3


# --- TOML / INI / npmrc -----------------------------------------------------------------------


def test_toml_adds_table_and_keeps_comments():
    text = "# ~/.cargo/config.toml\n[net]\nretry = 3  # flaky wifi\n\n[build]\njobs = 4\n"
    after = set_in_text(text, "toml", ["cache", "auto-clean-frequency"], "1 day")
    assert after.startswith(text)
    assert get_in_text(after, "toml", ["cache", "auto-clean-frequency"]) == "1 day"
    again = set_in_text(after, "toml", ["net", "retry"], 5)
    assert changed_lines(after, again) == (["retry = 3  # flaky wifi\n"], ["retry = 5  # flaky wifi\n"])
    assert set_in_text(again, "toml", ["net", "retry"], 5) == again
    assert get_in_text(set_in_text("", "toml", "a.b", 1), "toml", "a.b") == 1  # flat dotted key
    with pytest.raises(ConfigSyntaxError) as info:
        set_in_text("[net]\nretry = = 3\n", "toml", "k", 1)
    assert info.value.line == 2


def test_ini_pip_conf_keeps_comments_and_spacing():
    text = "# pip config\n[global]\ntimeout = 60\nindex-url=https://pypi.org/simple\n\n; install\n[install]\nno-compile = yes\n"
    after = set_in_text(text, "ini", "cache-dir", "/mnt/d/pip", section="global")
    assert changed_lines(text, after) == ([], ["cache-dir = /mnt/d/pip\n"])
    assert after.index("cache-dir") < after.index("[install]")
    replaced = set_in_text(after, "ini", "TIMEOUT", "5", section="global")
    assert changed_lines(after, replaced) == (["timeout = 60\n"], ["timeout = 5\n"])
    assert remove_in_text(after, "ini", "cache-dir", section="global") == text
    fresh = set_in_text("", "ini", "cache-dir", "/x", section="global")
    assert fresh == "[global]\ncache-dir = /x\n"
    appended = set_in_text("[install]\nx = 1\n", "ini", "cache-dir", "/x", section="global")
    assert appended == "[install]\nx = 1\n\n[global]\ncache-dir = /x\n"
    with pytest.raises(ConfigSyntaxError) as info:
        set_in_text("[global]\njust some words\n", "ini", "k", "v", section="global")
    assert (info.value.line, info.value.column) == (2, 1)


def test_npmrc_line_edits():
    text = "; npm user config\r\nregistry=https://registry.npmjs.org/\r\n//registry.npmjs.org/:_authToken=${NPM_TOKEN}\r\n"
    after = set_in_text(text, "npmrc", "cache", "/mnt/d/npm-cache")
    assert after == text + "cache=/mnt/d/npm-cache\r\n"
    assert get_in_text(after, "npmrc", "//registry.npmjs.org/:_authToken") == "${NPM_TOKEN}"
    assert remove_in_text(after, "npmrc", "cache") == text
    no_newline = set_in_text("registry=x", "npmrc", "cache", "/c")
    assert no_newline == "registry=x\ncache=/c\n"


# --- crash safety -----------------------------------------------------------------------------

_WRITER = r"""
import sys
from pathlib import Path
from cachedoctor.configedit import set_key
path = Path(sys.argv[1])
print("ready", flush=True)
i = 0
while True:
    i += 1
    set_key(path, "jsonc", "grok.code.cacheSize", 1000 + i % 7)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_kill_during_writes_leaves_old_or_new_file_never_truncated(tmp_path):
    path = tmp_path / "settings.json"
    original = (DATA / "vscode-tabs-crlf.json").read_bytes().decode()
    path.write_text(original, newline="")
    valid = {set_in_text(original, "jsonc", "grok.code.cacheSize", 1000 + n) for n in range(7)}
    valid.add(original)
    rng = random.Random(4)
    for _trial in range(25):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert path.read_bytes().decode() in valid
    leftovers = [p for p in os.listdir(tmp_path) if p != "settings.json"]
    # a killed writer may leave its temp file; never a damaged target
    assert all(p.startswith(".settings.json.") and p.endswith(".tmp") for p in leftovers)
