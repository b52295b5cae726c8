"""Hard links: a uv cache hard-linked into a real venv made by a real uv (from PyPI). A file
whose other names live outside the location frees nothing, and plans and results say so."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import IS_LINUX, needs_du, result_of, run_cli

uv = pytest.importorskip("uv")
pytestmark = pytest.mark.skipif(not IS_LINUX, reason="uv hard-links on Linux (clones on macOS)")


def make_wheel(folder: Path, name: str, modules: dict[str, bytes]) -> Path:
    """A minimal valid wheel (PEP 427: the files, NAME.dist-info/METADATA, WHEEL, RECORD)."""
    dist = f"{name}-1.0.dist-info"
    files = dict(modules)
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


@pytest.fixture
def linked(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(uv cache, venv): two packages installed by uv, hard-linked from the cache."""
    cache = isolated_home / ".cache" / "uv"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    monkeypatch.setenv("UV_LINK_MODE", "hardlink")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("PATH", f"{Path(uv.find_uv_bin()).parent}{os.pathsep}{os.environ['PATH']}")
    venv = tmp_path / "project" / ".venv"
    wheels = [make_wheel(tmp_path, "alpha", {"alpha.py": b"VALUE = 1\n" + b"#" * 60000}),
              make_wheel(tmp_path, "beta", {"beta/__init__.py": b"B = 2\n" + b"#" * 30000})]
    subprocess.run([uv.find_uv_bin(), "venv", "-q", "--python", sys.executable, str(venv)],
                   check=True, cwd=tmp_path)
    subprocess.run([uv.find_uv_bin(), "pip", "install", "-q", "--offline", "--python",
                    str(venv / "bin" / "python"), *map(str, wheels)], check=True, cwd=tmp_path)
    installed = next((venv / "lib").glob("python*/site-packages/alpha.py"))
    assert installed.stat().st_nlink >= 2, "uv did not hard-link (another filesystem?)"
    return cache, venv


def imports(venv: Path) -> bool:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", "import alpha, beta; "
                           "assert alpha.VALUE == 1 and beta.B == 2"], capture_output=True)
    return proc.returncode == 0


def outside_linked_bytes(cache: Path) -> int:
    """Allocated bytes of the cache's files that also have names outside it (find -links)."""
    inside: dict[tuple[int, int], list[int]] = {}  # inode -> [bytes, names inside, nlink]
    for path in cache.rglob("*"):
        st = path.lstat()
        if path.is_file() and not path.is_symlink() and st.st_nlink > 1:
            entry = inside.setdefault((st.st_dev, st.st_ino), [st.st_blocks * 512, 0, st.st_nlink])
            entry[1] += 1
    return sum(size for size, names, nlink in inside.values() if nlink > names)


def test_the_uv_plan_says_its_linked_files_free_nothing(linked: tuple[Path, Path]) -> None:
    cache, _ = linked
    proc = run_cli("clean", "uv", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    (target,) = result_of(proc)["targets"]
    assert target["mode"] == "command" and target["command"][1:] == ["cache", "prune"]
    linked_bytes = outside_linked_bytes(cache)
    assert linked_bytes > 90000
    assert target["bytes"] <= target["total_bytes"] - linked_bytes
    assert any("hard-linked from" in n and "frees 0 B" in n for n in target["notes"])
    text = run_cli("clean", "uv", "--dry-run")
    assert "frees 0 B" in text.stdout


@needs_du
def test_file_rules_over_a_linked_cache_report_what_was_really_freed(
    linked: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same cache under a profile with plain file rules: deleting everything frees only the
    files nothing else links to — estimate and measurement agree, and the venv still works."""
    cache, venv = linked
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "rawcache.yaml").write_text(
        "id: rawcache\nname: Raw\ndescription: d\nlocations:\n"
        f"  - id: cache\n    paths: {{linux: '{cache}'}}\n    safe_to_delete: true\n")
    monkeypatch.setenv("CACHEDOCTOR_PROFILES_DIR", str(profiles))
    total = int(subprocess.check_output(["du", "-sB1", str(cache)]).split()[0])
    linked_bytes = outside_linked_bytes(cache)
    plan = run_cli("clean", "rawcache", "--dry-run", "--json")
    (target,) = result_of(plan)["targets"]
    assert target["bytes"] <= total - linked_bytes
    assert any("frees 0 B" in n for n in target["notes"])
    proc = run_cli("clean", "rawcache", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = result_of(proc)["results"]
    left = int(subprocess.check_output(["du", "-sB1", str(cache)]).split()[0])
    freed = total - left - linked_bytes  # the venv still holds the linked files' data
    assert result["measured"]["still_linked_elsewhere_bytes"] == linked_bytes
    assert result["bytes"] == freed == result["measured"]["freed_bytes"]
    assert abs(result["estimated_bytes"] - freed) <= max(0.05 * freed, 64 * 1024)
    assert imports(venv)


def test_uvs_own_prune_runs_and_its_result_is_measured(linked: tuple[Path, Path]) -> None:
    cache, venv = linked
    before = sum(p.lstat().st_blocks * 512 for p in cache.rglob("*"))
    proc = run_cli("clean", "uv", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = result_of(proc)["results"]
    assert result["command"]["returncode"] == 0
    measured = result["measured"]
    assert result["bytes"] == measured["bytes_before"] - measured["bytes_after"]
    assert measured["bytes_before"] >= before * 0.5
    assert result["files"] == measured["files_gone"]  # the files really gone, not the plan's
    assert imports(venv)
