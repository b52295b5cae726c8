"""A read-only, link-proof listing of one cache location, entry by entry.

Units need what the totals of `cachedoctor.walker` and the file list of `safedelete.walk_files`
do not give: every folder with its own blocks (so a unit's size equals `du -s` of it), the
target of every symbolic link (a Hugging Face snapshot names its blob through one), and each
inode's names inside the location (a hard link whose other names live outside frees nothing).

The walk is relative to open folder descriptors (`O_NOFOLLOW`, the folder's identity checked
against its listing), never follows a link, never enters another filesystem (like `du -x`) nor a
folder the rules exclude (another location nested in this one, a `keep:` glob). Only `lstat`,
`readlink` and `listdir` are used: nothing is opened for reading, so no access time moves
except the folders' own (and a link's, where the kernel counts `readlink` as a use: see
`Clock`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from cachedoctor.safedelete import Rules

_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
_FD_WALK = os.listdir in os.supports_fd and os.stat in os.supports_dir_fd
_HAS_BLOCKS = hasattr(os.stat_result, "st_blocks")
_IFMT, _IFDIR, _IFLNK, _IFREG = 0o170000, stat.S_IFDIR, stat.S_IFLNK, stat.S_IFREG


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry below the root (`rel` '/'-separated; the root itself is '')."""

    rel: str
    is_dir: bool
    is_link: bool
    is_file: bool  # a regular file
    size: int  # allocated bytes (st_blocks * 512; st_size where blocks are unknown)
    atime: float
    mtime: float
    dev: int
    ino: int
    nlink: int
    target: str | None = None  # what a symbolic link says (never followed)

    @property
    def inode(self) -> tuple[int, int]:
        return (self.dev, self.ino)

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]


@dataclass
class Tree:
    """Every entry of a location; `kept` are the entries the rules keep (not entered)."""

    root: str
    entries: dict[str, Entry] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)  # folder rel -> child names
    kept: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    _names: dict[tuple[int, int], int] | None = None

    def get(self, rel: str) -> Entry | None:
        return self.entries.get(rel)

    def child_rels(self, rel: str) -> list[str]:
        prefix = f"{rel}/" if rel else ""
        return [prefix + name for name in self.children.get(rel, ())]

    def below(self, rel: str) -> Iterator[Entry]:
        """`rel` and everything under it (an entry that is not listed yields nothing)."""
        entries = self.entries
        entry = entries.get(rel)
        if entry is None:
            return
        stack = [entry]
        while stack:
            current = stack.pop()
            yield current
            if current.is_dir:
                prefix = f"{current.rel}/" if current.rel else ""
                for name in self.children.get(current.rel, ()):
                    child = entries.get(prefix + name)
                    if child is not None:
                        stack.append(child)

    def kept_below(self, rel: str) -> list[str]:
        prefix = f"{rel}/" if rel else ""
        return [k for k in self.kept if not rel or k.startswith(prefix)]

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
        """The rel a link points at when it stays inside the root, else None."""
        if link.target is None or os.path.isabs(link.target) or "\\" in link.target:
            return None
        parent = link.rel.rsplit("/", 1)[0] if "/" in link.rel else ""
        joined = os.path.normpath(os.path.join(parent, link.target)).replace(os.sep, "/")
        if joined == "." or joined.startswith("../") or joined == "..":
            return None
        return joined

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


def _entry(rel: str, st: os.stat_result, target: str | None) -> Entry:
    kind = st.st_mode & _IFMT
    return Entry(
        rel,
        kind == _IFDIR,
        kind == _IFLNK,
        kind == _IFREG,
        st.st_blocks * 512 if _HAS_BLOCKS else st.st_size,
        st.st_atime,
        st.st_mtime,
        st.st_dev,
        st.st_ino,
        st.st_nlink,
        target,
    )


def list_tree(root: str, *, rules: Rules = Rules()) -> Tree:
    """List `root` (a real folder, not a link) and everything under it, as `du -x` would see it.

    Entries the rules keep are recorded in `kept` and not entered; with `only`, files outside
    it are kept too (exactly what the deleter would leave)."""
    tree = Tree(root=root)
    try:
        top = os.lstat(root)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            tree.errors.append(f"{root}: {exc.strerror}")
        return tree
    if not stat.S_ISDIR(top.st_mode):
        tree.errors.append(f"{root}: not a folder")
        return tree
    tree.entries[""] = _entry("", top, None)
    if _FD_WALK:
        _walk_fd(tree, top, rules)
    else:  # pragma: no cover - Windows: path-based, links never entered
        _walk_paths(tree, top, rules)
    return tree


def _walk_fd(tree: Tree, top: os.stat_result, rules: Rules) -> None:
    """Each folder is opened when its turn comes, relative to the root's descriptor, and must be
    the folder listed (device and inode): only two descriptors are ever open, however wide the
    tree (a hub of 10,000 repos), and a folder swapped for a link or another folder is left out."""
    try:
        root_fd = os.open(tree.root, _DIR_FLAGS)
    except OSError as exc:
        tree.errors.append(f"{tree.root}: {exc.strerror}")
        return
    dev = top.st_dev
    has_rules = bool(rules.keep or rules.exclude or rules.only)
    entries, kept, children = tree.entries, tree.kept, tree.children
    lstat, readlink = os.lstat, os.readlink
    stack: list[tuple[str, bool]] = [("", not rules.only)]
    try:
        while stack:
            rel, selected_all = stack.pop()
            if rel:
                try:
                    fd = os.open(rel, _DIR_FLAGS, dir_fd=root_fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                        tree.errors.append(f"{os.path.join(tree.root, rel)}: {exc.strerror}")
                    del entries[rel]
                    continue
                opened = os.fstat(fd)
                if (opened.st_dev, opened.st_ino) != entries[rel].inode:
                    os.close(fd)
                    del entries[rel]  # replaced since it was listed
                    continue
            else:
                fd = root_fd
            try:
                names = os.listdir(fd)
            except OSError as exc:
                tree.errors.append(f"{os.path.join(tree.root, rel)}: {exc.strerror}")
                names = []
            listed: list[str] = []
            prefix = f"{rel}/" if rel else ""
            try:
                for name in names:
                    child = prefix + name
                    if has_rules and rules.kept(child):
                        kept.add(child)
                        continue
                    try:
                        st = lstat(name, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno != errno.ENOENT:
                            tree.errors.append(f"{os.path.join(tree.root, child)}: {exc.strerror}")
                        continue
                    kind = st.st_mode & _IFMT
                    if kind == _IFDIR:
                        if st.st_dev != dev:
                            continue  # another filesystem: not this cache's (du -x)
                        entries[child] = _entry(child, st, None)
                        listed.append(name)
                        stack.append(
                            (child, selected_all or (bool(rules.only) and rules.in_only(child))))
                        continue
                    if not selected_all and not rules.in_only(child):
                        kept.add(child)
                        continue
                    target = None
                    if kind == _IFLNK:
                        try:
                            target = readlink(name, dir_fd=fd)
                        except OSError:
                            target = None
                    entries[child] = _entry(child, st, target)
                    listed.append(name)
            finally:
                if fd != root_fd:
                    os.close(fd)
            children[rel] = listed
    finally:
        os.close(root_fd)


def _walk_paths(tree: Tree, top: os.stat_result, rules: Rules) -> None:  # pragma: no cover
    from cachedoctor.safedelete import is_reparse_point

    stack: list[tuple[str, bool]] = [("", not rules.only)]
    while stack:
        rel, selected_all = stack.pop()
        folder = os.path.join(tree.root, rel) if rel else tree.root
        try:
            names = os.listdir(folder)
        except OSError as exc:
            tree.errors.append(f"{folder}: {exc.strerror}")
            continue
        listed: list[str] = []
        prefix = f"{rel}/" if rel else ""
        for name in names:
            child = prefix + name
            if rules.kept(child):
                tree.kept.add(child)
                continue
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            link = is_reparse_point(st)
            if stat.S_ISDIR(st.st_mode) and not link:
                if st.st_dev != top.st_dev:
                    continue
                tree.entries[child] = _entry(child, st, None)
                listed.append(name)
                stack.append((child, selected_all or (bool(rules.only) and rules.in_only(child))))
                continue
            if not selected_all and not rules.in_only(child):
                tree.kept.add(child)
                continue
            target = None
            if link:
                try:
                    target = os.readlink(os.path.join(folder, name))
                except OSError:
                    target = None
            tree.entries[child] = _entry(child, st, target)
            listed.append(name)
        tree.children[rel] = listed
