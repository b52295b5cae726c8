"""The index of validated profiles: the same outcome as validating, re-validated on any change."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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


def test_each_part_is_read_without_the_other(tmp_path: Path) -> None:
    """A Tab reads the names alone and a command the outcomes alone: damage to the other part
    goes unseen by each, and a length past the file (or absurd) gives nothing, never a crash."""
    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))
    load_profiles([extra])
    target = profile_index.index_path()
    data = target.read_bytes()
    length = int.from_bytes(data[:8], "little")
    names_end = 8 + length

    def names() -> dict[str, Any]:
        return {file: entry[1].id for file, entry in profile_index.read_names().items()
                if entry[1] is not None}

    def outcomes() -> dict[str, Any]:
        return profile_index._read(target, profile_index._stamp())

    expected_names, expected_outcomes = names(), outcomes()
    assert expected_names[str(extra / "demo.yaml")] == "demo"
    assert expected_outcomes[str(extra / "demo.yaml")][1].id == "demo"
    target.write_bytes(data[:names_end] + b"\x80\x05garbage")  # outcomes damaged
    assert names() == expected_names and outcomes() == {}
    target.write_bytes(data[:8] + b"\xff" * length + data[names_end:])  # names damaged
    assert names() == {} and outcomes() == expected_outcomes
    for header in ((len(data) * 2).to_bytes(8, "little"), b"\xff" * 8):
        target.write_bytes(header + data[8:])
        assert names() == {} and outcomes() == {}


def test_a_warm_start_imports_no_yaml(tmp_path: Path) -> None:
    code = ("import sys\nfrom cachedoctor.profiles.loader import load_profiles\n"
            "assert len(load_profiles().profiles) > 20\nprint('yaml' in sys.modules)\n")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)]
    assert runs == ["True", "False"]


def test_installs_sharing_a_state_folder_keep_an_index_each(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """pipx and a venv (or a checkout on PYTHONPATH) share one state folder; each used to find
    the other's code stamp in the one index and validate every profile again on every run."""
    from cachedoctor import state
    from cachedoctor.cli import quickcomplete, quickrun
    from cachedoctor.profiles.loader import load_profile_file

    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))

    def validations(tag: str, code: str) -> int:
        monkeypatch.setattr(state, "install_tag", lambda: tag)
        monkeypatch.setattr(profile_index, "_stamp", lambda: (code, "msgspec"))
        loaded: list[Path] = []

        def load(path: Path) -> Any:
            loaded.append(path)
            return load_profile_file(path)

        with profile_index.ProfileIndex.open() as index:
            for path in sorted(extra.iterdir()):
                index.outcome(path, load)
        return len(loaded)

    assert [validations("aaaaaaaa", "one"), validations("bbbbbbbb", "two")] == [1, 1]
    assert [validations("aaaaaaaa", "one"), validations("bbbbbbbb", "two")] == [0, 0]
    names = sorted(p.name for p in state.state_dir().glob("profile-index*"))
    assert names == ["profile-index.aaaaaaaa.pickle", "profile-index.bbbbbbbb.pickle"]
    assert all(".bbbbbbbb." in p.name for p in (quickrun.spec_path(), quickcomplete.spec_path()))


def test_another_installs_stale_cache_is_pruned_and_nothing_else(tmp_path: Path) -> None:
    """When an install writes its cache, the same cache of other installs that no run has
    written for STALE_AFTER (an install since removed), and the untagged one of earlier
    versions, go; a fresh one, another kind, a look-alike name, a folder, and a link (the link
    is not followed) stay."""
    from cachedoctor import state

    folder = state.state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    old = time.time() - state.STALE_AFTER - 3600

    def make(name: str, when: float = old) -> Path:
        path = folder / name
        path.write_bytes(b"x")
        os.utime(path, (when, when))
        return path

    gone = [make("profile-index.0badc0de.pickle"), make("profile-index.pickle")]
    kept = [make("profile-index.12345678.pickle", time.time()), make("run-spec.0badc0de.marshal"),
            make("profile-index.0BADC0DE.pickle"), make("profile-index.0badc0de.pickle.bak"),
            make("profile-index.0badc0d.pickle"), make("notes.txt")]
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    link = folder / "profile-index.feedface.pickle"
    link.symlink_to(outside)
    os.utime(link, (old, old), follow_symlinks=False)
    os.utime(outside, (old, old))
    inside = folder / "profile-index.deadbeef.pickle"
    inside.mkdir()
    os.utime(inside, (old, old))
    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))
    load_profiles([extra])  # writes this install's index, which prunes
    assert profile_index.index_path().is_file()
    assert [p.exists() for p in gone] == [False, False]
    assert all(p.exists() for p in kept)
    assert link.is_symlink() and outside.read_text() == "keep" and inside.is_dir()
    assert state.prune_other_installs(profile_index.index_path()) == []  # nothing left to go


def test_a_cache_still_read_is_not_pruned_as_unwritten(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A current index is read, not rewritten, for as long as no profile changes: reading it
    renews its time once it is older than half STALE_AFTER, so another install's write does
    not take it for the cache of a removed install."""
    from cachedoctor import state

    extra = tmp_path / "extra"
    aged(write(extra, "demo.yaml", GOOD))
    load_profiles([extra])
    mine = profile_index.index_path()
    month = time.time() - state.STALE_AFTER - 86400
    os.utime(mine, (month, month))
    load_profiles([extra])  # read, found current: not written again, but marked used
    assert mine.stat().st_mtime > time.time() - 60
    monkeypatch.setattr(state, "install_tag", lambda: "0badc0de")  # another install writes
    assert state.prune_other_installs(state.install_file("profile-index.pickle")) == []
    assert mine.is_file()


def test_the_code_stamp_sees_every_module_below_the_package_and_nothing_else(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub" / "__pycache__").mkdir(parents=True)
    (package / "odd.py").mkdir()  # a folder named like a module is entered, as os.walk does
    for name in ("b.py", "a.py", "sub/c.py", "sub/__pycache__/c.py", "notes.txt", "sub/d.pyc",
                 "odd.py/e.py"):
        (package / name).write_text("x = 1\n")

    def stamp() -> list[tuple[str | int, ...]]:
        code: list[tuple[str | int, ...]] = []
        profile_index._stat_modules(str(package), "", code)
        return code

    first = stamp()
    assert [entry[0] for entry in first] == ["a.py", "b.py", "odd.py/e.py", "sub/c.py"]
    module = package / "sub" / "c.py"
    st = module.stat()
    time.sleep(0.05)  # past the coarse clock file times are taken from
    module.write_text("x = 2\n")  # same size, its time put back: the change time still moves
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = stamp()
    assert second != first and second[:3] == first[:3]
    replacement = package / "sub" / "new"
    replacement.write_text("x = 3\n")
    os.replace(replacement, module)  # another file in its place: another inode
    assert stamp()[3][4] != second[3][4]


def test_the_code_stamp_takes_the_inode_a_windows_listing_leaves_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' `DirEntry.stat()` has st_ino 0 (Python docs, os.DirEntry.stat); `inode()`
    stats the file for it there. Without it, a file replaced by one of the same size and
    times would leave the stamp as it was."""

    class Stat:
        st_size, st_mtime_ns, st_ctime_ns, st_ino = 6, 10, 20, 0

    class Entry:
        name, path = "m.py", "C:\\pkg\\m.py"

        def stat(self) -> Stat:
            return Stat()

        def inode(self) -> int:
            return 4242

        def is_dir(self, follow_symlinks: bool = True) -> bool:
            return False

    class Listing:
        def __enter__(self) -> list[Entry]:
            return [Entry()]

        def __exit__(self, *_: object) -> None:
            return None

    monkeypatch.setattr(profile_index.os, "scandir", lambda folder: Listing())
    code: list[tuple[str | int, ...]] = []
    profile_index._stat_modules("C:\\pkg", "", code)
    assert code == [("m.py", 6, 10, 20, 4242)]
