"""`cachedoctor sweep DIR --dry-run --json` vs `du -s DIR` on the same tree, in the same run.

Builds (once; reused while the spec is unchanged) a reproducible tree of `--projects` (100)
projects holding `--files` (500,000) files in all, under `benchmarks/.data/` (git-ignored) or
`--data DIR`: each project is a real git repository (`git init`, its sources added and
committed, outputs ignored) of one of five shapes — Node (package.json, node_modules of nested
packages with `.bin` links and a hidden lockfile, a `dist/` from a build script), Rust
(Cargo.toml, target/ with CACHEDIR.TAG), Python (pyproject.toml, .venv with pyvenv.cfg whose
files are hard links into a shared uv-style cache in half the projects, __pycache__,
.pytest_cache, .mypy_cache), Gradle (build.gradle, .gradle, build/) and mixed — about 10% of
the files are sources, the rest build outputs. Then:

1. exactness: every output's `bytes` must equal `du -sB1` of it (exit 1 if not), and the
   outputs found must be the ones built (no more, no fewer);
2. speed: warm runs (nothing dropped from the caches), interleaved, median (and min, and
   median CPU time user+system) of --runs each, of `du -s`, the CLI (process start-up
   included), and for reference the finder alone with the default workers and in one process.

    python benchmarks/bench_sweep.py [--data DIR] [--runs 7] [--projects 100] [--files 500000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    DEFAULT_DATA,
    MARKER,
    bench_env,
    cachedoctor_argv,
    figures_against,
    machine,
    paired_medians,
    print_figures,
    result_of,
)

SHAPES = ("node", "rust", "python", "gradle", "mixed")
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
       "-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null"]


@dataclass(frozen=True)
class SweepSpec:
    projects: int = 100
    files: int = 500_000
    source_share: float = 0.1
    seed: int = 20250101


class _Builder:
    def __init__(self, root: Path, spec: SweepSpec) -> None:
        self.root = root
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.zero = bytes(16384)
        self.outputs: list[str] = []
        self.shared = root / "uv-cache"

    def file(self, path: Path, size: int | None = None) -> None:
        if size is None:
            size = 0 if self.rng.random() < 0.1 else int(2 ** self.rng.uniform(4, 14))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if size:
                os.write(fd, self.zero[:size])
        finally:
            os.close(fd)

    def tree(self, top: Path, files: int, *, per_dir: int = 12, names: str = "f",
             ext: str = "") -> list[Path]:
        """`files` files in nested folders below `top` (created)."""
        top.mkdir(parents=True, exist_ok=True)
        folders = [top]
        made: list[Path] = []
        for n in range(files):
            if n % per_dir == 0 and n:
                parent = self.rng.choice(folders[-8:])
                child = parent / f"d{n:06d}"
                child.mkdir()
                folders.append(child)
            path = self.rng.choice(folders[-4:]) / f"{names}{n:06d}{ext}"
            self.file(path)
            made.append(path)
        return made

    def node_modules(self, project: Path, files: int) -> None:
        nm = project / "node_modules"
        nm.mkdir()
        self.file(nm / ".package-lock.json", 2000)
        (nm / ".bin").mkdir()
        left = files
        i = 0
        while left > 0:
            pkg = nm / f"pkg{i:04d}"
            count = min(left, self.rng.randint(8, 60))
            self.tree(pkg / "lib", count - 1, names="m", ext=".js")
            self.file(pkg / "package.json", 600)
            if i % 7 == 0:
                os.symlink(f"../pkg{i:04d}/lib", nm / ".bin" / f"pkg{i:04d}")
            left -= count
            i += 1
        self.outputs.append(str(nm))

    def target(self, project: Path, files: int) -> None:
        target = project / "target"
        target.mkdir()
        (target / "CACHEDIR.TAG").write_bytes(
            b"Signature: 8a477f597d28d172789f06886806bc55\n# created by cargo\n")
        self.tree(target / "debug" / "deps", files - 1, per_dir=200, names="lib", ext=".rlib")
        self.outputs.append(str(target))

    def venv(self, project: Path, files: int, *, linked: bool) -> None:
        venv = project / ".venv"
        site = venv / "lib" / "python3.11" / "site-packages"
        site.mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")
        made = self.tree(site, files - 1, names="mod", ext=".py")
        if linked:  # uv's default on Linux: packages hard-linked from its cache
            for n, path in enumerate(made[: len(made) // 2]):
                store = self.shared / f"{project.name}-{n:06d}"
                os.link(path, store)
        self.outputs.append(str(venv))

    def python_caches(self, project: Path, sources: list[Path]) -> int:
        made = 0
        for folder in sorted({p.parent for p in sources if p.suffix == ".py"})[:10]:
            cache = folder / "__pycache__"
            cache.mkdir()
            for p in list(folder.glob("*.py"))[:5]:
                self.file(cache / f"{p.stem}.cpython-311.pyc")
                made += 1
            self.outputs.append(str(cache))
        pc = project / ".pytest_cache"
        (pc / "v" / "cache").mkdir(parents=True)
        (pc / "CACHEDIR.TAG").write_bytes(b"Signature: 8a477f597d28d172789f06886806bc55\n")
        self.file(pc / "v" / "cache" / "lastfailed", 40)
        self.outputs.append(str(pc))
        mc = project / ".mypy_cache"
        mc.mkdir()
        (mc / ".gitignore").write_text("# Automatically created by mypy\n*\n")
        made += len(self.tree(mc / "3.11", 40, names="m", ext=".data.json"))
        self.outputs.append(str(mc))
        return made + 3

    def project(self, index: int, budget: int) -> None:
        shape = SHAPES[index % len(SHAPES)]
        project = self.root / f"project{index:03d}-{shape}"
        project.mkdir()
        sources = max(20, int(budget * self.spec.source_share))
        outputs = budget - sources
        made = self.tree(project / "src", sources, names="s",
                         ext=".py" if shape in ("python", "mixed") else ".src")
        ignore = ["node_modules/", "target/", ".venv/", "__pycache__/", "dist/", "build/",
                  ".gradle/", ".pytest_cache/", ".mypy_cache/"]
        (project / ".gitignore").write_text("\n".join(ignore) + "\n")
        if shape in ("node", "mixed"):
            (project / "package.json").write_text(json.dumps(
                {"name": project.name, "scripts": {"build": "tsc -p ."}}))
            share = outputs if shape == "node" else outputs // 2
            dist = max(1, share // 20)
            self.tree(project / "dist", dist, names="o", ext=".js")
            self.outputs.append(str(project / "dist"))
            self.node_modules(project, share - dist)
            outputs -= share
        if shape == "rust":
            (project / "Cargo.toml").write_text(f'[package]\nname = "p{index}"\n')
            self.target(project, outputs)
        if shape in ("python", "mixed"):
            (project / "pyproject.toml").write_text(
                '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n')
            outputs -= self.python_caches(project, made)
            self.venv(project, outputs, linked=index % 2 == 0)
        if shape == "gradle":
            (project / "build.gradle").write_text("plugins { id 'java' }\n")
            self.tree(project / ".gradle" / "8.5", outputs // 4, names="h", ext=".bin")
            self.outputs.append(str(project / ".gradle"))
            self.tree(project / "build" / "classes", outputs - outputs // 4, names="C",
                      ext=".class")
            self.outputs.append(str(project / "build"))
        subprocess.run([*GIT, "init", "-q"], cwd=project, check=True)
        subprocess.run([*GIT, "add", "-A"], cwd=project, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", "sources"], cwd=project, check=True)


def build(root: Path, spec: SweepSpec) -> tuple[Path, list[str]]:
    marker = root / MARKER
    wanted = json.dumps(asdict(spec), sort_keys=True)
    listing = root / ".outputs.json"
    if marker.exists() and marker.read_text() == wanted and listing.exists():
        return root, json.loads(listing.read_text())
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    builder = _Builder(root, spec)
    builder.shared.mkdir()
    started = time.monotonic()
    per_project = spec.files // spec.projects
    for i in range(spec.projects):
        builder.project(i, per_project)
        if i and i % 10 == 0:
            print(f"  built {i} projects ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    listing.write_text(json.dumps(sorted(builder.outputs)))
    marker.write_text(wanted)
    print(f"  tree ready in {time.monotonic() - started:.0f} s: {root}", file=sys.stderr)
    return root, sorted(builder.outputs)


def du_bytes(path: str) -> int:
    out = subprocess.run(["du", "-sB1", path], capture_output=True, text=True, env=bench_env())
    return int(out.stdout.split()[0])


def check(tree: Path, expected: list[str]) -> tuple[bool, list[str]]:
    out = subprocess.run([*cachedoctor_argv(), "sweep", str(tree), "--dry-run", "--json"],
                         capture_output=True, text=True, env=bench_env())
    doc = result_of(out.stdout)
    found = {o["path"]: o for o in doc["outputs"]}
    problems = []
    if sorted(found) != expected:
        missing = sorted(set(expected) - set(found))[:5]
        extra = sorted(set(found) - set(expected))[:5]
        problems.append(f"outputs differ: missing {missing}, extra {extra}")
    for path, output in found.items():
        if output["bytes"] != du_bytes(path):
            problems.append(f"{path}: {output['bytes']} bytes, du -sB1 says {du_bytes(path)}")
    return not problems, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--projects", type=int, default=SweepSpec.projects)
    parser.add_argument("--files", type=int, default=SweepSpec.files)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    spec = SweepSpec(projects=args.projects, files=args.files)
    tree, expected = build(args.data / f"sweep-tree-{spec.projects}-{spec.files}", spec)
    exact, problems = check(tree, expected)
    inodes = int(subprocess.run(["du", "--inodes", "-s", str(tree)], capture_output=True,
                                text=True).stdout.split()[0])

    finder = ("import sys; from cachedoctor.sweep.finder import survey; "
              "survey(sys.argv[1], workers={})")
    commands: dict[str, list[str]] = {
        "du -s": ["du", "-s", str(tree)],
        "cachedoctor sweep --dry-run --json": [*cachedoctor_argv(), "sweep", str(tree),
                                               "--dry-run", "--json"],
        "finder only, default workers": [sys.executable, "-c", finder.format("None"), str(tree)],
        "finder only, 1 process": [sys.executable, "-c", finder.format("1"), str(tree)],
    }
    cpu: dict[str, list[float]] = {}
    samples = paired_medians(commands, runs=args.runs, cpu=cpu)
    figures = figures_against(samples, cpu)
    report = {
        "machine": machine(tree), "tree": str(tree), "projects": spec.projects,
        "files": spec.files, "du_inodes": inodes, "outputs": len(expected), "exact": exact,
        "problems": problems[:10], "runs": args.runs,
        "loadavg_after": " ".join(f"{x:.2f}" for x in os.getloadavg()), "figures": figures,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"machine: {report['machine']}")
        print(f"tree: {tree} ({inodes:,} entries, {len(expected)} outputs in "
              f"{spec.projects} projects)")
        print(f"exact: {exact}" + "".join(f"\n  {p}" for p in problems[:10]))
        print_figures(figures, 38)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
