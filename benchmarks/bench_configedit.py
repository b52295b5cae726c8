"""Format-preserving edits vs the standard tools on the same data, in the same run.

* JSONC: `cachedoctor.configedit.set_in_text` on a VS Code-style settings.json with comments
  vs `json.loads` + `json.dumps` of the same data with comments stripped beforehand (the
  standard library cannot read comments and loses them; it is the lower bound of "parse and
  write back").
* YAML: the span edit vs a plain ruamel.yaml round trip (load, set, dump).
* TOML: tomlkit round trip through configedit vs tomlkit directly.

Run: python benchmarks/bench_configedit.py [--keys N] [--repeat R]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import time
from collections.abc import Callable

from cachedoctor.configedit import set_in_text
from cachedoctor.configedit.jsonc import loads


def settings_jsonc(keys: int) -> str:
    lines = ["// generated settings", "{"]
    for i in range(keys):
        lines.append(f'\t// setting {i}')
        lines.append(f'\t"ext{i % 50}.section.key{i}": {json.dumps("value " * (i % 5) or i)},')
    lines.append('\t"grok.code.cacheSize": 2048,')
    lines.append("}")
    return "\r\n".join(lines) + "\r\n"


def config_yaml(keys: int) -> str:
    lines = ["# generated", "cache:", "  ttl: 100  # ms"]
    for i in range(keys):
        lines.append(f"section{i}:\n  key: value{i}  # comment {i}\n  list:\n    - a\n    - b")
    return "\n".join(lines) + "\n"


def best(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()} {platform.system()}, "
          f"{args.keys} keys, best/median of {args.repeat}")

    text = settings_jsonc(args.keys)
    plain = json.dumps(loads(text, jsonc=True))

    def stdlib() -> str:
        data = json.loads(plain)
        data["grok.code.cacheSize"] = 8192
        return json.dumps(data, indent="\t")

    rows = [
        (f"jsonc {len(text) // 1024} KiB: configedit set (comments kept)",
         best(lambda: set_in_text(text, "jsonc", "grok.code.cacheSize", 8192), args.repeat)),
        ("jsonc: json.loads+dumps of comment-free copy (comments lost)", best(stdlib, args.repeat)),
    ]

    ytext = config_yaml(args.keys // 4)

    def ruamel_roundtrip() -> str:
        from ruamel.yaml import YAML

        yaml = YAML()
        data = yaml.load(ytext)
        data["cache"]["ttl"] = 3600000
        out = io.StringIO()
        yaml.dump(data, out)
        return out.getvalue()

    rows += [
        (f"yaml {len(ytext) // 1024} KiB: configedit span edit (verified by re-parse)",
         best(lambda: set_in_text(ytext, "yaml", ["cache", "ttl"], 3600000), args.repeat)),
        ("yaml: plain ruamel.yaml round trip", best(ruamel_roundtrip, args.repeat)),
    ]
    for name, (low, median) in rows:
        print(f"{name:70s} {low * 1000:8.1f} ms  (median {median * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
