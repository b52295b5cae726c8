"""`cachedoctor where` and `cachedoctor which`: where each cache really is, and whose a folder is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from cachedoctor.cli import output
from cachedoctor.cli.base import JsonOption, app, emit_json, profile_set, stdout_console
from cachedoctor.errors import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from cachedoctor.locate.effective import Picture
    from cachedoctor.which import WhichResult


@app.command()
def where(
    tools: Annotated[
        list[str] | None,
        typer.Argument(metavar="TOOL...", help="Tool ids (default: every tool present here)."),
    ] = None,
    ask_tools: Annotated[
        bool,
        typer.Option("--ask-tools", help="Also ask each installed tool where its cache is "
                     "(`pip cache dir`, `npm config get cache`...) and flag any disagreement."),
    ] = False,
    json_out: JsonOption = False,
) -> None:
    """Where each tool's caches really are, and why: its variables, config files, policies and
    links, as new shells, jobs and the tool itself see them (and this shell, when it differs).

    Exit code 1 when a tool disagrees with what cachedoctor found, or a setting is unreadable.
    """
    from cachedoctor.host import Host
    from cachedoctor.locate import observe, pictures, present

    world = observe(Host.current())
    chosen = profile_set().select(tools or [])
    if not tools:
        chosen = [p for p in chosen if present(p, world)]
    rows: list[dict[str, Any]] = []
    bad = False
    for pic in pictures(chosen, world):
        row = pic.to_json()
        if ask_tools and pic.location.ask is not None:
            answer = _ask(pic, world)
            row["tool_says"] = answer
            bad = bad or answer.get("agrees") is False
        bad = bad or bool(pic.problems) or bool(pic.conflicts)
        rows.append(row)
    if json_out:
        for problem in world.problems:
            output.add_warning(problem)
        emit_json({"locations": rows}, ok=not bad)
    else:
        _render(rows, world.problems)
    raise typer.Exit(EXIT_FAILED if bad else EXIT_OK)


def _ask(pic: Picture, world: Any) -> dict[str, Any]:
    import os

    from cachedoctor.locate.ask import ask

    assert pic.location.ask is not None
    answer = ask(pic.location.ask, world.host)
    out = answer.to_json()
    if answer.path is not None:
        mine = {os.path.normcase(os.path.normpath(p.path)) for p in (*pic.places, *(pic.shell or ()))}
        mine |= {os.path.normcase(os.path.normpath(p.data)) for p in pic.places if p.data}
        out["agrees"] = os.path.normcase(os.path.normpath(answer.path)) in mine
    return out


def _render(rows: list[dict[str, Any]], problems: tuple[str, ...]) -> None:
    from rich.markup import escape

    from cachedoctor.cli.render import tilde

    console = stdout_console()
    if not rows:
        console.print("No tool's caches found here; name a tool to see where it would keep them.")
    for row in rows:
        head = f"[bold]{escape(row['tool'])}[/bold] {escape(row['location'])}"
        places = row["places"] or [{"path": "(no path on this system)", "how": "", "exists": False}]
        for index, place in enumerate(places):
            missing = ("  [yellow](broken link: its target is missing)[/yellow]" if place["broken"]
                       else "" if place["exists"] else "  [dim](does not exist yet)[/dim]")
            prefix = head if index == 0 else " " * len(f"{row['tool']} {row['location']}")
            console.print(f"{prefix}  {escape(tilde(place['path']))}{missing}", highlight=False)
            if place["how"]:
                console.print(f"    how: {escape(place['how'])}", highlight=False)
        if row["this_shell"] is not None:
            shell = ", ".join(f"{p['path']} ({p['how']})" for p in row["this_shell"]) or "nothing"
            console.print(f"    this shell sees: {escape(shell)}", highlight=False)
        if row["audience"] != "new shells, jobs and the tool itself":
            console.print(f"    read by: {escape(row['audience'])}", highlight=False)
        if row["record"]:
            console.print(f"    moved by cachedoctor ({row['record']['method']}) to "
                          f"{escape(row['record']['dest'])}", highlight=False)
        if row["pending"]:
            console.print(f"    [yellow]an interrupted {row['pending']['kind']} (phase "
                          f"{row['pending']['phase']}) is unfinished[/yellow]", highlight=False)
        for path in row["unused"]:
            console.print(f"    unused default folder: {escape(path)}", highlight=False)
        for text in (*row["conflicts"], *row["problems"]):
            console.print(f"    [yellow]{escape(text)}[/yellow]", highlight=False)
        said = row.get("tool_says")
        if said is not None:
            command = " ".join(said["command"])
            if said["path"] is None:
                console.print(f"    `{escape(command)}`: {escape(said['error'] or '')}", highlight=False)
            else:
                verdict = "agrees" if said.get("agrees") else "[red]DISAGREES[/red]"
                console.print(f"    `{escape(command)}` says {escape(said['path'])}: {verdict}",
                              highlight=False)
    for problem in problems:
        console.print(f"[yellow]warning:[/yellow] {escape(problem)}", highlight=False)


@app.command()
def which(
    path: Annotated[str, typer.Argument(metavar="PATH", help="A folder or file, e.g. the one filling your drive.")],
    json_out: JsonOption = False,
) -> None:
    """Which tool's cache PATH is, whether it is safe to delete, and how to move it.

    Exit code 1 when no profile claims it.
    """
    from cachedoctor.host import Host
    from cachedoctor.locate import observe
    from cachedoctor.which import which as find

    profiles = [lp.profile for lp in profile_set().profiles.values()]
    result = find(path, profiles, observe(Host.current()))
    if json_out:
        emit_json(result.to_json(), ok=bool(result.owners))
    else:
        _render_which(result)
    raise typer.Exit(EXIT_OK if result.owners else EXIT_FAILED)


def _render_which(result: WhichResult) -> None:
    from rich.markup import escape

    console = stdout_console()
    if result.protected:
        console.print(f"{escape(result.path)} is {escape(result.protected)}: cachedoctor never "
                      "deletes or moves it.", highlight=False)
    if not result.owners:
        console.print(f"No profile claims {escape(result.path)}"
                      + ("" if result.exists else " (it does not exist)") + ".", highlight=False)
        return
    words = {"is": "is", "inside": "is inside", "contains": "contains", "default": "is the unused default of"}
    for owner in result.owners:
        console.print(f"{escape(result.path)} {words[owner.relation]} [bold]{escape(owner.tool)}[/bold]'s "
                      f"{escape(owner.location)} ({owner.kind}): {escape(owner.place)}", highlight=False)
        console.print(f"  how: {escape(owner.how)}", highlight=False)
        safe = "yes" if owner.safe_to_delete else "NO"
        clean = f"; the tool's own clean: {' '.join(owner.clean_command)}" if owner.clean_command else ""
        what = "" if owner.relation != "contains" else f" (that folder, not {result.path})"
        console.print(f"  safe to delete{escape(what)}: {safe}{escape(clean)}", highlight=False)
        if owner.move_methods:
            console.print(f"  move it: cachedoctor move {owner.tool} DEST --location {owner.location} "
                          f"(methods: {', '.join(owner.move_methods)})", highlight=False)
        for step in owner.how_to_move:
            console.print(f"  to move it: {escape(step)}", highlight=False)
        if owner.link_forbidden:
            console.print(f"  never link it: {escape(owner.link_forbidden)}", highlight=False)
