"""The walker against GNU du as the oracle: allocated bytes == `du -sB1`, apparent bytes ==
`du -sb`, entries == `du --inodes -s`, for generated trees (hypothesis), hard links across
worker processes, symlinks, sparse files, nested mounts (with and without -x), unreadable
folders (walked as `nobody`), entries vanishing mid-walk, and failing workers. Every test runs
twice: through the compiled per-folder loop (cachedoctor/fs/_native.c) and through the Python
loop it replaces where it is not built."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cachedoctor import walker
from cachedoctor.fs import kinds
from cachedoctor.fs import walk as engine
from cachedoctor.fs.walk import TreeWalk
from cachedoctor.walker import WalkResult, measure
from tests.conftest import (
    IS_LINUX,
    IS_ROOT,
    choose_loop,
    kill_the_first_worker,
    needs_du,
    result_of,
    run_cli,
)

# Walk every tree single-process and with forced parallelism (2 workers even on tiny trees).
MODES = [1, 2]


@pytest.fixture(autouse=True, params=["compiled", "python"])
def loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The per-folder loop a test's in-process walks use (the CLI's run the compiled one)."""
    return choose_loop(request, monkeypatch, "folder_counter")


def du(path: Path | str, *flags: str) -> tuple[int, int, int]:
    """(allocated, apparent, inodes) according to GNU du."""
    def one(*extra: str) -> int:
        out = subprocess.run(["du", "-s", *flags, *extra, str(path)], capture_output=True,
                             text=True)
        return int(out.stdout.split()[0])
    return one("-B1"), one("-b"), one("--inodes")


def totals(result: WalkResult) -> tuple[int, int, int]:
    return result.allocated_bytes, result.apparent_bytes, result.inodes


def write_sparse(path: Path, size: int, data_at: int) -> None:
    with open(path, "wb") as fh:
        fh.seek(data_at)
        fh.write(b"s" * 100)
        fh.truncate(size)


def no_children_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


# --- generated trees -------------------------------------------------------------------------

tree_specs = st.fixed_dictionaries({
    "dirs": st.lists(st.integers(0, 10_000), max_size=12),  # parent picks
    "files": st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from([0, 1, 100, 4095, 4096, 4097, 70_000]),
                  st.booleans()),
        max_size=25),
    "hardlinks": st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)),
                          max_size=6),
    "symlinks": st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(["rel", "abs", "dangling", "dir"]),
                  st.integers(0, 10_000)),
        max_size=6),
})


def build(root: Path, spec: dict[str, list]) -> None:  # type: ignore[type-arg]
    folders = [root]
    for n, pick in enumerate(spec["dirs"]):
        folder = folders[pick % len(folders)] / f"d{n}"
        folder.mkdir()
        folders.append(folder)
    files: list[Path] = []
    for n, (pick, size, sparse) in enumerate(spec["files"]):
        path = folders[pick % len(folders)] / f"f{n}"
        if sparse and size:
            write_sparse(path, size * 50, size * 20)
        else:
            path.write_bytes(b"x" * size)
        files.append(path)
    for n, (pick, where) in enumerate(spec["hardlinks"]):
        if files:
            os.link(files[pick % len(files)], folders[where % len(folders)] / f"h{n}")
    for n, (where, kind, pick) in enumerate(spec["symlinks"]):
        folder = folders[where % len(folders)]
        if kind == "rel" and files:
            target = os.path.relpath(files[pick % len(files)], folder)
        elif kind == "abs" and files:
            target = str(files[pick % len(files)])
        elif kind == "dir":
            target = str(folders[pick % len(folders)])
        else:
            target = f"missing{n}/nothing"
        os.symlink(target, folder / f"l{n}")


@needs_du
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=tree_specs)
def test_generated_trees_match_du(spec: dict[str, list]) -> None:  # type: ignore[type-arg]
    root = Path(tempfile.mkdtemp(prefix="walker-hyp-"))
    try:
        tree = root / "t"
        tree.mkdir()
        build(tree, spec)
        expected = du(tree)
        for workers in MODES:
            result = measure(str(tree), workers=workers)
            assert totals(result) == expected, (workers, spec)
            assert result.errors == [] and not result.partial
        assert no_children_left()
    finally:
        shutil.rmtree(root)


# --- fixed trees -----------------------------------------------------------------------------

@pytest.fixture
def wide_tree(tmp_path: Path) -> Path:
    """12 top-level folders, 3 levels, ~600 files; hard links between different top-level
    folders (so different workers see the same inode), symlinks, sparse files."""
    root = tmp_path / "wide"
    files: list[Path] = []
    for t in range(12):
        for s in range(3):
            folder = root / f"top{t}" / f"sub{s}" / "leaf"
            folder.mkdir(parents=True)
            for f in range(16):
                path = folder / f"f{f}"
                path.write_bytes(b"y" * (f * 1000 + t))
                files.append(path)
    for n in range(0, len(files), 7):
        os.link(files[n], root / f"top{(n + 5) % 12}" / f"hl{n}")
        os.link(files[n], root / f"top{(n + 9) % 12}" / "sub1" / f"hl{n}")
    for n in range(10):
        os.symlink(files[n * 3], root / f"top{n}" / f"ln{n}")
        os.symlink("../nowhere", root / f"top{n}" / f"dangling{n}")
    write_sparse(root / "top0" / "sparse", 50 * 1024 * 1024, 10 * 1024 * 1024)
    (root / "top11" / "empty" / "deeper").mkdir(parents=True)
    return root


@needs_du
@pytest.mark.parametrize("workers", [1, 2, 3, None])
def test_wide_tree_with_cross_worker_hard_links(wide_tree: Path, workers: int | None) -> None:
    result = measure(str(wide_tree), workers=workers)
    assert totals(result) == du(wide_tree)
    assert result.dirs == int(subprocess.run(["find", str(wide_tree), "-type", "d"],
                                             capture_output=True, text=True).stdout.count("\n"))
    newest = max(os.lstat(os.path.join(d, n)).st_mtime
                 for d, ds, fs in os.walk(wide_tree) for n in ds + fs)
    assert result.newest_mtime == max(newest, wide_tree.stat().st_mtime)
    assert no_children_left()


@needs_du
def test_parallel_walk_is_used_for_big_trees_and_stays_exact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "big"
    for t in range(6):
        for s in range(20):
            folder = root / f"t{t}" / f"s{s}"
            folder.mkdir(parents=True)
            for f in range(45):
                (folder / f"f{f}").write_bytes(b"z" * (f * 37))
    os.link(root / "t0" / "s0" / "f5", root / "t5" / "s19" / "again")
    calls: list[int] = []
    real = TreeWalk._share

    def spy(self, tasks):  # type: ignore[no-untyped-def]
        calls.append(min(self.workers, len(tasks)))
        return real(self, tasks)

    monkeypatch.setattr(TreeWalk, "_share", spy)
    monkeypatch.setattr(walker, "_worker_count", lambda requested, ops: 2)
    progress: list[tuple[int, int]] = []
    result = measure(str(root), on_progress=lambda n, b: progress.append((n, b)))
    assert calls == [2]
    assert totals(result) == du(root)
    assert progress and progress[-1] == (result.inodes, result.allocated_bytes)
    assert len(progress) >= 3  # the parent heard from the workers while they walked


@needs_du
def test_more_tasks_than_the_task_pipe_holds(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """12,000 folders handed out one per record = 96 KB, more than a pipe buffer: the parent
    feeds them while it reads the workers' progress, without deadlock."""
    monkeypatch.setattr(engine, "TASK_RECORDS_PER_WORKER", 10**9)
    monkeypatch.setattr(walker, "PROGRESS_EVERY", 1)
    for n in range(12_000):
        os.mkdir(tmp_path / f"d{n}")
    os.mkdir(tmp_path / "d7" / "inner")
    (tmp_path / "d7" / "inner" / "f").write_bytes(b"t" * 100)
    result = measure(str(tmp_path), workers=2)
    assert totals(result) == du(tmp_path)
    assert no_children_left()


@needs_du
def test_small_trees_stay_in_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(30):
        (tmp_path / f"d{n}").mkdir()
        (tmp_path / f"d{n}" / "f").write_text("x")
    monkeypatch.setattr(TreeWalk, "_share", lambda *a: pytest.fail("forked for a tiny tree"))
    monkeypatch.setattr(walker, "_worker_count", lambda requested, ops: 2)
    assert totals(measure(str(tmp_path))) == du(tmp_path)


@needs_du
def test_root_that_is_not_a_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"a" * 5000)
    os.symlink("file", tmp_path / "link")
    os.symlink(str(tmp_path), tmp_path / "dirlink")
    for name in ("file", "link", "dirlink"):
        assert totals(measure(str(tmp_path / name))) == du(tmp_path / name), name
    missing = measure(str(tmp_path / "missing"))
    assert missing.partial and "missing" in missing.errors[0] and missing.inodes == 0


@needs_du
@pytest.mark.parametrize("workers", MODES)
def test_trailing_slash_and_relative_path(tmp_path: Path, wide_tree: Path, workers: int,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert totals(measure(str(wide_tree) + "/", workers=workers)) == du(wide_tree)
    monkeypatch.chdir(wide_tree.parent)
    assert totals(measure("wide", workers=workers)) == du(wide_tree)


@needs_du
def test_deep_tree(tmp_path: Path) -> None:
    folder = tmp_path / "deep"
    path = folder
    for depth in range(200):
        path = path / f"level{depth}"
    path.mkdir(parents=True)
    (path / "bottom").write_bytes(b"b" * 9000)
    for workers in MODES:
        assert totals(measure(str(folder), workers=workers)) == du(folder)


def test_windows_reparse_points_are_not_descended() -> None:
    mode = 0o040777
    junction = SimpleNamespace(st_mode=mode, st_file_attributes=0x10 | 0x400)  # DIRECTORY | REPARSE
    plain_dir = SimpleNamespace(st_mode=mode, st_file_attributes=0x10)
    assert not kinds.is_real_dir(junction)
    assert kinds.is_real_dir(plain_dir)
    assert kinds.is_real_dir(os.lstat("/"))


# --- mounts ----------------------------------------------------------------------------------

@pytest.fixture
def tree_with_mount(tmp_path: Path, tmpfs: Path) -> Iterator[tuple[Path, Path]]:
    """A tree with a real tmpfs mounted two levels down, holding files and a hard link."""
    root = tmp_path / "tree"
    for name in ("a", "b", "c"):
        (root / name / "sub").mkdir(parents=True)
        (root / name / "sub" / "f").write_bytes(b"q" * 7000)
    (tmpfs / "inner").mkdir()
    (tmpfs / "inner" / "big").write_bytes(b"m" * 300_000)
    os.link(tmpfs / "inner" / "big", tmpfs / "big-again")
    mount_parent = root / "b" / "sub"
    target = mount_parent / "mnt"
    target.mkdir()
    subprocess.run(["mount", "--bind", str(tmpfs), str(target)], check=True)
    try:
        yield root, target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


@needs_du
@pytest.mark.parametrize("workers", MODES)
def test_nested_mount_crossed_like_du_and_skipped_like_du_x(
        tree_with_mount: tuple[Path, Path], workers: int) -> None:
    root, mount = tree_with_mount
    crossed = measure(str(root), workers=workers)
    assert totals(crossed) == du(root)
    skipped = measure(str(root), one_file_system=True, workers=workers)
    assert totals(skipped) == du(root, "-x")
    # du -x leaves out the mount-point folder itself, not only what is below it
    mount_root = os.lstat(mount)
    assert crossed.inodes - skipped.inodes == du(mount)[2]
    assert crossed.allocated_bytes - skipped.allocated_bytes == du(mount)[0]
    assert mount_root.st_dev != os.lstat(root).st_dev


@needs_du
def test_mount_point_as_the_root_with_one_file_system(tree_with_mount: tuple[Path, Path]) -> None:
    _, mount = tree_with_mount
    assert totals(measure(str(mount), one_file_system=True)) == du(mount, "-x")


# --- unreadable and vanishing entries --------------------------------------------------------

def as_nobody(work: Callable[[], Any]) -> Any:
    """`work()` in a forked child that runs as the nobody user (root reads everything, so
    permission checks would not apply), its JSON-able result sent back on a pipe. What the
    forked walk imports when it starts is imported here first: this interpreter lives under
    /root (0700), which nobody cannot read."""
    import marshal  # noqa: F401
    import pickle  # noqa: F401
    import select  # noqa: F401

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            with os.fdopen(write_end, "w") as out:
                json.dump(work(), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data
    return json.loads(data)


def measure_as_nobody(path: Path, workers: int) -> dict[str, object]:
    def work() -> dict[str, object]:
        r = measure(str(path), workers=workers)
        return {"totals": totals(r), "errors": r.errors, "partial": r.partial}

    return as_nobody(work)  # type: ignore[no-any-return]


@needs_du
@pytest.mark.skipif(not (IS_ROOT and IS_LINUX) or shutil.which("setpriv") is None,
                    reason="needs root (to drop to the nobody user) and setpriv (to run du so)")
@pytest.mark.parametrize("workers", MODES)
def test_unreadable_folders_are_listed_and_make_the_result_partial(workers: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="walker-perm-"))  # /tmp/pytest-of-root is 0700
    try:
        base.chmod(0o755)
        for name in ("open1", "open2", "locked", "listable"):
            (base / name / "inner").mkdir(parents=True)
            (base / name / "inner" / "f").write_bytes(b"p" * 5000)
        (base / "locked").chmod(0o000)  # can't be read at all
        (base / "listable").chmod(0o444)  # can be listed, entries can't be stat'ed
        got = measure_as_nobody(base, workers)
        assert got["partial"] is True
        errors = got["errors"]
        assert isinstance(errors, list)
        assert any(e.startswith(f"{base}/locked:") and "Permission denied" in e for e in errors)
        assert any(e.startswith(f"{base}/listable/inner:") for e in errors)
        assert not any("open1" in e or "open2" in e for e in errors)
        # du (as nobody too) counts the same: the locked folder itself, nothing inside it
        du_out = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "du", "-sB1",
             str(base)], capture_output=True, text=True)
        assert du_out.returncode == 1
        assert got["totals"][0] == int(du_out.stdout.split()[0])  # type: ignore[index]
    finally:
        for name in ("locked", "listable"):
            (base / name).chmod(0o755)
        shutil.rmtree(base)


def make_vanishing_tree(root: Path) -> None:
    for t in range(4):
        for n in range(40):
            (root / f"t{t}" / f"d{n}").mkdir(parents=True)
            (root / f"t{t}" / f"d{n}" / "f").write_bytes(b"v" * 3000)


FULL_TREE_ENTRIES = 1 + 4 + 4 * 40 * 2


@needs_du
def test_folders_vanishing_mid_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders deleted while queued are skipped without error (they take no space now)."""
    make_vanishing_tree(tmp_path)
    monkeypatch.setattr(walker, "PROGRESS_EVERY", 1)  # call back after every folder
    doomed = [tmp_path / f"t{t}" for t in range(4)]
    removed: list[Path] = []

    def on_progress(entries: int, blocks: int) -> None:
        if doomed and entries > 10:
            victim = doomed.pop()
            shutil.rmtree(victim)
            removed.append(victim)

    result = measure(str(tmp_path), on_progress=on_progress, workers=1)
    assert removed and not result.partial, result.errors
    assert 1 <= result.inodes < FULL_TREE_ENTRIES


@needs_du
def test_folders_vanishing_before_a_worker_gets_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_vanishing_tree(tmp_path)
    real = TreeWalk._share
    removed: list[str] = []

    def delete_some_tasks_first(self, tasks):  # type: ignore[no-untyped-def]
        for task in tasks[::2]:
            shutil.rmtree(self.path_of(task.rel))
            removed.append(task.rel)
        return real(self, tasks)

    monkeypatch.setattr(TreeWalk, "_share", delete_some_tasks_first)
    result = measure(str(tmp_path), workers=2)
    assert len(removed) >= 2 and not result.partial, result.errors
    assert result.inodes < FULL_TREE_ENTRIES
    assert no_children_left()


@needs_du
def test_files_vanishing_while_a_folder_is_read(tmp_path: Path) -> None:
    """A thread deletes and recreates files while the folder is walked again and again."""
    folder = tmp_path / "churn"
    folder.mkdir()
    names = [folder / f"f{n}" for n in range(3000)]
    for path in names:
        path.write_bytes(b"")
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for path in names[::3]:
                path.unlink(missing_ok=True)
            for path in names[::3]:
                path.write_bytes(b"")

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for _ in range(20):
            result = measure(str(folder), workers=1)
            assert not result.partial, result.errors[:3]
            assert 2000 <= result.files <= 3000
    finally:
        stop.set()
        thread.join()


# --- failures and interruption in the parallel walk ------------------------------------------

@needs_du
def test_a_failing_worker_makes_the_parent_walk_its_share(
        wide_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "one-worker-died"
    kill_the_first_worker(monkeypatch, marker)
    result = measure(str(wide_tree), workers=2)
    assert marker.exists()
    assert totals(result) == du(wide_tree)
    assert no_children_left()


@needs_du
def test_interrupt_kills_and_reaps_the_workers(wide_tree: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walker, "PROGRESS_EVERY", 1)
    seen: list[int] = []

    def interrupt(entries: int, blocks: int) -> None:
        seen.append(entries)
        if len(seen) == 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        measure(str(wide_tree), on_progress=interrupt, workers=2)
    assert no_children_left()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# --- the CLI on top --------------------------------------------------------------------------

@needs_du
def test_cli_scan_path_json_matches_du(wide_tree: Path) -> None:
    proc = run_cli("scan", "--path", str(wide_tree), "--json")
    assert proc.returncode == 0, proc.stderr
    entry = result_of(proc)["entries"][0]
    assert (entry["bytes"], entry["apparent_bytes"], entry["inodes"]) == du(wide_tree)
    assert entry["partial"] is False and entry["errors"] == []


@needs_du
@pytest.mark.slow
def test_generated_big_tree_matches_du(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's tree generator at 40,000 files, default (parallel) walk vs du."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from common import TreeSpec, build_tree

    root = build_tree(tmp_path / "t", TreeSpec(files=40_000, dirs=600, hard_links=200,
                                               symlinks=200, sparse=10, max_size=8192),
                      quiet=True)
    (root / ".tree-spec.json").unlink()
    assert totals(measure(str(root))) == du(root)
