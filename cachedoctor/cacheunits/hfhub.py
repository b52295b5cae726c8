"""Hugging Face hub repos as units (the layout huggingface_hub documents in "Manage the cache").

    <hub>/models--org--name/refs/main            the commit a ref points to
    <hub>/models--org--name/snapshots/<commit>/  the revision: relative links into ../../blobs
    <hub>/models--org--name/blobs/<sha256|etag>  the files, shared by the revisions that use them
    <hub>/blobs/<2 hex>/<xet hash>               newer hubs: one payload shared by several repos
                                                 (the repo's blob is a link to it, `.refs` lists
                                                 the links; marked by .huggingface-shared-blobs)

A unit is one repo (`model/org/name`, as `hf cache ls` names it). A revision no ref points to is
detached. Deleting follows huggingface_hub's order — refs, then snapshots, then blobs no kept
revision uses — so an interrupted deletion never leaves a ref to a missing snapshot or a link to
a missing blob. `--prune` removes what `hf cache prune` and `scan_cache_dir` call garbage:
detached revisions, `.incomplete` downloads, and (beyond them) blobs no snapshot links to and
dangling snapshot links.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import msgspec

from cachedoctor.cacheunits.base import (
    Garbage,
    Gone,
    Revision,
    Step,
    Unit,
    UnitType,
    folder_removal,
    names_step,
    read_small,
)
from cachedoctor.cacheunits.tree import Entry, Tree, allocated
from cachedoctor.profiles.model import HfHubUnits

REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_REPO_DIR = re.compile(r"^(models|datasets|spaces)--(.+)$")
SHARED_STORE = "blobs"
SHARED_MARKER = ".huggingface-shared-blobs"
INCOMPLETE = ".incomplete"
_SHARED_SIDECARS = (".refs", ".lock")


class _Repo(msgspec.Struct):
    unit: Unit
    revisions: dict[str, Revision]
    ref_files: dict[str, list[str]]  # commit -> rels of the ref files naming it
    payloads: dict[str, str]  # repo blob rel -> shared store payload rel it links to
    dangling: list[str]  # snapshot links to missing blobs


class HfHub(UnitType):
    def find(self, spec: HfHubUnits, tree: Tree) -> tuple[list[Unit], list[Garbage]]:
        units: list[Unit] = []
        garbage: list[Garbage] = []
        for rel in sorted(tree.child_rels("")):
            entry = tree.get(rel)
            match = _REPO_DIR.match(rel)
            if entry is None or not entry.is_dir or match is None:
                continue
            repo = _scan_repo(tree, rel, REPO_TYPES[match.group(1)],
                              match.group(2).replace("--", "/"))
            units.append(repo.unit)
            garbage.extend(_repo_garbage(tree, repo))
        garbage.extend(_unused_payloads(tree, units))
        return units, garbage

    def reads(self, spec: HfHubUnits) -> Callable[[str], bool]:
        return _in_refs

    def pinned(self, spec: HfHubUnits, tree: Tree) -> list[str]:
        """The shared store is structure, not loose files: its marker and `.refs` manifests
        go only with the payloads they describe."""
        return [SHARED_STORE] if tree.get(f"{SHARED_STORE}/{SHARED_MARKER}") else []

    def removal(self, unit: Unit, tree: Tree, gone: Gone) -> list[Step]:
        return repo_removal(tree, unit.path, gone)

    def revision_removal(self, unit: Unit, tree: Tree, commit: str, gone: Gone) -> list[Step]:
        """One revision: the refs naming it, its snapshot, the blobs no other revision uses;
        the whole repo when it is the last one."""
        repo = _scan_repo(tree, unit.path, unit.id.split("/", 1)[0], unit.id.split("/", 1)[1])
        if set(repo.revisions) <= {commit}:
            return repo_removal(tree, unit.path, gone)
        return _revisions_removal(tree, repo, [commit], gone)

    @staticmethod
    def commit_of(unit: Unit, wanted: str) -> str | None:
        """A revision of the unit by commit (a prefix of 7 or more) or by ref name (`pr/1`
        for the ref huggingface_hub stores as `refs/pr/1`)."""
        for rev in unit.revisions:
            named = wanted in rev.refs or f"refs/{wanted}" in rev.refs
            if named or (len(wanted) >= 7 and rev.commit.startswith(wanted)):
                return rev.commit
        return None


def _in_refs(rel: str) -> bool:
    """`<repo>/refs` and the folders below it (`refs/pr`): the refs `_scan_repo` reads."""
    rest = rel.partition("/")[2]
    return rest == "refs" or rest.startswith("refs/")


def repo_removal(tree: Tree, repo_rel: str, gone: Gone) -> list[Step]:
    """refs, then snapshots, then the repo (its blobs and the rest), then shared payloads that
    no repo that stays links to."""
    steps: list[Step] = []
    for sub, what in (("refs", "refs"), ("snapshots", "snapshots")):
        rel = f"{repo_rel}/{sub}"
        entry = tree.get(rel)
        if entry is not None and entry.is_dir:
            steps.append(Step(rel, None, what=what))
    steps.extend(folder_removal(tree, repo_rel, "blobs and the repo folder"))
    steps.extend(_payload_steps(tree, _payloads(tree, repo_rel).values(), gone))
    return steps


def _payload_steps(tree: Tree, payloads: Iterable[str], gone: Gone) -> list[Step]:
    freed: set[str] = set()
    for rel in payloads:
        entry = tree.get(rel)
        if entry is not None and gone(entry):
            freed.add(rel)
            freed.update(rel + s for s in _SHARED_SIDECARS if tree.get(rel + s) is not None)
    return names_step(tree, SHARED_STORE, freed, "shared blobs") if freed else []


def _unused_payloads(tree: Tree, units: list[Unit]) -> list[Garbage]:
    """Shared store payloads no repo's blob links to (with their manifest and lock)."""
    if tree.get(f"{SHARED_STORE}/{SHARED_MARKER}") is None:
        return []
    used = {m for u in units for m in u.members[1:]}
    unused = sorted(e.rel for prefix in tree.child_rels(SHARED_STORE)
                    for e in tree.below(prefix)
                    if e.is_file and not e.rel.endswith(_SHARED_SIDECARS) and e.rel not in used
                    and e.rel.count("/") == 2)
    if not unused:
        return []
    rels = unused + [r + s for r in unused for s in _SHARED_SIDECARS if tree.get(r + s)]
    return [Garbage("shared blobs no repo uses", "payloads of the shared store nothing links to",
                    rels, names_step(tree, SHARED_STORE, rels, "shared blobs"))]


def _revisions_removal(tree: Tree, repo: _Repo, commits: list[str], gone: Gone) -> list[Step]:
    base = repo.unit.path
    refs = [r for c in commits for r in repo.ref_files.get(c, [])]
    steps = names_step(tree, f"{base}/refs", refs, "refs") if refs else []
    for commit in commits:
        steps.extend(folder_removal(tree, f"{base}/snapshots/{commit}", "snapshot"))
    kept = set().union(*(r.blobs for c, r in repo.revisions.items() if c not in commits))
    dropped = set().union(*(repo.revisions[c].blobs for c in commits)) - kept
    steps.extend(names_step(tree, f"{base}/blobs", dropped, "blobs"))
    steps.extend(_payload_steps(tree, [repo.payloads[b] for b in dropped if b in repo.payloads],
                                gone))
    return steps


def _payloads(tree: Tree, repo_rel: str) -> dict[str, str]:
    """The repo's blobs that are links into the hub's shared store, with the payload."""
    store = tree.get(f"{SHARED_STORE}/{SHARED_MARKER}")
    if store is None:
        return {}
    found: dict[str, str] = {}
    for e in tree.below(f"{repo_rel}/blobs"):
        if e.is_link:
            target = tree.resolve(e)
            if target is not None and target.startswith(f"{SHARED_STORE}/"):
                found[e.rel] = target
    return found


def _scan_repo(tree: Tree, rel: str, repo_type: str, repo_id: str) -> _Repo:
    unit = Unit(id=f"{repo_type}/{repo_id}", type="hf-hub", path=rel, members=[rel])
    by_commit: dict[str, list[str]] = {}
    ref_files: dict[str, list[str]] = {}
    for e in tree.below(f"{rel}/refs"):
        if e.is_dir:
            continue
        commit = (read_small(tree, e.rel) or "").strip()
        name = e.rel[len(rel) + len("/refs/"):]
        by_commit.setdefault(commit, []).append(name)
        ref_files.setdefault(commit, []).append(e.rel)
    payloads = _payloads(tree, rel)
    revisions: dict[str, Revision] = {}
    dangling: list[str] = []
    snapshots = tree.get(f"{rel}/snapshots")
    entries, children = tree.entries, tree.children
    for snap_entry in children.get(f"{rel}/snapshots", ()):
        if not snap_entry.is_dir:
            continue
        commit = snap_entry.name
        used: list[Entry] = []
        blobs: set[str] = set()
        files = 0
        newest = 0.0
        stack = list(children.get(snap_entry.rel, ()))  # what `tree.below` yields, inlined
        while stack:
            e = stack.pop()
            if e.is_dir:
                stack.extend(children.get(e.rel, ()))
                continue
            files += 1
            blob = e
            if e.is_link:
                target = tree.resolve(e)
                linked = entries.get(target) if target is not None else None
                if linked is None or linked.is_link:  # missing, outside, or a link again
                    if tree.dangles(e):
                        dangling.append(e.rel)
                        continue
                    if linked is None:
                        continue  # a link out of the hub: not the hub's bytes
                blob = linked
                blobs.add(blob.rel)
            used.append(blob)
            if payloads:
                payload_rel = payloads.get(blob.rel)
                payload = entries.get(payload_rel) if payload_rel else None
                if payload is not None:
                    used.append(payload)
            if blob.mtime > newest:
                newest = blob.mtime
        revisions[commit] = Revision(commit, sorted(by_commit.get(commit, [])), allocated(used),
                                     files, newest or snap_entry.mtime, blobs)
    missing = sorted(c for c in by_commit if c not in revisions)
    unit.revisions = sorted(revisions.values(), key=lambda r: (-r.last_modified, r.commit))
    unit.refs = sorted(r for refs in by_commit.values() for r in refs)
    unit.members.extend(sorted(set(payloads.values())))
    detached = sum(1 for r in revisions.values() if r.detached)
    if snapshots is None or not snapshots.is_dir:
        unit.flags.append("corrupted: no snapshots folder")
    if detached:
        unit.flags.append(f"detached: {detached} revision{'s' if detached > 1 else ''}")
    if missing:
        unit.flags.append(f"corrupted: refs to missing snapshots ({', '.join(missing)})")
    if dangling:
        unit.flags.append(f"broken: {len(dangling)} dangling link{'s' if len(dangling) > 1 else ''}")
    for e in tree.below(f"{rel}/blobs"):
        if e.rel.endswith(INCOMPLETE):
            unit.flags.append("incomplete downloads")
            break
    return _Repo(unit, revisions, ref_files, payloads, dangling)


def _repo_garbage(tree: Tree, repo: _Repo) -> list[Garbage]:
    unit = repo.unit
    found: list[Garbage] = []
    detached = [c for c, r in repo.revisions.items() if r.detached]
    if detached and len(detached) == len(repo.revisions):
        steps = repo_removal(tree, unit.path, lambda e: True)
        found.append(Garbage(f"{unit.id} (every revision detached)",
                             "no ref points to any of its revisions", [unit.path], steps))
    elif detached:
        kept = set().union(*(r.blobs for c, r in repo.revisions.items() if c not in detached))
        blobs = set().union(*(repo.revisions[c].blobs for c in detached)) - kept
        members = [f"{unit.path}/snapshots/{c}" for c in detached] + sorted(blobs)
        steps = _revisions_removal(tree, repo, detached, lambda e: False)
        found.append(Garbage(
            f"{unit.id}@{','.join(c[:12] for c in sorted(detached))}",
            f"detached revision{'s' if len(detached) > 1 else ''} (no ref points to "
            f"{'them' if len(detached) > 1 else 'it'})", members, steps))
    used = set().union(*(r.blobs for r in repo.revisions.values())) if repo.revisions else set()
    incomplete: list[str] = []
    orphans: list[str] = []
    for rel in tree.child_rels(f"{unit.path}/blobs"):
        entry = tree.get(rel)
        if entry is None or entry.is_dir:
            continue
        if rel.endswith(INCOMPLETE):
            incomplete.append(rel)
        elif rel not in used and not (detached and len(detached) == len(repo.revisions)):
            orphans.append(rel)
    if incomplete:
        found.append(Garbage(f"{unit.id} (.incomplete downloads)", "interrupted downloads",
                             incomplete, names_step(tree, f"{unit.path}/blobs", incomplete)))
    if orphans:
        found.append(Garbage(f"{unit.id} (blobs no revision uses)",
                             "blobs no snapshot links to", orphans,
                             names_step(tree, f"{unit.path}/blobs", orphans)))
    if repo.dangling:
        found.append(Garbage(f"{unit.id} (dangling links)", "snapshot links to missing blobs",
                             repo.dangling,
                             names_step(tree, f"{unit.path}/snapshots", repo.dangling)))
    return found
