"""Where cachedoctor keeps its own files: config (quotas), state (journal, history, locks), logs."""

from __future__ import annotations

from pathlib import Path

APP = "cachedoctor"


def config_dir() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP, appauthor=False))


def state_dir() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir(APP, appauthor=False))


def log_dir() -> Path:
    from platformdirs import user_log_dir

    return Path(user_log_dir(APP, appauthor=False))


def journal_dir() -> Path:
    """One file per unfinished move or restore (see cachedoctor.relocate.journal)."""
    return state_dir() / "journal"


def ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
