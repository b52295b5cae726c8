"""`doctor`: evaluators against real mounts, links, trees and files; the CLI's exit codes and JSON."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachedoctor import doctor
from cachedoctor.conditions import condition_names
from cachedoctor.doctor.evaluators import EVALUATORS, _is_absolute_any
from cachedoctor.drives import drive_of, partitions
from cachedoctor.host import Host
from cachedoctor.profiles.loader import parse_profile
from cachedoctor.profiles.model import Profile
from tests.conftest import (
    IS_MACOS,
    IS_WINDOWS,
    needs_posix_paths,
    needs_root,
    needs_symlinks,
    profile_json,
    result_of,
    run_cli,
)

# The key a profile written for a CLI run must use: the subprocess resolves paths for the real OS.
HERE = "windows" if IS_WINDOWS else "macos" if IS_MACOS else "linux"


@pytest.fixture(autouse=True)
def _fresh_mounts() -> Iterator[None]:
    """Mounts change inside tests: forget the cached partition table around each test."""
    partitions.cache_clear()
    yield
    partitions.cache_clear()


def linux_host() -> Host:
    return Host(os="linux", env=dict(os.environ), home=os.environ["HOME"])


def profile_text(path: str, checks: str, *, tool: str = "demo", os_key: str = "linux") -> str:
    head = textwrap.dedent(
        f"""\
        id: {tool}
        name: Demo tool
        description: A tool made up for a test.
        locations:
          - id: cache
            paths:
              {os_key}: '{path}'
            safe_to_delete: true
        checks:
        """
    )
    return head + textwrap.indent(textwrap.dedent(checks), "  ")


def make_profile(path: str, checks: str, *, tool: str = "demo") -> Profile:
    return parse_profile(profile_text(path, checks, tool=tool), f"{tool}.yaml")


def write_profile(folder: Path, path: str, checks: str, *, tool: str = "demo") -> Path:
    make_profile(path, checks, tool=tool)  # validates before a CLI run sees it
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{tool}.yaml"
    file.write_text(profile_text(path, checks, tool=tool, os_key=HERE), encoding="utf-8")
    return file


def mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)


@pytest.fixture
def noexec_mount(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "noexec"
    mount_tmpfs(mount, "noexec,size=4m")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_every_condition_type_has_an_evaluator() -> None:
    names = condition_names()
    assert len(names) == len(set(names)) >= 15
    assert set(names) == set(EVALUATORS)


NOEXEC_CHECK = """\
- id: cache-noexec
  severity: error
  when: [{type: mount_option, location: cache, option: noexec}]
  message: 'The cache at {path} is on a noexec mount ({value}).'
  why: Programs kept in the cache cannot run.
  fix: 'cachedoctor move {tool} ~/ai-cache/{tool} --location {location}'
"""


@needs_root
def test_mount_option_on_a_real_noexec_mount(noexec_mount: Path, tmp_path: Path) -> None:
    cache = noexec_mount / "cache"
    cache.mkdir()
    profile = make_profile(str(cache), NOEXEC_CHECK)
    findings, errors = doctor.check_profile(profile, linux_host())
    assert errors == []
    assert [(f.check, f.severity, f.path, f.location) for f in findings] == [
        ("cache-noexec", "error", str(cache), "cache")
    ]
    assert findings[0].message == f"The cache at {cache} is on a noexec mount (noexec)."
    assert findings[0].fix == "cachedoctor move demo ~/ai-cache/demo --location cache"

    # A cache that does not exist yet: its nearest existing parent decides the mount.
    later = noexec_mount / "not" / "yet"
    findings, _ = doctor.check_profile(make_profile(str(later), NOEXEC_CHECK), linux_host())
    assert [f.path for f in findings] == [str(later)]

    # The same check on an exec mount finds nothing.
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    assert "noexec" not in (drive_of(str(elsewhere)) or pytest.fail("no drive")).options
    findings, _ = doctor.check_profile(make_profile(str(elsewhere), NOEXEC_CHECK), linux_host())
    assert findings == []


@needs_root
def test_mount_option_follows_a_relocation_link_to_its_target(noexec_mount: Path, tmp_path: Path) -> None:
    """Moved off the noexec mount (a symlink left there): the data is elsewhere, no finding."""
    real = tmp_path / "real-cache"
    real.mkdir()
    link = noexec_mount / "cache"
    link.symlink_to(real)
    findings, _ = doctor.check_profile(make_profile(str(link), NOEXEC_CHECK), linux_host())
    assert findings == []


TMPFS_CHECK = """\
- id: on-ram-disk
  severity: warning
  when: [{type: filesystem_type, location: cache, types: [tmpfs, ramfs]}]
  message: 'The cache is on {value} and is emptied at every restart.'
  why: RAM disks are cleared at reboot.
  fix: 'cachedoctor move {tool} ~/ai-cache/{tool}'
"""


@needs_root
def test_filesystem_type_on_a_real_tmpfs(tmpfs: Path, tmp_path: Path) -> None:
    cache = tmpfs / "cache"
    cache.mkdir()
    findings, _ = doctor.check_profile(make_profile(str(cache), TMPFS_CHECK), linux_host())
    assert [(f.check, f.severity, f.value) for f in findings] == [("on-ram-disk", "warning", "tmpfs")]
    assert findings[0].message == "The cache is on tmpfs and is emptied at every restart."
    plain = tmp_path / "plain"
    plain.mkdir()
    drive = drive_of(str(plain))
    assert drive is not None
    if drive.fstype not in ("tmpfs", "ramfs"):
        findings, _ = doctor.check_profile(make_profile(str(plain), TMPFS_CHECK), linux_host())
        assert findings == []


LINK_CHECKS = """\
- id: link-target-missing
  severity: error
  when: [{type: link_target_missing, location: cache}]
  message: 'The cache points at {value}, which is gone.'
  why: The other drive is unplugged.
  fix: 'cachedoctor restore {tool}'
- id: symlink-used
  severity: hint
  when: [{type: link_kind, location: cache, kind: symlink}]
  message: 'Relocated with a symlink to {target}.'
  why: Some tools resolve symlinks.
"""


@needs_posix_paths
def test_broken_relocation_link_is_an_error_and_exits_1(tmp_path: Path) -> None:
    target = tmp_path / "other-drive" / "demo"
    target.mkdir(parents=True)
    (target / "blob").write_bytes(b"x" * 100)
    link = tmp_path / "home-cache"
    link.symlink_to(target)
    profile = make_profile(str(link), LINK_CHECKS)

    findings, _ = doctor.check_profile(profile, linux_host())
    assert [f.check for f in findings] == ["symlink-used"]  # the link works: only the hint
    assert findings[0].message == f"Relocated with a symlink to {target}."

    (target / "blob").unlink()
    target.rmdir()  # the drive is gone
    report = doctor.run_doctor([profile], linux_host())
    assert report.tools == ["demo"]  # a broken link still counts as present
    assert [(f.check, f.severity) for f in report.findings] == [
        ("link-target-missing", "error"),
        ("symlink-used", "hint"),
    ]
    assert report.findings[0].message == f"The cache points at {target}, which is gone."
    assert report.findings[0].fix == "cachedoctor restore demo"
    assert report.exit_code == 1


@needs_posix_paths
def test_conditions_on_one_location_must_hold_for_the_same_path(tmp_path: Path) -> None:
    """Two caches match a glob: one is a broken link, the other a plain folder. A check needing
    'exists' and 'broken link' names only the broken one; os_is gates the whole check."""
    (tmp_path / "c-plain").mkdir()
    (tmp_path / "c-broken").symlink_to(tmp_path / "missing")
    checks = """\
    - id: broken-here
      severity: warning
      when:
        - {type: os_is, os: [linux]}
        - {type: location_exists, location: cache}
        - {type: link_target_missing, location: cache}
      message: 'broken: {path}'
      why: because
    """
    profile = make_profile(str(tmp_path / "c-*"), checks)
    findings, _ = doctor.check_profile(profile, linux_host())
    assert [f.path for f in findings] == [str(tmp_path / "c-broken")]
    wsl = Host(os="wsl", env=dict(os.environ), home=os.environ["HOME"])
    assert len(doctor.check_profile(profile, wsl)[0]) == 1  # WSL counts as Linux
    macos = Host(os="macos", env=dict(os.environ), home=os.environ["HOME"])
    profile_mac = parse_profile(
        profile_json(profile).replace('"linux":', '"macos":'), "demo.json"
    )
    assert doctor.check_profile(profile_mac, macos)[0] == []  # os_is [linux] fails on macOS


@needs_root
def test_free_space_below_on_a_filled_tmpfs(tmpfs: Path) -> None:
    cache = tmpfs / "cache"
    cache.mkdir()
    checks = """\
    - id: drive-full
      severity: error
      when: [{type: free_space_below, location: cache, percent: 10}]
      message: 'Only {value} left on {mount}.'
      why: The tool fails when the drive is full.
    - id: drive-below-1mb
      severity: warning
      when: [{type: free_space_below, location: cache, size: 1MB}]
      message: 'Under 1 MB: {value}'
      why: Nearly full.
    """
    profile = make_profile(str(cache), checks)
    assert doctor.check_profile(profile, linux_host())[0] == []
    with open(cache / "filler", "wb") as fh:  # 8 MiB drive: leave about 5% free
        fh.write(os.urandom(int(7.6 * 1024 * 1024)))
    findings, _ = doctor.check_profile(profile, linux_host())
    assert [f.check for f in findings] == ["drive-full", "drive-below-1mb"]
    assert findings[0].message.startswith("Only ") and f"on {tmpfs}." in findings[0].message
    assert "%" in (findings[0].value or "")


@needs_posix_paths
def test_over_quota_with_a_real_tree_user_cap_and_profile_recommendation(tmp_path: Path) -> None:
    from cachedoctor.quota import set_quota

    cache = tmp_path / "cache"
    (cache / "sub").mkdir(parents=True)
    for i in range(10):
        (cache / "sub" / f"f{i}").write_bytes(os.urandom(40_000))
    checks = """\
    - id: over-quota
      severity: warning
      when: [{type: over_quota, location: cache}]
      message: 'The cache is {value}.'
      why: It is bigger than its cap.
      fix: 'cachedoctor clean {tool} --location {location}'
    """
    profile = make_profile(str(cache), checks)
    assert doctor.check_profile(profile, linux_host())[0] == []  # no cap anywhere
    set_quota("demo", "cache", 100_000)
    findings, _ = doctor.check_profile(profile, linux_host())
    assert [(f.check, f.path) for f in findings] == [("over-quota", str(cache))]
    assert "cap 97.7 KiB" in findings[0].message
    set_quota("demo", "cache", 10_000_000)  # the user's cap wins over the profile's
    assert doctor.check_profile(profile, linux_host())[0] == []
    set_quota("demo", "cache", None)

    recommended = parse_profile(
        profile_json(profile).replace(
            '"safe_to_delete":true', '"safe_to_delete":true,"quota":"200KB"'
        ),
        "demo.json",
    )
    assert recommended.locations[0].quota == "200KB"
    findings, _ = doctor.check_profile(recommended, linux_host())
    assert len(findings) == 1 and "cap 195.3 KiB" in findings[0].message


@needs_posix_paths
def test_policy_value_below_reads_linux_managed_policy_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    managed = root / "etc/opt/chrome/policies/managed"
    managed.mkdir(parents=True)
    (managed / "10-other.json").write_text('{"HomepageLocation": "x"}', encoding="utf-8")
    (managed / "cachedoctor.json").write_text('{"DiskCacheSize": 2048}', encoding="utf-8")
    checks = """\
    - id: cache-size-unit
      severity: error
      when: [{type: policy_value_below, browser: chrome, policy: DiskCacheSize, below: 1048576}]
      message: 'Chrome cache size is {value} bytes: MB were probably meant ({path}).'
      why: DiskCacheSize is in bytes.
      fix: 'cachedoctor tune {tool} --preset cache-size'
    """
    cache = tmp_path / "cache"
    cache.mkdir()
    profile = make_profile(str(cache), checks, tool="chrome")
    monkeypatch.setenv("CACHEDOCTOR_SYSTEM_ROOT", str(root))
    findings, _ = doctor.check_profile(profile, linux_host())
    assert [f.value for f in findings] == ["DiskCacheSize = 2048"]
    assert "/etc/opt/chrome/policies/managed/cachedoctor.json" in findings[0].message

    (managed / "cachedoctor.json").write_text('{"DiskCacheSize": 2147483647}', encoding="utf-8")
    assert doctor.check_profile(profile, linux_host())[0] == []
    # The parameter wins over the variable: an empty root means no policy at all.
    assert doctor.check_profile(profile, linux_host(), policy_root=str(tmp_path / "none"))[0] == []

    (managed / "cachedoctor.json").write_text("{broken", encoding="utf-8")
    findings, errors = doctor.check_profile(profile, linux_host())
    # the browser skips a broken file (and so does the check); the browser's own location
    # reports the file as a problem (tests/test_locate.py)
    assert findings == [] and errors == []


def test_windows_policy_lookup_is_machine_first_then_user() -> None:
    from cachedoctor.locate.files import DictFiles
    from cachedoctor.policies import HIVES, REGISTRY_KEYS, read_policy

    assert HIVES == ("HKEY_LOCAL_MACHINE", "HKEY_CURRENT_USER")
    assert REGISTRY_KEYS["edge"] == r"SOFTWARE\Policies\Microsoft\Edge"
    assert REGISTRY_KEYS["chrome"] == r"SOFTWARE\Policies\Google\Chrome"
    assert REGISTRY_KEYS["chromium"] == r"SOFTWARE\Policies\Chromium"
    values = {("HKEY_CURRENT_USER", r"SOFTWARE\Policies\Google\Chrome", "DiskCacheSize"): 1024}
    seen: list[tuple[str, str, str]] = []

    def fake_registry(hive: str, key: str, name: str) -> object:
        seen.append((hive, key, name))
        return values.get((hive, key, name))

    windows = Host(os="windows", env={}, home="C:\\Users\\me")
    found = read_policy("chrome", "DiskCacheSize", windows, DictFiles(windows=True),
                        registry=fake_registry)
    assert (found.value, found.where) == (
        1024, r"HKEY_CURRENT_USER\SOFTWARE\Policies\Google\Chrome\DiskCacheSize")
    assert [s[0] for s in seen] == ["HKEY_LOCAL_MACHINE", "HKEY_CURRENT_USER"]


def test_fill_keeps_unknown_placeholders_and_quotes_paths() -> None:
    host = linux_host()
    facts = {"tool": "demo", "path": "/tmp/a b"}
    quote = lambda p: doctor.shell_quote(p, host)  # noqa: E731
    assert doctor.fill("move {tool} {path} {dest} {}", facts, quote=quote) == (
        "move demo '/tmp/a b' {dest} {}"
    )
    assert doctor.fill('{"k": 1} {path}', facts) == '{"k": 1} /tmp/a b'
    win = Host(os="windows", env={}, home="C:\\Users\\me")
    assert doctor.shell_quote("C:\\Program Files\\x", win) == '"C:\\Program Files\\x"'
    assert doctor.shell_quote("D:\\ai-cache\\x", win) == "D:\\ai-cache\\x"


def test_absolute_path_detection_covers_every_os() -> None:
    for absolute in ("/src", "~/src", "C:\\src", "c:/src", "\\\\server\\share", "${env:HOME}/x"):
        assert _is_absolute_any(absolute), absolute
    for relative in ("./src", "src", "../tests", "${workspaceFolder}/src"):
        assert not _is_absolute_any(relative), relative


# ---------------------------------------------------------------------------------- the CLI

CLI_CHECKS = """\
- id: exists-warning
  severity: warning
  when: [{type: location_exists, location: cache}]
  message: 'The cache exists at {path}.'
  why: For the test.
  fix: 'cachedoctor scan {tool}'
"""


@needs_symlinks
def test_cli_json_fields_and_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "my cache"
    cache.mkdir()
    profiles = tmp_path / "profiles"
    write_profile(profiles, str(cache), CLI_CHECKS)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))

    result = run_cli("doctor", "demo", "--json")
    assert result.returncode == 0, result.stderr  # a warning alone exits 0
    document = result_of(result)
    assert document["tools"] == ["demo"]
    assert document["summary"] == {"errors": 0, "warnings": 1, "hints": 0, "check_errors": 0}
    [finding] = document["findings"]
    assert set(finding) == {
        "tool", "location", "path", "check", "severity", "message", "why", "fix", "value"
    }
    assert finding["fix"] == "cachedoctor scan demo"
    assert finding["message"] == f"The cache exists at {cache}."

    human = run_cli("doctor", "demo")
    assert human.returncode == 0
    assert "exists-warning" in human.stdout and "fix: cachedoctor scan demo" in human.stdout

    (cache).rmdir()
    (tmp_path / "gone").mkdir()
    os.symlink(tmp_path / "gone", cache)
    (tmp_path / "gone").rmdir()
    write_profile(profiles, str(cache), CLI_CHECKS + LINK_CHECKS)
    result = run_cli("doctor", "--json")  # default: every present tool (the broken link counts)
    assert result.returncode == 1, result.stderr
    document = result_of(result)
    assert "demo" in document["tools"]
    assert document["findings"][0]["severity"] == "error"
    assert document["findings"][0]["check"] == "link-target-missing"
    assert "Traceback" not in result.stderr

    human = run_cli("doctor", "demo")
    assert human.returncode == 1
    assert "link-target-missing" in human.stdout and "1 error(s)" in human.stdout


def test_cli_unknown_tool_is_bad_input() -> None:
    result = run_cli("doctor", "no-such-tool", "--json")
    assert result.returncode == 2
    assert "error: unknown tool 'no-such-tool'" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_absent_tool_is_skipped_by_default_but_checked_when_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profiles = tmp_path / "profiles"
    checks = """\
    - id: always
      severity: hint
      when: [{type: os_is, os: [linux, macos, windows]}]
      message: hello from {tool}
      why: test
    """
    write_profile(profiles, str(tmp_path / "absent"), checks, tool="absent-tool")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    default = result_of(run_cli("doctor", "--json"))
    assert "absent-tool" not in default["tools"]
    named = run_cli("doctor", "absent-tool", "--json")
    assert named.returncode == 0
    assert [f["message"] for f in result_of(named)["findings"]] == ["hello from absent-tool"]


def test_builtin_profiles_run_on_this_machine() -> None:
    """Smoke test: every built-in profile, present or not, evaluates without crashing."""
    from cachedoctor.profiles.loader import load_profiles

    loaded = load_profiles()  # a broken built-in file is the loader tests' business
    names = sorted(loaded.profiles)
    result = run_cli("doctor", *names, "--json")
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    document = result_of(result)
    assert document["tools"] == names
    for finding in document["findings"]:
        assert finding["severity"] in ("error", "warning", "hint")
        assert finding["message"] and finding["why"]
    default = run_cli("doctor", "--json")
    assert default.returncode in (0, 1) and "Traceback" not in default.stderr
    result_of(default)


@needs_posix_paths
def test_unfinished_journal_operation_is_a_global_error(tmp_path: Path) -> None:
    from cachedoctor.relocate import journal

    cache = tmp_path / "cache"
    cache.mkdir()
    op = journal.Operation(
        id=journal.new_id(), kind="move", tool="demo", location="cache", method="link",
        dest_root=str(tmp_path / "d"), base=str(tmp_path / "d" / "demo"),
        pairs=[journal.Pair(str(cache), str(tmp_path / "d" / "demo"), True)],
    )
    journal.save(op, "copying")
    profile = make_profile(str(cache), CLI_CHECKS)
    report = doctor.run_doctor([profile], linux_host())
    journal_findings = [f for f in report.findings if f.check == "journal-unfinished"]
    assert len(journal_findings) == 1
    finding = journal_findings[0]
    assert (finding.tool, finding.location, finding.severity) == ("demo", "cache", "error")
    assert "phase 'copying'" in finding.message
    assert finding.fix is not None and finding.fix.startswith("cachedoctor move demo ")
    assert "cachedoctor restore demo --location cache" in finding.why
    assert report.exit_code == 1

    # A profile check naming journal_unfinished reports it itself, once.
    checks = CLI_CHECKS + """\
- id: move-interrupted
  severity: error
  when: [{type: journal_unfinished}]
  message: 'Interrupted: {value}'
  why: The cache is split.
  fix: '{finish_command}'
"""
    report = doctor.run_doctor([make_profile(str(cache), checks)], linux_host())
    interrupted = [f for f in report.findings if "journal" in f.check or "interrupt" in f.check]
    assert [f.check for f in interrupted] == ["move-interrupted"]
    assert interrupted[0].fix == op.move_command()

    # Doctor on another tool only: the operation on demo is not reported.
    other = make_profile(str(cache), CLI_CHECKS, tool="other")
    report = doctor.run_doctor([other], linux_host(), explicit=True)
    assert [f for f in report.findings if f.check == "journal-unfinished"] == []
    journal.discard(op)
    assert doctor.run_doctor([profile], linux_host()).exit_code == 0


ENV_CHECKS = """\
- id: var-not-seen
  severity: hint
  when: [{type: env_not_seen, var: DEMO_CACHE_DIR}]
  message: 'DEMO_CACHE_DIR is set to {value} for new shells; this one sees "{seen}".'
  why: The tool reads it at start.
  fix: 'cachedoctor env set DEMO_CACHE_DIR {value}'
- id: var-not-set
  severity: warning
  when: [{type: env_not_set, var: DEMO_CACHE_DIR}]
  message: DEMO_CACHE_DIR is not set.
  why: The tool falls back to /tmp.
"""


@needs_posix_paths
def test_env_not_set_and_not_seen_with_real_managed_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cachedoctor import envvars

    monkeypatch.delenv("DEMO_CACHE_DIR", raising=False)
    cache = tmp_path / "cache"
    cache.mkdir()
    profile = make_profile(str(cache), ENV_CHECKS)
    findings, errors = doctor.check_profile(profile, linux_host())
    assert errors == []
    assert [f.check for f in findings] == ["var-not-set"]

    wanted = str(tmp_path / "new-home")
    envvars.set_variables({"DEMO_CACHE_DIR": wanted}, host=linux_host())
    findings, _ = doctor.check_profile(profile, linux_host())  # this process predates the change
    assert [f.check for f in findings] == ["var-not-seen"]
    assert findings[0].message == f'DEMO_CACHE_DIR is set to {wanted} for new shells; this one sees "".'
    assert findings[0].fix == f"cachedoctor env set DEMO_CACHE_DIR {wanted}"

    monkeypatch.setenv("DEMO_CACHE_DIR", wanted)  # a new shell
    assert doctor.check_profile(profile, linux_host())[0] == []
    monkeypatch.setenv("DEMO_CACHE_DIR", "/somewhere/else")
    findings, _ = doctor.check_profile(profile, linux_host())
    assert [f.check for f in findings] == ["var-not-seen"]
    assert 'this one sees "/somewhere/else"' in findings[0].message


SETTINGS_PROFILE = """\
id: grokish
name: Grok-like extension
description: settings checks
locations:
  - id: cache
    paths:
      linux: '{cache}'
      macos: '{cache}'
    safe_to_delete: true
tune:
  - id: large-project
    file:
      linux: '{settings}'
      macos: '{settings}'
    format: jsonc
    settings:
      - key: grok.code.cacheStrategy
        value: lfu
      - key: grok.code.cacheSize
        value: 8192
  - id: workspace
    workspace_file: .vscode/settings.json
    format: jsonc
    settings:
      - key: grok.code.includePaths
        value: [./src, ./tests]
  - id: env
    format: env
    settings:
      - key: GROKISH_CACHE_TTL
        value: 300000
checks:
  - id: untuned
    severity: hint
    when: [{{type: setting_differs, preset: large-project}}]
    message: 'Not tuned: {{value}}'
    why: Faster on large projects.
    fix: 'cachedoctor tune {{tool}} --preset large-project'
  - id: size-too-small
    severity: warning
    when: [{{type: setting_below, preset: large-project, key: grok.code.cacheSize, below: 4096}}]
    message: 'Cache size too small: {{value}} in {{path}}'
    why: The default 2048 thrashes.
  - id: absolute-include
    severity: error
    when: [{{type: setting_absolute_path, preset: workspace, key: grok.code.includePaths}}]
    message: 'Absolute includePaths: {{value}}'
    why: Absolute paths change the cache-key hash.
    fix: 'cachedoctor tune {{tool}} --preset workspace --workspace .'
  - id: env-ttl
    severity: hint
    when: [{{type: setting_differs, preset: env}}]
    message: 'TTL not set: {{value}}'
    why: test
"""


@needs_posix_paths
def test_setting_checks_on_real_settings_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROKISH_CACHE_TTL", raising=False)
    cache = tmp_path / "cache"
    cache.mkdir()
    settings = tmp_path / "Code" / "User" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        '{\n  // user settings\n  "grok.code.cacheSize": 2048,\n  "grok.code.cacheStrategy": "lru",\n}\n',
        encoding="utf-8",
    )
    workspace = tmp_path / "project"
    (workspace / ".vscode").mkdir(parents=True)
    (workspace / ".vscode" / "settings.json").write_text(
        '{"grok.code.includePaths": ["./src", "/home/me/project/tests"],}\n', encoding="utf-8"
    )
    profile = parse_profile(SETTINGS_PROFILE.format(cache=cache, settings=settings), "g.yaml")

    findings, errors = doctor.check_profile(profile, linux_host(), workspace=workspace)
    assert errors == []
    by_check = {f.check: f for f in findings}
    assert set(by_check) == {"untuned", "size-too-small", "absolute-include", "env-ttl"}
    assert by_check["untuned"].message == (
        'Not tuned: grok.code.cacheStrategy = "lru" (tuned: "lfu"); '
        "grok.code.cacheSize = 2048 (tuned: 8192)"
    )
    assert by_check["untuned"].path == str(settings)
    assert by_check["size-too-small"].message == (
        f"Cache size too small: grok.code.cacheSize = 2048 in {settings}"
    )
    assert by_check["absolute-include"].value == "grok.code.includePaths: /home/me/project/tests"
    assert by_check["absolute-include"].severity == "error"
    assert by_check["env-ttl"].message == "TTL not set: GROKISH_CACHE_TTL = missing (tuned: 300000)"

    # Tuned: the findings go away (an env value matches as text).
    settings.write_text(
        '{"grok.code.cacheSize": 8192, "grok.code.cacheStrategy": "lfu"}\n', encoding="utf-8"
    )
    (workspace / ".vscode" / "settings.json").write_text(
        '{"grok.code.includePaths": ["./src", "./tests"]}\n', encoding="utf-8"
    )
    monkeypatch.setenv("GROKISH_CACHE_TTL", "300000")
    findings, errors = doctor.check_profile(profile, linux_host(), workspace=workspace)
    assert (findings, errors) == ([], [])

    # No workspace settings file: nothing to judge. A missing user file: every setting missing.
    findings, _ = doctor.check_profile(profile, linux_host(), workspace=tmp_path / "elsewhere")
    assert findings == []
    settings.unlink()
    findings, _ = doctor.check_profile(profile, linux_host(), workspace=workspace)
    assert [f.check for f in findings] == ["untuned"]
    assert "grok.code.cacheSize = missing" in findings[0].message

    # A malformed settings file: the check reports an error, the others still run.
    settings.write_text('{"grok.code.cacheSize": 2048,,,', encoding="utf-8")
    findings, errors = doctor.check_profile(profile, linux_host(), workspace=workspace)
    assert {e.check for e in errors} == {"untuned", "size-too-small"}
    assert "malformed file" in errors[0].error and str(settings) in errors[0].error


@needs_posix_paths
def test_cli_workspace_option_and_check_errors_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    settings = tmp_path / "settings.json"
    settings.write_text("{}", encoding="utf-8")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "grokish.yaml").write_text(
        SETTINGS_PROFILE.format(cache=cache, settings=settings), encoding="utf-8"
    )
    workspace = tmp_path / "project"
    (workspace / ".vscode").mkdir(parents=True)
    (workspace / ".vscode" / "settings.json").write_text(
        '{"grok.code.includePaths": ["C:\\\\src"]}', encoding="utf-8"
    )
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    result = run_cli("doctor", "grokish", "--workspace", str(workspace), "--json")
    assert result.returncode == 1, result.stderr
    document = result_of(result)
    assert document["findings"][0]["check"] == "absolute-include"
    assert document["findings"][0]["fix"] == "cachedoctor tune grokish --preset workspace --workspace ."

    (workspace / ".vscode" / "settings.json").write_text('{"grok.code.includePaths": ["./src"]}')
    settings.write_text("{not json")
    result = run_cli("doctor", "grokish", "--workspace", str(workspace))
    assert result.returncode == 1  # no error finding, but checks could not run
    assert "check untuned could not run" in result.stderr
    assert "Traceback" not in result.stderr


@needs_posix_paths
def test_a_location_gate_with_a_setting_reports_the_settings_file(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    settings = tmp_path / "settings.json"
    settings.write_text('{"grok.code.cacheSize": 2048}', encoding="utf-8")
    text = SETTINGS_PROFILE.format(cache=cache, settings=settings).split("checks:\n")[0] + (
        "checks:\n"
        "  - id: gated\n"
        "    severity: warning\n"
        "    when:\n"
        "      - {type: location_exists, location: cache}\n"
        "      - {type: setting_below, preset: large-project, key: grok.code.cacheSize, below: 4096}\n"
        "    message: '{value} in {file}; cache at {location_path}'\n"
        "    why: test\n"
    )
    profile = parse_profile(text, "g.yaml")
    [finding] = doctor.check_profile(profile, linux_host())[0]
    assert (finding.location, finding.path) == ("cache", str(settings))
    assert finding.message == f"grok.code.cacheSize = 2048 in {settings}; cache at {cache}"
    cache.rmdir()  # the gate closes
    assert doctor.check_profile(profile, linux_host())[0] == []


@needs_root
def test_a_hard_link_store_moved_to_another_filesystem_is_found(tmp_path: Path, isolated_home: Path,
                                                                tmpfs: Path) -> None:
    """uv's cache relocated (here: by a link) onto another filesystem than the home: an
    engine-wide rule for every location with `links_into`, not a check pasted into the profile."""
    from cachedoctor.doctor import apply_rules
    from cachedoctor.locate import observe
    from cachedoctor.profiles.loader import load_profiles

    uv = load_profiles().profiles["uv"].profile
    host = Host("linux", {"HOME": str(isolated_home)}, str(isolated_home))
    cache = isolated_home / ".cache" / "uv"
    cache.mkdir(parents=True)
    findings, errors = apply_rules(uv, observe(host), {})
    assert errors == [] and not [f for f in findings if f.check == "store-on-another-filesystem"]
    cache.rmdir()
    (tmpfs / "uv").mkdir()
    cache.symlink_to(tmpfs / "uv")
    findings, errors = apply_rules(uv, observe(host), {})
    [finding] = [f for f in findings if f.check == "store-on-another-filesystem"]
    assert finding.severity == "warning" and str(isolated_home) in finding.message
    assert finding.fix == "cachedoctor restore uv --location cache"
