"""The compiled per-folder loop (cachedoctor/fs/_native.c) against the Python loop it replaces
and GNU du: the same totals, newest time, failures and subfolders, on names that are not UTF-8,
every kind of entry, big folders and unreadable entries; and the raw function's own contract
(a descriptor that is not a folder, the descriptor's offset). tests/test_walker.py runs the
whole walker through both loops as well."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cachedoctor import walker
from cachedoctor.fs import posix, seam
from cachedoctor.walker import WalkResult
from tests.conftest import IS_LINUX, IS_ROOT, needs_du
from tests.test_walker import as_nobody, du, totals, write_sparse

COUNTER = seam.native().folder_counter() if IS_LINUX else None
needs_counter = pytest.mark.skipif(COUNTER is None, reason="the compiled loop is not built here")


def _compiler() -> str | None:
    cc = sysconfig.get_config_var("CC")
    return shutil.which(shlex.split(cc)[0]) if cc else None


@pytest.mark.skipif(not IS_LINUX or _compiler() is None,
                    reason="built on Linux where there is a C compiler (hatch_build.py)")
def test_compiled_loop_is_built() -> None:
    """Where it can be built, it is: otherwise every scan silently takes the slower loop."""
    assert COUNTER is not None, ("cachedoctor/fs/_native.c was not compiled: "
                                 "see the warning of `pip install`")


def measure_both(path: Path, monkeypatch: pytest.MonkeyPatch,
                 **options: Any) -> tuple[WalkResult, WalkResult]:
    compiled = walker.measure(str(path), **options)
    with monkeypatch.context() as patch:
        patch.setattr(posix.LinuxOps, "folder_counter", lambda self: None)
        python = walker.measure(str(path), **options)
    return compiled, python


@pytest.fixture
def every_kind(tmp_path: Path) -> Iterator[Path]:
    """Files, hard links inside and across folders, symlinks (to files, folders, nowhere),
    a FIFO, a socket, a sparse file, empty folders, a folder of 10,000 names (the loop's
    buffers grow) and names that are not UTF-8."""
    root = tmp_path / "kinds"
    big = root / "big"
    big.mkdir(parents=True)
    for n in range(10_000):
        (big / f"entry-{n:05d}-{'x' * (n % 200)}").write_bytes(b"b" * (n % 5000))
    odd = os.fsencode(str(root)) + b"/caf\xe9-\xff\xfe"  # Latin-1 bytes: surrogate-escaped names
    os.mkdir(odd)
    with open(odd + b"/\x80file", "wb") as fh:
        fh.write(b"o" * 9000)
    os.mkdir(odd + b"/sub\xc3")
    first = root / "a" / "one.bin"
    first.parent.mkdir()
    first.write_bytes(b"1" * 70_000)
    os.link(first, root / "a" / "same-folder-link")
    os.link(first, big / "other-folder-link")
    os.link(first, odd + b"/\x81link")
    os.symlink(first, root / "to-file")
    os.symlink(root / "a", root / "to-folder")
    os.symlink("nowhere/at/all", root / "dangling")
    os.mkfifo(root / "fifo")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(root / "sock"))
    write_sparse(root / "sparse", 30 * 1024 * 1024, 5 * 1024 * 1024)
    (root / "empty" / "deeper" / "deepest").mkdir(parents=True)
    yield root


@needs_du
@needs_counter
@pytest.mark.parametrize("workers", [1, 2])
def test_compiled_and_python_loops_agree_with_du(every_kind: Path, workers: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, python = measure_both(every_kind, monkeypatch, workers=workers)
    assert compiled == python
    assert totals(compiled) == du(every_kind)
    assert compiled.errors == [] and compiled.newest_mtime is not None


@contextlib.contextmanager
def unreadable_tree(prefix: str, make_g: Callable[[Path], None]) -> Iterator[Path]:
    """A folder the nobody user can enter, holding `open` (readable), `locked` (cannot be
    listed: the folder's own failure) and `listable` (listed, but no entry can be stat'ed:
    EACCES for its `inner` and for `g`, which `make_g` makes); removed afterwards. Outside
    /tmp/pytest-of-root, which is 0700."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        base.chmod(0o755)
        for name in ("open", "locked", "listable"):
            (base / name / "inner").mkdir(parents=True)
            (base / name / "inner" / "f").write_bytes(b"p" * 5000)
        make_g(base / "listable" / "g")
        (base / "locked").chmod(0o000)
        (base / "listable").chmod(0o444)
        yield base
    finally:
        for name in ("locked", "listable"):
            (base / name).chmod(0o755)
        shutil.rmtree(base)


def unreadable_errors(base: Path) -> list[str]:
    """The failures a walk of `unreadable_tree(...)` as nobody reports, by path."""
    return [f"{base}/listable/g: Permission denied", f"{base}/listable/inner: Permission denied",
            f"{base}/locked: Permission denied"]


@needs_counter
@pytest.mark.skipif(not IS_ROOT, reason="drops to the nobody user, which needs root")
def test_unreadable_entries_are_reported_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    with unreadable_tree("native-perm-", lambda g: g.write_bytes(b"q" * 100)) as base:

        def both() -> list[Any]:
            compiled, python = measure_both(base, monkeypatch, workers=1)
            return [[totals(r), r.newest_mtime, r.errors] for r in (compiled, python)]

        compiled, python = as_nobody(both)
        assert compiled == python
        assert sorted(compiled[2]) == unreadable_errors(base)


@needs_counter
def test_a_descriptor_that_is_not_a_folder_raises_like_listdir(tmp_path: Path) -> None:
    assert COUNTER is not None
    path = tmp_path / "file"
    path.write_bytes(b"f")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(NotADirectoryError):
            COUNTER(fd, 0, False)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as raised:
        COUNTER(fd, 0, False)  # closed
    assert raised.value.errno == 9  # EBADF


@needs_counter
def test_the_descriptor_is_counted_from_its_start_each_time(tmp_path: Path) -> None:
    """It shares the caller's descriptor offset (dup): a second count, or one after
    os.listdir(fd), still sees every name."""
    assert COUNTER is not None
    for n in range(50):
        (tmp_path / f"f{n}").write_bytes(b"z" * n)
    (tmp_path / "sub").mkdir()
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = COUNTER(fd, os.fstat(fd).st_dev, True)
        assert len(os.listdir(fd)) == 51  # and leaves the offset where listdir would
        assert COUNTER(fd, os.fstat(fd).st_dev, True) == first
        blocks, size, files, dirs, newest, subdirs, linked, failed = first
        sub = os.lstat(tmp_path / "sub")
        assert (size, files, dirs, linked, failed) == (sum(range(50)) + sub.st_size, 50, 1, [], [])
        assert blocks == sum(os.lstat(tmp_path / n).st_blocks for n in os.listdir(tmp_path))
        assert subdirs == [("sub", sub.st_dev, sub.st_ino)]
        assert newest == max(os.lstat(tmp_path / n).st_mtime for n in os.listdir(tmp_path))
    finally:
        os.close(fd)


@needs_counter
def test_sums_beyond_two_to_the_63_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sparse files of tmpfs's largest size: their sizes add up past a signed 64-bit sum, as
    du's and Python's integers do not mind."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("needs /dev/shm (tmpfs) for files of 2^63 - 1 bytes")
    folder = Path(tempfile.mkdtemp(prefix="native-huge-", dir="/dev/shm"))
    try:
        biggest = (1 << 63) - 1
        for n in range(3):
            with open(folder / f"huge{n}", "wb") as fh:
                try:
                    fh.truncate(biggest)
                except OSError as exc:
                    pytest.skip(f"this tmpfs refuses a file of 2^63 - 1 bytes: {exc}")
        compiled, python = measure_both(folder, monkeypatch, workers=1)
        assert compiled == python
        assert compiled.apparent_bytes == 3 * biggest + os.lstat(folder).st_size
    finally:
        shutil.rmtree(folder)


@needs_counter
def test_a_module_built_from_another_version_of_the_source_is_not_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale build in a source tree (an editable install not redone after a pull) could
    return another shape: the seam refuses it and the walk takes the Python loop."""
    from cachedoctor.fs import _native

    monkeypatch.setattr(_native, "ABI", posix.NATIVE_ABI + 1)
    assert seam.native().folder_counter() is None
