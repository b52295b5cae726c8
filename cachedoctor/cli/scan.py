"""`cachedoctor scan`: its options; the body, which runs without typer, is `cli/bodies/scan.py`."""

from __future__ import annotations

from typing import Annotated

import typer

from cachedoctor.cli.base import JsonOption, app


@app.command()
def scan(
    tools: Annotated[
        list[str] | None, typer.Argument(metavar="TOOL...", help="Tool ids to scan (default: every tool).")
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option("--path", metavar="DIR", help="Measure these folders instead, like du (repeatable)."),
    ] = None,
    one_file_system: Annotated[
        bool,
        typer.Option(
            "--one-file-system", "-x", help="Don't descend into other mounts, like du -x."
        ),
    ] = False,
    category: Annotated[
        str | None,
        typer.Option("--category", metavar="CATEGORY",
                     help="Only tools of this category (ai, browser, ide, package, build, test, "
                     "container, system)."),
    ] = None,
    no_unclaimed: Annotated[
        bool, typer.Option("--no-unclaimed", help="Skip the big folders no profile claims.")
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """What every cache weighs, where it lives, on which drive, and how full that drive is.

    Exit code 1 when a folder could not be read completely (its total is marked partial).
    """
    from cachedoctor.cli.bodies.scan import scan as body

    return body(tools=tools, path=path, one_file_system=one_file_system, category=category,
                no_unclaimed=no_unclaimed, json_out=json_out)
