"""Console entry point. `--version` answers before anything heavy is imported."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from cachedoctor import __version__

        sys.stdout.write(f"cachedoctor {__version__}\n")
        return
    import os

    # typer builds a pydantic adapter per option; the plugin search is start-up time we don't use
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from cachedoctor.cli.app import run

    sys.exit(run())
