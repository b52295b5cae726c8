"""`cachedoctor profiles ...`: list, show, validate and describe the profile format."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cachedoctor.cli.base import JsonOption, app, emit_json, info, profile_set, stdout_console
from cachedoctor.errors import EXIT_BAD_INPUT

profiles_app = typer.Typer(help="List, show and validate tool profiles.", no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")


@profiles_app.command("list")
def list_profiles(json_out: JsonOption = False) -> None:
    """Every known tool: whether its caches exist here and whether it is running."""
    from cachedoctor.host import Host
    from cachedoctor.processes import running_processes
    from cachedoctor.profiles.resolved import is_present

    host = Host.current()
    rows: list[dict[str, Any]] = []
    for tool_id, loaded in sorted(profile_set().profiles.items()):
        profile = loaded.profile
        rows.append(
            {
                "id": tool_id,
                "name": profile.name,
                "present": is_present(profile, host),
                "running": bool(running_processes(profile, host)),
                "origin": loaded.origin,
                "file": loaded.file,
            }
        )
    if json_out:
        emit_json({"profiles": rows})
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("id", "name", "present", "running", "origin"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["id"],
            row["name"],
            "yes" if row["present"] else "-",
            "RUNNING" if row["running"] else "-",
            row["origin"],
        )
    stdout_console().print(table)


@profiles_app.command("show")
def show(
    tool: Annotated[str, typer.Argument(help="Tool id.")], json_out: JsonOption = False
) -> None:
    """A profile with its paths resolved for this machine."""
    from cachedoctor.host import Host
    from cachedoctor.profiles.resolved import declared_paths
    from cachedoctor.resolve import expand_globs

    host = Host.current()
    loaded = profile_set().profiles.get(tool)
    profile = profile_set().get(tool)
    locations: list[dict[str, Any]] = []
    for location, pattern in declared_paths(profile, host):
        locations.append(
            {
                "id": location.id,
                "name": location.name,
                "kind": location.kind,
                "safe_to_delete": location.safe_to_delete,
                "template_resolved": pattern,
                "paths": expand_globs(pattern) if pattern else [],
                "relocate": [r.method for r in location.relocate],
            }
        )
    document: dict[str, Any] = {
        "id": profile.id,
        "name": profile.name,
        "description": profile.description,
        "file": loaded.file if loaded else None,
        "os": host.os,
        "locations": locations,
        "tune": [p.id for p in profile.tune],
        "checks": [c.id for c in profile.checks],
        "notes": profile.notes,
        "sources": profile.sources,
    }
    if json_out:
        emit_json(document)
        return
    console = stdout_console()
    console.print(
        f"[bold]{profile.name}[/bold] ({profile.id}) — {profile.description}", highlight=False
    )
    console.print(f"file: {document['file']}", markup=False)
    for loc in locations:
        found = ", ".join(loc["paths"]) if loc["paths"] else "(not present)"
        console.print(
            f"\n[bold]{loc['id']}[/bold] [{loc['kind']}] safe to delete: {'yes' if loc['safe_to_delete'] else 'NO'}"
            f"; relocate: {', '.join(loc['relocate']) or '-'}",
            highlight=False,
        )
        console.print(f"  path: {loc['template_resolved']}\n  found: {found}", markup=False)
    if profile.tune:
        console.print(f"\ntune presets: {', '.join(document['tune'])}", markup=False)
    for note in profile.notes:
        console.print(f"note: {note}", markup=False)


@profiles_app.command("validate")
def validate(
    files: Annotated[list[str], typer.Argument(help="Profile YAML files to check.")],
    json_out: JsonOption = False,
) -> None:
    """Check profile files; exit 2 if any is invalid."""
    from dataclasses import asdict

    from cachedoctor.profiles.loader import ProfileFileError, load_profile_file

    results: list[dict[str, Any]] = []
    for file in files:
        try:
            profile = load_profile_file(file)
        except ProfileFileError as exc:
            results.append({"file": file, "valid": False, "id": None,
                            "errors": [asdict(e) for e in exc.errors]})
            if not json_out:
                for error in exc.errors:
                    typer.echo(f"error: {error}", err=True)
            continue
        results.append({"file": file, "valid": True, "id": profile.id, "errors": []})
        if not json_out:
            info(f"ok: {file} ({profile.id})")
    if json_out:
        emit_json({"files": results})
    if not all(r["valid"] for r in results):
        raise typer.Exit(EXIT_BAD_INPUT)


@profiles_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of the profile format (for editor completion)."""
    from cachedoctor.profiles.loader import json_schema

    emit_json(json_schema())
