"""`cachedoctor profiles ...`: list, show, validate and describe the profile format."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cachedoctor.cli.base import JsonOption, app, emit_json, info, profile_set, stdout_console
from cachedoctor.errors import EXIT_BAD_INPUT

profiles_app = typer.Typer(help="List, show and validate tool profiles.", no_args_is_help=True)
app.add_typer(profiles_app, name="profiles")


@profiles_app.command("list")
def list_profiles(
    category: Annotated[str | None, typer.Option("--category", metavar="CATEGORY", help="Only this category.")] = None,
    json_out: JsonOption = False,
) -> int:
    """Every known tool: its category, whether its caches exist here (where its settings put
    them), and, as a hint only, processes running under its names."""
    from cachedoctor.cli.bodies.profiles_list import list_profiles as body

    return body(category=category, json_out=json_out)


@profiles_app.command("show")
def show(
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="Tool id.")], json_out: JsonOption = False
) -> None:
    """A profile with its locations resolved for this machine: where each really is, and why."""
    from cachedoctor.host import Host
    from cachedoctor.locate import observe, pictures
    from cachedoctor.relocate.plan import relocation_methods

    host = Host.current()
    loaded = profile_set().loaded(tool)
    profile = loaded.profile
    locations: list[dict[str, Any]] = []
    for pic in pictures([profile], observe(host)):
        location = pic.location
        locations.append(
            {
                "id": location.id,
                "name": location.name,
                "kind": location.kind,
                "safe_to_delete": location.safe_to_delete,
                "paths": [p.path for p in pic.places],
                "found": [p.path for p in pic.existing],
                "how": [p.how() for p in pic.places],
                "relocate": [r.method for r in relocation_methods(location, host)],
                "link_forbidden": location.link_forbidden,
                "units": [u.type for u in location.units],
            }
        )
    document: dict[str, Any] = {
        "id": profile.id,
        "name": profile.name,
        "category": profile.category,
        "aliases": profile.aliases,
        "description": profile.description,
        "file": loaded.file,
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
        f"[bold]{profile.name}[/bold] ({profile.id}, {profile.category}) — {profile.description}",
        highlight=False,
    )
    console.print(f"file: {document['file']}", markup=False)
    for loc in locations:
        console.print(
            f"\n[bold]{loc['id']}[/bold] \\[{loc['kind']}] safe to delete: "
            f"{'yes' if loc['safe_to_delete'] else 'NO'}; relocate: {', '.join(loc['relocate']) or '-'}",
            highlight=False,
        )
        for path, how in zip(loc["paths"], loc["how"], strict=True):
            console.print(f"  path: {path}  ({how})", markup=False)
        console.print(f"  found: {', '.join(loc['found']) or '(not present)'}", markup=False)
        if loc["link_forbidden"]:
            console.print(f"  never linked: {loc['link_forbidden']}", markup=False)
    if profile.tune:
        console.print(f"\ntune presets: {', '.join(document['tune'])}", markup=False)
    for note in profile.notes:
        console.print(f"note: {note}", markup=False)


@profiles_app.command("validate")
def validate(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="Profile YAML files to check.")],
    json_out: JsonOption = False,
) -> None:
    """Check profile files; exit 2 if any is invalid."""
    from cachedoctor.profiles.loader import ProfileFileError, load_profile_file

    results: list[dict[str, Any]] = []
    for file in files:
        try:
            profile = load_profile_file(file)
        except ProfileFileError as exc:
            results.append({"file": file, "valid": False, "id": None,
                            "errors": [e._asdict() for e in exc.errors]})
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
