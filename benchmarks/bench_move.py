"""Benchmark: cross-filesystem `cachedoctor move` vs `cp -a SRC DST && rm -rf SRC`.

Same data, same run, same machine. SRC lives under --src-root (default /var/tmp, usually the
system disk), DST under --dst-root (default /dev/shm, a tmpfs: another filesystem).

Every round builds a fresh SRC for each contender (`cp -a` of a pristine tree, then `sync`, so
neither pays for the setup's write-back) and times the two in alternating order (cp first in
even rounds, cachedoctor first in odd ones), so drifting machine state (page cache, memory
handed back to the hypervisor) hits both alike. cachedoctor's time is the whole CLI process:
interpreter and profile loading, preflight walk, copy, flushing the copy (`syncfs` of DST),
verification of every file (size+mtime, or content with --verify hash), the swap, the link,
deleting the original, journal and history writes. Between rounds the link, the copy and the
state folder are simply removed (no `restore`: it would copy the data back for nothing).

`--phases` also times the parts on their own, to attribute the difference: the CLI's fixed
cost (a move of a one-file cache), cachedoctor's `copy_tree` in-process against `cp -a`, and
`rm -rf` of the original.

    python benchmarks/bench_move.py [--small 50000] [--large 3] [--large-mb 256] [--repeat 5]
                                    [--verify size,hash] [--phases]

Run it under the shared benchmark lock: `flock /tmp/cachedoctor-bench.lock nice -n -15 python ...`
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import bench_env, cachedoctor_argv, machine


def make_small(root: Path, count: int) -> None:
    payload = os.urandom(4096)
    per_dir = 500
    for i in range(count):
        d = root / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"f{i:06d}.bin").write_bytes(payload[: 200 + (i * 37) % 3800])


def make_large(root: Path, count: int, mb: int) -> None:
    root.mkdir(parents=True)
    block = os.urandom(1 << 20)
    for i in range(count):
        with open(root / f"model-{i}.safetensors", "wb") as fh:
            for _ in range(mb):
                fh.write(block)


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


SETTLE = 0.0  # --settle: seconds to wait after the setup, before a timed command


def fresh_copy(pristine: Path, cache: Path) -> None:
    subprocess.run(["cp", "-a", str(pristine), str(cache)], check=True)
    subprocess.run(["sync"], check=True)
    if SETTLE:
        time.sleep(SETTLE)


class Bench:
    def __init__(self, src_root: Path, dst_root: Path, make: Callable[[Path], None]) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="cd-bench-", dir=src_root))
        self.dst_work = Path(tempfile.mkdtemp(prefix="cd-bench-", dir=dst_root))
        self.pristine = self.work / "pristine"
        make(self.pristine)
        self.cache = self.work / "cache"
        self.home = self.work / "home"
        profiles = self.work / "profiles"
        profiles.mkdir()
        (profiles / "benchtool.yaml").write_text(textwrap.dedent(f"""\
            id: benchtool
            name: Bench
            description: benchmark profile
            locations:
              - id: cache
                paths: {{linux: "{self.cache}"}}
                safe_to_delete: true
                relocate: [{{method: link}}]
            """))
        self.env = dict(bench_env(), HOME=str(self.home), XDG_STATE_HOME=str(self.home / "state"),
                        CACHEDOCTOR_PROFILES_DIR=str(profiles))

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        shutil.rmtree(self.dst_work, ignore_errors=True)

    def run_cp(self) -> float:
        fresh_copy(self.pristine, self.cache)
        seconds = timed(["sh", "-c", f'cp -a "{self.cache}" "{self.dst_work}/cp" && rm -rf "{self.cache}"'],
                        self.env)
        shutil.rmtree(self.dst_work / "cp")
        return seconds

    def run_cd(self, verify: str) -> float:
        fresh_copy(self.pristine, self.cache)
        argv = [*cachedoctor_argv(), "move", "benchtool", str(self.dst_work / "cd"), "--yes",
                "--verify", verify]
        seconds = timed(argv, self.env)
        if not self.cache.is_symlink():
            raise SystemExit(f"cachedoctor move did not leave a link at {self.cache}")
        self.cache.unlink()
        shutil.rmtree(self.dst_work / "cd")
        shutil.rmtree(self.home / "state")  # forget the relocation: the next round moves again
        return seconds

    def phases(self, repeat: int) -> dict[str, float]:
        """The parts on their own (medians): CLI fixed cost, copy alone (cp / copy_tree), rm."""
        samples: dict[str, list[float]] = {"startup": [], "cp_copy": [], "cd_copy": [], "rm": []}
        tiny_env = dict(self.env)
        for _ in range(repeat):
            self.cache.mkdir()
            (self.cache / "one").write_bytes(b"x")
            samples["startup"].append(timed([*cachedoctor_argv(), "move", "benchtool",
                                             str(self.dst_work / "cd"), "--yes"], tiny_env))
            self.cache.unlink()
            shutil.rmtree(self.dst_work / "cd")
            shutil.rmtree(self.home / "state")
            fresh_copy(self.pristine, self.cache)
            samples["cp_copy"].append(timed(["cp", "-a", str(self.cache), str(self.dst_work / "cp")],
                                            self.env))
            shutil.rmtree(self.dst_work / "cp")
            code = ("import sys; from cachedoctor.relocate.copy import copy_tree, make_durable; "
                    "copy_tree(sys.argv[1], sys.argv[2], durable=True, drop_source_cache=True); "
                    "make_durable(sys.argv[2])")
            samples["cd_copy"].append(timed([sys.executable, "-c", code, str(self.cache),
                                             str(self.dst_work / "py")], self.env)
                                      - _python_startup(self.env))
            shutil.rmtree(self.dst_work / "py")
            samples["rm"].append(timed(["rm", "-rf", str(self.cache)], self.env))
        return {k: statistics.median(v) for k, v in samples.items()}


_startup_cache: dict[str, float] = {}


def _python_startup(env: dict[str, str]) -> float:
    """Median time of `python -c 'import cachedoctor.relocate.copy'` (subtracted from cd_copy)."""
    if "t" not in _startup_cache:
        runs = [timed([sys.executable, "-c", "import cachedoctor.relocate.copy"], env)
                for _ in range(5)]
        _startup_cache["t"] = statistics.median(runs)
    return _startup_cache["t"]


def bench(name: str, make: Callable[[Path], None], src_root: Path, dst_root: Path, repeat: int,
          verifies: list[str], phases: bool) -> None:
    b = Bench(src_root, dst_root, make)
    try:
        cp_times: list[float] = []
        cd_times: dict[str, list[float]] = {v: [] for v in verifies}
        for round_no in range(repeat):
            order: list[str] = ["cp", *verifies] if round_no % 2 == 0 else [*verifies, "cp"]
            for who in order:
                if who == "cp":
                    cp_times.append(b.run_cp())
                else:
                    cd_times[who].append(b.run_cd(who))
        cp = statistics.median(cp_times)
        for verify, times in cd_times.items():
            cd = statistics.median(times)
            print(f"{name:24s} cp -a && rm -rf {cp:6.2f}s | cachedoctor move --verify {verify:4s} "
                  f"{cd:6.2f}s | ratio {cd / cp:4.2f}x  (median of {repeat}; cp "
                  f"{_fmt(cp_times)}; cd {_fmt(times)})", flush=True)
        if phases:
            parts = b.phases(repeat)
            print(f"{'':24s} phases (medians): CLI fixed cost {parts['startup']:.2f}s | copy alone: "
                  f"cp -a {parts['cp_copy']:.2f}s, copy_tree+syncfs {parts['cd_copy']:.2f}s | "
                  f"rm -rf {parts['rm']:.2f}s", flush=True)
    finally:
        b.close()


def _fmt(samples: list[float]) -> str:
    return "[" + " ".join(f"{s:.2f}" for s in samples) + "]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=0, help="number of small files (0: skip)")
    parser.add_argument("--large", type=int, default=3, help="number of large files (0: skip)")
    parser.add_argument("--large-mb", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--verify", default="size", help="comma-separated: size,hash")
    parser.add_argument("--phases", action="store_true", help="also time the parts on their own")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds to wait after each setup before timing (default 3: lets "
                             "the kernel hand the memory freed by the previous round back to the "
                             "hypervisor, so every timed run starts from the same state)")
    parser.add_argument("--src-root", default="/var/tmp")
    parser.add_argument("--dst-root", default="/dev/shm")
    args = parser.parse_args()
    global SETTLE
    SETTLE = args.settle
    src_root, dst_root = Path(args.src_root), Path(args.dst_root)
    if os.stat(src_root).st_dev == os.stat(dst_root).st_dev:
        sys.exit(f"{src_root} and {dst_root} are on the same filesystem; pick two filesystems")
    verifies = [v for v in args.verify.split(",") if v]
    facts = machine(src_root)
    print(f"python {facts['python']}, {facts['nproc']} CPUs ({facts['cpu']}), {facts['os']}, "
          f"{src_root} ({facts.get('filesystem', '?')}) -> {dst_root} "
          f"({machine(dst_root).get('filesystem', '?')}), load average {facts['loadavg']}",
          flush=True)
    if args.small:
        bench(f"{args.small:,} small files", lambda p: make_small(p, args.small), src_root,
              dst_root, args.repeat, verifies, args.phases)
    if args.large:
        bench(f"{args.large} x {args.large_mb} MiB files",
              lambda p: make_large(p, args.large, args.large_mb), src_root, dst_root, args.repeat,
              verifies, args.phases)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
