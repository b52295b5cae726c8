"""Start-up cost of the CLI against `python -c pass`, median (and CPU) of --runs interleaved
runs each: `--version`, `--help`, `scan --path EMPTY --json`, and in an isolated, empty home
`profiles list`, `doctor`, a shell-completion request, `scan` and `scan --json`; then the
default `scan` of a home holding every built-in profile's Linux locations with a few small files
each, against `du -s` of the same folders; `doctor` and both `scan`s once more with stdout on a
160-column pseudo terminal, as a user sees them (rich lays out and styles for a terminal). Every home command runs once untimed first, so the
profile index (cachedoctor.profiles.index) is warm, as it is for a user. Last, which imports
dominate (`python -X importtime`, self + children time, averaged over runs).

    python benchmarks/bench_startup.py [--runs 15] [--top 12] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from common import bench_env, cachedoctor_argv, machine, median, paired_medians

TARGET_VERSION_RATIO = 6.0  # `cachedoctor --version` <= 6x `python -c pass`
TARGET_HOT_MS = 60.0  # profiles list, doctor, completion, scan of an empty home (issue 14)
TARGET_DEFAULT_SCAN_MS = 100.0  # scan of a home with every built-in location, small files
FILES_PER_LOCATION = 3


def home_env(home: Path, state: Path | None = None) -> dict[str, str]:
    """`bench_env()` with HOME and the XDG folders inside `home` (cachedoctor's own state,
    the profile index among it, included, unless `state` is given), no extra profile folder,
    no login shell run."""
    env = bench_env()
    env.pop("CACHEDOCTOR_PROFILES_DIR", None)
    state = state or home / ".local/state"
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"), XDG_STATE_HOME=str(state),
               XDG_DATA_HOME=str(home / ".local/share"), CACHEDOCTOR_NO_SHELL="1",
               SHELL="/bin/sh")
    return env


def fill_home(home: Path) -> list[Path]:
    """Create every built-in profile's Linux locations below `home` (a glob's `*` as a folder
    named `Default`), FILES_PER_LOCATION small files in each; returns the folders made."""
    from cachedoctor.host import Host
    from cachedoctor.profiles.loader import builtin_profiles_dir, load_profile_file
    from cachedoctor.resolve import try_expand

    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_STATE_HOME": str(home / ".local/state")}
    host = Host("linux", env, str(home))
    made: list[Path] = []
    for file in sorted(builtin_profiles_dir().glob("*.yaml")):
        for location in load_profile_file(file).locations:
            for template in location.paths.for_host(host):
                path = try_expand(template, host)
                if path is None:
                    continue
                folder = Path(path.replace("*", "Default").replace("?", "x"))
                if not folder.is_relative_to(home) or folder in made:
                    continue
                folder.mkdir(parents=True, exist_ok=True)
                for n in range(FILES_PER_LOCATION):
                    (folder / f"file{n}.bin").write_bytes(b"x" * (1000 * (n + 1)))
                made.append(folder)
    return made
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


# Imported by a dependency only when installed (msgspec: typing_extensions, with inspect and
# ast about 10 ms here). A development or test venv has it (huggingface_hub, mypy); a user's
# `pipx install cachedoctor` does not, so time a venv holding cachedoctor alone.
OPTIONAL_IMPORTS = ("typing_extensions",)


def extras_present(python: str) -> list[str]:
    """Which of OPTIONAL_IMPORTS `python` can import (each makes its start-up slower than a
    user's)."""
    probe = ("import importlib.util, sys\n"
             f"print(' '.join(m for m in {OPTIONAL_IMPORTS!r} if importlib.util.find_spec(m)))")
    return subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.split()


def import_profile(argv: list[str], runs: int) -> list[tuple[str, float, float]]:
    """[(module, self ms, cumulative ms)] of the imports `argv` does directly (depth 1) and of
    every package-level module, averaged over `runs` runs, slowest first. Run outside the
    checkout (`-m cachedoctor` would import the checkout's, not the install's), after one
    untimed run: the spec and the index of that install are warm, as for the timed commands."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    neutral = tempfile.gettempdir()
    subprocess.run([sys.executable, *argv], capture_output=True, env=bench_env(), cwd=neutral)
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True,
                             text=True, env=bench_env(), cwd=neutral).stderr
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
    parser.add_argument("--against", metavar="PYTHON",
                        help="also time the commands in the homes with the cachedoctor of this "
                             "Python (a venv of the code before a change), interleaved, with a "
                             "state folder of its own: named `... [against]`")
    args = parser.parse_args()

    cli = cachedoctor_argv()
    other = cachedoctor_argv(args.against) if args.against else None
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as scratch:
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "cachedoctor --version": [*cli, "--version"],
            "python -m cachedoctor --version": [sys.executable, "-m", "cachedoctor", "--version"],
            "cachedoctor --help": [*cli, "--help"],
            "cachedoctor scan --path EMPTY --json": [*cli, "scan", "--path", empty, "--json"],
        }
        cpu: dict[str, list[float]] = {}
        samples = paired_medians(commands, runs=args.runs, warmup=2, cpu=cpu)
        empty_home, full_home = Path(scratch) / "empty-home", Path(scratch) / "full-home"
        empty_home.mkdir()
        full_home.mkdir()
        folders = fill_home(full_home)
        # typer's completion protocol (what the function `--show-completion bash` defines sends)
        complete = {"_CACHEDOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": "cachedoctor scan hu",
                    "COMP_CWORD": "2"}
        answer = subprocess.run(cli, env={**home_env(empty_home), **complete},
                                capture_output=True, text=True).stdout.split()
        if "huggingface" not in answer:  # a request the CLI does not understand times nothing
            raise SystemExit(f"the completion request was not answered: {answer}")
        in_empty = {
            "profiles list (empty home)": [*cli, "profiles", "list"],
            "doctor (empty home)": [*cli, "doctor"],
            "scan (empty home)": [*cli, "scan"],
            "scan --json (empty home)": [*cli, "scan", "--json"],
        }
        in_empty["completion `scan hu` (empty home)"] = cli
        against_state = Path(scratch) / "against-state"

        def paired(commands: dict[str, list[str]], home: Path,
                   extra: dict[str, str] | None = None, terminal: bool = False) -> None:
            """Time `commands` in `home`; with --against, each also by the other install;
            `terminal`: with stdout on a 160-column pseudo terminal."""
            envs = {name: {**home_env(home), **(extra or {})} for name in commands}
            if other is not None:
                for name, argv in list(commands.items()):
                    if argv[:len(cli)] == cli:
                        commands[f"{name} [against]"] = [*other, *argv[len(cli):]]
                        envs[f"{name} [against]"] = {**home_env(home, against_state),
                                                     **(extra or {})}
            samples.update(paired_medians(commands, runs=args.runs, warmup=2, cpu=cpu, envs=envs,
                                          terminal=terminal))

        for name, argv in in_empty.items():
            paired({name: argv}, empty_home, complete if name.startswith("completion") else None)
        paired({"scan (full home)": [*cli, "scan"],
                "du -s (the same folders)": ["du", "-s", *map(str, folders)]}, full_home)
        for name, argv in (("doctor", [*cli, "doctor"]), ("scan", [*cli, "scan"])):
            paired({f"{name} (empty home, at a terminal)": argv}, empty_home, terminal=True)
        paired({"scan (full home, at a terminal)": [*cli, "scan"]}, full_home, terminal=True)
        os.environ.update(home_env(empty_home))  # the import profiles below run in the empty home
        module_argv = ["-m", "cachedoctor"]
        profiles = {
            "--help": import_profile([*module_argv, "--help"], 5),
            "scan --path EMPTY --json": import_profile(
                [*module_argv, "scan", "--path", empty, "--json"], 5),
            "profiles list": import_profile([*module_argv, "profiles", "list"], 5),
            "doctor": import_profile([*module_argv, "doctor"], 5),
        }
    extras = {"measured": extras_present(sys.executable)}
    if args.against:
        extras["against"] = extras_present(args.against)
    base = median(samples["python -c pass"])
    figures = {name: {"median_ms": round(median(s) * 1000, 1),
                      "cpu_ms": round(median(cpu[name]) * 1000, 1),
                      "ratio_to_python": round(median(s) / base, 2)}
               for name, s in samples.items()}
    ok = figures["cachedoctor --version"]["ratio_to_python"] <= TARGET_VERSION_RATIO
    hot = [n for n in figures if n.endswith("(empty home)") and "--json" not in n]  # piped
    hot_ok = {n: figures[n]["median_ms"] <= TARGET_HOT_MS for n in hot}
    default_ok = figures["scan (full home)"]["median_ms"] <= TARGET_DEFAULT_SCAN_MS
    if args.json:
        print(json.dumps({"machine": machine(), "runs": args.runs, "figures": figures,
                          "version_target_met": ok, "hot_targets_met": hot_ok,
                          "default_scan_target_met": default_ok,
                          "full_home_folders": len(folders), "optional_imports_present": extras,
                          "imports": {k: [{"module": m, "self_ms": round(s, 1),
                                           "cumulative_ms": round(c, 1)}
                                          for m, s, c in v[:args.top]]
                                      for k, v in profiles.items()}}, indent=2))
    else:
        print(f"machine: {machine()}")
        for which, present in extras.items():
            print(f"{which} install: {', '.join(present) or 'no'} optional imports present"
                  + (" (a user's install has none: slower than theirs)" if present else ""))
        print(f"{'command':40} {'median':>9} {'cpu':>9} {'vs python -c pass':>18}")
        for name, fig in figures.items():
            print(f"{name:40} {fig['median_ms']:7.1f}ms {fig['cpu_ms']:7.1f}ms "
                  f"{fig['ratio_to_python']:17.2f}x")
        print(f"--version target (<= {TARGET_VERSION_RATIO}x): {'met' if ok else 'NOT met'}")
        for name, met in hot_ok.items():
            print(f"{name} <= {TARGET_HOT_MS:.0f} ms: {'met' if met else 'NOT met'}")
        print(f"scan of the full home ({len(folders)} folders) <= {TARGET_DEFAULT_SCAN_MS:.0f} ms: "
              f"{'met' if default_ok else 'NOT met'}")
        for name, rows in profiles.items():
            print(f"\nslowest imports for `cachedoctor {name}` (ms, mean of 5; cumulative):")
            for module, self_ms, cum_ms in rows[:args.top]:
                print(f"  {cum_ms:7.1f}  (self {self_ms:5.1f})  {module}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
