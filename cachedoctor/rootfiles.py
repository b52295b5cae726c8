"""Writing a system-wide file the user may not write (a browser's managed policy in /etc).

The move, tune or restore runs as the user (their home, state, journal and history); only this
one step needs root. It is done directly when this process may write the file's folder (root,
or a test's sandbox). Otherwise it is done by sudo(8), as plain commands the plan shows before
they run (`commands`): the new text is staged in cachedoctor's state folder, `sudo install -D
-m 0644` puts it next to the target and `sudo mv -f` renames it over the target (so the browser
reads the old file or the new one, never half of one); removing is `sudo rm -f`. Without a
terminal to ask for the password on, sudo runs with `-n` and fails instead of waiting. The
callers' steps are idempotent and journaled (the policy method re-runs `apply` or `revert`), so
a run interrupted between the commands is finished or rolled back by the next one. Without
sudo on PATH, `route` says so and callers refuse before anything changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from cachedoctor.errors import OperationFailed, RefusedError
from cachedoctor.relocate import faults

Route = Literal["direct", "sudo", "none"]
NEW_SUFFIX = ".cachedoctor-new"


def may_write(folder: str) -> bool:
    """Whether this process may create and replace files in `folder`."""
    return os.access(folder, os.W_OK)


def route(path: str) -> Route:
    """How `path` can be written: directly, through sudo, or not at all."""
    from cachedoctor.drives import nearest_existing

    if may_write(nearest_existing(os.path.dirname(path))):
        return "direct"
    return "sudo" if shutil.which("sudo") else "none"


def staged(path: str) -> Path:
    """Where the new text of `path` waits for `sudo install` (one name per target)."""
    from cachedoctor.state import state_dir

    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return state_dir() / "staged" / f"{digest}-{os.path.basename(path)}"


def write_commands(path: str) -> list[list[str]]:
    new = path + NEW_SUFFIX
    return [["sudo", "install", "-D", "-m", "0644", str(staged(path)), new],
            ["sudo", "mv", "-f", new, path]]


def remove_commands(path: str) -> list[list[str]]:
    return [["sudo", "rm", "-f", "--", path + NEW_SUFFIX, path]]


def shown(commands: list[list[str]]) -> str:
    """The commands as the user would type them."""
    return " && ".join(shlex.join(argv) for argv in commands)


def needs_root(path: str, *, alternative: str = "") -> RefusedError:
    return RefusedError(f"writing {path} needs root, and sudo was not found; nothing was changed",
                        hint="run the same command as root" + alternative)


def write(path: str, text: str) -> None:
    """Replace `path` with `text` (mode 0644, folders 0755), through sudo when it must be."""
    how = route(path)
    if how == "direct":
        from cachedoctor.fsutil import atomic_write_text

        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        atomic_write_text(path, text, mode=0o644)
        return
    if how == "none":
        raise needs_root(path)
    from cachedoctor.fsutil import atomic_write_text

    source = staged(path)
    atomic_write_text(source, text, mode=0o644)
    try:
        _sudo(write_commands(path))
    finally:
        with contextlib.suppress(FileNotFoundError):
            source.unlink()


def remove(path: str) -> None:
    """Delete `path` if it is there (and a new text an interrupted `write` left beside it),
    through sudo when it must be."""
    how = route(path)
    if how == "direct":
        for leftover in (path + NEW_SUFFIX, path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    elif how == "none":
        raise needs_root(path)
    else:
        _sudo(remove_commands(path))


def authorise(paths: list[str]) -> None:
    """Ask sudo for the password now (`sudo -v`) when one of `paths` will be written through it
    and there is a terminal to ask on: later, a progress line would be drawn over the prompt.
    A refusal stops here, before anything has changed. Without a terminal sudo runs with -n
    when the step comes."""
    if not any(route(path) == "sudo" for path in paths) or not _has_terminal():
        return
    try:
        done = subprocess.run(["sudo", "-v"], check=False)
    except OSError as exc:
        raise OperationFailed(f"could not run sudo: {exc.strerror or exc}") from None
    if done.returncode != 0:
        raise RefusedError(f"sudo did not allow writing {', '.join(paths)}; nothing was changed",
                           hint="run the command again and give sudo your password, or use "
                                "--method link")


def _sudo(commands: list[list[str]]) -> None:
    ask = _has_terminal()
    for argv in commands:
        faults.point(f"sudo-{argv[1]}")  # a crash between the commands: see the module docstring
        run = argv if ask else [argv[0], "-n", *argv[1:]]
        try:
            done = subprocess.run(run, stdin=subprocess.DEVNULL if not ask else None,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  check=False)
        except OSError as exc:
            raise OperationFailed(f"could not run sudo: {exc.strerror or exc}") from None
        if done.returncode != 0:
            said = done.stderr.strip().splitlines()
            raise OperationFailed(
                f"`{shlex.join(argv)}` failed ({said[-1] if said else f'exit code {done.returncode}'})",
                hint="run cachedoctor in a terminal, where sudo can ask for your password "
                     "(or run `sudo -v` first)")


def _has_terminal() -> bool:
    """Whether sudo can ask for a password: it asks on the controlling terminal, and only a
    process in that terminal's foreground may read it (a job put in the background with `&`
    would be stopped by SIGTTIN until the user brings it back)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)
