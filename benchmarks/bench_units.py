"""`cachedoctor ls` and unit-level `clean` of a 2,000-repo Hugging Face hub, against the hub's own
`hf cache ls` / `hf cache rm` and `rm -rf`, on identical hubs in the same run.

The hub is written to the documented layout (blobs named by sha256, `snapshots/<commit>/`
relative links, `refs/main`): REPOS repos, two revisions each (one of them detached in every
tenth repo), three files per revision sharing a config blob, ages spread over 100 days. Every
round copies a fresh hub (`cp -a`, times kept) for each deleting command, then times, in
alternating order:

* listing: `cachedoctor ls huggingface --json`, its table at a 160- and an 80-column (pseudo)
  terminal, `hf cache ls --revisions --json`, `du -s`;
* 100 named repos: `cachedoctor clean huggingface --unit ID ... --yes` vs `hf cache rm ID ... -y`;
* half the hub by size: `cachedoctor clean huggingface --max-size HALF --yes` (whole repos,
  least recently used first: ~1,000 of them) vs `hf cache rm` of the same repos and
  `rm -rf` of their folders (what neither order nor accounting costs).

Each listing is checked against huggingface_hub's `scan_cache_dir()` (same repos, revisions) and
each cleaned hub read back by it (no warnings). Commands run with HOME and the XDG folders in a
temporary folder, so nothing outside it is touched.

    python benchmarks/bench_units.py [--repos 2000] [--rounds 3] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import cachedoctor_argv, machine, result_of, time_at_terminal  # noqa: E402

DAY = 86400.0


def build_hub(hub: Path, repos: int) -> list[tuple[str, float]]:
    """The hub; returns (unit id, last used) per repo."""
    now = time.time()
    made: list[tuple[str, float]] = []
    for r in range(repos):
        name = f"org{r % 50:02d}/model-{r:05d}"
        repo = hub / f"models--{name.replace('/', '--')}"
        (repo / "blobs").mkdir(parents=True)
        config = f"config {r}".encode() * 40
        commits = []
        for v in range(2):
            commit = hashlib.sha1(f"{r}-{v}".encode()).hexdigest()
            commits.append(commit)
            files = {"config.json": config,
                     "model.safetensors": f"weights {r} {v}".encode() * (200 + r % 300),
                     "tokenizer/vocab.txt": f"vocab {r} {v}".encode() * 50}
            for path, data in files.items():
                blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
                if not blob.exists():
                    blob.write_bytes(data)
                link = repo / "snapshots" / commit / path
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(os.path.join(*[".."] * (path.count("/") + 2), "blobs", blob.name))
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(commits[0])
        if r % 10:
            (repo / "refs" / "v1").write_text(commits[1])
        when = now - (r * 7919 % repos) / repos * 100 * DAY
        for root, dirs, names in os.walk(repo):
            for n in dirs + names:
                os.utime(os.path.join(root, n), (when, when), follow_symlinks=False)
        made.append((f"model/{name}", when))
    return made


def env_for(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_STATE_HOME=str(home / ".state"),
               XDG_DATA_HOME=str(home / ".share"), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_OFFLINE="1", NO_COLOR="1")
    env.pop("HF_HOME", None)
    env.pop("HF_HUB_CACHE", None)
    return env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return elapsed, proc.stdout


def fresh(template: Path, home: Path) -> Path:
    if home.exists():
        shutil.rmtree(home)
    (home / ".cache" / "huggingface").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(template), str(home / ".cache" / "huggingface" / "hub")],
                   check=True)
    return home / ".cache" / "huggingface" / "hub"


def check(hub: Path) -> int:
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(hub)
    if info.warnings:
        raise SystemExit(f"huggingface_hub found problems: {info.warnings[:3]}")
    return len(info.repos)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ls-only", action="store_true",
                        help="time the listings only (no clean rounds, no hub copy per run)")
    parser.add_argument("--against", metavar="PYTHON",
                        help="also time `ls` with the cachedoctor installed for this Python (a "
                             "venv of the code before a change), interleaved, with its own "
                             "state folder")
    parser.add_argument("--python", metavar="PYTHON",
                        help="time the cachedoctor installed for this Python, not the one "
                             "running this script (which needs huggingface_hub): a venv "
                             "holding cachedoctor alone starts as a user's install does")
    args = parser.parse_args()
    hf = shutil.which("hf") or str(Path(sys.executable).with_name("hf"))
    base = Path(tempfile.mkdtemp(prefix="bench-units-", dir=args.dir))
    try:
        template = base / "template-hub"
        started = time.perf_counter()
        made = build_hub(template, args.repos)
        built = time.perf_counter() - started
        by_age = [uid for uid, _ in sorted(made, key=lambda m: m[1])]
        total = int(subprocess.check_output(["du", "-sB1", str(template)]).split()[0])
        named = by_age[::max(1, len(by_age) // 100)][:100]
        cd = cachedoctor_argv(args.python) if args.python else cachedoctor_argv()
        other = cachedoctor_argv(args.against) if args.against else None
        samples: dict[str, list[float]] = {}
        facts: dict[str, object] = {"repos": args.repos, "hub_bytes": total,
                                    "build_seconds": round(built, 2)}

        def add(name: str, seconds: float) -> None:
            samples.setdefault(name, []).append(seconds)

        home = base / "home"
        listing = ["ls", "huggingface", "--location", "hub", "--json"]
        hub = fresh(template, home)
        for rnd in range(args.rounds + 1):  # round 0 warms up, untimed
            if rnd and not args.ls_only:  # a listing changes nothing: one copy serves it
                hub = fresh(template, home)
            env = env_for(home)
            other_env = {**env, "XDG_STATE_HOME": str(home / ".state-against")}
            installs = [("", cd, env)] + ([(" [against]", other, other_env)] if other else [])
            if rnd % 2:  # each install goes first every other round (the first run of a
                installs.reverse()  # pair is slower on this machine: page and CPU caches)
            timings: dict[str, tuple[float, str]] = {}
            for tag, argv, run_env in installs:
                timings[tag] = timed([*argv, *listing], run_env)
            t_ls, out = timings[""]
            units = result_of(out)["locations"][0]["units"]
            if other is not None:
                if result_of(timings[" [against]"][1]) != result_of(out):
                    raise SystemExit("ls of the other install gave another result")
                if rnd:
                    add("ls: cachedoctor ls --json [against]", timings[" [against]"][0])
            for columns in (160, 80):  # 80: the ids fold
                name = f"ls: cachedoctor ls, table at a {columns}-column terminal"
                for tag, argv, run_env in installs:
                    t_table, shown = time_at_terminal([*argv, *listing[:-1]], env=run_env,
                                                      columns=columns)
                    if units and units[-1]["id"][:12] not in shown:
                        raise SystemExit("ls at a terminal did not show the units")
                    if rnd:
                        add(f"{name}{tag}", t_table)
            t_hf, out = timed([hf, "cache", "ls", "--revisions", "--json", "--cache-dir",
                               str(hub)], env)
            t_du, _ = timed(["du", "-s", str(hub)], env)
            if len(units) != check(hub):
                raise SystemExit("ls and scan_cache_dir disagree")
            facts["ls_revisions"] = sum(len(u["revisions"]) for u in units)
            if args.ls_only:
                if rnd:
                    add("ls: cachedoctor ls --json", t_ls)
                    add("ls: hf cache ls --revisions --json", t_hf)
                    add("ls: du -s", t_du)
                continue
            order = [("named", "cachedoctor"), ("named", "hf"), ("half", "cachedoctor"),
                     ("half", "hf"), ("half", "rm")]
            if rnd % 2:
                order.reverse()
            evicted: list[str] = []
            for what, who in order:
                hub = fresh(template, home)
                if what == "named":
                    argv = ([*cd, "clean", "huggingface", *[a for u in named for a in ("--unit", u)],
                             "--yes"] if who == "cachedoctor"
                            else [hf, "cache", "rm", *named, "-y", "--cache-dir", str(hub)])
                elif who == "cachedoctor":
                    argv = [*cd, "clean", "huggingface", "--max-size", str(total // 2), "--yes",
                            "--json"]
                else:
                    ids = evicted or by_age[: args.repos // 2]
                    folders = [str(hub / ("models--" + u.split("/", 1)[1].replace("/", "--")))
                               for u in ids]
                    argv = ([hf, "cache", "rm", *ids, "-y", "--cache-dir", str(hub)]
                            if who == "hf" else ["rm", "-rf", *folders])
                seconds, out = timed(argv, env)
                if what == "half" and who == "cachedoctor":
                    (result,) = [r for r in result_of(out)["results"] if r["location"] == "hub"]
                    evicted = result["units_removed"]
                    facts["half_evicted_units"] = len(evicted)
                    facts["half_freed_bytes"] = result["bytes"]
                    facts["half_estimated_bytes"] = result["estimated_bytes"]
                left = check(hub)
                if what == "named" and left != args.repos - len(named):
                    raise SystemExit(f"{who} left {left} repos")
                if rnd:
                    add(f"{what}: {who}", seconds)
            if rnd:
                add("ls: cachedoctor ls --json", t_ls)
                add("ls: hf cache ls --revisions --json", t_hf)
                add("ls: du -s", t_du)
        medians = {k: round(statistics.median(v), 3) for k, v in samples.items()}
        report = {"machine": machine(base), "facts": facts, "median_seconds": medians,
                  "samples": {k: [round(x, 3) for x in v] for k, v in samples.items()}}
        if args.json:
            print(json.dumps(report, indent=2))
        else:
            print(json.dumps(facts, indent=2))
            for name, value in medians.items():
                print(f"{name:52} {value:8.3f} s")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
