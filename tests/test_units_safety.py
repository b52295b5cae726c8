"""Sizes, ages and protected roots."""

from __future__ import annotations

import os

import pytest

from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.safety import check_not_protected, is_within, protected_reason
from cachedoctor.sizes import format_size, parse_age, parse_size
from tests.conftest import needs_symlinks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20GB", 20_000_000_000),
        ("20G", 20_000_000_000),
        ("20 gb", 20_000_000_000),
        ("500MiB", 500 * 1024**2),
        ("1.5GiB", int(1.5 * 1024**3)),
        ("1234", 1234),
        ("2147483648", 2147483648),
        ("10KB", 10_000),
        ("10kib", 10_240),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "20XB", "-5GB", "twenty"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UserInputError):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30d", 30 * 86400), ("12h", 43200), ("2w", 14 * 86400), ("1h30m", 5400), ("90", 90)],
)
def test_parse_age(text: str, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "30x", "3d4", "-1d"])
def test_parse_age_rejects(text: str) -> None:
    with pytest.raises(UserInputError):
        parse_age(text)


def test_format_size() -> None:
    assert format_size(0) == "0 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(20 * 1024**3) == "20.0 GiB"


LINUX = Host("linux", {}, "/home/ann")
WIN = Host(
    "windows",
    {"USERPROFILE": r"C:\Users\ann", "LOCALAPPDATA": r"C:\Users\ann\AppData\Local"},
    r"C:\Users\ann",
)


@pytest.mark.parametrize(
    "path", ["/", "/usr", "/etc/", "/home/ann", "/home/ann/.cache", "/mnt/d", "/tmp", "//"]
)
def test_posix_protected(path: str) -> None:
    assert protected_reason(path, LINUX)


@pytest.mark.parametrize(
    "path", ["C:\\", "D:", "c:\\windows", r"C:\Program Files", r"C:\Users\ann", r"C:\Users\ann\AppData\Local\\"]
)
def test_windows_protected(path: str) -> None:
    assert protected_reason(path, WIN)


@pytest.mark.parametrize("path", ["/home/ann/.cache/pip", "/tmp/workbuddy_cache", "/mnt/d/ai-cache"])
def test_ordinary_paths(path: str) -> None:
    assert protected_reason(path, LINUX) is None


def test_windows_ordinary_path() -> None:
    assert protected_reason(r"D:\ai-cache\workbuddy", WIN) is None


@needs_symlinks
def test_link_to_a_protected_root_is_refused(tmp_path) -> None:
    link = tmp_path / "innocent"
    os.symlink("/", link)
    with pytest.raises(RefusedError, match="system folder"):
        check_not_protected(str(link), Host("linux", {}, "/home/x"))


def test_is_within(tmp_path) -> None:
    assert is_within(tmp_path / "a" / "b", tmp_path)
    assert is_within(tmp_path, tmp_path)
    assert not is_within(tmp_path / "ab", tmp_path / "a")


def test_a_folder_holding_the_home_is_refused_for_every_command(tmp_path) -> None:
    home = tmp_path / "people" / "ann"
    home.mkdir(parents=True)
    host = Host("linux", {}, str(home))
    for role in ("cache to move", "destination", "cache folder to clean"):
        with pytest.raises(RefusedError, match="your home folder"):
            check_not_protected(str(tmp_path / "people"), host, role=role)
        with pytest.raises(RefusedError, match="your home folder"):
            check_not_protected(str(home / ".cache" / ".." / ".."), host, role=role)
    check_not_protected(str(home / ".cache" / "pip"), host)  # a cache inside the home is fine


def test_system_subfolders_are_refused_only_when_asked() -> None:
    host = Host("linux", {}, "/home/ann")
    check_not_protected("/usr/share/ollama/.ollama/models", host)  # a real cache a move may take
    with pytest.raises(RefusedError, match="inside the system folder /usr"):
        check_not_protected("/usr/share/ollama/.ollama/models", host, system_subfolders=True)
