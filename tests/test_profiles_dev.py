"""Facts of the package-manager and build-tool profiles: default paths on each OS (resolved
with hand-built hosts), the knobs that move them, and the tools' own clean commands."""

from __future__ import annotations

import pytest

from cachedoctor.profiles.model import (
    ConfigRelocation,
    ConfigSetting,
    ContentAddressedUnits,
    EntryUnits,
    EnvRelocation,
    EnvSetting,
    LinkRelocation,
    Location,
    ToolOnlyUnits,
)
from cachedoctor.resolve import expand, try_expand
from tests.test_profile_library import HOSTS, PROFILES, first, host, paths

DEV_TOOLS = {
    "nuget": "package", "vcpkg": "package", "bazel": "build", "ccache": "build",
    "sccache": "build", "deno": "package", "bun": "package", "composer": "package",
    "gem": "package", "julia": "package", "renv": "package", "conan": "package",
    "homebrew": "package", "flatpak": "package", "pre-commit": "package",
    "terraform": "package", "electron": "build", "electron-builder": "build",
    "node-gyp": "build",
}

W = r"C:\Users\ann"
WL = W + r"\AppData\Local"
WR = W + r"\AppData\Roaming"


def loc(tool: str, location: str) -> Location:
    return PROFILES[tool].location(location)


def env_vars(tool: str, location: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for method in loc(tool, location).relocate:
        if isinstance(method, EnvRelocation):
            out.update(method.vars)
    return out


def clean_command(tool: str, location: str) -> list[str] | None:
    spec = loc(tool, location).clean
    return None if spec is None else spec.command


def resolved(templates: list[str], os_name: str, **env: str) -> list[str]:
    h = host(os_name, **env)
    return [p for p in (try_expand(t, h) for t in templates) if p is not None]


# --- the set as a whole -----------------------------------------------------------------------

def test_all_dev_profiles_exist_with_their_category() -> None:
    assert set(DEV_TOOLS) <= set(PROFILES)
    for tool, category in DEV_TOOLS.items():
        assert PROFILES[tool].category == category, tool


def test_aliases_are_only_names_users_type() -> None:
    assert PROFILES["gem"].aliases == ["bundler"]
    assert PROFILES["homebrew"].aliases == ["brew"]
    others = set(DEV_TOOLS) - {"gem", "homebrew"}
    assert all(not PROFILES[t].aliases for t in others)


@pytest.mark.parametrize("tool", sorted(DEV_TOOLS))
def test_dev_profiles_cite_urls_and_add_no_generic_checks(tool: str) -> None:
    profile = PROFILES[tool]
    assert profile.sources and all(s.startswith("https://") for s in profile.sources)
    assert not profile.checks  # the engine applies link/free-space/filesystem checks itself


@pytest.mark.parametrize("tool", sorted(DEV_TOOLS))
def test_tool_only_units_come_with_a_reason(tool: str) -> None:
    for location in PROFILES[tool].locations:
        for unit in location.units:
            if isinstance(unit, ToolOnlyUnits):
                assert unit.why.strip()
                assert not location.safe_to_delete, f"{tool}/{location.id}"


# --- NuGet ------------------------------------------------------------------------------------

def test_nuget_default_paths() -> None:
    assert first("nuget", "global-packages", host("linux")) == "/home/ann/.nuget/packages"
    assert first("nuget", "global-packages", host("macos")) == "/Users/ann/.nuget/packages"
    assert first("nuget", "global-packages", host("windows")) == W + r"\.nuget\packages"
    assert first("nuget", "http-cache", host("linux")) == "/home/ann/.local/share/NuGet/v3-cache"
    assert first("nuget", "http-cache", host("windows")) == WL + r"\NuGet\v3-cache"
    assert first("nuget", "temp", host("linux")) == "/tmp/NuGetScratchann"
    assert first("nuget", "temp", host("macos")) == "/tmp/NuGetScratch"
    assert first("nuget", "temp", host("macos", TMPDIR="/var/folders/x")) == "/var/folders/x/NuGetScratch"
    assert first("nuget", "temp", host("windows")) == WL + r"\Temp\NuGetScratch"
    assert first("nuget", "plugins-cache", host("windows")) == WL + r"\NuGet\plugins-cache"
    assert first("nuget", "plugins-cache", host("macos")) == "/Users/ann/.local/share/NuGet/plugins-cache"


def test_nuget_variables_move_each_folder() -> None:
    expected = {"global-packages": "NUGET_PACKAGES", "http-cache": "NUGET_HTTP_CACHE_PATH",
                "temp": "NUGET_SCRATCH", "plugins-cache": "NUGET_PLUGINS_CACHE_PATH"}
    for location, var in expected.items():
        assert env_vars("nuget", location) == {var: "{dest}"}
        assert first("nuget", location, host("linux", **{var: "/data/x"})) == "/data/x"
        assert first("nuget", location, host("windows", **{var: r"D:\x"})) == r"D:\x"


def test_nuget_config_setting_and_clean_commands() -> None:
    gp = loc("nuget", "global-packages")
    env, config = gp.set_by
    assert isinstance(env, EnvSetting) and env.env == ["NUGET_PACKAGES"]
    assert isinstance(config, ConfigSetting)
    assert (config.config.format, config.config.section, config.config.key) == (
        "xml", "config", "globalPackagesFolder")
    assert [expand(t, HOSTS["windows"]) for t in config.config.file.for_host(HOSTS["windows"])] == [
        WR + r"\NuGet\NuGet.Config"]
    for location, which in [("global-packages", "global-packages"), ("http-cache", "http-cache"),
                            ("temp", "temp"), ("plugins-cache", "plugins-cache")]:
        assert clean_command("nuget", location) == ["dotnet", "nuget", "locals", which, "--clear"]
    assert loc("nuget", "temp").kind == "temp"


# --- vcpkg ------------------------------------------------------------------------------------

def test_vcpkg_binary_cache_defaults_and_knob() -> None:
    assert first("vcpkg", "binary-cache", host("linux")) == "/home/ann/.cache/vcpkg/archives"
    assert first("vcpkg", "binary-cache", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/vcpkg/archives"
    assert first("vcpkg", "binary-cache", host("macos")) == "/Users/ann/.cache/vcpkg/archives"
    assert first("vcpkg", "binary-cache", host("windows")) == WL + r"\vcpkg\archives"
    assert first("vcpkg", "binary-cache", host("windows", VCPKG_DEFAULT_BINARY_CACHE=r"D:\bc")) == r"D:\bc"
    method = loc("vcpkg", "binary-cache").relocate[0]
    assert isinstance(method, EnvRelocation) and method.vars == {"VCPKG_DEFAULT_BINARY_CACHE": "{dest}"}
    assert method.why is not None and "must already exist" in method.why
    assert isinstance(loc("vcpkg", "binary-cache").units[0], ContentAddressedUnits)
    assert clean_command("vcpkg", "binary-cache") is None  # vcpkg has no clean command


def test_vcpkg_downloads_follow_the_root() -> None:
    assert first("vcpkg", "downloads", host("linux", VCPKG_ROOT="/opt/vcpkg")) == "/opt/vcpkg/downloads"
    assert first("vcpkg", "downloads", host("linux", VCPKG_DOWNLOADS="/d")) == "/d"
    assert first("vcpkg", "downloads", host("windows", VCPKG_ROOT=r"C:\src\vcpkg")) == r"C:\src\vcpkg\downloads"
    assert env_vars("vcpkg", "downloads") == {"VCPKG_DOWNLOADS": "{dest}"}


# --- Bazel ------------------------------------------------------------------------------------

def test_bazel_output_user_root_per_os() -> None:
    assert first("bazel", "output-user-root", host("linux")) == "/home/ann/.cache/bazel/_bazel_ann"
    assert first("bazel", "output-user-root", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/bazel/_bazel_ann"
    assert paths("bazel", "output-user-root", host("macos")) == [
        "/Users/ann/Library/Caches/bazel/_bazel_ann",  # Bazel 9+
        "/private/var/tmp/_bazel_ann",                 # Bazel 8 and earlier
    ]
    assert first("bazel", "output-user-root", host("windows")) == W + r"\_bazel_ann"
    assert first("bazel", "output-user-root", host("windows", HOME=r"D:\home")) == r"D:\home\_bazel_ann"
    assert first("bazel", "repository-cache", host("linux")) == "/home/ann/.cache/bazel/_bazel_ann/cache/repos"


def test_bazel_has_no_relocation_knob_the_format_can_write_nor_a_global_clean() -> None:
    for location in ("output-user-root", "repository-cache"):
        assert loc("bazel", location).relocate == []
        assert clean_command("bazel", location) is None
    assert isinstance(loc("bazel", "output-user-root").units[0], EntryUnits)
    assert any("output_user_root" in n for n in PROFILES["bazel"].notes)


# --- ccache / sccache -------------------------------------------------------------------------

def test_ccache_defaults_knobs_and_clear() -> None:
    assert paths("ccache", "cache", host("linux")) == ["/home/ann/.cache/ccache", "/home/ann/.ccache"]
    assert first("ccache", "cache", host("macos")) == "/Users/ann/Library/Caches/ccache"
    assert first("ccache", "cache", host("macos", XDG_CACHE_HOME="/xdg")) == "/xdg/ccache"
    assert paths("ccache", "cache", host("windows")) == [WL + r"\ccache", W + r"\.ccache"]
    assert first("ccache", "cache", host("linux", CCACHE_DIR="/ccache")) == "/ccache"
    env, config = loc("ccache", "cache").relocate
    assert isinstance(env, EnvRelocation) and env.vars == {"CCACHE_DIR": "{dest}"}
    assert isinstance(config, ConfigRelocation)
    assert (config.format, config.key, config.section) == ("ini", "cache_dir", None)
    assert [expand(t, HOSTS["linux"]) for t in config.file.for_host(HOSTS["linux"])] == [
        "/home/ann/.config/ccache/ccache.conf"]
    assert [expand(t, HOSTS["macos"]) for t in config.file.for_host(HOSTS["macos"])] == [
        "/Users/ann/Library/Preferences/ccache/ccache.conf"]
    assert config.file.for_host(HOSTS["windows"]) == []
    spec = loc("ccache", "cache").clean
    assert spec is not None and spec.command == ["ccache", "--clear"] and spec.keep == ["ccache.conf"]


def test_sccache_defaults_knobs() -> None:
    assert first("sccache", "cache", host("linux")) == "/home/ann/.cache/sccache"
    assert first("sccache", "cache", host("macos")) == "/Users/ann/Library/Caches/Mozilla.sccache"
    assert first("sccache", "cache", host("windows")) == WL + r"\Mozilla\sccache\cache"
    assert first("sccache", "cache", host("windows", SCCACHE_DIR=r"E:\sc")) == r"E:\sc"
    env, config = loc("sccache", "cache").relocate
    assert isinstance(env, EnvRelocation) and env.vars == {"SCCACHE_DIR": "{dest}"}
    assert isinstance(config, ConfigRelocation) and config.key == ["cache", "disk", "dir"]
    assert [expand(t, HOSTS["windows"]) for t in config.file.for_host(HOSTS["windows"])] == [
        WR + r"\Mozilla\sccache\config\config"]
    assert clean_command("sccache", "cache") is None
    assert PROFILES["sccache"].processes_for("linux") == ["sccache"]


# --- Deno / Bun -------------------------------------------------------------------------------

def test_deno_dir_defaults_and_xdg_on_every_os() -> None:
    assert first("deno", "deno-dir", host("linux")) == "/home/ann/.cache/deno"
    assert first("deno", "deno-dir", host("macos")) == "/Users/ann/Library/Caches/deno"
    assert first("deno", "deno-dir", host("windows")) == WL + r"\deno"
    assert first("deno", "deno-dir", host("macos", XDG_CACHE_HOME="/xdg")) == "/xdg/deno"
    assert first("deno", "deno-dir", host("windows", XDG_CACHE_HOME=r"D:\xdg")) == r"D:\xdg\deno"
    assert first("deno", "deno-dir", host("linux", DENO_DIR="/deno", XDG_CACHE_HOME="/xdg")) == "/deno"
    assert env_vars("deno", "deno-dir") == {"DENO_DIR": "{dest}"}


def test_deno_clean_keeps_location_data_and_does_not_run_deno_clean() -> None:
    d = loc("deno", "deno-dir")
    assert d.clean is not None and d.clean.command is None  # deno clean would delete location_data
    assert "location_data/**" in d.clean.keep and "deno_history.txt" in d.clean.keep
    assert d.ask is not None and d.ask.command == ["deno", "info", "--json"] and d.ask.json_key == "denoDir"


def test_bun_cache_resolution_order() -> None:
    assert first("bun", "install-cache", host("linux")) == "/home/ann/.bun/install/cache"
    assert first("bun", "install-cache", host("macos")) == "/Users/ann/.bun/install/cache"
    assert first("bun", "install-cache", host("windows")) == W + r"\.bun\install\cache"
    assert first("bun", "install-cache", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/.bun/install/cache"
    both = host("linux", XDG_CACHE_HOME="/xdg", BUN_INSTALL="/opt/bun")
    assert first("bun", "install-cache", both) == "/opt/bun/install/cache"
    assert first("bun", "install-cache", host("linux", BUN_INSTALL_CACHE_DIR="/c", BUN_INSTALL="/b")) == "/c"


def test_bun_knob_links_and_commands() -> None:
    cache = loc("bun", "install-cache")
    assert env_vars("bun", "install-cache") == {"BUN_INSTALL_CACHE_DIR": "{dest}"}
    assert cache.links_into == "~"
    assert cache.ask is not None and cache.ask.command == ["bun", "pm", "cache"]
    assert clean_command("bun", "install-cache") == ["bun", "pm", "cache", "rm"]


# --- Composer ---------------------------------------------------------------------------------

def test_composer_defaults() -> None:
    assert paths("composer", "cache", host("linux")) == ["/home/ann/.cache/composer", "/home/ann/.composer/cache"]
    assert first("composer", "cache", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/composer"
    assert first("composer", "cache", host("macos")) == "/Users/ann/Library/Caches/composer"
    assert first("composer", "cache", host("windows")) == WL + r"\Composer"
    assert first("composer", "cache", host("windows", COMPOSER_CACHE_DIR=r"D:\cc")) == r"D:\cc"


def test_composer_knobs_and_clear_cache() -> None:
    env, config = loc("composer", "cache").relocate
    assert isinstance(env, EnvRelocation) and env.vars == {"COMPOSER_CACHE_DIR": "{dest}"}
    assert isinstance(config, ConfigRelocation)
    assert (config.format, config.key) == ("json", ["config", "cache-dir"])
    assert [expand(t, HOSTS["windows"]) for t in config.file.for_host(HOSTS["windows"])] == [
        WR + r"\Composer\config.json"]
    assert expand(config.file.for_host(HOSTS["linux"])[0], HOSTS["linux"]) == (
        "/home/ann/.config/composer/config.json")
    assert clean_command("composer", "cache") == ["composer", "clear-cache"]


# --- RubyGems / Bundler -----------------------------------------------------------------------

def test_gem_caches_per_os() -> None:
    assert resolved(loc("gem", "gem-cache").paths.for_host(HOSTS["linux"]), "linux") == [
        "/home/ann/.gem/ruby/*/cache", "/home/ann/.local/share/gem/ruby/*/cache"]
    assert resolved(loc("gem", "gem-cache").paths.for_host(HOSTS["linux"]), "linux", GEM_HOME="/g")[0] == "/g/cache"
    assert resolved(loc("gem", "gem-cache").paths.for_host(HOSTS["windows"]), "windows") == [
        W + r"\.gem\ruby\*\cache"]
    assert paths("gem", "spec-cache", host("linux")) == ["/home/ann/.cache/gem/specs", "/home/ann/.gem/specs"]
    assert first("gem", "spec-cache", host("macos", GEM_SPEC_CACHE="/s")) == "/s"
    assert first("gem", "bundler-cache", host("linux")) == "/home/ann/.bundle/cache"
    assert first("gem", "bundler-cache", host("linux", BUNDLE_USER_HOME="/bh")) == "/bh/cache"
    assert first("gem", "bundler-cache", host("windows")) == W + r"\.bundle\cache"
    assert env_vars("gem", "bundler-cache") == {"BUNDLE_USER_CACHE": "{dest}"}


def test_gem_cleanup_runs_only_on_installed_gems_and_force_is_never_used() -> None:
    gems = loc("gem", "user-gems")
    assert gems.kind == "environments" and not gems.safe_to_delete
    assert clean_command("gem", "user-gems") == ["gem", "cleanup"]
    for location in PROFILES["gem"].locations:
        command = clean_command("gem", location.id) or []
        assert "--force" not in command and "bundle" not in command
    assert any("bundle clean --force" in n for n in PROFILES["gem"].notes)


# --- Julia / renv / Conan ---------------------------------------------------------------------

def test_julia_depot_and_compiled() -> None:
    assert first("julia", "depot", host("linux")) == "/home/ann/.julia"
    assert first("julia", "depot", host("windows")) == W + r"\.julia"
    assert first("julia", "compiled", host("macos")) == "/Users/ann/.julia/compiled"
    depot = loc("julia", "depot")
    assert not depot.safe_to_delete and loc("julia", "compiled").safe_to_delete
    assert env_vars("julia", "depot") == {"JULIA_DEPOT_PATH": "{dest}"}
    setting = loc("julia", "compiled").set_by[0]
    assert isinstance(setting, EnvSetting)
    assert (setting.env, setting.separator, setting.value) == (["JULIA_DEPOT_PATH"], ":", "{value}/compiled")
    assert isinstance(depot.units[0], ToolOnlyUnits)
    assert clean_command("julia", "depot") == ["julia", "--startup-file=no", "-e", "using Pkg; Pkg.gc()"]


def test_renv_cache_paths() -> None:
    assert paths("renv", "cache", host("linux")) == [
        "/home/ann/.cache/R/renv/cache", "/home/ann/.local/share/renv/cache"]
    assert first("renv", "cache", host("macos")) == "/Users/ann/Library/Caches/org.R-project.R/R/renv/cache"
    assert first("renv", "cache", host("windows")) == WL + r"\R\cache\R\renv\cache"
    assert first("renv", "cache", host("linux", R_USER_CACHE_DIR="/rc")) == "/rc/R/renv/cache"
    assert first("renv", "cache", host("linux", RENV_PATHS_ROOT="/root-r")) == "/root-r/cache"
    assert first("renv", "cache", host("linux", RENV_PATHS_CACHE="/c", RENV_PATHS_ROOT="/r")) == "/c"


def test_renv_cache_is_tool_only_and_linked_into_projects() -> None:
    cache = loc("renv", "cache")
    assert not cache.safe_to_delete
    assert cache.links_into == "~" and cache.requires == ["symlinks"]
    assert [type(u) for u in cache.units] == [ToolOnlyUnits]
    link, env = cache.relocate
    assert isinstance(link, LinkRelocation)
    assert isinstance(env, EnvRelocation) and env.vars == {"RENV_PATHS_CACHE": "{dest}"}
    assert clean_command("renv", "cache") is None


def test_conan_home() -> None:
    assert first("conan", "home", host("linux")) == "/home/ann/.conan2"
    assert first("conan", "home", host("macos")) == "/Users/ann/.conan2"
    assert first("conan", "home", host("windows")) == W + r"\.conan2"
    assert first("conan", "home", host("linux", CONAN_HOME="/ch")) == "/ch"
    home = loc("conan", "home")
    assert env_vars("conan", "home") == {"CONAN_HOME": "{dest}"}
    assert home.ask is not None and home.ask.command == ["conan", "config", "home"]
    assert clean_command("conan", "home") == ["conan", "cache", "clean"]
    assert not home.safe_to_delete and isinstance(home.units[0], ToolOnlyUnits)


# --- Homebrew / Flatpak -----------------------------------------------------------------------

def test_homebrew_cache_on_macos_and_linux_only() -> None:
    assert first("homebrew", "cache", host("macos")) == "/Users/ann/Library/Caches/Homebrew"
    assert first("homebrew", "cache", host("linux")) == "/home/ann/.cache/Homebrew"
    assert first("homebrew", "cache", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/Homebrew"
    assert first("homebrew", "cache", host("wsl")) == "/home/ann/.cache/Homebrew"
    assert paths("homebrew", "cache", host("windows")) == []
    assert first("homebrew", "cache", host("macos", HOMEBREW_CACHE="/hb")) == "/hb"


def test_homebrew_knobs_ask_and_cleanup() -> None:
    cache = loc("homebrew", "cache")
    config, env = cache.relocate
    assert isinstance(config, ConfigRelocation)
    assert (config.format, config.key) == ("keyvalue", "HOMEBREW_CACHE")
    assert resolved(config.file.for_host(HOSTS["macos"]), "macos") == ["/Users/ann/.homebrew/brew.env"]
    assert resolved(config.file.for_host(HOSTS["linux"]), "linux", XDG_CONFIG_HOME="/cfg")[0] == (
        "/cfg/homebrew/brew.env")
    assert isinstance(env, EnvRelocation) and env.vars == {"HOMEBREW_CACHE": "{dest}"}
    assert cache.ask is not None and cache.ask.command == ["brew", "--cache"]
    assert clean_command("homebrew", "cache") == ["brew", "cleanup"]


def test_flatpak_app_caches_and_installation() -> None:
    assert first("flatpak", "app-caches", host("linux")) == "/home/ann/.var/app/*/cache"
    assert first("flatpak", "user-installation", host("linux")) == "/home/ann/.local/share/flatpak"
    assert first("flatpak", "user-installation", host("linux", FLATPAK_USER_DIR="/fp")) == "/fp"
    for os_name in ("windows", "macos"):
        assert paths("flatpak", "app-caches", host(os_name)) == []
        assert paths("flatpak", "user-installation", host(os_name)) == []
    assert loc("flatpak", "app-caches").safe_to_delete
    install = loc("flatpak", "user-installation")
    assert install.kind == "environments" and not install.safe_to_delete  # not a cache
    assert clean_command("flatpak", "user-installation") == [
        "flatpak", "uninstall", "--user", "--unused", "--noninteractive", "-y"]
    assert install.relocate == []


# --- pre-commit / Terraform -------------------------------------------------------------------

def test_pre_commit_store() -> None:
    assert first("pre-commit", "store", host("linux")) == "/home/ann/.cache/pre-commit"
    assert first("pre-commit", "store", host("macos")) == "/Users/ann/.cache/pre-commit"
    assert first("pre-commit", "store", host("windows")) == W + r"\.cache\pre-commit"
    assert first("pre-commit", "store", host("linux", PRE_COMMIT_HOME="/p", XDG_CACHE_HOME="/x")) == "/p"
    link, env = loc("pre-commit", "store").relocate
    assert isinstance(link, LinkRelocation) and link.why is not None and "absolute" in link.why
    assert isinstance(env, EnvRelocation) and env.vars == {"PRE_COMMIT_HOME": "{dest}"}
    assert clean_command("pre-commit", "store") == ["pre-commit", "gc"]


def test_terraform_plugin_cache_is_opt_in() -> None:
    assert first("terraform", "plugin-cache", host("linux")) == "/home/ann/.terraform.d/plugin-cache"
    assert first("terraform", "plugin-cache", host("windows")) == WR + r"\terraform.d\plugin-cache"
    assert first("terraform", "plugin-cache", host("linux", TF_PLUGIN_CACHE_DIR="/tf")) == "/tf"
    cache = loc("terraform", "plugin-cache")
    assert env_vars("terraform", "plugin-cache") == {"TF_PLUGIN_CACHE_DIR": "{dest}"}
    assert not cache.safe_to_delete  # working directories symlink into it
    assert clean_command("terraform", "plugin-cache") is None


# --- Electron, electron-builder, node-gyp -----------------------------------------------------

def test_electron_download_cache() -> None:
    assert paths("electron", "cache", host("linux")) == ["/home/ann/.cache/electron", "/home/ann/.electron"]
    assert first("electron", "cache", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/electron"
    assert first("electron", "cache", host("macos")) == "/Users/ann/Library/Caches/electron"
    assert first("electron", "cache", host("windows")) == WL + r"\electron\Cache"
    assert first("electron", "cache", host("linux", electron_config_cache="/e")) == "/e"
    assert env_vars("electron", "cache") == {"electron_config_cache": "{dest}", "ELECTRON_CACHE": "{dest}"}
    assert clean_command("electron", "cache") is None


def test_electron_builder_cache() -> None:
    assert first("electron-builder", "cache", host("linux")) == "/home/ann/.cache/electron-builder"
    assert first("electron-builder", "cache", host("macos")) == "/Users/ann/Library/Caches/electron-builder"
    assert first("electron-builder", "cache", host("windows")) == WL + r"\electron-builder\Cache"
    assert first("electron-builder", "cache", host("windows", ELECTRON_BUILDER_CACHE=r"D:\eb")) == r"D:\eb"
    assert env_vars("electron-builder", "cache") == {"ELECTRON_BUILDER_CACHE": "{dest}"}
    assert clean_command("electron-builder", "cache") is None  # clear-cache prompts on the terminal


def test_node_gyp_devdir() -> None:
    assert paths("node-gyp", "devdir", host("linux")) == ["/home/ann/.cache/node-gyp", "/home/ann/.node-gyp"]
    assert first("node-gyp", "devdir", host("macos")) == "/Users/ann/Library/Caches/node-gyp"
    assert first("node-gyp", "devdir", host("windows")) == WL + r"\node-gyp\Cache"
    assert first("node-gyp", "devdir", host("linux", npm_config_devdir="/gyp")) == "/gyp"
    assert env_vars("node-gyp", "devdir") == {"npm_config_devdir": "{dest}"}
    assert first("node-gyp", "electron-headers", host("linux")) == "/home/ann/.electron-gyp"
    assert first("node-gyp", "electron-headers", host("windows")) == W + r"\.electron-gyp"
    assert all(clean_command("node-gyp", loc_id) is None for loc_id in ("devdir", "electron-headers"))
