"""The built-in profile library (`profiles/*.yaml`): it loads, it resolves on every OS, and the
facts the doctor relies on (junctions, quotas, presets, checks, clean commands) are there."""

from __future__ import annotations

import ntpath
import re
import string
from pathlib import Path

import pytest

from cachedoctor.host import OS_NAMES, Host
from cachedoctor.profiles.loader import load_profile_file
from cachedoctor.profiles.model import (
    ConfigRelocation,
    EnvRelocation,
    LinkRelocation,
    PolicyRelocation,
    Profile,
)
from cachedoctor.resolve import expand, try_expand
from cachedoctor.safety import protected_reason
from cachedoctor.sizes import parse_size

PROFILES_DIR = Path(__file__).resolve().parents[1] / "profiles"
PROFILE_FILES = sorted(PROFILES_DIR.glob("*.yaml"))

PROJECT_TOOLS = {"workbuddy", "edge", "chrome", "astra", "claude", "grok"}
REAL_TOOLS = {
    "huggingface", "torch", "inductor", "triton", "cuda", "ollama", "vllm", "pip", "uv", "conda",
    "poetry", "npm", "yarn", "pnpm", "cargo", "go", "gradle", "maven", "chromium", "vscode",
    "jetbrains",
}

WIN_HOME = r"C:\Users\ann"
WIN_ENV = {
    "LOCALAPPDATA": WIN_HOME + r"\AppData\Local",
    "APPDATA": WIN_HOME + r"\AppData\Roaming",
    "USERPROFILE": WIN_HOME,
    "TEMP": WIN_HOME + r"\AppData\Local\Temp",
    "TMP": WIN_HOME + r"\AppData\Local\Temp",
    "USERNAME": "ann",
}
HOSTS: dict[str, Host] = {
    "linux": Host(os="linux", env={"USER": "ann", "HOME": "/home/ann"}, home="/home/ann"),
    "wsl": Host(os="wsl", env={"USER": "ann", "HOME": "/home/ann", "WSL_DISTRO_NAME": "Ubuntu"},
                home="/home/ann"),
    "macos": Host(os="macos", env={"USER": "ann", "HOME": "/Users/ann"}, home="/Users/ann"),
    "windows": Host(os="windows", env=WIN_ENV, home=WIN_HOME),
}
FIX_FIELDS = {"tool", "location", "path"}


def _load_all() -> dict[str, Profile]:
    return {path.stem: load_profile_file(path) for path in PROFILE_FILES}


PROFILES = _load_all()


def host(os_name: str, **env: str) -> Host:
    base = HOSTS[os_name]
    return Host(os=base.os, env={**base.env, **env}, home=base.home)


def paths(tool: str, location: str, h: Host) -> list[str]:
    loc = PROFILES[tool].location(location)
    return [expand(t, h) for t in loc.paths.for_host(h)]


def first(tool: str, location: str, h: Host) -> str:
    return paths(tool, location, h)[0]


def effective(tool: str, location: str, h: Host, files: object = None) -> list[str]:
    """Where the tool really keeps the location on `h` (its settings read from `files`)."""
    from cachedoctor.locate.effective import resolve_location
    from cachedoctor.locate.files import DictFiles
    from cachedoctor.locate.world import World

    view = files if files is not None else DictFiles(windows=h.is_windows)
    pic = resolve_location(PROFILES[tool], PROFILES[tool].location(location), World.of(h, view))  # type: ignore[arg-type]
    return [p.path for p in pic.places]


def _is_absolute_for(path: str, h: Host) -> bool:
    if h.is_windows:
        return bool(re.match(r"^[A-Za-z]:\\", path)) and ntpath.isabs(path)
    return path.startswith("/") and "\\" not in path


def _assert_resolves(templates: list[str], h: Host, what: str) -> None:
    """At least one template resolves; every resolved one is an absolute path of h's style."""
    resolved = [try_expand(t, h) for t in templates]
    concrete = [r for r in resolved if r is not None]
    assert concrete, f"{what}: nothing resolves on {h.os}: {templates}"
    for path in concrete:
        assert _is_absolute_for(path, h), f"{what}: {path!r} is not an absolute {h.os} path"
        assert not re.search(r"[$%{}~]", path), f"{what}: unexpanded template left in {path!r}"


# --- the library as a whole -------------------------------------------------------------------

def test_library_has_all_required_profiles() -> None:
    assert len(PROFILE_FILES) >= 27
    assert set(PROFILES) >= PROJECT_TOOLS | REAL_TOOLS


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: p.stem)
def test_profile_loads_and_file_name_is_id(path: Path) -> None:
    profile = load_profile_file(path)
    assert profile.id == path.stem
    assert profile.description.strip()
    assert profile.sources, f"{profile.id}: every profile cites its sources"
    assert profile.locations


@pytest.mark.parametrize("tool", sorted(PROFILES))
@pytest.mark.parametrize("os_name", OS_NAMES)
def test_every_location_resolves_on_every_os(tool: str, os_name: str) -> None:
    h = HOSTS[os_name]
    for loc in PROFILES[tool].locations:
        templates = loc.paths.for_host(h)
        if not templates:  # the tool legitimately has no such folder on this OS
            continue
        _assert_resolves(templates, h, f"{tool}/{loc.id}")
        for template in templates:
            resolved = try_expand(template, h)
            if resolved is not None and "*" not in resolved:
                assert protected_reason(resolved, h) is None, f"{tool}/{loc.id}: {resolved}"


@pytest.mark.parametrize("tool", sorted(PROFILES))
@pytest.mark.parametrize("os_name", OS_NAMES)
def test_config_and_tune_files_resolve(tool: str, os_name: str) -> None:
    h = HOSTS[os_name]
    profile = PROFILES[tool]
    for loc in profile.locations:
        for method in loc.relocate:
            if isinstance(method, ConfigRelocation) and method.file.for_host(h):
                _assert_resolves(method.file.for_host(h), h, f"{tool}/{loc.id} config")
    for preset in profile.tune:
        if preset.file is not None and preset.file.for_host(h):
            _assert_resolves(preset.file.for_host(h), h, f"{tool} preset {preset.id}")


# Tools that exist on fewer platforms than Linux and Windows (checked against their docs).
PLATFORMS = {"astra": {"linux"}, "vllm": {"linux"}, "wsl": {"windows"}, "visualstudio": {"windows"},
             "xcode": {"macos"}, "homebrew": {"macos", "linux"}, "flatpak": {"linux"},
             "windows-temp": {"windows"}}


def test_every_tool_has_a_path_on_its_main_platforms() -> None:
    for tool, profile in PROFILES.items():
        for os_name in PLATFORMS.get(tool, {"linux", "windows"}):
            found = [t for loc in profile.locations for t in loc.paths.for_host(HOSTS[os_name])]
            assert found, f"{tool} has no path on {os_name}"


ENGINE_CONDITIONS = {"link_target_missing", "env_not_seen", "free_space_below",
                     "filesystem_differs", "over_quota", "link_kind"}


def test_no_profile_repeats_an_engine_wide_rule() -> None:
    """Broken links, unseen variables, full drives, stores on another filesystem, quotas and
    link kinds are checked by the engine for every location; a profile holds only its own."""
    for tool, profile in PROFILES.items():
        for check in profile.checks:
            pasted = {cond.type for cond in check.when} & ENGINE_CONDITIONS
            assert not pasted, f"{tool}: check {check.id} repeats the engine's {pasted}"


@pytest.mark.parametrize("tool", sorted(PROFILES))
def test_checks_are_well_formed(tool: str) -> None:
    profile = PROFILES[tool]
    location_ids = {loc.id for loc in profile.locations}
    preset_ids = {p.id for p in profile.tune}
    for check in profile.checks:
        assert check.message.strip() and check.why.strip()
        if check.fix is not None:
            assert check.fix.startswith("cachedoctor "), check.fix
            fields = {f for _, f, _, _ in string.Formatter().parse(check.fix) if f is not None}
            assert fields <= FIX_FIELDS, f"{tool}/{check.id}: unknown placeholders {fields}"
            assert check.fix.split()[1] in {"move", "tune", "quota", "env", "restore"}
        for cond in check.when:
            location = getattr(cond, "location", None)
            if location is not None:
                assert location in location_ids
            preset = getattr(cond, "preset", None)
            if preset is not None:
                assert preset in preset_ids
        for text in (check.message, check.why):
            fields = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
            assert fields <= FIX_FIELDS | {"value"}, f"{tool}/{check.id}: stray braces in {text!r}"


def test_every_quota_parses() -> None:
    for profile in PROFILES.values():
        for loc in profile.locations:
            if loc.quota is not None:
                assert parse_size(loc.quota) > 0


def test_project_tools_say_what_is_unconfirmed() -> None:
    for tool in ("workbuddy", "astra", "grok", "claude"):
        notes = " ".join(PROFILES[tool].notes)
        assert "not independently confirmed" in notes


def test_sources_are_public() -> None:
    for profile in PROFILES.values():
        internal = [s for s in profile.sources if not s.startswith(("https://", "http://"))]
        assert not internal, (profile.id, internal)


def test_every_env_relocation_uses_dest() -> None:
    for profile in PROFILES.values():
        for loc in profile.locations:
            for method in loc.relocate:
                if isinstance(method, EnvRelocation):
                    assert all("{dest}" in v for v in method.vars.values()), (profile.id, loc.id)


# --- pip ---------------------------------------------------------------------------------------

def test_pip_linux_default_and_xdg() -> None:
    assert first("pip", "cache", host("linux")) == "/home/ann/.cache/pip"
    assert first("pip", "cache", host("linux", XDG_CACHE_HOME="/xdg/cache")) == "/xdg/cache/pip"
    assert first("pip", "cache", host("wsl", XDG_CACHE_HOME="/xdg/cache")) == "/xdg/cache/pip"


@pytest.mark.parametrize("value", ["", "relative/cache", "~/cache"])
def test_pip_ignores_unusable_xdg_cache_home(value: str) -> None:
    assert first("pip", "cache", host("linux", XDG_CACHE_HOME=value)) == "/home/ann/.cache/pip"


def test_pip_macos_and_windows_ignore_xdg() -> None:
    assert first("pip", "cache", host("macos")) == "/Users/ann/Library/Caches/pip"
    assert first("pip", "cache", host("macos", XDG_CACHE_HOME="/xdg")) == "/Users/ann/Library/Caches/pip"
    assert first("pip", "cache", host("windows")) == r"C:\Users\ann\AppData\Local\pip\Cache"
    assert first("pip", "cache", host("windows", XDG_CACHE_HOME=r"D:\xdg")) == (
        r"C:\Users\ann\AppData\Local\pip\Cache"
    )


def test_pip_windows_env_lookup_is_case_insensitive() -> None:
    h = Host(os="windows", env={"LocalAppData": WIN_HOME + r"\AppData\Local"}, home=WIN_HOME)
    assert first("pip", "cache", h) == r"C:\Users\ann\AppData\Local\pip\Cache"


def test_pip_cache_dir_variable_beats_the_config_files_which_beat_the_default() -> None:
    from cachedoctor.locate.files import DictFiles

    conf = DictFiles(texts={"/home/ann/.config/pip/pip.conf": "[global]\ncache-dir = ~/pipc\n",
                            "/etc/pip.conf": "[global]\ncache-dir = /srv/pip\n"})
    assert effective("pip", "cache", host("linux")) == ["/home/ann/.cache/pip"]
    assert effective("pip", "cache", host("linux"), conf) == ["/home/ann/pipc"]  # user over global
    assert effective("pip", "cache", host("linux", PIP_CACHE_DIR="/data/pip"), conf) == ["/data/pip"]
    assert effective("pip", "cache", host("windows", PIP_CACHE_DIR=r"D:\pip")) == [r"D:\pip"]
    ini = DictFiles(texts={r"C:\Users\ann\AppData\Roaming\pip\pip.ini": "[global]\ncache-dir=E:\\p\n"},
                    windows=True)
    assert effective("pip", "cache", host("windows"), ini) == [r"E:\p"]


def test_pip_relocates_with_its_config_file_and_cleans_with_purge() -> None:
    loc = PROFILES["pip"].location("cache")
    config = loc.relocate[0]
    assert isinstance(config, ConfigRelocation)
    assert (config.format, config.section, config.key) == ("pipconf", "global", "cache-dir")
    assert [expand(t, host("linux")) for t in config.file.for_host(host("linux"))] == [
        "/home/ann/.config/pip/pip.conf"
    ]
    assert [expand(t, host("windows")) for t in config.file.for_host(host("windows"))] == [
        r"C:\Users\ann\AppData\Roaming\pip\pip.ini"
    ]
    assert "/Users/ann/Library/Application Support/pip/pip.conf" in [
        expand(t, host("macos")) for t in config.file.for_host(host("macos"))
    ]
    assert any(isinstance(m, EnvRelocation) and "PIP_CACHE_DIR" in m.vars for m in loc.relocate)
    assert loc.clean is not None and loc.clean.command == ["pip", "cache", "purge"]


# --- Hugging Face (nested fallbacks) ---------------------------------------------------------------

def test_huggingface_defaults_on_every_os() -> None:
    assert first("huggingface", "hub", host("linux")) == "/home/ann/.cache/huggingface/hub"
    assert first("huggingface", "hub", host("macos")) == "/Users/ann/.cache/huggingface/hub"
    assert first("huggingface", "hub", host("windows")) == r"C:\Users\ann\.cache\huggingface\hub"
    assert first("huggingface", "xet", host("linux")) == "/home/ann/.cache/huggingface/xet"
    assert first("huggingface", "datasets", host("linux")) == "/home/ann/.cache/huggingface/datasets"


def test_huggingface_nested_fallbacks() -> None:
    assert first("huggingface", "hub", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/huggingface/hub"
    assert first("huggingface", "hub", host("linux", XDG_CACHE_HOME="rel")) == (
        "/home/ann/.cache/huggingface/hub"
    )
    with_home = host("linux", HF_HOME="/data/hf", XDG_CACHE_HOME="/xdg")
    assert first("huggingface", "hub", with_home) == "/data/hf/hub"
    assert first("huggingface", "xet", with_home) == "/data/hf/xet"
    assert first("huggingface", "assets", with_home) == "/data/hf/assets"
    both = host("linux", HF_HOME="/data/hf", HF_HUB_CACHE="/models")
    assert first("huggingface", "hub", both) == "/models"
    assert first("huggingface", "xet", both) == "/data/hf/xet"
    assert first("huggingface", "hub", host("windows", HF_HOME=r"D:\hf")) == r"D:\hf\hub"


def test_huggingface_relocates_each_cache_by_its_own_variable() -> None:
    expected = {"hub": "HF_HUB_CACHE", "xet": "HF_XET_CACHE", "assets": "HF_ASSETS_CACHE",
                "datasets": "HF_DATASETS_CACHE"}
    for loc_id, var in expected.items():
        env = PROFILES["huggingface"].location(loc_id).relocate[0]
        assert isinstance(env, EnvRelocation) and env.vars == {var: "{dest}"}


# --- browsers ----------------------------------------------------------------------------------

def test_chrome_windows_profile_globs() -> None:
    assert paths("chrome", "cache", host("windows")) == [
        r"C:\Users\ann\AppData\Local\Google\Chrome\User Data\Default\Cache",
        r"C:\Users\ann\AppData\Local\Google\Chrome\User Data\Profile *\Cache",
    ]


def test_chrome_posix_caches() -> None:
    assert first("chrome", "cache", host("linux")) == "/home/ann/.cache/google-chrome/Default"
    assert first("chrome", "cache", host("linux", XDG_CACHE_HOME="/c")) == "/c/google-chrome/Default"
    assert first("chrome", "cache", host("macos")) == "/Users/ann/Library/Caches/Google/Chrome/Default"
    assert first("chromium", "cache", host("linux")) == "/home/ann/.cache/chromium/Default"


def test_edge_paths() -> None:
    assert first("edge", "cache", host("windows")) == (
        r"C:\Users\ann\AppData\Local\Microsoft\Edge\User Data\Default\Cache"
    )
    assert first("edge", "legacy-cache", host("windows")).endswith(
        r"Packages\Microsoft.MicrosoftEdge_8wekyb3d8bbwe\AC\MicrosoftEdge\Cache"
    )
    assert paths("edge", "legacy-cache", host("linux")) == []


@pytest.mark.parametrize("tool", ["chrome", "edge", "chromium"])
def test_browsers_relocate_by_policy_and_check_the_size_unit(tool: str) -> None:
    profile = PROFILES[tool]
    policy = profile.location("cache").relocate[0]
    assert isinstance(policy, PolicyRelocation)
    assert (policy.browser, policy.policy) == (tool, "DiskCacheDir")
    unit_checks = [c for c in profile.checks for cond in c.when
                   if cond.type == "policy_value_below" and cond.policy == "DiskCacheSize"
                   and cond.below == 1048576 and cond.browser == tool]
    assert unit_checks
    assert profile.processes_for("windows") and profile.processes_for("linux")


def test_browser_process_names() -> None:
    assert PROFILES["chrome"].processes_for("windows") == ["chrome.exe"]
    assert "Google Chrome" in PROFILES["chrome"].processes_for("macos")
    assert "chrome" in PROFILES["chrome"].processes_for("linux")
    assert PROFILES["edge"].processes_for("windows") == ["msedge.exe"]


# --- the six project tools ----------------------------------------------------------------------

def test_workbuddy_paths_quota_and_junction() -> None:
    loc = PROFILES["workbuddy"].location("cache")
    assert first("workbuddy", "cache", host("windows")) == (
        r"C:\Users\ann\AppData\Local\Temp\workbuddy_cache"
    )
    assert first("workbuddy", "cache", host("linux")) == "/tmp/workbuddy_cache"
    assert first("workbuddy", "cache", host("wsl")) == "/tmp/workbuddy_cache"
    assert loc.quota is not None and parse_size(loc.quota) == parse_size("20GB")
    link = loc.relocate[0]
    assert isinstance(link, LinkRelocation)
    assert link.windows_link == "junction"
    assert link.why is not None and "GetFinalPathNameByHandle" in link.why
    assert not loc.safe_to_delete  # conversation records live there


def test_workbuddy_needs_a_junction_and_caps_at_20_gb() -> None:
    """The engine reports a symlink where a junction is needed, a cache over its cap and a
    cache on a RAM disk from these facts; the profile repeats none of those checks."""
    location = PROFILES["workbuddy"].location("cache")
    links = [r for r in location.relocate if isinstance(r, LinkRelocation)]
    assert links and links[0].windows_link == "junction"
    assert location.quota is not None and parse_size(location.quota) == 20 * 10**9


def test_astra_cache_env_and_checks() -> None:
    assert first("astra", "gds-cache", host("linux")) == "/tmp/astra-gds-cache"
    assert first("astra", "gds-cache", host("wsl")) == "/tmp/astra-gds-cache"
    assert effective("astra", "gds-cache", host("linux", ASTRA_CACHE_DIR="/data/astra")) == [
        "/data/astra"]
    env = PROFILES["astra"].location("gds-cache").relocate[0]
    assert isinstance(env, EnvRelocation)
    assert env.vars == {"ASTRA_CACHE_DIR": "{dest}", "TMPDIR": "{dest}/tmp"}
    conds = [cond for c in PROFILES["astra"].checks for cond in c.when]
    assert any(c.type == "mount_option" and c.option == "noexec" for c in conds)


def test_astra_selective_preset() -> None:
    preset = PROFILES["astra"].preset("selective")
    assert preset.format == "json" and preset.file is not None
    values = {s.key: s.value for s in preset.settings if isinstance(s.key, str)}
    assert values == {
        "cache_strategy": "selective",
        "selective_layers": list(range(12)),
        "recompute_layers": list(range(12, 32)),
    }


def test_grok_settings_files_per_os() -> None:
    preset = PROFILES["grok"].preset("default")
    assert preset.format == "jsonc" and preset.create and preset.file is not None
    expected = {
        "windows": r"C:\Users\ann\AppData\Roaming\Code\User\settings.json",
        "macos": "/Users/ann/Library/Application Support/Code/User/settings.json",
        "linux": "/home/ann/.config/Code/User/settings.json",
        "wsl": "/home/ann/.vscode-server/data/Machine/settings.json",
    }
    for os_name, path in expected.items():
        assert [expand(t, HOSTS[os_name]) for t in preset.file.for_host(HOSTS[os_name])] == [path]


def test_grok_presets_and_checks() -> None:
    grok = PROFILES["grok"]
    default = {s.key: s.value for s in grok.preset("default").settings}
    assert default == {"grok.code.cacheStrategy": "lfu", "grok.code.cacheSize": 8192,
                       "grok.code.cacheTTL": 300000}
    workspace = grok.preset("workspace")
    assert workspace.workspace_file == ".vscode/settings.json"
    assert {s.key: s.value for s in workspace.settings} == {
        "grok.code.workspaceRoot": "./src", "grok.code.includePaths": ["./src", "./tests"]}
    conds = [cond for c in grok.checks for cond in c.when]
    assert any(c.type == "setting_differs" and c.preset == "default" for c in conds)
    assert any(c.type == "setting_absolute_path" and c.preset == "workspace"
               and c.key == "grok.code.includePaths" for c in conds)


def test_claude_nested_cache_block_and_ttl_check() -> None:
    claude = PROFILES["claude"]
    preset = claude.preset("cache")
    assert preset.format == "yaml"
    assert {tuple(s.key): s.value for s in preset.settings if isinstance(s.key, list)} == {
        ("cache", "ttl"): 3600000, ("cache", "eviction_policy"): "none",
        ("cache", "warmup_on_start"): True}
    ttl_checks = [c for c in claude.checks for cond in c.when
                  if cond.type in ("setting_differs", "setting_below") and cond.key == ["cache", "ttl"]]
    assert ttl_checks
    assert first("claude", "data", host("linux")) == "/home/ann/.claude"
    assert first("claude", "data", host("windows")) == r"C:\Users\ann\.claude"


# --- AI tools ----------------------------------------------------------------------------------

def test_ollama_models_per_os_and_service_relocation() -> None:
    from cachedoctor.locate.effective import resolve_location
    from cachedoctor.locate.files import DictFiles
    from cachedoctor.locate.services import ServiceEnv
    from cachedoctor.locate.world import World

    assert first("ollama", "models", host("macos")) == "/Users/ann/.ollama/models"
    assert paths("ollama", "models", host("linux")) == ["/usr/share/ollama/.ollama/models"]
    assert paths("ollama", "user-models", host("linux")) == ["/home/ann/.ollama/models"]
    assert first("ollama", "models", host("windows")) == r"C:\Users\ann\.ollama\models"
    assert effective("ollama", "models", host("windows", OLLAMA_MODELS=r"D:\models")) == [r"D:\models"]
    # Linux: the service's own environment decides, never a shell's
    linux = host("linux", OLLAMA_MODELS="/shell/models")
    unit = ServiceEnv("ollama.service", "/etc/systemd/system/ollama.service",
                      {"OLLAMA_MODELS": ("/srv/models", "/etc/systemd/system/ollama.service.d/x.conf:2")})
    world = World.of(linux, DictFiles(), services={"ollama.service": unit})
    models = PROFILES["ollama"].location("models")
    place = resolve_location(PROFILES["ollama"], models, world).places[0]
    assert place.path == "/srv/models" and "ollama.service.d/x.conf:2" in place.how()
    bare = World.of(linux, DictFiles(), services={"ollama.service": ServiceEnv(
        "ollama.service", "/etc/systemd/system/ollama.service", {})})
    assert [p.path for p in resolve_location(PROFILES["ollama"], models, bare).places] == [
        "/usr/share/ollama/.ollama/models"]
    env = PROFILES["ollama"].location("models").relocate[0]
    assert isinstance(env, EnvRelocation)
    assert env.vars == {"OLLAMA_MODELS": "{dest}"} and env.scope == "service"
    assert env.service is not None
    linux_steps = " ".join(env.service.for_host(host("linux")))
    assert "systemctl edit ollama.service" in linux_steps
    assert 'Environment="OLLAMA_MODELS={dest}"' in linux_steps
    assert "chown -R ollama:ollama {dest}" in linux_steps
    assert "restart ollama" in linux_steps
    for os_name in ("macos", "windows"):
        assert any("{dest}" in step for step in env.service.for_host(host(os_name)))


def test_torch_inductor_triton_cuda_vllm_paths() -> None:
    assert first("torch", "home", host("linux")) == "/home/ann/.cache/torch"
    assert first("torch", "home", host("linux", TORCH_HOME="/t")) == "/t"
    assert first("inductor", "cache", host("linux")) == "/tmp/torchinductor_ann"
    assert first("inductor", "cache", host("linux", TMPDIR="/scratch")) == "/scratch/torchinductor_ann"
    assert first("inductor", "cache", host("windows")) == (
        r"C:\Users\ann\AppData\Local\Temp\torchinductor_ann")
    assert first("triton", "cache", host("linux")) == "/home/ann/.triton/cache"
    assert first("triton", "cache", host("linux", TRITON_HOME="/th")) == "/th/.triton/cache"
    assert first("cuda", "compute-cache", host("linux")) == "/home/ann/.nv/ComputeCache"
    assert first("cuda", "compute-cache", host("windows")) == (
        r"C:\Users\ann\AppData\Roaming\NVIDIA\ComputeCache")
    assert first("vllm", "cache", host("linux")) == "/home/ann/.cache/vllm"


def test_cuda_maxsize_preset_is_an_env_setting_in_bytes() -> None:
    preset = PROFILES["cuda"].preset("maxsize")
    assert preset.format == "env"
    assert [(s.key, s.value) for s in preset.settings] == [("CUDA_CACHE_MAXSIZE", "4294967296")]


# --- package and build tools ----------------------------------------------------------------------

def test_go_caches_and_clean_commands() -> None:
    assert first("go", "module-cache", host("linux")) == "/home/ann/go/pkg/mod"
    assert effective("go", "module-cache", host("linux", GOPATH="/opt/gopath:/x")) == [
        "/opt/gopath/pkg/mod"]
    assert first("go", "module-cache", host("windows")) == r"C:\Users\ann\go\pkg\mod"
    assert effective("go", "module-cache", host("linux", GOMODCACHE="/m")) == ["/m"]
    assert first("go", "build-cache", host("linux")) == "/home/ann/.cache/go-build"
    assert first("go", "build-cache", host("macos")) == "/Users/ann/Library/Caches/go-build"
    assert first("go", "build-cache", host("windows")) == r"C:\Users\ann\AppData\Local\go-build"
    go = PROFILES["go"]
    assert go.location("build-cache").clean.command == ["go", "clean", "-cache"]  # type: ignore[union-attr]
    assert go.location("module-cache").clean.command == ["go", "clean", "-modcache"]  # type: ignore[union-attr]


def test_cargo_home_and_no_bin() -> None:
    assert first("cargo", "registry", host("linux")) == "/home/ann/.cargo/registry"
    assert first("cargo", "registry", host("linux", CARGO_HOME="/data/cargo")) == "/data/cargo/registry"
    assert first("cargo", "git", host("windows")) == r"C:\Users\ann\.cargo\git"
    for os_name in OS_NAMES:
        for loc in PROFILES["cargo"].locations:
            for template in loc.paths.for_host(HOSTS[os_name]):
                assert "bin" not in re.split(r"[\\/]", expand(template, HOSTS[os_name]))
    preset = PROFILES["cargo"].preset("auto-clean")
    assert preset.format == "toml"
    assert [(s.key, s.value) for s in preset.settings] == [(["cache", "auto-clean-frequency"], "1 day")]


def test_uv_npm_conda_relocation_and_clean() -> None:
    assert first("uv", "cache", host("linux")) == "/home/ann/.cache/uv"
    assert first("uv", "cache", host("macos")) == "/Users/ann/.cache/uv"
    assert first("uv", "cache", host("windows")) == r"C:\Users\ann\AppData\Local\uv\cache"
    assert PROFILES["uv"].location("cache").clean.command == ["uv", "cache", "prune"]  # type: ignore[union-attr]

    assert first("npm", "cache", host("linux")) == "/home/ann/.npm"
    assert first("npm", "cache", host("windows")) == r"C:\Users\ann\AppData\Local\npm-cache"
    npm = PROFILES["npm"].location("cache")
    npmrc = npm.relocate[0]
    assert isinstance(npmrc, ConfigRelocation)
    assert (npmrc.format, npmrc.key) == ("npmrc", "cache")
    assert npm.clean is not None and npm.clean.command == ["npm", "cache", "clean", "--force"]

    conda = PROFILES["conda"].location("pkgs")
    condarc = conda.relocate[0]
    assert isinstance(condarc, ConfigRelocation)
    assert (condarc.format, condarc.key, condarc.as_list) == ("yaml", "pkgs_dirs", True)
    assert [expand(t, host("windows")) for t in condarc.file.for_host(host("windows"))] == [
        r"C:\Users\ann\.condarc"]
    assert conda.clean is not None and conda.clean.command == ["conda", "clean", "--all", "--yes"]


@pytest.mark.parametrize(("tool", "location"), [("uv", "cache"), ("pnpm", "store"), ("conda", "pkgs")])
def test_hard_link_stores_say_so(tool: str, location: str) -> None:
    """The engine keeps a hard-linking store on its consumers' filesystem (doctor) and refuses
    a destination without hard links (move) from these two facts."""
    loc = PROFILES[tool].location(location)
    assert loc.links_into == "~" and "hardlinks" in loc.requires


def test_pnpm_store_defaults() -> None:
    assert first("pnpm", "store", host("linux")) == "/home/ann/.local/share/pnpm/store"
    assert first("pnpm", "store", host("linux", XDG_DATA_HOME="/d")) == "/d/pnpm/store"
    assert first("pnpm", "store", host("linux", PNPM_HOME="/p")) == "/p/store"
    assert first("pnpm", "store", host("macos")) == "/Users/ann/Library/pnpm/store"
    assert first("pnpm", "store", host("windows")) == r"C:\Users\ann\AppData\Local\pnpm\store"
    assert PROFILES["pnpm"].location("store").clean.command == ["pnpm", "store", "prune"]  # type: ignore[union-attr]


def test_poetry_keeps_virtualenvs_apart() -> None:
    poetry = PROFILES["poetry"]
    venvs = poetry.location("virtualenvs")
    assert venvs.kind == "environments" and not venvs.safe_to_delete
    assert poetry.location("cache").safe_to_delete
    assert first("poetry", "virtualenvs", host("linux")) == "/home/ann/.cache/pypoetry/virtualenvs"
    assert first("poetry", "cache", host("windows")) == r"C:\Users\ann\AppData\Local\pypoetry\Cache\cache"
    cache_paths = paths("poetry", "cache", host("macos"))
    assert all("virtualenvs" not in p for p in cache_paths)


def test_gradle_maven_vscode_jetbrains_paths() -> None:
    assert first("gradle", "caches", host("linux")) == "/home/ann/.gradle/caches"
    assert first("gradle", "caches", host("linux", GRADLE_USER_HOME="/g")) == "/g/caches"
    assert first("maven", "repository", host("windows")) == r"C:\Users\ann\.m2\repository"
    assert first("vscode", "cached-data", host("windows")) == r"C:\Users\ann\AppData\Roaming\Code\CachedData"
    assert first("vscode", "cached-vsix", host("linux")) == "/home/ann/.config/Code/CachedExtensionVSIXs"
    assert paths("vscode", "cached-data", host("wsl")) == []
    assert first("vscode", "extensions", host("wsl")) == "/home/ann/.vscode-server/extensions"
    assert not PROFILES["vscode"].location("workspace-storage").safe_to_delete
    assert first("jetbrains", "system", host("windows")) == (
        r"C:\Users\ann\AppData\Local\JetBrains\*20[0-9][0-9].[0-9]*")
    assert first("jetbrains", "system", host("macos")) == (
        "/Users/ann/Library/Caches/JetBrains/*20[0-9][0-9].[0-9]*")


def test_jetbrains_glob_skips_toolbox() -> None:
    import fnmatch

    pattern = "*20[0-9][0-9].[0-9]*"
    assert fnmatch.fnmatch("IntelliJIdea2024.2", pattern)
    assert fnmatch.fnmatch("PyCharmCE2023.3", pattern)
    assert not fnmatch.fnmatch("Toolbox", pattern)


def test_move_fixes_name_the_parent_folder() -> None:
    """`move TOOL DEST` puts the cache in DEST/<tool>: a fix naming DEST/<tool> would nest it twice."""
    import shlex

    for path in PROFILES_DIR.glob("*.yaml"):
        profile = load_profile_file(path)
        for check in profile.checks:
            if check.fix and check.fix.startswith("cachedoctor move "):
                words = shlex.split(check.fix.replace("\\", "/"))
                dest = words[3].rstrip("/")
                assert not dest.endswith(("/{tool}", f"/{profile.id}")), (path.name, check.id, check.fix)


def test_the_readme_lists_every_built_in_profile_by_category() -> None:
    readme = (PROFILES_DIR.parent / "README.md").read_text(encoding="utf-8")
    assert f"Built in ({len(PROFILES)})" in readme
    for tool, profile in PROFILES.items():
        line = next(x for x in readme.splitlines() if x.startswith("- **") and f"(`{profile.category}`)" in x)
        assert f"`{tool}`" in line, f"README does not list {tool} under {profile.category}"
