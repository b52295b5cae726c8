"""Which whole units (and loose files) an age or size rule evicts, least recently used first.

Every candidate — a unit, or one file that belongs to no unit — is taken or left whole. What
taking it frees is decided as it is taken: a part other candidates use (an Ollama blob two
models share, a file hard-linked twice) is freed when the last of them goes, and a file with
names outside the location never is (the estimate leaves it out).
"""

from __future__ import annotations

import msgspec

from cachedoctor.cacheunits.base import Unit
from cachedoctor.cacheunits.survey import Survey
from cachedoctor.cacheunits.tree import Entry


class Candidate(msgspec.Struct):
    unit: Unit | None  # None: a loose file
    file: Entry | None
    last_used: float
    entries: list[Entry]
    why: str = ""

    @property
    def key(self) -> str:
        return self.unit.id if self.unit is not None else self.file.rel if self.file else ""


class Choice(msgspec.Struct):
    units: list[Candidate] = msgspec.field(default_factory=list)
    files: list[Candidate] = msgspec.field(default_factory=list)
    bytes: int = 0  # estimated allocated bytes freed
    skipped_shared: list[Unit] = msgspec.field(default_factory=list)  # would free nothing: left

    @property
    def file_count(self) -> int:
        return sum(len([e for e in c.entries if not e.is_dir]) for c in self.units) + len(self.files)


def candidates(s: Survey) -> list[Candidate]:
    found = [Candidate(u, None, u.last_used, s.expanded[u.id]) for u in s.units
             if not u.file_level and u.tool_only is None]
    found.extend(Candidate(None, e, s.clock.last_used(e), [e]) for e in s.loose)
    return found


def choose(s: Survey, *, older_than: float | None, cap: int | None, now: float,
           pool: list[Candidate] | None = None) -> Choice:
    """All candidates unused for `older_than` seconds, then the least recently used ones until
    the location is at most `cap` bytes."""
    pool = candidates(s) if pool is None else pool
    users: dict[tuple[int, int], int] = {}
    for c in pool:
        for inode in {e.inode for e in c.entries if not e.is_dir}:
            users[inode] = users.get(inode, 0) + 1
    choice = Choice()
    taken: set[int] = set()

    def take(index: int, why: str) -> int:
        c = pool[index]
        taken.add(index)
        c.why = why
        freed = 0
        inodes: set[tuple[int, int]] = set()
        for e in c.entries:
            if e.is_dir:
                freed += e.size
                continue
            if e.inode in inodes:
                continue  # another name of a file already counted
            inodes.add(e.inode)
            users[e.inode] -= 1
            if users[e.inode] == 0 and s.tree.outside_names(e) == 0:
                freed += e.size
        (choice.units if c.unit is not None else choice.files).append(c)
        choice.bytes += freed
        return freed

    if older_than is not None:
        limit = now - older_than
        for i, c in enumerate(pool):
            if c.last_used < limit:
                take(i, f"not used for {_days(now - c.last_used)}")
    if cap is not None:
        remaining = s.total - choice.bytes
        for i in sorted(range(len(pool)), key=lambda i: (pool[i].last_used, pool[i].key)):
            if remaining <= cap:
                break
            if i in taken:
                continue
            c = pool[i]
            if c.entries and all(s.tree.outside_names(e) for e in c.entries if not e.is_dir) \
                    and any(not e.is_dir for e in c.entries):
                if c.unit is not None:
                    choice.skipped_shared.append(c.unit)
                continue  # every file has names outside: deleting ours frees nothing
            remaining -= take(i, "least recently used above the cap")
    if choice.files:  # the folders single files leave empty go too
        gone = {e.rel for c in choice.units + choice.files for e in c.entries}
        choice.bytes += sum(e.size for e in s.tree.emptied_folders(gone))
    return choice


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.0f} days" if days >= 2 else f"{seconds / 3600:.0f} hours"
