"""`cachedoctor doctor`: its options; the body, which runs without typer, is `cli/bodies/doctor.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cachedoctor.cli.base import JsonOption, app


@app.command()
def doctor(
    tools: Annotated[
        list[str] | None,
        typer.Argument(metavar="TOOL...", help="Tool ids to check (default: every tool whose caches exist here)."),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            metavar="DIR",
            help="Project folder for workspace settings checks (default: the current folder).",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Find what is wrong with each tool's caches, why it matters, and the command that fixes it.

    Exit code 1 when any error-level finding exists (or a check could not run), else 0.
    """
    from cachedoctor.cli.bodies.doctor import doctor as body

    return body(tools=tools, workspace=workspace, json_out=json_out)
