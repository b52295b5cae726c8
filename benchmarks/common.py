"""Shared helpers for the benchmark scripts (importable by every benchmark author).

Small on purpose:

- `build_tree(root, spec)`: build a reproducible folder tree (fixed seed) of files with random
  sizes, nested folders, hard links, symlinks and a few sparse files. The tree is built once: a
  marker file records the spec, and a later call with the same spec reuses the tree.
- `measure_command(argv)` / `time_command(argv)` / `paired_medians(commands, runs)`: wall-clock
  (and CPU) timing of real commands, interleaved (A, B, A, B, ...) so both see the same cache and
  machine state, median of N; `time_at_terminal(argv)`: one run with stdout on a pseudo terminal.
- `bench_env()`: the environment commands run with (bytecode caching allowed, as in a real
  install; `measure_command` uses it unless given `env`).
- `machine()`: nproc, load average, CPU model, kernel, Python, and the filesystem type of a
  folder, for reports.

Run the scripts from the repository root, e.g. `python benchmarks/bench_scan.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / ".data"  # git-ignored
MARKER = ".tree-spec.json"


@dataclass(frozen=True)
class TreeSpec:
    """What `build_tree` builds. Same spec + same seed = same tree, byte for byte."""

    files: int = 300_000
    dirs: int = 3_000
    top_level: int = 40  # folders directly under the root (uneven sizes, on purpose)
    max_size: int = 64 * 1024  # file sizes are 0..max_size (10% empty, the rest log-uniform)
    hard_links: int = 300  # extra names for existing files, often in another top-level folder
    symlinks: int = 300  # relative, absolute and dangling
    sparse: int = 20  # 1 MiB apparent, one 4 KiB block written
    seed: int = 20240601
    empty_files: bool = False  # True: every file is empty (fast, for inode-heavy trees)


def build_tree(root: Path, spec: TreeSpec = TreeSpec(), *, quiet: bool = False) -> Path:
    """Build (or reuse) the tree described by `spec` under `root`; returns `root`."""
    root = Path(root)
    marker = root / MARKER
    wanted = json.dumps(asdict(spec), sort_keys=True)
    if marker.exists() and marker.read_text() == wanted:
        return root
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rng = random.Random(spec.seed)
    started = time.monotonic()

    # Folders: each top-level folder gets a random (skewed) share; inside, a random nesting.
    weights = [rng.lognormvariate(0, 1) for _ in range(spec.top_level)]
    total_w = sum(weights)
    folders: list[Path] = []
    for t, w in enumerate(weights):
        top = root / f"top{t:03d}"
        top.mkdir()
        mine = [top]
        for i in range(max(0, round(w / total_w * (spec.dirs - spec.top_level)))):
            parent = rng.choice(mine[-20:]) if rng.random() < 0.7 else rng.choice(mine)
            child = parent / f"d{i:05d}"
            child.mkdir()
            mine.append(child)
        folders.extend(mine)

    # Files, spread unevenly over the folders.
    zero = bytes(spec.max_size)
    files: list[Path] = []
    folder_weights = [rng.random() ** 2 for _ in folders]
    chosen = rng.choices(range(len(folders)), weights=folder_weights, k=spec.files)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for n, index in enumerate(chosen):
        path = folders[index] / f"f{n:07d}"
        size = 0
        if not spec.empty_files and rng.random() >= 0.1:
            size = min(spec.max_size, int(2 ** rng.uniform(0, 16)))
        fd = os.open(path, flags, 0o644)
        try:
            if size:
                os.write(fd, zero[:size])
        finally:
            os.close(fd)
        files.append(path)
        if not quiet and n and n % 50_000 == 0:
            print(f"  built {n:,} files ({time.monotonic() - started:.0f} s)", file=sys.stderr)

    for i in range(spec.sparse):
        path = rng.choice(folders) / f"sparse{i:03d}"
        with open(path, "wb") as fh:
            fh.seek(512 * 1024)
            fh.write(b"x" * 4096)
            fh.truncate(1024 * 1024)
    for i in range(spec.hard_links):
        os.link(rng.choice(files), rng.choice(folders) / f"hl{i:04d}")
    for i in range(spec.symlinks):
        where = rng.choice(folders)
        kind = i % 3
        if kind == 0:
            target = os.path.relpath(rng.choice(files), where)
        elif kind == 1:
            target = str(rng.choice(files + folders))
        else:
            target = f"missing-{i}"
        os.symlink(target, where / f"ln{i:04d}")
    marker.write_text(wanted)
    if not quiet:
        print(f"  tree ready in {time.monotonic() - started:.0f} s: {root}", file=sys.stderr)
    return root


def bench_env() -> dict[str, str]:
    """The environment benchmarked commands run with: like an installed package, Python may
    cache bytecode (PYTHONDONTWRITEBYTECODE is dropped; the cache goes to
    benchmarks/.data/pycache, not into the source tree), so start-up is not inflated by
    compiling cachedoctor's modules on every run."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(DEFAULT_DATA / "pycache"))
    return env


def measure_command(argv: Sequence[str], *, env: dict[str, str] | None = None,
                    terminal: bool = False) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system of the command and its children) for one run of
    `argv` (output discarded; must exit 0 or 1; `terminal`: stdout on a pseudo terminal, see
    `time_at_terminal`). CPU time is less sensitive than wall time to other load on the
    machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if terminal:
        elapsed = time_at_terminal(argv, env=env)[0]
    else:
        started = time.perf_counter()
        proc = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=bench_env() if env is None else env)
        elapsed = time.perf_counter() - started
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def time_at_terminal(argv: Sequence[str], *, env: dict[str, str] | None = None,
                     columns: int = 160, lines: int = 50) -> tuple[float, str]:
    """(wall seconds, what it printed) for one run of `argv` with its stdout on a pseudo
    terminal `columns` wide, as a user at a terminal runs it (rich styles and lays out for a
    terminal; a pipe gets plain text). The output is read as it comes, so the command never
    waits on a full terminal; it must exit 0 or 1."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # EIO: every writer of the terminal has closed it
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    started = time.perf_counter()
    try:
        proc = subprocess.run(list(argv), stdout=follower, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, env=bench_env() if env is None else env)
        elapsed = time.perf_counter() - started
    finally:
        os.close(follower)
        reader.join()
        os.close(leader)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed, b"".join(chunks).decode("utf-8", "replace")


def time_command(argv: Sequence[str], *, env: dict[str, str] | None = None) -> float:
    """Seconds of wall-clock time for one run of `argv` (output discarded; must exit 0 or 1)."""
    return measure_command(argv, env=env)[0]


def paired_medians(commands: Mapping[str, Sequence[str]], runs: int = 5, *, warmup: int = 1,
                   env: dict[str, str] | None = None,
                   cpu: dict[str, list[float]] | None = None,
                   envs: dict[str, dict[str, str]] | None = None,
                   terminal: bool = False) -> dict[str, list[float]]:
    """Time every command `runs` times, interleaved; returns all wall-clock samples per name
    (use `median`). `warmup` untimed rounds first, so caches are warm. Pass a dict as `cpu` to
    also collect the CPU-time samples; `envs` gives some commands an environment of their own;
    `terminal`: each with its stdout on a pseudo terminal."""
    envs = envs or {}
    for _ in range(warmup):
        for name, argv in commands.items():
            measure_command(argv, env=envs.get(name, env), terminal=terminal)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            wall, used = measure_command(argv, env=envs.get(name, env), terminal=terminal)
            samples[name].append(wall)
            if cpu is not None:
                cpu.setdefault(name, []).append(used)
    return samples


class Figure(TypedDict):
    """One command's timings against a baseline command (`figures_against`)."""

    median_s: float
    ratio_to_du: float
    min_s: float
    cpu_median_s: float
    samples_s: list[float]


def figures_against(samples: dict[str, list[float]], cpu: dict[str, list[float]],
                    base: str = "du -s") -> dict[str, Figure]:
    """Median, ratio to the median of `base`, minimum, median CPU and the samples of every
    command timed by `paired_medians`."""
    du = median(samples[base])
    return {name: Figure(median_s=round(median(s), 4), ratio_to_du=round(median(s) / du, 3),
                         min_s=round(min(s), 4), cpu_median_s=round(median(cpu[name]), 4),
                         samples_s=[round(x, 4) for x in s]) for name, s in samples.items()}


def print_figures(figures: dict[str, Figure], width: int) -> None:
    print(f"{'command':{width}} {'median':>8} {'vs du -s':>9} {'min':>7} {'cpu':>7}   samples")
    for name, fig in figures.items():
        print(f"{name:{width}} {fig['median_s']:8.3f} {fig['ratio_to_du']:8.2f}x "
              f"{fig['min_s']:7.3f} {fig['cpu_median_s']:7.3f}   "
              + " ".join(f"{x:.3f}" for x in fig["samples_s"]))


@contextlib.contextmanager
def busy_core(enabled: bool = True) -> Iterator[None]:
    """One CPU kept busy for the duration (the issue's "one core busy" condition, like
    `stress --cpu 1`): a shell spinning in a loop, at normal priority, stopped afterwards."""
    if not enabled:
        yield
        return
    spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.5)  # let the scheduler see it
        yield
    finally:
        spinner.kill()
        spinner.wait()


def result_of(stdout: str) -> Any:
    """The `result` of a `--json` run's envelope (docs/json.md)."""
    return json.loads(stdout)["result"]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def cachedoctor_argv(python: str = sys.executable) -> list[str]:
    """How to run the CLI: the console script next to `python` if there is one."""
    script = Path(python).with_name("cachedoctor")
    return [str(script)] if script.exists() else [python, "-m", "cachedoctor"]


def machine(folder: Path | None = None) -> dict[str, str]:
    """Facts for a benchmark report."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "nproc": str(os.cpu_count()),
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    if folder is not None and shutil.which("df"):
        out = subprocess.run(["df", "-T", str(folder)], capture_output=True, text=True).stdout
        rows = out.splitlines()
        if len(rows) > 1:
            facts["filesystem"] = rows[1].split()[1]
    return facts
