"""Start-up cost of the CLI: `cachedoctor --version`, `--help` and `scan --path EMPTY --json`
against `python -c pass`, median of --runs interleaved runs each; then which imports dominate
(`python -X importtime`, self + children time of the top-level imports, averaged over runs).

    python benchmarks/bench_startup.py [--runs 15] [--top 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bench_env, cachedoctor_argv, machine, median, paired_medians

TARGET_VERSION_RATIO = 6.0  # `cachedoctor --version` <= 6x `python -c pass`
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_profile(argv: list[str], runs: int) -> list[tuple[str, float, float]]:
    """[(module, self ms, cumulative ms)] of the imports `argv` does directly (depth 1) and of
    every package-level module, averaged over `runs` runs, slowest first."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True,
                             text=True, env=bench_env()).stderr
        for line in err.splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            self_us, cum_us, indent, module = int(m[1]), int(m[2]), len(m[3]), m[4]
            if indent <= 3:  # imported by the program itself, or one level below
                entry = totals[module]
                entry[0] += self_us / 1000 / runs
                entry[1] += cum_us / 1000 / runs
    rows = [(module, s, c) for module, (s, c) in totals.items()]
    return sorted(rows, key=lambda r: r[2], reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    cli = cachedoctor_argv()
    with tempfile.TemporaryDirectory() as empty:
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "cachedoctor --version": [*cli, "--version"],
            "python -m cachedoctor --version": [sys.executable, "-m", "cachedoctor", "--version"],
            "cachedoctor --help": [*cli, "--help"],
            "cachedoctor scan --path EMPTY --json": [*cli, "scan", "--path", empty, "--json"],
        }
        samples = paired_medians(commands, runs=args.runs, warmup=2)
        module_argv = ["-m", "cachedoctor"]
        profiles = {
            "--help": import_profile([*module_argv, "--help"], 5),
            "scan --path EMPTY --json": import_profile(
                [*module_argv, "scan", "--path", empty, "--json"], 5),
        }
    base = median(samples["python -c pass"])
    figures = {name: {"median_ms": round(median(s) * 1000, 1),
                      "ratio_to_python": round(median(s) / base, 2)}
               for name, s in samples.items()}
    ok = figures["cachedoctor --version"]["ratio_to_python"] <= TARGET_VERSION_RATIO
    if args.json:
        print(json.dumps({"machine": machine(), "runs": args.runs, "figures": figures,
                          "version_target_met": ok,
                          "imports": {k: [{"module": m, "self_ms": round(s, 1),
                                           "cumulative_ms": round(c, 1)}
                                          for m, s, c in v[:args.top]]
                                      for k, v in profiles.items()}}, indent=2))
    else:
        print(f"machine: {machine()}")
        print(f"{'command':40} {'median':>9} {'vs python -c pass':>18}")
        for name, fig in figures.items():
            print(f"{name:40} {fig['median_ms']:7.1f}ms {fig['ratio_to_python']:17.2f}x")
        print(f"--version target (<= {TARGET_VERSION_RATIO}x): {'met' if ok else 'NOT met'}")
        for name, rows in profiles.items():
            print(f"\nslowest imports for `cachedoctor {name}` (ms, mean of 5; cumulative):")
            for module, self_ms, cum_ms in rows[:args.top]:
                print(f"  {cum_ms:7.1f}  (self {self_ms:5.1f})  {module}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
