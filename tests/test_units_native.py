"""The compiled per-folder listing (`list_folder` of cachedoctor/fs/_native.c) against the
Python loop of the unit listing it replaces: the same entries (every field, in the same order),
the same folders' children, kept entries and errors, on every kind of entry, names that are not
UTF-8, a Hugging Face hub, unreadable entries and long link targets, in one process and forked;
and the raw function's own contract."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cachedoctor.cacheunits import list_tree, survey
from cachedoctor.cacheunits.hfhub import HfHub
from cachedoctor.cacheunits.tree import Entry, Tree, read_text
from cachedoctor.fs import posix, seam
from cachedoctor.profiles.model import HfHubUnits
from cachedoctor.safedelete import Rules
from tests.conftest import IS_LINUX, IS_ROOT
from tests.layouts import commit_of, make_repo
from tests.test_walker import as_nobody
from tests.test_walker_native import (  # noqa: F401 - every_kind: the shared fixture
    every_kind,
    unreadable_errors,
    unreadable_tree,
)

LISTER = seam.native().folder_lister() if IS_LINUX else None
pytestmark = pytest.mark.skipif(LISTER is None, reason="the compiled loop is not built here "
                                "(tests/test_walker_native.py::test_compiled_loop_is_built)")


def python_loop(monkeypatch: pytest.MonkeyPatch, root: Path | str, **options: Any) -> Tree:
    with monkeypatch.context() as patch:
        patch.setattr(posix.LinuxOps, "folder_lister", lambda self: None)
        return list_tree(str(root), **options)


def picture(tree: Tree) -> tuple[object, ...]:
    """Everything a listing holds, in order (entries compare field by field)."""
    return (list(tree.entries.items()), {rel: list(es) for rel, es in tree.children.items()},
            sorted(tree.kept), tree.errors, sorted(tree.contents.items()))


def both(monkeypatch: pytest.MonkeyPatch, root: Path | str, **options: Any) -> Tree:
    """The compiled listing, checked equal to the Python loop's. Listed once before: the
    first listing of a new folder or readlink of a new link moves its atime (relatime)."""
    list_tree(str(root), **options)
    compiled = list_tree(str(root), **options)
    assert picture(compiled) == picture(python_loop(monkeypatch, root, **options))
    return compiled


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Path]:
    """A hub with two repos, a detached revision, a nested snapshot folder and a PR ref."""
    root = tmp_path / "hub"
    root.mkdir()
    a, b = commit_of("a"), commit_of("b")
    for n in range(2):
        make_repo(root, f"org/m{n}", {a: {"w.bin": b"w" * (5000 + n), "sub/c.json": b"{}" * 90},
                                      b: {"w.bin": b"v" * 3000}},
                  {"main": a, "refs/pr/1": a} if n else {"main": a})
    yield root


@pytest.mark.parametrize("workers", [1, 2])
def test_every_kind_is_listed_as_the_python_loop_lists_it(
        every_kind: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    tree = both(monkeypatch, every_kind, workers=workers)
    assert len(tree.entries) > 10_000 and tree.errors == []
    odd = next(e for e in tree.entries.values() if e.rel.endswith("\udc80file"))
    assert odd.size == os.lstat(os.fsencode(str(every_kind)) + b"/caf\xe9-\xff\xfe/\x80file"
                                ).st_blocks * 512
    dangling = tree.entries["dangling"]
    assert dangling.is_link and not dangling.is_file and dangling.target == "nowhere/at/all"
    assert not tree.entries["fifo"].is_file and not tree.entries["sock"].is_dir


@pytest.mark.parametrize("workers", [1, 2])
def test_a_hub_surveys_alike(hub: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = both(monkeypatch, hub, workers=workers, reads=HfHub().reads(HfHubUnits()))
    assert sorted(tree.contents) == ["models--org--m0/refs/main", "models--org--m1/refs/main",
                                     "models--org--m1/refs/refs/pr/1"]
    compiled = survey(str(hub), [HfHubUnits()], tree=tree)
    python = survey(str(hub), [HfHubUnits()], tree=python_loop(monkeypatch, hub, workers=workers))
    assert [u.to_json() for u in compiled.units] == [u.to_json() for u in python.units]
    assert [g.to_json() for g in compiled.garbage] == [g.to_json() for g in python.garbage]
    assert len(compiled.units) == 2 and compiled.garbage  # the detached revisions


@pytest.mark.parametrize("workers", [1, 2])
def test_the_refs_read_while_listing_are_what_reading_them_later_gives(
        hub: Path, workers: int) -> None:
    """The survey reads the refs as their folders are listed (in the workers), relative to
    the folder listed: the same units as reading each one by path afterwards; a ref that is
    not a regular file, or that was replaced since it was listed, is not read."""
    later = survey(str(hub), [HfHubUnits()], tree=list_tree(str(hub), workers=workers))
    now = survey(str(hub), [HfHubUnits()])
    assert now.tree.contents and not later.tree.contents
    assert [u.to_json() for u in now.units] == [u.to_json() for u in later.units]
    refs = hub / "models--org--m0" / "refs"
    (refs / "linked").symlink_to("main")
    os.mkfifo(refs / "fifo")  # never opened: a reader would wait for a writer
    listing = list_tree(str(hub), workers=workers, reads=HfHub().reads(HfHubUnits()))
    assert sorted(listing.contents)[:1] == ["models--org--m0/refs/main"]
    assert not {"models--org--m0/refs/linked", "models--org--m0/refs/fifo"} & set(listing.contents)
    listed = listing.entries["models--org--m0/refs/main"]
    (refs / "new").write_text("0" * 40)
    os.replace(refs / "new", refs / "main")  # another inode under the listed name
    assert read_text(str(refs / "main"), listed) is None


def test_rules_take_the_python_loop(hub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule decides per name what is listed (kept entries are not even stat'ed), so a
    listing with rules stays in Python: the same listing either way."""
    rules = Rules(keep=("models--org--m0",))
    calls: list[int] = []
    real = posix.LinuxOps.folder_lister

    def counting(self: posix.LinuxOps) -> Any:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(posix.LinuxOps, "folder_lister", counting)
    tree = list_tree(str(hub), rules=rules, workers=1)
    assert calls == [] and tree.kept == {"models--org--m0"}
    assert not any(rel.startswith("models--org--m0/") for rel in tree.entries)


def test_a_long_link_target_is_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    longest = "/".join(["d" * 254] * 16)[:4095]  # PATH_MAX - 1: the longest Linux stores
    (tmp_path / "long").symlink_to(longest)
    (tmp_path / "odd").symlink_to(os.fsdecode(b"caf\xe9/\xff"))
    tree = both(monkeypatch, tmp_path, workers=1)
    assert tree.entries["long"].target == longest == os.readlink(tmp_path / "long")
    assert tree.entries["odd"].target == os.readlink(tmp_path / "odd")


@pytest.mark.skipif(not IS_ROOT, reason="drops to the nobody user, which needs root")
def test_unreadable_entries_are_reported_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    with unreadable_tree("native-list-perm-", lambda g: g.symlink_to("somewhere")) as base:

        def listings() -> list[Any]:
            list_tree(str(base), workers=1)  # atimes moved by a first listing (relatime)
            trees = [list_tree(str(base), workers=1), python_loop(monkeypatch, base, workers=1)]
            return [repr(picture(tree)) for tree in trees] + [trees[0].errors]

        compiled, python, errors = as_nobody(listings)
        assert compiled == python
        assert sorted(errors) == unreadable_errors(base)


def test_a_folder_that_cannot_be_entered_leaves_the_listing_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subfolder replaced between the listing and the open is not entered and not listed
    (the identity check of `TreeWalk._open`), whichever loop listed it."""
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_bytes(b"f")
    from cachedoctor.fs.walk import TreeWalk
    real = TreeWalk._open_listed

    def swapped(self: TreeWalk, name: str, dir_fd: int, st: Any) -> Any:
        return None if name == "b" else real(self, name, dir_fd, st)

    monkeypatch.setattr(TreeWalk, "_open_listed", swapped)
    tree = both(monkeypatch, tmp_path, workers=1)
    assert "b" not in tree.entries and sorted(e.rel for e in tree.children[""]) == ["a", "c"]
    assert "a/f" in tree.entries and "b/f" not in tree.entries


def test_the_raw_function(tmp_path: Path) -> None:
    """Its contract: entries in listing order made by the given callable, the subfolders
    among them, failures by errno; the descriptor's offset left at the start; errors raised
    as os.listdir(fd) raises them."""
    assert LISTER is not None
    for n in range(40):
        (tmp_path / f"f{n}").write_bytes(b"z" * n)
    (tmp_path / "sub").mkdir()
    (tmp_path / "ln").symlink_to("f1")
    list_tree(str(tmp_path))  # the first readlink of a new link moves its atime (relatime)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        entries, subdirs, failed = LISTER(fd, "p/", Entry, 512)
        assert [e.rel for e in entries] == [f"p/{n}" for n in os.listdir(fd)]
        assert LISTER(fd, "p/", Entry, 512)[0] == entries  # from the start again
        assert subdirs == [("sub", next(e for e in entries if e.rel == "p/sub"))]
        assert failed == []
        link = next(e for e in entries if e.rel == "p/ln")
        st = os.lstat(tmp_path / "ln")
        assert link == Entry("p/ln", False, True, False, st.st_blocks * 512, st.st_atime,
                             st.st_mtime, (st.st_dev, st.st_ino), st.st_nlink, "f1")
        made: list[tuple[Any, ...]] = []
        LISTER(fd, "", lambda *fields: made.append(fields), 1)
        assert sorted(f[0] for f in made) == sorted(os.listdir(fd))
        with pytest.raises(ZeroDivisionError):  # the callable's failure comes through
            LISTER(fd, "", lambda *fields: 1 / 0, 512)
        with pytest.raises(TypeError):
            LISTER(fd, "", None, 512)  # type: ignore[arg-type]
        big = 1 << 61  # st_blocks * block_unit past 64 bits: as Python's ints multiply
        assert {e.rel: e.size for e in LISTER(fd, "", Entry, big)[0]} == {
            n: os.lstat(tmp_path / n).st_blocks * big for n in os.listdir(fd)}
        with pytest.raises(OverflowError):
            LISTER(fd, "", Entry, -1)
    finally:
        os.close(fd)
    file_fd = os.open(tmp_path / "f1", os.O_RDONLY)
    try:
        with pytest.raises(NotADirectoryError):
            LISTER(file_fd, "", Entry, 512)
    finally:
        os.close(file_fd)
    with pytest.raises(OSError) as raised:
        LISTER(file_fd, "", Entry, 512)  # closed
    assert raised.value.errno == 9  # EBADF


def test_a_module_built_from_another_version_of_the_source_is_not_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.fs import _native

    monkeypatch.setattr(_native, "ABI", posix.NATIVE_ABI + 1)
    assert seam.native().folder_lister() is None
