"""Hugging Face hub units: a hub written to the documented layout (tests/layouts.py), listed by
`cachedoctor ls` and cleaned by every rule, then read back by huggingface_hub's own
`scan_cache_dir()`: no corrupted repo, no warning, every kept revision's files present."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import envelope_of, needs_du, needs_posix_paths, result_of, run_cli
from tests.layouts import age, blob_name, commit_of, make_repo

hf = pytest.importorskip("huggingface_hub")
pytestmark = needs_posix_paths

DAY = 86400.0
MIB = 1024 * 1024


def hub_dir(home: Path) -> Path:
    return home / ".cache" / "huggingface" / "hub"


def payload(tag: str, size: int) -> bytes:
    return (tag.encode() * (size // len(tag) + 1))[:size]


def build_hub(hub: Path, now: float) -> dict[str, dict[str, dict[str, bytes]]]:
    """Four repos of known content and age; returns repo dir -> commit -> files."""
    a, b, c = commit_of("a"), commit_of("b"), commit_of("c")
    shared = payload("config", 3000)
    layout: dict[str, tuple[str, str, dict[str, dict[str, bytes]], dict[str, str], float]] = {
        "bert": ("google-bert/bert-base-uncased", "model", {
            a: {"config.json": shared, "model.safetensors": payload("bert-a", 2 * MIB)},
            b: {"config.json": shared, "model.safetensors": payload("bert-b", MIB),
                "tokenizer/vocab.txt": payload("vocab", 5000)},
        }, {"main": a, "refs/pr/1": b}, 40 * DAY),
        "gpt2": ("gpt2", "model", {c: {"model.bin": payload("gpt2", 3 * MIB)}}, {"main": c}, 20 * DAY),
        "squad": ("rajpurkar/squad", "dataset", {
            a: {"data/train.parquet": payload("squad", MIB)},
            b: {"data/train.parquet": payload("squad-old", MIB)},  # detached
        }, {"main": a}, 5 * DAY),
        "space": ("someone/demo", "space", {c: {"app.py": payload("app", 4000)}}, {"main": c}, 1 * DAY),
    }
    written: dict[str, dict[str, dict[str, bytes]]] = {}
    for repo_id, repo_type, revisions, refs, ago in layout.values():
        repo = make_repo(hub, repo_id, revisions, refs, repo_type=repo_type)
        age(repo, ago, now=now)
        written[repo.name] = revisions
    return written


def check_hub(hub: Path, written: dict[str, dict[str, dict[str, bytes]]]) -> set[str]:
    """huggingface_hub reads the hub without a warning and every revision it still lists has
    all its files, with the content written. Returns the repo folders it found."""
    info = hf.scan_cache_dir(hub)
    assert info.warnings == [], info.warnings
    found = set()
    for repo in info.repos:
        found.add(repo.repo_path.name)
        for revision in repo.revisions:
            expected = written[repo.repo_path.name][revision.commit_hash]
            assert {f.file_path.relative_to(revision.snapshot_path).as_posix()
                    for f in revision.files} == set(expected)
            for path, data in expected.items():
                assert (revision.snapshot_path / path).read_bytes() == data
    dangling = [p for p in hub.rglob("*") if p.is_symlink() and not p.exists()]
    assert dangling == []
    return found


@pytest.fixture
def hub(isolated_home: Path) -> tuple[Path, dict[str, dict[str, dict[str, bytes]]]]:
    folder = hub_dir(isolated_home)
    return folder, build_hub(folder, time.time())


def ls_json(*args: str) -> dict:
    proc = run_cli("ls", "huggingface", "--location", "hub", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    doc = envelope_of(proc.stdout)
    assert doc["schema"] == "cachedoctor.ls/1" and doc["ok"] is True
    (location,) = doc["result"]["locations"]
    return location


@needs_du
def test_ls_lists_what_scan_cache_dir_lists_with_du_exact_sizes(hub) -> None:
    folder, _ = hub
    location = ls_json()
    units = {u["id"]: u for u in location["units"]}
    info = hf.scan_cache_dir(folder)
    assert set(units) == {f"{r.repo_type}/{r.repo_id}" for r in info.repos}
    for repo in info.repos:
        unit = units[f"{repo.repo_type}/{repo.repo_id}"]
        assert {r["commit"] for r in unit["revisions"]} == {r.commit_hash for r in repo.revisions}
        for rev in repo.revisions:
            (mine,) = [r for r in unit["revisions"] if r["commit"] == rev.commit_hash]
            assert set(mine["refs"]) == set(rev.refs)
            assert mine["files"] == rev.nb_files
            assert mine["detached"] == (not rev.refs)
        du = int(subprocess.check_output(["du", "-sB1", str(repo.repo_path)]).split()[0])
        assert unit["bytes"] == du
        files = sum(1 for p in repo.repo_path.rglob("*") if not p.is_dir() or p.is_symlink())
        assert unit["files"] == files
    bert = units["model/google-bert/bert-base-uncased"]
    assert bert["shared_bytes"] == 0  # within a repo, the config blob is stored once
    assert sorted(bert["refs"]) == ["main", "refs/pr/1"]
    assert "detached: 1 revision" in units["dataset/rajpurkar/squad"]["flags"]
    total = int(subprocess.check_output(["du", "-sB1", str(folder)]).split()[0])
    assert location["bytes"] == total


def test_ls_sorts_and_limits_and_names_the_clock(hub) -> None:
    by_used = [u["id"] for u in ls_json("--sort", "used")["units"]]
    assert by_used == ["model/google-bert/bert-base-uncased", "model/gpt2",
                       "dataset/rajpurkar/squad", "space/someone/demo"]
    by_size = ls_json("--sort", "size", "--limit", "2")
    assert [u["id"] for u in by_size["units"]] == ["model/google-bert/bert-base-uncased",
                                                   "model/gpt2"]
    assert by_size["units_total"] == 4
    assert by_size["clock"]["clock"] in ("atime", "mtime") and by_size["clock"]["why"]
    text = run_cli("ls", "huggingface", "--sort", "name")
    assert text.returncode == 0, text.stderr
    assert "model/gpt2" in text.stdout and "last used = " in text.stdout
    assert "garbage:" in text.stdout  # the detached squad revision
    assert run_cli("ls", "huggingface", "--sort", "color").returncode == 2
    assert run_cli("ls", "huggingface", "--location", "nope").returncode == 2


def test_ls_does_not_make_units_look_used(hub) -> None:
    """Listing reads refs and links; neither may move the clock `last used` is read from."""
    first = {u["id"]: u["last_used"] for u in ls_json()["units"]}
    second = {u["id"]: u["last_used"] for u in ls_json()["units"]}
    assert first == second
    assert min(first.values()) < time.time() - 30 * DAY


RULES = {
    "max-size": (["--max-size", "4MiB"], {"squad", "space"}),
    "older-than": (["--older-than", "10d"], {"squad", "space"}),
    "unit": (["--unit", "model/gpt2", "--unit", "space/someone/demo"], {"bert", "squad"}),
    "prune": (["--prune"], {"bert", "gpt2", "squad", "space"}),
    "empty": ([], set()),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_rule_evicts_whole_repos_and_leaves_a_hub_huggingface_hub_reads(hub, rule: str) -> None:
    folder, written = hub
    args, kept = RULES[rule]
    names = {"bert": "models--google-bert--bert-base-uncased", "gpt2": "models--gpt2",
             "squad": "datasets--rajpurkar--squad", "space": "spaces--someone--demo"}
    proc = run_cli("clean", "huggingface", *args, "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    assert check_hub(folder, written) == {names[k] for k in kept}
    (result,) = [r for r in result_of(proc)["results"] if r["location"] == "hub"]
    measured = result["measured"]
    assert result["bytes"] == measured["bytes_before"] - measured["bytes_after"]
    assert result["bytes"] == result["estimated_bytes"]  # nothing else changed meanwhile
    if rule == "max-size":
        assert measured["bytes_after"] <= 4 * MIB
    if rule == "prune":  # the detached squad revision went, main stayed
        (squad,) = [r for r in hf.scan_cache_dir(folder).repos if r.repo_id == "rajpurkar/squad"]
        assert [r.commit_hash for r in squad.revisions] == [commit_of("a")]
        assert not (folder / names["squad"] / "blobs" / blob_name(payload("squad-old", MIB))).exists()


def test_a_revision_can_be_removed_and_shared_blobs_stay(hub) -> None:
    folder, written = hub
    b = commit_of("b")
    plan = run_cli("clean", "huggingface", "--unit", "model/google-bert/bert-base-uncased@pr/1",
                   "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    (target,) = [t for t in result_of(plan)["targets"] if t["location"] == "hub"]
    (unit,) = target["units"]
    assert unit["revision"] == b
    # the pr/1 revision's own blobs (model, vocab), not the config blob main uses too
    assert target["bytes"] >= MIB + 5000 and target["bytes"] < 2 * MIB
    proc = run_cli("clean", "huggingface", "--unit", f"model/google-bert/bert-base-uncased@{b[:8]}",
                   "--yes")
    assert proc.returncode == 0, proc.stderr
    check_hub(folder, written)
    (bert,) = [r for r in hf.scan_cache_dir(folder).repos if r.repo_id.endswith("bert-base-uncased")]
    assert [(r.commit_hash, set(r.refs)) for r in bert.revisions] == [(commit_of("a"), {"main"})]


def test_an_unknown_unit_is_bad_input_with_a_suggestion(hub) -> None:
    proc = run_cli("clean", "huggingface", "--unit", "model/gtp2", "--yes")
    assert proc.returncode == 2
    assert "no such unit: model/gtp2" in proc.stderr and "model/gpt2" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert run_cli("clean", "--unit", "model/gpt2", "--yes").returncode == 2  # no tool named
    assert run_cli("clean", "huggingface", "--unit", "x", "--prune").returncode == 2


def test_a_copied_hub_is_not_made_immune_by_its_new_ctimes(isolated_home: Path) -> None:
    """`cp -a` (or a move to another drive) keeps atime and mtime but renews every ctime: the
    old rule (atime, mtime and ctime all old) found nothing to clean."""
    now = time.time()
    source = isolated_home / "old-hub"
    written = build_hub(source, now)
    times = {p.relative_to(source): (p.lstat().st_atime_ns, p.lstat().st_mtime_ns)
             for p in source.rglob("*")}  # before copying: reading the files moves atime
    shutil.copytree(source, hub_dir(isolated_home), symlinks=True)
    for rel, (atime, mtime) in times.items():  # what `cp -a` does: times kept, ctime new
        os.utime(hub_dir(isolated_home) / rel, ns=(atime, mtime), follow_symlinks=False)
    new = hub_dir(isolated_home) / "models--google-bert--bert-base-uncased" / "refs" / "main"
    assert new.lstat().st_ctime > now - 60
    proc = run_cli("clean", "huggingface", "--older-than", "30d", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    (target,) = [t for t in result_of(proc)["targets"] if t["location"] == "hub"]
    assert [u["id"] for u in target["units"]] == ["model/google-bert/bert-base-uncased"]
    assert target["files"] > 0
    assert target["clock"]["clock"] in ("atime", "mtime")
    text = run_cli("clean", "huggingface", "--older-than", "30d", "--dry-run")
    assert "last used = " in text.stdout
    assert run_cli("clean", "huggingface", "--older-than", "30d", "--yes").returncode == 0
    check_hub(hub_dir(isolated_home), written)


def test_a_unit_used_since_the_plan_is_kept(hub) -> None:
    from cachedoctor.clean import Policy, execute_plan, plan_clean
    from cachedoctor.host import Host
    from cachedoctor.profiles.loader import load_profiles
    from tests.conftest import no_uses

    folder, written = hub
    profile = load_profiles([]).get("huggingface")
    host = Host.current()
    plan = plan_clean([profile], host, Policy(explicit=True, older_than=10 * DAY), in_use=no_uses)
    (target,) = [t for t in plan.targets if t.location == "hub"]
    assert {u.id for u in target.units} == {"model/google-bert/bert-base-uncased", "model/gpt2"}
    blob = folder / "models--gpt2" / "blobs" / blob_name(payload("gpt2", 3 * MIB))
    os.utime(blob, (time.time(), blob.stat().st_mtime))  # someone loaded gpt2 meanwhile
    result = execute_plan(plan, record_history=False)
    (outcome,) = [r for r in result.results if r.target.location == "hub"]
    assert outcome.units_removed == ["model/google-bert/bert-base-uncased"]
    assert outcome.units_left == [("model/gpt2", "used since the plan")]
    assert check_hub(folder, written) == {"models--gpt2", "datasets--rajpurkar--squad",
                                          "spaces--someone--demo"}


def test_a_locked_snapshot_file_stops_the_repo_before_its_blobs(isolated_home: Path) -> None:
    """Deletion order: refs, then snapshots, then blobs. A snapshot file that cannot go (held
    with flock: a Windows-style copy instead of a link) stops the repo there, so no link ever
    points at a deleted blob and huggingface_hub still reads the repo."""
    folder = hub_dir(isolated_home)
    a = commit_of("a")
    repo = make_repo(folder, "org/locked", {a: {"weights.bin": payload("w", 50000)}}, {"main": a})
    copy = repo / "snapshots" / a / "notes.txt"
    copy.write_bytes(b"a real file, not a link")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1]); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(copy)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = run_cli("clean", "huggingface", "--unit", "model/org/locked", "--yes", "--force")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "kept model/org/locked: partly removed" in proc.stderr
    finally:
        holder.kill()
        holder.wait()
    info = hf.scan_cache_dir(folder)
    assert info.warnings == []
    assert not (repo / "refs" / "main").exists()  # refs went first
    assert (repo / "blobs" / blob_name(payload("w", 50000))).exists()  # blobs were not reached
    assert copy.exists()


def build_shared_store(folder: Path, repos: tuple[str, ...], data: bytes
                       ) -> tuple[Path, dict[str, dict[str, dict[str, bytes]]]]:
    """huggingface_hub's shared store (`<hub>/blobs/<2 hex>/<xet hash>`, marked by
    `.huggingface-shared-blobs` holding the layout version; a repo's blob is a relative link to
    the payload, listed in `<xet hash>.refs`): one payload used by every repo named."""
    from huggingface_hub.utils import _shared_blobs

    xet = "ab" + "0" * 62
    store = folder / "blobs"
    (store / xet[:2]).mkdir(parents=True)
    (store / xet[:2] / xet).write_bytes(data)
    (store / _shared_blobs.SHARED_BLOBS_MARKER_NAME).write_text(
        _shared_blobs.SHARED_BLOBS_LAYOUT_VERSION + "\n")
    assert _shared_blobs.is_shared_blobs_dir(store)
    written = {}
    refs_lines = []
    for name in repos:
        commit = commit_of(name)
        repo = make_repo(folder, name, {commit: {"small.txt": payload(name, 100)}}, {"main": commit})
        etag = blob_name(data)
        (repo / "blobs" / etag).symlink_to(f"../../blobs/{xet[:2]}/{xet}")
        (repo / "snapshots" / commit / "model.bin").symlink_to(f"../../blobs/{etag}")
        written[repo.name] = {commit: {"small.txt": payload(name, 100), "model.bin": data}}
        refs_lines.append(f"{repo.name}/blobs/{etag}")
    (store / xet[:2] / f"{xet}.refs").write_text("\n".join(refs_lines) + "\n")
    check_hub(folder, written)
    return store / xet[:2] / xet, written


def test_shared_blob_store_payloads_go_with_their_last_repo(isolated_home: Path) -> None:
    """A payload two repos use is shown as shared and freed only when both are gone."""
    folder = hub_dir(isolated_home)
    data = payload("shared-weights", 200000)
    shared, written = build_shared_store(folder, ("org/one", "org/two"), data)
    units = {u["id"]: u for u in ls_json()["units"]}
    assert units["model/org/one"]["shared_bytes"] >= len(data)
    assert units["model/org/one"]["frees_bytes"] <= units["model/org/one"]["bytes"] - len(data)
    assert run_cli("clean", "huggingface", "--unit", "model/org/one", "--yes").returncode == 0
    assert shared.read_bytes() == data  # org/two still uses it
    check_hub(folder, written)
    assert run_cli("clean", "huggingface", "--unit", "model/org/two", "--yes").returncode == 0
    assert not shared.exists() and not shared.with_name(shared.name + ".refs").exists()
    assert hf.scan_cache_dir(folder).warnings == []


def test_size_rules_never_take_the_shared_stores_marker(isolated_home: Path) -> None:
    folder = hub_dir(isolated_home)
    shared, _ = build_shared_store(folder, ("org/one",), payload("w", 100000))
    proc = run_cli("clean", "huggingface", "--max-size", "1", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert (folder / "blobs" / ".huggingface-shared-blobs").exists()
    assert not shared.exists()  # its only repo went, so did the payload
    assert hf.scan_cache_dir(folder).warnings == []


def test_a_quota_evicts_whole_repos_and_history_keeps_the_measured_figures(hub) -> None:
    from cachedoctor import history
    from cachedoctor.quota import set_quota

    folder, written = hub
    set_quota("huggingface", "hub", 4 * MIB)
    proc = run_cli("clean", "--yes", "--json")  # no tool: quotas only
    assert proc.returncode == 0, proc.stderr
    assert check_hub(folder, written) == {"datasets--rajpurkar--squad", "spaces--someone--demo"}
    (change,) = history.changes(kind="clean")
    (measured,) = change.after["measured"]
    assert change.after["bytes"] == measured["freed_bytes"] > 5 * MIB
    assert measured["bytes_after"] <= 4 * MIB
    assert sorted(change.after["units_removed"]) == ["model/google-bert/bert-base-uncased",
                                                     "model/gpt2"]


def test_units_sent_to_the_trash_leave_a_consistent_hub(hub) -> None:
    from tests.conftest import trash_files_dir

    folder, written = hub
    proc = run_cli("clean", "huggingface", "--unit", "model/gpt2", "--trash", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert "trash" in proc.stderr or "trash" in proc.stdout
    assert "models--gpt2" not in check_hub(folder, written)
    trashed = {p.name for p in trash_files_dir().iterdir()}
    assert blob_name(payload("gpt2", 3 * MIB)) in trashed and "main" in trashed


def test_a_model_in_use_blocks_only_itself(hub) -> None:
    """A process reading gpt2's weights (an inference server) keeps gpt2, not the other repos."""
    folder, written = hub
    weights = folder / "models--gpt2" / "snapshots" / commit_of("c") / "model.bin"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'rb'); "
         "print('ready', flush=True); time.sleep(60)", str(weights)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        refused = run_cli("clean", "huggingface", "--unit", "model/gpt2", "--yes")
        assert refused.returncode == 2 and "in use" in refused.stderr
        assert f"pid {holder.pid}" in refused.stderr
        other = run_cli("clean", "huggingface", "--unit", "space/someone/demo", "--yes")
        assert other.returncode == 0, other.stderr
    finally:
        holder.kill()
        holder.wait()
    assert "spaces--someone--demo" not in check_hub(folder, written)
    assert weights.exists()
