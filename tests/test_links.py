"""links: creating and removing links for real on Linux; the Windows side's pure parts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cachedoctor.links import (
    create_link,
    default_kind,
    is_broken,
    junction_target,
    link_kind,
    link_target,
    points_to,
    remove_link,
    strip_nt_prefix,
)
from tests.conftest import IS_WINDOWS, needs_symlinks


@needs_symlinks
def test_create_and_remove_symlink_keeps_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "data").write_text("keep")
    link = tmp_path / "link"
    create_link(str(link), str(target))
    assert link_kind(str(link)) == "symlink"
    assert link_target(str(link)) == str(target)
    assert points_to(str(link), str(target))
    assert (link / "data").read_text() == "keep"
    remove_link(str(link))
    assert not os.path.lexists(link)
    assert (target / "data").read_text() == "keep"


@pytest.mark.skipif(IS_WINDOWS, reason="POSIX refuses junctions; Windows makes them (tested below)")
def test_remove_link_refuses_real_folder_and_create_refuses_existing(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "f").write_text("x")
    with pytest.raises(ValueError):
        remove_link(str(real))
    assert (real / "f").exists()
    with pytest.raises(FileExistsError):
        create_link(str(real), str(tmp_path))
    with pytest.raises(OSError):
        create_link(str(tmp_path / "j"), str(real), "junction")  # junctions are Windows-only


@pytest.mark.skipif(not IS_WINDOWS, reason="junctions exist only on Windows")
def test_real_junction_create_and_remove_keeps_target(tmp_path: Path) -> None:  # pragma: no cover
    """A junction needs no privileges: create one for real, remove it, the target stays."""
    target = tmp_path / "target"
    target.mkdir()
    (target / "data").write_text("keep")
    link = tmp_path / "link"
    create_link(str(link), str(target), "junction")
    assert link_kind(str(link)) == "junction"
    assert points_to(str(link), str(target))
    assert os.path.normcase(link_target(str(link)) or "") == os.path.normcase(str(target))
    assert (link / "data").read_text() == "keep"
    with pytest.raises(FileExistsError):
        create_link(str(link), str(target), "junction")
    remove_link(str(link))
    assert not os.path.lexists(link)
    assert (target / "data").read_text() == "keep"


@needs_symlinks
def test_broken_and_relative_links(tmp_path: Path) -> None:
    (tmp_path / "rel").symlink_to("gone")
    assert is_broken(str(tmp_path / "rel"))
    assert link_target(str(tmp_path / "rel")) == str(tmp_path / "gone")
    assert not points_to(str(tmp_path / "rel"), str(tmp_path))
    assert link_kind(str(tmp_path / "missing")) is None


def test_junction_target_pure() -> None:
    assert junction_target("D:/ai-cache/hf") == "D:\\ai-cache\\hf"
    assert junction_target("\\\\?\\D:\\x\\..\\y") == "D:\\y"
    for bad in ("relative\\path", "\\\\server\\share\\x", "\\no-drive"):
        with pytest.raises(ValueError):
            junction_target(bad)
    assert strip_nt_prefix("\\??\\C:\\x") == "C:\\x"


def test_nt_prefixes_and_volume_targets_stay_absolute() -> None:
    r"""How Windows stores a junction target (readlink gives the substitute name, `\\?\`-
    prefixed, CPython docs for os.readlink 3.8): drive and UNC forms lose the prefix, a volume
    GUID path keeps it (without it, it would be taken for a relative name; cpython gh-89760)."""
    assert strip_nt_prefix("\\\\?\\D:\\x") == "D:\\x"
    assert strip_nt_prefix("\\\\?\\UNC\\srv\\share\\x") == "\\\\srv\\share\\x"
    volume = "\\\\?\\Volume{0b1c7e4e-0000-0000-0000-100000000000}\\caches\\uv"
    assert strip_nt_prefix(volume) == volume
    assert strip_nt_prefix("\\??\\Volume{0b1c7e4e-0000-0000-0000-100000000000}\\x").startswith(
        "\\\\?\\Volume{")
    assert junction_target(volume) == volume
    assert default_kind("windows") == "junction"
    assert default_kind("linux") == "symlink"


def test_windows_junction_goes_through_winapi(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Windows seam calls _winapi.CreateJunction(target, link) for a drive target (the
    Windows API faked; CPython's _winapi.c: src_path is the target, dst_path the new link)."""
    import sys
    import types

    from cachedoctor.fs.windows import NativeWindowsApi

    calls: list[tuple[str, str]] = []
    fake = types.ModuleType("_winapi")
    fake.CreateJunction = lambda target, path: calls.append((target, path))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "_winapi", fake)
    NativeWindowsApi.create_junction(junction_target("E:/caches/tool"), "C:\\Users\\me\\cache")
    assert calls == [("E:\\caches\\tool", "C:\\Users\\me\\cache")]
