"""The fd-relative deleter against real files, links, locks and mounts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cachedoctor.safedelete import FileInfo, Rules, clean_tree, is_reparse_point, walk_files
from tests.conftest import IS_WINDOWS, needs_linux, needs_symlinks, trash_files_dir

needs_flock = pytest.mark.skipif(IS_WINDOWS, reason="fcntl.flock is POSIX-only")


def _tree(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "deep.bin").write_bytes(b"x" * 5000)
    (root / "a" / "one.txt").write_text("1")
    (root / "top.txt").write_text("top")


def test_empties_everything_but_keeps_the_root(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    _tree(root)
    result = clean_tree(str(root))
    assert root.is_dir()
    assert list(root.iterdir()) == []
    assert result.files == 3
    assert result.dirs == 2
    assert result.bytes >= 5000
    assert not result.errors


def test_dry_run_changes_nothing_and_counts_the_same(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    _tree(root)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    planned = clean_tree(str(root), dry_run=True)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    done = clean_tree(str(root))
    assert (planned.files, planned.dirs, planned.bytes) == (done.files, done.dirs, done.bytes)


@needs_symlinks
def test_symlink_escapes_are_removed_as_links_and_targets_survive(tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "doc.txt").write_text("mine")
    outside_file = tmp_path / "lonely.txt"
    outside_file.write_text("also mine")
    root = tmp_path / "cache"
    (root / "sub").mkdir(parents=True)
    (root / "dirlink").symlink_to(outside, target_is_directory=True)
    (root / "sub" / "filelink").symlink_to(outside_file)
    (root / "sub" / "rel").symlink_to("../../precious")
    (root / "broken").symlink_to(tmp_path / "missing")
    result = clean_tree(str(root))
    assert list(root.iterdir()) == []
    assert (outside / "doc.txt").read_text() == "mine"
    assert outside_file.read_text() == "also mine"
    assert result.files == 4


def test_hard_link_to_an_outside_file_keeps_the_outside_name(tmp_path: Path) -> None:
    outside = tmp_path / "outside.dat"
    outside.write_bytes(b"data" * 1000)
    root = tmp_path / "cache"
    root.mkdir()
    os.link(outside, root / "linked.dat")
    clean_tree(str(root))
    assert not (root / "linked.dat").exists()
    assert outside.read_bytes() == b"data" * 1000
    assert os.stat(outside).st_nlink == 1


@needs_flock
def test_flock_held_files_are_skipped_and_reported(tmp_path: Path) -> None:
    import fcntl

    root = tmp_path / "cache"
    root.mkdir()
    (root / "busy.lock").write_text("in use")
    (root / "free.txt").write_text("free")
    holder = os.open(root / "busy.lock", os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        result = clean_tree(str(root))
    finally:
        os.close(holder)
    assert (root / "busy.lock").read_text() == "in use"
    assert not (root / "free.txt").exists()
    assert [(s.rel, s.reason) for s in result.skipped] == [("busy.lock", "locked")]
    # once released, the next clean takes it
    assert clean_tree(str(root)).files == 1
    assert list(root.iterdir()) == []


@needs_linux
def test_a_fifo_is_removed_without_blocking(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    os.mkfifo(root / "pipe")
    assert clean_tree(str(root)).files == 1
    assert not (root / "pipe").exists()


@pytest.mark.usefixtures("tmpfs")
def test_nested_mount_is_not_crossed(tmp_path: Path, tmpfs: Path) -> None:
    # the tmpfs fixture mounts at tmp_path/drive; make the cache the parent folder
    root = tmp_path
    (tmpfs / "on-other-fs.txt").write_text("other drive")
    (root / "local.txt").write_text("local")
    result = clean_tree(str(root))
    assert (tmpfs / "on-other-fs.txt").read_text() == "other drive"
    assert not (root / "local.txt").exists()
    assert any(s.rel == "drive" and s.reason == "other filesystem" for s in result.skipped)


@needs_symlinks
def test_root_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f").write_text("x")
    link = tmp_path / "link"
    link.symlink_to(real)
    result = clean_tree(str(link))
    assert result.errors and "link" in result.errors[0]
    assert (real / "f").exists()


def test_replaced_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    (root / "f").write_text("x")
    st = os.stat(root)
    result = clean_tree(str(root), expect=(st.st_dev, st.st_ino + 1))
    assert result.errors and "replaced" in result.errors[0]
    assert (root / "f").exists()


@needs_symlinks
def test_directory_swapped_for_a_link_during_the_walk_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("must survive")
    root = tmp_path / "cache"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "inner.txt").write_text("x")
    (root / "trigger.txt").write_text("x")
    swapped = []

    def select(info: FileInfo) -> bool:
        if not swapped:  # between listing the root and opening "dir", swap it for a link
            swapped.append(True)
            os.rename(root / "dir", root / "moved")
            (root / "dir").symlink_to(outside, target_is_directory=True)
        return True

    clean_tree(str(root), select=select)
    assert (outside / "victim.txt").read_text() == "must survive"


def test_keep_and_only_globs(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "http" / "x").mkdir(parents=True)
    (root / "http" / "x" / "blob").write_text("b")
    (root / "wheels").mkdir()
    (root / "wheels" / "w.whl").write_text("w")
    (root / "selfcheck.json").write_text("{}")
    (root / "other.txt").write_text("o")
    result = clean_tree(str(root), rules=Rules(only=("http",), keep=("selfcheck.json",)))
    assert not (root / "http").exists()
    assert (root / "wheels" / "w.whl").exists()
    assert (root / "other.txt").exists()
    assert (root / "selfcheck.json").exists()
    assert result.files == 1
    clean_tree(str(root), rules=Rules(keep=("wheels/**", "*.json")))
    assert sorted(p.name for p in root.iterdir()) == ["selfcheck.json", "wheels"]
    clean_tree(str(root), rules=Rules(exclude=frozenset({"wheels"})))
    assert (root / "wheels" / "w.whl").exists()


def test_selection_removes_only_chosen_files_and_the_folders_it_emptied(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "old").mkdir(parents=True)
    (root / "old" / "o").write_text("o")
    (root / "keep").mkdir()
    (root / "keep" / "k").write_text("k")
    (root / "empty-before").mkdir()
    result = clean_tree(str(root), select=lambda f: f.rel.startswith("old/"))
    assert not (root / "old").exists()
    assert (root / "keep" / "k").exists()
    assert (root / "empty-before").is_dir()  # a selection never removes folders it did not empty
    assert (result.files, result.dirs) == (1, 1)


def test_walk_files_reports_times_and_sizes(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    (root / "f").write_bytes(b"z" * 10000)
    os.utime(root / "f", (1_000_000, 2_000_000))
    listing = walk_files(str(root))
    (info,) = listing.removed
    assert (info.rel, info.atime, info.mtime) == ("f", 1_000_000, 2_000_000)
    assert info.size >= 10000 and info.last_used == 2_000_000
    assert (root / "f").exists()


@needs_linux
def test_trash_moves_files_to_the_xdg_trash(tmp_path: Path, isolated_home: Path) -> None:
    root = isolated_home / ".cache" / "tool"
    (root / "d").mkdir(parents=True)
    (root / "d" / "file.bin").write_text("recoverable")
    result = clean_tree(str(root), trash=True)
    assert result.files == 1 and not result.errors
    assert [p.read_text() for p in trash_files_dir().iterdir() if p.name == "file.bin"] == [
        "recoverable"
    ]
    assert list(root.iterdir()) == []


@needs_linux
def test_unreadable_directory_is_reported_not_fatal(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root reads everything: use a directory removed mid-walk instead
        root = tmp_path / "cache"
        root.mkdir()
        (root / "f").write_text("x")
        assert clean_tree(str(root)).files == 1
        return
    root = tmp_path / "cache"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "f").write_text("x")
    os.chmod(root / "locked", 0)
    try:
        result = clean_tree(str(root))
    finally:
        os.chmod(root / "locked", 0o755)
    assert result.errors


def test_windows_reparse_point_classification() -> None:
    class St:
        st_mode = 0o040755
        st_file_attributes = 0x400 | 0x10

    assert is_reparse_point(St())  # type: ignore[arg-type]
    St.st_file_attributes = 0x10
    assert not is_reparse_point(St())  # type: ignore[arg-type]
    assert not is_reparse_point(os.stat("/"))


def test_rm_rf_equivalence_on_a_real_tree(tmp_path: Path) -> None:
    """Same tree, two copies: our clean and rm -rf leave the same (empty) result."""
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        for i in range(20):
            (root / f"d{i}" / "x").mkdir(parents=True)
            (root / f"d{i}" / "x" / "f").write_text(str(i))
    clean_tree(str(a))
    subprocess.run(["rm", "-rf", *[str(p) for p in b.iterdir()]], check=True)
    assert list(a.iterdir()) == list(b.iterdir()) == []


@needs_flock
def test_parallel_top_level_walk_keeps_every_rule(tmp_path: Path) -> None:
    import fcntl

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("outside")
    hard = tmp_path / "hard.txt"
    hard.write_text("hard")
    root = tmp_path / "cache"
    for i in range(6):
        (root / f"top{i}" / "deeper").mkdir(parents=True)
        (root / f"top{i}" / "deeper" / "f").write_text(str(i))
        (root / f"top{i}" / "escape").symlink_to(outside, target_is_directory=True)
    os.link(hard, root / "top2" / "deeper" / "hard")
    (root / "top3" / "busy").write_text("busy")
    (root / "kept-dir").mkdir()
    (root / "kept-dir" / "x").write_text("x")
    holder = os.open(root / "top3" / "busy", os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        result = clean_tree(str(root), rules=Rules(keep=("kept-dir",)))
    finally:
        os.close(holder)
    assert sorted(p.name for p in root.iterdir()) == ["kept-dir", "top3"]
    assert [p.name for p in (root / "top3").iterdir()] == ["busy"]
    assert (outside / "keep.txt").read_text() == "outside" and hard.read_text() == "hard"
    assert result.files == 6 + 6 + 1  # files, links, the hard link's second name
    assert [s.reason for s in result.skipped] == ["locked"]
    assert result.dirs == 6 + 5  # every "deeper", every top but top3


@needs_linux
def test_proc_locks_prefilter_lists_a_held_flock(tmp_path: Path) -> None:
    import fcntl

    from cachedoctor.safedelete import _flocked_inodes

    f = tmp_path / "held"
    f.write_text("x")
    fd = os.open(f, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        inodes = _flocked_inodes()
        if inodes is None:
            pytest.skip("no /proc/locks here")
        assert os.stat(f).st_ino in inodes
    finally:
        os.close(fd)


# ----------------------------------------------------------------- forked workers (Linux only)


def _wide_tree(root: Path, tops: int = 3, subs: int = 12) -> int:
    """`tops` top-level folders of `subs` folders of 3 files: forces the level-by-level split."""
    n = 0
    for t in range(tops):
        for s in range(subs):
            folder = root / f"t{t}" / f"s{s:02d}"
            folder.mkdir(parents=True)
            for f in range(3):
                (folder / f"f{f}").write_bytes(b"w" * (100 * (f + 1)))
                n += 1
    return n


@needs_linux
def test_forked_workers_give_the_same_result_as_one_process(tmp_path: Path) -> None:
    results = []
    for workers in (1, 2, 3):
        root = tmp_path / f"cache{workers}"
        n = _wide_tree(root)
        planned = clean_tree(str(root), dry_run=True)
        done = clean_tree(str(root), workers=workers)
        assert list(root.iterdir()) == [] and not done.errors and not done.skipped
        assert done.files == n and done.dirs == 3 + 3 * 12
        assert (done.bytes, done.total_bytes) == (planned.bytes, planned.total_bytes)
        results.append((done.files, done.dirs, done.bytes, done.total_bytes))
    assert results[0] == results[1] == results[2]


@needs_linux
def test_forked_workers_keep_every_rule(tmp_path: Path, tmpfs: Path) -> None:
    import fcntl

    """Links, hard links across workers, flocks, keep globs and a mount, deep in shared folders."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("outside")
    root = tmp_path  # the tmpfs fixture is mounted at tmp_path/drive: a nested mount
    (tmpfs / "other.txt").write_text("other drive")
    _wide_tree(root / "c", tops=2, subs=10)
    for t in range(2):
        (root / "c" / f"t{t}" / "s03" / "escape").symlink_to(outside, target_is_directory=True)
    shared = tmp_path / "c" / "t0" / "s01" / "f0"
    for i, sub in enumerate(("t0/s05", "t1/s02", "t1/s07")):  # one inode, four names
        os.link(shared, root / "c" / sub / f"hard{i}")
    (root / "c" / "t1" / "s09" / "keep.me").write_text("kept")
    busy = root / "c" / "t1" / "s04" / "busy"
    busy.write_text("busy")
    holder = os.open(busy, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        planned = clean_tree(str(root), rules=Rules(keep=("*.me", "outside")), dry_run=True)
        done = clean_tree(str(root), rules=Rules(keep=("*.me", "outside")), workers=2)
    finally:
        os.close(holder)
    assert (outside / "keep.txt").read_text() == "outside"
    assert (tmpfs / "other.txt").read_text() == "other drive"
    assert (root / "c" / "t1" / "s09" / "keep.me").read_text() == "kept"
    assert busy.read_text() == "busy"
    left = sorted(str(p.relative_to(root)) for p in (root / "c").rglob("*"))
    assert left == [
        "c/t1",
        "c/t1/s04",
        "c/t1/s04/busy",
        "c/t1/s09",
        "c/t1/s09/keep.me",
    ]
    assert sorted((s.rel, s.reason) for s in done.skipped) == [
        ("c/t1/s04/busy", "locked"),
        ("drive", "other filesystem"),
    ]
    assert not done.errors
    # the dry run probes locks too; the shared inode counts once although workers split its names
    assert (done.files, done.bytes) == (planned.files, planned.bytes)


@needs_linux
@pytest.mark.parametrize("workers", [1, 2])
def test_bytes_are_what_is_freed_hard_links_once_or_not_at_all(
    tmp_path: Path, workers: int
) -> None:
    root = tmp_path / "cache"
    _wide_tree(root)
    inside = root / "t0" / "s00" / "f2"
    for i, sub in enumerate(("t1/s03", "t2/s11", "t2/s04")):  # all names in the cache
        os.link(inside, root / sub / f"in{i}")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"o" * 20000)
    for i, sub in enumerate(("t0/s01", "t2/s05")):  # a name stays outside: nothing is freed
        os.link(outside, root / sub / f"out{i}")
    blocks = {}
    for p in root.rglob("*"):
        st = p.lstat()
        if not p.is_dir() and st.st_ino != outside.stat().st_ino:
            blocks[st.st_ino] = st.st_blocks * 512
    planned = clean_tree(str(root), dry_run=True)
    done = clean_tree(str(root), workers=workers)
    assert planned.bytes == done.bytes == sum(blocks.values())
    assert outside.read_bytes() == b"o" * 20000 and outside.stat().st_nlink == 1


@needs_linux
def test_one_big_folder_is_split_below_it_and_removed_after(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    n = _wide_tree(root / "only", tops=1, subs=40)  # root -> only -> t0 -> 40 folders
    (root / "only" / "file-on-the-way").write_text("x")
    done = clean_tree(str(root), workers=2)
    assert list(root.iterdir()) == [] and not done.errors
    assert (done.files, done.dirs) == (n + 1, 40 + 2)


@needs_linux
def test_selection_runs_in_the_workers_and_only_emptied_folders_go(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    _wide_tree(root)
    done = clean_tree(str(root), select=lambda f: f.rel.endswith("/f0") or "t2/" in f.rel, workers=2)
    left = sorted(str(p.relative_to(root)) for p in root.rglob("f*"))
    assert left == sorted(f"t{t}/s{s:02d}/f{f}" for t in (0, 1) for s in range(12) for f in (1, 2))
    assert not (root / "t2").exists()
    assert (done.files, done.dirs) == (2 * 12 + 36, 12 + 1)


@needs_linux
def test_a_folder_swapped_for_a_link_inside_a_worker_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("must survive")
    root = tmp_path / "cache"
    _wide_tree(root)
    for t in range(3):
        for d in range(10):
            (root / f"t{t}" / "s00" / f"d{d}").mkdir()
            (root / f"t{t}" / "s00" / f"d{d}" / "inner.txt").write_text("x")
        for n in range(5):  # several triggers: one of them is listed before some folder
            (root / f"t{t}" / "s00" / f"trigger{n}").write_text("x")

    def select(info: FileInfo) -> bool:
        # runs in a worker; the folders listed after a trigger are not opened yet: swap them
        if info.rel.rsplit("/", 1)[-1].startswith("trigger"):
            folder = root / info.rel.rsplit("/", 1)[0]
            for sub in folder.iterdir():
                if sub.name.startswith("d") and not sub.is_symlink():
                    sub.rename(folder / f"moved-{sub.name}")
                    sub.symlink_to(outside, target_is_directory=True)
        return True

    done = clean_tree(str(root), select=select, workers=2)
    assert (outside / "victim.txt").read_text() == "must survive"
    changed = {s.rel for s in done.skipped if s.reason == "changed"}
    swapped = [
        f"{p.parent.relative_to(root)}/{p.name.removeprefix('moved-')}"
        for p in root.glob("t*/s00/moved-*")
    ]
    # all 15 names of a folder are in hash order; that the 5 triggers come after the 10 folders
    # in all three has a chance of (1/3003)**3
    assert swapped
    for rel in swapped:
        # listed as a folder and swapped before it was opened: reported, not entered, left;
        # swapped before it was listed: removed as the link it is; never followed either way
        assert (root / rel).is_symlink() == (rel in changed)
        moved = (root / rel).parent / f"moved-{Path(rel).name}"
        assert (moved / "inner.txt").read_text() == "x"
    assert not done.errors


@needs_linux
def test_a_dead_worker_leaves_its_folders_to_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cachedoctor import safedelete

    walk_task = safedelete._PosixWalk._walk_task
    parent_pid = os.getpid()

    def dying(self: safedelete._PosixWalk, task: object, private: bool = False) -> bool:
        removed = walk_task(self, task, private)  # type: ignore[arg-type]
        if os.getpid() != parent_pid:
            os._exit(9)  # killed after one folder, before reporting anything
        return removed

    monkeypatch.setattr(safedelete._PosixWalk, "_walk_task", dying)
    root = tmp_path / "cache"
    n = _wide_tree(root)
    done = clean_tree(str(root), workers=2)
    assert list(root.iterdir()) == [] and not done.errors and not done.skipped
    # what the dead workers removed is gone but not counted; the parent finished the rest
    assert 0 < done.files < n


@needs_linux
def test_ctrl_c_stops_and_reaps_the_workers(tmp_path: Path) -> None:
    """A real SIGINT during a forked clean: KeyboardInterrupt comes out, no worker is left."""
    script = tmp_path / "interrupt.py"
    script.write_text(
        "import os, signal, sys\n"
        "from cachedoctor.safedelete import clean_tree\n"
        "root = sys.argv[1]\n"
        "for d in range(100):\n"
        "    os.makedirs(f'{root}/t{d % 20}/d{d}')\n"
        "    for f in range(100):\n"
        "        open(f'{root}/t{d % 20}/d{d}/f{f}', 'w').close()\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.03)\n"
        "signal.signal(signal.SIGALRM, lambda *a: os.kill(os.getpid(), signal.SIGINT))\n"
        "try:\n"
        "    clean_tree(root, workers=2)\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
        "try:\n"
        "    os.waitpid(-1, os.WNOHANG)\n"
        "    print('worker left')\n"
        "except ChildProcessError:\n"
        "    print('no worker left')\n"
    )
    root = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["interrupted", "no", "worker", "left"]
    # what is left is consistent: the next clean finishes the job
    assert not clean_tree(str(root)).errors and list(root.iterdir()) == []
