"""A read-only, link-proof listing of one cache location, entry by entry.

Units need what the totals of `scan` and the deleter's file list do not give: every folder with
its own blocks (so a unit's size equals `du -s` of it), the target of every symbolic link (a
Hugging Face snapshot names its blob through one), and each inode's names inside the location
(a hard link whose other names live outside frees nothing).

The listing is a visitor of the one walker (`fs.walk`, through the OS seam: the same on
Windows): folders are opened relative to their parent (the identity checked against the
listing), it never follows a link, never enters another filesystem (like `du -x`) nor a
folder the rules exclude (another location nested in this one, a `keep:` glob). Only `lstat`,
`readlink` and `listdir` are used, so no access time moves except the folders' own (and a
link's, where the kernel counts `readlink` as a use: see `Clock`); the one exception, the small
files a unit type reads (`reads`: refs, manifests), are opened with O_NOATIME where the kernel
allows it. On Linux the per-folder loop is C (`Ops.folder_lister`), the same entries.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from cachedoctor.fs import kinds, seam
from cachedoctor.fs.walk import Frame, Listed, Task, TreeWalk, worker_count
from cachedoctor.safedelete import Rules

_IFMT, _IFDIR, _IFLNK, _IFREG = 0o170000, stat.S_IFDIR, stat.S_IFLNK, stat.S_IFREG


class Entry(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One entry below the root (`rel` '/'-separated; the root itself is '').

    A frozen msgspec struct rather than a frozen dataclass: one is built per entry of the
    location, and a frozen dataclass's `__init__` (a `object.__setattr__` per field) cost 2 µs
    of the listing's 13 µs per entry; the struct is built in C in 0.15 µs, and a forked
    worker's entries travel as msgpack arrays."""

    rel: str
    is_dir: bool
    is_link: bool
    is_file: bool  # a regular file
    size: int  # allocated bytes (st_blocks * 512; st_size where blocks are unknown)
    atime: float
    mtime: float
    inode: tuple[int, int]  # (st_dev, st_ino)
    nlink: int
    target: str | None = None  # what a symbolic link says (never followed)

    @property
    def dev(self) -> int:
        return self.inode[0]

    @property
    def ino(self) -> int:
        return self.inode[1]

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


class Tree(msgspec.Struct):
    """Every entry of a location; `kept` are the entries the rules keep (not entered);
    `contents` the text of the small files the listing was asked to read (`list_tree`)."""

    root: str
    entries: dict[str, Entry] = msgspec.field(default_factory=dict)
    children: dict[str, list[Entry]] = msgspec.field(default_factory=dict)  # folder rel -> its entries
    kept: set[str] = msgspec.field(default_factory=set)
    errors: list[str] = msgspec.field(default_factory=list)
    contents: dict[str, str] = msgspec.field(default_factory=dict)  # rel -> text (`reads`)
    _names: dict[tuple[int, int], int] | None = None

    def get(self, rel: str) -> Entry | None:
        return self.entries.get(rel)

    def child_rels(self, rel: str) -> list[str]:
        return [e.rel for e in self.children.get(rel, ())]

    def below(self, rel: str) -> Iterator[Entry]:
        """`rel` and everything under it (an entry that is not listed yields nothing)."""
        entry = self.entries.get(rel)
        if entry is None:
            return
        children = self.children
        stack = [entry]
        while stack:
            current = stack.pop()
            yield current
            if current.is_dir:
                stack.extend(children.get(current.rel, ()))

    def names_inside(self, inode: tuple[int, int]) -> int:
        """How many names this inode has in the location (hard links counted by name)."""
        if self._names is None:
            names: dict[tuple[int, int], int] = {}
            for e in self.entries.values():
                if not e.is_dir and e.nlink > 1:
                    names[e.inode] = names.get(e.inode, 0) + 1
            self._names = names
        return self._names.get(inode, 1)

    def outside_names(self, entry: Entry) -> int:
        """Names of the entry's inode outside the location: removing ours frees nothing then."""
        if entry.is_dir or entry.nlink <= 1:
            return 0
        return max(0, entry.nlink - self.names_inside(entry.inode))

    def resolve(self, link: Entry) -> str | None:
        """The rel a link points at when it stays inside the root, else None (the root itself
        included): the lexical `normpath` of the link's folder joined with its target."""
        target = link.target
        if target is None or os.path.isabs(target) or "\\" in target:
            return None
        parts = target.split("/")
        if "" in parts or "." in parts:  # `a//b`, `./a`, `a/`: left to normpath
            parent = link.rel.rsplit("/", 1)[0] if "/" in link.rel else ""
            joined = os.path.normpath(os.path.join(parent, target)).replace(os.sep, "/")
            return None if joined == "." or joined == ".." or joined.startswith("../") else joined
        at = link.rel.split("/")
        at.pop()  # the link's own name
        for part in parts:  # a Hugging Face snapshot link is `../../blobs/<hash>`
            if part != "..":
                at.append(part)
            elif at:
                at.pop()
            else:
                return None  # above the root
        return "/".join(at) or None

    def dangles(self, link: Entry) -> bool:
        """A link whose target does not exist (inside the root: from the listing)."""
        inside = self.resolve(link)
        if inside is not None:
            seen: set[str] = set()
            while inside is not None:  # a link to a link inside the cache: follow the listing
                target = self.entries.get(inside)
                if target is None:  # unless it is something the rules keep (not listed)
                    return not any(inside == k or inside.startswith(k + "/") for k in self.kept)
                if not target.is_link or inside in seen:
                    return False
                seen.add(inside)
                inside = self.resolve(target)
            return False
        if link.target is None:
            return False
        base = os.path.join(self.root, os.path.dirname(link.rel))
        return not os.path.exists(os.path.join(base, link.target))

    def emptied_folders(self, gone: set[str]) -> list[Entry]:
        """Folders the deleter removes once the entries `gone` are deleted: every one that
        held some of them and nothing else (nothing kept, nothing staying)."""
        parents: set[str] = set()
        for rel in gone:
            while "/" in rel:
                rel = rel.rsplit("/", 1)[0]
                if rel in parents:
                    break
                parents.add(rel)
        kept_in = {k.rsplit("/", 1)[0] for k in self.kept if "/" in k}
        emptied: set[str] = set()
        for folder in sorted(parents, key=lambda r: -r.count("/")):
            if folder in gone or any(k == folder or k.startswith(folder + "/") for k in kept_in):
                continue
            if all(c in gone or c in emptied for c in self.child_rels(folder)):
                emptied.add(folder)
        return [self.entries[r] for r in emptied if r in self.entries]

    def total(self) -> int:
        """Allocated bytes of the whole listing, root included, each inode once (`du -s`)."""
        return allocated(self.entries.values())

    def files(self) -> int:
        return sum(1 for e in self.entries.values() if not e.is_dir)


def allocated(entries: Iterable[Entry]) -> int:
    """Allocated bytes of these entries, each inode once (`du -c` of them)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for e in entries:
        if e.nlink > 1 and not e.is_dir:
            if e.inode in seen:
                continue
            seen.add(e.inode)
        total += e.size
    return total


_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NONBLOCK", 0))
_NOATIME = getattr(os, "O_NOATIME", 0)
SMALL_FILE = 1 << 20  # refs and manifests are a few hundred bytes; anything bigger is not one


def read_text(name: str, entry: Entry, dir_fd: int | None = None) -> str | None:
    """The text of a small file of a listing (a ref, a manifest), if `name` (relative to
    `dir_fd`) still is that inode: without moving its access time (O_NOATIME where the kernel
    allows it) and without following a link. None when it is not a small regular file or
    cannot be read."""
    if not entry.is_file or entry.size > SMALL_FILE * 2:
        return None
    fd = -1
    for flags in ((_READ_FLAGS | _NOATIME), _READ_FLAGS) if _NOATIME else (_READ_FLAGS,):
        try:
            fd = os.open(name, flags, dir_fd=dir_fd)
            break
        except PermissionError:
            continue  # O_NOATIME needs the file's owner: read it plainly
        except OSError:
            return None
    if fd < 0:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != entry.inode:
            return None
        # what its size says (+1: a file that grew since goes on below); a read of SMALL_FILE
        # bytes allocates and maps a MiB for a 40-byte ref (a quarter of listing a hub)
        want = min(SMALL_FILE, max(st.st_size, 0) + 1)
        data = os.read(fd, want)
        if len(data) == want < SMALL_FILE:
            data += os.read(fd, SMALL_FILE - want)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def _entry(rel: str, st: os.stat_result, target: str | None, block_unit: int) -> Entry:
    kind = st.st_mode & _IFMT
    return Entry(
        rel,
        kind == _IFDIR,
        kind == _IFLNK,
        kind == _IFREG,
        st.st_blocks * block_unit,
        st.st_atime,
        st.st_mtime,
        (st.st_dev, st.st_ino),
        st.st_nlink,
        target,
    )


# A big listing is shared among forked workers (Linux) once the parent has seen this many
# entries and queued `TASKS_PER_WORKER` folders per worker: below it, forking and sending the
# entries back (about 1.5 µs each) cost more than the listing they save (about 12 µs each).
PARALLEL_ENTRIES = 2048


def list_tree(root: str, *, rules: Rules = Rules(), workers: int | None = None,
              reads: Callable[[str], bool] | None = None) -> Tree:
    """List `root` (a real folder, not a link) and everything under it, as `du -x` would see it.

    Entries the rules keep are recorded in `kept` and not entered; with `only`, files outside
    it are kept too (exactly what the deleter would leave). `workers`: None = one process per
    usable CPU for a big tree (Linux); 1 = this process only; n > 1 = up to n processes even
    for a small one (the tests). The listing is the same whichever way it was made: entries
    and each folder's children in the order one process walks them. `reads(folder rel)`: the
    small files of the folders it accepts are read while they are open (`Tree.contents`, by
    the workers that list them), relative to the folder listed rather than by path later."""
    lister = _Lister(root, rules, workers, reads)
    lister.run()
    return lister.tree


class _Lister(TreeWalk):
    """A visitor of the one walker (`fs.walk`): folders are entered relative to their parent's
    descriptor and must be the folder listed; links are recorded with their target, never
    entered; another filesystem is left out (du -x)."""

    check_mounts = True

    def __init__(self, root: str, rules: Rules, workers: int | None = None,
                 reads: Callable[[str], bool] | None = None) -> None:
        super().__init__(root)
        # read relative to the folder where its descriptor is the OS's (elsewhere, Windows,
        # `read_small` reads each file by path after the listing, as it always did)
        self.reads = reads if self.ops.os_descriptors else None
        self.rules = rules
        self.has_rules = bool(rules.keep or rules.exclude or rules.only)
        self.tree = Tree(root=root)
        self.explicit = workers is not None and workers > 1
        self.workers = worker_count(workers, self.ops)
        self.dropped: list[str] = []  # deferred folders that could not be entered
        # the compiled per-folder loop (Linux) where no rule decides per name what is listed
        self.lister = self.ops.folder_lister() if not self.has_rules else None
        self.compiled = 0  # entries listed by it (not in `tree.entries` until `_walk_order`)

    def run(self) -> None:
        ops, tree = self.ops, self.tree
        try:
            top = ops.lstat_path(self.root)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                tree.errors.append(f"{self.root}: {exc.strerror}")
            return
        if not kinds.is_real_dir(top):
            tree.errors.append(f"{self.root}: not a folder")
            return
        tree.entries[""] = _entry("", top, None, ops.block_unit)
        self._walk_root(selected_all=not self.rules.only)
        self._drop(self.dropped)
        if self.lister is not None or (self.workers > 1 and self.ops.can_fork):
            self._walk_order()  # the compiled loop lists folders; or the top was opened
            # breadth first
        tree.errors.sort()  # by path: the same whichever way the tree was listed

    def _enter(self, parent: Frame | None, frame: Frame, listed: Any) -> None:
        if self.lister is None:  # (the compiled loop lists the folder itself)
            frame.names = self._list(frame)
        self.tree.children[frame.rel] = []
        if frame.data is not None:  # a deferred folder: whether its parent selected it all
            frame.selected_all = frame.data

    def _open(self, parent: Frame, name: str, rel: str, st: Any,
              data: Any = None) -> Frame | None:
        child = super()._open(parent, name, rel, st, data)
        if child is None and data is not None:  # listed when it was deferred: not after all
            self.dropped.append(rel)
        return child

    def _error(self, rel: str, exc: OSError) -> None:
        self.tree.errors.append(f"{self.path_of(rel)}: {exc.strerror}")

    def _skip(self, rel: str, reason: str, detail: str) -> None:
        if reason == "too deep":
            self.tree.errors.append(f"{self.path_of(rel)}: {detail}")
        # "other filesystem": not this cache's (du -x); "changed": replaced since listed

    def _scan(self, frame: Frame, frames: list[Frame], defer: list[Task] | None) -> bool:
        if self.lister is not None:
            return self._scan_compiled(frame, frames, defer, self.lister)
        ops, tree, rules = self.ops, self.tree, self.rules
        entries, unit = tree.entries, ops.block_unit
        full_stat = not ops.listing_identity  # Windows: identity and nlink only from lstat
        listed = tree.children[frame.rel]
        fd, names, prefix = frame.fd, frame.names, f"{frame.rel}/" if frame.rel else ""
        lstat, link_kind_of, has_rules = ops.lstat, kinds.link_kind_of, self.has_rules
        while frame.index < len(names):
            name = names[frame.index]
            frame.index += 1
            rel = prefix + name
            if has_rules and rules.kept(rel):
                tree.kept.add(rel)
                continue
            try:
                st = lstat(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    self._error(rel, exc)
                continue
            kind = st.st_mode & _IFMT
            link = link_kind_of(st) is not None
            if kind == _IFDIR and not link:  # a folder to walk into (`kinds.is_real_dir`)
                selected = frame.selected_all or (bool(rules.only) and rules.in_only(rel))
                if defer is not None:  # listed now, entered later (here or by a worker)
                    entry = entries[rel] = _entry(rel, st, None, unit)
                    listed.append(entry)
                    defer.append(Task(frame, name, rel, st, selected))
                    continue
                child = self._open(frame, name, rel, st)
                if child is None:
                    continue
                entry = entries[rel] = _entry(rel, st, None, unit)
                listed.append(entry)
                child.selected_all = selected
                frames.append(child)
                return True
            if not frame.selected_all and not rules.in_only(rel):
                tree.kept.add(rel)
                continue
            if full_stat:  # the deleter compares the planned inode of files and links alike
                try:
                    st = ops.lstat_full(name, dir_fd=fd)
                except OSError:
                    continue
            target = None
            if link:
                try:
                    target = ops.readlink(name, dir_fd=fd)
                except OSError:
                    target = None
            entry = entries[rel] = _entry(rel, st, target, unit)
            listed.append(entry)
        if self.reads is not None and self.reads(frame.rel):
            self._read_files(frame, listed)
        return False

    def _read_files(self, frame: Frame, listed: list[Entry]) -> None:
        """The small files of a folder `reads` accepts, read relative to its descriptor."""
        contents, start = self.tree.contents, len(frame.rel) + 1 if frame.rel else 0
        for entry in listed:
            if entry.is_file:
                text = read_text(entry.rel[start:], entry, frame.fd)
                if text is not None:
                    contents[entry.rel] = text

    def _scan_compiled(self, frame: Frame, frames: list[Frame], defer: list[Task] | None,
                       lister: seam.FolderLister) -> bool:
        """`_scan` through the compiled loop: the whole folder is listed at once, in listing
        order, straight into the folder's list (`tree.entries` is made from those lists by
        `_walk_order`); then its subfolders are walked one by one, like `_scan`'s."""
        listed = self.tree.children[frame.rel]
        pending = frame.pending
        if pending is None:
            prefix = f"{frame.rel}/" if frame.rel else ""
            try:
                entries, subdirs, failed = lister(frame.fd, prefix, Entry, self.ops.block_unit)
            except OSError as exc:
                self._error(frame.rel, exc)
                entries, subdirs, failed = [], [], []
            listed.extend(entries)
            self.compiled += len(entries)
            if self.reads is not None and self.reads(frame.rel):
                self._read_files(frame, entries)
            for name, code in failed:
                if code != errno.ENOENT:
                    self._error(prefix + name, OSError(code, os.strerror(code)))
            if defer is not None:  # listed now, entered later (here or by a worker)
                defer.extend(Task(frame, name, entry.rel, Listed(*entry.inode), True)
                             for name, entry in subdirs)
                frame.pending = []
                return False
            subdirs.reverse()
            pending = frame.pending = subdirs
        while pending:
            name, entry = pending.pop()
            child = self._open(frame, name, entry.rel, Listed(*entry.inode))
            if child is not None:
                frames.append(child)
                return True
            listed.remove(entry)  # not entered: not listed either, as `_scan` leaves it
        return False

    # forked workers (fs.walk) ----------------------------------------------------------------
    def _enough(self, ntasks: int, wanted: int) -> bool:
        return ntasks >= 2 and (self.explicit or (
            ntasks >= wanted and self._listed() >= PARALLEL_ENTRIES))

    def _worth_forking(self, ntasks: int) -> bool:
        return ntasks >= 2 and (self.explicit or self._listed() >= PARALLEL_ENTRIES)

    def _listed(self) -> int:
        return len(self.tree.entries) + self.compiled

    def _fresh(self) -> None:
        self.tree = Tree(root=self.root)
        self.dropped = []
        self.compiled = 0

    def _state(self) -> Any:
        """A worker's part: its entries folder by folder, each folder's in the order it listed
        them (msgpack: pickling structs one by one is 10 times slower; pickled when a name is
        not UTF-8), the folders it entered with how many entries each holds, what it kept,
        its errors, the deferred folders it could not enter and the files it read."""
        tree = self.tree
        listed = [entry for entries in tree.children.values() for entry in entries]
        encoded: bytes | list[Entry] = listed
        with contextlib.suppress(UnicodeEncodeError):  # a name not UTF-8 (surrogate escapes)
            encoded = msgspec.msgpack.encode(listed)  # ...is pickled instead
        counts = [(folder, len(entries)) for folder, entries in tree.children.items()]
        return encoded, counts, sorted(tree.kept), tree.errors, self.dropped, tree.contents

    def _absorb(self, state: Any) -> None:
        """A worker's folders join the listing as the lists it sent; `tree.entries` is left to
        `_walk_order`, which a forked listing always ends with (an entry by entry merge here
        was a fifth of listing a 2,000-repo hub)."""
        encoded, counts, kept, errors, dropped, contents = state
        tree = self.tree
        listed = encoded if isinstance(encoded, list) else msgspec.msgpack.decode(
            encoded, type=list[Entry])
        children, start = tree.children, 0
        for folder, count in counts:  # folders below a shared task: listed by this worker only
            children[folder] = listed[start:start + count]
            start += count
        tree.kept.update(kept)
        tree.errors.extend(errors)
        tree.contents.update(contents)
        self._drop(dropped)

    def _drop(self, rels: list[str]) -> None:
        """Deferred folders that were not entered leave the listing, as unlisted folders do
        (the compiled loop's are only in their parent's list)."""
        tree = self.tree
        for rel in rels:
            tree.entries.pop(rel, None)
            parent = tree.children.get(rel.rsplit("/", 1)[0] if "/" in rel else "")
            at = next((i for i, e in enumerate(parent or ()) if e.rel == rel), None)
            if parent is not None and at is not None:
                del parent[at]
        rels.clear()

    def _walk_order(self) -> None:
        """The entries in the order one process lists them (each folder, then its names in
        listing order, depth first), from the folders' lists: the parent opens the top
        breadth first, and workers finish in any order and send folders, not entries."""
        tree = self.tree
        ordered: dict[str, Entry] = {"": tree.entries[""]}
        children = tree.children
        stack = list(reversed(children.get("", ())))
        while stack:
            entry = stack.pop()
            ordered[entry.rel] = entry
            if entry.is_dir:
                stack.extend(reversed(children.get(entry.rel, ())))
        tree.entries = ordered
