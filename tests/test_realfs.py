"""The real-filesystem fixtures (tests/realfs.py): each mounts what it says, inside the session's
private mount namespace, and goes away afterwards; and what each kind can hold, measured."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import realfs as rf
from tests.conftest import IS_LINUX, IS_ROOT, needs_root
from tests.realfs import KINDS, ROWS, RealFS, mount_entry, probe

# What /proc/self/mounts calls each kind: FUSE filesystems over a block device are "fuseblk",
# bindfs (over a folder) is plain "fuse".
FSTYPE = {"ext4": "ext4", "xfs": "xfs", "btrfs": "btrfs", "tmpfs": "tmpfs",
          "ntfs": "fuseblk", "exfat": "fuseblk", "drvfs": "fuse"}
DOC = Path(__file__).resolve().parent.parent / "docs" / "filesystems.md"


def loop_backing_files() -> list[str]:
    """What every attached loop device reads from (the kernel's list, the same in every mount
    namespace; a removed image reads `<path> (deleted)`)."""
    found = []
    for dev in Path("/sys/block").glob("loop*"):
        try:
            found.append((dev / "loop" / "backing_file").read_text().strip())
        except OSError:
            continue  # not attached
    return found


def wait_until(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ------------------------------------------------------------------------------ isolation


@needs_root
def test_the_session_runs_in_a_private_mount_namespace() -> None:
    assert rf.ISOLATION.isolated, rf.ISOLATION.reason
    mountinfo = Path("/proc/self/mountinfo").read_text()
    assert " shared:" not in mountinfo  # nothing here propagates back to the machine's mounts


@needs_root
def test_a_test_mount_is_not_in_the_machines_mount_table(realfs_tmpfs: RealFS) -> None:
    mine = Path("/proc/self/mounts").read_text()
    assert f" {realfs_tmpfs.path} tmpfs " in mine
    # The namespace the session started in, read by a child that joins it.
    assert str(realfs_tmpfs.path) not in rf.host_mounts()
    # And PID 1's view, which is the machine's whenever PID 1 is not in this session's namespace.
    try:
        pid1_ns = os.readlink("/proc/1/ns/mnt")
    except OSError:
        pid1_ns = None  # not ours to read (PID 1 may be undumpable): it is no process of ours
    if pid1_ns == os.readlink("/proc/self/ns/mnt"):
        pytest.skip("PID 1 shares this session's mount namespace (pytest runs as PID 1?)")
    try:
        pid1 = Path("/proc/1/mounts").read_text()
    except OSError as e:
        pytest.skip(f"cannot read /proc/1/mounts: {e}")
    assert str(realfs_tmpfs.path) not in pid1


@needs_root
def test_the_existing_tmpfs_fixture_is_inside_the_namespace_too(tmpfs: Path) -> None:
    assert mount_entry(tmpfs) is not None and mount_entry(tmpfs)[1] == "tmpfs"  # type: ignore[index]
    assert str(tmpfs) not in rf.host_mounts()


@needs_root
def test_children_inherit_the_namespace(realfs_tmpfs: RealFS) -> None:
    child = subprocess.run(["cat", "/proc/self/mounts"], capture_output=True, text=True, check=True)
    assert f" {realfs_tmpfs.path} tmpfs " in child.stdout


@needs_root
def test_rprivate_is_what_keeps_mounts_from_propagating(tmp_path: Path) -> None:
    """Why `/` is made rprivate after the unshare: a copied shared mount stays a peer of the
    original, so a mount under it would appear on the other side. A child process here plays
    the session: it unshares under a shared mount; our side must not see its mount."""
    shared = tmp_path / "shared"
    shared.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(shared)], check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(shared)], check=True)
        code = textwrap.dedent(f"""
            import os, subprocess, sys
            sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
            from tests import realfs
            iso = realfs.enter_private_mount_namespace()
            assert iso.isolated, iso.reason
            target = {str(shared / "inner")!r}
            os.mkdir(target)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", target], check=True)
            print(open("/proc/self/mounts").read().count(target))
        """)
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60)
        assert child.returncode == 0, child.stderr
        assert child.stdout.strip() == "1"  # the child saw its own mount...
        assert str(shared / "inner") not in Path("/proc/self/mounts").read_text()  # ...we don't
    finally:
        subprocess.run(["umount", "-l", str(shared)], check=False)


def test_without_root_or_linux_the_fixtures_skip_with_a_reason() -> None:
    if IS_LINUX and IS_ROOT and rf.ISOLATION.isolated:
        pytest.skip("this machine can mount: nothing to skip")
    with pytest.raises(rf.Unavailable, match=r"\S"):
        rf.check_available("ext4")


def test_a_missing_tool_is_a_skip_not_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rf, "_check_can_mount", lambda: None)
    monkeypatch.setattr(rf, "_tool", lambda name: None if name == "mkntfs" else "/bin/x")
    with pytest.raises(rf.Unavailable, match="mkntfs"):
        rf.check_available("ntfs")


# ------------------------------------------------------------------------------ each fixture


def test_each_kind_mounts_what_it_says(realfs: RealFS) -> None:
    entry = mount_entry(realfs.path)
    assert entry is not None, f"{realfs.path} is not a mount point"
    source, fstype, options = entry
    assert (fstype, source, options) == (realfs.fstype, realfs.source, realfs.options)
    assert fstype == FSTYPE[realfs.kind]
    assert os.path.ismount(realfs.path)
    if realfs.kind in ("ext4", "xfs", "btrfs", "ntfs", "exfat"):
        assert re.fullmatch(r"/dev/loop\d+", source) and realfs.image is not None
        backing = Path(f"/sys/block/{Path(source).name}/loop/backing_file").read_text().strip()
        assert backing == str(realfs.image)
        # marked to detach itself once released, so a killed session leaves no loop device
        assert Path(f"/sys/block/{Path(source).name}/loop/autoclear").read_text().strip() == "1"
    if realfs.kind == "drvfs":
        assert source == "D:\\"  # the drive letter, as WSL shows it
    # A real, writable, separate filesystem.
    (realfs.path / "hello").write_text("hi")
    assert (realfs.path / "hello").read_text() == "hi"
    assert os.stat(realfs.path).st_dev != os.stat(realfs.path.parent).st_dev


@needs_root
def test_the_drvfs_source_is_escaped_in_proc_mounts(realfs_drvfs: RealFS) -> None:
    """/proc/self/mounts writes the backslash of `D:\\` as \\134 (octal), as it writes a space as
    \\040; a real WSL2 drive reads `C:\\134 /mnt/c 9p ...`. cachedoctor's parser unescapes it."""
    from cachedoctor.drives import parse_proc_mounts

    raw = [line for line in Path("/proc/self/mounts").read_text().splitlines()
           if line.split()[1] == str(realfs_drvfs.path)]
    assert raw and raw[-1].split()[0] == "D:\\134"
    parsed = [m for m in parse_proc_mounts(raw[-1]) if m[0] == str(realfs_drvfs.path)]
    assert parsed[0][1] == "D:\\"


@needs_root
def test_cachedoctor_sees_the_drive_as_the_fixture_says(realfs: RealFS) -> None:
    from cachedoctor import drives

    drives.partitions.cache_clear()
    try:
        info = drives.drive_of(str(realfs.path / "cache"))
    finally:
        drives.partitions.cache_clear()
    assert info is not None
    assert (info.mount, info.device, info.fstype) == (str(realfs.path), realfs.source, realfs.fstype)


@needs_root
def test_teardown_unmounts_and_detaches(tmp_path: Path) -> None:
    where = tmp_path / "ext4"
    with rf.mounted("ext4", where) as fs:
        image = str(fs.image)
        assert image in loop_backing_files()
    assert mount_entry(where) is None
    assert wait_until(lambda: not [b for b in loop_backing_files() if b.startswith(image)])
    assert not os.path.exists(image)  # no image left in pytest's kept folders


@needs_root
def test_fuse_daemons_end_with_their_mount(tmp_path: Path) -> None:
    ours = os.readlink("/proc/self/ns/mnt")

    def daemons() -> set[int]:
        pids = set()
        for proc in Path("/proc").iterdir():
            try:
                if (proc.name.isdigit() and os.readlink(proc / "ns" / "mnt") == ours
                        and (proc / "comm").read_text().strip() in
                        ("ntfs-3g", "mount.exfat-fus", "bindfs")):
                    pids.add(int(proc.name))
            except OSError:
                continue
        return pids

    before = daemons()
    for kind in ("ntfs", "exfat", "drvfs"):
        try:
            with rf.mounted(kind, tmp_path / kind):
                assert daemons() - before, f"no {kind} daemon seen"
        except rf.Unavailable as why:
            pytest.skip(str(why))
    assert wait_until(lambda: not daemons() - before)


@needs_root
def test_make_realfs_gives_several_drives_of_chosen_sizes(make_realfs) -> None:
    stick = make_realfs("exfat", size="8M", name="stick")
    disk = make_realfs("ntfs", size="16M", name="disk")
    assert stick.path.name == "stick" and disk.path.name == "disk"
    assert os.statvfs(stick.path).f_blocks * os.statvfs(stick.path).f_frsize <= 8 << 20
    with pytest.raises(OSError) as err:
        (stick.path / "big").write_bytes(b"\0" * (9 << 20))
    assert err.value.errno == 28  # ENOSPC, for real


@needs_root
def test_drvfs_at_mnt_d(drvfs_mnt_d: RealFS) -> None:
    assert drvfs_mnt_d.path == Path("/mnt/d")
    assert mount_entry(Path("/mnt/d"))[:2] == ("D:\\", "fuse")  # type: ignore[index]
    (drvfs_mnt_d.path / "Users").mkdir()
    assert os.stat(drvfs_mnt_d.path / "Users").st_mode & 0o7777 == 0o777
    assert "/mnt/d" not in rf.host_mounts()


@needs_root
def test_mnt_d_leaves_mnt_as_it_was(tmp_path: Path) -> None:
    """Without a /mnt/d to mount over, /mnt gets a tmpfs (in this namespace) with d and binds of
    all /mnt had: the same names while mounted, the machine's /mnt untouched, all gone after."""
    if not os.path.isdir("/mnt"):
        pytest.skip("no /mnt")
    before = sorted(os.listdir("/mnt"))
    try:
        with rf.mounted_at_mnt_d(tmp_path):
            assert sorted(os.listdir("/mnt")) == sorted({*before, "d"})
            for name in before:  # the same things, not just the same names
                assert os.stat(f"/mnt/{name}", follow_symlinks=False).st_ino == \
                    os.stat(tmp_path / "mnt-below" / name, follow_symlinks=False).st_ino
    except rf.Unavailable as why:
        pytest.skip(str(why))
    assert sorted(os.listdir("/mnt")) == before
    assert mount_entry(Path("/mnt")) is None or "/mnt" in rf.host_mounts().split()
    assert mount_entry(Path("/mnt/d")) is None or "d" in before


# ------------------------------------------------------------------------------ capabilities


def test_capabilities(realfs: RealFS) -> None:
    """Measure each capability once; assert the facts that hold for the kind everywhere."""
    cap = probe(realfs.path)
    assert set(cap) == {key for key, _ in ROWS}
    kind = realfs.kind
    posix = kind in ("ext4", "xfs", "btrfs", "tmpfs")
    if posix:
        for key in ("chmod", "chown", "symlink", "hardlink", "case", "rename_dir", "rename_file",
                    "reserved"):
            assert cap[key] == "yes", (key, cap[key])
        assert cap["modes"] == "0644 / 0755"
        assert cap["nofollow"] == "ELOOP / yes"
        assert cap["mtime"] == "1 ns"
        assert cap["name_max"].startswith("255 / 127 ")  # 255 bytes: 127 two-byte characters
    if kind == "exfat":  # the USB stick
        assert cap["symlink"].startswith("no")
        assert cap["hardlink"].startswith("no")
        assert cap["chmod"].startswith("ignored") and cap["modes"] == "0777 / 0777"
        assert cap["chown"].startswith("no")
        assert cap["case"].startswith("no")
        assert cap["xattr"].startswith("no")
        assert cap["sparse"].startswith("no")
        assert cap["reserved"].startswith("no")
        assert cap["name_max"].startswith("255 / 255 ")  # 255 UTF-16 units, not bytes
    if kind == "ntfs":  # the dual-boot D: through ntfs-3g's defaults (no `permissions`)
        assert cap["chmod"].startswith("ignored") and cap["modes"] == "0777 / 0777"
        assert cap["symlink"] == "yes" and cap["hardlink"] == "yes"
        assert cap["case"] == "yes"  # ntfs-3g makes POSIX names: A and a can both exist
        assert cap["mtime"] == "100 ns"
        assert cap["name_max"].startswith("255 / 255 ")
    if kind == "drvfs":  # the stand-in: shows 0777, ignores chmod and chown
        assert cap["modes"] == "0777 / 0777"
        assert cap["chmod"] == "ignored (still 0777)"
        assert cap["chown"].startswith("ignored")
    if kind == "btrfs":
        assert cap["inodes"] == "0 / 0 (not known)"  # btrfs makes inodes as it goes
    else:
        assert not cap["inodes"].startswith("0 /")


def test_the_drvfs_stand_in_really_ignores_chmod(realfs_drvfs: RealFS) -> None:
    f = realfs_drvfs.path / "script.sh"
    f.write_text("echo hi\n")
    os.chmod(f, 0o600)  # succeeds...
    assert os.stat(f).st_mode & 0o7777 == 0o777  # ...and changes nothing shown
    assert realfs_drvfs.backing is not None
    assert os.stat(realfs_drvfs.backing / "script.sh").st_mode & 0o7777 != 0o600  # nor stored


def test_the_docs_table_covers_every_kind_and_row() -> None:
    text = DOC.read_text(encoding="utf-8")
    header = "| | " + " | ".join(KINDS) + " |"
    assert header in text, "docs/filesystems.md: regenerate the table (python -m tests.realfs)"
    table = text[text.index(header):].split("\n\n")[0]
    for _, label in ROWS:
        assert f"| {label.replace('|', '&#124;')} |" in table, label
