"""`cachedoctor clean` (delete) against `rm -rf` on identical trees, in the same run.

Every round builds four identical trees (FILES small files in folders of 100, a few symlinks),
then times, in alternating order:

* `rm -rf TREE_A` (the standard tool; it also removes the root folder, one rmdir more);
* the deleter alone: `cachedoctor.safedelete.clean_tree(TREE_B)` in this process
  (fd-relative, O_NOFOLLOW, inode re-check, /proc/locks pre-filter + flock probe, byte count;
  forked workers, one per usable CPU);
* the same with `workers=1` on TREE_D (one process: what the per-entry work costs);
* the whole CLI: `cachedoctor clean bench --yes` on TREE_C through a temporary profile
  (process start-up, profile loading, lock and history included).

    python benchmarks/bench_clean.py [--files 100000] [--rounds 3] [--dir DIR] [--json]

`--dir` picks the filesystem (default: a temporary folder; on a tmpfs the figure is pure CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cachedoctor.safedelete import clean_tree

PER_DIR = 100


def build(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    payload = b"c" * 200
    for d in range((files + PER_DIR - 1) // PER_DIR):
        folder = root / f"g{d // 50:03d}" / f"d{d:05d}"
        folder.mkdir(parents=True)
        for i in range(min(PER_DIR, files - d * PER_DIR)):
            with open(folder / f"f{i:03d}", "wb") as fh:
                fh.write(payload)
        if d % 100 == 0:
            (folder / "link").symlink_to("../..")


def cli_argv() -> list[str]:
    exe = shutil.which("cachedoctor")
    return [exe] if exe else [sys.executable, "-m", "cachedoctor"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="bench-clean-", dir=args.dir))
    home = base / "home"
    profiles = base / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "bench.yaml").write_text(
        "id: bench\nname: Bench\ndescription: benchmark cache\nlocations:\n  - id: cache\n"
        f"    paths:\n      linux: '{base}/c'\n      macos: '{base}/c'\n"
        "    safe_to_delete: true\n"
    )
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_STATE_HOME": str(home / ".state"), "CACHEDOCTOR_PROFILES_DIR": str(profiles)}
    samples: dict[str, list[float]] = {
        "rm -rf": [], "clean_tree": [], "clean_tree 1 process": [], "cachedoctor clean": []}
    expected = args.files + (args.files // PER_DIR + 99) // 100  # files and symlinks
    try:
        for r in range(args.rounds):
            for name in ("a", "b", "c", "d"):
                build(base / name, args.files)
            subprocess.run(["sync"], check=False)
            order = list(samples)
            if r % 2:
                order.reverse()
            for what in order:
                started = time.perf_counter()
                if what == "rm -rf":
                    subprocess.run(["rm", "-rf", str(base / "a")], check=True)
                elif what == "clean_tree":
                    result = clean_tree(str(base / "b"))
                    assert result.files == expected and not result.errors
                elif what == "clean_tree 1 process":
                    result = clean_tree(str(base / "d"), workers=1)
                    assert result.files == expected and not result.errors
                else:
                    proc = subprocess.run([*cli_argv(), "clean", "bench", "--yes"], env=env,
                                          capture_output=True, text=True, check=False)
                    if proc.returncode != 0:
                        raise SystemExit(f"cachedoctor clean failed: {proc.stderr}")
                samples[what].append(time.perf_counter() - started)
            leftovers = [p for n in ("b", "c", "d") for p in (base / n).rglob("*")]
            assert not leftovers, leftovers[:3]
            for n in ("b", "c", "d"):
                shutil.rmtree(base / n)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    fs = subprocess.run(["stat", "-f", "-c", "%T", str(args.dir or tempfile.gettempdir())],
                        capture_output=True, text=True, check=False).stdout.strip()
    med = {k: statistics.median(v) for k, v in samples.items()}
    report = {
        "files": args.files, "rounds": args.rounds, "filesystem": fs,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "kernel": platform.release()},
        "median_seconds": med, "samples": samples,
        "load_average": os.getloadavg(),
        "ratio_clean_tree_vs_rm": med["clean_tree"] / med["rm -rf"],
        "ratio_clean_tree_1_process_vs_rm": med["clean_tree 1 process"] / med["rm -rf"],
        "ratio_cli_vs_rm": med["cachedoctor clean"] / med["rm -rf"],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.files:,} files, {args.rounds} rounds, filesystem {fs}, "
              f"load average {report['load_average']}")
        for k, v in med.items():
            runs = "/".join(f"{s:.2f}" for s in samples[k])
            print(f"  {k:<22} {v:8.3f} s  ({v / med['rm -rf']:.2f}x rm -rf)  [{runs}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
