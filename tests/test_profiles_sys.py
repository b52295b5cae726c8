"""Built-in profiles for containers, OS-level disk hogs, test browsers and IDE/SDK caches:
docker, docker-desktop, wsl, xcode, android, unity, playwright, puppeteer, cypress,
visualstudio, vscode-server. Each test checks one profile's own facts (default paths per OS,
its knob, its clean command) with hand-built Hosts, plus how the clean engine treats the
report-only and tool-command locations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cachedoctor.clean import Policy, plan_clean
from cachedoctor.host import Host
from cachedoctor.profiles.model import ConfigRelocation, EnvRelocation, LinkRelocation
from cachedoctor.resolve import expand
from cachedoctor.tune import plan_tune
from tests.conftest import needs_posix_paths, no_uses
from tests.test_profile_library import HOSTS, PROFILES, first, host, paths

LOCAL = r"C:\Users\ann\AppData\Local"


def _loc(tool: str, location: str):
    return PROFILES[tool].location(location)


def _env_vars(tool: str, location: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for method in _loc(tool, location).relocate:
        if isinstance(method, EnvRelocation):
            out.update(method.vars)
    return out


def _command(tool: str, location: str) -> list[str] | None:
    spec = _loc(tool, location).clean
    return None if spec is None else spec.command


def _oses_with_paths(tool: str) -> set[str]:
    return {
        os_name for os_name, h in HOSTS.items()
        for loc in PROFILES[tool].locations if loc.paths.for_host(h)
    }


# --- categories ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("tool", "category"), [
    ("docker", "container"), ("docker-desktop", "container"),
    ("playwright", "test"), ("puppeteer", "test"), ("cypress", "test"),
    ("android", "ide"), ("unity", "ide"), ("vscode-server", "ide"),
])
def test_categories(tool: str, category: str) -> None:
    assert PROFILES[tool].category == category


# --- docker -------------------------------------------------------------------------------------

def test_docker_data_roots_and_their_daemon_json() -> None:
    assert first("docker", "data-root", host("linux")) == "/var/lib/docker"
    assert first("docker", "data-root", host("wsl")) == "/var/lib/docker"
    assert first("docker", "data-root", host("windows")) == r"C:\ProgramData\docker"
    assert first("docker", "data-root", host("windows", ProgramData=r"D:\PD")) == r"D:\PD\docker"
    assert paths("docker", "data-root", host("macos")) == []  # Docker Desktop: its disk image
    assert first("docker", "rootless-data-root", host("linux")) == "/home/ann/.local/share/docker"
    assert first("docker", "rootless-data-root", host("linux", XDG_DATA_HOME="/data")) == "/data/docker"
    setting = _loc("docker", "data-root").set_by[0]
    assert (setting.config.format, setting.config.key) == ("json", "data-root")
    files = [expand(t, HOSTS["linux"]) for t in setting.config.file.for_host(HOSTS["linux"])]
    assert files == ["/etc/docker/daemon.json"]
    win = [expand(t, HOSTS["windows"]) for t in setting.config.file.for_host(HOSTS["windows"])]
    assert win == [r"C:\ProgramData\docker\config\daemon.json"]
    rootless = _loc("docker", "rootless-data-root").set_by[0].config.file.for_host(HOSTS["linux"])
    assert [expand(t, HOSTS["linux"]) for t in rootless] == ["/home/ann/.config/docker/daemon.json"]


@pytest.mark.parametrize("location", ["data-root", "rootless-data-root"])
def test_docker_is_report_only_with_the_least_destructive_prune(location: str) -> None:
    loc = _loc("docker", location)
    assert not loc.safe_to_delete and loc.kind == "data"
    assert loc.relocate == [] and loc.link_forbidden
    assert [u.type for u in loc.units] == ["tool-only"]
    assert _command("docker", location) == ["docker", "builder", "prune", "--force"]
    assert PROFILES["docker"].processes_for("linux") == []  # the prune needs dockerd running


def test_docker_build_cache_gc_preset(tmp_path: Path) -> None:
    preset = PROFILES["docker"].preset("build-cache-gc")
    assert preset.format == "json" and preset.create
    assert [expand(t, HOSTS["linux"]) for t in preset.file.for_host(HOSTS["linux"])] == [
        "/etc/docker/daemon.json", "/home/ann/.config/docker/daemon.json"]
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text('{\n  "data-root": "/srv/docker",\n  "builder": {"gc": {"enabled": false}}\n}\n')
    plan = plan_tune(PROFILES["docker"], "build-cache-gc", HOSTS["linux"], file=str(daemon_json))
    after = json.loads(plan.after_text)
    assert after == {"data-root": "/srv/docker",
                     "builder": {"gc": {"enabled": True, "defaultKeepStorage": "20GB"}}}
    assert daemon_json.read_text().count("false") == 1  # planning wrote nothing


@needs_posix_paths
def test_docker_clean_runs_only_its_prune(tmp_path: Path) -> None:
    data = tmp_path / "share"
    (data / "docker" / "overlay2").mkdir(parents=True)
    (data / "docker" / "overlay2" / "layer").write_bytes(b"x" * 10)
    h = Host(os="linux", env={"HOME": str(tmp_path), "XDG_DATA_HOME": str(data)}, home=str(tmp_path))
    profile = PROFILES["docker"]

    def rootless(plan):
        return [t for t in plan.targets if t.location == "rootless-data-root"]

    without = plan_clean([profile], h, Policy(explicit=True), which=lambda p: None,
                         in_use=no_uses, measure=False)
    assert rootless(without) == []
    assert any(r.location == "rootless-data-root" and "safe to delete" in r.reason
               for r in without.left_alone)
    with_docker = plan_clean([profile], h, Policy(explicit=True), which=lambda p: "/usr/bin/docker",
                             in_use=no_uses, measure=False)
    [target] = rootless(with_docker)
    assert (target.mode, target.command) == ("command", ["/usr/bin/docker", "builder", "prune", "--force"])
    aged = plan_clean([profile], h, Policy(explicit=True, older_than=86400),
                      which=lambda p: "/usr/bin/docker", in_use=no_uses, measure=False)
    assert rootless(aged) == []  # an age rule never deletes files under a data-root


# --- docker-desktop -----------------------------------------------------------------------------

def test_docker_desktop_disk_image_per_os() -> None:
    assert paths("docker-desktop", "disk-image", host("windows")) == [
        LOCAL + r"\Docker\wsl\disk\docker_data.vhdx",
        LOCAL + r"\Docker\wsl\data\ext4.vhdx",
    ]
    assert paths("docker-desktop", "disk-image", host("macos")) == [
        "/Users/ann/Library/Containers/com.docker.docker/Data/vms/0/data/Docker.raw"]
    assert paths("docker-desktop", "disk-image", host("linux")) == [
        "/home/ann/.docker/desktop/vms/0/data/Docker.raw"]


def test_docker_desktop_is_moved_by_its_own_setting_only() -> None:
    loc = _loc("docker-desktop", "disk-image")
    assert not loc.safe_to_delete and loc.relocate == [] and loc.clean is None
    assert loc.link_forbidden and "Disk image location" in loc.link_forbidden
    assert loc.how_to_move is not None
    for os_name in ("windows", "macos", "linux"):
        steps = " ".join(loc.how_to_move.for_host(HOSTS[os_name]))
        assert "Disk image location" in steps and "Apply & Restart" in steps
    notes = " ".join(PROFILES["docker-desktop"].notes)
    assert "Optimize-VHD" in notes and "compact vdisk" in notes and "wsl --shutdown" in notes


# --- android ------------------------------------------------------------------------------------

def test_android_sdk_defaults_and_variables() -> None:
    assert first("android", "sdk", host("windows")) == LOCAL + r"\Android\Sdk"
    assert first("android", "sdk", host("macos")) == "/Users/ann/Library/Android/sdk"
    assert first("android", "sdk", host("linux")) == "/home/ann/Android/Sdk"
    assert first("android", "sdk", host("linux", ANDROID_SDK_ROOT="/opt/old")) == "/opt/old"
    both = host("linux", ANDROID_SDK_ROOT="/opt/old", ANDROID_HOME="/opt/sdk")
    assert first("android", "sdk", both) == "/opt/sdk"
    sdk = _loc("android", "sdk")
    assert sdk.kind == "environments" and not sdk.safe_to_delete
    assert _env_vars("android", "sdk") == {"ANDROID_HOME": "{dest}"}


def test_android_avd_home_chain() -> None:
    assert first("android", "avd", host("linux")) == "/home/ann/.android/avd"
    assert first("android", "avd", host("windows")) == r"C:\Users\ann\.android\avd"
    assert first("android", "avd", host("macos", ANDROID_USER_HOME="/u/a")) == "/u/a/avd"
    both = host("linux", ANDROID_USER_HOME="/u/a", ANDROID_AVD_HOME="/big/avd")
    assert first("android", "avd", both) == "/big/avd"
    assert not _loc("android", "avd").safe_to_delete
    assert _env_vars("android", "avd") == {"ANDROID_AVD_HOME": "{dest}"}


def test_android_leaves_gradle_caches_to_the_gradle_profile() -> None:
    everywhere = [t for loc in PROFILES["android"].locations for os_name in HOSTS
                  for t in loc.paths.for_host(HOSTS[os_name])]
    assert not any("gradle" in t.lower() for t in everywhere)
    assert "gradle profile" in " ".join(PROFILES["android"].notes)


# --- unity --------------------------------------------------------------------------------------

def test_unity_global_cache_unity6_and_legacy() -> None:
    assert first("unity", "global-cache", host("windows")) == LOCAL + r"\Unity\cache\upm"
    assert first("unity", "global-cache", host("macos")) == "/Users/ann/Library/Caches/Unity/upm"
    assert first("unity", "global-cache", host("linux")) == "/home/ann/.cache/Unity/upm"
    assert first("unity", "global-cache-legacy", host("windows")) == LOCAL + r"\Unity\cache"
    assert first("unity", "global-cache-legacy", host("macos")) == "/Users/ann/Library/Unity/cache"
    assert first("unity", "global-cache-legacy", host("linux")) == "/home/ann/.config/unity3d/cache"
    assert first("unity", "global-cache", host("linux", UPM_CACHE_ROOT="/big/upm")) == "/big/upm"


def test_unity_relocates_with_cache_root_then_the_variable() -> None:
    config, env = _loc("unity", "global-cache").relocate
    assert isinstance(config, ConfigRelocation)
    assert (config.format, config.key) == ("toml", "cacheRoot")
    assert [expand(t, HOSTS["windows"]) for t in config.file.for_host(HOSTS["windows"])] == [
        r"C:\Users\ann\.upmconfig.toml"]
    assert [expand(t, HOSTS["linux"]) for t in config.file.for_host(HOSTS["linux"])] == [
        "/home/ann/.upmconfig.toml"]
    assert isinstance(env, EnvRelocation) and env.vars == {"UPM_CACHE_ROOT": "{dest}"}
    assert _loc("unity", "global-cache").safe_to_delete


# --- playwright, puppeteer, cypress ---------------------------------------------------------------

def test_playwright_browser_cache_per_os() -> None:
    assert first("playwright", "browsers", host("windows")) == LOCAL + r"\ms-playwright"
    assert first("playwright", "browsers", host("macos")) == "/Users/ann/Library/Caches/ms-playwright"
    assert first("playwright", "browsers", host("linux")) == "/home/ann/.cache/ms-playwright"
    assert first("playwright", "browsers", host("linux", XDG_CACHE_HOME="/xdg")) == "/xdg/ms-playwright"
    assert first("playwright", "browsers", host("macos", XDG_CACHE_HOME="/xdg")) == (
        "/Users/ann/Library/Caches/ms-playwright")
    assert first("playwright", "browsers", host("windows", PLAYWRIGHT_BROWSERS_PATH=r"D:\pw")) == r"D:\pw"
    assert _env_vars("playwright", "browsers") == {"PLAYWRIGHT_BROWSERS_PATH": "{dest}"}
    assert _command("playwright", "browsers") == ["playwright", "uninstall", "--all"]


@needs_posix_paths
def test_playwright_clean_uses_its_command_only_when_on_path(tmp_path: Path) -> None:
    browsers = tmp_path / "pw"
    (browsers / "chromium-1200").mkdir(parents=True)
    (browsers / "chromium-1200" / "chrome").write_bytes(b"x" * 100)
    h = Host(os="linux", env={"HOME": str(tmp_path), "PLAYWRIGHT_BROWSERS_PATH": str(browsers)},
             home=str(tmp_path))
    profile = PROFILES["playwright"]
    [by_files] = plan_clean([profile], h, Policy(explicit=True), which=lambda p: None,
                            in_use=no_uses).targets
    assert by_files.mode == "empty" and by_files.files == 1
    [by_tool] = plan_clean([profile], h, Policy(explicit=True), which=lambda p: "/usr/local/bin/" + p,
                           in_use=no_uses, measure=False).targets
    assert by_tool.mode == "command"
    assert by_tool.command == ["/usr/local/bin/playwright", "uninstall", "--all"]


def test_puppeteer_cache_is_in_home_on_every_os() -> None:
    assert first("puppeteer", "browsers", host("windows")) == r"C:\Users\ann\.cache\puppeteer"
    assert first("puppeteer", "browsers", host("macos")) == "/Users/ann/.cache/puppeteer"
    assert first("puppeteer", "browsers", host("linux")) == "/home/ann/.cache/puppeteer"
    assert first("puppeteer", "browsers", host("linux", XDG_CACHE_HOME="/xdg")) == (
        "/home/ann/.cache/puppeteer")
    assert first("puppeteer", "browsers", host("linux", PUPPETEER_CACHE_DIR="/c/pp")) == "/c/pp"
    assert _env_vars("puppeteer", "browsers") == {"PUPPETEER_CACHE_DIR": "{dest}"}
    # `puppeteer browsers clear` asks on stdin and cancels without an answer: no clean command
    assert _command("puppeteer", "browsers") is None
    assert _loc("puppeteer", "browsers").safe_to_delete


def test_cypress_binary_cache_per_os() -> None:
    assert first("cypress", "binaries", host("windows")) == LOCAL + r"\Cypress\Cache"
    assert first("cypress", "binaries", host("macos")) == "/Users/ann/Library/Caches/Cypress"
    assert first("cypress", "binaries", host("linux")) == "/home/ann/.cache/Cypress"
    assert first("cypress", "binaries", host("linux", CYPRESS_CACHE_FOLDER="/ci/cy")) == "/ci/cy"
    assert _env_vars("cypress", "binaries") == {"CYPRESS_CACHE_FOLDER": "{dest}"}
    assert _command("cypress", "binaries") == ["cypress", "cache", "clear"]


@pytest.mark.parametrize("tool", ["playwright", "puppeteer", "cypress"])
def test_test_browsers_are_downloads_listed_per_build(tool: str) -> None:
    [loc] = PROFILES[tool].locations
    assert loc.kind == "downloads" and loc.safe_to_delete
    assert [u.type for u in loc.units] == ["directory-entries"]
    assert _oses_with_paths(tool) == {"linux", "wsl", "macos", "windows"}


# --- vscode-server ------------------------------------------------------------------------------

def test_vscode_server_builds_are_downloads() -> None:
    assert paths("vscode-server", "server-builds", host("linux")) == [
        "/home/ann/.vscode-server/bin", "/home/ann/.vscode-server-insiders/bin"]
    assert paths("vscode-server", "cli-servers", host("wsl"))[0] == "/home/ann/.vscode-server/cli/servers"
    assert first("vscode-server", "server-builds", host("windows")) == r"C:\Users\ann\.vscode-server\bin"
    for loc_id in ("server-builds", "cli-servers"):
        loc = _loc("vscode-server", loc_id)
        assert loc.safe_to_delete and loc.kind == "downloads"
        assert [(u.type, u.under) for u in loc.units] == [("directory-entries", ".")]


def test_vscode_server_keeps_extensions_and_defers_to_vscode_inside_wsl() -> None:
    ext = _loc("vscode-server", "extensions")
    assert not ext.safe_to_delete and ext.kind == "packages"
    assert first("vscode-server", "extensions", host("linux")) == "/home/ann/.vscode-server/extensions"
    assert first("vscode-server", "vsix-cache", host("linux")) == (
        "/home/ann/.vscode-server/data/CachedExtensionVSIXs")
    vscode_wsl = {t for loc in PROFILES["vscode"].locations for t in loc.paths.for_host(HOSTS["wsl"])}
    for loc_id in ("extensions", "vsix-cache", "logs"):
        assert paths("vscode-server", loc_id, host("wsl")) == []
    mine_wsl = {t for loc in PROFILES["vscode-server"].locations for t in loc.paths.for_host(HOSTS["wsl"])}
    assert not mine_wsl & vscode_wsl  # no folder is claimed by both profiles


# --- shared rules ---------------------------------------------------------------------------------

SYS_TOOLS = ["docker", "docker-desktop", "android", "unity", "playwright", "puppeteer", "cypress",
             "vscode-server"]


@pytest.mark.parametrize("tool", SYS_TOOLS)
def test_profile_cites_urls_and_adds_no_engine_wide_checks(tool: str) -> None:
    profile = PROFILES[tool]
    assert profile.sources and all(s.startswith("https://") for s in profile.sources)
    assert profile.checks == []  # link-target-missing and friends are the engine's job
    for loc in profile.locations:
        if loc.link_forbidden:  # cachedoctor must not move it: no relocation method at all
            assert loc.relocate == []
        # a plain folder can always be linked by the engine: no profile here asks for it
        assert not any(isinstance(m, LinkRelocation) for m in loc.relocate)


# --- single-OS profiles: wsl and visualstudio (Windows), xcode (macOS) ----------------------------
# test_profile_library.test_every_tool_has_a_path_on_its_main_platforms expects a Linux and a
# Windows path from every profile but astra and vllm; these three exist on one OS only.

@pytest.mark.parametrize(("tool", "oses"), [
    ("wsl", {"windows"}), ("visualstudio", {"windows"}), ("xcode", {"macos"}),
])
def test_single_os_profiles_claim_no_other_os(tool: str, oses: set[str]) -> None:
    assert _oses_with_paths(tool) == oses


def test_wsl_distribution_disks() -> None:
    assert paths("wsl", "distro-disks", host("windows")) == [
        LOCAL + r"\Packages\*\LocalState\ext4.vhdx",
        LOCAL + r"\wsl\*\ext4.vhdx",
    ]
    loc = _loc("wsl", "distro-disks")
    assert PROFILES["wsl"].category == "container"
    assert not loc.safe_to_delete and loc.relocate == [] and loc.clean is None and loc.link_forbidden
    steps = loc.how_to_move.for_host(HOSTS["windows"])
    joined = " ".join(steps)
    assert steps[0] == "wsl --shutdown"
    assert "wsl --manage <distro> --move" in joined
    assert "wsl --export" in joined and "wsl --unregister" in joined and "wsl --import" in joined
    notes = " ".join(PROFILES["wsl"].notes)
    assert "Optimize-VHD" in notes and "compact vdisk" in notes and "--set-sparse" in notes


def test_xcode_locations() -> None:
    mac = host("macos")
    assert first("xcode", "derived-data", mac) == "/Users/ann/Library/Developer/Xcode/DerivedData"
    assert first("xcode", "device-support", mac) == "/Users/ann/Library/Developer/Xcode/iOS DeviceSupport"
    assert first("xcode", "archives", mac) == "/Users/ann/Library/Developer/Xcode/Archives"
    assert first("xcode", "simulator-devices", mac) == "/Users/ann/Library/Developer/CoreSimulator/Devices"
    assert PROFILES["xcode"].category == "ide"
    derived = _loc("xcode", "derived-data")
    assert derived.safe_to_delete and derived.kind == "build"
    assert [type(m) for m in derived.relocate] == [LinkRelocation]  # defaults plists can't be written
    assert derived.ask is not None and derived.ask.command == [
        "defaults", "read", "com.apple.dt.Xcode", "IDECustomDerivedDataLocation"]
    archives = _loc("xcode", "archives")
    assert archives.kind == "data" and not archives.safe_to_delete
    devices = _loc("xcode", "simulator-devices")
    assert not devices.safe_to_delete and [u.type for u in devices.units] == ["tool-only"]
    assert _command("xcode", "simulator-devices") == ["xcrun", "simctl", "delete", "unavailable"]


@needs_posix_paths
def test_xcode_simulators_are_cleaned_only_by_simctl(tmp_path: Path) -> None:
    devices = tmp_path / "Library" / "Developer" / "CoreSimulator" / "Devices"
    (devices / "0F3C-UDID").mkdir(parents=True)
    mac = Host(os="macos", env={"HOME": str(tmp_path)}, home=str(tmp_path))
    plan = plan_clean([PROFILES["xcode"]], mac, Policy(explicit=True), which=lambda p: "/usr/bin/xcrun",
                      in_use=no_uses, measure=False)
    [target] = [t for t in plan.targets if t.location == "simulator-devices"]
    assert target.command == ["/usr/bin/xcrun", "simctl", "delete", "unavailable"]
    plan = plan_clean([PROFILES["xcode"]], mac, Policy(explicit=True), which=lambda p: None,
                      in_use=no_uses, measure=False)
    assert not [t for t in plan.targets if t.location == "simulator-devices"]


def test_visualstudio_caches() -> None:
    win = host("windows")
    assert first("visualstudio", "package-cache", win) == r"C:\ProgramData\Microsoft\VisualStudio\Packages"
    assert first("visualstudio", "windows-package-cache", win) == r"C:\ProgramData\Package Cache"
    assert PROFILES["visualstudio"].category == "system"
    packages = _loc("visualstudio", "package-cache")
    assert packages.safe_to_delete and packages.relocate == []
    steps = " ".join(packages.how_to_move.for_host(HOSTS["windows"]))
    assert r"HKLM\SOFTWARE\Policies\Microsoft\VisualStudio\Setup" in steps and "CachePath" in steps
    assert "50 characters" in steps and "KeepDownloadedPayloads" in steps
    burn = _loc("visualstudio", "windows-package-cache")
    assert not burn.safe_to_delete and burn.clean is None
    assert "Never delete the Windows Package Cache" in " ".join(PROFILES["visualstudio"].notes)


@pytest.mark.parametrize("tool", ["wsl", "xcode", "visualstudio"])
def test_single_os_profiles_cite_urls_and_add_no_checks(tool: str) -> None:
    profile = PROFILES[tool]
    assert profile.sources and all(s.startswith("https://") for s in profile.sources)
    assert profile.checks == []
