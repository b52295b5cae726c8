"""The body of `cachedoctor ls TOOL`: one row per unit of a cache (a model, a repo, a package
folder); its options: `cli/ls.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from cachedoctor import collector
from cachedoctor.cli import output
from cachedoctor.cli.common import emit_json, profile_set, stdout_console, warn
from cachedoctor.errors import EXIT_BAD_INPUT, EXIT_OK

if TYPE_CHECKING:
    from cachedoctor.cacheunits.base import Unit
    from cachedoctor.cacheunits.listing import LocationUnits, SortKey


def ls(*, tool: str, location: str | None, sort: str, limit: int | None, json_out: bool) -> int:
    """`cachedoctor ls`: the exit code (2 for a location that is not there)."""
    from cachedoctor.cacheunits.listing import SORT_KEYS, list_units, sort_units
    from cachedoctor.errors import UserInputError
    from cachedoctor.host import Host

    if sort not in SORT_KEYS:
        raise UserInputError(f"--sort {sort!r}: one of {', '.join(SORT_KEYS)}")
    key = cast("SortKey", sort)
    profiles = profile_set()
    (profile,) = profiles.select([tool])
    all_profiles = [lp.profile for lp in profiles.profiles.values()]
    with collector.paused():  # the survey's objects, young when it ends, are never scanned:
        found = list_units(profile, Host.current(), location=location, all_profiles=all_profiles)
        collector.keep_until_exit()  # the listing is this run's output (10 ms of a 2,000-repo
        # hub's `ls` went to one collection of them between the survey and this line)
    shown = {id(f): sort_units(f.survey.units, key)[:limit] if f.survey else [] for f in found}
    if json_out:
        for error in (e for f in found if f.survey for e in f.survey.tree.errors):
            output.add_warning(error)
        emit_json({"tool": profile.id, "sort": key, "limit": limit,
                   "locations": [f.to_json(shown[id(f)]) for f in found]})
        return EXIT_OK
    if not found:
        stdout_console().print(f"{profile.name}: no location of it exists here.")
    for entry in found:
        _render(entry, shown[id(entry)])
    return EXIT_OK if found or location is None else EXIT_BAD_INPUT


def _render(entry: LocationUnits, units: list[Unit]) -> None:
    from cachedoctor.cli.render import Column, number_column, print_table, size, tilde, when
    from cachedoctor.sizes import format_size

    console = stdout_console()
    s = entry.survey
    head = f"{entry.tool}/{entry.location}  {tilde(entry.root or entry.path)}"
    if s is None:
        console.print(f"{head}\n  {entry.note}\n", markup=False, highlight=False)
        return
    count = f"{len(s.units)} unit{'' if len(s.units) == 1 else 's'}"
    console.print(f"{head}  ({count}, {format_size(s.total)}; last used = "
                  f"{s.clock.name}: {s.clock.why})", markup=False, highlight=False)
    if entry.note:
        console.print(f"  {entry.note}", markup=False, highlight=False)
    has_revisions = any(u.revisions for u in units)
    columns = [Column("id", "prose"), number_column("size"), number_column("shared", drop=2),
               number_column("files", drop=1), number_column("last used")]
    columns += [number_column("revisions", drop=3), Column("refs", "prose")] if has_revisions else []
    columns.append(Column("flags", "prose"))
    rows: list[list[str] | None] = []
    for u in units:
        row = [u.id, size(u.bytes), size(u.shared_bytes) if u.shared_bytes else "",
               f"{u.files:,}", when(u.last_used)]
        if has_revisions:
            row += [str(len(u.revisions)), ", ".join(u.refs)]
        row.append("; ".join(u.flags))
        rows.append(row)
    print_table(console, columns, rows)
    if len(units) < len(s.units):
        console.print(f"  ... {len(s.units) - len(units)} more (--limit)", markup=False)
    loose = [e for e in s.loose if not any(u.file_level and (not u.path or e.rel.startswith(
        u.path + "/")) for u in s.units)]
    if loose:
        from cachedoctor.cacheunits import allocated

        console.print(f"  {len(loose):,} file(s) in no unit ({format_size(allocated(loose))}): "
                      "age and size rules take them one by one", markup=False, highlight=False)
    if s.garbage:
        total = sum(g.bytes for g in s.garbage)
        console.print(f"  garbage: {len(s.garbage)} item(s), {format_size(total)} — "
                      f"`cachedoctor clean {entry.tool} --prune` removes it", markup=False,
                      highlight=False)
        for g in s.garbage[:10]:
            console.print(f"    {size(g.bytes):>10}  {g.id}: {g.reason}", markup=False,
                          highlight=False)
    for error in s.tree.errors[:10]:
        warn(error)
    console.print()
