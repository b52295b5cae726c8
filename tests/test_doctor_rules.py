"""The doctor's engine-wide rules: checked for every location of every tool, with fixes built
from the real values."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from cachedoctor.doctor import apply_rules
from cachedoctor.doctor.fixes import DEST_PLACEHOLDER, Candidate, choose_dest
from cachedoctor.host import Host
from cachedoctor.locate.files import DictFiles
from cachedoctor.locate.world import EnvValue, World
from cachedoctor.profiles.loader import load_profiles, parse_profile
from cachedoctor.profiles.model import Profile
from cachedoctor.relocate.plan import relocation_methods
from cachedoctor.resolve import try_expand
from tests.conftest import needs_posix_paths, needs_root

BUILTIN = {k: v.profile for k, v in load_profiles().profiles.items() if v.origin == "builtin"}
HOSTS = {
    "linux": Host("linux", {"HOME": "/home/ann", "USER": "ann"}, "/home/ann"),
    "macos": Host("macos", {"HOME": "/Users/ann", "USER": "ann"}, "/Users/ann"),
    "windows": Host("windows", {"USERPROFILE": r"C:\Users\ann", "LOCALAPPDATA": r"C:\Users\ann\AppData\Local",
                                "APPDATA": r"C:\Users\ann\AppData\Roaming", "TEMP": r"C:\Users\ann\AppData\Local\Temp",
                                "ProgramData": r"C:\ProgramData", "USERNAME": "ann"}, r"C:\Users\ann"),
}


def _concrete(path: str) -> str:
    return path.replace("*", "Default").replace("?", "x").replace("[0-9]", "1")


@pytest.mark.parametrize("os_name", sorted(HOSTS))
def test_a_broken_link_is_an_error_for_every_link_relocatable_location_of_every_profile(
        os_name: str) -> None:
    """Unplug the drive behind any location that can be moved with a link, on any OS: the doctor
    says so, with the tool, the location and the missing target — no profile has to ask."""
    host = HOSTS[os_name]
    checked = 0
    for tool, profile in sorted(BUILTIN.items()):
        for location in profile.locations:
            if not any(m.method == "link" for m in relocation_methods(location, host)):
                continue
            for template in location.paths.for_host(host):
                path = try_expand(template, host)
                if not path:
                    continue
                link = _concrete(path)
                gone = r"X:\gone" if host.is_windows else "/mnt/gone/cache"
                files = DictFiles(links={link: ("junction" if host.is_windows else "symlink", gone)},
                                  windows=host.is_windows)
                findings, errors = apply_rules(profile, World.of(host, files), {})
                assert errors == [], (tool, location.id, errors)
                broken = [f for f in findings if f.check == "relocation-link-broken"]
                assert [(f.location, f.path, f.severity) for f in broken] == [
                    (location.id, link, "error")], (tool, location.id, link, findings)
                assert gone in broken[0].message and broken[0].fix is not None
                assert f"cachedoctor restore {tool} --location {location.id}" in broken[0].fix
                checked += 1
                break
    assert checked >= 50


def demo(body: str) -> Profile:
    text = "id: demo\nname: Demo\ndescription: test\nlocations:\n" + textwrap.indent(
        textwrap.dedent(body), "  ")
    return parse_profile(text, "demo.yaml")


DEMO = demo("""\
- id: cache
  paths: {linux: '${DEMO_CACHE:-~/.cache/demo}'}
  safe_to_delete: true
  relocate: [{method: env, vars: {DEMO_CACHE: '{dest}'}}]
""")


def test_a_variable_new_shells_get_but_this_shell_does_not_is_a_hint_with_the_line_to_run() -> None:
    host = HOSTS["linux"]
    files = DictFiles(dirs=frozenset({"/mnt/d/demo"}))
    world = World.of(host, files, persistent={"DEMO_CACHE": EnvValue("/mnt/d/demo", "~/.profile:4", True)})
    [finding] = [f for f in apply_rules(DEMO, world, {})[0] if f.check == "env-not-seen"]
    assert finding.severity == "hint" and "/mnt/d/demo" in finding.message
    assert finding.fix == "export DEMO_CACHE=/mnt/d/demo"


def test_a_service_without_the_variable_is_reported_with_the_drop_in_that_sets_it() -> None:
    """cachedoctor moved the models by variable: the service must have it (an error, with the
    drop-in that sets it). The user's own shell variable may be meant for `ollama serve` run by
    hand: a hint, and no command that points the service at a folder in the user's home."""
    from cachedoctor.locate.services import ServiceEnv
    from cachedoctor.relocate.journal import Operation

    ollama = BUILTIN["ollama"]
    host = HOSTS["linux"]
    unit = ServiceEnv("ollama.service", "/etc/systemd/system/ollama.service", {})
    world = World.of(host, DictFiles(), services={"ollama.service": unit},
                     persistent={"OLLAMA_MODELS": EnvValue("/data/models", "~/.bashrc:9")})
    [finding] = [f for f in apply_rules(ollama, world, {})[0] if f.check == "service-env-not-set"]
    assert finding.severity == "hint" and "~/.bashrc:9" in finding.message
    assert finding.fix is None
    record = Operation(id="1", kind="move", tool="ollama", location="models", method="env",
                       dest_root="/mnt/d", base="/mnt/d/ollama/models", pairs=[],
                       verify="size", settings={})
    world = World.of(host, DictFiles(), services={"ollama.service": unit},
                     records={"ollama/models": record})
    [finding] = [f for f in apply_rules(ollama, world, {})[0] if f.check == "service-env-not-set"]
    assert finding.severity == "error" and finding.fix is not None
    assert "Environment=\"OLLAMA_MODELS=/mnt/d/ollama/models\"" in finding.fix
    assert "sudo systemctl restart ollama.service" in finding.fix


def test_an_unused_old_default_folder_is_named_with_its_size(isolated_home: Path, tmp_path: Path) -> None:
    from cachedoctor.locate import observe

    old = isolated_home / ".cache" / "demo"
    old.mkdir(parents=True)
    (old / "big.bin").write_bytes(os.urandom(3 << 20))
    new = tmp_path / "new"
    new.mkdir()
    host = Host("linux", {**os.environ, "DEMO_CACHE": str(new)}, str(isolated_home))
    [finding] = [f for f in apply_rules(DEMO, observe(host), {})[0] if f.check == "old-cache-unused"]
    assert finding.path == str(old) and "3.0 MiB" in finding.message
    assert finding.fix == f"rm -rf -- {old}"


def test_a_move_fix_names_a_real_destination_on_another_drive_with_room() -> None:
    host = HOSTS["linux"]
    here, usb, small = (Candidate("/", 1, 10 << 30, "ext4"), Candidate("/mnt/d", 2, 500 << 30, "9p"),
                        Candidate("/media/usb", 3, 1 << 30, "exfat"))
    assert choose_dest([here, usb, small], source_device=1, needed=2 << 30, host=host) == "/mnt/d/ai-cache"
    assert choose_dest([here, small], source_device=1, needed=2 << 30, host=host) is None
    previous = ["/media/usb/models", "/mnt/d/mine"]
    assert choose_dest([here, usb, small], source_device=1, needed=2 << 30, previous=previous,
                       host=host) == "/mnt/d/mine"  # where the user put caches before
    win = HOSTS["windows"]
    assert choose_dest([Candidate("C:\\", 1, 1, "NTFS"), Candidate("D:\\", 2, 9 << 40, "NTFS")],
                       source_device=1, needed=1, host=win) == "D:\\ai-cache"
    assert DEST_PLACEHOLDER == "<DEST on another drive>"
    # a previous DEST below a nested mount is on the inner drive (here the cache's own one)
    outer, inner = Candidate("/mnt/data", 1, 500 << 30, "ext4"), Candidate("/mnt/data/ssd", 2, 1 << 30, "ext4")
    assert choose_dest([outer, inner], source_device=2, needed=10 << 30,
                       previous=["/mnt/data/ssd/ai-cache"], host=host) == "/mnt/data/ai-cache"
    # a drive the move would leave (nearly) full is not suggested: 2 GiB or 10% stay free
    tight = Candidate("/mnt/small", 3, int(10.6 * (1 << 30)), "ext4", total_bytes=100 << 30)
    assert choose_dest([tight], source_device=1, needed=10 << 30, host=host) is None
    roomy = Candidate("/mnt/small", 3, 30 << 30, "ext4", total_bytes=100 << 30)
    assert choose_dest([roomy], source_device=1, needed=10 << 30, host=host) == "/mnt/small/ai-cache"
    # off a RAM disk, the system drive is a fine place: in the home folder, which one can write
    system = Candidate("/", 4, 200 << 30, "ext4", folder="/home/ann")
    assert choose_dest([system], source_device=9, needed=1 << 30, host=host) == "/home/ann/ai-cache"


@needs_root
@needs_posix_paths
def test_a_cache_on_a_ram_disk_is_a_warning_with_a_move_fix(tmpfs: Path, isolated_home: Path) -> None:
    from cachedoctor.locate import observe

    cache = tmpfs / "demo"
    cache.mkdir()
    (cache / "x").write_bytes(b"x" * 1000)
    host = Host("linux", {**os.environ, "DEMO_CACHE": str(cache)}, str(isolated_home))
    [finding] = [f for f in apply_rules(DEMO, observe(host), {})[0] if f.check == "cache-on-ram-disk"]
    assert finding.severity == "warning" and "tmpfs" in finding.message
    assert finding.fix is not None and finding.fix.startswith("cachedoctor move demo ")
    assert "--location cache" in finding.fix
    # the user's own link onto the RAM disk: move refuses a link it did not make, so the fix
    # puts the data back first
    default = isolated_home / ".cache" / "demo"
    default.parent.mkdir(parents=True, exist_ok=True)
    default.symlink_to(cache)
    host = Host("linux", {k: v for k, v in os.environ.items() if k != "DEMO_CACHE"},
                str(isolated_home))
    [finding] = [f for f in apply_rules(DEMO, observe(host), {})[0] if f.check == "cache-on-ram-disk"]
    assert finding.fix is not None
    assert finding.fix.startswith("cachedoctor restore demo --location cache && cachedoctor move demo ")


@needs_root
@needs_posix_paths
def test_a_nearly_full_drive_holding_a_big_cache_is_a_warning(
        make_realfs: object, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.doctor import rules
    from cachedoctor.locate import observe

    drive = make_realfs("ext4", size="64M", name="full")  # type: ignore[operator]
    cache = Path(drive.path) / "demo"
    cache.mkdir()
    (cache / "blob").write_bytes(os.urandom(4 << 20))
    usage = os.statvfs(drive.path)
    spare = usage.f_bavail * usage.f_frsize - (2 << 20)  # leave 2 MiB free
    subprocess.run(["fallocate", "-l", str(spare), str(Path(drive.path) / "filler")], check=True)
    monkeypatch.setattr(rules, "BIG_CACHE_BYTES", 1 << 20)  # a small drive stands in for a big one
    host = Host("linux", {**os.environ, "DEMO_CACHE": str(cache)}, str(isolated_home))
    [finding] = [f for f in apply_rules(DEMO, observe(host), {})[0] if f.check == "drive-nearly-full"]
    assert finding.severity == "warning" and str(cache) in finding.message
    assert finding.fix is not None and finding.fix.startswith("cachedoctor move demo ")


def test_a_setting_changed_behind_cachedoctors_back_is_reported(isolated_home: Path,
                                                                tmp_path: Path) -> None:
    from cachedoctor.relocate.journal import Operation, Pair

    record = Operation(id="x", kind="move", tool="demo", location="cache", method="env",
                       dest_root=str(tmp_path), base=str(tmp_path / "demo"),
                       pairs=[Pair(str(isolated_home / ".cache" / "demo"), str(tmp_path / "demo"), False)],
                       settings={"vars": {"DEMO_CACHE": str(tmp_path / "demo")}}, phase="done")
    host = Host("linux", {"HOME": str(isolated_home), "DEMO_CACHE": "/elsewhere"}, str(isolated_home))
    world = World.of(host, DictFiles(), records={"demo/cache": record})
    [finding] = [f for f in apply_rules(DEMO, world, {})[0]
                 if f.check == "setting-disagrees-with-record"]
    assert "/elsewhere" in finding.message and str(tmp_path / "demo") in finding.message
    assert finding.fix == "cachedoctor restore demo --location cache"
