"""`cachedoctor sweep`: generated project trees with planted traps, real git repositories,
real processes, du as the size oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.sweep import finder
from cachedoctor.sweep.finder import Passed
from cachedoctor.sweep.kinds import KINDS, parse_kinds
from cachedoctor.sweep.plan import SweepPolicy, execute_sweep, plan_sweep
from tests.conftest import (
    needs_du,
    needs_posix_paths,
    no_uses,
    result_of,
    run_cli,
    trash_files_dir,
)

pytestmark = needs_posix_paths  # POSIX trees: symlinks, hard links, du, git

DAY = 86400.0
TAG = b"Signature: 8a477f597d28d172789f06886806bc55\n# test tag\n"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
       "-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null"]


def write(path: Path, data: bytes | str = b"x" * 3000, *, age: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if age:
        when = time.time() - age
        os.utime(path, (when, when))
    return path


def fill(folder: Path, n: int = 5, *, age: float = 0.0) -> None:
    for i in range(n):
        write(folder / f"sub{i % 2}" / f"file{i}.bin", age=age)


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, **(env or {})})


def du(*paths: Path) -> list[int]:
    out = subprocess.run(["du", "-sB1", *map(str, paths)], capture_output=True, text=True,
                         check=True).stdout
    return [int(line.split()[0]) for line in out.splitlines()]


def node_project(root: Path, *, age: float = 0.0) -> Path:
    write(root / "package.json", '{"name": "p", "scripts": {"build": "tsc"}}', age=age)
    write(root / "src" / "index.js", "x", age=age)
    fill(root / "node_modules" / "dep", age=age)
    return root


def plan(*dirs: Path, **policy: object):  # type: ignore[no-untyped-def]
    return plan_sweep([str(d) for d in dirs], SweepPolicy(**policy), Host.current(),  # type: ignore[arg-type]
                      in_use=no_uses)


def paths_of(p) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(t.path for t in p.targets)


def snapshot(root: Path) -> dict[str, tuple[int, float]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[full] = (st.st_size, st.st_mtime)
    return out


def sweep_json(*args: str) -> tuple[int, dict]:
    result = run_cli("sweep", *args, "--json")
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


# --- recognition: every kind by its markers, never by name ------------------------------------

# kind -> (folder, files beside it, files inside it); each must be recognised, and the same
# folder without the files beside it (or inside it) must not be.
RECOGNISED = {
    "node_modules": ("node_modules", {"package.json": "{}"}, {"dep/index.js": "x"}),
    "target": ("target", {"Cargo.toml": "[package]"}, {"CACHEDIR.TAG": TAG, "debug/x": "x"}),
    "venv": (".venv", {}, {"pyvenv.cfg": "home = /usr/bin\n", "lib/x.py": "x"}),
    "tox": (".tox", {"tox.ini": "[tox]"}, {"py311/x": "x"}),
    "nox": (".nox", {"noxfile.py": "x"}, {"tests/x": "x"}),
    "__pycache__": ("__pycache__", {}, {"mod.cpython-311.pyc": "x"}),
    "mypy_cache": (".mypy_cache", {}, {".gitignore": "# Automatically created by mypy\n*\n"}),
    "ruff_cache": (".ruff_cache", {}, {"CACHEDIR.TAG": TAG}),
    "pytest_cache": (".pytest_cache", {}, {"README.md": "# pytest cache directory #\n"}),
    "gradle": (".gradle", {"build.gradle": "x"}, {"8.5/x": "x"}),
    "build": ("build", {"CMakeLists.txt": "x"}, {"CMakeCache.txt": "x"}),
    "dist": ("dist", {"pyproject.toml": "x"}, {"p-1.0-py3-none-any.whl": "x", "p-1.0.tar.gz": "x"}),
    "next": (".next", {"next.config.mjs": "x"}, {"BUILD_ID": "x"}),
    "DerivedData": ("DerivedData", {"App.xcodeproj/project.pbxproj": "x"}, {"App-abc/x": "x"}),
    "swiftpm": (".build", {"Package.swift": "x"}, {"debug/x": "x"}),
    "dart_tool": (".dart_tool", {"pubspec.yaml": "x"}, {"package_config.json": "x"}),
    "angular": (".angular", {"angular.json": "x"}, {"cache/x": "x"}),
    "svelte-kit": (".svelte-kit", {"svelte.config.js": "x"}, {"output/x": "x"}),
    "nuxt": (".nuxt", {"nuxt.config.ts": "x"}, {"x.js": "x"}),
    "turbo": (".turbo", {"turbo.json": "x"}, {"cache/x": "x"}),
    "parcel": (".parcel-cache", {"package.json": "{}"}, {"data.mdb": "x"}),
    "zig": (".zig-cache", {"build.zig": "x"}, {"o/x": "x"}),
    "mix": ("_build", {"mix.exs": "x"}, {"dev/x": "x"}),
    "stack": (".stack-work", {"stack.yaml": "x"}, {"dist/x": "x"}),
    "cabal": ("dist-newstyle", {"p.cabal": "x"}, {"cache/x": "x"}),
    "dotnet": ("obj", {"App.csproj": "x"}, {"project.assets.json": "x", "Debug/x": "x"}),
}


def test_every_kind_has_a_recognition_case_and_is_documented() -> None:
    assert set(RECOGNISED) == {k.id for k in KINDS}
    docs = (Path(__file__).resolve().parents[1] / "docs" / "sweep.md").read_text()
    for kind in KINDS:
        assert f"| `{kind.id}` |" in docs and kind.source in docs, kind.id


@pytest.mark.parametrize("kind", sorted(RECOGNISED))
def test_kind_is_recognised_by_its_markers_only(kind: str, tmp_path: Path) -> None:
    folder, beside, inside = RECOGNISED[kind]
    full = tmp_path / "full"
    for name, data in beside.items():
        write(full / name, data)
    for name, data in inside.items():
        write(full / folder / name, data)
    found = finder.survey(str(full), workers=1)
    assert [(o.kind, o.path) for o in found.outputs.values()] == [(kind, str(full / folder))]
    bare = tmp_path / "bare"  # the same folder, nothing beside it that makes it
    for name, data in inside.items():
        write(bare / folder / name, data)
    if beside:
        found = finder.survey(str(bare), workers=1)
        assert found.outputs == {}
        assert any(p.path == str(bare / folder) and p.reason.startswith(("no ", "none "))
                   for p in found.passed)
    hollow = tmp_path / "hollow"  # ...and with its build file but none of its own markers
    for name, data in beside.items():
        write(hollow / name, data)
    (hollow / folder).mkdir(parents=True)
    write(hollow / folder / "unrelated.txt", "x")
    if kind not in ("node_modules", "tox", "nox", "gradle", "next", "DerivedData", "swiftpm",
                    "dart_tool", "angular", "svelte-kit", "nuxt", "turbo", "parcel", "zig",
                    "mix", "stack", "cabal"):  # these are made only by their build file
        assert finder.survey(str(hollow), workers=1).outputs == {}


def test_build_and_dist_need_more_than_a_build_file(tmp_path: Path) -> None:
    """A package.json build script makes build/ and dist/ outputs only when the project's
    .gitignore says they are generated (electron-builder keeps icons in build/)."""
    project = tmp_path / "app"
    write(project / "package.json", '{"scripts": {"build": "vite build"}}')
    fill(project / "build")  # e.g. electron-builder's resources: the project's own files
    fill(project / "dist")
    assert plan(project).targets == []
    write(project / ".gitignore", "# generated\n/dist\nnode_modules/\n")
    assert paths_of(plan(project)) == [str(project / "dist")]
    write(project / ".gitignore", "dist/\nbuild\n!build\n")  # a negation wins: left alone
    assert paths_of(plan(project)) == [str(project / "dist")]
    nested = tmp_path / "mono"  # a root .gitignore covers the packages below it
    write(nested / ".gitignore", "dist\n")
    write(nested / "packages" / "a" / "package.json", '{"scripts": {"build": "tsc"}}')
    fill(nested / "packages" / "a" / "dist")
    assert paths_of(plan(nested)) == [str(nested / "packages" / "a" / "dist")]
    python = tmp_path / "lib"  # setuptools: build/lib..., dist/ of archives only
    write(python / "setup.py", "x")
    fill(python / "build" / "lib")
    write(python / "dist" / "lib-1.0.tar.gz")
    write(python / "dist" / "notes.txt")  # something else in dist/: not only archives
    assert paths_of(plan(python)) == [str(python / "build")]


def test_build_folder_without_a_build_file_is_never_touched(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(project / "README.md", "x")
    fill(project / "build")
    fill(project / "build" / "__pycache__")  # no .pyc inside: not a bytecode cache either
    before = snapshot(tmp_path)
    code, doc = sweep_json(str(tmp_path), "--yes")
    assert code == 0
    assert snapshot(tmp_path) == before
    reasons = {a["path"]: a["reason"] for a in doc["result"]["left_alone"]}
    assert reasons[str(project / "build")] == (
        "none of the markers of setuptools, CMake, Meson, Gradle, a package.json build script "
        "(see docs/sweep.md)")


def test_installed_software_is_not_searched(tmp_path: Path) -> None:
    """A VS Code extension or a global npm package ships node_modules beside its package.json;
    hidden folders, node_modules trees and app bundles are never searched."""
    for where in (".vscode/extensions/ms-x.y-1.0", "lib/node_modules/npm", "Code.app/Contents/app"):
        node_project(tmp_path / where)
    assert plan(tmp_path).targets == []
    with pytest.raises(RefusedError, match="inside installed packages"):
        plan(tmp_path / "lib" / "node_modules" / "npm")  # its packages' own node_modules


# --- links, hard links, sizes -----------------------------------------------------------------


def test_node_modules_symlink_to_a_shared_folder_is_never_followed(tmp_path: Path) -> None:
    shared = tmp_path / "shared-node-modules"
    fill(shared / "dep", 8)
    tree = tmp_path / "tree"
    linked = tree / "linked"
    write(linked / "package.json", "{}")
    os.symlink(shared, linked / "node_modules")
    real = node_project(tree / "real")
    os.symlink(shared / "dep", real / "node_modules" / "dep-link")  # a link inside an output
    before = snapshot(shared)
    code, doc = sweep_json(str(tree), "--yes")
    assert code == 0, doc
    assert snapshot(shared) == before  # neither link led the deleter there
    assert os.path.islink(linked / "node_modules")
    assert not (real / "node_modules").exists()  # the real one went, its link as a link
    reasons = {a["path"]: a["reason"] for a in doc["result"]["left_alone"]}
    assert reasons[str(linked / "node_modules")] == "a link: never followed"


@needs_du
def test_hard_linked_venv_frees_only_what_it_owns(tmp_path: Path) -> None:
    """uv installs packages as hard links into its cache: deleting the venv frees nothing of
    those; the figures say so, and du agrees."""
    cache = tmp_path / "uv-cache"
    tree = tmp_path / "tree"
    venv = tree / "p" / ".venv"
    write(tree / "p" / "pyproject.toml", "x")
    write(venv / "pyvenv.cfg", "home = /usr/bin\n")
    for i in range(6):
        src = write(cache / f"wheel{i}.py", b"y" * 5000)
        (venv / "lib").mkdir(parents=True, exist_ok=True)
        os.link(src, venv / "lib" / f"m{i}.py")
    write(venv / "lib" / "own.py", b"z" * 9000)
    p = plan(tree)
    [target] = p.targets
    o = target.output
    assert o.bytes == du(venv)[0]
    assert o.freed == du(cache, venv)[1]  # du counts a linked inode in its first argument only
    assert o.shared == sum(du(*(venv / "lib" / f"m{i}.py" for i in range(6))))
    assert p.totals()["freed_bytes"] == o.freed
    row = next(line for line in run_cli("sweep", str(tree), "--dry-run").stdout.splitlines()
               if str(venv) in line)
    assert "KiB shared, frees 0 B" in row
    code, _ = sweep_json(str(tree), "--yes")
    assert code == 0
    assert not venv.exists() and len(list(cache.iterdir())) == 6  # the cache keeps every file


@needs_du
def test_files_linked_between_two_swept_outputs_are_freed_together(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / ".venv", tmp_path / "b" / ".venv"
    for venv in (a, b):
        write(venv / "pyvenv.cfg", "x")
    write(a / "big.py", b"q" * 20000)
    os.link(a / "big.py", b / "big.py")
    p = plan(tmp_path)
    assert [t.output.shared > 0 for t in p.targets] == [True, True]  # alone, each frees less
    assert p.totals()["freed_bytes"] == sum(du(a, b))  # together every name goes


@needs_du
def test_sizes_match_du_on_a_mixed_tree_in_parallel_and_in_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(6):
        node_project(tmp_path / f"n{i}")
        write(tmp_path / f"r{i}" / "Cargo.toml", "x")
        write(tmp_path / f"r{i}" / "target" / "CACHEDIR.TAG", TAG)
        fill(tmp_path / f"r{i}" / "target" / "debug", 30)
        os.link(tmp_path / f"r{i}" / "target" / "debug" / "sub0" / "file0.bin",
                tmp_path / f"r{i}" / "target" / "twice.bin")
    monkeypatch.setattr(finder, "MIN_PARENT_ENTRIES", 0)
    monkeypatch.setattr(finder, "TASKS_PER_WORKER", 1)
    outcomes: list[bool | None] = []
    finished = finder._Finder._task_finished

    def spy(walk: finder._Finder, task: object, outcome: bool | None) -> None:
        outcomes.append(outcome)
        finished(walk, task, outcome)  # type: ignore[arg-type]

    monkeypatch.setattr(finder._Finder, "_task_finished", spy)
    forked = finder.survey(str(tmp_path), workers=2)
    assert outcomes and None not in outcomes  # the workers walked it (and reported back)
    single = finder.survey(str(tmp_path), workers=1)
    assert len(forked.outputs) == 12
    for path, output in forked.outputs.items():
        assert (output.bytes, output.files, output.dirs) == (
            single.outputs[path].bytes, single.outputs[path].files, single.outputs[path].dirs)
        assert output.bytes == du(Path(path))[0]
    assert forked.activity() == single.activity()


def test_the_windows_walk_finds_the_same(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same walk through the Windows seam (paths, no dir_fd; tests/doubles/windows.py):
    links and junctions are links, never entered; sizes are apparent bytes (Windows reports
    no allocation), hard links inside an output counted once (identity from lstat)."""
    from tests import doubles

    node_project(tmp_path / "n")
    os.symlink(tmp_path / "n" / "node_modules", tmp_path / "n" / "src" / "node_modules")
    os.link(tmp_path / "n" / "node_modules" / "dep" / "sub0" / "file0.bin",
            tmp_path / "n" / "node_modules" / "dep" / "twice.bin")
    write(tmp_path / "py" / "m.py", "x")
    write(tmp_path / "py" / "__pycache__" / "m.cpython-311.pyc", "x")
    write(tmp_path / "n" / ".gitignore", "dist\n")  # read through the seam: dist/ is an output
    fill(tmp_path / "n" / "dist")
    write(tmp_path / "tag" / "CACHEDIR.TAG", TAG)
    (tmp_path / "tag" / ".ruff_cache").mkdir()  # its tag a link: not read, not an output
    os.symlink(tmp_path / "tag" / "CACHEDIR.TAG", tmp_path / "tag" / ".ruff_cache" / "CACHEDIR.TAG")
    write(tmp_path / "j" / "package.json", "{}")
    fd_walk = finder.survey(str(tmp_path), workers=1)
    with doubles.installed("windows", tmp_path_factory.mktemp("windows-double"),
                           monkeypatch) as api:
        api.make_junction(tmp_path / "j" / "node_modules", tmp_path / "n" / "node_modules")
        path_walk = finder.survey(str(tmp_path), workers=2)  # no fork there: one process
    assert len(path_walk.outputs) == 3
    assert {p: (o.kind, o.files, o.dirs) for p, o in path_walk.outputs.items()} == {
        p: (o.kind, o.files, o.dirs) for p, o in fd_walk.outputs.items()}
    for path, output in path_walk.outputs.items():
        sizes = {(st.st_dev, st.st_ino): st.st_size for st in (
            os.lstat(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)}
        assert output.bytes == sum(sizes.values()), path
    link = str(tmp_path / "j" / "node_modules")
    assert [p for p in path_walk.passed if p.path != link] == fd_walk.passed
    assert Passed(link, "node_modules", "a link: never followed") in path_walk.passed
    assert str(tmp_path / "tag" / ".ruff_cache") in {p.path for p in fd_walk.passed}


# --- sources, git, safety ---------------------------------------------------------------------


def test_sources_stay_and_git_is_never_entered(tmp_path: Path) -> None:
    project = node_project(tmp_path / "p")
    write(project / "lib" / "tool.py", "x")
    write(project / "lib" / "__pycache__" / "tool.cpython-311.pyc", "x")
    write(project / "lib" / "__pycache__" / "notes.txt", "x")  # not bytecode: it stays
    git(project, "init", "-q")
    write(project / ".git" / "package.json", "{}")  # an output-looking tree inside .git
    fill(project / ".git" / "node_modules")
    sources = {p for p in snapshot(project) if "/node_modules" not in p and "__pycache__/" not in p}
    code, doc = sweep_json(str(tmp_path), "--yes")
    assert code == 0, doc
    after = snapshot(project)
    assert sources <= set(after)  # every source file and .git's content is still there
    assert (project / ".git" / "node_modules").is_dir()
    assert (project / "lib" / "__pycache__" / "notes.txt").exists()
    assert not (project / "lib" / "__pycache__" / "tool.cpython-311.pyc").exists()
    swept = sorted(r["path"] for r in doc["result"]["results"])
    assert swept == [str(project / "lib" / "__pycache__"), str(project / "node_modules")]


def test_outputs_git_tracks_are_refused(tmp_path: Path) -> None:
    """A committed dist/ (a GitHub Action's) or vendored node_modules is the project's sources."""
    project = node_project(tmp_path / "action")
    write(project / ".gitignore", "dist\n")
    fill(project / "dist")
    git(project, "init", "-q")
    git(project, "add", "-f", "dist", "package.json")
    git(project, "commit", "-q", "-m", "release")
    code, doc = sweep_json(str(tmp_path), "--yes")
    assert code == 2
    assert (project / "dist" / "sub0" / "file0.bin").exists()
    assert not (project / "node_modules").exists()  # the untracked one still went
    [refused] = [a for a in doc["result"]["left_alone"] if a["refused"]]
    assert refused["path"] == str(project / "dist") and "git tracks" in refused["reason"]
    assert doc["ok"] is False and doc["errors"]


@pytest.mark.parametrize("setup", [
    ["update-index", "--index-version", "4"],
    ["update-index", "--index-version", "3"],
    ["update-index", "--split-index"],
    ["sha256"],
])
def test_git_index_formats(setup: list[str], tmp_path: Path) -> None:
    project = node_project(tmp_path / "p")
    write(project / ".gitignore", "dist/\n")
    fill(project / "dist")
    fill(project / "src" / "deep" / "er")
    git(project, "init", "-q", *(["--object-format=sha256"] if setup == ["sha256"] else []))
    git(project, "add", "-A")
    git(project, "add", "-f", "dist/sub0")
    git(project, "add", "-N", "-f", "node_modules/dep/sub1/file1.bin")  # intent to add: extended flags
    if setup != ["sha256"]:
        git(project, *setup)
    p = plan(tmp_path)
    reasons = {a.path: a.reason for a in p.refused}
    if setup == ["update-index", "--split-index"]:
        assert all("cannot be read" in reasons[str(project / n)] for n in ("dist", "node_modules"))
    else:
        assert "git tracks" in reasons[str(project / "dist")]
        assert "git tracks" in reasons[str(project / "node_modules")]
    assert p.targets == []


def test_output_holding_a_repository_or_cachedoctor_itself_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = node_project(tmp_path / "p")
    git(project / "node_modules" / "dep", "init", "-q")  # a checkout, not an install
    venv = tmp_path / "q" / ".venv"
    write(venv / "pyvenv.cfg", "x")
    monkeypatch.setattr(sys, "prefix", str(venv))
    reasons = {a.path: a.reason for a in plan(tmp_path).refused}
    assert "holds a git repository" in reasons[str(project / "node_modules")]
    assert "cachedoctor itself runs from it" in reasons[str(venv)]


def test_an_output_in_use_is_refused(tmp_path: Path) -> None:
    project = node_project(tmp_path / "p")
    holder = subprocess.Popen(["sleep", "60"], cwd=project / "node_modules")
    try:
        code, doc = sweep_json(str(tmp_path), "--yes")
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    assert (project / "node_modules").is_dir()
    [refused] = doc["result"]["left_alone"]
    assert refused["refused"] and "working directory" in refused["reason"]


def test_a_locked_output_fails_alone(tmp_path: Path) -> None:
    from cachedoctor.locking import exclusive

    node_project(tmp_path / "a")
    node_project(tmp_path / "b")
    p = plan(tmp_path)
    with exclusive(f"sweep:{tmp_path / 'a' / 'node_modules'}"):
        result = execute_sweep(p, lock_wait=0)
    assert [r.status for r in sorted(result.results, key=lambda r: r.target.path)] == [
        "failed", "done"]
    assert (tmp_path / "a" / "node_modules").is_dir() and not (tmp_path / "b" / "node_modules").exists()


# --- age, kinds, dry run, trash, history, bad input -------------------------------------------


def test_older_than_counts_the_project_activity_not_the_output(tmp_path: Path) -> None:
    idle = node_project(tmp_path / "idle", age=90 * DAY)
    fill(idle / "node_modules" / "fresh")  # reinstalled yesterday: its own mtime says nothing
    busy = node_project(tmp_path / "busy", age=90 * DAY)
    write(busy / "src" / "new.js", "x")  # edited today
    write(busy / ".DS_Store", "x", age=0)  # Finder's files are not activity...
    write(idle / ".DS_Store", "x", age=0)
    committed = node_project(tmp_path / "committed", age=90 * DAY)
    git(committed, "init", "-q")
    git(committed, "add", "package.json")
    git(committed, "commit", "-q", "-m", "today")  # ...a commit is
    for path in committed.rglob("*"):
        if ".git" not in path.parts:
            os.utime(path, (time.time() - 90 * DAY,) * 2)
    old_commit = node_project(tmp_path / "old-commit", age=90 * DAY)
    stamp = f"{int(time.time() - 80 * DAY)} +0000"
    git(old_commit, "init", "-q")
    git(old_commit, "add", "package.json")
    git(old_commit, "commit", "-q", "-m", "long ago", env={"GIT_COMMITTER_DATE": stamp,
                                                            "GIT_AUTHOR_DATE": stamp})
    for path in old_commit.rglob("*"):
        if ".git" not in path.parts:
            os.utime(path, (time.time() - 90 * DAY,) * 2)
    p = plan(tmp_path, older_than=30 * DAY)
    assert paths_of(p) == [str(tmp_path / n / "node_modules") for n in ("idle", "old-commit")]
    [dated] = [t for t in p.targets if "old-commit" in t.path]
    assert dated.activity_from == "git" and abs(dated.activity - (time.time() - 80 * DAY)) < 5
    reasons = {a.path: a.reason for a in p.left_alone}
    assert "was active 0s ago (newest file)" in reasons[str(busy / "node_modules")]
    assert "git reflog" in reasons[str(committed / "node_modules")]
    assert len(plan(tmp_path).targets) == 4  # without an age, everything found goes


def test_kind_filter(tmp_path: Path) -> None:
    node_project(tmp_path / "n")
    write(tmp_path / "r" / "Cargo.toml", "x")
    write(tmp_path / "r" / "target" / ".rustc_info.json", "{}")
    fill(tmp_path / "r" / "target" / "debug")
    code, _ = sweep_json(str(tmp_path), "--kind", "target", "--yes")
    assert code == 0
    assert not (tmp_path / "r" / "target").exists() and (tmp_path / "n" / "node_modules").is_dir()
    assert [k.id for k in parse_kinds([".venv,Target", "node_modules"]) or ()] == [
        "venv", "target", "node_modules"]
    assert parse_kinds(["", " , "]) is None  # nothing named: every kind
    assert [k.id for k in parse_kinds([".build"]) or ()] == ["swiftpm"]
    assert [k.id for k in parse_kinds(["build"]) or ()] == ["build"]
    with pytest.raises(UserInputError, match="unknown output kind 'nodemodules'"):
        parse_kinds(["nodemodules"])


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    node_project(tmp_path / "n")
    write(tmp_path / "py" / "pyproject.toml", "x")
    write(tmp_path / "py" / ".venv" / "pyvenv.cfg", "x")
    before = snapshot(tmp_path)
    code, doc = sweep_json(str(tmp_path), "--dry-run")
    assert code == 0 and doc["schema"] == "cachedoctor.sweep/1" and doc["ok"]
    assert doc["result"]["dry_run"] is True and doc["result"]["totals"]["outputs"] == 2
    assert snapshot(tmp_path) == before
    table = run_cli("sweep", str(tmp_path), "--dry-run")
    assert table.returncode == 0 and "2 build outputs in 2 projects" in table.stdout
    assert table.stderr == ""  # no progress line when not on a terminal
    refused = run_cli("sweep", str(tmp_path))  # no terminal to ask on, no --yes
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert snapshot(tmp_path) == before


def test_trash_keeps_a_way_back(tmp_path: Path) -> None:
    project = node_project(tmp_path / "n")
    code, doc = sweep_json(str(tmp_path), "--trash", "--yes")
    assert code == 0, doc
    assert not (project / "node_modules").exists()
    trashed = {p.name for p in trash_files_dir().rglob("*")}
    assert {"file0.bin", "file4.bin"} <= trashed
    assert doc["result"]["trash"] is True


def test_history_records_the_sweep_and_undo_refuses(tmp_path: Path) -> None:
    node_project(tmp_path / "n")
    code, doc = sweep_json(str(tmp_path), "--yes")
    assert code == 0
    freed = doc["result"]["totals"]["bytes"]
    history = result_of(run_cli("history", "--kind", "sweep", "--json"))["changes"]
    [change] = history
    assert change["kind"] == "sweep" and change["after"]["undoable"] is False
    assert change["after"]["bytes"] == freed and change["before"]["dirs"] == [str(tmp_path)]
    undo = run_cli("undo", str(change["id"]), "--yes")
    assert undo.returncode == 2 and "Traceback" not in undo.stderr


def test_result_counts_what_was_planned(tmp_path: Path) -> None:
    node_project(tmp_path / "n")
    p = plan(tmp_path)
    planned = p.totals()
    result = execute_sweep(p, record_history=False)
    assert result.totals()["bytes"] == planned["freed_bytes"]
    assert result.totals()["files"] == planned["files"]


@pytest.mark.parametrize("args", [
    ["/no/such/folder"],
    ["FILE"],
    ["DIR", "--older-than", "soon"],
    ["DIR", "--kind", "nope"],
    ["/"],
    ["/usr/share"],
    [],
])
def test_bad_input_exits_2(args: list[str], tmp_path: Path) -> None:
    write(tmp_path / "file", "x")
    argv = [str(tmp_path / "file") if a == "FILE" else str(tmp_path) if a == "DIR" else a
            for a in args]
    result = run_cli("sweep", *argv, "--dry-run")
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr


def test_search_roots(tmp_path: Path) -> None:
    from cachedoctor.sweep.plan import search_roots

    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    os.symlink(inner, tmp_path / "link")
    assert search_roots([str(inner), str(tmp_path), str(tmp_path / "link")], Host.current()) == [
        str(tmp_path)]
    with pytest.raises(RefusedError):
        search_roots(["/etc"], Host.current())
