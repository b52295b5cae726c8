"""OS doubles: Windows, macOS and WSL as their documentation says they behave, on Linux.

Each double stands in for the *OS calls* under one of cachedoctor's seams; the seam's own code
(`cachedoctor.fs.windows.WindowsOps`, `cachedoctor.fs.posix.MacOps`, `cachedoctor.host`,
`cachedoctor.resolve`, the registry and task-scheduler seams) is the code the Windows and macOS
CI jobs run. Every behaviour is cited where it is written down.

`install(kind, state)` puts a double under this process's seam; subprocesses (the CLI under
test) get the same through `site/sitecustomize.py` when `CACHEDOCTOR_TEST_DOUBLE` and
`CACHEDOCTOR_TEST_DOUBLE_STATE` are set (`subprocess_env`).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SITE = Path(__file__).resolve().parent / "site"
KIND_ENV = "CACHEDOCTOR_TEST_DOUBLE"
STATE_ENV = "CACHEDOCTOR_TEST_DOUBLE_STATE"


KINDS = ("windows", "macos")


def install(kind: str, state: str | os.PathLike[str], *, process_wide: bool = True) -> Any:
    """Install the `kind` double ("windows" or "macos") under the tree layer's seam; returns the
    double's API object (the test's handle on it). `process_wide` (a child process) also makes
    `os` look like macOS's for copying; in pytest, `installed` does that reversibly."""
    from cachedoctor.fs import seam

    if kind == "windows":
        from cachedoctor.fs.windows import WindowsOps
        from tests.doubles.windows import WindowsApi

        api: Any = WindowsApi(Path(state))
        ops = WindowsOps(api)
        ops.retry_delays = (0.001, 0.002, 0.004, 0.008)  # the same loop, shorter waits
        seam.use(ops)
        return api
    if kind == "macos":
        from cachedoctor.fs.posix import MacOps
        from tests.doubles.macos import MacApi, forbid_linux_copy_calls

        api = MacApi(Path(state))
        if process_wide:
            forbid_linux_copy_calls()
        seam.use(MacOps(api))
        return api
    raise ValueError(f"no such double: {kind}")


def subprocess_env(kind: str, state: str | os.PathLike[str]) -> dict[str, str]:
    """Environment entries that make a child Python process install the same double."""
    path = os.environ.get("PYTHONPATH", "")
    return {KIND_ENV: kind, STATE_ENV: str(state),
            "PYTHONPATH": os.pathsep.join(p for p in (str(SITE), path) if p)}


def _enotsock(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
    raise OSError(errno.ENOTSOCK, "Socket operation on non-socket")  # macOS sendfile(2)


@contextlib.contextmanager
def installed(kind: str, state: Path, monkeypatch: Any) -> Iterator[Any]:
    """The double for one test: in this process (its `os` changes undone by `monkeypatch`) and
    in every CLI process the test starts; the native seam comes back afterwards."""
    from cachedoctor.fs import seam

    previous = seam.use(None)
    if kind == "macos":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
        monkeypatch.setattr(os, "sendfile", _enotsock)
    api = install(kind, state, process_wide=False)
    for key, value in subprocess_env(kind, state).items():
        monkeypatch.setenv(key, value)
    try:
        yield api
    finally:
        seam.use(previous)
