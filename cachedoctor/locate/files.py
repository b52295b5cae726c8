"""What the resolution may read of the filesystem: a small read-only view.

`LiveFiles` reads this machine. Tests of Windows or macOS behaviour on Linux give a
`DictFiles` (paths of any OS mapped to texts, links and folders), so "given these files, the
cache is here" is a pure function of its inputs. `CACHEDOCTOR_SYSTEM_ROOT` (for tests and
containers only) makes system-wide files (`/etc`, `/usr`, `/run`, `/Library`) be read below
another folder, so a test never needs the real `/etc`.
"""

from __future__ import annotations

import fnmatch
import glob as _glob
import ntpath
import os
from collections.abc import Mapping
from typing import Protocol

import msgspec

SYSTEM_ROOT_ENV = "CACHEDOCTOR_SYSTEM_ROOT"
_SYSTEM_TREES = ("/etc/", "/usr/", "/lib/", "/run/", "/Library/", "/opt/")
MAX_CONFIG_BYTES = 8 << 20  # a settings file bigger than this is not read (it is not one)


class FileView(Protocol):
    def read_text(self, path: str) -> str | None:
        """The file's text (UTF-8, undecodable bytes escaped), None when missing or unreadable."""

    def lexists(self, path: str) -> bool: ...

    def isdir(self, path: str) -> bool:
        """A folder, following links (a broken link is not)."""

    def link(self, path: str) -> tuple[str, str] | None:
        """(kind, absolute target) when `path` itself is a symlink or junction."""

    def glob(self, pattern: str) -> list[str]: ...

    def realpath(self, path: str) -> str: ...


def system_root() -> str:
    return os.environ.get(SYSTEM_ROOT_ENV) or ""


def system_path(path: str, root: str | None = None) -> str:
    """`path` below the system root when it is a system-wide file and a root is set."""
    prefix = system_root() if root is None else root
    if prefix and path.startswith(_SYSTEM_TREES):
        return os.path.join(prefix, path.lstrip("/"))
    return path


class LiveFiles(msgspec.Struct):
    """This machine's files (system-wide ones below `root` when one is set)."""

    root: str | None = None

    def _p(self, path: str) -> str:
        return system_path(path, self.root)

    def read_text(self, path: str) -> str | None:
        try:
            with open(self._p(path), "rb") as fh:
                data = fh.read(MAX_CONFIG_BYTES + 1)
        except (OSError, ValueError):
            return None
        if len(data) > MAX_CONFIG_BYTES:
            return None
        return data.decode("utf-8", "surrogateescape")

    def lexists(self, path: str) -> bool:
        try:
            return os.path.lexists(self._p(path))
        except (OSError, ValueError):
            return False

    def isdir(self, path: str) -> bool:
        try:
            return os.path.isdir(self._p(path))
        except (OSError, ValueError):
            return False

    def link(self, path: str) -> tuple[str, str] | None:
        from cachedoctor.links import link_kind, link_target

        kind = link_kind(self._p(path))
        if kind is None:
            return None
        return kind, link_target(self._p(path)) or ""

    def glob(self, pattern: str) -> list[str]:
        """Matches as this view names them (below the system root, without its prefix)."""
        mapped = self._p(pattern)
        found = sorted(_glob.glob(mapped))
        if mapped == pattern:
            return found
        prefix = mapped[: len(mapped) - len(pattern)]
        return [path[len(prefix):] if path.startswith(prefix) else path for path in found]

    def realpath(self, path: str) -> str:
        try:
            return os.path.realpath(path)
        except (OSError, ValueError):
            return path


class DictFiles(msgspec.Struct):
    """Files of any OS as plain data: for pure tests of Windows and macOS resolution.

    `texts`: path -> content; `dirs`: folders that exist; `links`: path -> (kind, target).
    Paths compare case-insensitively when `windows` is set."""

    texts: Mapping[str, str] = msgspec.field(default_factory=dict)
    dirs: frozenset[str] = frozenset()
    links: Mapping[str, tuple[str, str]] = msgspec.field(default_factory=dict)
    windows: bool = False

    def _k(self, path: str) -> str:
        return ntpath.normcase(ntpath.normpath(path)) if self.windows else os.path.normpath(path)

    def _find(self, table: Mapping[str, object], path: str) -> object | None:
        want = self._k(path)
        for key, value in table.items():
            if self._k(key) == want:
                return value
        return None

    def read_text(self, path: str) -> str | None:
        found = self._find(self.texts, path)
        return found if isinstance(found, str) else None

    def lexists(self, path: str) -> bool:
        return self.read_text(path) is not None or self._is_dir(path) or self.link(path) is not None

    def _is_dir(self, path: str) -> bool:
        return any(self._k(d) == self._k(path) for d in self.dirs)

    def isdir(self, path: str) -> bool:
        target = self.link(path)
        return self._is_dir(target[1]) if target else self._is_dir(path)

    def link(self, path: str) -> tuple[str, str] | None:
        found = self._find(self.links, path)
        return found if isinstance(found, tuple) else None

    def glob(self, pattern: str) -> list[str]:
        """Like glob.glob: a wildcard matches within one path component."""
        import fnmatch

        sep = "\\" if self.windows else "/"
        want = self._k(pattern).split(sep)
        found = set()
        for name in [*self.texts, *self.dirs, *self.links]:
            parts = self._k(name).split(sep)
            if len(parts) == len(want) and all(
                    fnmatch.fnmatchcase(p, w) for p, w in zip(parts, want, strict=True)):
                found.add(name)
        return sorted(found)

    def realpath(self, path: str) -> str:
        target = self.link(path)
        return target[1] if target else path


class OverlayFiles(msgspec.Struct, frozen=True):
    """A FileView with some files' texts replaced (None: the file removed): the files as a
    change would leave them, for resolving the world after it before anything is written."""

    base: FileView
    texts: Mapping[str, str | None]

    def read_text(self, path: str) -> str | None:
        if path in self.texts:
            return self.texts[path]
        return self.base.read_text(path)

    def lexists(self, path: str) -> bool:
        if path in self.texts:
            return self.texts[path] is not None
        return self.base.lexists(path)

    def isdir(self, path: str) -> bool:
        return path not in self.texts and self.base.isdir(path)

    def link(self, path: str) -> tuple[str, str] | None:
        return None if path in self.texts else self.base.link(path)

    def glob(self, pattern: str) -> list[str]:
        found = [p for p in self.base.glob(pattern) if self.texts.get(p, "") is not None]
        added = [p for p, text in self.texts.items() if text is not None and p not in found
                 and fnmatch.fnmatchcase(p, pattern)]
        return sorted(found + added) if added else found

    def realpath(self, path: str) -> str:
        return self.base.realpath(path)
