"""CACHEDIR.TAG: what counts as a tag, and scan's "tagged cache" entries in the unclaimed list."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cachedoctor.cachedirtag import SIGNATURE, has_tag
from cachedoctor.cli.render import tilde
from tests.conftest import needs_posix_paths, result_of, run_cli, user_cache_root

TAG = SIGNATURE + b"\n# This file is a cache directory tag created by a test.\n"

PROFILE = """\
id: demo
name: Demo
description: A demo tool whose location lies inside a folder of its own.
sources: [test]
locations:
  - id: inner
    paths: {linux: "${XDG_CACHE_HOME:-~/.cache}/demo/inner", macos: ~/Library/Caches/demo/inner,
            windows: '%LOCALAPPDATA%\\\\demo\\\\inner'}
    safe_to_delete: true
"""


def tagged(folder: Path, data: bytes = TAG) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CACHEDIR.TAG").write_bytes(data)
    (folder / "blob").write_bytes(b"x" * 5000)
    return folder


def test_what_counts_as_a_tag(tmp_path: Path) -> None:
    assert has_tag(str(tagged(tmp_path / "good")))
    assert has_tag(str(tagged(tmp_path / "bare", SIGNATURE)))  # the 43 bytes alone
    assert not has_tag(str(tagged(tmp_path / "short", SIGNATURE[:-1])))
    assert not has_tag(str(tagged(tmp_path / "other", b"Signature: 0" + TAG[12:])))
    assert not has_tag(str(tagged(tmp_path / "lower", TAG.lower())))
    (tmp_path / "dir" / "CACHEDIR.TAG").mkdir(parents=True)
    assert not has_tag(str(tmp_path / "dir"))
    assert not has_tag(str(tmp_path / "missing"))
    fd = os.open(tmp_path / "good", os.O_RDONLY)
    try:
        assert has_tag("ignored", dir_fd=fd)
    finally:
        os.close(fd)


@needs_posix_paths
def test_a_linked_or_special_tag_is_not_a_tag(tmp_path: Path) -> None:
    tagged(tmp_path / "real")
    (tmp_path / "linked").mkdir()
    os.symlink(tmp_path / "real" / "CACHEDIR.TAG", tmp_path / "linked" / "CACHEDIR.TAG")
    assert not has_tag(str(tmp_path / "linked"))  # vouched for by a file elsewhere
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "CACHEDIR.TAG")
    assert not has_tag(str(tmp_path / "fifo"))  # and the read did not hang


@pytest.fixture
def demo_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "demo.yaml").write_text(PROFILE)
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(folder))


def test_scan_names_tagged_caches_among_the_unclaimed(demo_profile: None, isolated_home: Path) -> None:
    root = user_cache_root(isolated_home)
    tagged(root / "tagged-app")  # a folder of its own, with a tag
    (root / "plain").mkdir(parents=True)
    (root / "plain" / "f").write_bytes(b"y" * 100)
    tagged(root / "plain" / "sub" / "tagged")  # inside a listed folder: counted there, once
    tagged(root / "demo" / "inner" / "cargo-target")  # inside a profile's location: claimed
    deep = tagged(root / "demo" / "other" / "deep" / "tagged")  # beside it: found, bounded depth
    tagged(root / "demo" / "other" / "a" / "b" / "c" / "d" / "too-deep")
    result = run_cli("scan", "--json")
    assert "Traceback" not in result.stderr, result.stderr
    unclaimed = {e["path"]: e for e in result_of(result)["unclaimed"]}
    assert set(unclaimed) == {str(root / "tagged-app"), str(root / "plain"), str(deep)}
    assert unclaimed[str(root / "tagged-app")]["tagged"] is True
    assert unclaimed[str(root / "tagged-app")]["name"] == "tagged cache"
    assert unclaimed[str(deep)]["tagged"] is True
    assert unclaimed[str(root / "plain")]["tagged"] is False
    assert unclaimed[str(root / "plain")]["name"] is None
    table = run_cli("scan").stdout
    shown = tilde(str(root / "tagged-app"))  # a path in the home is shown from `~`
    [row] = [line for line in table.splitlines() if line.rstrip().endswith(shown)]
    assert "(unclaimed)" in row and "tagged cache" in row
