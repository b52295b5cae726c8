"""The windows-temp profile's facts: where each leftover is (the variables each program reads,
in its order), that only named entries inside %TEMP% are ever places of it (the Temp root is
a protected root), and that no pattern covers a folder another built-in profile declares."""

from __future__ import annotations

import ntpath

import pytest

from cachedoctor.resolve import try_expand
from cachedoctor.safety import protected_reason
from cachedoctor.scan import claimed_paths
from tests.test_profile_library import HOSTS, PROFILES, WIN_ENV, first, host, paths

TEMP = WIN_ENV["TEMP"]
PROFILE = PROFILES["windows-temp"]


def test_category_and_platforms() -> None:
    assert PROFILE.category == "system"
    for os_name in ("linux", "wsl", "macos"):
        assert all(not loc.paths.for_host(HOSTS[os_name]) for loc in PROFILE.locations)


def test_each_leftover_where_its_program_makes_it() -> None:
    assert paths("windows-temp", "pip-build", host("windows")) == [TEMP + r"\pip-*"]
    assert paths("windows-temp", "pyinstaller", host("windows")) == [TEMP + r"\_MEI*"]
    assert paths("windows-temp", "pytest", host("windows")) == [TEMP + r"\pytest-of-*"]


def test_python_tools_read_tmpdir_then_temp_then_tmp_the_bootloader_tmp_then_temp() -> None:
    both = host("windows", TEMP=r"D:\temp", TMP=r"E:\tmp")
    assert first("windows-temp", "pip-build", both) == r"D:\temp\pip-*"  # tempfile: TEMP first
    assert first("windows-temp", "pytest", both) == r"D:\temp\pytest-of-*"
    assert first("windows-temp", "pyinstaller", both) == r"E:\tmp\_MEI*"  # GetTempPath2: TMP
    tmpdir = host("windows", TMPDIR=r"F:\py")
    assert first("windows-temp", "pip-build", tmpdir) == r"F:\py\pip-*"
    assert first("windows-temp", "pyinstaller", tmpdir) == TEMP + r"\_MEI*"


@pytest.mark.parametrize("location", [loc.id for loc in PROFILE.locations])
def test_only_entries_below_the_protected_temp_root(location: str) -> None:
    loc = PROFILE.location(location)
    assert loc.kind == "temp" and loc.safe_to_delete and loc.relocate == [] and loc.clean is None
    [pattern] = paths("windows-temp", location, host("windows"))
    folder, name = ntpath.split(pattern)
    assert "*" in name and "*" not in folder  # one named entry of the Temp folder
    assert protected_reason(folder, HOSTS["windows"]) == "your Temp folder root"


def test_no_pattern_covers_another_profiles_folder() -> None:
    """clean empties a place by the rules of the profile naming it: a glob that matched
    %TEMP%\\workbuddy_cache would empty WorkBuddy's conversation records."""
    import fnmatch

    patterns = [p for loc in PROFILE.locations for p in paths("windows-temp", loc.id, host("windows"))]
    windows = host("windows")
    others = [(tool, loc.id, path) for tool, profile in PROFILES.items() if tool != "windows-temp"
              for loc in profile.locations for template in loc.paths.for_host(windows)
              if (path := try_expand(template, windows))
              and path.lower().startswith(TEMP.lower() + "\\")]
    assert {t for t, _, _ in others} >= {"workbuddy", "inductor", "jax", "tfhub", "nuget"}
    for tool, location, path in others:
        entry = TEMP + "\\" + path[len(TEMP) + 1 :].split("\\")[0]
        hits = [p for p in patterns if fnmatch.fnmatch(entry.lower(), p.lower())]
        assert not hits, f"{tool}/{location} ({path}) is matched by {hits}"


def test_scan_lists_the_rest_of_temp_as_unclaimed() -> None:
    """The profile claims its matches only: other entries of %TEMP% stay in scan's unclaimed list."""
    from cachedoctor.locate.files import DictFiles
    from cachedoctor.locate.world import World

    h = HOSTS["windows"]
    files = DictFiles(dirs=frozenset({TEMP, TEMP + r"\pip-install-x1", TEMP + r"\mystery"}),
                      windows=True)
    world = World.of(h, files)
    claimed = claimed_paths([PROFILE], world)
    assert TEMP + r"\pip-install-x1" in claimed
    assert all(not c.lower().endswith(r"\mystery") for c in claimed)
