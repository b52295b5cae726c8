"""Windows through its double (tests/doubles/windows.py): the tree layer's Windows seam and the
CLI on top of it, for what issue 10 found — junctions walked into and their targets deleted,
`DirEntry` stats without st_dev taken for other filesystems, sharing violations, read-only
files reported as "in use", MAX_PATH, volume GUID junction targets made relative."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from cachedoctor.fs import seam
from cachedoctor.relocate.copy import copy_tree, remove_tree, survey, verify_tree
from cachedoctor.safedelete import clean_tree
from cachedoctor.walker import measure
from tests.conftest import IS_LINUX

pytestmark = pytest.mark.skipif(not IS_LINUX, reason="the double runs over a Linux tree")


def uv_like_cache(root: Path, api: Any) -> Path:
    """uv's Windows cache: `archive-v0/<id>` folders and junctions into them
    (Cache::persist -> replace_symlink -> create_junction)."""
    for n in range(3):
        wheel = root / "archive-v0" / f"id{n}" / "pkg"
        wheel.mkdir(parents=True)
        (wheel / "__init__.py").write_text(f"v = {n}\n")
        (root / "archive-v0" / f"id{n}" / "METADATA").write_bytes(b"m" * 3000)
    (root / "wheels-v5").mkdir()
    for n in range(3):
        api.make_junction(root / "wheels-v5" / f"pkg-{n}", root / "archive-v0" / f"id{n}")
    os.utime(root / "wheels-v5", ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    return root


def test_the_seam_in_use_is_the_windows_one(windows_double: Any) -> None:
    assert seam.current().name == "windows" and not seam.current().listing_identity


def test_junctions_are_links_for_every_tree_operation(windows_double: Any, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "big").mkdir(parents=True)
    (outside / "big" / "data").write_bytes(b"x" * 50_000)
    cache = tmp_path / "cache"
    uv_like_cache(cache, windows_double)
    windows_double.make_junction(cache / "to-outside", outside / "big")

    walked = measure(str(cache))
    assert walked.apparent_bytes == 3 * (3000 + len("v = 0\n"))  # not the 50,000 outside
    found = survey(str(cache))
    assert found.junctions == 4 and found.symlinks == 0
    copy = tmp_path / "copy"
    copy_tree(str(cache), str(copy))
    assert windows_double.is_junction(copy / "wheels-v5" / "pkg-1")
    assert windows_double.junction_target(copy / "wheels-v5" / "pkg-1") == str(
        cache / "archive-v0" / "id1")  # absolute, as junctions must be
    assert verify_tree(str(cache), str(copy)) == []
    assert os.lstat(copy / "wheels-v5").st_mtime_ns == 1_600_000_000_000_000_000

    remove_tree(str(copy))
    done = clean_tree(str(cache))
    assert not copy.exists() and list(cache.iterdir()) == []
    assert (outside / "big" / "data").read_bytes() == b"x" * 50_000  # never entered
    assert done.files == 3 * 2 + 4 and not done.errors


def test_direntry_without_st_dev_is_not_another_filesystem(windows_double: Any,
                                                           tmp_path: Path) -> None:
    """`DirEntry.stat()` has st_dev 0 on Windows; the real volume serial comes from lstat.
    clean, quotas, the job and `scan -x` must still go below the top folder."""
    root = tmp_path / "cache"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_bytes(b"1" * 100)
    (root / "top").write_bytes(b"2" * 10)
    entry = next(iter(windows_double.scandir(str(root)).__enter__()))
    assert entry.stat().st_dev == 0  # the double behaves as documented
    assert measure(str(root), one_file_system=True).apparent_bytes == 110
    result = clean_tree(str(root))
    assert result.files == 2 and result.dirs == 2 and not result.skipped


def test_measure_counts_like_windows(windows_double: Any, tmp_path: Path) -> None:
    """No allocation in a Windows listing (allocated = apparent), hard links per name (the
    listing has no st_nlink), links as entries of size 0, never followed."""
    root = tmp_path / "t"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"z" * 1234)
    os.link(root / "d" / "f", root / "again")
    os.symlink("d/f", root / "ln")
    result = measure(str(root))
    assert (result.allocated_bytes, result.apparent_bytes) == (2468, 2468)
    assert (result.files, result.dirs) == (3, 2)


def test_sharing_violations_are_retried_then_reported_in_use(windows_double: Any,
                                                            tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    for name in ("scanned", "open", "plain"):
        (root / name).write_bytes(b"x")
    windows_double.hold(root / "scanned", attempts=3)  # Defender looks at it for a moment
    windows_double.hold(root / "open")  # a running tool keeps it open
    result = clean_tree(str(root))
    assert sorted(os.listdir(root)) == ["open"]
    assert [(s.rel, s.reason) for s in result.skipped] == [("open", "in use")]
    assert not result.errors and windows_double.violations >= 4


def test_read_only_files_are_deleted_not_in_use(windows_double: Any, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "sub").mkdir(parents=True)
    for path in (root / "ro", root / "sub" / "ro2"):
        path.write_bytes(b"r")
        path.chmod(0o444)  # FILE_ATTRIBUTE_READONLY in the double
    assert windows_double.lstat(str(root / "ro")).st_file_attributes & 0x1
    result = clean_tree(str(root))
    assert list(root.iterdir()) == [] and not result.skipped and not result.errors
    (root / "again").write_bytes(b"r")
    (root / "again").chmod(0o444)
    remove_tree(str(root))
    assert not root.exists()


def test_paths_past_max_path_go_through_extended_paths(windows_double: Any,
                                                       tmp_path: Path) -> None:
    """Win32 calls fail at 260 characters unless the path starts with \\\\?\\ (the double does
    that too); the seam switches to extended paths, so a long cache copies and is removed."""
    deep = tmp_path / "src"
    path = deep
    while len(str(path)) < 300:
        path = path / ("segment" * 3)
    path.mkdir(parents=True)
    (path / "leaf.bin").write_bytes(b"L" * 10)
    with pytest.raises(FileNotFoundError):
        windows_double.lstat(str(path / "leaf.bin"))  # as Windows would, without the prefix
    copy = tmp_path / "copy"
    copy_tree(str(deep), str(copy))
    assert verify_tree(str(deep), str(copy)) == []
    remove_tree(str(copy))
    assert not copy.exists()


def test_volume_guid_junction_targets_stay_absolute(windows_double: Any, tmp_path: Path) -> None:
    from cachedoctor.links import link_kind, link_target

    volume = tmp_path / "volume"
    (volume / "caches" / "uv").mkdir(parents=True)
    root = windows_double.add_volume("0b1c7e4e-0000-0000-0000-100000000000", volume)
    cache = tmp_path / "cache"
    cache.mkdir()
    windows_double.create_junction(root + "caches\\uv", str(cache / "j"))
    assert link_kind(str(cache / "j")) == "junction"
    assert link_target(str(cache / "j")) == root + "caches\\uv"  # not joined onto the folder
    copy_tree(str(cache), str(tmp_path / "copy"))
    assert windows_double.junction_target(tmp_path / "copy" / "j") == root + "caches\\uv"


def test_clean_trash_goes_to_the_recycle_bin_after_checking_the_path(
        windows_double: Any, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_bytes(b"t" * 10)
    result = clean_tree(str(root), trash=True)
    assert result.files == 1 and not result.errors
    assert [p.name for p in windows_double.recycle_bin().iterdir()] == ["0-f"]


def test_durable_copy_flushes_each_file_once(windows_double: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """FlushFileBuffers (os.fsync) per copied file: a volume can only be flushed as a whole by
    an administrator; hard-link duplicates are linked, not copied, so not flushed again."""
    from cachedoctor.relocate.copy import make_durable
    from tests.test_relocate_copy import build_tree

    src = tmp_path / "src"
    build_tree(src)
    regular = {(st.st_dev, st.st_ino) for p in src.rglob("*")
               if not p.is_symlink() and p.is_file() and (st := p.lstat())}
    flushed: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (flushed.append(fd), real_fsync(fd))[1])
    copy_tree(str(src), str(tmp_path / "plain"))
    assert flushed == []  # not asked to be durable
    copy_tree(str(src), str(tmp_path / "durable"), durable=True)
    assert len(flushed) == len(regular)
    assert make_durable(str(tmp_path / "durable")) == "per-file"


# --- the CLI on the Windows seam -------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cachedoctor", *args], capture_output=True,
                          text=True, env=os.environ.copy(), timeout=300)


@pytest.fixture
def uv_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> Path:
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "uvlike.yaml").write_text(textwrap.dedent("""\
        id: uvlike
        name: uv-like
        description: a cache full of junctions into itself
        locations:
          - id: cache
            paths: {linux: "~/.cache/uvlike"}
            safe_to_delete: true
            relocate: [{method: link}]
        """))
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    return isolated_home / ".cache" / "uvlike"


def test_move_and_restore_a_cache_full_of_junctions(windows_double: Any, uv_profile: Path,
                                                    tmp_path: Path) -> None:
    """Issue 10, finding 1: removing the set-aside original walked into its junctions, whose
    targets (after a link move) are the new copy. Now nothing of the copy may be lost."""
    uv_like_cache(uv_profile, windows_double)
    dest = Path("/dev/shm") / f"cachedoctor-win-{os.getpid()}"
    try:
        moved = cli("move", "uvlike", str(dest), "--yes")
        assert moved.returncode == 0, moved.stderr
        windows_double.reload()
        new = dest / "uvlike"
        for n in range(3):
            assert (new / "archive-v0" / f"id{n}" / "pkg" / "__init__.py").read_text() == f"v = {n}\n"
            assert windows_double.is_junction(new / "wheels-v5" / f"pkg-{n}")
            assert (uv_profile / "wheels-v5" / f"pkg-{n}" / "METADATA").stat().st_size == 3000
        back = cli("restore", "uvlike", "--yes")
        assert back.returncode == 0, back.stderr
        windows_double.reload()
        assert not uv_profile.is_symlink()
        assert (uv_profile / "archive-v0" / "id2" / "METADATA").read_bytes() == b"m" * 3000
        assert windows_double.is_junction(uv_profile / "wheels-v5" / "pkg-0")
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(dest)], check=False)


@pytest.mark.parametrize("where", ["same-drive", "other-drive"])
def test_a_folder_held_open_stops_the_move_and_the_same_command_finishes_later(
        windows_double: Any, uv_profile: Path, tmp_path: Path, where: str) -> None:
    """Finding 10: a final sharing violation is a clear "in use" message (no traceback), and the
    same command finishes once the other program lets go: on one drive the rename is simply
    not done; across drives the copy is kept, the journal stops before the swap, and the
    second run carries on from there."""
    uv_like_cache(uv_profile, windows_double)
    held = uv_profile / "archive-v0" / "id0" / "METADATA"
    windows_double.hold(held)
    dest = tmp_path / "dest" if where == "same-drive" else (
        Path("/dev/shm") / f"cachedoctor-held-{os.getpid()}")
    try:
        stuck = cli("move", "uvlike", str(dest), "--yes")
        assert stuck.returncode == 1, stuck.stderr
        assert "is in use" in stuck.stderr and "run the same command again" in stuck.stderr
        assert "Traceback" not in stuck.stderr
        assert held.read_bytes() == b"m" * 3000 and not uv_profile.is_symlink()
        windows_double.release(held)
        done = cli("move", "uvlike", str(dest), "--yes")
        assert done.returncode == 0, done.stderr
        assert "interrupted" in done.stdout or where == "same-drive"  # the plan says it resumes
        assert (dest / "uvlike" / "archive-v0" / "id0" / "METADATA").stat().st_size == 3000
        assert uv_profile.is_symlink()
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(dest)], check=False)


# --- the browser-policy registry: HKCU first, rights checked before anything is copied -------


class PolicyRegistryDouble:
    """HKCU and HKLM `Software\\Policies` as Windows grants them: the user writes HKCU; HKLM
    only elevated, else ERROR_ACCESS_DENIED (learn.microsoft.com, Registry Key Security and
    Access Rights: HKLM\\SOFTWARE grants KEY_WRITE to Administrators)."""

    def __init__(self, admin: bool = False) -> None:
        self.admin = admin
        self.values: dict[tuple[str, str, str], str] = {}

    def read(self, hive: str, key: str, name: str) -> str | None:
        return self.values.get((hive, key, name))

    def writable(self, hive: str, key: str) -> bool:
        return hive == "HKEY_CURRENT_USER" or self.admin

    def write(self, hive: str, key: str, name: str, data: str) -> None:
        if not self.writable(hive, key):
            exc = PermissionError(13, "Access is denied")
            exc.winerror = 5  # type: ignore[attr-defined]
            raise exc
        self.values[(hive, key, name)] = data

    def delete(self, hive: str, key: str, name: str) -> None:
        if not self.writable(hive, key):
            raise PermissionError(13, "Access is denied")
        self.values.pop((hive, key, name), None)


@pytest.fixture
def policy_registry(monkeypatch: pytest.MonkeyPatch) -> PolicyRegistryDouble:
    from cachedoctor.relocate import policy

    reg = PolicyRegistryDouble()
    policy.use_registry(reg)
    yield reg  # type: ignore[misc]
    policy.use_registry(None)


def test_policy_goes_to_hkcu_without_elevation_and_back(policy_registry: PolicyRegistryDouble) -> None:
    from cachedoctor.host import Host
    from cachedoctor.relocate import policy

    win = Host("windows", {}, "C:\\Users\\ann")
    key = r"SOFTWARE\Policies\Google\Chrome"
    policy.check_supported(win, "chrome")  # no administrator needed
    assert "for you only" in policy.describe("chrome", "DiskCacheDir", r"D:\c", win)[0]
    before = policy.read_current("chrome", "DiskCacheDir", win)
    policy.apply("chrome", "DiskCacheDir", r"D:\c", win)
    assert policy_registry.values[("HKEY_CURRENT_USER", key, "DiskCacheDir")] == r"D:\c"
    assert policy.current_value("chrome", "DiskCacheDir", win) == r"D:\c"
    policy.revert("chrome", "DiskCacheDir", before, win)
    assert ("HKEY_CURRENT_USER", key, "DiskCacheDir") not in policy_registry.values


def test_a_machine_policy_needs_an_administrator_and_says_it_applies_to_everyone(
        policy_registry: PolicyRegistryDouble) -> None:
    from cachedoctor.errors import RefusedError
    from cachedoctor.host import Host
    from cachedoctor.relocate import policy

    win = Host("windows", {}, "C:\\Users\\ann")
    key = r"SOFTWARE\Policies\Microsoft\Edge"
    policy_registry.values[("HKEY_LOCAL_MACHINE", key, "DiskCacheDir")] = r"E:\old"
    with pytest.raises(RefusedError) as refused:
        policy.check_supported(win, "edge")  # before anything is copied
    assert "every user" in str(refused.value) and "administrator" in str(refused.value)
    with pytest.raises(RefusedError):  # even if asked anyway: a message, not a traceback
        policy.apply("edge", "DiskCacheDir", r"D:\e", win)
    policy_registry.admin = True
    policy.check_supported(win, "edge")
    assert "every user of this computer" in policy.describe("edge", "DiskCacheDir", r"D:\e", win)[0]
    before = policy.read_current("edge", "DiskCacheDir", win)
    policy.apply("edge", "DiskCacheDir", r"D:\e", win)
    policy.revert("edge", "DiskCacheDir", before, win)
    assert policy_registry.values[("HKEY_LOCAL_MACHINE", key, "DiskCacheDir")] == r"E:\old"


def test_a_revision_of_links_is_removed_whole(windows_double: Any, tmp_path: Path) -> None:
    """A Hugging Face snapshot is a folder of links: the unit listing and the deleter's
    selection must see the same identity for a link (a listing has st_ino 0 on Windows), or
    the planned links are never removed and a revision is left half there."""
    from cachedoctor.cacheunits.base import names_step
    from cachedoctor.cacheunits.tree import list_tree
    from cachedoctor.clean.steps import run_steps

    root = tmp_path / "hub" / "models--x"
    snap = root / "snapshots" / "abc"
    (root / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    (root / "blobs" / "b1").write_text("weights")
    os.symlink("../../blobs/b1", snap / "model.bin")
    (snap / "plain.txt").write_text("x")
    tree = list_tree(str(root))
    assert all(e.ino for e in tree.entries.values())  # real identities, links included
    done = run_steps(str(root), tree, names_step(tree, "snapshots", ["snapshots/abc"]),
                     trash=False)
    assert done.complete and not done.errors and not snap.exists()
    assert (root / "blobs" / "b1").read_text() == "weights"


def test_a_late_file_symlink_is_merged_as_a_file_symlink(windows_double: Any,
                                                          tmp_path: Path) -> None:
    """A Windows symlink keeps the file/folder kind it was made with: settle re-creates a late
    link to a file as a file symlink (`Ops.copy_link`), never as a folder link."""
    from cachedoctor.fs.kinds import FILE_ATTRIBUTE_DIRECTORY
    from cachedoctor.relocate import settle

    original, new = tmp_path / "orig", tmp_path / "new"
    original.mkdir()
    new.mkdir()
    taken = settle.digests(str(original))
    (original / "data.bin").write_text("blob")
    os.symlink("data.bin", original / "latest")
    done = settle.settle(str(original), str(new), taken)
    assert sorted(done.copied) == ["data.bin", "latest"]
    st = windows_double.lstat(str(new / "latest"))
    assert not st.st_file_attributes & FILE_ATTRIBUTE_DIRECTORY
    assert os.readlink(new / "latest") == "data.bin"


def test_a_hub_survey_reads_its_refs_by_path_on_windows(
        windows_double: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' folder descriptors are the seam's own numbers and its os.open takes no dir_fd
    (NotImplementedError: os.supports_dir_fd is empty there, per the os module's docs): the
    refs are not read while listing (`Ops.os_descriptors`) but by path afterwards, with the
    same units."""
    real_open = os.open

    def windows_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        if dir_fd is not None:
            raise NotImplementedError("dir_fd unavailable on this platform")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", windows_open)
    from cachedoctor.cacheunits import survey as survey_units
    from cachedoctor.profiles.model import HfHubUnits
    from tests.layouts import commit_of, make_repo

    hub = tmp_path / "hub"
    hub.mkdir()
    make_repo(hub, "org/m", {commit_of("a"): {"w.bin": b"w" * 5000}}, {"main": commit_of("a")})
    found = survey_units(str(hub), [HfHubUnits()])
    assert found.tree.contents == {}
    (unit,) = found.units
    assert [r.refs for r in unit.revisions] == [["main"]] and not unit.flags
