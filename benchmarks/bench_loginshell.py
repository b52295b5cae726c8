"""What asking the login shell costs: `loginshell.new_session` (start-up files read, the shell
run, the answer cached) cold (no cache), from the cache file (a new process), and from the
in-process memo, against the bare `SHELL -l -i -c true`, for every installed shell, over a
sandbox HOME with Debian's default start-up files. Medians of --runs.

    python benchmarks/bench_loginshell.py [--runs 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import machine, median

from cachedoctor.host import Host
from cachedoctor.locate import loginshell
from cachedoctor.locate.files import LiveFiles

PROFILE = """\
# ~/.profile (Debian's default, plus two exports)
if [ -n "$BASH_VERSION" ]; then
    if [ -f "$HOME/.bashrc" ]; then
        . "$HOME/.bashrc"
    fi
fi
if [ -d "$HOME/bin" ] ; then
    PATH="$HOME/bin:$PATH"
fi
export PIP_CACHE_DIR="$HOME/pip-cache"
"""
BASHRC = """\
case $- in
    *i*) ;;
      *) return;;
esac
HISTCONTROL=ignoreboth
shopt -s histappend
HISTSIZE=1000
alias ll='ls -alF'
export HF_HOME=/data/hf
"""
FILES = {".profile": PROFILE, ".bashrc": BASHRC, ".zshrc": "export HF_HOME=/data/hf\n",
         ".config/fish/config.fish": "set -gx HF_HOME /data/hf\n",
         ".kshrc": "export HF_HOME=/data/hf\n"}


def timed(function: object, runs: int) -> float:
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        function()  # type: ignore[operator]
        samples.append(time.perf_counter() - began)
    return median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for rel, text in FILES.items():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_text(text, encoding="utf-8")
        os.environ["XDG_STATE_HOME"] = str(home / ".local/state")
        for name in ("bash", "zsh", "fish", "dash", "ksh"):
            path = shutil.which(name)
            if path is None:
                continue
            host = Host("linux", {"HOME": str(home), "SHELL": path, "LANG": "C.UTF-8"}, str(home))
            def bare(shell: str = path, env: dict[str, str] = {"HOME": str(home),  # noqa: B006
                     "PATH": "/usr/bin:/bin", "TERM": "dumb"}) -> None:
                subprocess.run([shell, "-l", "-i", "-c", "true"], env=env, capture_output=True,
                               stdin=subprocess.DEVNULL, start_new_session=True, check=True)

            def cold(h: Host = host) -> None:
                loginshell._memo.clear()
                Path(loginshell.cache_file()).unlink(missing_ok=True)
                loginshell.new_session(h, LiveFiles())

            def from_file(h: Host = host) -> None:
                loginshell._memo.clear()
                loginshell.new_session(h, LiveFiles())

            def from_memo(h: Host = host) -> None:
                loginshell.new_session(h, LiveFiles())

            rows.append({"shell": name, "bare_ms": timed(bare, args.runs),
                         "cold_ms": timed(cold, args.runs),
                         "cache_file_ms": timed(from_file, args.runs),
                         "memo_ms": timed(from_memo, args.runs)})
    if args.json:
        print(json.dumps({"machine": machine(), "rows": rows}, indent=2))
        return 0
    print(f"machine: {machine()}")
    print(f"{'shell':6} {'-l -i -c true':>14} {'cold':>8} {'cache file':>11} {'memo':>7}")
    for row in rows:
        print(f"{row['shell']:6} {row['bare_ms']:12.1f}ms {row['cold_ms']:6.1f}ms "
              f"{row['cache_file_ms']:9.1f}ms {row['memo_ms']:5.2f}ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
