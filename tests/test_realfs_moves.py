"""move, restore and clean against each real destination filesystem (tests/realfs.py: ext4,
xfs, btrfs, tmpfs, NTFS through ntfs-3g, exFAT through exfat-fuse, the DrvFs stand-in).

What each can hold is measured by `cachedoctor.fs.probe` the way the move itself does, and the
expectations follow from it: a destination that cannot hold what the cache has is refused
before any change (exFAT and symbolic links, FIFOs, names that differ only in case, reserved
characters, a profile's `requires:`), what it cannot keep is said before copying (modes on
NTFS/exFAT/DrvFs, hard links and holes on exFAT) and not verified, and everything else comes
back exactly. Never halfway: a refused move leaves nothing at the destination."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cachedoctor.fs.probe import Capabilities, forget, probe
from tests.conftest import IS_LINUX
from tests.realfs import RealFS
from tests.test_move import cli, leftovers, pending, write_profile
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="real filesystems are mounted on Linux")


@pytest.fixture(autouse=True)
def fresh_probe() -> None:
    forget()  # each test mounts new filesystems; device numbers are reused


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "profiles"
    write_profile(directory)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(directory))
    return directory


def comparable(snap: dict[str, Any], caps: Capabilities) -> dict[str, Any]:
    """A snapshot as far as a filesystem with `caps` keeps it: no modes where chmod is ignored,
    mtimes to its step, each hard-linked name its own file where there are no hard links."""
    out: dict[str, Any] = {}
    step = max(caps.mtime_step_ns, 1)
    for rel, value in snap.items():
        if rel == "#hardlinks":
            out[rel] = value if caps.hardlinks else []
            continue
        kind, *rest = value
        if kind in ("dir", "file"):
            mode, mtime, *more = rest
            out[rel] = (kind, mode if caps.modes else None, mtime - mtime % step, *more)
        elif kind == "other":  # a FIFO: its type, and its mode where modes are kept
            out[rel] = (kind, rest[0], rest[1] if caps.modes else None)
        else:
            out[rel] = value
    return out


def nothing_left_at(root: Path) -> list[str]:
    return [name for name in os.listdir(root) if name not in ("lost+found",)]


def test_move_and_restore_to_each_filesystem(realfs: RealFS, profiles: Path,
                                            isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "foo"
    build_tree(cache)  # symlinks, hard links, a FIFO, a read-only file, xattrs, odd names
    before = snapshot(cache)
    caps = probe(str(realfs.path))
    dest = realfs.path / "caches"
    moved = cli("move", "foo", str(dest), "--yes")
    if not (caps.symlinks and caps.fifos):  # exFAT: refused before any change
        assert moved.returncode == 2, moved.stderr
        assert "nothing was changed" in moved.stderr and "symbolic links" in moved.stderr
        assert snapshot(cache) == before and not cache.is_symlink()
        assert nothing_left_at(realfs.path) == [] and pending() == []
        return
    assert moved.returncode == 0, moved.stderr
    said = moved.stderr
    assert ("permissions are not kept" in said) == (not caps.modes), said
    target = dest / "foo"
    assert cache.is_symlink() and os.path.samefile(cache, target)
    assert comparable(snapshot(target), caps) == comparable(before, caps)
    assert leftovers(cache.parent, dest) == [] and pending() == []

    back = cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    after = snapshot(cache)
    assert comparable(after, caps) == comparable(before, caps)
    if not caps.modes:  # 0777 read from there is not written back: defaults instead
        assert all(not (v[1] & stat.S_IWOTH) for v in after.values()
                   if isinstance(v, tuple) and v[0] in ("file", "dir")), after
    else:
        assert after == before
    assert not target.exists() and leftovers(cache.parent, realfs.path) == []


def test_clean_on_each_filesystem(realfs: RealFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  isolated_home: Path) -> None:
    """A cache that lives on that filesystem (a tool configured to keep it there): clean
    empties it, keeps the folder, removes links as links and a read-only file like any other."""
    caps = probe(str(realfs.path))
    cache = realfs.path / "tool-cache"
    (cache / "a" / "b").mkdir(parents=True)
    (cache / "a" / "b" / "blob").write_bytes(b"b" * 20_000)
    (cache / "ro.txt").write_text("ro")
    (cache / "ro.txt").chmod(0o444)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    if caps.symlinks:
        (cache / "a" / "to-outside").symlink_to(outside)
    if caps.hardlinks:
        os.link(cache / "a" / "b" / "blob", cache / "twin")
    write_profile(tmp_path / "profiles", paths=str(cache))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(tmp_path / "profiles"))
    done = cli("clean", "foo", "--yes")
    assert done.returncode == 0, done.stderr
    assert cache.is_dir() and list(cache.iterdir()) == []
    assert (outside / "keep").read_text() == "keep"


@pytest.fixture
def stick(make_realfs: Any) -> RealFS:
    fs: RealFS = make_realfs("exfat", size="32M", name="stick")
    return fs


def test_exfat_adapts_hard_links_modes_and_holes_and_says_so_first(
        stick: RealFS, profiles: Path, isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "foo"
    (cache / "store").mkdir(parents=True)
    (cache / "store" / "blob").write_bytes(os.urandom(40_000))
    os.link(cache / "store" / "blob", cache / "linked")
    (cache / "ro").write_text("r")
    (cache / "ro").chmod(0o444)
    with open(cache / "sparse.img", "wb") as fh:
        fh.seek(2 << 20)
        fh.write(b"end")
    moved = cli("move", "foo", str(stick.path / "c"), "--yes")
    assert moved.returncode == 0, moved.stderr
    for said in ("hard-linked names become separate files", "permissions are not kept",
                 "sparse files take their full size", "kept to the second"):
        assert said in moved.stderr, moved.stderr
    copy = stick.path / "c" / "foo"
    assert (copy / "linked").read_bytes() == (copy / "store" / "blob").read_bytes()
    assert os.stat(copy / "sparse.img").st_size == (2 << 20) + 3
    back = cli("restore", "foo", "--yes")
    assert back.returncode == 0, back.stderr
    assert (cache / "linked").read_bytes() == (cache / "store" / "blob").read_bytes()
    assert not os.path.lexists(stick.path / "c")  # the move made DEST: the restore takes it away


@pytest.mark.parametrize("bad", ["case", "reserved", "requires-symlinks"])
def test_exfat_refuses_before_any_change(bad: str, stick: RealFS, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "foo"
    cache.mkdir(parents=True)
    (cache / "plain").write_text("p")
    if bad == "case":
        (cache / "Readme").write_text("1")
        (cache / "README").write_text("2")
    elif bad == "reserved":
        (cache / "https:example.org").write_text("url as a name")
    profiles = tmp_path / "profiles"
    write_profile(profiles)
    if bad == "requires-symlinks":  # a Hugging Face hub: snapshots/ link into blobs/
        text = (profiles / "foo.yaml").read_text().replace("safe_to_delete: true",
                                                          "safe_to_delete: true\n    requires: [symlinks]")
        (profiles / "foo.yaml").write_text(text)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    before = snapshot(cache)
    refused = cli("move", "foo", str(stick.path / "c"), "--yes")
    assert refused.returncode == 2, refused.stderr
    assert "nothing was changed" in refused.stderr
    why = {"case": "differ only in case", "reserved": "refuses the characters",
           "requires-symlinks": "needs symlinks"}[bad]
    assert why in refused.stderr, refused.stderr
    assert snapshot(cache) == before and nothing_left_at(stick.path) == [] and pending() == []
