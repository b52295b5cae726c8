"""Planning `cachedoctor clean`: per existing location path, what goes and why, measured.

Policies:

* a location that is not `safe_to_delete` is never touched by file rules (only the tool's own
  clean command may run there, when the user names the tool) — named units (`--unit`) and the
  tool's own garbage (`--prune`) of a location whose units are declared are the exceptions:
  the user named exactly what goes, or the tool itself calls it garbage;
* a `tool-only` store is cleaned by the tool's own command alone, never by file rules;
* a protected root (`/`, home, drive roots, system folders) is refused, whatever a profile says;
* a location in use (a process has files open there) is not cleaned without `--force`;
* tool named, nothing else: the location is emptied (its folder and `keep:` globs stay) — by
  the tool's own command when the profile names one and it is installed (the copy that serves
  this cache: `cachedoctor.clean.command`), else unit by unit in the tool's order;
* `--older-than AGE`, `--max-size SIZE` and quotas: whole units where the location declares
  them, least recently used first, single files elsewhere (`cachedoctor.cacheunits.evict`);
  "last used" by the location's clock (`cachedoctor.cacheunits.clock`).
"""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from cachedoctor.cacheunits import (
    Clock,
    Entry,
    Garbage,
    Step,
    Survey,
    Tree,
    Unit,
    allocated,
    choose,
    list_tree,
    survey,
    unit_type,
    usage_clock,
)
from cachedoctor.cacheunits.base import names_step
from cachedoctor.cacheunits.listing import nested_rules
from cachedoctor.clean.command import program_inside, resolve_command
from cachedoctor.clean.model import (
    CleanPlan,
    Item,
    PlannedGarbage,
    PlannedUnit,
    Policy,
    Refusal,
    Target,
)
from cachedoctor.errors import RefusedError, UserInputError
from cachedoctor.host import Host
from cachedoctor.profiles.model import Location, Profile, ToolOnlyUnits
from cachedoctor.safedelete import FileInfo, Rules
from cachedoctor.safety import check_not_protected, clean_refusal

if TYPE_CHECKING:
    from cachedoctor.inuse import UseReport
    from cachedoctor.locate.effective import Picture
    from cachedoctor.locate.world import World

InUse = Callable[[Sequence[str]], "UseReport"]
LARGEST = 5


def plan_clean(
    profiles: Sequence[Profile],
    host: Host,
    policy: Policy,
    *,
    quotas: dict[tuple[str, str], int] | None = None,
    all_profiles: Iterable[Profile] = (),
    measure: bool = True,
    which: Callable[[str], str | None] = shutil.which,
    in_use: InUse | None = None,
    world: World | None = None,
    builtin: Iterable[Profile] | None = None,
) -> CleanPlan:
    """Decide what each existing location of `profiles` loses (where the tool really keeps it);
    measure it unless `measure` is off (units, pruning and age/size rules are always measured).

    `builtin`: the built-in profiles, whose folders `clean` may act in wherever they are (by
    default all of `all_profiles`); anywhere else outside the user's own folders only a
    location that says why (`outside_user_roots`), a folder cachedoctor moved a cache to, or
    one named for the tool or for a cache.

    Raises UserInputError when nothing was asked (no tool named, no age, no size, no quota), and
    when a `--unit` matches no unit of the named tools."""
    from cachedoctor.locate import observe, pictures

    quotas = quotas or {}
    if not policy.explicit and policy.older_than is None and policy.max_size is None and not quotas:
        raise UserInputError(
            "nothing to clean: name the tools to empty (e.g. `cachedoctor clean pip`), "
            "or give --older-than / --max-size, or set a quota with `cachedoctor quota set`"
        )
    if (policy.units or policy.prune) and not policy.explicit:
        raise UserInputError("--unit and --prune need the tool named, e.g. "
                             "`cachedoctor clean huggingface --unit model/gpt2`")
    if policy.units or policy.prune:
        quotas = {}  # exactly what was named (or the tool's garbage), nothing else
    if in_use is None:
        from cachedoctor.inuse import find_uses

        in_use = find_uses
    world = world if world is not None else observe(host)
    everything = pictures(all_profiles or profiles, world)
    others = [place.data or place.path for pic in everything for place in pic.existing]
    declared = _declared_folders(list(builtin if builtin is not None else all_profiles or profiles),
                                 world)
    plan = CleanPlan(policy=policy)
    matched: set[str] = set()  # the --unit values some location has
    known: list[str] = []  # every unit id seen (for "did you mean")
    for picture in pictures(profiles, world):
        loc, tool = picture.location, picture.tool
        profile = next(p for p in profiles if p.id == tool)
        if picture.pending is not None:
            if picture.existing or policy.explicit:
                plan.left_alone.append(Refusal(
                    tool, loc.id, picture.pending.base,
                    f"an interrupted {picture.pending.kind} of it is unfinished; finish or roll it "
                    "back first (see `cachedoctor doctor`)", True))
            continue
        if picture.problems and (picture.existing or policy.explicit):
            plan.left_alone.append(Refusal(
                tool, loc.id, ", ".join(p.path for p in picture.existing) or loc.id,
                "where it really is cannot be known: " + "; ".join(picture.problems), True))
            continue
        for place in picture.existing:
            target = _plan_location(profile, loc, place.path, host, policy, quotas, which, plan,
                                    declared=declared)
            if target is None:
                continue
            if target.mode == "command" and place in picture.places:
                target.command_env = _session_env(picture, world)
            target.rules = nested_rules(target.rules, target.root, others)
            found = None
            if target.mode == "units":  # named units: only their own files must be unused
                found = _measure(target, policy, matched)
                if found is not None:
                    known.extend(u.id for u in found.units)
                if not target.units:
                    continue
                report = in_use(_unit_paths(target, found))
            else:
                report = in_use([target.root])
            if report.in_use and not policy.force:
                plan.left_alone.append(Refusal(
                    tool, loc.id, place.path, f"in use: {report.describe()} (close it, or pass "
                    "--force)", True, in_use=True))
                continue
            if report.in_use:
                target.reasons.append(f"in use, going ahead because of --force: {report.describe()}")
            if found is None and (measure or target.mode != "empty" or target.unit_specs):
                found = _measure(target, policy, matched)
                if found is not None:
                    known.extend(u.id for u in found.units)
            plan.targets.append(target)
        if policy.explicit:
            for path in picture.unused:
                plan.left_alone.append(Refusal(
                    tool, loc.id, path,
                    f"no longer used by {profile.name} (its settings point elsewhere: "
                    f"{', '.join(p.path for p in picture.places) or 'nowhere'}); "
                    "delete it yourself if you do not need it", False))
    _check_units_found(policy, plan, matched, known)
    return plan


def _unit_paths(target: Target, s: Survey | None) -> list[str]:
    """The files and folders of the named units (an Ollama model's manifest and blobs)."""
    members = {m for p in target.units if s is not None and (u := s.unit(p.id)) is not None
               for m in u.members}
    return [os.path.join(target.root, m) for m in sorted(members)]


def _check_units_found(policy: Policy, plan: CleanPlan, matched: set[str],
                       known: list[str]) -> None:
    """Every `--unit` names a unit of some location; a location left alone (in use, refused)
    explains itself instead."""
    missing = [u for u in policy.units if u not in matched]
    if not missing or (plan.left_alone and not known):
        return
    hints = []
    for unit in missing:
        close = difflib.get_close_matches(unit, known, n=3, cutoff=0.5)
        hints.append(f"{unit} (did you mean {', '.join(close)}?)" if close else unit)
    listing = "" if known else "; the named tools have no units here"
    raise UserInputError(
        f"no such unit: {'; '.join(hints)}{listing}",
        hint="`cachedoctor ls TOOL` lists the units",
    )


def _plan_location(
    profile: Profile,
    loc: Location,
    path: str,
    host: Host,
    policy: Policy,
    quotas: dict[tuple[str, str], int],
    which: Callable[[str], str | None],
    plan: CleanPlan,
    *,
    declared: list[str],
) -> Target | None:
    def leave(reason: str, refused: bool = False) -> None:
        plan.left_alone.append(Refusal(profile.id, loc.id, path, reason, refused))

    quota = quotas.get((profile.id, loc.id))
    cap, cap_source = _cap(policy.max_size, quota)
    older_than = policy.older_than
    if policy.kinds is not None and loc.kind not in policy.kinds:
        older_than = None  # a scheduled age policy covers only the configured kinds
        if quota is None:
            return None
    tool_only = next((u for u in loc.units if isinstance(u, ToolOnlyUnits)), None)
    structured = [u for u in loc.units if not isinstance(u, ToolOnlyUnits)]
    by_rules = older_than is not None or cap is not None
    if policy.units and not structured:
        if tool_only is not None:
            leave(f"only {profile.name}'s own command cleans it ({tool_only.why}); its units "
                  "are not cachedoctor's to pick")
        return None
    if not policy.explicit and not by_rules:
        return None  # `clean` without tools only enforces quotas and the given age/size
    if not loc.safe_to_delete and not (structured and (policy.units or policy.prune)) \
            and (by_rules or not (loc.clean and loc.clean.command)):
        # only the tool itself knows what in here is unused (conda's pkgs, for instance)
        if policy.explicit or quota is not None:
            leave("the profile does not mark this location safe to delete")
        return None
    if tool_only is not None and by_rules:
        leave(f"only {profile.name}'s own command may clean it: {tool_only.why}"
              + (f" (`cachedoctor clean {profile.id}` runs it)" if loc.clean and loc.clean.command
                 else ""))
        return None
    try:
        check_not_protected(path, host, role="cache folder to clean", system_subfolders=True)
    except RefusedError as exc:
        leave(exc.message, refused=True)
        return None
    root = os.path.realpath(path)
    if not os.path.isdir(root):
        if os.path.islink(path):
            leave("relocation link whose target is missing (is the other drive connected?)")
        else:
            leave("not a folder")
        return None
    if os.path.normcase(root) != os.path.normcase(os.path.abspath(path)):
        try:
            check_not_protected(root, host, role="cache folder to clean", system_subfolders=True)
        except RefusedError as exc:
            leave(exc.message, refused=True)
            return None
    why_not = clean_refusal(root, host, declared=declared, reason=loc.outside_user_roots)
    if why_not is not None and not _named_for(root, profile):
        leave(f"{root} is {why_not}", refused=True)
        return None
    wants_command = policy.explicit and not by_rules and not policy.units and (
        not policy.prune or tool_only is not None) and not policy.trash
    try:
        command = resolve_command(loc.clean, loc, root, which) if wants_command else None
    except RefusedError as exc:
        leave(exc.message, refused=True)
        return None
    if command is not None and program_inside(command.argv[0], path, root):
        leave(
            f"the profile's clean command {command.argv[0]} lives inside the cache it would "
            "clean; refusing to run it",
            refused=True,
        )
        return None
    if command is None and (tool_only is not None or not loc.safe_to_delete) \
            and not (structured and (policy.units or policy.prune)):
        program = loc.clean.command[0] if loc.clean and loc.clean.command else None
        reasons = [] if loc.safe_to_delete else ["the profile does not mark this location "
                                                 "safe to delete"]
        reasons += [tool_only.why] if tool_only is not None else []
        why = ": ".join(reasons)
        if policy.trash and program:
            leave(f"only {program} may clean it ({why}), and a tool's command cannot send to "
                  "the trash")
        elif program and wants_command:
            leave(f"only {profile.name}'s own command may clean it ({why}); {program} is not "
                  "installed (not on PATH)")
        else:
            leave(f"only {profile.name} itself may clean it: {why}")
        return None
    st = os.stat(root)
    spec = loc.clean
    rules = Rules(keep=tuple(spec.keep), only=tuple(spec.only)) if spec else Rules()
    target = Target(
        tool=profile.id,
        location=loc.id,
        kind=loc.kind,
        path=path,
        root=root,
        mode="empty",
        reasons=[],
        rules=rules,
        root_id=(st.st_dev, st.st_ino),
        unit_specs=tuple(structured),
    )
    if command is not None:
        target.mode = "command"
        target.command = command.argv
        target.command_why = command.why
        target.unit_specs = ()
        target.reasons = [f"the tool's own clean command: {' '.join(command.argv)}"]
        if tool_only is not None:
            target.reasons.append(f"only the tool may clean it: {tool_only.why}")
        return target
    if policy.units:
        target.mode = "units"
        target.reasons.append("the units you named")
        return target
    if policy.prune:
        target.mode = "prune"
        target.reasons.append(f"what {profile.name} itself calls garbage, and dangling links")
        return target
    if by_rules:
        target.mode = "policy"
        target.older_than = older_than
        target.cap, target.cap_source = cap, cap_source
        what = "whole units" if structured else "files"
        if older_than is not None:
            target.reasons.append(f"{what} not used for {_age_text(older_than)}")
        if cap is not None:
            target.reasons.append(f"least recently used {what} above the {cap_source} cap")
        return target
    target.reasons.append("empty the location (safe to delete)"
                          + ("; unit by unit, in the tool's own order" if structured else ""))
    return target


def _cap(max_size: int | None, quota: int | None) -> tuple[int | None, str | None]:
    if max_size is not None and (quota is None or max_size <= quota):
        return max_size, "--max-size"
    if quota is not None:
        return quota, "quota"
    return None, None


# ------------------------------------------------------------------------------- measuring


def _measure(target: Target, policy: Policy, matched: set[str]) -> Survey | None:
    """Measure the target and fill in what goes; the survey when the location has units."""
    target.measured = True
    if target.mode in ("policy", "units", "prune") or target.unit_specs:
        target.clock = usage_clock(target.root)
    if target.unit_specs or target.mode == "prune":
        s = survey(target.root, target.unit_specs, rules=target.rules, clock=target.clock)
        target.total_bytes = s.total
        _plan_units(target, policy, s, matched)
        return s
    tree = list_tree(target.root, rules=target.rules)
    target.total_bytes = tree.total()
    files = [e for e in tree.entries.values() if e.rel and not e.is_dir]
    if target.mode != "policy":  # emptied, by cachedoctor or by the tool's own command
        _plan_whole(target, tree, files)
        return None
    assert target.clock is not None
    files = _select_files(files, target.total_bytes, target, policy.now, target.clock)
    target.selection = {f.rel: (f.ino, target.clock.last_used(f)) for f in files}
    target.files = len(files)
    emptied = tree.emptied_folders({f.rel for f in files}) if files else []
    target.bytes = freed_bytes(files) + sum(e.size for e in emptied)
    _note_outside_links(target, files)
    target.largest = _largest(target.root, [(f.rel, f.size) for f in files])
    return None


def _plan_whole(target: Target, tree: Tree, files: list[Entry]) -> None:
    """Everything but the folder itself (and what the rules keep) goes; what has names outside
    the location frees nothing (a uv cache hard-linked into venvs)."""
    linked = _outside_linked(tree)
    target.files = len(files)
    root_entry = tree.get("")
    target.bytes = max(0, target.total_bytes - (root_entry.size if root_entry else 0)
                       - sum(size for size, _ in linked.values())) if len(tree.entries) > 1 else 0
    _linked_note(target, linked, "outside the cache (venvs, projects)")
    target.largest = _largest(target.root, [(e.rel, e.size) for e in files])


def _outside_linked(tree: Tree) -> dict[tuple[int, int], tuple[int, int]]:
    """inode -> (bytes, names outside the location) for the files linked from outside."""
    linked: dict[tuple[int, int], tuple[int, int]] = {}
    for e in tree.entries.values():
        if not e.is_dir and e.nlink > 1 and e.inode not in linked:
            outside = tree.outside_names(e)
            if outside:
                linked[e.inode] = (e.size, outside)
    return linked


def _linked_note(target: Target, linked: dict[tuple[int, int], tuple[int, int]],
                 where: str) -> None:
    if not linked:
        return
    from cachedoctor.sizes import format_size

    names = sum(n for _, n in linked.values())
    size = sum(s for s, _ in linked.values())
    target.notes.append(
        f"{len(linked):,} files ({format_size(size)}) are hard-linked from {names:,} other "
        f"names {where}: deleting them here frees 0 B, so the estimate leaves them out")


def _note_outside_links(target: Target, files: list[Entry]) -> None:
    """Files among those going whose other names stay (outside the cache, or not chosen)."""
    from collections import Counter

    names = Counter((f.dev, f.ino) for f in files if f.nlink > 1)
    outside: dict[tuple[int, int], tuple[int, int]] = {}
    for f in files:
        key = (f.dev, f.ino)
        if f.nlink > names[key] > 0 and key not in outside:
            outside[key] = (f.size, f.nlink - names[key])
    _linked_note(target, outside, "that stay (outside the cache, or not chosen)")


def freed_bytes(files: Iterable[Entry | FileInfo]) -> int:
    """Allocated bytes deleting these files frees: a hard-linked file only when every one of
    its names is among them (a name elsewhere keeps its data)."""
    total = 0
    linked: dict[tuple[int, int], list[int]] = {}
    for f in files:
        if f.nlink <= 1:
            total += f.size
            continue
        seen = linked.setdefault((f.dev, f.ino), [f.size, 0, f.nlink])
        seen[1] += 1
    total += sum(size for size, names, nlink in linked.values() if names >= nlink)
    return total


def _select_files(files: list[Entry], total: int, target: Target, now: float,
                  clock: Clock) -> list[Entry]:
    """Files to evict: all unused for the age, then least recently used until under the cap."""
    chosen: list[Entry] = []
    rest = files
    if target.older_than is not None:
        limit = now - target.older_than
        chosen = [f for f in files if clock.last_used(f) < limit]
        rest = [f for f in files if clock.last_used(f) >= limit]
    if target.cap is not None:
        remaining = total - freed_bytes(chosen)
        for f in sorted(rest, key=lambda f: (clock.last_used(f), f.rel)):
            if remaining <= target.cap:
                break
            chosen.append(f)
            remaining -= f.size if f.nlink <= 1 else 0
    return chosen


def _plan_units(target: Target, policy: Policy, s: Survey, matched: set[str]) -> None:
    tree = s.tree
    if target.mode == "units":
        matched.update(_plan_named_units(target, policy, s))
    elif target.mode == "prune":
        for g in prune_garbage(s):
            target.garbage.append(PlannedGarbage(g.id, g.reason, g.bytes, g.files))
        target.bytes = sum(g.bytes for g in target.garbage)
        target.files = sum(g.files for g in target.garbage)
    elif target.mode == "policy":
        choice = choose(s, older_than=target.older_than, cap=target.cap, now=policy.now)
        for c in choice.units:
            assert c.unit is not None
            target.units.append(_planned(c.unit, c.why, check_unused=True))
        target.selection = {c.file.rel: (c.file.ino, c.last_used)
                            for c in choice.files if c.file is not None}
        target.bytes = choice.bytes
        target.files = choice.file_count
        for unit in choice.skipped_shared:
            target.notes.append(f"{unit.id}: shared with {unit.outside_names} names outside the "
                                "cache, frees 0 B: left")
    else:  # empty, unit by unit
        target.units = [_planned(u, "empty the location") for u in s.units
                        if not u.file_level and u.tool_only is None]
        files = [e for e in tree.entries.values() if e.rel and not e.is_dir]
        target.files = len(files)
        linked = _outside_linked(tree)
        root_entry = tree.get("")
        target.bytes = max(0, s.total - (root_entry.size if root_entry else 0)
                           - sum(size for size, _ in linked.values()))
        _linked_note(target, linked, "outside the cache (venvs, projects)")
    if target.mode == "policy" and target.clock is not None:
        target.notes.append(f"last used = {target.clock.name}: {target.clock.why}")
    sizes = [(u.path, u.frees) for u in target.units]
    sizes += [(rel, tree.entries[rel].size) for rel in (target.selection or {})]
    target.largest = _largest(target.root, sizes, by_top=False)


def _plan_named_units(target: Target, policy: Policy, s: Survey) -> set[str]:
    """The `--unit` values found here, planned (a `repo@revision` is that revision only)."""
    chosen: list[tuple[str, str | None]] = []  # (unit id, revision)
    found: set[str] = set()
    for wanted in policy.units:
        unit_id, _, revision = wanted.partition("@")
        unit = s.unit(unit_id)
        if unit is None or unit.tool_only is not None:
            continue
        if revision:
            commit = unit_type(unit.type).commit_of(unit, revision)
            if commit is None:
                continue
            chosen.append((unit.id, commit))
        else:
            chosen.append((unit.id, None))
        found.add(wanted)
    whole = {uid for uid, rev in chosen if rev is None}
    steps_by_unit = unit_steps(s, [(uid, rev) for uid, rev in chosen if rev is None or uid not in whole])
    for (uid, rev), steps in steps_by_unit:
        unit = s.unit(uid)
        assert unit is not None
        planned = _planned(unit, "named", revision=rev)
        planned.frees = steps_estimate(s.tree, steps)
        if rev is not None:
            planned.files = steps_files(s.tree, steps)
            planned.bytes = planned.frees
        target.units.append(planned)
    target.bytes = sum(u.frees for u in target.units)
    target.files = sum(u.files for u in target.units)
    return found


def _planned(unit: Unit, why: str, *, revision: str | None = None,
             check_unused: bool = False) -> PlannedUnit:
    from cachedoctor.sizes import format_size

    note = ""
    if unit.outside_names:
        note = (f"shared with {unit.outside_names} names outside the cache (venvs, projects): "
                f"{format_size(unit.shared_bytes)} of it frees 0 B")
    elif unit.shared_bytes:
        note = f"{format_size(unit.shared_bytes)} shared with units that stay"
    return PlannedUnit(unit.id, unit.path, unit.bytes, unit.frees, unit.files, unit.last_used,
                       why, revision=revision, check_unused=check_unused, note=note)


def unit_steps(s: Survey, chosen: list[tuple[str, str | None]]
               ) -> list[tuple[tuple[str, str | None], list[Step]]]:
    """The deleter's steps for each chosen unit (or revision), in the tool's order; a shared
    part only where no unit that stays uses it."""
    going = {uid for uid, rev in chosen if rev is None}

    def gone(entry: Entry) -> bool:
        return s.users.get(entry.inode, set()) <= going

    out: list[tuple[tuple[str, str | None], list[Step]]] = []
    for uid, rev in chosen:
        unit = s.unit(uid)
        if unit is None:
            continue
        kind = unit_type(unit.type)
        if rev is not None:
            steps = kind.revision_removal(unit, s.tree, rev, gone)
        else:
            steps = kind.removal(unit, s.tree, gone)
        out.append(((uid, rev), steps))
    return out


def prune_garbage(s: Survey) -> list[Garbage]:
    """The types' garbage, and every dangling link no type already covers."""
    found: list[Garbage] = list(s.garbage)
    covered = {e.rel for g in found for m in g.members for e in s.tree.below(m)}
    dangling = sorted(e.rel for e in s.tree.entries.values()
                      if e.is_link and e.rel not in covered and s.tree.dangles(e))
    if dangling:
        g = Garbage("dangling links", "links to something that no longer exists", dangling,
                    names_step(s.tree, "", dangling, "dangling links"))
        g.files = len(dangling)
        g.bytes = sum(s.tree.entries[r].size for r in dangling)
        found.append(g)
    return found


def steps_estimate(tree: Tree, steps: list[Step]) -> int:
    """Allocated bytes the steps free: what they remove, each inode once, nothing with names
    outside the location."""
    return allocated(e for e in _step_entries(tree, steps) if tree.outside_names(e) == 0)


def steps_files(tree: Tree, steps: list[Step]) -> int:
    return sum(1 for e in _step_entries(tree, steps) if not e.is_dir)


def _step_entries(tree: Tree, steps: list[Step]) -> list[Entry]:
    seen: dict[str, Entry] = {}
    for step in steps:
        if step.names is None:
            for e in tree.below(step.base):
                if e.rel != step.base or step.remove_base:
                    seen[e.rel] = e
        else:
            for rel in step.names:
                entry = tree.get(rel)
                if entry is not None:
                    seen[rel] = entry
    return list(seen.values())


def _largest(root: str, sizes: list[tuple[str, int]], *, by_top: bool = True) -> list[Item]:
    """The biggest entries among what would go (top-level folders, or the units themselves)."""
    totals: dict[str, int] = {}
    for rel, size in sizes:
        key = rel.split("/", 1)[0] if by_top else rel
        totals[key] = totals.get(key, 0) + size
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:LARGEST]
    return [Item(os.path.join(root, name), size) for name, size in ranked]


def _age_text(seconds: float) -> str:
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _declared_folders(builtin: list[Profile], world: World) -> list[str]:
    """Folders `clean` may act in wherever they are: every path a built-in profile declares
    (up to its first wildcard), and every folder cachedoctor moved a cache to."""
    from cachedoctor.resolve import try_expand

    host = world.host
    out: list[str] = []
    for profile in builtin:
        for loc in profile.locations:
            for template in loc.paths.for_host(host):
                path = try_expand(template, host)
                if path:
                    out.append(_before_wildcard(path))
    for op in world.records.values():
        out += [op.base, *(pair.dest for pair in op.pairs)]
    return out


def _before_wildcard(path: str) -> str:
    cut = min((i for i, c in enumerate(path) if c in "*?["), default=len(path))
    head = path[:cut]
    return head if cut == len(path) else os.path.dirname(head)


def _named_for(path: str, profile: Profile) -> bool:
    """A folder whose name says it is this tool's or a cache (`/mnt/d/pip-cache`,
    `D:\\hf\\hub`): a user's own setting pointing there is believed. `~/Documents/thesis`
    named by a stray config file is not."""
    words = {profile.id.lower(), profile.name.lower(), *(a.lower() for a in profile.aliases),
             "cache"}
    parts = [p.lower() for p in path.replace("\\", "/").split("/") if p]
    return any(word in part for part in parts[-3:] for word in words if word)


def _session_env(picture: Picture, world: World) -> dict[str, str | None]:
    """The location's variables as new sessions have them: the tool's own command must clean
    the folder the picture names, not the one this process's (older) environment points at."""
    from cachedoctor.locate.effective import setting_variables

    session = world.new_session_host()
    return {name: session.getenv(name) for name in sorted(setting_variables(picture.location))}
