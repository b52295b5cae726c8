"""Error types that carry the exit code the CLI returns.

The core raises these; the CLI turns them into one clear message and the code below,
never a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1  # the operation ran but failed or was partial (copy error, ENOSPC, unreadable dirs)
EXIT_BAD_INPUT = 2  # bad arguments, invalid profile or config file, refused target
EXIT_INTERRUPTED = 130  # Ctrl-C


class CachedoctorError(Exception):
    """Base class: a message meant for the user and the exit code to leave with."""

    exit_code = EXIT_FAILED
    kind = "failed"  # the `errors[].kind` of a --json envelope (docs/json.md)

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UserInputError(CachedoctorError, ValueError):
    """The user asked for something invalid: unknown tool, malformed size, bad path.

    Also a ValueError, so a profile check may raise it for an invalid value."""

    exit_code = EXIT_BAD_INPUT
    kind = "bad_input"


class RefusedError(CachedoctorError):
    """A safety rule refuses the request (protected root, tool running, target inside source)."""

    exit_code = EXIT_BAD_INPUT
    kind = "refused"


class OperationFailed(CachedoctorError):
    """The operation started but could not complete; nothing was lost."""

    exit_code = EXIT_FAILED


class LockBusyError(CachedoctorError):
    """Another cachedoctor process holds the lock on the same cache."""

    exit_code = EXIT_FAILED
    kind = "busy"
