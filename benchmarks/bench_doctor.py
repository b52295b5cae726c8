"""`cachedoctor doctor` cost, against the standard tools doing the same measurements.

1. over_quota on a big cache: `doctor demo` (whose check measures the tree) against
   `du -sB1 TREE` (the standard tool for the same number) on the same tree, same run.
2. The whole default `doctor --json` (every built-in profile present here) against
   `cachedoctor --version` (interpreter start-up alone), to show what the checks add.

    python benchmarks/bench_doctor.py [--files 100000] [--runs 5] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    DEFAULT_DATA,
    TreeSpec,
    build_tree,
    cachedoctor_argv,
    machine,
    median,
    paired_medians,
    result_of,
)

PROFILE = """\
id: benchdemo
name: Bench demo
description: A cache made up for the benchmark.
locations:
  - id: cache
    paths:
      linux: '{path}'
    safe_to_delete: true
    quota: 1MB
checks:
  - id: over-quota
    severity: warning
    when: [{{type: over_quota, location: cache}}]
    message: 'The cache is {{value}}.'
    why: benchmark
  - id: on-tmpfs
    severity: warning
    when: [{{type: filesystem_type, location: cache, types: [tmpfs]}}]
    message: on tmpfs
    why: benchmark
  - id: noexec
    severity: error
    when: [{{type: mount_option, location: cache, option: noexec}}]
    message: noexec
    why: benchmark
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()

    spec = TreeSpec(files=args.files, dirs=max(40, args.files // 100))
    tree = build_tree(args.data / f"doctor-{args.files}", spec)
    cd = cachedoctor_argv()
    with tempfile.TemporaryDirectory() as tmp:
        profiles = Path(tmp) / "profiles"
        profiles.mkdir()
        (profiles / "benchdemo.yaml").write_text(PROFILE.format(path=tree), encoding="utf-8")
        env = dict(os.environ, CACHEDOCTOR_PROFILES_DIR=str(profiles),
                   XDG_CONFIG_HOME=str(Path(tmp) / "config"), XDG_STATE_HOME=str(Path(tmp) / "state"))
        check = subprocess.run([*cd, "doctor", "benchdemo", "--json"], capture_output=True,
                               text=True, env=env)
        found = result_of(check.stdout)["findings"]
        assert [f["check"] for f in found if f["check"] == "over-quota"], check.stderr
        quota = paired_medians({
            "doctor benchdemo": [*cd, "doctor", "benchdemo", "--json"],
            "du -sB1": ["du", "-sB1", str(tree)],
        }, runs=args.runs, env=env)
        whole = paired_medians({
            "doctor --json (built-in profiles)": [*cd, "doctor", "--json"],
            "cachedoctor --version": [*cd, "--version"],
            "cachedoctor --help": [*cd, "--help"],
        }, runs=args.runs)

    print(f"machine: {json.dumps(machine(tree))}")
    print(f"tree: {args.files:,} files, {spec.dirs:,} folders; {args.runs} interleaved runs, medians")
    for samples in (quota, whole):
        for name, values in samples.items():
            print(f"  {name:38s} {median(values):8.3f} s")
    ratio = median(quota["doctor benchdemo"]) / median(quota["du -sB1"])
    print(f"  doctor (over_quota) / du -sB1: {ratio:.2f}x")


if __name__ == "__main__":
    main()
