"""The index of validated profiles: what each profile file validated to, kept between runs.

Parsing YAML and validating every profile took most of a command's start-up; the index keeps
each file's outcome (its `Profile`, or the exact `ProfileError`s it gave) keyed by the file's
path, size, mtime, ctime and inode, and is valid only for the cachedoctor version, the Python
and msgspec versions and the validating code it was written with. Any change re-validates that
file; a damaged or foreign index is ignored and rewritten, silently. A file modified in the last
seconds is not recorded (a second edit of the same size within the timestamp granularity would
otherwise go unseen, as in git's "racy" index entries).

The file holds two parts, each read without reading the other: the length of the first, then
the names of each valid profile (id, aliases, location ids: plain data, in `marshal`, which is
built into the interpreter), then the outcomes (a pickle of the model's structs). Shell
completion reads only the names (`read_names`), so a Tab imports neither msgspec, the profile
model nor pickle; a command reads only the outcomes, skipping the names unread.
"""

from __future__ import annotations

import functools
import marshal
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from cachedoctor.profiles.loader import ProfileError, ToolNames
    from cachedoctor.profiles.model import Profile

Outcome = Union["Profile", list["ProfileError"]]
_FORMAT = 3
_LENGTH_BYTES = 8  # the names part's length, little-endian, starts the file
_NAMES_LIMIT = 1 << 24  # a names part larger than this is damage, not profiles
_RACY_NS = 3_000_000_000  # mtimes this close to now are not trusted yet
_FileKey = tuple[int, int, int, int]


def index_path() -> Path:
    """In cachedoctor's state folder, not the user cache folder, where `scan` would list it."""
    from cachedoctor.state import install_file

    return install_file("profile-index.pickle")


def file_key(st: os.stat_result) -> _FileKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _stamp() -> tuple[Any, ...]:
    """What every outcome in the index was computed with (its classes are msgspec structs)."""
    import msgspec

    return (*code_stamp(), msgspec.__version__)


@functools.cache
def code_stamp() -> tuple[Any, ...]:
    """The code running: cachedoctor's version, the Python and every module of the package
    (what the names in the index, and the completion spec, were computed with). Taken once
    per process: the modules imported do not change while it runs."""
    from cachedoctor import __version__

    # Every module of the package: validation reaches into many (the method, format, unit and
    # condition registries), and an outcome is a pickle of its classes. A change to any of them
    # in a checkout re-validates. One listing per folder, `__pycache__` not entered, and the
    # stat each listing entry makes (os.walk and a stat by path took twice as long).
    code: list[tuple[str | int, ...]] = []
    _stat_modules(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "", code)
    return (_FORMAT, __version__, sys.version, tuple(code))


def _stat_modules(folder: str, prefix: str, code: list[tuple[str | int, ...]]) -> None:
    """Append (relative name, size, mtime, ctime, inode) of every `.py` below `folder`, in name
    order; a file that cannot be stat'ed is there by name alone, a folder that cannot be listed
    is left out."""
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        name = prefix + entry.name
        if _is_dir(entry):  # as os.walk sorts it: a link to a folder is one, never entered
            if entry.name != "__pycache__" and not entry.is_symlink():
                _stat_modules(entry.path, name + "/", code)
        elif entry.name.endswith(".py"):
            try:
                st = entry.stat()
                # Windows' listing gives no inode (st_ino 0): entry.inode() stats for it there
                code.append((name, *file_key(st)[:3], st.st_ino or entry.inode()))
            except OSError:
                code.append((name,))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


class ProfileIndex:
    """Use as `with ProfileIndex.open() as index: index.outcome(path, load)`; the index is
    written back on leaving when an outcome was computed."""

    def __init__(self, path: Path, stamp: tuple[Any, ...],
                 entries: dict[str, tuple[_FileKey, Outcome]]) -> None:
        self.path, self.stamp, self.entries = path, stamp, entries
        self.changed = False

    @classmethod
    def open(cls) -> ProfileIndex:
        path, stamp = index_path(), _stamp()
        return cls(path, stamp, _read(path, stamp))

    def outcome(self, path: Path, load: Callable[[Path], Profile]) -> Outcome:
        """The profile `path` validates to, or its errors: from the index when the file is
        unchanged, else by `load` (which raises ProfileFileError)."""
        from cachedoctor.profiles.loader import ProfileFileError

        name = str(path)
        try:
            key: _FileKey | None = file_key(os.stat(path))
        except OSError:
            key = None
        known = self.entries.get(name)
        if key is not None and known is not None and known[0] == key:
            return known[1]
        outcome: Outcome
        try:
            outcome = load(path)
        except ProfileFileError as exc:
            outcome = exc.errors
        if key is not None and time.time_ns() - key[1] > _RACY_NS:
            self.entries[name] = (key, outcome)
            self.changed = True
        return outcome

    def __enter__(self) -> ProfileIndex:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None and self.changed:
            self.entries = {name: entry for name, entry in self.entries.items()
                            if os.path.exists(name)}
            names = {name: (key, _names(outcome)) for name, (key, outcome) in self.entries.items()}
            # the names part carries the code stamp alone: reading it needs no msgspec
            _write(self.path, (self.stamp[:-1], names), (self.stamp, self.entries))


def _names(outcome: Outcome) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """A valid profile's `ToolNames` as the plain tuple marshal keeps; None for errors."""
    from cachedoctor.profiles.loader import names_of

    return None if isinstance(outcome, list) else tuple(names_of(outcome))  # type: ignore[return-value]


def read_names() -> dict[str, tuple[_FileKey, ToolNames | None]]:
    """The names part of the index: {file: (its key, its profile's names, or None when it is
    not valid)}; empty when there is no usable index."""
    from cachedoctor.profiles.loader import ToolNames

    def load(file: IO[bytes], length: int) -> Any:
        data = file.read(length)
        if len(data) != length:
            raise EOFError("the index ends inside its names")
        saved = marshal.loads(data)
        if not isinstance(saved, tuple) or len(saved) != 2 or not isinstance(saved[1], dict):
            return saved
        stamp, entries = saved
        return stamp, {name: (tuple(key), None if names is None else ToolNames(*names))
                       for name, (key, names) in entries.items()}

    return _read(index_path(), code_stamp(), load)


def _unpickle(file: IO[bytes], length: int) -> Any:
    """The outcomes part, past the names. By the C unpickler alone where the interpreter has it:
    `pickle` (its Python twin, and the tables it builds) is 1.6 ms more of every start."""
    file.seek(_LENGTH_BYTES + length)
    try:
        from _pickle import load
    except ImportError:  # an interpreter without CPython's accelerator
        from pickle import load
    return load(file)


def _read(path: Path, stamp: tuple[Any, ...],
          load: Callable[[IO[bytes], int], Any] = _unpickle) -> dict[str, Any]:
    """The entries of one part of the index at `path` (`load` reads it from the file, given the
    names part's length: `_unpickle` the outcomes, `read_names` the names), or none when it is
    missing, damaged, written by other code, or could have been written by another user (it
    holds a pickle: only a file this user owns and only this user can write is read,
    `open_own`)."""
    from cachedoctor.fsutil import open_own

    try:
        opened = open_own(path)
        if opened is None:
            return {}
        with opened as file:
            length = int.from_bytes(file.read(_LENGTH_BYTES), "little")
            if length > _NAMES_LIMIT:
                return {}
            saved_stamp, entries = load(file, length)
            if saved_stamp != stamp or not isinstance(entries, dict):
                return {}
            from cachedoctor.state import mark_used

            mark_used(file, path)
    except Exception:  # missing, unreadable, truncated, from other code: rebuilt
        return {}
    return entries


def _write(path: Path, names: Any, outcomes: Any) -> None:
    """Replace the index atomically; a cache folder that cannot be written only costs speed."""
    import pickle  # only when the index is rewritten

    try:
        data = marshal.dumps(names)
        document = pickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL)
    except (ValueError, pickle.PicklingError):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when the index is rewritten: 3 ms of every start otherwise

        fd, temp = tempfile.mkstemp(prefix=".profile-index.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(len(data).to_bytes(_LENGTH_BYTES, "little"))
                file.write(data)
                file.write(document)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError:
        return
    from cachedoctor.state import prune_other_installs

    prune_other_installs(path)
