"""Real filesystems for the tests: fresh small images (loop device or FUSE) mounted under the
test's tmp_path, plus the private mount namespace that keeps every test mount off the machine's
own mount table. docs/filesystems.md describes each kind and what it can hold.

Fixtures (registered by tests/conftest.py):
  realfs            parametrized over every kind in KINDS: a test taking it runs once per kind
  realfs_ext4, realfs_xfs, realfs_btrfs, realfs_tmpfs, realfs_ntfs, realfs_exfat, realfs_drvfs
                    one kind each
  drvfs_mnt_d       the DrvFs stand-in mounted at /mnt/d (WSL's default automount root)
  make_realfs       a factory, make_realfs(kind, size=None, name=None), for several drives in one
                    test or a size of your own (e.g. a tiny exFAT stick for ENOSPC)
Each yields a RealFS. Without root, Linux, the private namespace, a kernel filesystem or a tool,
they skip with the reason; they never fail for that.

`python -m tests.realfs` (as root) mounts every kind in a namespace of its own and prints the
capability table that docs/filesystems.md shows.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

IS_LINUX = sys.platform.startswith("linux")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

KINDS = ("ext4", "xfs", "btrfs", "tmpfs", "ntfs", "exfat", "drvfs")

# Image sizes. mkfs.xfs refuses anything under 300 MB and mkfs.btrfs (DUP metadata, the default)
# 100 MiB (110 MiB works); the images are sparse, so they cost a few MiB of real disk each (xfs:
# 64 MiB, its log), and are removed at teardown.
DEFAULT_SIZES = {
    "ext4": "32M",
    "xfs": "300M",
    "btrfs": "128M",
    "tmpfs": "32M",
    "ntfs": "32M",
    "exfat": "32M",
    "drvfs": "64M",  # the tmpfs under the bindfs view
}

# What the DrvFs stand-in shows as its source: WSL's drive letter. /proc/self/mounts writes a
# backslash as \134 (octal, like \040 for a space), so the line reads `D:\134 <mount> fuse ...`,
# the same escape as a real WSL2 `C:\134 /mnt/c 9p ...`.
DRVFS_SOURCE = "D:\\"
MNT_D = Path("/mnt/d")


@dataclass(frozen=True)
class RealFS:
    """One mounted filesystem. `fstype` and `source` are as /proc/self/mounts shows them
    (unescaped): e.g. ("ext4", "/dev/loop3"), ("fuseblk", "/dev/loop4") for ntfs-3g and
    exfat-fuse, ("fuse", "D:\\") for the DrvFs stand-in."""

    kind: str
    path: Path
    fstype: str
    source: str
    options: tuple[str, ...]
    image: Path | None = None  # the image file behind a loop device
    backing: Path | None = None  # drvfs: the real folder behind the bindfs view


class Unavailable(Exception):
    """This machine cannot provide the filesystem (not root, no tool, no kernel support...)."""


# --- the private mount namespace ------------------------------------------------------------

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


@dataclass
class Isolation:
    isolated: bool = False
    reason: str = "the private mount namespace was not set up (tests/conftest.py does it)"
    host_ns_fd: int | None = None  # an fd on the namespace we left: a window onto the host's mounts


ISOLATION = Isolation()


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                           ctypes.c_void_p]
    return libc


def enter_private_mount_namespace() -> Isolation:
    """Move this process into a mount namespace of its own whose mounts are all private, so that
    nothing mounted from here on (by this process or any child) reaches the machine's mount
    table, and all of it vanishes when the last process in the namespace ends.

    Safe only while single-threaded: unshare(CLONE_NEWNS) moves the calling thread alone, so with
    other threads running the process would straddle two namespaces; then this refuses. When
    making `/` rprivate fails after the unshare (the copies would still propagate to the host's
    shared mounts), it goes back to the original namespace before reporting."""
    if ISOLATION.isolated:
        return ISOLATION
    if not IS_LINUX:
        ISOLATION.reason = "mount namespaces are Linux-only"
        return ISOLATION
    if not IS_ROOT:
        ISOLATION.reason = "needs root to make a mount namespace"
        return ISOLATION
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        ISOLATION.reason = f"{threads} threads are running; unshare(CLONE_NEWNS) would move one"
        return ISOLATION
    libc = _libc()
    before = os.readlink("/proc/self/ns/mnt")
    host_fd = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        os.close(host_fd)
        ISOLATION.reason = f"unshare(CLONE_NEWNS) failed: {os.strerror(err)}"
        return ISOLATION
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        err = ctypes.get_errno()
        if libc.setns(host_fd, CLONE_NEWNS) != 0:  # pragma: no cover - nothing safe is left
            raise SystemExit("cachedoctor tests: could not make / rprivate in the new mount "
                             "namespace, nor return to the original one; stopping")
        os.close(host_fd)
        ISOLATION.reason = f"making / rprivate failed: {os.strerror(err)}"
        return ISOLATION
    after = os.readlink("/proc/self/ns/mnt")
    shared = [line for line in _read("/proc/self/mountinfo").splitlines() if " shared:" in line]
    if after == before or shared:  # pragma: no cover - the kernel did not do what it says
        raise SystemExit(f"cachedoctor tests: mount namespace {before} -> {after}, "
                         f"{len(shared)} mounts still shared; stopping")
    ISOLATION.isolated, ISOLATION.reason, ISOLATION.host_ns_fd = True, "", host_fd
    return ISOLATION


def host_mounts() -> str:
    """The mount table of the namespace the session started in (the machine's), read by a child
    that joins it through the fd kept at unsharing."""
    if ISOLATION.host_ns_fd is None:
        raise Unavailable("not in a private mount namespace")
    code = (
        "import ctypes, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"if libc.setns({ISOLATION.host_ns_fd}, {CLONE_NEWNS}) != 0:\n"
        "    sys.exit('setns: errno %d' % ctypes.get_errno())\n"
        "sys.stdout.write(open('/proc/self/mounts').read())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], pass_fds=(ISOLATION.host_ns_fd,),
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


# --- helpers --------------------------------------------------------------------------------


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_entry(path: Path) -> tuple[str, str, tuple[str, ...]] | None:
    """(source, fstype, options) of the top mount at `path` in /proc/self/mounts, unescaped."""
    found = None
    for line in _read("/proc/self/mounts").splitlines():
        fields = line.split()
        if len(fields) >= 4 and _unescape(fields[1]) == str(path):
            found = (_unescape(fields[0]), _unescape(fields[2]), tuple(fields[3].split(",")))
    return found


def _run(*cmd: str) -> str:
    """Run a command; output goes to a file, not a pipe, so that a FUSE daemon that keeps its
    inherited stdout open cannot hang us. Raises with the output on failure."""
    cmd = (_tool(cmd[0]) or cmd[0], *cmd[1:])
    with tempfile.TemporaryFile("w+") as out:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=120)
        out.seek(0)
        text = out.read()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {text.strip()}")
    return text


def _tool(name: str) -> str | None:
    """The tool's full path; /usr/sbin and /sbin count even when PATH leaves them out (mkfs.*)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _need_tools(*tools: str) -> None:
    missing = [t for t in tools if _tool(t) is None]
    if missing:
        raise Unavailable(f"missing tool(s): {', '.join(missing)} (Debian: ntfs-3g exfat-fuse "
                          "exfatprogs btrfs-progs xfsprogs bindfs; .ci/run installs them)")


def _kernel_has(fstype: str) -> bool:
    names = {line.split()[-1] for line in _read("/proc/filesystems").splitlines() if line.strip()}
    return fstype in names


def _mount(fstype: str, *cmd: str) -> None:
    """Run a mount command; a failure for want of kernel support is Unavailable, not an error."""
    try:
        _run(*cmd)
    except RuntimeError as err:
        if not _kernel_has(fstype):
            raise Unavailable(f"the kernel has no {fstype} filesystem ({err})") from err
        raise


def _check_can_mount() -> None:
    if not IS_LINUX:
        raise Unavailable("real filesystems are mounted on Linux only")
    if not IS_ROOT:
        raise Unavailable("needs root to mount filesystems")
    if not ISOLATION.isolated:
        raise Unavailable(f"no private mount namespace, so no mounts: {ISOLATION.reason}")


def _size_bytes(size: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if size[-1:].upper() in units:
        return int(size[:-1]) * units[size[-1].upper()]
    return int(size)


def _autoclear(dev: str) -> None:
    """`losetup -d` on a loop device in use only marks it autoclear: the kernel detaches it when
    its last user lets go, that is after the lazy unmount, or when the namespace ends if the
    session is killed first (loop devices are global: none must outlive the session)."""
    subprocess.run([_tool("losetup") or "losetup", "-d", dev], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)


@contextmanager
def _loop_device(image: Path) -> Iterator[str]:
    dev = _run("losetup", "--find", "--show", str(image)).strip()
    try:
        yield dev
    finally:
        _autoclear(dev)  # detaches at once if the mount never happened


def _unmount(path: Path) -> None:
    subprocess.run([_tool("umount") or "umount", "-l", str(path)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)


def _found(kind: str, path: Path, **extra: Path) -> RealFS:
    entry = mount_entry(path)
    if entry is None:
        raise RuntimeError(f"{kind} at {path}: not in /proc/self/mounts after mounting")
    source, fstype, options = entry
    return RealFS(kind=kind, path=path, fstype=fstype, source=source, options=options, **extra)


# --- the kinds ------------------------------------------------------------------------------

MKFS = {
    "ext4": ("mkfs.ext4", "-q", "-F", "-E", "nodiscard"),
    "xfs": ("mkfs.xfs", "-q", "-f", "-K"),
    "btrfs": ("mkfs.btrfs", "-q", "-f", "-K"),
    "ntfs": ("mkntfs", "-F", "-Q", "-q"),
    "exfat": ("mkfs.exfat",),
}
TOOLS = {
    "ext4": ("mkfs.ext4", "losetup"),
    "xfs": ("mkfs.xfs", "losetup"),
    "btrfs": ("mkfs.btrfs", "losetup"),
    "tmpfs": (),
    "ntfs": ("mkntfs", "ntfs-3g", "losetup"),
    "exfat": ("mkfs.exfat", "mount.exfat-fuse", "losetup"),
    "drvfs": ("bindfs",),
}
KERNEL_FS = {"ext4": "ext4", "xfs": "xfs", "btrfs": "btrfs", "tmpfs": "tmpfs",
             "ntfs": "fuseblk", "exfat": "fuseblk", "drvfs": "fuse"}


def check_available(kind: str) -> None:
    """Raise Unavailable when this machine cannot mount `kind` (before making anything)."""
    if kind not in KINDS:
        raise ValueError(f"unknown filesystem kind {kind!r}; known: {', '.join(KINDS)}")
    _check_can_mount()
    _need_tools("mount", "umount", *TOOLS[kind])
    if kind in ("ntfs", "exfat", "drvfs") and not os.path.exists("/dev/fuse"):
        raise Unavailable("no /dev/fuse")
    if kind in ("ntfs", "exfat", "drvfs") and not _kernel_has(KERNEL_FS[kind]):
        raise Unavailable(f"the kernel has no {KERNEL_FS[kind]} (FUSE) support")
    if "losetup" in TOOLS[kind] and not os.path.exists("/dev/loop-control"):
        raise Unavailable("no loop devices (/dev/loop-control)")


@contextmanager
def mounted(kind: str, where: Path, size: str | None = None) -> Iterator[RealFS]:
    """Make a fresh filesystem of `kind` and mount it at `where` (created; its parent holds the
    image); unmount it (lazily) and detach its loop device on exit."""
    check_available(kind)
    size = size or DEFAULT_SIZES[kind]
    where.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        if kind == "tmpfs":
            _mount("tmpfs", "mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
            stack.callback(_unmount, where)
            yield _found(kind, where)
        elif kind == "drvfs":
            yield stack.enter_context(_drvfs(where, size))
        else:
            image = where.parent / f"{where.name}.{kind}.img"
            # Removed last: the loop device keeps the data until it lets go, and pytest's kept
            # tmp folders then hold no images (xfs's log alone takes 64 MiB of real disk).
            stack.callback(image.unlink, missing_ok=True)
            with open(image, "wb") as fh:
                fh.truncate(_size_bytes(size))
            _run(*MKFS[kind], str(image))
            dev = stack.enter_context(_loop_device(image))
            if kind == "ntfs":  # ntfs-3g's defaults, as `mount -t ntfs-3g` or fstab give
                _mount("fuseblk", "ntfs-3g", dev, str(where))
            elif kind == "exfat":
                _mount("fuseblk", "mount.exfat-fuse", dev, str(where))
            else:
                _mount(kind, "mount", "-t", kind, dev, str(where))
            stack.callback(_unmount, where)
            _autoclear(dev)
            yield _found(kind, where, image=image)


@contextmanager
def _drvfs(where: Path, size: str, backing: Path | None = None) -> Iterator[RealFS]:
    """The DrvFs stand-in: bindfs over a folder (on a small tmpfs of its own), shown the way WSL2
    shows a Windows drive mounted without the `metadata` option: every file and folder mode 0777,
    owned by the mounting user, chmod/chown/chgrp succeeding and changing nothing, and the drive
    letter as the source in /proc/self/mounts."""
    # bindfs before 1.17 puts its own `fsname=<source>` after ours unless the source path has a
    # space or comma in it, so the backing folder is named with a space.
    backing = backing or where.parent / f"{where.name} backing"
    backing.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        _mount("tmpfs", "mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(backing))
        stack.callback(_unmount, backing)
        fsname = DRVFS_SOURCE.replace("\\", "\\\\")  # FUSE's -o parser unescapes backslashes
        _mount("fuse", "bindfs", "-o", f"fsname={fsname}", "--perms=a=rwx", "--chmod-ignore",
               "--chown-ignore", "--chgrp-ignore", f"--force-user={os.geteuid()}",
               f"--force-group={os.getegid()}", str(backing), str(where))
        stack.callback(_unmount, where)
        yield _found("drvfs", where, backing=backing)


@contextmanager
def mounted_at_mnt_d(stage: Path, size: str | None = None) -> Iterator[RealFS]:
    """The DrvFs stand-in at /mnt/d. When /mnt/d exists (a WSL machine) it is mounted over, in
    this namespace only. When not, /mnt gets a tmpfs (in this namespace only) holding a d folder
    and bind mounts of everything /mnt had, so the machine's own disk is not written either."""
    check_available("drvfs")
    if not MNT_D.parent.is_dir():
        raise Unavailable("no /mnt folder")
    with ExitStack() as stack:
        if not MNT_D.is_dir():
            below = stage / "mnt-below"
            below.mkdir(parents=True, exist_ok=True)
            _run("mount", "--rbind", str(MNT_D.parent), str(below))
            stack.callback(_unmount, below)
            _run("mount", "-t", "tmpfs", "-o", "size=1m,mode=755", "tmpfs", str(MNT_D.parent))
            stack.callback(_unmount, MNT_D.parent)  # lazy: takes the binds below with it
            for entry in sorted(below.iterdir()):
                here = MNT_D.parent / entry.name
                if entry.is_symlink():
                    here.symlink_to(os.readlink(entry))
                    continue
                if entry.is_dir():
                    here.mkdir()
                else:
                    here.touch()
                _run("mount", "--rbind", str(entry), str(here))
            MNT_D.mkdir()
        yield stack.enter_context(_drvfs(MNT_D, size or DEFAULT_SIZES["drvfs"],
                                         backing=stage / "D drive"))


# --- pytest fixtures ------------------------------------------------------------------------


@contextmanager
def _or_skip() -> Iterator[None]:
    try:
        yield
    except Unavailable as why:
        pytest.skip(str(why))


def _fixture_for(kind: str) -> Callable[[Path], Iterator[RealFS]]:
    def fixture(tmp_path: Path) -> Iterator[RealFS]:
        with ExitStack() as stack:
            with _or_skip():
                fs = stack.enter_context(mounted(kind, tmp_path / kind))
            yield fs

    fixture.__name__ = f"realfs_{kind}"
    fixture.__doc__ = f"A fresh {kind} filesystem mounted at tmp_path/{kind!r} (see tests/realfs.py)."
    return pytest.fixture(name=f"realfs_{kind}")(fixture)


realfs_ext4 = _fixture_for("ext4")
realfs_xfs = _fixture_for("xfs")
realfs_btrfs = _fixture_for("btrfs")
realfs_tmpfs = _fixture_for("tmpfs")
realfs_ntfs = _fixture_for("ntfs")
realfs_exfat = _fixture_for("exfat")
realfs_drvfs = _fixture_for("drvfs")


@pytest.fixture(params=KINDS)
def realfs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RealFS]:
    """Every kind in turn: a test taking `realfs` runs once per filesystem kind
    (ids realfs[ext4] ... realfs[drvfs]; select with -k, e.g. -k 'exfat or ntfs')."""
    kind = request.param
    with ExitStack() as stack:
        with _or_skip():
            fs = stack.enter_context(mounted(kind, tmp_path / kind))
        yield fs


@pytest.fixture
def make_realfs(tmp_path: Path) -> Iterator[Callable[..., RealFS]]:
    """make_realfs(kind, size=None, name=None): mount another fresh filesystem at
    tmp_path/(name or kind); all are unmounted at the end of the test."""
    with ExitStack() as stack:
        def make(kind: str, size: str | None = None, name: str | None = None) -> RealFS:
            with _or_skip():
                return stack.enter_context(mounted(kind, tmp_path / (name or kind), size))

        yield make


@pytest.fixture
def drvfs_mnt_d(tmp_path: Path) -> Iterator[RealFS]:
    """The DrvFs stand-in mounted at /mnt/d, where WSL automounts drive D:."""
    with ExitStack() as stack:
        with _or_skip():
            fs = stack.enter_context(mounted_at_mnt_d(tmp_path))
        yield fs


# --- capabilities ---------------------------------------------------------------------------

# An mtime with an odd second and every sub-second digit set, to see what survives.
PROBE_MTIME_NS = 1_700_000_001_123_456_789
ROWS = (
    ("chmod", "chmod 640 takes effect"),
    ("modes", "modes shown (new file / new folder, umask 022)"),
    ("chown", "chown to 1234:1234 (as root)"),
    ("symlink", "symlinks"),
    ("hardlink", "hard links"),
    ("xattr", "xattrs (user.*)"),
    ("sparse", "sparse file (1 byte at 4 MiB): allocated, SEEK_HOLE"),
    ("case", "case-sensitive (create A, then a)"),
    ("mtime", "mtime granularity (set ns, read back)"),
    ("rename_dir", "rename a folder over an existing empty folder"),
    ("rename_file", "rename a file over an existing file"),
    ("nofollow", "O_NOFOLLOW on a symlink / dir fds (openat, unlinkat)"),
    ("inodes", "statvfs f_files / f_ffree"),
    ("name_max", "longest name: ASCII bytes / 'é' chars (f_namemax)"),
    ("reserved", 'names with \\ : * ? " < > |'),
)


def _err(e: OSError) -> str:
    return f"no ({errno.errorcode.get(e.errno or 0, str(e.errno))})"


def _granularity(wanted: int, got: int) -> str:
    if got == wanted:
        return "1 ns"
    for step, label in ((10, "10 ns"), (100, "100 ns"), (1_000, "1 µs"), (10**6, "1 ms"),
                        (10**7, "10 ms"), (10**9, "1 s"), (2 * 10**9, "2 s")):
        if got == wanted - wanted % step:
            return label
    return f"off by {got - wanted} ns"


def _longest(folder: Path, char: str, limit: int = 1100) -> int:
    """The longest name of `char` repeated that the filesystem accepts (binary search)."""
    good, bad = 0, limit
    while bad - good > 1:
        mid = (good + bad) // 2
        try:
            fd = os.open(folder / (char * mid), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except OSError:
            bad = mid
            continue
        os.close(fd)
        os.unlink(folder / (char * mid))
        good = mid
    return good


def probe(root: Path) -> dict[str, str]:
    """Try each capability once on the filesystem at `root`; a short answer per ROWS key."""
    work = root / "probe"
    work.mkdir()
    out: dict[str, str] = {}
    old_umask = os.umask(0o022)
    try:
        f = work / "file"
        f.write_bytes(b"x")
        (work / "dir").mkdir()
        out["modes"] = f"{os.stat(f).st_mode & 0o7777:04o} / {os.stat(work / 'dir').st_mode & 0o7777:04o}"
        try:
            os.chmod(f, 0o640)
            mode = os.stat(f).st_mode & 0o7777
            out["chmod"] = "yes" if mode == 0o640 else f"ignored (still {mode:04o})"
        except OSError as e:
            out["chmod"] = _err(e)
        try:
            os.chown(f, 1234, 1234)
            st = os.stat(f)
            out["chown"] = ("yes" if (st.st_uid, st.st_gid) == (1234, 1234)
                            else f"ignored (still {st.st_uid}:{st.st_gid})")
        except OSError as e:
            out["chown"] = _err(e)
        link = work / "link"
        try:
            os.symlink("file", link)
            out["symlink"] = "yes" if os.readlink(link) == "file" else "odd (readlink differs)"
        except OSError as e:
            out["symlink"] = _err(e)
        try:
            os.link(f, work / "hard")
            st, hard = os.stat(f), os.stat(work / "hard")
            if st.st_ino != hard.st_ino:
                out["hardlink"] = "odd (two inode numbers)"
            else:  # FUSE may answer from its attribute cache, taken before the link was made
                out["hardlink"] = "yes" if st.st_nlink == 2 else f"yes (st_nlink stale: {st.st_nlink})"
        except OSError as e:
            out["hardlink"] = _err(e)
        try:
            os.setxattr(f, "user.cachedoctor", b"1")
            out["xattr"] = "yes" if os.getxattr(f, "user.cachedoctor") == b"1" else "odd"
        except OSError as e:
            out["xattr"] = _err(e)
        sparse = work / "sparse"
        with open(sparse, "wb") as fh:
            fh.seek(4 << 20)
            fh.write(b"x")
            fh.flush()
            os.fsync(fh.fileno())
        allocated = os.stat(sparse).st_blocks * 512
        fd = os.open(sparse, os.O_RDONLY)
        try:
            hole = os.lseek(fd, 0, os.SEEK_HOLE)
            holes = "holes seen" if hole < (4 << 20) else "no holes seen"
        except OSError as e:
            holes = f"SEEK_HOLE {_err(e)}"
        finally:
            os.close(fd)
        out["sparse"] = f"{'yes' if allocated < (1 << 20) else 'no'} ({allocated // 1024} KiB, {holes})"
        (work / "A").write_bytes(b"A")
        try:
            fd = os.open(work / "a", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.close(fd)
            out["case"] = "yes"
        except FileExistsError:
            names = sorted(p.name for p in work.iterdir() if p.name.lower() == "a")
            out["case"] = f"no (A and a are one file; listed as {'/'.join(names)})"
        try:
            os.utime(f, ns=(PROBE_MTIME_NS, PROBE_MTIME_NS))
            out["mtime"] = _granularity(PROBE_MTIME_NS, os.stat(f).st_mtime_ns)
        except OSError as e:
            out["mtime"] = _err(e)
        (work / "d1").mkdir()
        (work / "d1" / "inside").write_bytes(b"1")
        (work / "d2").mkdir()
        try:
            os.rename(work / "d1", work / "d2")
            out["rename_dir"] = "yes" if (work / "d2" / "inside").exists() else "odd"
        except OSError as e:
            out["rename_dir"] = _err(e)
        (work / "f2").write_bytes(b"2")
        try:
            os.replace(work / "f2", f)
            out["rename_file"] = "yes" if f.read_bytes() == b"2" else "odd"
        except OSError as e:
            out["rename_file"] = _err(e)
        if os.path.islink(link):
            try:
                os.close(os.open(link, os.O_RDONLY | os.O_NOFOLLOW))
                nofollow = "followed!"
            except OSError as e:
                nofollow = "ELOOP" if e.errno == errno.ELOOP else _err(e)
        else:
            nofollow = "n/a"
        try:
            dfd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.close(os.open("file", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd))
                os.stat("A", dir_fd=dfd, follow_symlinks=False)
                os.unlink("A", dir_fd=dfd)
                dirfds = "yes"
            finally:
                os.close(dfd)
        except OSError as e:
            dirfds = _err(e)
        out["nofollow"] = f"{nofollow} / {dirfds}"
        vfs = os.statvfs(root)
        out["inodes"] = ("0 / 0 (not known)" if vfs.f_files == 0
                         else f"{vfs.f_files} / {vfs.f_ffree}")
        names = work / "names"
        names.mkdir()
        out["name_max"] = f"{_longest(names, 'a')} / {_longest(names, 'é')} ({vfs.f_namemax})"
        refused = []
        for ch in '\\:*?"<>|':
            try:
                (names / f"x{ch}y").write_bytes(b"")
            except OSError:
                refused.append(ch)
        out["reserved"] = "yes" if not refused else f"no ({' '.join(refused)} refused)"
    finally:
        os.umask(old_umask)
        shutil.rmtree(work, ignore_errors=True)
    return out


def markdown_table(results: dict[str, dict[str, str]]) -> str:
    kinds = list(results)
    lines = ["| | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for key, label in ROWS:
        cells = [results[k].get(key, "?").replace("|", "\\|") for k in kinds]
        lines.append(f"| {label.replace('|', '&#124;')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def measure_all(where: Path) -> tuple[dict[str, RealFS], dict[str, dict[str, str]]]:
    """Mount every available kind under `where`, probe each; (what was mounted, results)."""
    mounts: dict[str, RealFS] = {}
    results: dict[str, dict[str, str]] = {}
    for kind in KINDS:
        try:
            with mounted(kind, where / kind) as fs:
                mounts[kind] = fs
                results[kind] = probe(fs.path)
        except Unavailable as why:
            print(f"{kind}: skipped: {why}", file=sys.stderr)
    return mounts, results


def main() -> int:  # pragma: no cover - a maintainer's tool
    iso = enter_private_mount_namespace()
    if not iso.isolated:
        print(f"cannot measure: {iso.reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cachedoctor-realfs-") as tmp:
        started = time.monotonic()
        mounts, results = measure_all(Path(tmp))
        for fs in mounts.values():
            print(f"<!-- {fs.kind}: fstype {fs.fstype!r}, source {fs.source!r} -->")
        print(markdown_table(results), end="")
        print(f"<!-- measured in {time.monotonic() - started:.1f} s on Linux {os.uname().release} -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
