"""Real cache layouts written the way the tools document them, for the units tests.

* Hugging Face hub ("Manage huggingface_hub cache-system", huggingface_hub docs): a repo folder
  `models--org--name` holds `blobs/<sha256 of the file>` (LFS files are named by their sha256,
  others by their git blob id), `snapshots/<commit>/<path>` as *relative* symlinks into
  `../../blobs/`, and `refs/<name>` holding the commit hash (no newline). huggingface_hub's own
  `scan_cache_dir()` reads these back in the tests.
* Ollama (server/images.go, server/manifest.go): `manifests/<registry>/<namespace>/<model>/<tag>`
  is a JSON manifest whose `config` and `layers` name blobs by digest `sha256:<hex>`, stored
  as `blobs/sha256-<hex>`.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def commit_of(seed: str) -> str:
    return hashlib.sha1(seed.encode()).hexdigest()


def blob_name(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_repo(
    hub: Path,
    repo_id: str,
    revisions: dict[str, dict[str, bytes]],
    refs: dict[str, str] | None = None,
    *,
    repo_type: str = "model",
    incomplete: dict[str, bytes] | None = None,
) -> Path:
    """One repo; `revisions` maps a commit to its files, `refs` a ref name to a commit."""
    repo = hub / f"{repo_type}s--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "snapshots").mkdir(exist_ok=True)
    for commit, files in revisions.items():
        for path, data in files.items():
            blob = repo / "blobs" / blob_name(data)
            if not blob.exists():
                blob.write_bytes(data)
            link = repo / "snapshots" / commit / path
            link.parent.mkdir(parents=True, exist_ok=True)
            depth = path.count("/")
            link.symlink_to(os.path.join(*([".."] * (depth + 2)), "blobs", blob.name))
    for name, commit in (refs or {}).items():
        ref = repo / "refs" / name
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    for name, data in (incomplete or {}).items():
        (repo / "blobs" / f"{name}.incomplete").write_bytes(data)
    return repo


def age(path: Path, seconds_ago: float, *, now: float) -> None:
    """Make every file under `path` last used and written `seconds_ago` (links as links)."""
    when = now - seconds_ago
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            os.utime(os.path.join(root, name), (when, when), follow_symlinks=False)
    os.utime(path, (when, when), follow_symlinks=False)


def make_ollama_model(models: Path, name: str, tag: str, layers: list[bytes],
                      *, namespace: str = "library",
                      registry: str = "registry.ollama.ai") -> Path:
    (models / "blobs").mkdir(parents=True, exist_ok=True)
    config = json.dumps({"model": name, "tag": tag}).encode()
    entries = []
    for data in [config, *layers]:
        digest = hashlib.sha256(data).hexdigest()
        blob = models / "blobs" / f"sha256-{digest}"
        if not blob.exists():
            blob.write_bytes(data)
        entries.append({"mediaType": "application/vnd.ollama.image.model",
                        "digest": f"sha256:{digest}", "size": len(data)})
    manifest = models / "manifests" / registry / namespace / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": entries[0], "layers": entries[1:]}))
    return manifest
