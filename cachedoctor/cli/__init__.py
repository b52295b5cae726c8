"""Console entry point. `--version` answers before anything heavy is imported."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from cachedoctor import __version__

        sys.stdout.write(f"cachedoctor {__version__}\n")
        return
    from cachedoctor.cli.app import run

    sys.exit(run())
