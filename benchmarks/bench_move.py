"""Benchmark: cross-filesystem `cachedoctor move` vs `cp -a SRC DST && rm -rf SRC`.

Same data, same run, same machine. SRC lives under --src-root (default /var/tmp, usually the
system disk), DST under --dst-root (default /dev/shm, a tmpfs: another filesystem). `sync` runs
before every timed command so neither pays for the setup's write-back. cachedoctor's time
includes everything it does: preflight walk, copy, `sync`, verification of every file
(size+mtime, or content with --verify hash), the swap, the link and deleting the original.

    python benchmarks/bench_move.py [--small 50000] [--large 3] [--large-mb 256] [--repeat 3]
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
from pathlib import Path


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


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench(name: str, make, src_root: Path, dst_root: Path, repeat: int, verify: str) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="cd-bench-", dir=src_root))
    dst_work = Path(tempfile.mkdtemp(prefix="cd-bench-", dir=dst_root))
    pristine = work / "pristine"
    make(pristine)
    home = work / "home"
    profiles = work / "profiles"
    profiles.mkdir()
    (profiles / "benchtool.yaml").write_text(textwrap.dedent(f"""\
        id: benchtool
        name: Bench
        description: benchmark profile
        locations:
          - id: cache
            paths: {{linux: "{work}/cache"}}
            safe_to_delete: true
            relocate: [{{method: link}}]
        """))
    env = dict(os.environ, HOME=str(home), XDG_STATE_HOME=str(home / "state"),
               CACHEDOCTOR_PROFILES_DIR=str(profiles))
    cp_times, cd_times = [], []
    try:
        for _ in range(repeat):
            subprocess.run(["cp", "-a", str(pristine), str(work / "cache")], check=True)
            cp_times.append(timed(["sh", "-c", f'cp -a "{work}/cache" "{dst_work}/cp" && rm -rf "{work}/cache"']))
            shutil.rmtree(dst_work / "cp")
            subprocess.run(["cp", "-a", str(pristine), str(work / "cache")], check=True)
            cd_times.append(timed([sys.executable, "-m", "cachedoctor", "move", "benchtool",
                                   str(dst_work / "cd"), "--yes", "--verify", verify], env=env))
            subprocess.run([sys.executable, "-m", "cachedoctor", "restore", "benchtool", "--yes"],
                           check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            shutil.rmtree(work / "cache")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(dst_work, ignore_errors=True)
    cp, cd = statistics.median(cp_times), statistics.median(cd_times)
    print(f"{name:28s} cp -a && rm -rf: {cp:7.2f}s   cachedoctor move (--verify {verify}): "
          f"{cd:7.2f}s   ratio {cd / cp:5.2f}x   (median of {repeat})", flush=True)
    return {"cp": cp, "cachedoctor": cd, "ratio": cd / cp}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=50_000)
    parser.add_argument("--large", type=int, default=3)
    parser.add_argument("--large-mb", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--src-root", default="/var/tmp")
    parser.add_argument("--dst-root", default="/dev/shm")
    args = parser.parse_args()
    src_root, dst_root = Path(args.src_root), Path(args.dst_root)
    if os.stat(src_root).st_dev == os.stat(dst_root).st_dev:
        sys.exit(f"{src_root} and {dst_root} are on the same filesystem; pick two filesystems")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {src_root} -> {dst_root}")
    if args.small:
        bench(f"{args.small:,} small files", lambda p: make_small(p, args.small), src_root, dst_root,
              args.repeat, "size")
    bench(f"{args.large} x {args.large_mb} MiB files", lambda p: make_large(p, args.large, args.large_mb),
          src_root, dst_root, args.repeat, "size")
    bench(f"{args.large} x {args.large_mb} MiB files", lambda p: make_large(p, args.large, args.large_mb),
          src_root, dst_root, args.repeat, "hash")


if __name__ == "__main__":
    main()
