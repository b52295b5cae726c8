"""The units listing on real filesystems: sizes equal `du`, the clock follows the mount's
options, and a wide cache never runs out of descriptors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cachedoctor.cacheunits import clock_for, list_tree, survey, usage_clock
from cachedoctor.profiles.model import EntryUnits, HfHubUnits
from tests.conftest import needs_du, needs_linux
from tests.layouts import commit_of, make_repo

pytestmark = needs_linux


def du(path: Path, *more: Path) -> int:
    out = subprocess.check_output(["du", "-cB1", str(path), *map(str, more)], text=True)
    return int(out.splitlines()[-1].split()[0])


@needs_du
def test_unit_sizes_equal_du_on_every_filesystem(realfs) -> None:
    hub = realfs.path / "hub"
    hub.mkdir()
    try:
        (hub / "probe").symlink_to("x")
    except OSError:
        pytest.skip(f"{realfs.kind} holds no symbolic links (huggingface_hub copies files there)")
    (hub / "probe").unlink()
    a, b = commit_of("a"), commit_of("b")
    for n in range(3):
        make_repo(hub, f"org/m{n}", {a: {"w.bin": os.urandom(70000 + n), "c.json": b"{}" * 900},
                                     b: {"w.bin": os.urandom(3000), "c.json": b"{}" * 900}},
                  {"main": a})
    s = survey(str(hub), [HfHubUnits()])
    assert len(s.units) == 3
    for unit in s.units:
        assert unit.bytes == du(hub / unit.path), (realfs.kind, unit.id)
    assert s.total == du(hub)


@needs_du
def test_directory_entry_sizes_equal_du_with_hard_links_and_empty_folders(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "a" / "empty").mkdir(parents=True)
    (root / "a" / "f").write_bytes(b"x" * 10000)
    (root / "b").mkdir()
    os.link(root / "a" / "f", root / "b" / "same")  # one inode in two units: shared
    (root / "b" / "g").write_bytes(b"y" * 5000)
    s = survey(str(root), [EntryUnits(under=".")])
    units = {u.id: u for u in s.units}
    assert units["a"].bytes == du(root / "a")
    assert units["b"].bytes == du(root / "b" / "same", root / "b" / "g", root / "b")
    assert units["a"].shared_bytes == units["b"].shared_bytes == (root / "a" / "f").stat().st_blocks * 512
    assert s.total == du(root)


def test_the_clock_follows_the_mount_options(realfs_ext4) -> None:
    from cachedoctor.drives import partitions

    path = str(realfs_ext4.path)
    partitions.cache_clear()
    assert usage_clock(path).name == "atime"
    subprocess.run(["mount", "-o", "remount,noatime", path], check=True)
    partitions.cache_clear()
    clock = usage_clock(path)
    assert clock.name == "mtime" and "noatime" in clock.why and path in clock.why
    partitions.cache_clear()


def test_clock_rules() -> None:
    assert clock_for("/", ("rw", "relatime")).name == "atime"
    assert clock_for("/", ("rw", "strictatime")).name == "atime"
    assert clock_for("/mnt/c", ("rw", "noatime")).name == "mtime"


def test_a_wide_cache_is_listed_with_few_descriptors(tmp_path: Path) -> None:
    """2,000 repos side by side with a 64-descriptor limit: every one listed."""
    root = tmp_path / "wide"
    for i in range(2000):
        (root / f"e{i:04d}" / "sub").mkdir(parents=True)
        (root / f"e{i:04d}" / "sub" / "f").write_bytes(b"z")
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        from cachedoctor.cacheunits import list_tree
        tree = list_tree({str(root)!r})
        assert not tree.errors, tree.errors[:3]
        print(sum(1 for e in tree.entries.values() if e.is_file))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2000"


def test_a_folder_swapped_for_a_link_is_not_listed_through(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    (root / "link").symlink_to(outside)
    tree = list_tree(str(root))
    assert "link" in tree.entries and tree.entries["link"].is_link
    assert not any("secret" in rel for rel in tree.entries)


def test_a_link_resolves_to_the_lexical_normpath_of_its_target() -> None:
    """`Tree.resolve` (a walk over the parts, normpath where a part is empty or `.`) against
    its definition, on 50,000 random links mixing `..`, `.`, empty parts and dot names."""
    import posixpath
    import random

    from cachedoctor.cacheunits.tree import Entry, Tree

    def definition(rel: str, target: str) -> str | None:
        if "\\" in target or target.startswith("/"):
            return None
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        return None if joined in (".", "..") or joined.startswith("../") else joined

    tree = Tree(root="/cache")
    parts = ["..", ".", "", "a", "b", ".h", "..x", "blobs", "x..", "c\\d"]
    pick = random.Random(14)
    for _ in range(50_000):
        rel = "/".join(pick.choice(["a", "b", "c", ".d"]) for _ in range(pick.randint(1, 4)))
        target = "/".join(pick.choice(parts) for _ in range(pick.randint(1, 5)))
        link = Entry(rel, False, True, False, 0, 0.0, 0.0, (0, 0), 1, target)
        assert tree.resolve(link) == definition(rel, target), (rel, target)
    assert tree.resolve(Entry("m/snapshots/c/w.bin", False, True, False, 0, 0.0, 0.0, (0, 0), 1,
                              "../../blobs/ab12")) == "m/blobs/ab12"


def test_a_small_file_is_read_whole_whatever_size_it_had(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_text` reads what the file's size says, not a MiB buffer per 40-byte ref, and
    still gives the whole text (up to SMALL_FILE) of a file that grew after its size was
    taken; an empty file is empty text; a bigger one gives its first SMALL_FILE bytes."""
    from cachedoctor.cacheunits import tree as tree_module
    from cachedoctor.cacheunits.tree import SMALL_FILE, read_text

    def listed(path: Path) -> tree_module.Entry:
        return list_tree(str(tmp_path), workers=1).entries[path.name]

    empty, ref, big = tmp_path / "empty", tmp_path / "main", tmp_path / "big"
    empty.write_bytes(b"")
    ref.write_text("0123456789abcdef0123456789abcdef01234567")
    big.write_bytes(b"x" * (SMALL_FILE + 4096))
    assert read_text(str(empty), listed(empty)) == ""
    assert read_text(str(ref), listed(ref)) == ref.read_text()
    assert read_text(str(big), listed(big)) == "x" * SMALL_FILE
    grown = ref.read_text() * 100  # 4,000 bytes where fstat said 40
    entry = listed(ref)
    real = os.fstat
    ref.write_text(grown)

    def stale(fd: int) -> os.stat_result:
        st = real(fd)
        return os.stat_result((*st[:6], 40, *st[7:]))  # st_size as it was

    monkeypatch.setattr(tree_module.os, "fstat", stale)
    assert read_text(str(ref), entry) == grown
