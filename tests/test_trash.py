"""`clean --trash` against the real filesystem: the freedesktop.org trash layout, other mounts,
links where the trash should be, and the race that sent files from outside a cache to the
trash while send2trash re-resolved paths.

Every test trashes into its own isolated HOME / XDG_DATA_HOME (tests/conftest.py), never into
the real user's trash: `Trasher` reads the environment when a clean starts, not at import.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest

from cachedoctor import trash as trash_mod
from cachedoctor.clean import Policy, execute_plan
from cachedoctor.safedelete import clean_tree
from cachedoctor.trash import EntryChanged, Trasher, TrashFailed, trash_path_checked
from tests.conftest import IS_LINUX, needs_root
from tests.test_clean_adversarial import plan_for

pytestmark = pytest.mark.skipif(
    not IS_LINUX, reason="the freedesktop.org layout (macOS and Windows have their own trash)"
)

DATE = re.compile(rb"^DeletionDate=(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)$")


def home_trash() -> Path:
    return Path(os.environ["XDG_DATA_HOME"]) / "Trash"


def infos(trash: Path) -> dict[bytes, dict[bytes, bytes]]:
    """info/*.trashinfo by trash name: their key=value lines (after checking the header)."""
    out: dict[bytes, dict[bytes, bytes]] = {}
    folder = os.fsencode(trash / "info")
    for name in os.listdir(folder):
        assert name.endswith(b".trashinfo"), name
        with open(os.path.join(folder, name), "rb") as fh:
            lines = fh.read().split(b"\n")
        assert lines[0] == b"[Trash Info]" and lines[-1] == b"", lines
        out[name[: -len(b".trashinfo")]] = dict(line.split(b"=", 1) for line in lines[1:-1])
    return out


def original(info: dict[bytes, bytes], topdir: bytes | None = None) -> bytes:
    path = unquote_to_bytes(info[b"Path"])
    return path if topdir is None else topdir.rstrip(b"/") + b"/" + path


def trashed(trash: Path) -> dict[bytes, bytes]:
    """Trash name -> original path (from its .trashinfo); every file has its info and back."""
    files = set(os.listdir(os.fsencode(trash / "files")))
    table = infos(trash)
    assert files == set(table), (files, set(table))
    return {name: original(info) for name, info in table.items()}


def make(path: Path | bytes, data: bytes = b"x") -> int:
    p = os.fsencode(path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as fh:
        fh.write(data)
    return os.lstat(p).st_ino


# ------------------------------------------------------------------------- the home trash


def test_the_home_trash_layout_is_the_specs(isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "tool"
    ino = make(cache / "d" / "blob.bin", b"data")
    before = time.time()
    result = clean_tree(str(cache), trash=True)
    assert (result.files, result.dirs, result.errors, result.skipped) == (1, 1, [], [])
    trash = home_trash()
    assert trash == isolated_home / ".local" / "share" / "Trash"
    for folder in (trash, trash / "files", trash / "info"):
        st = os.lstat(folder)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700, folder
    assert sorted(os.listdir(trash)) == ["files", "info"]
    moved = trash / "files" / "blob.bin"
    assert moved.read_bytes() == b"data" and os.lstat(moved).st_ino == ino  # moved, not copied
    (info,) = infos(trash).values()
    assert set(info) == {b"Path", b"DeletionDate"}
    assert original(info) == os.fsencode(os.path.realpath(cache / "d" / "blob.bin"))
    assert info[b"Path"].startswith(b"/")  # absolute: a cache is not under $XDG_DATA_HOME
    date = DATE.match(b"DeletionDate=" + info[b"DeletionDate"])
    assert date is not None
    parts = [int(g) for g in date.groups()]
    when = time.mktime((*parts, 0, 0, -1))  # type: ignore[arg-type]
    assert before - 2 <= when <= time.time() + 2  # local time, as the spec says
    assert stat.S_IMODE(os.lstat(trash / "info" / "blob.bin.trashinfo").st_mode) == 0o600
    assert list(cache.iterdir()) == []


def test_odd_names_are_url_escaped_in_the_trashinfo(isolated_home: Path) -> None:
    cache = os.fsencode(isolated_home / ".cache" / "tool")
    names = [
        b"new\nline",
        b"bad-\xff\xfe-utf8",
        b"100% sure",
        b"a#b?c&d=e",
        b"caf\xc3\xa9 \xe2\x82\xac",
        b"[Trash Info]",
        b"Path=x",
        b"tab\tand\rcr",
    ]
    for name in names:
        make(os.path.join(cache, b"sub", name), name)
    result = clean_tree(os.fsdecode(cache), trash=True)
    assert result.files == len(names) and not result.errors
    real = os.fsencode(os.path.realpath(cache))
    table = infos(home_trash())
    for name in names:
        info = table[name]  # the trash name is the original name
        assert re.fullmatch(rb"[A-Za-z0-9_.~/%-]*", info[b"Path"]), info  # nothing unescaped
        assert original(info) == real + b"/sub/" + name
        with open(os.path.join(os.fsencode(home_trash() / "files"), name), "rb") as fh:
            assert fh.read() == name


def test_same_named_files_from_two_folders_and_two_cleans_all_survive(
    isolated_home: Path,
) -> None:
    cache = isolated_home / ".cache" / "tool"
    for folder in ("a", "b"):
        make(cache / folder / "index.js", folder.encode())
        make(cache / folder / ".hidden", folder.encode())
        make(cache / folder / "noext", folder.encode())
    assert clean_tree(str(cache), trash=True).files == 6
    make(cache / "c" / "index.js", b"c")  # a second clean, a new process's first try: taken
    assert clean_tree(str(cache), trash=True).files == 1
    table = trashed(home_trash())
    assert len(table) == 7
    files = home_trash() / "files"
    for name, path in table.items():
        folder = os.path.basename(os.path.dirname(path))
        assert (files / os.fsdecode(name)).read_bytes() == folder  # each info names its file
    names = sorted(os.fsdecode(n) for n in table)
    assert names[:3] == [".hidden", ".hidden.2", "index.2.js"]
    assert {"index.js", "index.3.js", "noext", "noext.2"} <= set(names)


def test_a_name_too_long_for_its_trashinfo_gets_a_shorter_trash_name(isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "tool"
    name = "x" + "é" * 122 + ".tar.gz"  # 252 bytes: fits a name, not name + ".trashinfo"
    assert len(name.encode()) == 252
    make(cache / name, b"long")
    make(cache / "sub" / name, b"long2")
    result = clean_tree(str(cache), trash=True)
    assert result.files == 2 and not result.errors, result.errors
    table = trashed(home_trash())
    for trash_name, path in table.items():
        assert len(trash_name) + len(b".trashinfo") <= 255
        trash_name.decode("utf-8")  # not cut inside a character
        assert path.endswith(name.encode())  # Path= keeps the whole original name


def test_a_file_in_files_without_its_trashinfo_is_never_overwritten(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = home_trash() / "files"
    make(files / "x.txt", b"orphan")
    (home_trash() / "info").mkdir()
    cache = isolated_home / ".cache" / "tool"
    make(cache / "x.txt", b"new")
    assert clean_tree(str(cache), trash=True).files == 1
    assert (files / "x.txt").read_bytes() == b"orphan"
    assert (files / "x.2.txt").read_bytes() == b"new"
    assert sorted(infos(home_trash())) == [b"x.2.txt"]  # the failed reservation was removed
    # the same without renameat2(RENAME_NOREPLACE) (a filesystem that lacks it)
    monkeypatch.setattr(trash_mod, "_rename_noreplace", lambda *a: False)
    make(cache / "x.txt", b"newer")
    assert clean_tree(str(cache), trash=True).files == 1
    assert (files / "x.txt").read_bytes() == b"orphan"
    assert sorted(infos(home_trash())) == [b"x.2.txt", b"x.3.txt"]


def test_a_failed_move_leaves_no_trashinfo_and_the_file_in_place(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f.bin")

    def broken(*args: object) -> bool:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(trash_mod, "_rename_noreplace", broken)
    result = clean_tree(str(cache), trash=True)
    assert result.files == 0 and result.errors == [f"{cache}/f.bin: Input/output error"]
    assert (cache / "f.bin").exists() and infos(home_trash()) == {}
    def full(*args: object) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trash_mod, "_rename_noreplace", full)
    result = clean_tree(str(cache), trash=True)
    assert "cannot move into" in result.errors[0] and "No space left" in result.errors[0]
    assert (cache / "f.bin").exists() and infos(home_trash()) == {}


def test_hard_links_and_symlinks_keep_their_counts(tmp_path: Path, isolated_home: Path) -> None:
    cache = isolated_home / ".cache" / "tool"
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"o" * 9000)
    inside = cache / "a" / "inside.bin"
    make(inside, b"i" * 9000)
    os.link(inside, cache / "b-inside-again")
    os.link(outside, cache / "to-outside")
    (cache / "link").symlink_to(outside)
    planned = clean_tree(str(cache), dry_run=True)
    done = clean_tree(str(cache), trash=True)
    assert (done.files, done.bytes, done.dirs) == (planned.files, planned.bytes, planned.dirs)
    assert done.files == 4 and not done.errors and not done.skipped
    assert outside.read_bytes() == b"o" * 9000
    files = home_trash() / "files"
    assert (files / "link").is_symlink() and os.readlink(files / "link") == str(outside)
    assert os.stat(outside).st_nlink == 2  # the trashed name is the other one


def test_a_trashed_clean_is_counted_in_the_history(tmp_path: Path, isolated_home: Path) -> None:
    from cachedoctor import history

    cache = isolated_home / ".cache" / "hostile"
    for i in range(5):
        make(cache / "sub" / f"f{i}", b"z" * 5000)
    plan = plan_for(
        tmp_path, isolated_home, "~/.cache/hostile", policy=Policy(explicit=True, trash=True)
    )
    result = execute_plan(plan)
    (r,) = result.results
    assert (r.status, r.files) == ("done", 5) and r.bytes >= 25000
    (change,) = history.changes(kind="clean")
    assert change.after["files"] == 5 and change.after["bytes"] == r.bytes
    assert change.after["trash"] is True and "to the trash" in change.summary
    assert len(trashed(home_trash())) == 5


def test_two_processes_trashing_the_same_names_keep_every_file(
    tmp_path: Path, isolated_home: Path
) -> None:
    """The .trashinfo O_EXCL reservation replaces the old global trash lock."""
    caches = [isolated_home / ".cache" / f"tool{n}" for n in range(2)]
    for n, cache in enumerate(caches):
        for top in "ab":
            for i in range(60):
                make(cache / top / f"d{i}" / "same.bin", f"{n}{top}{i}".encode())
    code = (
        "import sys\nfrom cachedoctor.safedelete import clean_tree\n"
        "r = clean_tree(sys.argv[1], trash=True)\nprint(r.files, len(r.errors))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(c)], stdout=subprocess.PIPE, text=True)
        for c in caches
    ]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert outs == [["120", "0"], ["120", "0"]]
    table = trashed(home_trash())
    assert len(table) == 240
    files = home_trash() / "files"
    for name, path in table.items():
        p = Path(os.fsdecode(path))  # .../tool<n>/<top>/d<i>/same.bin
        want = f"{p.parts[-4][-1]}{p.parts[-3]}{p.parts[-2][1:]}".encode()
        assert (files / os.fsdecode(name)).read_bytes() == want


# --------------------------------------------------------------- links in the trash's place


@pytest.mark.parametrize("where", ["Trash", "Trash/files", "Trash/info"])
def test_a_symlinked_trash_folder_is_refused_not_followed(
    tmp_path: Path, isolated_home: Path, where: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data = Path(os.environ["XDG_DATA_HOME"])
    if where != "Trash":
        (data / "Trash").mkdir(parents=True)
    else:
        data.mkdir(parents=True)
    (data / where).symlink_to(elsewhere)
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f1", b"1")
    make(cache / "sub" / "f2", b"2")
    result = clean_tree(str(cache), trash=True)
    assert result.files == 0 and not result.errors
    assert sorted((s.rel, s.reason) for s in result.skipped) == [
        ("f1", "no trash"),
        ("sub/f2", "no trash"),
    ]
    assert "symbolic link" in result.skipped[0].detail and where in result.skipped[0].detail
    assert (cache / "f1").read_bytes() == b"1" and (cache / "sub" / "f2").read_bytes() == b"2"
    assert list(elsewhere.iterdir()) == []
    assert (data / where).is_symlink()


def test_a_home_trash_linked_to_another_filesystem_is_refused_too(
    tmpfs: Path, isolated_home: Path
) -> None:
    """Not taken for "another filesystem's file" either: the link is seen, the file stays."""
    data = Path(os.environ["XDG_DATA_HOME"])
    data.mkdir(parents=True)
    (tmpfs / "Trash").mkdir()
    (data / "Trash").symlink_to(tmpfs / "Trash")
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f")
    (skip,) = clean_tree(str(cache), trash=True).skipped
    assert skip.reason == "no trash" and "symbolic link" in skip.detail
    assert (cache / "f").exists() and list((tmpfs / "Trash").iterdir()) == []


def test_a_symlinked_xdg_data_home_is_the_users_setting_and_is_followed(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = isolated_home / "data-elsewhere"
    real.mkdir()
    (isolated_home / "data-link").symlink_to(real)
    monkeypatch.setenv("XDG_DATA_HOME", str(isolated_home / "data-link"))
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f")
    assert clean_tree(str(cache), trash=True).files == 1
    assert (real / "Trash" / "files" / "f").exists()


def test_a_relative_xdg_data_home_is_ignored(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", "relative/share")
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f")
    assert clean_tree(str(cache), trash=True).files == 1
    assert (isolated_home / ".local" / "share" / "Trash" / "files" / "f").exists()
    assert not (tmp_path / "relative").exists()


@needs_root
def test_a_trash_folder_of_another_user_is_refused(isolated_home: Path) -> None:
    trash = home_trash()
    (trash / "files").mkdir(parents=True)
    (trash / "info").mkdir()
    os.chown(trash / "files", 4321, 4321)
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f")
    result = clean_tree(str(cache), trash=True)
    assert [(s.reason, "uid 4321" in s.detail) for s in result.skipped] == [("no trash", True)]
    assert (cache / "f").exists() and list((trash / "files").iterdir()) == []


# ---------------------------------------------------------------- other filesystems (tmpfs)


def _tmpfs_cache(tmpfs: Path) -> tuple[Path, int]:
    cache = tmpfs / "cache"
    ino = make(cache / "sub" / "f.bin", b"on the tmpfs")
    return cache, ino


def test_a_file_on_another_filesystem_goes_to_that_mounts_trash_dash_uid(
    tmpfs: Path, isolated_home: Path
) -> None:
    cache, ino = _tmpfs_cache(tmpfs)
    result = clean_tree(str(cache), trash=True)
    assert (result.files, result.errors, result.skipped) == (1, [], [])
    own = tmpfs / f".Trash-{os.geteuid()}"
    assert stat.S_IMODE(os.lstat(own).st_mode) == 0o700
    moved = own / "files" / "f.bin"
    assert os.lstat(moved).st_ino == ino and os.lstat(moved).st_dev == os.lstat(tmpfs).st_dev
    (info,) = infos(own).values()
    assert info[b"Path"] == b"cache/sub/f.bin"  # relative to the mount's top directory
    assert original(info, os.fsencode(tmpfs)) == os.fsencode(cache / "sub" / "f.bin")
    assert not home_trash().exists()  # never copied to the home trash


def test_a_sticky_dot_trash_at_the_top_is_used_per_uid(tmpfs: Path, isolated_home: Path) -> None:
    (tmpfs / ".Trash").mkdir()
    os.chmod(tmpfs / ".Trash", 0o1777)
    cache, ino = _tmpfs_cache(tmpfs)
    assert clean_tree(str(cache), trash=True).files == 1
    mine = tmpfs / ".Trash" / str(os.geteuid())
    assert stat.S_IMODE(os.lstat(mine).st_mode) == 0o700
    assert os.lstat(mine / "files" / "f.bin").st_ino == ino
    assert [i[b"Path"] for i in infos(mine).values()] == [b"cache/sub/f.bin"]
    assert not (tmpfs / f".Trash-{os.geteuid()}").exists()


@pytest.mark.parametrize("kind", ["not sticky", "a link"])
def test_a_dot_trash_that_fails_the_checks_is_not_used(
    tmp_path: Path, tmpfs: Path, isolated_home: Path, kind: str
) -> None:
    decoy = tmpfs / "decoy"
    decoy.mkdir()
    os.chmod(decoy, 0o1777)
    if kind == "a link":
        (tmpfs / ".Trash").symlink_to(decoy)  # a sticky folder, but through a link
    else:
        (tmpfs / ".Trash").mkdir()
        os.chmod(tmpfs / ".Trash", 0o777)
    cache, _ = _tmpfs_cache(tmpfs)
    assert clean_tree(str(cache), trash=True).files == 1
    assert (tmpfs / f".Trash-{os.geteuid()}" / "files" / "f.bin").exists()
    assert list(decoy.iterdir()) == []
    if kind != "a link":
        assert list((tmpfs / ".Trash").iterdir()) == []


@pytest.mark.parametrize("problem", ["a file", "a link", "another owner"])
def test_a_file_whose_filesystem_has_no_usable_trash_is_refused_not_copied(
    tmp_path: Path, tmpfs: Path, isolated_home: Path, problem: str
) -> None:
    own = tmpfs / f".Trash-{os.geteuid()}"
    if problem == "a file":
        own.write_text("not a folder")
    elif problem == "a link":
        (tmp_path / "target").mkdir()
        own.symlink_to(tmp_path / "target")
    else:
        own.mkdir()
        os.chown(own, 4321, 4321)
    cache, ino = _tmpfs_cache(tmpfs)
    result = clean_tree(str(cache), trash=True)
    assert result.files == 0 and not result.errors
    (skip,) = result.skipped
    assert (skip.rel, skip.reason) == ("sub/f.bin", "no trash")
    assert str(tmpfs) in skip.detail and "not copied" in skip.detail
    assert os.lstat(cache / "sub" / "f.bin").st_ino == ino  # still there, untouched
    assert not home_trash().exists()
    if problem == "a link":
        assert list((tmp_path / "target").iterdir()) == []


def test_a_cache_that_is_a_mount_keeps_its_mounts_trash_out_of_the_clean(
    tmpfs: Path, isolated_home: Path
) -> None:
    """The cache is the top of its own mount: its .Trash-$uid lands inside the cache, and the
    next clean must not trash the trash (nor count it)."""
    ino = make(tmpfs / "one.bin", b"first")
    first = clean_tree(str(tmpfs), trash=True)
    assert (first.files, first.errors, first.skipped) == (1, [], [])
    own = tmpfs / f".Trash-{os.geteuid()}"
    assert os.lstat(own / "files" / "one.bin").st_ino == ino
    assert [i[b"Path"] for i in infos(own).values()] == [b"one.bin"]
    make(tmpfs / "sub" / "two.bin", b"second")
    second = clean_tree(str(tmpfs), trash=True)
    assert (second.files, second.kept, second.errors) == (1, 1, [])
    assert sorted(os.listdir(tmpfs)) == [own.name]
    assert sorted(i[b"Path"] for i in infos(own).values()) == [b"one.bin", b"sub/two.bin"]
    assert (own / "files" / "one.bin").read_bytes() == b"first"


@needs_root
def test_a_bind_mount_of_the_home_filesystem_uses_its_own_top_directory(
    tmp_path: Path, isolated_home: Path
) -> None:
    """Same st_dev as the home trash, but another mount: rename says EXDEV; the entry goes to
    the trash at the top of its own mount instead of being copied."""
    real = tmp_path / "real"
    ino = make(real / "cache" / "f.bin", b"bound")
    mount = tmp_path / "bound"
    mount.mkdir()
    subprocess.run(["mount", "--bind", str(real), str(mount)], check=True)
    try:
        assert os.stat(mount).st_dev == os.stat(isolated_home).st_dev  # the premise
        result = clean_tree(str(mount / "cache"), trash=True)
        assert (result.files, result.errors, result.skipped) == (1, [], [])
        own = mount / f".Trash-{os.geteuid()}"
        assert os.lstat(own / "files" / "f.bin").st_ino == ino
        assert [i[b"Path"] for i in infos(own).values()] == [b"cache/f.bin"]
        assert not (home_trash() / "files" / "f.bin").exists()
        assert infos(home_trash()) == {}  # the home reservation was taken back
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@needs_root
def test_a_bind_mounted_file_is_not_trashed_through(tmp_path: Path, isolated_home: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    cache = isolated_home / ".cache" / "tool"
    make(cache / "over.txt", b"placeholder")
    subprocess.run(["mount", "--bind", str(outside), str(cache / "over.txt")], check=True)
    try:
        result = clean_tree(str(cache), trash=True)
        assert result.files == 0 and len(result.errors) == 1  # EBUSY: a mount point
        assert (cache / "over.txt").read_text() == "keep me"
    finally:
        subprocess.run(["umount", "-l", str(cache / "over.txt")], check=False)
    assert outside.read_text() == "keep me"
    assert infos(home_trash()) == {}


# ---------------------------------------------------------------------------- the checks


def test_an_entry_replaced_after_listing_is_not_trashed(isolated_home: Path) -> None:
    folder = isolated_home / ".cache" / "tool"
    make(folder / "f", b"listed")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        st = os.lstat("f", dir_fd=fd)
        (folder / "f").rename(folder / "kept")  # kept alive: its inode number is not reused
        make(folder / "f", b"another file")
        with Trasher() as t, pytest.raises(EntryChanged):
            t.trash(fd, "f", st, str(folder / "f"))
        with Trasher() as t, pytest.raises(FileNotFoundError):
            t.trash(fd, "gone", st, str(folder / "gone"))
    finally:
        os.close(fd)
    assert (folder / "f").read_bytes() == b"another file"
    assert list((home_trash() / "files").iterdir()) == [] and infos(home_trash()) == {}


def test_an_entry_swapped_in_the_instant_before_the_rename_is_put_back(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = isolated_home / ".cache" / "tool"
    make(folder / "f", b"listed")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        st = os.lstat("f", dir_fd=fd)
        (folder / "f").rename(folder / "kept")
        (folder / "f").mkdir()  # a folder now holds the name (it passed the check: see below)
        (folder / "f" / "inner").write_bytes(b"inner")
        monkeypatch.setattr(Trasher, "_check_listed", staticmethod(lambda *a: None))
        with Trasher() as t, pytest.raises(EntryChanged, match="put back"):
            t.trash(fd, "f", st, str(folder / "f"))
    finally:
        os.close(fd)
    assert (folder / "f" / "inner").read_bytes() == b"inner"
    assert list((home_trash() / "files").iterdir()) == [] and infos(home_trash()) == {}


def test_trash_folders_are_opened_once_per_clean(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    home, top = Trasher._open_home, Trasher._open_top

    def counting_home(self: Trasher) -> object:
        opened.append("home")
        return home(self)

    def counting_top(self: Trasher, *args: object) -> object:
        opened.append("top")
        return top(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Trasher, "_open_home", counting_home)
    monkeypatch.setattr(Trasher, "_open_top", counting_top)
    cache = isolated_home / ".cache" / "tool"
    for folder in "abcd":
        for i in range(5):
            make(cache / folder / f"f{i}")
    assert clean_tree(str(cache), trash=True).files == 20
    assert opened == ["home"]  # the home filesystem: no top directory trash is even looked at


def test_the_macos_layout_without_trashinfo(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The macOS variant (~/.Trash, no .trashinfo), exercised here on Linux."""
    folder = isolated_home / "Library" / "Caches" / "tool"
    inos = [make(folder / "a.txt", b"1"), make(folder / "sub" / "a.txt", b"2")]
    with Trasher(flavor="macos") as t:
        for rel in ("a.txt", "sub/a.txt"):
            parent = os.open(folder / os.path.dirname(rel), os.O_RDONLY | os.O_DIRECTORY)
            try:
                name = os.path.basename(rel)
                t.trash(parent, name, os.lstat(name, dir_fd=parent), str(folder / rel))
            finally:
                os.close(parent)
    trash = isolated_home / ".Trash"
    assert stat.S_IMODE(os.lstat(trash).st_mode) == 0o700
    assert sorted(os.listdir(trash)) == ["a.2.txt", "a.txt"]
    assert [os.lstat(trash / n).st_ino for n in ("a.txt", "a.2.txt")] == inos


def test_the_macos_layout_on_another_volume(tmpfs: Path, isolated_home: Path) -> None:
    cache, ino = _tmpfs_cache(tmpfs)
    parent = os.open(cache / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        with Trasher(flavor="macos") as t:
            t.trash(parent, "f.bin", os.lstat("f.bin", dir_fd=parent), str(cache / "sub/f.bin"))
    finally:
        os.close(parent)
    trashes = tmpfs / ".Trashes"
    assert stat.S_IMODE(os.lstat(trashes).st_mode) == 0o1333  # d-wx-wx-wt, like the Finder's
    assert os.lstat(trashes / str(os.geteuid()) / "f.bin").st_ino == ino
    assert not (isolated_home / ".Trash").exists()


def test_windows_variant_rechecks_every_folder_on_the_path(tmp_path: Path) -> None:
    """trash_path_checked is Windows' guard; symlinks stand in for junctions here."""
    root = tmp_path / "cache"
    make(root / "a" / "b" / "f")
    outside = tmp_path / "outside"
    make(outside / "b" / "f", b"outside")

    def ident(p: Path) -> tuple[int, int]:
        st = os.lstat(p)
        return (st.st_dev, st.st_ino)

    chain = [(str(p), ident(p)) for p in (root, root / "a", root / "a" / "b")]
    sent: list[str] = []
    target = str(root / "a" / "b" / "f")
    expect = ident(root / "a" / "b" / "f")
    trash_path_checked(chain, target, expect, send=sent.append)
    assert sent == [target]
    os.rename(root / "a", tmp_path / "moved")
    (root / "a").symlink_to(outside)  # a folder of the cache is now a link
    with pytest.raises(EntryChanged):
        trash_path_checked(chain, target, expect, send=sent.append)
    assert sent == [target]


def test_trash_failures_are_errors_not_tracebacks(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trash_mod, "MAX_ATTEMPTS", 3)
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f")
    info = home_trash() / "info"
    info.mkdir(parents=True)
    for name in ("f", "f.2", "f.3"):
        make(info / f"{name}.trashinfo")
    result = clean_tree(str(cache), trash=True)
    assert result.files == 0 and "no free name" in result.errors[0]
    assert (cache / "f").exists()
    assert issubclass(TrashFailed, Exception)


# ------------------------------------------------------------------------------ the race

SWAPPER = r"""
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
exchange = getattr(libc, "renameat2", None)
state = (0, None)  # (command number, (a, b) to swap or None), replaced as one object

def read():
    global state
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\n")
        state = (state[0] + 1, None if line == b"stop" else tuple(line.split(b"\t")))
    os._exit(0)

def swap(a, b):
    if exchange is not None:  # RENAME_EXCHANGE: the name always holds a folder or a link
        return exchange(-100, a, -100, b, 2) == 0
    try:  # no renameat2: plain renames
        os.rename(a, a + b".swap"); os.rename(b, a); os.rename(a, b); os.rename(a + b".swap", a)
        return True
    except OSError:
        return False

threading.Thread(target=read, daemon=True).start()
seen = 0
while True:
    number, pair = state
    if pair is None:
        if number != seen:
            seen = number
            sys.stdout.write("stopped\n"); sys.stdout.flush()
        time.sleep(0.0005)
    elif swap(*pair) and number != seen:
        seen = number
        sys.stdout.write("swapping\n"); sys.stdout.flush()
"""


class Swapper:
    """A process that swaps two names over and over (a cache folder and a link to outside)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-c", SWAPPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def _say(self, line: bytes, answer: bytes) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == answer + b"\n"

    def start(self, a: Path, b: Path) -> None:
        self._say(os.fsencode(a) + b"\t" + os.fsencode(b), b"swapping")

    def stop(self) -> None:
        self._say(b"stop", b"stopped")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def race_trials(tmp_path: Path, home: Path, trials: int, files: int = 12) -> tuple[int, int]:
    """`trials` times: a folder of the cache swapped for a link to an outside folder (holding
    files of the same names) over and over while `clean --trash` runs. Returns (trials in
    which a file outside the cache moved, such files in all)."""
    cache = home / ".cache" / "hostile"
    cache.mkdir(parents=True, exist_ok=True)
    plan = plan_for(tmp_path, home, "~/.cache/hostile", policy=Policy(explicit=True, trash=True))
    names = [f"f{i:02d}" for i in range(files)]
    bad = moved = 0
    swapper = Swapper()
    try:
        for trial in range(trials):
            sub = cache / f"sub{trial}"
            outside = tmp_path / f"outside{trial}"
            hold = tmp_path / f"hold{trial}"
            for folder in (sub, outside, hold):
                folder.mkdir()
            (hold / sub.name).symlink_to(outside)
            inodes = {}
            for name in names:
                make(sub / name, b"cache")
                inodes[name] = make(outside / name, b"outside")
            swapper.start(sub, hold / sub.name)
            try:
                execute_plan(plan, record_history=False)
            finally:
                swapper.stop()
            gone = [
                n
                for n in names
                if not (outside / n).is_file()
                or os.lstat(outside / n).st_ino != inodes[n]
                or (outside / n).read_bytes() != b"outside"
            ]
            if gone:
                bad += 1
                moved += len(gone)
    finally:
        swapper.close()
    return bad, moved


def check_trash_after_race(home: Path) -> None:
    """Whatever went to the trash came from inside the cache: cache files, or the link itself,
    and its .trashinfo says so."""
    files = os.fsencode(home_trash() / "files")
    cache_real = os.fsencode(os.path.realpath(home / ".cache" / "hostile")) + b"/"
    table = trashed(home_trash())
    assert table
    for name, path in table.items():
        entry = os.path.join(files, name)
        if os.path.islink(entry):
            assert os.path.basename(os.readlink(entry)).startswith(b"outside")  # as a link
        else:
            with open(entry, "rb") as fh:
                assert fh.read() == b"cache", (name, path)
        assert path.startswith(cache_real), path


def test_a_folder_swapped_for_a_link_during_clean_trash_never_moves_outside_files(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trash_mod, "DURABLE", False)  # fsync plays no part in this race
    bad, moved = race_trials(tmp_path, isolated_home, trials=100)
    assert (bad, moved) == (0, 0)
    check_trash_after_race(isolated_home)


@pytest.mark.slow
def test_a_folder_swapped_for_a_link_during_clean_trash_many_trials(
    tmp_path: Path, isolated_home: Path
) -> None:
    bad, moved = race_trials(tmp_path, isolated_home, trials=1000, files=30)
    assert (bad, moved) == (0, 0)
    check_trash_after_race(isolated_home)


def test_json_of_a_refused_entry(tmp_path: Path, isolated_home: Path) -> None:
    data = Path(os.environ["XDG_DATA_HOME"])
    data.mkdir(parents=True)
    (data / "Trash").symlink_to(tmp_path)
    cache = isolated_home / ".cache" / "tool"
    make(cache / "f")
    (skip,) = clean_tree(str(cache), trash=True).skipped
    doc = json.loads(json.dumps(skip.to_json()))
    assert doc["reason"] == "no trash" and "symbolic link" in doc["detail"]

