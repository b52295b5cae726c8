"""What a filesystem can hold, found by trying each thing once in a temporary folder there.

Not by filesystem name: DrvFs, NTFS through ntfs-3g, exFAT through exfat-fuse, SMB and other
FUSE mounts all differ, and ntfs-3g and exfat-fuse both show the fstype ``fuseblk``
(docs/filesystems.md has the measured table). `probe(folder)` creates
``.cachedoctor-probe-<random>`` in `folder`, tries modes (chmod takes effect), ownership (as
root), symlinks, hard links, FIFOs, case sensitivity, sparse files, extended attributes, the
mtime step and the characters Windows reserves in names, and removes the folder again. Results
are kept per device for the life of the process.

`assess(survey, capabilities, requires)` turns that into what a move must refuse before any
change (the cache holds links the destination cannot, names that would collide or be refused,
a capability the profile's `requires:` names) and what it must say will not survive
(permissions, hard links that become copies and their extra bytes, xattrs, holes).
`copy_options` and `verify_options` give the copier and the verifier only what both
filesystems can hold.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Sequence

import msgspec

from cachedoctor.fs.copy import CopyOptions
from cachedoctor.fs.survey import RESERVED_CHARS, LookFor, Survey
from cachedoctor.fs.verify import VerifyOptions

_IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
PROBE_MTIME_NS = 1_700_000_001_123_456_789  # an odd second with every sub-second digit set
_SPARSE_AT = 1 << 20
WINDOWS_MAX_PATH = 260


class Capabilities(msgspec.Struct, frozen=True):
    """What the filesystem holding `where` keeps. `why` says, per capability that failed,
    what the filesystem answered (an errno name, or "ignored")."""

    where: str
    modes: bool = True
    owners: bool = True
    symlinks: bool = True
    hardlinks: bool = True
    nlink_exact: bool = True  # st_nlink right after a link (FUSE may answer from its cache)
    fifos: bool = True
    case_sensitive: bool = True
    sparse: bool = True
    xattrs: bool = True
    mtime_step_ns: int = 1
    refused_chars: str = ""
    why: dict[str, str] = msgspec.field(default_factory=dict)
    probed: bool = True  # False: the folder could not be written, nothing was tried

    def holds(self, capability: str) -> bool:
        """For a profile's `requires:` entry (symlinks, hardlinks, case_sensitive, modes)."""
        return bool(getattr(self, capability))

    def look_for(self) -> LookFor:
        return LookFor(xattrs=not self.xattrs, case=not self.case_sensitive,
                       reserved=self.refused_chars)

    def reason(self, capability: str) -> str:
        why = self.why.get(capability)
        return f" ({why})" if why else ""


_cache: dict[tuple[int, int, int], Capabilities] = {}


def _key(folder: str) -> tuple[int, int, int]:
    """Which filesystem holds `folder`: its device and the identity of its mount's top folder
    (device numbers are reused once a filesystem is unmounted; a new one has a new top)."""
    from cachedoctor.drives import mount_point

    top = os.stat(mount_point(folder))
    return os.stat(folder).st_dev, top.st_ino, top.st_ctime_ns


def probe(folder: str) -> Capabilities:
    """Try what the filesystem of the existing folder `folder` can hold (cached per filesystem)."""
    try:
        dev = _key(folder)
    except OSError:
        return Capabilities(folder, probed=False)
    known = _cache.get(dev)
    if known is not None:
        return known
    work = os.path.join(folder, f".cachedoctor-probe-{secrets.token_hex(4)}")
    try:
        os.mkdir(work, 0o700)
    except OSError:
        return Capabilities(folder, probed=False)
    try:
        found = _try_all(work)
    finally:
        _remove(work)
    result = Capabilities(folder, **found)  # type: ignore[arg-type]
    _cache[dev] = result
    return result


def forget() -> None:
    """Drop the cached results (a filesystem was unmounted and another mounted at its place)."""
    _cache.clear()


def _err(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def _try_all(work: str) -> dict[str, object]:
    why: dict[str, str] = {}
    out: dict[str, object] = {"why": why}
    f = os.path.join(work, "f")
    with open(f, "wb") as fh:
        fh.write(b"x")
    modes = True
    for mode in (0o640, 0o604):
        try:
            os.chmod(f, mode)
            if stat.S_IMODE(os.stat(f).st_mode) != mode:
                modes, why["modes"] = False, f"chmod ignored, shows {oct(stat.S_IMODE(os.stat(f).st_mode))}"
                break
        except OSError as exc:
            modes, why["modes"] = False, _err(exc)
            break
    out["modes"] = modes
    if _IS_ROOT:
        try:
            os.chown(f, 1234, 1234)
            st = os.stat(f)
            out["owners"] = (st.st_uid, st.st_gid) == (1234, 1234)
            if not out["owners"]:
                why["owners"] = "chown ignored"
        except OSError as exc:
            out["owners"], why["owners"] = False, _err(exc)
    attempts: tuple[tuple[str, Callable[[], None]], ...] = (
        ("symlinks", lambda: os.symlink("f", os.path.join(work, "l"))),
        ("hardlinks", lambda: os.link(f, os.path.join(work, "h"))),
        ("fifos", lambda: _mkfifo(os.path.join(work, "p"))))
    for name, attempt in attempts:
        try:
            attempt()
            out[name] = True
        except (OSError, NotImplementedError, AttributeError) as exc:
            out[name] = False
            why[name] = _err(exc) if isinstance(exc, OSError) else "not available"
    if out.get("symlinks"):
        out["symlinks"] = os.readlink(os.path.join(work, "l")) == "f"
    if out.get("hardlinks"):
        st, other = os.stat(f), os.stat(os.path.join(work, "h"))
        if st.st_ino != other.st_ino:
            out["hardlinks"], why["hardlinks"] = False, "two inode numbers"
        elif st.st_nlink < 2:  # bindfs: its attribute cache shows 1 for a second
            out["nlink_exact"], why["nlink_exact"] = False, f"st_nlink {st.st_nlink} after linking"
    with open(os.path.join(work, "A"), "wb"):
        pass
    try:
        os.close(os.open(os.path.join(work, "a"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        out["case_sensitive"] = True
    except FileExistsError:
        out["case_sensitive"], why["case_sensitive"] = False, "A and a are one name"
    sparse = os.path.join(work, "s")
    with open(sparse, "wb") as fh:
        fh.seek(_SPARSE_AT)
        fh.write(b"x")
        fh.flush()
        with contextlib.suppress(OSError):
            os.fsync(fh.fileno())
    blocks = getattr(os.stat(sparse), "st_blocks", None)
    out["sparse"] = blocks is not None and blocks * 512 < _SPARSE_AT
    if not out["sparse"]:
        why["sparse"] = "every byte allocated"
    setxattr = getattr(os, "setxattr", None)
    if setxattr is not None:
        try:
            setxattr(f, "user.cachedoctor", b"1")
            out["xattrs"] = True
        except OSError as exc:
            out["xattrs"], why["xattrs"] = False, _err(exc)
    try:
        os.utime(f, ns=(PROBE_MTIME_NS, PROBE_MTIME_NS))
        out["mtime_step_ns"] = _step(PROBE_MTIME_NS, os.stat(f).st_mtime_ns)
    except OSError as exc:
        why["mtime"] = _err(exc)
    refused = []
    for char in RESERVED_CHARS:
        try:
            with open(os.path.join(work, f"r{char}r"), "wb"):
                pass
        except OSError:
            refused.append(char)
    out["refused_chars"] = "".join(refused)
    return out


def _mkfifo(path: str) -> None:
    os.mkfifo(path)  # AttributeError on Windows: no FIFOs there


def _step(wanted: int, got: int) -> int:
    """The coarsest step the stored time was cut to (1 ns when kept whole)."""
    if got == wanted:
        return 1
    for step in (10, 100, 1_000, 10**6, 10**7, 10**9, 2 * 10**9):
        if abs(got - (wanted - wanted % step)) < step:
            return step
    return max(abs(got - wanted), 1)


def _remove(work: str) -> None:
    with contextlib.suppress(OSError):
        for name in os.listdir(work):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(work, name))
        os.rmdir(work)


def probe_near(path: str) -> Capabilities:
    """The capabilities of the filesystem that holds (or would hold) `path`, probed next to it
    and never inside it: in cachedoctor's own state folder when that is on the same device (no
    folder of the user's changes), else in the nearest existing folder above `path`."""
    from cachedoctor.drives import nearest_existing
    from cachedoctor.state import state_dir

    folder = nearest_existing(os.path.dirname(os.path.abspath(path)))
    try:
        known = _cache.get(_key(folder))
        if known is not None:
            return known
        own = state_dir()
        own.mkdir(parents=True, exist_ok=True)
        if os.stat(own).st_dev == os.stat(folder).st_dev:
            return probe(str(own))
    except OSError:
        pass
    return probe(folder)


def copy_options(src: str, dst: str) -> CopyOptions:
    """What the copier may set when copying `src` to `dst`: modes only where both sides hold
    them (modes read from DrvFs are all 0777 and must not be written onto ext4 on a restore),
    ownership only as root and where it travels, hard links and xattrs where `dst` has them."""
    from_caps, to_caps = probe_near(src), probe_near(dst)
    return CopyOptions(modes=from_caps.modes and to_caps.modes,
                       owner=_IS_ROOT and from_caps.owners and to_caps.owners,
                       hardlinks=to_caps.hardlinks, xattrs=to_caps.xattrs,
                       every_inode=not from_caps.nlink_exact)


def verify_options(src: str, dst: str) -> VerifyOptions:
    """What a faithful copy of `src` at `dst` must match, given what both filesystems hold:
    modes only where both keep them, hard-link groups only where `dst` has hard links (every
    file's inode where a side's st_nlink can be stale), mtimes to the coarser measured step."""
    from cachedoctor.fs import seam

    from_caps, to_caps = probe_near(src), probe_near(dst)
    step = max(from_caps.mtime_step_ns, to_caps.mtime_step_ns)
    return VerifyOptions(modes=seam.current().modes_meaningful and from_caps.modes
                         and to_caps.modes,
                         hardlinks=to_caps.hardlinks,
                         mtime_tolerance_ns=0 if step <= 1 else step,
                         every_inode=not (from_caps.nlink_exact and to_caps.nlink_exact))


class Assessment(msgspec.Struct):
    refusals: list[str] = msgspec.field(default_factory=list)  # the move must not start
    losses: list[str] = msgspec.field(default_factory=list)  # said before copying
    extra_bytes: int = 0  # more room the copy takes there than the survey's allocated size


def assess(tree: Survey, caps: Capabilities, requires: Sequence[str] = (),
           *, what: str = "the cache", dest: str = "the destination",
           dest_folder: str | None = None) -> Assessment:
    """What a move of `tree` to a filesystem with `caps` must refuse and say. `dest_folder`
    (Windows): where the tree will be, to warn when its paths would reach MAX_PATH there."""
    out = Assessment()
    refuse, lose = out.refusals.append, out.losses.append
    for path in tree.too_deep[:1]:
        refuse(f"{path}: cachedoctor does not copy a tree that deep (usually a loop of folders "
               "a tool made by mistake)")
    if tree.mounts:
        refuse(f"another filesystem is mounted inside {what} at {tree.mounts[0]}: unmount it "
               "first (a move copies one filesystem's data, never a mount)")
    for capability in requires:
        if not caps.holds(capability):
            refuse(f"{what} needs {capability.replace('_', '-')} where it lives, and {dest} "
                   f"cannot hold them{caps.reason(capability)}")
    if tree.links and not caps.symlinks and "symlinks" not in requires:
        refuse(f"{dest} cannot hold symbolic links{caps.reason('symlinks')}, and {what} has "
               f"{tree.links}: a link cannot be replaced by a copy without changing the cache")
    if tree.specials and not caps.fifos:
        refuse(f"{dest} cannot hold FIFOs or devices{caps.reason('fifos')}, and {what} has "
               f"{tree.specials}")
    if tree.case_clashes:
        refuse(f"{dest} does not tell upper from lower case, and {what} has names that differ "
               f"only in case ({tree.case_clashes[0]}): one of them would be lost")
    if tree.reserved_names:
        refuse(f"{dest} refuses the characters {caps.refused_chars} in names, which "
               f"{tree.reserved_names[0]} uses")
    if not caps.probed:
        return out
    if not caps.modes:
        lose(f"permissions are not kept on {dest}{caps.reason('modes')}: read-only and "
             "executable bits are lost there, and a restore gives the files default "
             "permissions")
    if _IS_ROOT and not caps.owners:
        lose(f"file ownership is not kept on {dest}{caps.reason('owners')}")
    if tree.hardlinked_names and not caps.hardlinks:
        from cachedoctor.sizes import format_size

        out.extra_bytes += tree.hardlinked_bytes
        lose(f"{tree.hardlinked_names} hard-linked names become separate files on {dest} "
             f"({format_size(tree.hardlinked_bytes)} more){caps.reason('hardlinks')}")
    if tree.with_xattrs and not caps.xattrs:
        lose(f"extended attributes of {tree.with_xattrs} entries are not kept on {dest}")
    if tree.sparse_files and not caps.sparse:
        from cachedoctor.sizes import format_size

        out.extra_bytes += tree.sparse_bytes
        lose(f"{tree.sparse_files} sparse files take their full size on {dest} "
             f"({format_size(tree.sparse_bytes)} more)")
    if dest_folder is not None and tree.longest_path and \
            len(dest_folder) + 1 + tree.longest_path >= WINDOWS_MAX_PATH:
        lose(f"the longest path in {what} will be {len(dest_folder) + 1 + tree.longest_path} "
             f"characters at {dest_folder}: Windows programs without long-path support "
             f"(LongPathsEnabled) cannot open paths of {WINDOWS_MAX_PATH} characters or more "
             "(learn.microsoft.com, Maximum Path Length Limitation)")
    if caps.mtime_step_ns >= 10**9:
        lose(f"modification times are kept to the second on {dest}: tools that compare them "
             "may rebuild what they cached")
    return out
