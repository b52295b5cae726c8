"""The body of `cachedoctor profiles list` (its options: `cli/profiles.py`)."""

from __future__ import annotations

from typing import Any

from cachedoctor.cli.common import emit_json, profile_set


def list_profiles(*, category: str | None, json_out: bool) -> int:
    """Every known tool, whether its caches are here and which of its processes run."""
    from cachedoctor.errors import UserInputError
    from cachedoctor.host import Host
    from cachedoctor.locate import observe, present
    from cachedoctor.processes import running_processes
    from cachedoctor.profiles.model import CATEGORIES

    if category is not None and category not in CATEGORIES:
        raise UserInputError(f"unknown category {category!r}; known: {', '.join(CATEGORIES)}")
    host = Host.current()
    world = observe(host)
    rows: list[dict[str, Any]] = []
    for tool_id, loaded in sorted(profile_set().profiles.items()):
        profile = loaded.profile
        if category is not None and profile.category != category:
            continue
        running = running_processes(profile, host)
        rows.append(
            {
                "id": tool_id,
                "name": profile.name,
                "category": profile.category,
                "aliases": profile.aliases,
                "present": present(profile, world),
                "running": bool(running),
                "processes": [{"pid": p.pid, "name": p.name} for p in running],
                "origin": loaded.origin,
                "file": loaded.file,
            }
        )
    if json_out:
        emit_json({"profiles": rows})
        return 0
    from cachedoctor.cli.render import Column, print_table

    columns = [Column("id"), Column("name", "prose"), Column("category", drop=2),
               Column("present"), Column("running (by name)", "prose", drop=1),
               Column("origin")]
    table: list[list[str] | None] = []
    for row in rows:
        running_text = ", ".join(f"{p['name']} ({p['pid']})" for p in row["processes"][:2]) or "-"
        table.append([row["id"], row["name"], row["category"], "yes" if row["present"] else "-",
                      running_text, row["origin"]])
    print_table(None, columns, table)
    return 0
