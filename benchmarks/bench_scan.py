"""`cachedoctor scan --path DIR --json` vs `du -s DIR` on the same tree, in the same run.

Builds (once; reused while the spec is unchanged) a reproducible tree: ~300,000 files of 0-64 KiB
in ~3,000 folders with a few hundred hard links, symlinks and sparse files, under
`benchmarks/.data/` (git-ignored) or the folder given with --data. Then:

1. exactness: the scan's bytes / apparent_bytes / inodes must equal `du -sB1`, `du -sb` and
   `du --inodes -s` on that tree (exit 1 if not);
2. speed: warm runs (nothing is dropped from the caches), interleaved, median (and min, and
   median CPU time user+system) of --runs each,
   of `du -s`, the CLI (process start-up included), and for reference the walker alone
   (`python -c "measure(DIR)"`, with 1 process and with the default workers, through the
   compiled per-folder loop and through the Python one) and gdu/ncdu when they are installed.

Then the issue's default-scan condition: `cachedoctor scan` (no arguments) of a home holding
every built-in profile's locations with a few small files each (bench_startup's), the tree
moved in (a rename) as the pip cache's `http-v2`, against `du -s` of the same folders.

With --busy-core one CPU is kept busy by a spinning process during the timed runs (the
condition of a developer's machine with a build running).

    python benchmarks/bench_scan.py [--data DIR] [--runs 5] [--files N --dirs N] [--busy-core] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_startup import fill_home, home_env
from common import (
    DEFAULT_DATA,
    TreeSpec,
    bench_env,
    build_tree,
    busy_core,
    cachedoctor_argv,
    figures_against,
    machine,
    paired_medians,
    print_figures,
    result_of,
)


def du_totals(tree: Path) -> tuple[int, int, int]:
    def one(flag: str) -> int:
        out = subprocess.run(["du", "-s", flag, str(tree)], capture_output=True, text=True,
                         env=bench_env())
        return int(out.stdout.split()[0])
    return one("-B1"), one("-b"), one("--inodes")


def scan_totals(tree: Path) -> tuple[int, int, int]:
    out = subprocess.run([*cachedoctor_argv(), "scan", "--path", str(tree), "--json"],
                         capture_output=True, text=True,
                         env=bench_env())
    entry = result_of(out.stdout)["entries"][0]
    return entry["bytes"], entry["apparent_bytes"], entry["inodes"]


@contextlib.contextmanager
def home_holding(tree: Path, data: Path) -> Iterator[tuple[Path, list[Path]]]:
    """A home with every built-in location (`fill_home`) and `tree` renamed into its pip cache
    for the duration (renamed back afterwards, whatever happens); the home and its folders."""
    home = data / "home-with-tree"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    folders = fill_home(home)
    pip = next((f for f in folders if f.as_posix().endswith("/.cache/pip")), folders[0])
    inside = pip / "http-v2"
    tree.rename(inside)
    try:
        yield home, folders
    finally:
        inside.rename(tree)
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=TreeSpec.files)
    parser.add_argument("--dirs", type=int, default=TreeSpec.dirs)
    parser.add_argument("--busy-core", action="store_true", help="keep one CPU busy meanwhile")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    spec = TreeSpec(files=args.files, dirs=args.dirs)
    tree = build_tree(args.data / f"scan-tree-{spec.files}-{spec.dirs}", spec)

    expected, got = du_totals(tree), scan_totals(tree)
    exact = expected == got

    walk = "import sys; from cachedoctor.walker import measure; measure(sys.argv[1], workers={})"
    # the same walk with the Python per-folder loop (where cachedoctor/fs/_native.c is built)
    python_loop = ("from cachedoctor.fs.posix import LinuxOps; "
                   "LinuxOps.folder_counter = lambda self: None; ") + walk
    commands: dict[str, list[str]] = {
        "du -s": ["du", "-s", str(tree)],
        "cachedoctor scan --path --json": [*cachedoctor_argv(), "scan", "--path", str(tree),
                                           "--json"],
        "walker only, default workers": [sys.executable, "-c", walk.format("None"), str(tree)],
        "walker only, 1 process": [sys.executable, "-c", walk.format("1"), str(tree)],
        "walker only, Python loop, default workers": [
            sys.executable, "-c", python_loop.format("None"), str(tree)],
        "walker only, Python loop, 1 process": [
            sys.executable, "-c", python_loop.format("1"), str(tree)],
    }
    for tool, argv in (("gdu", ["gdu", "-n", "-p", str(tree)]),
                       ("ncdu", ["ncdu", "-o", "/dev/null", "-q", str(tree)])):
        if shutil.which(tool):
            commands[tool] = argv
    cpu: dict[str, list[float]] = {}
    home_cpu: dict[str, list[float]] = {}
    with busy_core(args.busy_core):
        samples = paired_medians(commands, runs=args.runs, cpu=cpu)
        with home_holding(tree, args.data) as (home, folders):
            in_home = {"du -s (the same folders)": ["du", "-s", *map(str, folders)],
                       "cachedoctor scan (the home)": [*cachedoctor_argv(), "scan"]}
            env = home_env(home)
            home_samples = paired_medians(in_home, runs=args.runs, cpu=home_cpu,
                                          envs=dict.fromkeys(in_home, env))
    figures = figures_against(samples, cpu)
    home_figures = figures_against(home_samples, home_cpu, base="du -s (the same folders)")
    report = {
        "machine": machine(tree), "tree": str(tree), "files": spec.files, "dirs": spec.dirs,
        "du_inodes": expected[2], "exact": exact, "du": expected, "scan": got,
        "runs": args.runs, "busy_core": args.busy_core, "loadavg_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "figures": figures,
        "home": {"folders": len(folders), "figures": home_figures},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"machine: {report['machine']}")
        print(f"one core busy: {args.busy_core}")
        print(f"tree: {tree} ({expected[2]:,} entries, {expected[0]:,} bytes allocated)")
        print(f"exact: {exact}  du={expected}  scan={got}")
        print_figures(figures, 42)
        print(f"\na home of every built-in location ({len(folders)} folders), the tree as the "
              "pip cache's http-v2:")
        print_figures(home_figures, 42)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
