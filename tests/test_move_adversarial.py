# ruff: noqa: F811
"""Adversarial tests of `move` / `restore`: odd destinations, trees changing under the copy,
sparse files, hard links leaving the tree, foreign links, full disks and interrupted restores.

Each test asserts that the data survives (content, not just exit codes). Attacks that broke the
code at the time of writing are marked "broke:"; the others are regression tests of attacks the
code withstood.
"""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX, needs_root

# The move tests' fixtures (profiles, cache, shm) are imported, and tests name them as arguments.
from tests.test_move import (  # noqa: F401
    cache,
    cli,
    leftovers,
    pending,
    profiles,
    shm,
    write_profile,
)
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = pytest.mark.skipif(not IS_LINUX or not os.path.isdir("/dev/shm"),
                                reason="needs Linux and /dev/shm (a second filesystem)")


def _profile() -> object:
    from cachedoctor.profiles.loader import load_profiles

    return load_profiles().profiles["foo"].profile


def _move(dest: Path) -> object:
    from cachedoctor.host import Host
    from cachedoctor.relocate import move_location

    return move_location(_profile(), "cache", Host.current(), str(dest))  # type: ignore[arg-type]


def _restore() -> object:
    from cachedoctor.host import Host
    from cachedoctor.relocate import restore_location

    return restore_location(_profile(), "cache", Host.current())  # type: ignore[arg-type]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------ odd destinations (held)


@pytest.mark.parametrize("kind", ["dot-inside-cache", "relative-inside-cache", "symlink-into-cache",
                                  "a-file", "below-a-file", "non-empty-tool-folder"])
def test_bad_destinations_are_refused_and_change_nothing(kind: str, profiles: Path, cache: Path,
                                                        tmp_path: Path) -> None:
    before = snapshot(cache)
    cwd = tmp_path
    if kind == "dot-inside-cache":
        dest, cwd = ".", cache / "blobs"
    elif kind == "relative-inside-cache":
        dest, cwd = "blobs/new", cache
    elif kind == "symlink-into-cache":
        (tmp_path / "lnk").symlink_to(cache / "blobs")
        dest = str(tmp_path / "lnk" / "deeper")
    elif kind == "a-file":
        (tmp_path / "afile").write_text("mine\n")
        dest = str(tmp_path / "afile")
    elif kind == "below-a-file":
        (tmp_path / "afile").write_text("mine\n")
        dest = str(tmp_path / "afile" / "x")
    else:
        (tmp_path / "d" / "foo").mkdir(parents=True)
        (tmp_path / "d" / "foo" / "theirs").write_text("keep\n")
        dest = str(tmp_path / "d")
    result = cli("move", "foo", dest, "--yes", cwd=str(cwd))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(cache) == before and not os.path.islink(cache)
    if kind == "a-file" or kind == "below-a-file":
        assert (tmp_path / "afile").read_text() == "mine\n"
    if kind == "non-empty-tool-folder":
        assert (tmp_path / "d" / "foo" / "theirs").read_text() == "keep\n"
    assert pending() == [] and leftovers(cache.parent, tmp_path) == []


def test_cache_that_is_a_foreign_symlink_is_not_moved(profiles: Path, isolated_home: Path,
                                                      tmp_path: Path, shm: Path) -> None:
    real = tmp_path / "real"
    build_tree(real)
    before = snapshot(real)
    (isolated_home / ".cache").mkdir(parents=True, exist_ok=True)
    (isolated_home / ".cache" / "foo").symlink_to(real)
    result = cli("move", "foo", str(shm), "--yes")
    assert result.returncode == 2 and "already a link" in result.stderr
    assert snapshot(real) == before and os.readlink(isolated_home / ".cache" / "foo") == str(real)


def test_cache_holding_a_symlink_to_dest_moves_the_link_as_a_link(profiles: Path, cache: Path,
                                                                   shm: Path) -> None:
    (cache / "to-dest").symlink_to(shm)
    before = snapshot(cache)
    assert cli("move", "foo", str(shm), "--yes").returncode == 0
    assert snapshot(shm / "foo") == before  # copied as a link, not followed into itself
    assert cli("restore", "foo", "--yes").returncode == 0
    assert snapshot(cache) == before and not (shm / "foo").exists()


def test_invalid_utf8_dest_is_refused_without_a_traceback(profiles: Path, cache: Path,
                                                          shm: Path) -> None:
    """broke: the journal could not encode the name; a traceback (exit 1) instead of exit 2."""
    before = snapshot(cache)
    bad = os.fsdecode(os.fsencode(str(shm)) + b"/bad\xff")
    result = cli("move", "foo", bad, "--yes")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "UTF-8" in result.stderr
    assert snapshot(cache) == before and pending() == []


def test_odd_names_inside_the_cache_survive(profiles: Path, cache: Path, shm: Path) -> None:
    raw = os.fsencode(str(cache))
    for name in (b"bad\xff\xfename", b"new\nline", b"dir\xc3("):
        with open(raw + b"/" + name, "wb") as fh:
            fh.write(name * 3)
    before = snapshot(cache)
    assert cli("move", "foo", str(shm), "--verify", "hash", "--yes").returncode == 0
    assert snapshot(shm / "foo") == before
    assert cli("restore", "foo", "--yes").returncode == 0
    assert snapshot(cache) == before


# ------------------------------------------------------------ the tree changes under the copy


def test_file_appended_between_copy_and_verify_fails_and_keeps_the_original(
        profiles: Path, cache: Path, shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.errors import OperationFailed
    from cachedoctor.relocate import faults

    target = cache / "blobs" / "sha-2"
    real_point = faults.point

    def append_at_verify(name: str) -> None:
        if name == "verify":
            with open(target, "a") as fh:
                fh.write("written by the running tool\n")
        real_point(name)

    monkeypatch.setattr(faults, "point", append_at_verify)
    with pytest.raises(OperationFailed, match="did not match"):
        _move(shm)
    assert target.read_text() == "config\nwritten by the running tool\n"
    assert not os.path.islink(cache) and (cache / "blobs" / "sha-1").stat().st_size == 70_000
    assert not (shm / "foo").exists() and pending() == [] and leftovers(cache.parent, shm) == []


def test_file_deleted_during_the_copy_fails_and_keeps_the_rest(
        profiles: Path, cache: Path, shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.errors import OperationFailed
    from cachedoctor.relocate import faults

    for i in range(40):
        (cache / f"f{i:02}").write_text(str(i))
    before = snapshot(cache)
    real_point = faults.point
    deleted: list[str] = []

    def delete_one(name: str) -> None:
        if name == "copy-file" and not deleted:
            victim = sorted(p for p in os.listdir(cache) if p.startswith("f"))[-1]
            os.unlink(cache / victim)
            deleted.append(victim)
        real_point(name)

    monkeypatch.setattr(faults, "point", delete_one)
    with pytest.raises(OperationFailed):
        _move(shm)
    after = snapshot(cache)
    gone = [deleted[0]]
    assert {k: v for k, v in before.items() if k not in (*gone, ".")} == \
        {k: v for k, v in after.items() if k != "."}
    assert not os.path.islink(cache) and not (shm / "foo").exists() and pending() == []


def test_file_created_during_the_copy_is_caught_by_verify(
        profiles: Path, cache: Path, shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.errors import OperationFailed
    from cachedoctor.relocate import faults

    real_point = faults.point

    def create_at_verify(name: str) -> None:
        if name == "verify":
            (cache / "blobs" / "late").write_text("late\n")
        real_point(name)

    monkeypatch.setattr(faults, "point", create_at_verify)
    with pytest.raises(OperationFailed):
        _move(shm)
    assert (cache / "blobs" / "late").read_text() == "late\n" and not os.path.islink(cache)
    assert pending() == []


# ------------------------------------------------------------------------------ sparse files


@needs_root
def test_sparse_file_stays_sparse_and_fits_a_small_drive(profiles: Path, cache: Path,
                                                         tmpfs: Path) -> None:
    """broke (fixed): the copy filled the holes, so a 64 MiB sparse file with 1 MiB of data did
    not fit the 8 MiB drive the free-space check approved (ENOSPC; rolled back, nothing lost)."""
    sparse = cache / "disk.img"
    with open(sparse, "wb") as fh:
        fh.truncate(64 << 20)
        fh.seek(10 << 20)
        fh.write(os.urandom(1 << 20))
        fh.seek((64 << 20) - 5)
        fh.write(b"tail!")
    before = snapshot(cache)
    result = cli("move", "foo", str(tmpfs), "--verify", "hash", "--yes")
    assert result.returncode == 0, result.stderr
    moved = tmpfs / "foo" / "disk.img"
    assert moved.stat().st_size == 64 << 20 and moved.stat().st_blocks * 512 < (4 << 20)
    assert snapshot(tmpfs / "foo") == before
    back = cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    assert snapshot(cache) == before and sparse.stat().st_blocks * 512 < (4 << 20)


def test_copy_tree_keeps_holes_and_data(tmp_path: Path, shm: Path) -> None:
    """The hole-keeping copy keeps every byte and every hole."""
    from cachedoctor.relocate.copy import copy_tree, verify_tree

    src = tmp_path / "src"
    src.mkdir()
    with open(src / "holes", "wb") as fh:
        fh.write(b"head")
        fh.seek(5 << 20)
        fh.write(b"middle")
        fh.truncate(12 << 20)  # a trailing hole
    copy_tree(str(src), str(shm / "copy"))
    assert verify_tree(str(src), str(shm / "copy"), content=True) == []
    st = (shm / "copy" / "holes").stat()
    assert st.st_size == 12 << 20 and st.st_blocks * 512 < (1 << 20)


# --------------------------------------------------------------- hard links leaving the tree


def test_hard_link_to_a_file_outside_the_cache(profiles: Path, cache: Path, tmp_path: Path,
                                               shm: Path) -> None:
    outside = tmp_path / "outside"
    os.link(cache / "blobs" / "sha-2", outside)
    before = snapshot(cache)
    assert cli("move", "foo", str(shm), "--yes").returncode == 0
    # another drive cannot share the inode: both names keep the data, as separate files
    assert outside.read_text() == "config\n" and (shm / "foo" / "blobs" / "sha-2").read_text() == "config\n"
    outside.write_text("edited outside\n")
    assert (cache / "blobs" / "sha-2").read_text() == "config\n"
    assert cli("restore", "foo", "--yes").returncode == 0
    assert outside.read_text() == "edited outside\n"
    restored = snapshot(cache)
    assert restored == before or {k: v for k, v in restored.items() if k != "blobs/sha-2"} == \
        {k: v for k, v in before.items() if k != "blobs/sha-2"}
    assert (cache / "blobs" / "sha-2").read_text() == "config\n"


# ------------------------------------------------------------------------------------ restore


def test_restore_brings_back_user_changes_and_keeps_a_recreated_original(
        profiles: Path, cache: Path, shm: Path) -> None:
    assert cli("move", "foo", str(shm), "--yes").returncode == 0
    (shm / "foo" / "new-after-move").write_text("new\n")
    (shm / "foo" / "blobs" / "sha-2").unlink()
    os.unlink(cache)  # the tool (or the user) replaced the link with a fresh folder
    cache.mkdir()
    (cache / "recreated").write_text("fresh\n")
    expected = snapshot(shm / "foo")
    result = cli("restore", "foo", "--yes")
    assert result.returncode == 0, result.stderr
    assert snapshot(cache) == expected
    conflicts = [p for p in cache.parent.iterdir() if ".cachedoctor-conflict-" in p.name]
    assert len(conflicts) == 1 and (conflicts[0] / "recreated").read_text() == "fresh\n"


def test_restore_refuses_a_foreign_link_into_its_own_parent(
        tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """broke: `stuff/inner/foo -> stuff` was unlinked, then renaming `stuff` into itself failed
    with a traceback, leaving the link gone and a stuck restore journal (a cross-filesystem one
    would copy the folder into itself and then delete it)."""
    directory = tmp_path / "profiles"
    write_profile(directory, paths="~/stuff/inner/foo")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    stuff = isolated_home / "stuff"
    (stuff / "inner").mkdir(parents=True)
    (stuff / "precious.txt").write_text("precious\n")
    (stuff / "inner" / "p2").write_text("p2\n")
    link = stuff / "inner" / "foo"
    link.symlink_to(stuff)
    result = cli("restore", "foo", "--yes")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "contain one another" in result.stderr
    assert os.readlink(link) == str(stuff)
    assert (stuff / "precious.txt").read_text() == "precious\n"
    assert (stuff / "inner" / "p2").read_text() == "p2\n"
    assert pending() == []


@needs_root
def test_enospc_during_restore_keeps_the_relocated_cache(
        profiles: Path, isolated_home: Path, shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.errors import OperationFailed
    from cachedoctor.relocate import faults

    caches = isolated_home / ".cache"
    caches.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(caches)], check=True)
    try:
        cache = caches / "foo"
        build_tree(cache)
        (cache / "big").write_bytes(os.urandom(3 << 20))
        before = snapshot(cache)
        assert cli("move", "foo", str(shm), "--yes").returncode == 0
        filler = caches / "filler"
        real_point = faults.point

        def fill_disk(name: str) -> None:  # another program takes the space mid-restore
            if name == "copy-file" and not filler.exists():
                with open(filler, "wb") as fh, pytest.raises(OSError) as exc:
                    while True:
                        fh.write(b"\0" * (1 << 20))
                        fh.flush()
                assert exc.value.errno == errno.ENOSPC
            real_point(name)

        monkeypatch.setattr(faults, "point", fill_disk)
        with pytest.raises(OperationFailed):
            _restore()
        monkeypatch.setattr(faults, "point", real_point)
        assert os.path.islink(cache) and snapshot(shm / "foo") == before
        assert pending() == [] and leftovers(caches) == []
        filler.unlink()
        _restore()
        assert not os.path.islink(cache) and snapshot(cache) == before
    finally:
        subprocess.run(["umount", "-l", str(caches)], check=False)


def test_kill_during_restore_blocks_a_new_move_until_finished(profiles: Path, cache: Path,
                                                               shm: Path, tmp_path: Path) -> None:
    before = snapshot(cache)
    assert cli("move", "foo", str(shm), "--yes").returncode == 0
    killed = cli("restore", "foo", "--yes", env={"CACHEDOCTOR_FAULT_AT": "verify"})
    assert killed.returncode == -9
    other = tmp_path / "elsewhere"
    refused = cli("move", "foo", str(other), "--yes")
    assert refused.returncode == 2 and "restore" in refused.stderr
    assert not other.exists() and snapshot(shm / "foo") == before
    assert cli("restore", "foo", "--yes").returncode == 0
    assert snapshot(cache) == before and pending() == []
    assert leftovers(cache.parent, shm) == []


def test_two_concurrent_moves_leave_the_cache_in_one_place(profiles: Path, cache: Path,
                                                           shm: Path) -> None:
    import sys

    (cache / "big").write_bytes(os.urandom(8 << 20))
    before = snapshot(cache)
    procs = [subprocess.Popen([sys.executable, "-m", "cachedoctor", "move", "foo",
                               str(shm / name), "--yes"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    codes = [p.wait(timeout=300) for p in procs]
    for p in procs:
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        p.stderr.close()
    assert all(code in (0, 2) for code in codes) and 0 in codes
    homes = [shm / name / "foo" for name in ("a", "b") if (shm / name / "foo").exists()]
    assert len(homes) == 1 and os.path.samefile(cache, homes[0])
    assert snapshot(homes[0]) == before and pending() == []
    assert cli("restore", "foo", "--yes").returncode == 0 and snapshot(cache) == before


def test_undo_of_a_move_after_a_second_move_is_refused(profiles: Path, cache: Path, shm: Path,
                                                       tmp_path: Path) -> None:
    from cachedoctor import history

    before = snapshot(cache)
    assert cli("move", "foo", str(shm / "one"), "--yes").returncode == 0
    first = max(c.id for c in history.changes(tool="foo") if c.kind == "move")
    assert cli("restore", "foo", "--yes").returncode == 0
    assert cli("move", "foo", str(shm / "two"), "--yes").returncode == 0
    refused = cli("undo", str(first), "--yes")
    assert refused.returncode == 2, refused.stderr
    assert os.path.samefile(cache, shm / "two" / "foo") and snapshot(cache) == before
    second = max(c.id for c in history.changes(tool="foo") if c.kind == "move")
    assert cli("undo", str(second), "--yes").returncode == 0
    assert not os.path.islink(cache) and snapshot(cache) == before


def test_a_resumed_move_does_not_trust_foreign_data_at_the_destination(
        profiles: Path, cache: Path, shm: Path) -> None:
    """Killed after the copy was renamed into place; before the re-run, something else replaces
    DEST/foo. The re-run must not delete the original in favour of it."""
    before = snapshot(cache)
    killed = cli("move", "foo", str(shm), "--yes", env={"CACHEDOCTOR_FAULT_AT": "rename-dest"})
    assert killed.returncode == -9 and pending()
    dest = shm / "foo"
    for partial in shm.glob("foo.cachedoctor-partial-*"):
        subprocess.run(["rm", "-rf", str(partial)], check=True)
    if dest.exists():
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir()
    (dest / "someone-elses.txt").write_text("not the cache")
    rerun = cli("move", "foo", str(shm), "--yes")
    assert rerun.returncode == 1, rerun.stderr
    assert "is not a copy of" in rerun.stderr
    assert not os.path.islink(cache) and snapshot(cache) == before
    assert (dest / "someone-elses.txt").read_text() == "not the cache"
