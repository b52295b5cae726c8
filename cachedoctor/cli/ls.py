"""`cachedoctor ls TOOL`: its options; the body, which runs without typer, is `cli/bodies/ls.py`."""

from __future__ import annotations

from typing import Annotated

import typer

from cachedoctor.cli.base import JsonOption, app


@app.command("ls")
def ls(
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool id (e.g. huggingface, ollama, pip).")],
    location: Annotated[
        str | None, typer.Option("--location", metavar="ID", help="Only this location.")
    ] = None,
    sort: Annotated[
        str, typer.Option("--sort", metavar="KEY",
                          help="size (biggest first), used (least recently used first), name.")
    ] = "size",
    limit: Annotated[
        int | None, typer.Option("--limit", metavar="N", min=1, help="Show the first N units.")
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """List a cache's units: size (shared parts counted once), files, last use, revisions.

    Exit codes: 0 listed, 2 bad input (unknown tool, location or sort key).
    """
    from cachedoctor.cli.bodies.ls import ls as body

    return body(tool=tool, location=location, sort=sort, limit=limit, json_out=json_out)
