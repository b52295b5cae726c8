"""`cachedoctor scan --path DIR --json` vs `du -s DIR` on the same tree, in the same run.

Builds (once; reused while the spec is unchanged) a reproducible tree: ~300,000 files of 0-64 KiB
in ~3,000 folders with a few hundred hard links, symlinks and sparse files, under
`benchmarks/.data/` (git-ignored) or the folder given with --data. Then:

1. exactness: the scan's bytes / apparent_bytes / inodes must equal `du -sB1`, `du -sb` and
   `du --inodes -s` on that tree (exit 1 if not);
2. speed: warm runs (nothing is dropped from the caches), interleaved, median (and min, and
   median CPU time user+system) of --runs each,
   of `du -s`, the CLI (process start-up included), and for reference the walker alone
   (`python -c "measure(DIR)"`, with 1 process and with the default workers) and gdu/ncdu
   when they are installed.

With --busy-core one CPU is kept busy by a spinning process during the timed runs (the
condition of a developer's machine with a build running).

    python benchmarks/bench_scan.py [--data DIR] [--runs 5] [--files N --dirs N] [--busy-core] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
    commands: dict[str, list[str]] = {
        "du -s": ["du", "-s", str(tree)],
        "cachedoctor scan --path --json": [*cachedoctor_argv(), "scan", "--path", str(tree),
                                           "--json"],
        "walker only, default workers": [sys.executable, "-c", walk.format("None"), str(tree)],
        "walker only, 1 process": [sys.executable, "-c", walk.format("1"), str(tree)],
    }
    for tool, argv in (("gdu", ["gdu", "-n", "-p", str(tree)]),
                       ("ncdu", ["ncdu", "-o", "/dev/null", "-q", str(tree)])):
        if shutil.which(tool):
            commands[tool] = argv
    cpu: dict[str, list[float]] = {}
    with busy_core(args.busy_core):
        samples = paired_medians(commands, runs=args.runs, cpu=cpu)
    figures = figures_against(samples, cpu)
    report = {
        "machine": machine(tree), "tree": str(tree), "files": spec.files, "dirs": spec.dirs,
        "du_inodes": expected[2], "exact": exact, "du": expected, "scan": got,
        "runs": args.runs, "busy_core": args.busy_core, "loadavg_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "figures": figures,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"machine: {report['machine']}")
        print(f"one core busy: {args.busy_core}")
        print(f"tree: {tree} ({expected[2]:,} entries, {expected[0]:,} bytes allocated)")
        print(f"exact: {exact}  du={expected}  scan={got}")
        print_figures(figures, 34)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
