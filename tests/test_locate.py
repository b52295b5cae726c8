"""Where each cache really is: the pure resolution (any OS, on Linux), the start-up files and
service units it reads, and the live picture over real files."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from cachedoctor.host import Host
from cachedoctor.locate import shellenv
from cachedoctor.locate.effective import (
    Picture,
    planned_destinations,
    resolve_location,
    settings_of,
)
from cachedoctor.locate.files import DictFiles, LiveFiles
from cachedoctor.locate.services import unit_environment
from cachedoctor.locate.world import EnvValue, World, with_changes
from cachedoctor.policies import PolicyRead
from cachedoctor.profiles.loader import parse_profile
from cachedoctor.profiles.model import ConfigSetting, EnvSetting, PolicySetting, Profile
from tests.conftest import needs_posix_paths

LINUX = Host("linux", {"HOME": "/home/ann", "USER": "ann"}, "/home/ann")
WIN = Host("windows", {"USERPROFILE": r"C:\Users\ann", "LOCALAPPDATA": r"C:\Users\ann\AppData\Local",
                       "APPDATA": r"C:\Users\ann\AppData\Roaming"}, r"C:\Users\ann")


def profile(body: str, tool: str = "demo") -> Profile:
    head = f"id: {tool}\nname: Demo\ndescription: test\nlocations:\n"
    return parse_profile(head + textwrap.indent(textwrap.dedent(body), "  "), f"{tool}.yaml")


PIP_LIKE = profile("""\
- id: cache
  paths: {linux: '${XDG_CACHE_HOME:-~/.cache}/demo', windows: '%LOCALAPPDATA%\\demo'}
  safe_to_delete: true
  set_by:
    - env: DEMO_CACHE
    - config:
        file: {linux: ['~/.config/demo/demo.conf', '/etc/demo.conf'], windows: '%APPDATA%\\demo.ini'}
        format: ini
        section: global
        key: cache-dir
  relocate:
    - {method: config, file: {linux: '~/.config/demo/demo.conf'}, format: ini, section: global, key: cache-dir}
    - {method: env, vars: {DEMO_CACHE: '{dest}'}}
""")


def resolve(prof: Profile, world: World, location: str = "cache") -> Picture:
    return resolve_location(prof, prof.location(location), world)


def paths(pic: Picture) -> list[str]:
    return [p.path for p in pic.places]


# ------------------------------------------------------------------------------ precedence


def test_settings_come_in_the_tools_order_and_relocation_methods_are_not_listed_twice() -> None:
    kinds = [type(s) for s in settings_of(PIP_LIKE.location("cache"))]
    assert kinds == [EnvSetting, ConfigSetting]  # set_by only: the relocations' are the same ones


def test_the_variable_beats_the_config_file_which_beats_the_default() -> None:
    conf = {"/etc/demo.conf": "[global]\ncache-dir = /srv/demo\n",
            "/home/ann/.config/demo/demo.conf": "[global]\ncache-dir = ~/c\n"}
    assert paths(resolve(PIP_LIKE, World.of(LINUX))) == ["/home/ann/.cache/demo"]
    pic = resolve(PIP_LIKE, World.of(LINUX, DictFiles(texts=conf)))
    assert paths(pic) == ["/home/ann/c"]  # the first file that sets the key decides
    assert pic.places[0].via[0].kind == "config"
    assert pic.places[0].how() == "demo.conf [global] cache-dir (from /home/ann/.config/demo/demo.conf)"
    only_global = {"/etc/demo.conf": conf["/etc/demo.conf"]}
    assert paths(resolve(PIP_LIKE, World.of(LINUX, DictFiles(texts=only_global)))) == ["/srv/demo"]
    env = Host("linux", {**LINUX.env, "DEMO_CACHE": "/data/demo"}, LINUX.home)
    assert paths(resolve(PIP_LIKE, World.of(env, DictFiles(texts=conf)))) == ["/data/demo"]


def test_a_variable_that_names_no_folder_does_not_decide() -> None:
    env = Host("linux", {**LINUX.env, "DEMO_CACHE": "0"}, LINUX.home)
    assert paths(resolve(PIP_LIKE, World.of(env))) == ["/home/ann/.cache/demo"]


def test_windows_settings_and_case_blind_variables() -> None:
    ini = DictFiles(texts={r"C:\Users\ann\AppData\Roaming\demo.ini": "[global]\ncache-dir=D:\\d\n"},
                    windows=True)
    assert paths(resolve(PIP_LIKE, World.of(WIN, ini))) == [r"D:\d"]
    env = Host("windows", {**WIN.env, "demo_cache": r"E:\x"}, WIN.home)
    assert paths(resolve(PIP_LIKE, World.of(env, ini))) == [r"E:\x"]


def test_a_malformed_config_file_is_a_problem_not_a_crash() -> None:
    files = DictFiles(texts={"/home/ann/.config/demo/demo.conf": "this is not ini\n"})
    pic = resolve(PIP_LIKE, World.of(LINUX, files))
    assert paths(pic) == ["/home/ann/.cache/demo"]
    assert pic.problems and "demo.conf" in pic.problems[0]


def test_list_values_and_list_variables_take_their_first_entry() -> None:
    conda = profile("""\
    - id: pkgs
      paths: {linux: ['~/miniconda3/pkgs', '~/.conda/pkgs']}
      safe_to_delete: false
      set_by:
        - {env: PKGS, separator: ','}
        - config: {file: {linux: '~/.condarc'}, format: yaml, key: pkgs_dirs}
          pick: first
    """)
    files = DictFiles(texts={"/home/ann/.condarc": "pkgs_dirs:\n  - /fast/pkgs\n  - /slow/pkgs\n"})
    assert paths(resolve(conda, World.of(LINUX, files), "pkgs")) == ["/fast/pkgs"]
    env = Host("linux", {**LINUX.env, "PKGS": " /a/pkgs, /b/pkgs"}, LINUX.home)
    assert paths(resolve(conda, World.of(env, files), "pkgs")) == ["/a/pkgs"]


def test_a_setting_that_replaces_the_common_folder_keeps_each_path_below_it() -> None:
    poetry = profile("""\
    - id: cache
      paths: {linux: ['~/.cache/demo/cache', '~/.cache/demo/artifacts']}
      safe_to_delete: true
      set_by:
        - env: DEMO_HOME
          replaces: {linux: '~/.cache/demo'}
        - env: DEMO_VENVS
          value: '{value}/venvs'
    """)
    env = Host("linux", {**LINUX.env, "DEMO_HOME": "/x"}, LINUX.home)
    assert paths(resolve(poetry, World.of(env))) == ["/x/cache", "/x/artifacts"]
    env = Host("linux", {**LINUX.env, "DEMO_VENVS": "/v"}, LINUX.home)
    assert paths(resolve(poetry, World.of(env))) == ["/v/venvs"]


# ---------------------------------------------------------------------- browsers, services

CHROME = profile("""\
- id: cache
  paths:
    linux: ['~/.cache/chrome/Default', '~/.cache/chrome/Profile *']
    windows: ['%LOCALAPPDATA%\\Chrome\\User Data\\Default\\Cache', '%LOCALAPPDATA%\\Chrome\\User Data\\Profile *\\Cache']
  safe_to_delete: true
  relocate:
    - {method: policy, browser: chrome}
""")


def test_a_disk_cache_policy_puts_every_profile_below_its_folder() -> None:
    assert isinstance(settings_of(CHROME.location("cache"))[0], PolicySetting)
    files = DictFiles(dirs=frozenset({"/mnt/d/cc/Default", "/mnt/d/cc/Profile 3"}))
    world = World.of(LINUX, files, policies={("chrome", "DiskCacheDir"): ("/mnt/d/cc", "/etc/x.json")})
    pic = resolve(CHROME, world)
    assert paths(pic) == ["/mnt/d/cc/Default", "/mnt/d/cc/Profile 3"]
    assert [p.rel for p in pic.places] == ["Default", "Profile 3"]
    assert pic.places[0].how() == "policy DiskCacheDir (from /etc/x.json)"
    win = World.of(WIN, DictFiles(windows=True), policies={
        ("chrome", "DiskCacheDir"): ("${local_app_data}\\cc", "HKEY_CURRENT_USER\\x")})
    assert paths(resolve(CHROME, win)) == [r"C:\Users\ann\AppData\Local\cc\Default\Cache"]


MANAGED = "/etc/opt/chrome/policies/managed"


def policy_world(texts: dict[str, str]) -> World:
    from cachedoctor.policies import read_policy

    files = DictFiles(texts={f"{MANAGED}/{name}": text for name, text in texts.items()})
    return World(LINUX, files, policy=lambda b, n: read_policy(b, n, LINUX, files))


def test_policy_files_are_read_as_chromium_reads_them() -> None:
    """ConfigDirPolicyLoader: every file whatever its name, in name order, the last one that
    sets the policy wins, a file that is not JSON is skipped (and said), trailing commas pass."""
    world = policy_world({"10-old.json": '{"DiskCacheDir": ', "20-cache.json": '{"DiskCacheDir": "/good"}'})
    pic = resolve(CHROME, world)
    assert paths(pic) == ["/good/Default"]
    assert len(pic.problems) == 1 and "10-old.json: the browser skips" in pic.problems[0]
    world = policy_world({"policy": '{"DiskCacheDir": "/trailing",}\n'})
    assert paths(resolve(CHROME, world)) == ["/trailing/Default"]
    world = policy_world({"a.json": '{"DiskCacheDir": "/a"}', "b.json": '["not", "an object"]',
                          "c.json": '{"DiskCacheDir": "/c"} // a comment'})
    pic = resolve(CHROME, world)
    assert paths(pic) == ["/a/Default"] and len(pic.problems) == 2


def test_the_policy_a_move_writes_is_simulated_among_the_files_already_there() -> None:
    """cachedoctor.json sorts before policy.json: an administrator's policy.json still wins,
    which the simulation finds before anything is written."""
    from cachedoctor.policies import read_policy_after_write

    world = policy_world({"policy.json": '{"DiskCacheDir": "/admin"}'})
    after = read_policy_after_write("chrome", "DiskCacheDir", "/d/chrome", LINUX, world.files)
    assert (after.value, after.where) == ("/admin", f"{MANAGED}/policy.json")
    world = policy_world({"00-first.json": '{"DiskCacheDir": "/early"}',
                          "cachedoctor.json": '{"DiskCacheSize": 1}'})
    after = read_policy_after_write("chrome", "DiskCacheDir", "/d/chrome", LINUX, world.files)
    assert (after.value, after.where) == ("/d/chrome", f"{MANAGED}/cachedoctor.json")


def test_a_service_variable_comes_from_the_unit_not_from_shells() -> None:
    root = "/etc/systemd/system"
    files = DictFiles(texts={
        f"{root}/demo.service": "[Service]\nEnvironment=DEMO_MODELS=/unit/models\n",
        f"{root}/demo.service.d/10-x.conf": "[Service]\nEnvironment=\"DEMO_MODELS=/dropin models\"\n",
    })
    env = unit_environment("demo.service", files)
    assert env.file == f"{root}/demo.service"
    assert env.values["DEMO_MODELS"] == ("/dropin models", f"{root}/demo.service.d/10-x.conf:2")
    served = profile("""\
    - id: models
      paths: {linux: /usr/share/demo/models}
      safe_to_delete: false
      set_by: [{env: DEMO_MODELS, service: {systemd: demo.service}}]
    """)
    shell = Host("linux", {**LINUX.env, "DEMO_MODELS": "/shell"}, LINUX.home)
    world = World.of(shell, files, services={"demo.service": env})
    pic = resolve(served, world, "models")
    assert paths(pic) == ["/dropin models"] and pic.audience == "the demo.service service"
    # not installed: the variable is read as for any tool
    assert paths(resolve(served, World.of(shell), "models")) == ["/shell"]


def test_unit_files_reset_and_environment_files_win(tmp_path: Path) -> None:
    root = "/etc/systemd/system"
    files = DictFiles(texts={
        "/usr/lib/systemd/system/demo.service":
            "[Service]\nEnvironment=A=1 B=2\nEnvironmentFile=-/etc/default/demo\n",
        f"{root}/demo.service.d/override.conf": "[Service]\nEnvironment=\nEnvironment=C=3\n",
        "/etc/default/demo": "# comment\nB='from file'\n",
    })
    env = unit_environment("demo.service", files)
    assert {k: v for k, (v, _) in env.values.items()} == {"C": "3", "B": "from file"}
    assert unit_environment("absent.service", files).file is None


# -------------------------------------------------------------------- what new shells get


def test_start_up_files_export_what_new_shells_see() -> None:
    text = textwrap.dedent("""\
        export PATH="$HOME/bin:$PATH"
        export HF_HOME=~/hf  # comment
        TORCH_HOME='/data/torch me'
        export TORCH_HOME
        UNEXPORTED=/x
        export LATER="$HF_HOME/later"
        export COMPUTED=$(date)
        # >>> cachedoctor >>>
        export PIP_CACHE_DIR='/mnt/d/pip'
        # <<< cachedoctor <<<
        """)
    found = {a.name: a for a in shellenv.parse(text, "sh", "~/.bashrc", {"PATH": "/usr/bin"}, "/home/ann")}
    assert found["HF_HOME"].value == "/home/ann/hf"
    assert found["TORCH_HOME"].value == "/data/torch me" and found["TORCH_HOME"].line == 3
    assert found["LATER"].value == "/home/ann/hf/later"
    assert found["PATH"].value == "/home/ann/bin:/usr/bin"
    assert "UNEXPORTED" not in found and "COMPUTED" not in found
    assert found["PIP_CACHE_DIR"].managed and not found["HF_HOME"].managed
    assert found["PIP_CACHE_DIR"].origin == "~/.bashrc:9, cachedoctor's block"


def test_fish_and_environment_d() -> None:
    fish = shellenv.parse("set -gx HF_HOME /f/hf\nset -l LOCAL /no\n", "fish", "config.fish", {}, "/h")
    assert [(a.name, a.value) for a in fish] == [("HF_HOME", "/f/hf")]
    universal = shellenv.parse("SETUVAR --export UV_CACHE_DIR:/u\\x1e/second\nSETUVAR X:/no\n",
                               "fish-universal", "fish_variables", {}, "/h")
    assert [(a.name, a.value) for a in universal] == [("UV_CACHE_DIR", "/u")]
    envd = shellenv.parse("GOCACHE=/g\nGOMOD=$GOCACHE/mod\n", "envd", "60.conf", {}, "/h")
    assert [(a.name, a.value) for a in envd] == [("GOCACHE", "/g"), ("GOMOD", "/g/mod")]


def test_the_shell_that_ran_the_move_and_new_shells_are_told_apart() -> None:
    world = World.of(LINUX, persistent={"DEMO_CACHE": EnvValue("/mnt/d/demo", "~/.profile:3", True)})
    pic = resolve(PIP_LIKE, world)
    assert paths(pic) == ["/mnt/d/demo"]
    step = pic.places[0].via[0]
    assert step.managed and step.describe() == "env DEMO_CACHE (from ~/.profile:3, set by cachedoctor)"
    assert pic.shell is not None and [p.path for p in pic.shell] == ["/home/ann/.cache/demo"]


# ------------------------------------------------------------------- planning a change


def test_the_world_after_a_change_says_where_the_tool_will_look() -> None:
    files = DictFiles(dirs=frozenset({"/home/ann/.cache/chrome/Default", "/home/ann/.cache/chrome/Profile 1"}))
    world = World.of(LINUX, files)
    now = resolve(CHROME, world)
    assert [p.rel for p in now.existing] == ["Default", "Profile 1"]
    after = with_changes(world, policies={
        ("chrome", "DiskCacheDir"): PolicyRead("/d/chrome", "planned")})
    assert planned_destinations(CHROME.location("cache"), world, after, now.existing) == [
        "/d/chrome/Default", "/d/chrome/Profile 1"]
    conf = "/home/ann/.config/demo/demo.conf"
    after = with_changes(World.of(LINUX), texts={conf: "[global]\ncache-dir = /d/demo\n"})
    assert paths(resolve(PIP_LIKE, after)) == ["/d/demo"]
    # a variable of the user's still wins over the new config key: the move would be wrong
    env = Host("linux", {**LINUX.env, "DEMO_CACHE": "/mine"}, LINUX.home)
    blocked = with_changes(World.of(env), texts={conf: "[global]\ncache-dir = /d/demo\n"})
    assert paths(resolve(PIP_LIKE, blocked)) == ["/mine"]


# ------------------------------------------------------------------ the live picture


@needs_posix_paths
def test_live_picture_reads_start_up_files_links_and_unused_defaults(isolated_home: Path,
                                                                       tmp_path: Path) -> None:
    from cachedoctor.locate import observe

    (isolated_home / ".profile").write_text(f"export DEMO_CACHE={tmp_path}/moved\n", encoding="utf-8")
    (tmp_path / "moved").mkdir()
    old = isolated_home / ".cache" / "demo"
    old.mkdir(parents=True)
    host = Host("linux", {k: v for k, v in os.environ.items() if k != "DEMO_CACHE"}, str(isolated_home))
    pic = resolve(PIP_LIKE, observe(host))
    assert paths(pic) == [f"{tmp_path}/moved"]
    assert pic.places[0].via[0].origin == "~/.profile:1"
    assert pic.shell is not None and [p.path for p in pic.shell] == [str(old)]
    # a link at the path is followed to where the bytes are
    (isolated_home / ".profile").unlink()
    old.rmdir()
    old.symlink_to(tmp_path / "moved")
    place = resolve(PIP_LIKE, observe(host)).places[0]
    assert place.link == "symlink" and place.data == str(tmp_path / "moved")
    (tmp_path / "moved").rmdir()
    place = resolve(PIP_LIKE, observe(host)).places[0]
    assert place.broken and place.exists


@needs_posix_paths
def test_system_files_are_read_below_the_system_root(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "demo.conf").write_text("[global]\ncache-dir = /srv/from-root\n", encoding="utf-8")
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    files = LiveFiles()
    assert files.read_text("/etc/demo.conf") is not None
    assert files.glob("/etc/*.conf") == ["/etc/demo.conf"]
    assert paths(resolve(PIP_LIKE, World.of(LINUX, files))) == ["/srv/from-root"]


def test_this_shells_own_places_are_skipped_only_when_they_are_the_same() -> None:
    """`located` answers "no separate view for this shell" without resolving twice when no
    variable it read differs between this process and new sessions: on every location of every
    built-in profile, in worlds where the start-up files agree with the process, change a
    variable it reads, or name it in another case (Windows), the answer is the one of
    resolving both views."""
    from cachedoctor.locate import effective
    from cachedoctor.profiles.loader import load_profiles

    def both(location: object, world: World) -> tuple[object, object]:
        places = effective._places(location, world.new_session_host(), world, [],
                                   persistent=True)
        shell = effective._places(location, world.host, world, [], persistent=False)
        return places, (shell if [p.path for p in shell] != [p.path for p in places] else None)

    mac = Host("macos", {"HOME": "/Users/ann"}, "/Users/ann")
    worlds = []
    for host in (LINUX, WIN, mac):
        home = host.home
        cache = rf"{home}\AppData\Local\Other" if host.is_windows else f"{home}/other-cache"
        same = {name: value for name, value in host.env.items()}
        for persistent in ({}, same, {"XDG_CACHE_HOME": cache, "LOCALAPPDATA": cache},
                           {"localappdata": cache, "HF_HOME": cache, "PIP_CACHE_DIR": cache,
                            "npm_config_cache": cache, "OLLAMA_MODELS": cache}):
            worlds.append(World.of(host, persistent=persistent))
    shared = Host("linux", {**LINUX.env, "XDG_CACHE_HOME": "/home/ann/.cache"}, LINUX.home)
    worlds.append(World.of(shared, persistent={"XDG_CACHE_HOME": "/home/ann/.cache"}))
    skipped = differ = 0
    for loaded in load_profiles([]).profiles.values():
        for location in loaded.profile.locations:
            for world in worlds:
                found = effective.located(location, world, [])
                assert found == both(location, world), (loaded.profile.id, location.id)
                asked: set[str] = set()
                effective._places(location, world.new_session_host(asked), world, [],
                                  persistent=True)
                skipped += world.same_in_this_process(asked)
                differ += found[1] is not None
    assert skipped > 1000 and differ > 50
