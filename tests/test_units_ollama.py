"""Ollama models as units: an Ollama-style store (tests/layouts.py) where a blob is freed only
when no manifest uses it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import needs_du, needs_posix_paths, result_of, run_cli
from tests.layouts import age, make_ollama_model

pytestmark = needs_posix_paths
DAY = 86400.0


@pytest.fixture
def models(isolated_home: Path) -> Path:
    """llama3:latest and llama3:8b share their weights; phi has its own; one orphan blob."""
    root = isolated_home / ".ollama" / "models"
    weights = b"W" * 300000
    make_ollama_model(root, "llama3", "latest", [weights, b"template-a" * 100])
    make_ollama_model(root, "llama3", "8b", [weights, b"template-b" * 100])
    make_ollama_model(root, "phi", "mini", [b"P" * 120000], namespace="someone")
    (root / "blobs" / ("sha256-" + "f" * 64)).write_bytes(b"O" * 50000)  # no manifest uses it
    (root / "blobs" / ("sha256-" + "e" * 64 + "-partial")).write_bytes(b"p" * 9000)
    now = time.time()
    age(root, 30 * DAY, now=now)
    return root


def ls_units() -> dict[str, dict]:
    proc = run_cli("ls", "ollama", "--location", "user-models", "--json")
    assert proc.returncode == 0, proc.stderr
    (location,) = result_of(proc)["locations"]
    return {u["id"]: u for u in location["units"]}


def manifest_blobs(manifest: Path) -> list[Path]:
    doc = json.loads(manifest.read_text())
    return [manifest.parents[4] / "blobs" / layer["digest"].replace(":", "-")
            for layer in [doc["config"], *doc["layers"]]]


@needs_du
def test_ls_names_models_like_ollama_list_and_counts_shared_blobs_once(models: Path) -> None:
    units = ls_units()
    assert set(units) == {"llama3:latest", "llama3:8b", "someone/phi:mini"}
    for unit_id, unit in units.items():
        name, tag = unit_id.rsplit(":", 1)
        ns = "library" if "/" not in name else name.split("/")[0]
        manifest = models / "manifests" / "registry.ollama.ai" / ns / name.split("/")[-1] / tag
        paths = [manifest, *manifest_blobs(manifest)]
        du = subprocess.check_output(["du", "-cB1", *map(str, paths)], text=True)
        assert unit["bytes"] == int(du.splitlines()[-1].split()[0])
    assert units["llama3:latest"]["shared_bytes"] >= 300000
    assert units["someone/phi:mini"]["shared_bytes"] == 0
    text = run_cli("ls", "ollama")
    assert "garbage:" in text.stdout and "orphaned blobs" in text.stdout


def test_removing_a_model_keeps_the_blobs_another_model_uses(models: Path) -> None:
    latest = models / "manifests" / "registry.ollama.ai" / "library" / "llama3" / "latest"
    eight = latest.with_name("8b")
    shared, own = manifest_blobs(latest)[1], manifest_blobs(latest)[2]
    proc = run_cli("clean", "ollama", "--unit", "llama3:latest", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    assert not latest.exists() and not own.exists()
    assert shared.exists() and all(b.exists() for b in manifest_blobs(eight))
    (result,) = result_of(proc)["results"]
    assert result["units_removed"] == ["llama3:latest"]
    assert result["bytes"] == result["measured"]["bytes_before"] - result["measured"]["bytes_after"]
    assert result["bytes"] == result["estimated_bytes"]
    proc = run_cli("clean", "ollama", "--unit", "llama3:8b", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert not shared.exists()  # its last user went
    assert not (models / "manifests" / "registry.ollama.ai" / "library").exists()  # emptied


def test_prune_removes_orphaned_and_partial_blobs_only(models: Path) -> None:
    before = {p.name for p in (models / "blobs").iterdir()}
    proc = run_cli("clean", "ollama", "--prune", "--yes")
    assert proc.returncode == 0, proc.stderr
    after = {p.name for p in (models / "blobs").iterdir()}
    assert before - after == {"sha256-" + "f" * 64, "sha256-" + "e" * 64 + "-partial"}
    for manifest in (models / "manifests").rglob("*"):
        if manifest.is_file():
            assert all(b.exists() for b in manifest_blobs(manifest))


def test_an_unreadable_manifest_keeps_every_blob(models: Path) -> None:
    broken = models / "manifests" / "registry.ollama.ai" / "library" / "mystery" / "latest"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    proc = run_cli("clean", "ollama", "--prune", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert (models / "blobs" / ("sha256-" + "f" * 64)).exists()  # nobody knows who uses it


def test_age_and_size_rules_leave_the_users_models_alone(models: Path) -> None:
    """The profile does not mark pulled models safe to delete: only named units and garbage."""
    files = sorted(p for p in models.rglob("*") if p.is_file())
    for args in (["--older-than", "1d"], ["--max-size", "1"]):
        proc = run_cli("clean", "ollama", *args, "--yes")
        assert proc.returncode == 0, proc.stderr
        assert "safe to delete" in proc.stderr
    assert sorted(p for p in models.rglob("*") if p.is_file()) == files
