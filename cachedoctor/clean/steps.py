"""Running a unit's deletion steps with the fd-relative deleter (`safedelete.clean_tree`).

Each step aims the deleter at one folder of the location, with that folder's identity as
listed (`expect`: a folder replaced by a link or another folder since is refused), the entries
the rules keep excluded, and either everything below it or exactly the named entries (each
checked against the inode listed). `remove_base` then removes the emptied folder itself —
relative to its parent's descriptor, opened without following links, and only if it is still
the folder listed (`rmdir` never removes a folder that is not empty).
"""

from __future__ import annotations

import errno
import os

import msgspec

from cachedoctor.cacheunits import Step, Tree
from cachedoctor.safedelete import FileInfo, Rules, Skipped, clean_tree

_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
              | getattr(os, "O_CLOEXEC", 0))
FORK_ABOVE = 4096  # entries below a step's folder before the deleter may fork workers


class StepsOutcome(msgspec.Struct):
    files: int = 0
    dirs: int = 0
    bytes: int = 0  # the deleter's own count (measured figures come from re-measuring)
    skipped: list[Skipped] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)
    complete: bool = True

    def add(self, other: StepsOutcome) -> None:
        self.files += other.files
        self.dirs += other.dirs
        self.bytes += other.bytes
        self.skipped.extend(other.skipped)
        self.errors.extend(other.errors)
        self.complete = self.complete and other.complete


def run_steps(root: str, tree: Tree, steps: list[Step], *, trash: bool) -> StepsOutcome:
    """Run the steps in order; stop at the first one that left something it was given."""
    outcome = StepsOutcome()
    for step in steps:
        done = run_step(root, tree, step, trash=trash)
        outcome.add(done)
        if not done.complete:
            break
    return outcome


def run_step(root: str, tree: Tree, step: Step, *, trash: bool) -> StepsOutcome:
    outcome = StepsOutcome()
    base = tree.get(step.base)
    if base is None or not base.is_dir:
        return outcome  # already gone
    prefix = f"{step.base}/" if step.base else ""
    kept = frozenset(k[len(prefix):] for k in tree.kept if k.startswith(prefix))
    names = step.names

    def select(info: FileInfo) -> bool:
        assert names is not None
        return names.get(prefix + info.rel) == info.ino

    size = sum(1 for _ in tree.below(step.base)) if names is None else len(names)
    done = clean_tree(
        os.path.join(root, step.base) if step.base else root,
        rules=Rules(exclude=kept),
        select=None if names is None else select,
        trash=trash,
        expect=(base.dev, base.ino),
        workers=None if size > FORK_ABOVE else 1,
    )
    outcome.files, outcome.dirs, outcome.bytes = done.files, done.dirs, done.bytes
    outcome.skipped, outcome.errors = list(done.skipped), list(done.errors)
    outcome.complete = not done.errors and not done.skipped
    if outcome.complete and step.remove_base and step.base and not kept:
        error = remove_folder(root, tree, step.base)
        if error is None:
            outcome.dirs += 1
        elif error:
            outcome.errors.append(error)
            outcome.complete = False
    return outcome


def remove_folder(root: str, tree: Tree, rel: str) -> str | None:
    """rmdir `rel` through descriptors opened without following links, each folder on the way
    checked against the listing. None when removed, '' when it is not empty any more (something
    arrived meanwhile: it stays), or the error."""
    parts = rel.split("/")
    if not (os.open in os.supports_dir_fd and os.rmdir in os.supports_dir_fd):  # pragma: no cover
        return _remove_folder_by_path(root, tree, rel)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        return f"{root}: {exc.strerror}"
    try:
        walked = ""
        for part in parts[:-1]:
            walked = f"{walked}/{part}" if walked else part
            entry = tree.get(walked)
            sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = sub
            st = os.fstat(fd)
            if entry is None or (st.st_dev, st.st_ino) != entry.inode:
                return f"{os.path.join(root, walked)}: replaced since it was listed; left alone"
        entry = tree.get(rel)
        st = os.lstat(parts[-1], dir_fd=fd)
        if entry is None or (st.st_dev, st.st_ino) != entry.inode:
            return f"{os.path.join(root, rel)}: replaced since it was listed; left alone"
        os.rmdir(parts[-1], dir_fd=fd)
        return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return ""
        return f"{os.path.join(root, rel)}: {exc.strerror}"
    finally:
        os.close(fd)


def _remove_folder_by_path(root: str, tree: Tree, rel: str) -> str | None:  # pragma: no cover
    from cachedoctor.safedelete import is_reparse_point

    path = os.path.join(root, *rel.split("/"))
    try:
        st = os.lstat(path)
        if is_reparse_point(st):
            return f"{path}: became a link; left alone"
        os.rmdir(path)
        return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) or getattr(exc, "winerror", 0) == 145:
            return ""
        return f"{path}: {exc.strerror}"
