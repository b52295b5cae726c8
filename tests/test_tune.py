"""`tune`: presets applied to real config files of every format, already-tuned, undo, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachedoctor import history
from cachedoctor.configedit import get_key
from cachedoctor.envvars import managed_variables
from cachedoctor.errors import OperationFailed, RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.profiles.loader import builtin_profiles_dir, load_profile_file
from cachedoctor.tune import apply_tune, latest_change, plan_tune, preset_target, undo_change
from tests.conftest import needs_posix_paths, run_cli

# Every test drives a Linux Host (or the CLI) over real files in the isolated home.
pytestmark = needs_posix_paths

DATA = Path(__file__).parent / "data" / "settings"

PROFILES = {
    "grok": """\
id: grok
name: Grok Code
description: test copy of the Grok profile
locations:
  - id: cache
    paths: {linux: "~/.grok/cache"}
    safe_to_delete: true
tune:
  - id: default
    file: {linux: "${XDG_CONFIG_HOME:-~/.config}/Code/User/settings.json",
           macos: "${XDG_CONFIG_HOME:-~/.config}/Code/User/settings.json"}
    format: jsonc
    create: true
    settings:
      - {key: grok.code.cacheStrategy, value: lfu}
      - {key: grok.code.cacheSize, value: 8192}
      - {key: grok.code.cacheTTL, value: 300000}
  - id: workspace
    workspace_file: .vscode/settings.json
    format: jsonc
    create: true
    settings:
      - {key: grok.code.workspaceRoot, value: ./src}
      - {key: grok.code.includePaths, value: [./src, ./tests]}
""",
    "claude": """\
id: claude
name: Claude Code
description: test profile
locations:
  - id: cache
    paths: {linux: "~/.claude/cache"}
    safe_to_delete: true
tune:
  - id: claude
    file: {linux: "~/.claude/config.yaml"}
    format: yaml
    settings:
      - {key: [cache, ttl], value: 3600000}
      - {key: [cache, eviction_policy], value: none}
      - {key: [cache, warmup_on_start], value: true}
""",
    "astra": """\
id: astra
name: Astra
description: test profile
locations:
  - id: cache
    paths: {linux: "~/.astra/cache"}
    safe_to_delete: true
tune:
  - id: selective
    file: {linux: "~/models/astra/config.json"}
    format: json
    settings:
      - {key: cache_strategy, value: selective}
      - {key: [layer_cache, selective], value: [0, 11]}
      - {key: [layer_cache, recompute], value: [12, 31]}
""",
    "cargo": """\
id: cargo
name: Cargo
description: test profile
locations:
  - id: registry
    paths: {linux: "~/.cargo/registry"}
    safe_to_delete: true
tune:
  - id: autoclean
    file: {linux: "~/.cargo/config.toml"}
    format: toml
    create: true
    settings:
      - {key: [cache, auto-clean-frequency], value: 1 day}
""",
    "cuda": """\
id: cuda
name: CUDA
description: test profile
locations:
  - id: compute
    paths: {linux: "~/.nv/ComputeCache"}
    safe_to_delete: true
tune:
  - id: cuda
    format: env
    settings:
      - {key: CUDA_CACHE_MAXSIZE, value: 4294967296}
""",
}


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    folder = tmp_path / "profiles"
    folder.mkdir()
    loaded = {}
    for name, text in PROFILES.items():
        (folder / f"{name}.yaml").write_text(text)
        loaded[name] = load_profile_file(folder / f"{name}.yaml")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))
    return loaded


@pytest.fixture
def host(isolated_home: Path) -> Host:
    return Host(os="linux", env={"HOME": str(isolated_home),
                                 "XDG_CONFIG_HOME": str(isolated_home / ".config")},
                home=str(isolated_home))


def vscode_settings(home: Path) -> Path:
    path = home / ".config" / "Code" / "User" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((DATA / "vscode-tabs-crlf.json").read_bytes())
    return path


def test_grok_preset_on_realistic_settings(profiles, host, isolated_home):
    path = vscode_settings(isolated_home)
    original = path.read_bytes()
    plan = plan_tune(profiles["grok"], None, host)
    assert plan.target == path and not plan.already_tuned and not plan.creates
    assert [c.to_json()["before"] for c in plan.changes] == [None, 2048, None]
    assert path.read_bytes() == original  # planning writes nothing
    result = apply_tune(plan)
    text = path.read_bytes().decode()
    assert text.count("\r\n") == original.decode().count("\r\n") + 2 and "\n" not in text.replace("\r\n", "")
    assert get_key(path, "jsonc", "grok.code.cacheSize") == 8192
    assert get_key(path, "jsonc", "grok.code.cacheStrategy") == "lfu"
    assert result.backup is not None and result.backup.read_bytes() == original
    change = history.get(result.change_id or 0)
    assert change is not None and change.kind == "tune" and change.after["file"] == str(path)
    assert change.before["values"][1] == {"key": "grok.code.cacheSize", "present": True, "value": 2048}
    again = plan_tune(profiles["grok"], "default", host)
    assert again.already_tuned and again.diff == ""
    assert not apply_tune(again).applied


def test_undo_restores_backup_when_untouched(profiles, host, isolated_home):
    path = vscode_settings(isolated_home)
    original = path.read_bytes()
    apply_tune(plan_tune(profiles["grok"], None, host))
    change = latest_change("grok")
    assert change is not None
    preview = undo_change(change, dry_run=True)
    assert preview.action == "restore-backup" and path.read_bytes() != original
    result = undo_change(change)
    assert path.read_bytes() == original
    assert history.get(change.id).undone_by == result.change_id  # type: ignore[union-attr]
    assert latest_change("grok") is None


def test_undo_after_user_edits_reverts_only_untouched_keys(profiles, host, isolated_home):
    path = vscode_settings(isolated_home)
    apply_tune(plan_tune(profiles["grok"], None, host))
    text = path.read_bytes().decode()
    edited = text.replace('"grok.code.cacheTTL": 300000', '"grok.code.cacheTTL": 1234')
    edited = edited.replace('"editor.fontSize": 14', '"editor.fontSize": 16')
    path.write_bytes(edited.encode())
    change = latest_change("grok")
    assert change is not None
    result = undo_change(change)
    assert result.action == "revert-keys" and result.skipped == ["grok.code.cacheTTL"]
    assert '"grok.code.cacheTTL": 1234' in result.changed_since.replace("+\t", "")
    assert get_key(path, "jsonc", "grok.code.cacheSize") == 2048  # back to the old value
    with pytest.raises(KeyError):
        get_key(path, "jsonc", "grok.code.cacheStrategy")  # was absent before: removed again
    assert get_key(path, "jsonc", "grok.code.cacheTTL") == 1234  # the user's edit stays
    assert get_key(path, "jsonc", "editor.fontSize") == 16


def test_undo_refuses_malformed_or_fully_edited_file(profiles, host, isolated_home):
    path = vscode_settings(isolated_home)
    apply_tune(plan_tune(profiles["grok"], None, host))
    change = latest_change("grok")
    assert change is not None
    broken = path.read_bytes().decode().replace('"lfu",', '"lfu"')  # missing comma
    path.write_bytes(broken.encode())
    with pytest.raises(RefusedError, match="no longer parses"):
        undo_change(change)
    assert path.read_bytes().decode() == broken
    path.unlink()
    with pytest.raises(RefusedError, match="no longer exists"):
        undo_change(change)


def test_workspace_preset_creates_file(profiles, host, tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    plan = plan_tune(profiles["grok"], None, host, workspace=str(workspace))
    assert plan.preset.id == "workspace" and plan.creates
    assert plan.target == workspace / ".vscode" / "settings.json"
    apply_tune(plan)
    data = json.loads(plan.target.read_text())
    assert data == {"grok.code.workspaceRoot": "./src", "grok.code.includePaths": ["./src", "./tests"]}
    change = latest_change("grok", target=plan.target)
    assert change is not None and undo_change(change).action == "delete-created-file"
    assert not plan.target.exists()


def test_missing_file_without_create_says_where_it_looked(profiles, host, isolated_home):
    with pytest.raises(UserInputError, match=r"looked at: .*\.claude/config\.yaml"):
        plan_tune(profiles["claude"], None, host)
    assert not (isolated_home / ".claude").exists()


def test_claude_yaml_preset_keeps_comments(profiles, host, isolated_home):
    path = isolated_home / ".claude" / "config.yaml"
    path.parent.mkdir()
    original = (DATA / "claude-config.yaml").read_text()
    path.write_text(original)
    apply_tune(plan_tune(profiles["claude"], None, host))
    after = path.read_text()
    for line in original.splitlines(keepends=True):
        assert line in after
    assert get_key(path, "yaml", ["cache", "ttl"]) == 3600000
    assert get_key(path, "yaml", ["cache", "eviction_policy"]) == "none"


def test_astra_preset_with_file_override(profiles, host, tmp_path):
    config = tmp_path / "models" / "astra-7b" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  "model_type": "astra",\n  "num_layers": 32\n}\n')
    plan = plan_tune(profiles["astra"], None, host, file=str(config))
    assert plan.target == config
    apply_tune(plan)
    data = json.loads(config.read_text())
    assert data == {"model_type": "astra", "num_layers": 32, "cache_strategy": "selective",
                    "layer_cache": {"selective": [0, 11], "recompute": [12, 31]}}
    assert config.read_text().startswith('{\n  "model_type": "astra",\n  "num_layers": 32,\n')


def test_malformed_target_refused_with_position_and_untouched(profiles, host, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(UserInputError, match=r"config\.json:3:3"):
        plan_tune(profiles["astra"], None, host, file=str(config))
    assert config.read_text() == '{\n  "a": 1,\n  oops\n}\n'


def test_cargo_toml_and_stale_plan(profiles, host, isolated_home):
    path = isolated_home / ".cargo" / "config.toml"
    path.parent.mkdir()
    path.write_text("[net]\nretry = 3 # flaky\n")
    plan = plan_tune(profiles["cargo"], None, host)
    path.write_text("[net]\nretry = 4 # flaky\n")  # edited between plan and apply
    with pytest.raises(OperationFailed, match="changed while"):
        apply_tune(plan)
    apply_tune(plan_tune(profiles["cargo"], None, host))
    assert path.read_text() == '[net]\nretry = 4 # flaky\n\n[cache]\nauto-clean-frequency = "1 day"\n'


def test_env_preset_sets_managed_variable(profiles, host, isolated_home):
    plan = plan_tune(profiles["cuda"], None, host)
    assert plan.target is None and plan.env == {"CUDA_CACHE_MAXSIZE": "4294967296"}
    assert preset_target(profiles["cuda"], "cuda", host) is None
    result = apply_tune(plan)
    assert result.env is not None and managed_variables(host) == {"CUDA_CACHE_MAXSIZE": "4294967296"}
    assert plan_tune(profiles["cuda"], None, host).already_tuned


def test_preset_target_for_doctor(profiles, host, isolated_home, tmp_path):
    expected = isolated_home / ".config" / "Code" / "User" / "settings.json"
    assert preset_target(profiles["grok"], "default", host) == expected
    assert preset_target(profiles["grok"], "workspace", host) is None
    assert preset_target(profiles["grok"], "workspace", host, workspace=str(tmp_path)) == (
        tmp_path / ".vscode" / "settings.json")
    assert preset_target(profiles["grok"], "default", host, file="~/x.json") == isolated_home / "x.json"


def test_cli_tune_dry_run_yes_already_and_undo(profiles, isolated_home):
    path = vscode_settings(isolated_home)
    original = path.read_bytes()
    dry = run_cli("tune", "grok", "--preset", "default", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert '+\t"grok.code.cacheStrategy": "lfu",' in dry.stdout and path.read_bytes() == original
    assert run_cli("tune", "grok", "--preset", "default").returncode == 2  # no terminal, no --yes
    done = run_cli("tune", "grok", "--preset", "default", "--yes")
    assert done.returncode == 0, done.stderr
    assert "backup:" in done.stderr and "recorded as change" in done.stderr
    again = run_cli("tune", "grok", "--preset", "default", "--yes")
    assert again.returncode == 0 and "already tuned" in again.stderr
    undo = run_cli("tune", "grok", "--preset", "default", "--undo", "--yes")
    assert undo.returncode == 0, undo.stderr
    assert path.read_bytes() == original
    none_left = run_cli("tune", "grok", "--preset", "default", "--undo", "--yes")
    assert none_left.returncode == 2 and "no tune of grok" in none_left.stderr
    default = run_cli("tune", "grok", "--dry-run")  # the one non-workspace preset is the default
    assert default.returncode == 0 and "preset 'default'" in default.stdout  # the plan: stdout
    bad = run_cli("tune", "grok", "--preset", "nope")
    assert bad.returncode == 2 and "presets: default, workspace" in bad.stderr


def test_builtin_grok_preset_applies_to_realistic_settings(isolated_home, host):
    builtin = builtin_profiles_dir() / "grok.yaml"
    if not builtin.exists():
        pytest.skip("the built-in grok profile is not there")
    profile = load_profile_file(builtin)
    path = vscode_settings(isolated_home)
    preset = next(p for p in profile.tune if p.file is not None)
    apply_tune(plan_tune(profile, preset.id, host))
    for setting in preset.settings:
        assert get_key(path, "jsonc", setting.key) == setting.value
    assert plan_tune(profile, preset.id, host).already_tuned


def test_tune_refuses_to_write_through_a_dangling_settings_link(isolated_home, tmp_path):
    """It used to create /nonexistent/... at the link's target, and --undo then deleted the link."""
    from cachedoctor.configedit import write_target
    from cachedoctor.errors import UserInputError

    settings = isolated_home / "settings.json"
    settings.symlink_to(tmp_path / "nonexistent" / "settings.json")
    with pytest.raises(UserInputError, match="does not exist; nothing was changed"):
        write_target(settings)
    from tests.conftest import run_cli

    proc = run_cli("tune", "grok", "--file", str(settings), "--yes")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    assert not (tmp_path / "nonexistent").exists() and settings.is_symlink()
