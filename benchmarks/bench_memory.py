"""Peak memory of a 1,000,000-file scan.

Builds a tree of 1,000,000 empty files in 10,000 folders (plus hard links and symlinks; empty
files keep disk use to the inodes) in a temporary folder (or --dir, which is kept and reused),
then runs, each in a fresh helper process so the figure belongs to that command alone:

- `cachedoctor scan --path DIR --json` (the real CLI, worker processes included),
- the walker alone in one process (`measure(DIR, workers=1)`),
- the walker alone with the default workers,
- `du -s DIR` for reference,

and reports `resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` of the helper: the peak RSS of the
largest single process among the command and its children (forked workers share the parent's
pages copy-on-write, so this is not a sum).

    python benchmarks/bench_memory.py [--files 1000000] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import TreeSpec, bench_env, build_tree, cachedoctor_argv, machine

TARGET_MIB = 40.0  # issue 14: a 1,000,000-file scan stays within 40 MiB


def peak_rss_mib(argv: list[str]) -> float:
    """Peak RSS (MiB) of `argv` and its descendants, measured in a fresh helper process."""
    helper = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "assert code in (0, 1), code\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", helper, *argv], capture_output=True, text=True,
                         check=True, env=bench_env())
    kib = int(out.stdout.strip())
    return kib / 1024 if sys.platform != "darwin" else kib / 1024 / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--dirs", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, help="build (or reuse) the tree here and keep it")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    spec = TreeSpec(files=args.files, dirs=args.dirs, top_level=40, hard_links=1000,
                    symlinks=300, sparse=0, empty_files=True)
    scratch = None if args.dir else Path(tempfile.mkdtemp(prefix="cachedoctor-mem-"))
    root = args.dir if args.dir else scratch / "tree"  # type: ignore[operator]
    try:
        tree = build_tree(root, spec)
        walk = ("import sys; from cachedoctor.walker import measure; "
                "measure(sys.argv[1], workers={})")
        commands = {
            "cachedoctor scan --path --json": [*cachedoctor_argv(), "scan", "--path", str(tree),
                                               "--json"],
            "walker only, 1 process": [sys.executable, "-c", walk.format("1"), str(tree)],
            "walker only, default workers": [sys.executable, "-c", walk.format("None"),
                                             str(tree)],
            "python -c pass": [sys.executable, "-c", "pass"],
            "du -s": ["du", "-s", str(tree)],
        }
        figures = {name: round(peak_rss_mib(argv), 1) for name, argv in commands.items()}
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    ok = figures["cachedoctor scan --path --json"] <= TARGET_MIB
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.json:
        print(json.dumps({"machine": machine(), "files": spec.files, "dirs": spec.dirs,
                          "peak_rss_mib": figures, "target_mib": TARGET_MIB,
                          "target_met": ok}, indent=2))
    else:
        print(f"machine: {machine()}")
        print(f"tree: {spec.files:,} empty files in {spec.dirs:,} folders")
        for name, mib in figures.items():
            print(f"{name:34} peak RSS {mib:7.1f} MiB")
        print(f"target (<= {TARGET_MIB:.0f} MiB for the scan): {'met' if ok else 'NOT met'}"
              f"  (this script itself: {own:.0f} MiB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
