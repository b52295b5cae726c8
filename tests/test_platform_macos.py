"""macOS through its double (tests/doubles/macos.py): no copy_file_range, sendfile to a file is
ENOTSOCK (issue 10, finding 3: every cross-volume move failed on its first file), fcopyfile
and clonefile, F_FULLFSYNC. The move/restore/clean suites also run through this double
(`os_doubles` in test_move.py, test_clean.py, test_relocate_copy.py)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cachedoctor.fs import seam
from cachedoctor.fs.posix import MacOps
from cachedoctor.relocate.copy import copy_tree, make_durable, verify_tree
from tests.conftest import IS_LINUX
from tests.test_relocate_copy import build_tree, snapshot

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="the double runs over a Linux tree")


def test_the_double_is_macos_as_documented(macos_double: Any, tmp_path: Path) -> None:
    assert not hasattr(os, "copy_file_range")
    with open(tmp_path / "a", "wb") as a, open(tmp_path / "b", "wb") as b, \
            pytest.raises(OSError) as caught:
        os.sendfile(b.fileno(), a.fileno(), 0, 1)
    assert caught.value.errno == errno.ENOTSOCK
    assert isinstance(seam.current(), MacOps)


def test_copy_uses_fcopyfile_and_never_sendfile(macos_double: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    build_tree(src)
    copy_tree(str(src), str(tmp_path / "copy"))
    assert snapshot(src) == snapshot(tmp_path / "copy")
    assert macos_double.calls()["fcopyfile"] >= 4


def test_fcopyfile_not_supported_falls_back_to_read_write(macos_double: Any,
                                                          tmp_path: Path) -> None:
    macos_double.unsupported = True
    src = tmp_path / "src"
    build_tree(src)
    copy_tree(str(src), str(tmp_path / "copy"))
    assert verify_tree(str(src), str(tmp_path / "copy"), content=True) == []
    assert "fcopyfile" not in macos_double.calls()


def test_same_volume_copies_are_clones_where_the_volume_can(macos_double: Any,
                                                           tmp_path: Path) -> None:
    macos_double.apfs = True
    src = tmp_path / "src"
    build_tree(src)
    copy_tree(str(src), str(tmp_path / "copy"))
    assert verify_tree(str(src), str(tmp_path / "copy"), content=True) == []
    assert macos_double.calls()["fclonefileat"] >= 4 and "fcopyfile" not in macos_double.calls()


def test_make_durable_asks_the_drive_to_flush(macos_double: Any, tmp_path: Path) -> None:
    (tmp_path / "copy").mkdir()
    assert make_durable(str(tmp_path / "copy")) == "fullfsync"
    assert macos_double.calls()["fullfsync"] == 1


def test_move_across_volumes_through_the_cli(macos_double: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             isolated_home: Path) -> None:
    from tests.test_move import write_profile

    write_profile(tmp_path / "profiles")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(tmp_path / "profiles"))
    cache = isolated_home / ".cache" / "foo"
    build_tree(cache)
    before = snapshot(cache)
    dest = Path("/dev/shm") / f"cachedoctor-mac-{os.getpid()}"
    try:
        run = subprocess.run([sys.executable, "-m", "cachedoctor", "move", "foo", str(dest),
                              "--yes"], capture_output=True, text=True, env=os.environ.copy(),
                             timeout=300)
        assert run.returncode == 0, run.stderr
        assert snapshot(dest / "foo") == before
        assert macos_double.calls()["fullfsync"] >= 1  # the copy was flushed before the swap
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(dest)], check=False)
