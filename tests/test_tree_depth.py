"""Deep trees: the tree layer is iterative, so a 1,100-deep cache (Python's recursion limit is
1,000; a recursive delete once left such a move stuck at `cleaning`) moves, comes back and is
cleaned; a tree deeper than `fs.walk.MAX_DEPTH` gets a clear "too deep" before any change."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from cachedoctor.fs import walk
from cachedoctor.fs.probe import assess, probe
from cachedoctor.relocate.copy import copy_tree, remove_tree, survey, verify_tree
from cachedoctor.safedelete import clean_tree
from cachedoctor.walker import measure
from tests.conftest import IS_LINUX
from tests.test_move import cli, pending, write_profile

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="fd-relative deep trees on Linux")


@pytest.fixture(autouse=True)
def remove_deep_trees(tmp_path: Path, isolated_home: Path) -> object:
    """pytest prunes old tmp folders with shutil.rmtree, recursive before Python 3.12: a tree
    this deep would end it with a RecursionError. The tree layer removes them instead."""
    yield
    for top in (tmp_path, isolated_home):
        for entry in top.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                with contextlib.suppress(OSError):  # a tree within MAX_DEPTH as patched: short
                    remove_tree(str(entry))


def deep_tree(root: Path, depth: int) -> None:
    """`depth` folders below `root`, a file at the bottom, made relative to each new folder
    (paths this long are awkward for path-based tools, not for the tree layer)."""
    root.mkdir(parents=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open("bottom.bin", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"b" * 1000)
        os.close(leaf)
    finally:
        os.close(fd)


def test_a_1100_deep_cache_moves_comes_back_and_is_cleaned(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           isolated_home: Path) -> None:
    write_profile(tmp_path / "profiles")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(tmp_path / "profiles"))
    cache = isolated_home / ".cache" / "foo"
    deep_tree(cache, 1100)
    assert measure(str(cache)).dirs == 1101
    dest = Path("/dev/shm") / f"cachedoctor-deep-{os.getpid()}"
    try:
        moved = cli("move", "foo", str(dest), "--yes")
        assert moved.returncode == 0, moved.stderr
        assert measure(str(dest / "foo")).inodes == 1102 and pending() == []
        back = cli("restore", "foo", "--yes")
        assert back.returncode == 0, back.stderr
        assert not cache.is_symlink() and measure(str(cache)).apparent_bytes >= 1000
        cleaned = cli("clean", "foo", "--yes")
        assert cleaned.returncode == 0, cleaned.stderr
        assert list(cache.iterdir()) == []
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(dest)], check=False)


def test_deeper_than_the_bound_is_said_clearly_and_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk, "MAX_DEPTH", 40)
    root = tmp_path / "cache"
    deep_tree(root, 60)
    found = survey(str(root))
    assert found.too_deep and "more than 40 folders below" in found.too_deep[0]
    verdict = assess(found, probe(str(tmp_path)))
    assert verdict.refusals and "does not copy a tree that deep" in verdict.refusals[0]
    measured = measure(str(root))
    assert measured.partial and "more than 40 folders" in measured.errors[0]
    with pytest.raises(OSError, match="too deep"):
        copy_tree(str(root), str(tmp_path / "copy"))
    result = clean_tree(str(root))
    assert result.partial and "more than 40 folders below" in result.errors[0]
    assert result.files == 0 and root.is_dir()
    with pytest.raises(OSError, match="could not remove everything"):
        remove_tree(str(root))
    assert verify_tree(str(root), str(root)) != []  # it says it could not look that far


def test_the_descriptor_limit_is_raised_for_a_deep_walk(tmp_path: Path) -> None:
    """One descriptor per level (two when copying): a soft RLIMIT_NOFILE of 256 (macOS's
    default) would stop at about 250 levels; the walker raises it towards the hard limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 2400:
        pytest.skip("the hard descriptor limit here is too low to show it")
    root = tmp_path / "src"
    deep_tree(root, 600)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        copy_tree(str(root), str(tmp_path / "copy"))
        assert verify_tree(str(root), str(tmp_path / "copy")) == []
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_paths_that_would_reach_max_path_at_the_destination_are_said(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / ("x" * 120)).mkdir(parents=True)
    (root / ("x" * 120) / ("y" * 100)).write_text("z")
    found = survey(str(root))
    assert found.longest_path == 221
    said = assess(found, probe(str(tmp_path)), dest_folder="D:\\ai-cache\\some-tool\\with-a-long-location-name").losses
    assert any("Windows programs without long-path support" in s for s in said)
    assert not assess(found, probe(str(tmp_path)), dest_folder="D:\\c").losses
