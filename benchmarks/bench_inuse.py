"""How long does `cachedoctor.inuse.find_uses` take with many processes holding files?

A helper process (not a fork of this one, so its children count) forks `--processes` children;
each opens `--files` files inside a cache folder and as many outside it, and maps one file
inside. Then, interleaved, median of `--runs`:

- `find_uses([cache])` through /proc (the Linux default), for one folder and for 50 folders;
- `find_uses([cache])` through psutil (the macOS/Windows source, run here for comparison);
- `lsof -t +D CACHE` as the familiar yardstick, when installed (not equivalent: it walks and
  stats the tree, and does not follow a folder given as a link).

Linux only. Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HELPER = r"""
import os, sys, mmap, time
cache, outside, n, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        held = [open(os.path.join(cache, f"f{i}-{k}"), "w+") for k in range(files)]
        held += [open(os.path.join(outside, f"f{i}-{k}"), "w+") for k in range(files)]
        held[0].write("x")
        held[0].flush()
        mapped = mmap.mmap(held[0].fileno(), 1)
        os.chdir(outside)
        os.write(1, b".")
        time.sleep(3600)
        os._exit(0)
    kids.append(pid)
while kids:  # a child that fails ends the helper (and the wait below)
    pid, status = os.wait()
    if status:
        sys.exit(1)
    kids.remove(pid)
sys.stdout.flush()
time.sleep(3600)
"""


def _wait_for_group_to_go(pgid: int, timeout: float = 60.0) -> None:
    """Until init has reaped the killed children (so the next run starts from a quiet table)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = 0
        for entry in os.listdir("/proc"):
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes() if entry.isdigit() else b""
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            left += len(fields) > 2 and int(fields[2]) == pgid
        if not left:
            return
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=300)
    parser.add_argument("--files", type=int, default=10, help="files held inside (and outside)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        print("Linux only", file=sys.stderr)
        return 2
    from cachedoctor.inuse import find_uses, proc_source, psutil_source

    with tempfile.TemporaryDirectory(prefix="bench-inuse-") as tmp:
        cache, outside = Path(tmp, "cache"), Path(tmp, "outside")
        cache.mkdir()
        outside.mkdir()
        helper = subprocess.Popen(
            [sys.executable, "-c", HELPER, str(cache), str(outside), str(args.processes),
             str(args.files)],
            stdout=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as one at the end
        )
        try:
            assert helper.stdout is not None
            got = 0
            while got < args.processes:
                chunk = helper.stdout.read1(4096)  # type: ignore[attr-defined]
                if not chunk:
                    raise SystemExit("helper died")
                got += chunk.count(b".")
            many = [cache] + [Path(tmp, f"other{i}") for i in range(49)]
            total = len([p for p in os.listdir("/proc") if p.isdigit()])
            cases: dict[str, Callable[[], object]] = {
                "find_uses, 1 folder (/proc)": lambda: find_uses([cache], source=proc_source()),
                "find_uses, 50 folders (/proc)": lambda: find_uses(many, source=proc_source()),
                "find_uses, 1 folder (psutil)": lambda: find_uses([cache], source=psutil_source()),
            }
            lsof = shutil.which("lsof")
            if lsof:
                cases["lsof -t +D CACHE"] = lambda: subprocess.run(
                    [lsof, "-t", "+D", str(cache)], capture_output=True, check=False
                )
            samples: dict[str, list[float]] = {name: [] for name in cases}
            found = len(find_uses([cache]).pids)
            for _ in range(args.runs + 1):  # first round is a warm-up
                for name, case in cases.items():
                    start = time.perf_counter()
                    case()
                    samples[name].append(time.perf_counter() - start)
            medians = {name: statistics.median(s[1:]) for name, s in samples.items()}
        finally:
            os.killpg(helper.pid, signal.SIGKILL)  # the helper and its children only
            helper.wait()
            _wait_for_group_to_go(helper.pid)
    result = {
        "processes_on_machine": total,
        "holders": args.processes,
        "holders_found": found,
        "files_per_holder": 2 * args.files,
        "median_seconds": medians,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{total} processes on the machine, {args.processes} holding {args.files} files "
              f"inside and {args.files} outside; found {found}")
        for name, value in medians.items():
            print(f"  {name:32} {value * 1000:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
