"""The index of validated profiles: the same outcome as validating, re-validated on any change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor.profiles import index as profile_index
from cachedoctor.profiles.loader import load_profiles
from tests.conftest import IS_WINDOWS
from tests.test_profiles_loader import GOOD, write

pytestmark = pytest.mark.usefixtures("isolated_home")


def aged(path: Path, seconds: float = 60) -> Path:
    """Files older than the index's "racy" window are recorded (fresh ones are re-validated)."""
    old = path.stat().st_mtime_ns - int(seconds * 1e9)
    os.utime(path, ns=(old, old))
    return path


def test_second_load_comes_from_the_index_and_equals_validation(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD.replace("id: demo", "id: demo-x", 1)))
    aged(write(extra, "bad.yaml", GOOD.replace("safe_to_delete: true", "safe_to_delete: maybe")))
    first = load_profiles([extra])
    assert profile_index.index_path().is_file()
    calls: list[Path] = []
    with profile_index.ProfileIndex.open() as index:
        for path in sorted(extra.iterdir()):
            index.outcome(path, lambda p: calls.append(p))  # type: ignore[arg-type, func-returns-value]
    assert calls == []  # nothing re-validated
    second = load_profiles([extra])
    assert second.profiles.keys() == first.profiles.keys()
    assert second.profiles["demo-x"].profile == first.profiles["demo-x"].profile
    assert [str(e) for e in second.errors] == [str(e) for e in first.errors]
    assert any("bad.yaml:" in str(e) and "safe_to_delete" in str(e) for e in second.errors)


def test_a_changed_file_is_validated_again(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    path = aged(write(extra, "demo.yaml", GOOD))
    assert load_profiles([extra]).profiles["demo"].profile.name == "Demo tool"
    aged(write(extra, "demo.yaml", GOOD.replace("Demo tool", "Demo loop")), 30)  # same size
    assert load_profiles([extra]).profiles["demo"].profile.name == "Demo loop"
    path.write_text(GOOD.replace("name: Demo tool", "name: [x"))  # fresh: not recorded, seen
    assert "demo" not in load_profiles([extra]).profiles


@pytest.mark.parametrize("damage", [b"", b"garbage", b"\x80\x05\x95"])
def test_a_damaged_index_is_rebuilt_silently(tmp_path: Path, damage: bytes) -> None:
    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))
    load_profiles([extra])
    target = profile_index.index_path()
    target.write_bytes(damage)
    result = load_profiles([extra])
    assert "demo" in result.profiles and result.errors == []
    assert target.stat().st_size > 100  # written again


@pytest.mark.skipif(IS_WINDOWS, reason="POSIX ownership and modes")
def test_an_index_others_can_write_is_not_read(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))
    load_profiles([extra])
    target = profile_index.index_path()
    target.chmod(0o666)
    assert profile_index._read(target, profile_index._stamp()) == {}


def test_a_warm_start_imports_no_yaml(tmp_path: Path) -> None:
    code = ("import sys\nfrom cachedoctor.profiles.loader import load_profiles\n"
            "assert len(load_profiles().profiles) > 20\nprint('yaml' in sys.modules)\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)]
    assert runs == ["True", "False"]
