"""How a move makes its copy durable and treats the original's page cache (real syscalls, seen
through strace and fincore; the Windows per-file flush is exercised on Linux by switching it on).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor.relocate.copy import copy_tree, make_durable, verify_tree
from tests.conftest import IS_LINUX
from tests.test_move import write_profile
from tests.test_relocate_copy import build_tree, snapshot

needs_strace = pytest.mark.skipif(not IS_LINUX or shutil.which("strace") is None
                                  or not os.path.isdir("/dev/shm"),
                                  reason="needs Linux, strace and /dev/shm")
BIG = 3 * 1024 * 1024  # above copy._ADVISE_MIN


def _fstype(path: Path) -> str:
    best, fstype = "", ""
    with open("/proc/self/mounts", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            mount = fields[1].replace("\\040", " ")
            if str(path).startswith(mount) and len(mount) > len(best):
                best, fstype = mount, fields[2]
    return fstype


def _resident_pages(path: Path) -> int:
    out = subprocess.run(["fincore", "--raw", "--noheadings", "--output", "PAGES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def _traced_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path,
                 *extra: str) -> tuple[str, Path, dict[str, object]]:
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    cache = home / ".cache" / "foo"
    build_tree(cache)
    (cache / "big.bin").write_bytes(os.urandom(BIG))
    reference = snapshot(cache)
    dest = Path("/dev/shm") / f"cachedoctor-durable-{os.getpid()}-{tmp_path.name}"
    trace = tmp_path / "trace"
    result = subprocess.run(
        ["strace", "-f", "-o", str(trace), "-e", "trace=sync,syncfs,fadvise64",
         sys.executable, "-m", "cachedoctor", "move", "foo", str(dest), "--yes", *extra],
        capture_output=True, text=True, env=os.environ.copy(), timeout=300)
    try:
        assert result.returncode == 0, result.stderr
        assert os.path.islink(cache)
        assert snapshot(cache) == reference  # through the link: the data arrived intact
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return trace.read_text(), cache, reference


@needs_strace
def test_move_flushes_only_the_destination_filesystem(tmp_path: Path, isolated_home: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    trace, _, _ = _traced_move(tmp_path, monkeypatch, isolated_home)
    lines = trace.splitlines()
    assert [line for line in lines if "syncfs(" in line and "= 0" in line], trace
    # no system-wide sync(2): it would wait for every dirty page of every drive
    assert not [line for line in lines if " sync()" in line], trace
    # the big original is read sequentially and its cache released once copied (--verify size)
    assert sum("POSIX_FADV_SEQUENTIAL" in line for line in lines) == 1, trace
    assert sum("POSIX_FADV_DONTNEED" in line for line in lines) == 1, trace


@needs_strace
def test_verify_hash_keeps_the_original_cached_for_the_second_read(
        tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, _, _ = _traced_move(tmp_path, monkeypatch, isolated_home, "--verify", "hash")
    assert "POSIX_FADV_DONTNEED" not in trace
    assert "syncfs(" in trace


@pytest.mark.skipif(not IS_LINUX or shutil.which("fincore") is None, reason="needs fincore")
def test_drop_source_cache_releases_the_pages_and_keeps_the_data(tmp_path: Path) -> None:
    if _fstype(tmp_path) in ("tmpfs", "ramfs", ""):
        pytest.skip("the page cache of tmpfs is the file itself; needs a disk filesystem")
    src = tmp_path / "src"
    src.mkdir()
    payload = os.urandom(BIG)
    for name in ("kept", "dropped"):
        (src / name).mkdir()
        with open(src / name / "big.bin", "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())  # clean pages: DONTNEED may drop them
        (src / name / "small.txt").write_text("small\n")
    assert _resident_pages(src / "kept" / "big.bin") > 0
    copy_tree(str(src / "kept"), str(tmp_path / "kept-copy"))
    copy_tree(str(src / "dropped"), str(tmp_path / "dropped-copy"), drop_source_cache=True)
    assert _resident_pages(src / "kept" / "big.bin") == BIG // os.sysconf("SC_PAGE_SIZE")
    assert _resident_pages(src / "dropped" / "big.bin") == 0
    for name in ("kept", "dropped"):
        assert (src / name / "big.bin").read_bytes() == payload  # the original is untouched
        assert (tmp_path / f"{name}-copy" / "big.bin").read_bytes() == payload
        assert verify_tree(str(src / name), str(tmp_path / f"{name}-copy"), content=True) == []


@pytest.mark.skipif(not IS_LINUX, reason="syncfs(2) is Linux-only")
def test_make_durable_uses_syncfs_on_linux(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    assert make_durable(str(tmp_path)) == "syncfs"
    with pytest.raises(FileNotFoundError):
        make_durable(str(tmp_path / "missing"))
