"""The units listing shared among forked workers is the listing one process makes: the same
entries in the same order, the same folders' children, the same kept entries and errors, also
when a deferred folder changes before a worker enters it or a worker dies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cachedoctor.cacheunits import list_tree
from cachedoctor.cacheunits.tree import Tree
from cachedoctor.fs.walk import TreeWalk
from cachedoctor.safedelete import Rules
from tests.conftest import choose_loop, kill_the_first_worker, needs_linux

pytestmark = needs_linux


@pytest.fixture(autouse=True, params=["compiled", "python"])
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The per-folder loop of the listings (tests/test_units_native.py holds them equal)."""
    return choose_loop(request, monkeypatch, "folder_lister")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """Forty folders of files, nested folders, links (inside, outside, dangling), hard
    links, a kept folder and an empty one."""
    root = tmp_path / "cache"
    for n in range(40):
        folder = root / f"d{n:02d}" / "sub" / "deeper"
        folder.mkdir(parents=True)
        for f in range(n % 7):
            (folder.parent / f"f{f}.bin").write_bytes(b"x" * (f * 1000))
        (folder / "leaf").write_text(str(n))
        (folder.parent / "link").symlink_to("../../d00/sub/f1.bin" if n else "/etc/hostname")
        (folder / "dangling").symlink_to("nowhere")
    os.link(root / "d05" / "sub" / "f1.bin", root / "d30" / "hard.bin")
    (root / "empty").mkdir()
    (root / "keep-me").mkdir()
    (root / "keep-me" / "x").write_text("kept")
    list_tree(str(root), workers=1)  # reading a folder the first time moves its atime (relatime)
    return root


def snapshot(tree: Tree) -> tuple[object, ...]:
    children = {rel: [e.rel for e in entries] for rel, entries in tree.children.items()}
    return list(tree.entries.items()), children, sorted(tree.kept), tree.errors


@pytest.mark.parametrize("rules", [Rules(), Rules(keep=("keep-me",)),
                                   Rules(only=("d1*/sub/*.bin",))])
def test_forked_listing_equals_one_process(cache: Path, rules: Rules) -> None:
    alone = list_tree(str(cache), rules=rules, workers=1)
    shared = list_tree(str(cache), rules=rules, workers=2)
    assert len(alone.entries) > 150 and (alone.kept or (not rules.keep and not rules.only))
    assert snapshot(shared) == snapshot(alone)
    assert shared.total() == alone.total()


def test_a_folder_replaced_before_a_worker_enters_it_is_left_out(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = TreeWalk._open_listed

    def replaced(self: TreeWalk, name: str, dir_fd: int, st: os.stat_result):  # type: ignore[no-untyped-def]
        gone = name == "d07" or (name == "sub" and st.st_ino % 2 == 1)
        return None if gone else real(self, name, dir_fd, st)

    monkeypatch.setattr(TreeWalk, "_open_listed", replaced)  # forked workers inherit it
    alone = list_tree(str(cache), workers=1)
    shared = list_tree(str(cache), workers=2)
    assert snapshot(shared) == snapshot(alone)
    assert any(rel.endswith("/sub") for rel in alone.entries)  # some were entered...
    assert len({rel.split("/")[0] for rel in alone.entries if rel.endswith("/sub")}) < 40


def test_a_dying_worker_leaves_its_folders_to_the_parent(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "one-worker-died"
    kill_the_first_worker(monkeypatch, marker)
    shared = list_tree(str(cache), workers=2)
    assert marker.exists()
    assert snapshot(shared) == snapshot(list_tree(str(cache), workers=1))


def test_a_small_tree_is_listed_in_this_process(cache: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("forked for a small tree")

    monkeypatch.setattr(TreeWalk, "_share", no_fork)
    assert len(list_tree(str(cache)).entries) > 200  # workers=None: by size


LIMITED = """
import resource, sys
import cachedoctor.cacheunits.tree as tree
tree.worker_count = lambda requested, ops: 2  # as on a 2-CPU machine, whatever this one has
soft, hard = int(sys.argv[2]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard if sys.argv[3] == "hard" else soft))
listing = tree.list_tree(sys.argv[1])
print(len(listing.entries), len(listing.errors))
"""


@pytest.mark.parametrize(("soft", "hard"), [(256, "soft"), (1024, "hard")])
def test_the_opened_top_leaves_descriptors_for_the_walk(tmp_path: Path, soft: int,
                                                        hard: str) -> None:
    """The parent opens the top breadth first and holds it open while the rest is walked: it
    takes at most half the descriptors free (a soft limit of 256 is macOS's default), and a
    deep chain below still gets the soft limit raised to the hard one."""
    import subprocess
    import sys

    root = tmp_path / "wide"
    for n in range(400):
        (root / f"model-{n:03d}").mkdir(parents=True)
        (root / f"model-{n:03d}" / "weights.bin").write_bytes(b"")
    deep = root / "chain"
    for _ in range(700 if hard == "hard" else 0):
        deep = deep / "d"
    deep.mkdir(parents=True, exist_ok=True)
    expected = len(list_tree(str(root), workers=1).entries)
    out = subprocess.run([sys.executable, "-c", LIMITED, str(root), str(soft), hard],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(expected), "0"], out.stderr


def test_a_name_that_is_not_utf8_does_not_cost_a_worker(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from cachedoctor.cacheunits import tree as tree_module

    root = tmp_path / "odd"
    for n in range(60):
        (root / f"d{n:02d}").mkdir(parents=True)
        os.symlink(b"\xff-target", os.fsencode(root / f"d{n:02d}") + b"/\xfe-name")
    lost: list[object] = []
    real = tree_module._Lister._task_finished

    def watched(self, task, outcome):  # type: ignore[no-untyped-def]
        if outcome is None:
            lost.append(task.rel)  # its worker died: the parent walks it again
        return real(self, task, outcome)

    monkeypatch.setattr(tree_module._Lister, "_task_finished", watched)
    list_tree(str(root), workers=1)  # the first reading moves atimes (links' too: readlink)
    alone = list_tree(str(root), workers=1)
    shared = list_tree(str(root), workers=2)
    assert lost == []
    assert snapshot(shared) == snapshot(alone)
    assert any(e.target == "\udcff-target" for e in shared.entries.values())


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="makes folders nobody (uid 65534) may read")
def test_errors_are_sorted_by_path_however_the_tree_was_listed() -> None:
    import json
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp())  # not below pytest's folder: nobody may not enter it
    try:
        base.chmod(0o755)
        for name in ("zeta", "alpha", "mid", "Beta", "alpha b"):
            (base / name / "locked").mkdir(parents=True, mode=0o755)
            (base / name / "f").write_bytes(b"")
            (base / name / "locked").chmod(0o000)
        list_tree(str(base), workers=2)  # every module the walk needs is imported as root
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child, as nobody
            try:
                os.setgid(65534)
                os.setuid(65534)
                lists = [list_tree(str(base), workers=w).errors for w in (1, 2)]
                os.write(write, json.dumps(lists).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            one, two = json.loads(pipe.read())
        os.waitpid(pid, 0)
        assert one == two == sorted(one) and len(one) == 5
        assert all("Permission denied" in error for error in one)
    finally:
        shutil.rmtree(base)
