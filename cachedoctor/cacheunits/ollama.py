"""Ollama models as units (the store `ollama pull` writes).

    <models>/manifests/<registry>/<namespace>/<model>/<tag>   JSON: config and layers by digest
    <models>/blobs/sha256-<hex>                               one file per digest, shared

A unit is one manifest (`llama3:latest`, named like `ollama list` names it); its size counts the
blobs it references, the ones other models use too as shared. Deleting removes the manifest
first, then only the blobs no other manifest uses (decided again from the manifests found at
deletion time). Garbage: blobs no manifest references and interrupted downloads
(`sha256-…-partial`) — unless a manifest could not be read, since then nobody knows what it uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from cachedoctor.cacheunits.base import Garbage, Gone, Step, Unit, UnitType, names_step, read_small
from cachedoctor.cacheunits.tree import Tree
from cachedoctor.profiles.model import OllamaUnits

DEFAULT_REGISTRY = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"


def model_name(parts: list[str]) -> str:
    """`registry.ollama.ai/library/llama3/latest` -> `llama3:latest`, as `ollama list` shows."""
    *name, tag = parts
    if len(name) == 3 and name[0] == DEFAULT_REGISTRY:
        name = name[2:] if name[1] == DEFAULT_NAMESPACE else name[1:]
    return f"{'/'.join(name)}:{tag}"


def _digests(text: str) -> list[str] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    layers = [doc.get("config"), *list(doc.get("layers") or [])]
    digests = [layer.get("digest") for layer in layers if isinstance(layer, dict)]
    return [d.replace(":", "-", 1) for d in digests if isinstance(d, str) and d]


def _in_manifests(rel: str) -> bool:
    return rel == "manifests" or rel.startswith("manifests/")


class OllamaModels(UnitType):
    def reads(self, spec: OllamaUnits) -> Callable[[str], bool]:
        return _in_manifests

    def find(self, spec: OllamaUnits, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        units: list[Unit] = []
        used: set[str] = set()
        unreadable = 0
        for e in tree.below("manifests"):
            if e.is_dir:
                continue
            parts = e.rel.split("/")[1:]
            digests = _digests(read_small(tree, e.rel) or "")
            if digests is None or len(parts) < 2:
                unreadable += 1
                continue
            blobs = [f"blobs/{d}" for d in digests]
            present = [b for b in blobs if tree.get(b) is not None]
            unit = Unit(id=model_name(parts), type="ollama-models", path=e.rel,
                        members=[e.rel, *present])
            missing = len(set(blobs) - set(present))
            if missing:
                unit.flags.append(f"broken: {missing} blob{'s' if missing > 1 else ''} missing")
            used.update(present)
            units.append(unit)
        garbage: list[Garbage] = []
        if unreadable:
            for unit in units:
                unit.flags.append(f"{unreadable} unreadable manifest(s): orphaned blobs kept")
            return units, garbage
        partial = [r for r in tree.child_rels("blobs") if "-partial" in r.rsplit("/", 1)[-1]]
        orphans = [r for r in tree.child_rels("blobs")
                   if r not in used and r not in partial and not _is_dir(tree, r)]
        if orphans:
            garbage.append(Garbage("blobs no manifest references", "orphaned blobs", orphans,
                                   names_step(tree, "blobs", orphans, "orphaned blobs")))
        if partial:
            garbage.append(Garbage("interrupted downloads", "partial blobs", partial,
                                   names_step(tree, "blobs", partial, "partial blobs")))
        return units, garbage

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        manifest = tree.get(unit.path)
        if manifest is None:
            return []
        blobs = [b for b in unit.members[1:] if (e := tree.get(b)) is not None and gone(e)]
        return [Step("manifests", {unit.path: manifest.ino}, what="manifest"),
                *names_step(tree, "blobs", blobs, "blobs")]


def _is_dir(tree: Tree, rel: str) -> bool:
    entry = tree.get(rel)
    return entry is not None and entry.is_dir
