"""Profile loading: validation messages with file/line/field, overrides, isolation of broken files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from cachedoctor.profiles.loader import (
    ProfileFileError,
    load_profile_file,
    load_profiles,
    parse_profile,
    user_profiles_dir,
)
from tests.conftest import IS_WINDOWS, result_of, run_cli, user_cache_root

GOOD = """\
id: demo
name: Demo tool
description: A demo cache.
processes: {linux: demo, windows: demo.exe}
locations:
  - id: cache
    paths:
      linux: ${XDG_CACHE_HOME:-~/.cache}/demo
      macos: ~/Library/Caches/demo
      windows: '%LOCALAPPDATA%\\demo\\Cache'
    safe_to_delete: true
    relocate:
      - method: link
      - method: env
        vars: {DEMO_CACHE: "{dest}"}
    clean:
      command: [demo, cache, purge]
      keep: ["keep/**"]
tune:
  - id: default
    file: {linux: ~/.config/demo/settings.json}
    format: jsonc
    settings:
      - key: demo.cache.size
        value: 8192
      - key: [cache, ttl]
        value: 3600
checks:
  - id: on-tmpfs
    severity: warning
    when: {type: filesystem_type, location: cache, types: [tmpfs]}
    message: the cache is in RAM
    why: it is lost at reboot
    fix: cachedoctor move demo ~/ai-cache
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def errors_of(text: str) -> list[str]:
    with pytest.raises(ProfileFileError) as info:
        parse_profile(text, "p.yaml")
    return [str(e) for e in info.value.errors]


def test_good_profile_loads_with_flat_and_nested_keys() -> None:
    profile = parse_profile(GOOD, "demo.yaml")
    assert profile.id == "demo"
    preset = profile.preset("default")
    assert preset.settings[0].key == "demo.cache.size"  # one flat key, dots included
    assert preset.settings[1].key == ["cache", "ttl"]  # a nested path
    assert profile.location("cache").relocate[1].method == "env"


@pytest.mark.parametrize(
    ("old", "new", "at", "expected"),
    [
        ("    safe_to_delete: true\n", "", "  - id: cache", "locations[0].safe_to_delete: required field is missing"),
        ("      - method: link\n", "      - method: teleport\n", "teleport", "locations[0].relocate[0]: unknown type 'teleport'"),
        ("types: [tmpfs]", "types: []", "types: []", "checks[0].when.types: expected at least 1 item"),
        ("severity: warning", "severity: fatal", "fatal", "checks[0].severity: expected 'error', 'warning' or 'hint' (got 'fatal')"),
        ("    safe_to_delete: true\n", "    safe_to_delete: true\n    colour: blue\n", "colour", "locations[0].colour: unknown field"),
        ("location: cache, types", "location: nowhere, types", "nowhere", "checks[0].when[0].location: unknown location 'nowhere'; known: cache"),
        ("id: demo\n", "id: Demo Tool\n", "Demo Tool", "id: expected an id: up to 64 lower-case letters, digits, `_`, `.` or `-`, starting with a letter or digit (got 'Demo Tool')"),
        ("value: 8192\n", "value: 8192\n        value: 1\n", "value: 1", "tune[0].settings[0].value: duplicate key"),
        ("checks:\n", "  - id: default\n    format: env\n    settings: [{key: X, value: 1}]\nchecks:\n", "default\n    format: env", "tune[1].id: duplicate id 'default'"),
    ],
)
def test_errors_name_file_line_and_field(old: str, new: str, at: str, expected: str) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    messages = errors_of(text)
    assert f"p.yaml:{line_of(text, at)}: {expected}" in "\n".join(messages), messages


def test_yaml_syntax_error_has_a_line() -> None:
    messages = errors_of("id: x\nname: [unclosed\n")
    assert messages[0].startswith("p.yaml:3: invalid YAML") or messages[0].startswith("p.yaml:2: invalid YAML")


def test_empty_and_non_mapping_files() -> None:
    assert "empty file" in errors_of("")[0]
    assert "expected a mapping" in errors_of("- a\n- b\n")[0]


def test_malformed_template_is_reported_at_load() -> None:
    messages = errors_of(GOOD.replace("~/Library/Caches/demo", "${HOME/demo"))
    assert any("locations[0].paths.macos" in m and "unbalanced" in m for m in messages)


def test_user_profile_overrides_builtin_and_broken_one_is_skipped(tmp_path: Path) -> None:
    user_dir = user_profiles_dir()
    write(user_dir, "pip.yaml", GOOD.replace("id: demo", "id: pip").replace("Demo tool", "My pip"))
    write(user_dir, "broken.yaml", "id: broken\nname: [\n")
    extra = write(tmp_path / "extra", "demo.yaml", GOOD)
    result = load_profiles([extra.parent])
    assert result.profiles["demo"].origin == "extra"
    if "pip" in result.profiles:  # built-in pip exists once the library is in place
        assert result.profiles["pip"].profile.name == "My pip"
        assert result.profiles["pip"].origin == "user"
    assert any("broken.yaml:3: invalid YAML" in str(e) for e in result.errors), result.errors


def test_missing_extra_dir_is_an_error_but_not_fatal(tmp_path: Path) -> None:
    result = load_profiles([tmp_path / "nope"])
    assert any("profiles folder not found" in str(e) for e in result.errors)


def test_cli_validate_exit_codes(tmp_path: Path) -> None:
    good = write(tmp_path, "good.yaml", GOOD)
    bad = write(tmp_path, "bad.yaml", GOOD.replace("severity: warning", "severity: fatal"))
    ok = run_cli("profiles", "validate", str(good))
    assert ok.returncode == 0, ok.stderr
    failed = run_cli("profiles", "validate", str(good), str(bad))
    assert failed.returncode == 2
    assert "bad.yaml:30: checks[0].severity" in failed.stderr
    assert "Traceback" not in failed.stderr
    as_json = run_cli("profiles", "validate", str(good), str(bad), "--json")
    assert as_json.returncode == 2
    files = result_of(as_json)["files"]
    assert [f["valid"] for f in files] == [True, False]
    assert files[1]["errors"][0] == {
        "file": str(bad), "line": 30, "field": "checks[0].severity",
        "message": "expected 'error', 'warning' or 'hint' (got 'fatal')",
    }


def test_cli_broken_profile_does_not_stop_the_others(tmp_path: Path) -> None:
    folder = tmp_path / "profiles"
    write(folder, "demo.yaml", GOOD)
    write(folder, "zz-broken.yaml", "id: zz\nname: Z\n")
    result = run_cli("--profiles-dir", str(folder), "profiles", "list", "--json")
    assert result.returncode == 0, result.stderr
    ids = [row["id"] for row in result_of(result)["profiles"]]
    assert "demo" in ids and "zz" not in ids
    assert "zz-broken.yaml" in result.stderr and "required field is missing" in result.stderr


@pytest.mark.skipif(IS_WINDOWS, reason="symlinks need privileges there")
def test_cli_a_link_that_loops_is_no_profile_and_stops_nothing(tmp_path: Path) -> None:
    """A `.yaml` link that loops (ELOOP) or passes through a file (ENOTDIR) is not a profile
    file, as pathlib's `is_file` says; the profiles beside it load."""
    folder = tmp_path / "profiles"
    write(folder, "demo.yaml", GOOD)
    (folder / "loop.yaml").symlink_to(folder / "loop.yaml")
    (folder / "through.yaml").symlink_to(folder / "demo.yaml" / "x")
    result = run_cli("--profiles-dir", str(folder), "profiles", "list", "--json")
    assert result.returncode == 0, result.stderr
    assert "demo" in [row["id"] for row in result_of(result)["profiles"]]
    assert "loop.yaml" not in result.stderr and "through.yaml" not in result.stderr


def test_cli_show_resolves_paths(tmp_path: Path, isolated_home: Path) -> None:
    folder = tmp_path / "profiles"
    write(folder, "demo.yaml", GOOD)
    # GOOD's cache: ${XDG_CACHE_HOME:-~/.cache}/demo, ~/Library/Caches/demo, %LOCALAPPDATA%\demo\Cache
    cache = user_cache_root(isolated_home) / "demo"
    if IS_WINDOWS:
        cache = cache / "Cache"
    cache.mkdir(parents=True)
    result = run_cli("--profiles-dir", str(folder), "profiles", "show", "demo", "--json")
    assert result.returncode == 0, result.stderr
    doc = result_of(result)
    assert doc["locations"][0]["paths"] == [str(cache)]
    unknown = run_cli("--profiles-dir", str(folder), "profiles", "show", "nope")
    assert unknown.returncode == 2 and "unknown tool 'nope'" in unknown.stderr


def test_cli_schema_is_a_json_schema() -> None:
    result = run_cli("profiles", "schema")
    schema = json.loads(result.stdout)  # the schema itself, not an envelope
    assert schema["title"] == "cachedoctor profile"
    assert {"id", "name", "locations"} <= set(schema["required"])
    defs = json.dumps(schema["$defs"])
    assert "mount_option" in defs and "junction" in defs


def test_load_profile_file_reports_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ProfileFileError) as info:
        load_profile_file(path)
    assert "cannot read" in str(info.value)


def test_env_var_profiles_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "p"
    write(folder, "demo.yaml", textwrap.dedent(GOOD))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))
    assert "demo" in load_profiles().profiles


def test_every_condition_type_is_documented() -> None:
    from cachedoctor.conditions import condition_names

    docs = (Path(__file__).resolve().parents[1] / "docs" / "profiles.md").read_text(encoding="utf-8")
    missing = [name for name in condition_names() if f"| `{name}` |" not in docs]
    assert missing == []


def test_yaml_merge_keys_share_a_setting_and_the_explicit_keys_win() -> None:
    settings = (
        "    set_by:\n"
        "      - config: &conf\n"
        "          file: {linux: ~/.config/demo/a.ini}\n"
        "          format: ini\n"
        "          key: cache\n"
        "      - config:\n"
        "          <<: *conf\n"
        "          file: {linux: ~/.config/demo/b.ini}\n"
    )
    text = GOOD.replace("    safe_to_delete: true\n", settings + "    safe_to_delete: true\n")
    profile = parse_profile(text, "demo.yaml")
    first, second = profile.locations[0].set_by
    assert first.config.file.linux == ["~/.config/demo/a.ini"]  # type: ignore[union-attr]
    assert second.config.file.linux == ["~/.config/demo/b.ini"]  # type: ignore[union-attr]
    assert second.config.key == "cache"  # type: ignore[union-attr]


@pytest.mark.parametrize(("bad", "expected"), [
    ("extra: !!python/object:os.system x\n", "invalid value"),
    ("? [a, b]\n: c\n", "a key must be a plain word"),
    ("x: &a 1\ny:\n  <<: *a\n", "`<<` merges a mapping"),
])
def test_odd_yaml_is_an_error_with_a_line_not_a_traceback(bad: str, expected: str) -> None:
    with pytest.raises(ProfileFileError) as info:
        parse_profile(GOOD + bad, "odd.yaml")
    error = info.value.errors[0]
    assert expected in error.message and error.line is not None


def test_every_broken_location_preset_and_check_is_reported_at_once() -> None:
    text = (GOOD.replace("    safe_to_delete: true\n", "    safe_to_delete: maybe\n", 1)
            .replace("        value: 3600\n", "        value: 3600\n        colour: red\n", 1)
            .replace("severity: warning", "severity: fatal", 1)
            .replace("types: [tmpfs]", "types: tmpfs", 1))
    messages = errors_of(text)
    assert f"p.yaml:{line_of(text, 'maybe')}: locations[0].safe_to_delete: expected true or false, " \
           "got a string (got 'maybe')" in messages, messages
    assert f"p.yaml:{line_of(text, 'red')}: tune[0].settings[1].colour: unknown field (check the " \
           "spelling; see `cachedoctor profiles schema`)" in messages, messages
    # the check's own first problem, and its condition's (a struct of its own)
    assert f"p.yaml:{line_of(text, 'fatal')}: checks[0].severity: expected 'error', 'warning' or " \
           "'hint' (got 'fatal')" in messages, messages
    assert f"p.yaml:{line_of(text, 'types: tmpfs')}: checks[0].when.types: expected a list, got a " \
           "string (got 'tmpfs')" in messages, messages
    assert len(messages) == 4, messages


def test_the_format_s_shorthands_load_as_their_long_forms() -> None:
    from cachedoctor.profiles.model import EntryUnits, EnvSetting, PolicySetting

    text = GOOD.replace("    relocate:\n", textwrap.indent(textwrap.dedent("""\
        set_by:
          - env: DEMO_HOME
            value: "{value}/cache"
          - policy: DiskCacheDir
            browser: chromium
        ask: [demo, where]
        units: {type: directory-entries, under: wheels}
        """), "    ") + "    relocate:\n", 1)
    profile = parse_profile(text, "p.yaml")
    cache = profile.location("cache")
    assert cache.paths.linux == ["${XDG_CACHE_HOME:-~/.cache}/demo"]  # one string: a list of one
    assert profile.processes.windows == ["demo.exe"]
    env, policy = cache.set_by
    assert isinstance(env, EnvSetting) and env.env == ["DEMO_HOME"] and env.value == "{value}/cache"
    assert isinstance(policy, PolicySetting) and policy.browser == "chromium"
    assert cache.ask is not None and cache.ask.command == ["demo", "where"]
    assert cache.units == [EntryUnits(under="wheels")] and cache.units[0].type == "directory-entries"
    assert [c.type for c in profile.checks[0].when] == ["filesystem_type"]  # one mapping: a list of one
    assert [r.method for r in cache.relocate] == ["link", "env"]


@pytest.mark.parametrize(("setting", "expected"), [
    ("{value: x}", "locations[0].set_by[0]: a setting names one of `env`, `config` or `policy`"),
    ("{env: A, policy: B, browser: chrome}", "locations[0].set_by[0]: a setting names one of"),
    ("{env: A, $setting: config}", "locations[0].set_by[0].$setting: unknown field"),
    ("{env: []}", "locations[0].set_by[0].env: expected at least 1 item"),
])
def test_a_setting_is_told_apart_by_its_key(setting: str, expected: str) -> None:
    text = GOOD.replace("    relocate:\n", f"    set_by: [{setting}]\n    relocate:\n", 1)
    messages = errors_of(text)
    assert any(m.startswith("p.yaml:") and expected in m for m in messages), messages


def test_the_schema_accepts_every_built_in_profile_and_refuses_what_the_loader_refuses() -> None:
    import jsonschema
    import yaml

    from cachedoctor.profiles.loader import builtin_profiles_dir, json_schema

    validator = jsonschema.Draft202012Validator(json_schema())
    files = sorted(builtin_profiles_dir().glob("*.yaml"))
    assert len(files) > 50
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]
        assert errors == [], (path.name, errors[:3])
    shorthand = yaml.safe_load(GOOD.replace("      - method: link\n", "      - method: teleport\n"))
    assert not validator.is_valid(shorthand)
    assert "$setting" not in json.dumps(json_schema())


@pytest.mark.parametrize(("old", "new", "at", "expected"), [
    # Python's `$` matches before a final newline: "cache\n" is no id (nor a second "cache")
    ("  - id: cache\n", '  - id: "cache\\n"\n', "cache\\n", "locations[0].id: expected an id"),
    ("relocate:\n      - method: link\n", 'relocate:\n      - method: env\n        vars: {A: "{dest}", B: 5}\n',
     "B: 5", "locations[0].relocate[0].vars.B: expected a string, got an integer (got 5)"),
    ("name: Demo tool\n", "name: Demo tool\n5: five\n", "5: five", "[5]: a key must be text (got 5)"),
    ("safe_to_delete: true\n", "safe_to_delete: true\n    quota: " + "9" * 400 + "GB\n", "quota",
     "locations[0].quota: size '" + "9" * 400 + "GB' is too large"),
    ("safe_to_delete: true\n", "safe_to_delete: true\n    quota: 20\n", "quota: 20",
     "locations[0].quota: expected a string, got an integer (got 20)"),
])
def test_more_errors_name_their_field(old: str, new: str, at: str, expected: str) -> None:
    text = GOOD.replace(old, new, 1)
    assert text != GOOD
    messages = errors_of(text)
    assert any(m.startswith(f"p.yaml:{line_of(text, at)}: {expected}") for m in messages), messages


def test_quoted_booleans_and_numbers_load_as_values() -> None:
    """A quoted `"true"` or `"1"` where a boolean is expected, `"5"` where a number is: read
    as the value (as the pydantic model read them), not refused."""
    text = GOOD.replace("safe_to_delete: true", 'safe_to_delete: "true"', 1).replace(
        "when: {type: filesystem_type, location: cache, types: [tmpfs]}",
        'when: [{type: free_space_below, location: cache, percent: "5"}]', 1)
    profile = parse_profile(text, "p.yaml")
    assert profile.location("cache").safe_to_delete is True
    assert profile.checks[0].when[0].percent == 5.0  # type: ignore[union-attr]


def test_the_schema_names_the_key_each_setting_is_told_by() -> None:
    import jsonschema

    from cachedoctor.profiles.loader import json_schema

    setting = {"$ref": "#/$defs/Location", "$defs": json_schema()["$defs"]}
    location = {"id": "c", "paths": {"linux": "~/c"}, "safe_to_delete": True}
    ok = jsonschema.Draft202012Validator(setting)
    assert ok.is_valid({**location, "set_by": [{"policy": "DiskCacheDir", "browser": "chrome"}]})
    assert not ok.is_valid({**location, "set_by": [{"browser": "chrome"}]})  # the loader refuses it


def test_every_problem_of_one_mapping_is_reported() -> None:
    text = GOOD.replace("    safe_to_delete: true\n", "    kind: attic\n    colour: red\n", 1).replace(
        "      linux: ${XDG_CACHE_HOME:-~/.cache}/demo\n", "      linux: 5\n", 1)
    messages = errors_of(text)
    assert sorted(messages) == sorted([
        f"p.yaml:{line_of(text, 'linux: 5')}: locations[0].paths.linux: expected a string, got an "
        "integer (got 5)",
        f"p.yaml:{line_of(text, 'attic')}: locations[0].kind: expected 'cache', 'temp', 'models', "
        "'packages', 'build', 'logs', 'data', 'environments' or 'downloads' (got 'attic')",
        f"p.yaml:{line_of(text, 'red')}: locations[0].colour: unknown field (check the spelling; see "
        "`cachedoctor profiles schema`)",
        f"p.yaml:{line_of(text, '- id: cache')}: locations[0].safe_to_delete: required field is "
        "missing",
    ]), messages


def test_the_profile_files_of_a_folder_are_those_paths_name_in_their_order(tmp_path: Path) -> None:
    """`_yaml_files` reads one listing; it gives what filtering and sorting `Path`s gives."""
    from cachedoctor.profiles.loader import _yaml_files

    folder = tmp_path / "profiles"
    folder.mkdir()
    for name in ("b.yaml", "A.yml", "a.yaml", "B.yml", "..yaml", ".yaml", ".yml", ".x.yaml",
                 "c.YAML", "d.yaml.bak", "e.json", "yaml", "Z.yaml", "_.yaml", "é.yaml"):
        (folder / name).write_text("id: x\n")
    (folder / "dir.yaml").mkdir()
    if not IS_WINDOWS:  # symlinks need privileges there
        (folder / "link.yaml").symlink_to(folder / "b.yaml")
        (folder / "dangling.yaml").symlink_to(folder / "gone.yaml")
        (folder / "to-dir.yml").symlink_to(folder / "dir.yaml")
        (folder / "loop.yaml").symlink_to(folder / "loop.yaml")  # ELOOP
        (folder / "through-file.yaml").symlink_to(folder / "e.json" / "x")  # ENOTDIR
    by_paths = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    assert _yaml_files(folder) == by_paths
    names = {p.name for p in by_paths}
    assert {"..yaml", ".x.yaml", "a.yaml", "Z.yaml"} <= names and not names & {".yaml", "c.YAML"}
    if not IS_WINDOWS:  # a link to a file counts, a dangling one or one to a folder does not
        assert "link.yaml" in names and not names & {"dangling.yaml", "to-dir.yml"}
        assert not names & {"loop.yaml", "through-file.yaml"}  # nor one that cannot lead to one
