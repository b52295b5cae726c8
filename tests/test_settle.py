"""A file written to the original after its copy was verified is not lost.

Reproduces the adversarial finding (pip: 13 of 13 such writes lost): the move pauses right
after the verification (before the original is set aside) or just before the set-aside original
is deleted, a writer acts in that window, then the move goes on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cachedoctor.relocate import settle
from tests.conftest import IS_LINUX
from tests.test_move import leftovers, write_profile
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = [pytest.mark.skipif(not IS_LINUX or not os.path.isdir("/dev/shm"),
                                 reason="needs Linux and /dev/shm (a second filesystem)"),
              pytest.mark.os_doubles("windows", "macos")]


def start_paused(args: list[str], point: str, pause: Path) -> subprocess.Popen[str]:
    pause.mkdir()
    env = {**os.environ, "CACHEDOCTOR_FAULT_AT": f"{point}:pause",
           "CACHEDOCTOR_FAULT_PAUSE_DIR": str(pause)}
    proc = subprocess.Popen([sys.executable, "-m", "cachedoctor", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (pause / "paused").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the move never reached the pause"
        time.sleep(0.02)
    return proc


def resume(proc: subprocess.Popen[str], pause: Path) -> tuple[int, str]:
    (pause / "resume").touch()
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> tuple[Path, Path]:
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    cache = isolated_home / ".cache" / "foo"
    build_tree(cache)
    dest = Path("/dev/shm") / f"cachedoctor-settle-{os.getpid()}-{tmp_path.name[-8:]}"
    yield cache, dest
    subprocess.run(["rm", "-rf", "--one-file-system", str(dest)], check=False)


@pytest.mark.parametrize("trial", range(5))
def test_a_file_written_between_verify_and_swap_is_kept(setup: tuple[Path, Path], tmp_path: Path,
                                                        trial: int) -> None:
    cache, dest = setup
    proc = start_paused(["move", "foo", str(dest), "--yes"], "swap", tmp_path / "pause")
    (cache / f"late-{trial}.bin").write_bytes(b"written after the verify")
    (cache / "sub").mkdir(exist_ok=True)
    (cache / "sub" / "new.bin").write_bytes(b"also late")
    code, err = resume(proc, tmp_path / "pause")
    assert code == 0, err
    assert "written to" in err and "after it was copied were kept" in err
    assert (dest / "foo" / f"late-{trial}.bin").read_bytes() == b"written after the verify"
    assert (dest / "foo" / "sub" / "new.bin").read_bytes() == b"also late"
    assert os.path.islink(cache) and leftovers(cache.parent, dest) == []


def test_a_write_through_a_file_held_open_across_the_swap_is_kept(setup: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    cache, dest = setup
    victim = next(p for p in sorted(cache.rglob("*")) if p.is_file() and not p.is_symlink())
    rel = victim.relative_to(cache)
    with open(victim, "r+b") as held:  # opened before the move: it follows the set-aside original
        proc = start_paused(["move", "foo", str(dest), "--yes", "--force"], "settle",
                            tmp_path / "pause")
        held.seek(0, os.SEEK_END)
        held.write(b"appended while the original waited to be deleted")
        held.flush()
        os.utime(held.fileno())
    code, err = resume(proc, tmp_path / "pause")
    assert code == 0, err
    assert (dest / "foo" / rel).read_bytes().endswith(b"appended while the original waited to be deleted")


def test_nothing_written_late_means_nothing_merged(setup: tuple[Path, Path]) -> None:
    cache, dest = setup
    before = snapshot(cache)
    done = subprocess.run([sys.executable, "-m", "cachedoctor", "move", "foo", str(dest), "--yes"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "after it was copied" not in done.stderr
    assert snapshot(dest / "foo") == before


def test_a_conflict_keeps_the_original_and_deletes_nothing(tmp_path: Path) -> None:
    original, new = tmp_path / "orig", tmp_path / "new"
    (original / "x").mkdir(parents=True)
    new.mkdir()
    taken = settle.digests(str(original))
    (original / "x" / "f").write_text("late")
    (new / "x").write_text("the new place has a file where the original has a folder")
    with pytest.raises(Exception, match="cannot be merged"):
        settle.settle(str(original), str(new), taken)
    assert (original / "x" / "f").read_text() == "late"


def test_a_newer_file_in_the_new_place_wins_over_an_older_late_one(tmp_path: Path) -> None:
    original, new = tmp_path / "orig", tmp_path / "new"
    original.mkdir()
    new.mkdir()
    (original / "f").write_text("v1")
    os.utime(original / "f", ns=(1, 10**18))
    (new / "f").write_text("v1")
    os.utime(new / "f", ns=(1, 10**18))
    taken = settle.digests(str(original))
    (original / "f").write_text("late but old")
    os.utime(original / "f", ns=(1, 10**18 + 5))
    (new / "f").write_text("written by the tool in its new place")
    os.utime(new / "f", ns=(1, 10**18 + 9))
    done = settle.settle(str(original), str(new), taken)
    assert done.kept_newer == ["f"] and done.copied == []
    assert (new / "f").read_text() == "written by the tool in its new place"


def test_late_folders_and_links_are_merged_as_they_are_never_followed(tmp_path: Path) -> None:
    """A folder created late is copied by the one copier (its link stays a link), a late link
    is recreated as a link: nothing outside the cache is copied in."""
    original, new, outside = tmp_path / "orig", tmp_path / "new", tmp_path / "outside"
    original.mkdir()
    new.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("not the cache's")
    taken = settle.digests(str(original))
    (original / "late").mkdir()
    (original / "late" / "f").write_text("late file")
    (original / "late" / "out").symlink_to(outside)
    (original / "ln").symlink_to(outside)
    done = settle.settle(str(original), str(new), taken)
    assert sorted(done.copied) == ["late", "ln"]
    assert (new / "late" / "f").read_text() == "late file"
    assert os.readlink(new / "late" / "out") == str(outside)
    assert os.readlink(new / "ln") == str(outside)
    assert settle.digests(str(new))["late"] == settle.digests(str(original))["late"]


def test_a_late_folder_copy_cut_short_is_copied_again_not_kept_as_newer(tmp_path: Path) -> None:
    """Killed half-way through a late file (kill -9, power loss), the merge must not find a
    truncated copy at the real name next time (fresh mtime: "newer", and the original would go).
    The folder is copied under a temporary name and renamed into place."""
    original, new = tmp_path / "orig", tmp_path / "new"
    original.mkdir()
    new.mkdir()
    taken = settle.digests(str(original))
    (original / "late").mkdir()
    data = os.urandom(1 << 20)
    (original / "late" / "blob.bin").write_bytes(data)
    os.utime(original / "late" / "blob.bin", (1.6e9, 1.6e9))
    child = (
        "import os, signal, sys\n"
        "from cachedoctor.fs import seam\n"
        "from cachedoctor.relocate import settle\n"
        "ops = seam.current()\n"
        "def half(fin, fout, size):\n"
        "    os.write(fout, os.read(fin, size // 2))\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "ops.copy_data = half\n"
        "ops.clone_file = lambda *a, **k: False\n"
        f"settle.settle({str(original)!r}, {str(new)!r}, {taken!r})\n")
    killed = subprocess.run([sys.executable, "-c", child], check=False)
    assert killed.returncode == -9
    assert not (new / "late").exists()  # nothing half-done at the real name
    done = settle.settle(str(original), str(new), taken)
    assert done.copied == ["late"] and done.kept_newer == []
    assert (new / "late" / "blob.bin").read_bytes() == data
    assert sorted(os.listdir(new)) == ["late"]
