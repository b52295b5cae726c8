"""copy_tree / verify_tree / remove_tree on real trees, same and across filesystems."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cachedoctor.fs import seam
from cachedoctor.relocate.copy import copy_tree, remove_tree, survey, verify_tree
from tests.conftest import IS_LINUX

pytestmark = pytest.mark.os_doubles("windows", "macos")


def build_tree(root: Path) -> None:
    """A cache-like tree with everything that is easy to get wrong."""
    (root / "blobs").mkdir(parents=True)
    (root / "snapshots" / "abc123").mkdir(parents=True)
    (root / "empty dir" / "nested empty").mkdir(parents=True)
    (root / "ünïcödé 名前").mkdir()
    (root / "blobs" / "sha-1").write_bytes(os.urandom(70_000))
    (root / "blobs" / "sha-2").write_text("config\n")
    (root / "snapshots" / "abc123" / "model.bin").symlink_to("../../blobs/sha-1")
    (root / "snapshots" / "abc123" / "config.json").symlink_to("../../blobs/sha-2")
    (root / "abs-link").symlink_to(str(root / "blobs" / "sha-2"))
    (root / "dangling").symlink_to("does/not/exist")
    (root / "dirlink").symlink_to("blobs", target_is_directory=True)
    (root / "file with spaces.txt").write_text("spaces\n")
    (root / "ünïcödé 名前" / "файл.txt").write_text("unicode\n")
    (root / "readonly.txt").write_text("ro\n")
    (root / "readonly.txt").chmod(0o444)
    (root / "exec.sh").write_text("#!/bin/sh\n")
    (root / "exec.sh").chmod(0o755)
    (root / "empty.bin").write_bytes(b"")
    os.link(root / "blobs" / "sha-1", root / "hardlink-a")
    os.link(root / "blobs" / "sha-1", root / "ünïcödé 名前" / "hardlink-b")
    (root / "empty dir").chmod(0o700)
    if hasattr(os, "mkfifo") and seam.current().name != "windows":  # Windows has no FIFOs
        os.mkfifo(root / "a-fifo")
    if hasattr(os, "setxattr"):
        with contextlib.suppress(OSError):  # not every filesystem takes user xattrs
            os.setxattr(root / "blobs" / "sha-2", "user.cachedoctor", b"tag")
    for i, path in enumerate(sorted(root.rglob("*"), reverse=True)):
        os.utime(path, ns=(1_600_000_000_000_000_000 + i, 1_600_000_000_123_456_789 + i * 1000),
                 follow_symlinks=False)
    os.utime(root, ns=(1_500_000_000_000_000_000, 1_500_000_000_987_654_321))


def _mode(st: os.stat_result) -> object:
    """What a mode means on this seam: the bits, or on Windows only the read-only flag."""
    if seam.current().modes_meaningful:
        return stat.S_IMODE(st.st_mode)
    return "read-only" if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o200 else "-"


def snapshot(root: Path) -> dict[str, object]:
    """Everything that must survive a move: content, modes, mtimes, link structure, hard links."""
    out: dict[str, object] = {}
    inodes: dict[tuple[int, int], list[str]] = {}
    top = os.lstat(os.path.realpath(root))
    out["."] = ("dir", _mode(top), top.st_mtime_ns)
    base = os.path.realpath(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, base)
            st = os.lstat(path)
            mode = _mode(st)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                out[rel] = ("file", mode, st.st_mtime_ns, st.st_size, digest)
                inodes.setdefault((st.st_dev, st.st_ino), []).append(rel)
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode), mode)
    out["#hardlinks"] = sorted(sorted(group) for group in inodes.values() if len(group) > 1)
    return out


@pytest.fixture
def shm_dir() -> Iterator[Path]:
    """A folder on /dev/shm: another filesystem than tmp_path on most Linux systems."""
    if not IS_LINUX or not os.path.isdir("/dev/shm"):
        pytest.skip("needs /dev/shm")
    path = Path("/dev/shm") / f"cachedoctor-test-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("where", ["same", "other"])
def test_copy_preserves_everything(tmp_path: Path, where: str, request: pytest.FixtureRequest) -> None:
    src = tmp_path / "src"
    build_tree(src)
    base = tmp_path if where == "same" else request.getfixturevalue("shm_dir")
    dst = base / "copy"
    result = copy_tree(str(src), str(dst))
    assert result.entries == len([p for p in src.rglob("*")])
    assert verify_tree(str(src), str(dst)) == []
    assert verify_tree(str(src), str(dst), content=True) == []
    assert snapshot(src)["#hardlinks"] == [["blobs/sha-1", "hardlink-a", "ünïcödé 名前/hardlink-b"]]
    before, after = snapshot(src), snapshot(dst)
    assert before == after
    assert os.readlink(dst / "snapshots" / "abc123" / "model.bin") == "../../blobs/sha-1"
    assert (dst / "snapshots" / "abc123" / "model.bin").read_bytes() == (src / "blobs" / "sha-1").read_bytes()
    if (hasattr(os, "getxattr") and seam.current().name != "windows"  # no xattrs in Python there
            and "user.cachedoctor" in os.listxattr(src / "blobs" / "sha-2")):
        target_takes_xattrs = True
        probe = dst / "probe"
        probe.write_text("")
        try:
            os.setxattr(probe, "user.probe", b"1")
        except OSError:
            target_takes_xattrs = False  # "where possible"
        if target_takes_xattrs:
            assert os.getxattr(dst / "blobs" / "sha-2", "user.cachedoctor") == b"tag"


def test_verify_finds_differences(tmp_path: Path) -> None:
    src = tmp_path / "src"
    build_tree(src)
    dst = tmp_path / "dst"
    copy_tree(str(src), str(dst))
    (dst / "blobs" / "sha-2").write_text("CONFIG\n")  # same size, different content and mtime
    st = os.stat(src / "blobs" / "sha-2")
    os.utime(dst / "blobs" / "sha-2", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify_tree(str(src), str(dst)) == []  # size+mtime cannot see it ...
    problems = verify_tree(str(src), str(dst), content=True)  # ... the hash does
    assert any("content differs" in p for p in problems)
    (dst / "extra").write_text("x")
    os.unlink(dst / "hardlink-a")
    (dst / "hardlink-a").write_bytes((src / "hardlink-a").read_bytes())
    os.utime(dst / "hardlink-a", ns=(st.st_atime_ns, os.stat(src / "hardlink-a").st_mtime_ns))
    (dst / "exec.sh").chmod(0o700)
    problems = verify_tree(str(src), str(dst), limit=100)
    text = "\n".join(problems)
    assert "not in the original" in text
    assert "hard-link group differs" in text or "mode" in text
    if seam.current().modes_meaningful:  # Windows: chmod sets only the read-only flag
        assert "exec.sh: mode" in text


def test_survey_counts_hard_links_once(tmp_path: Path) -> None:
    src = tmp_path / "src"
    build_tree(src)
    result = survey(str(src))
    assert result.unreadable == []
    assert result.apparent_bytes < 2 * 70_000 + 10_000  # the 70 kB blob counted once


def test_remove_tree_never_follows_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "link-to-outside").symlink_to(outside, target_is_directory=True)
    (tree / "ro").write_text("x")
    (tree / "ro").chmod(0o400)
    remove_tree(str(tree))
    assert not tree.exists()
    assert (outside / "precious").read_text() == "keep me"
    link = tmp_path / "toplink"
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError):
        remove_tree(str(link))
    assert (outside / "precious").exists()
    remove_tree(str(tmp_path / "missing"))  # idempotent


def test_copy_enospc_raises(tmpfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drive fills up (another program) while the copy runs: the real ENOSPC comes out."""
    from cachedoctor.relocate import faults

    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"f{i}").write_bytes(os.urandom(1 << 20))
    real_point = faults.point

    def fill_the_drive(name: str) -> None:
        if name == "copy-file" and not (tmpfs / "filler").exists():
            (tmpfs / "filler").write_bytes(b"\0" * (7 << 20))
        real_point(name)

    monkeypatch.setattr(faults, "point", fill_the_drive)
    with pytest.raises(OSError) as info:
        copy_tree(str(src), str(tmpfs / "copy"))
    assert info.value.errno == errno.ENOSPC


