"""`doctor`: evaluate every profile's checks and the engine-wide rules, and report what is
wrong, why, and the command that fixes it. Nothing here prints; the CLI renders `DoctorReport`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cachedoctor.doctor.evaluators import Context, evaluate_check, journal_hit, pending_operations
from cachedoctor.doctor.fixes import fill, shell_quote
from cachedoctor.doctor.report import (
    GLOBAL_TOOL,
    SEVERITY_ORDER,
    CheckError,
    DoctorReport,
    Finding,
    Hit,
    Severity,
)
from cachedoctor.errors import CachedoctorError
from cachedoctor.host import Host
from cachedoctor.profiles.model import Check, Profile

if TYPE_CHECKING:
    from cachedoctor.locate.world import World

__all__ = ["GLOBAL_TOOL", "CheckError", "Context", "DoctorReport", "Finding", "Hit", "Severity",
           "check_profile", "fill", "run_doctor", "shell_quote"]


def _finding(check: Check, profile: Profile, hit: Hit, host: Host) -> Finding:
    facts: dict[str, str | None] = dict(hit.facts)
    facts.update({"tool": profile.id, "location": hit.location, "path": hit.path, "value": hit.value})
    return Finding(
        tool=profile.id,
        location=hit.location,
        path=hit.path,
        check=check.id,
        severity=check.severity,
        message=fill(check.message.strip(), facts),
        why=fill(check.why.strip(), facts),
        fix=fill(check.fix, facts, quote=lambda p: shell_quote(p, host)) if check.fix else None,
        value=hit.value,
    )


def check_profile(
    profile: Profile, host: Host, *, workspace: Path | None = None, policy_root: str | None = None,
    quotas: dict[tuple[str, str], int] | None = None, world: World | None = None,
) -> tuple[list[Finding], list[CheckError]]:
    ctx = Context(profile, host, workspace=workspace, policy_root=policy_root, quotas=quotas,
                  world=world)
    findings: list[Finding] = []
    errors: list[CheckError] = []
    for check in profile.checks:
        try:
            hits = evaluate_check(check, ctx)
        except (CachedoctorError, OSError, ValueError) as exc:
            errors.append(CheckError(profile.id, check.id, str(exc)))
            continue
        findings += [_finding(check, profile, hit, host) for hit in hits]
    return findings, errors


def journal_findings(tools: Sequence[str] | None, already: set[tuple[str, str | None]]) -> list[Finding]:
    """Global check: every unfinished move/restore in the journal (for `tools`, or all)."""
    out = []
    for op in pending_operations():
        tool = op.tool
        if tools is not None and tool not in tools:
            continue
        if (tool, op.location) in already:
            continue
        hit = journal_hit(op)
        finish, rollback = hit.facts["finish_command"], hit.facts["rollback_command"]
        out.append(Finding(
            tool=tool,
            location=hit.location,
            path=None,
            check="journal-unfinished",
            severity="error",
            message=f"An operation on {tool} was interrupted and is unfinished: {hit.value}"
            + (f" (phase {hit.facts['phase']})" if hit.facts["phase"] else ""),
            why="Until it is finished or rolled back, the cache may be split between two places "
            "and the tool may not find it. Nothing has been deleted; both commands are safe to run."
            + (f" To roll back instead: {rollback}" if rollback else ""),
            fix=finish or rollback or None,
            value=hit.value,
        ))
    return out


def apply_rules(profile: Profile, world: World, quotas: dict[tuple[str, str], int],
                reported: Sequence[Finding] = ()) -> tuple[list[Finding], list[CheckError]]:
    """The engine-wide rules (cachedoctor.doctor.rules) on every location of `profile`; a
    place that one of the profile's own checks of the same kind `reported` is not repeated."""
    from cachedoctor.doctor.rules import COVERS, RULES, RuleContext
    from cachedoctor.locate import pictures

    kinds = {check.id: {cond.type for cond in check.when} for check in profile.checks}
    seen = {(f.location, f.path, kind) for f in reported for kind in kinds.get(f.check, ())}
    findings: list[Finding] = []
    errors: list[CheckError] = []
    for pic in pictures([profile], world):
        ctx = RuleContext(profile, pic, world, quotas)
        for name, rule in RULES.items():
            try:
                found = rule(ctx)
            except (CachedoctorError, OSError, ValueError) as exc:
                errors.append(CheckError(profile.id, name, str(exc)))
                continue
            findings += [f for f in found if (f.location, f.path, COVERS.get(name)) not in seen]
    return findings, errors


def run_doctor(
    profiles: Sequence[Profile], host: Host, *, explicit: bool = False, workspace: Path | None = None,
    policy_root: str | None = None,
) -> DoctorReport:
    """Evaluate every check of `profiles` (only present ones unless `explicit`) and the global
    checks. Findings are sorted by severity, then tool."""
    from cachedoctor.locate import observe, present

    report = DoctorReport()
    world = observe(host)
    quotas: dict[tuple[str, str], int] | None = None
    for profile in profiles:
        if not explicit and not present(profile, world):
            continue
        report.tools.append(profile.id)
        if quotas is None:
            from cachedoctor.quota import quota_table

            try:
                quotas = quota_table()
            except CachedoctorError as exc:
                report.errors.append(CheckError(GLOBAL_TOOL, "quota-file", str(exc)))
                quotas = {}
        findings, errors = check_profile(
            profile, host, workspace=workspace, policy_root=policy_root, quotas=quotas,
            world=world,
        )
        report.findings += findings
        report.errors += errors
        engine_findings, engine_errors = apply_rules(profile, world, quotas, findings)
        report.findings += engine_findings
        report.errors += engine_errors
    for problem in world.problems:
        report.findings.append(Finding(
            GLOBAL_TOOL, None, None, "state-damaged", "error", problem,
            "cachedoctor cannot tell which caches it moved until the file is repaired; it "
            "refuses to change anything that depends on it.", None))
    from cachedoctor.relocate.journal import damaged

    for file, problem in damaged():
        report.findings.append(Finding(
            GLOBAL_TOOL, None, file, "journal-damaged", "error",
            f"The journal file {file} of an interrupted move or restore is damaged ({problem}).",
            "The operation cannot be finished or rolled back from it. Its data is complete in "
            "the folders named after it (*.cachedoctor-old-ID: the original; -partial-ID: an "
            "incomplete copy), which the stranded-folder findings list.", None))
    journal_checks = {
        (p.id, check.id)
        for p in profiles
        for check in p.checks
        if any(cond.type == "journal_unfinished" for cond in check.when)
    }
    already = {(f.tool, f.location) for f in report.findings if (f.tool, f.check) in journal_checks}
    journal_tools = [p.id for p in profiles] if explicit else None
    try:
        report.findings += journal_findings(journal_tools, already)
    except (CachedoctorError, OSError, ValueError) as exc:
        report.errors.append(CheckError(GLOBAL_TOOL, "journal-unfinished", str(exc)))
    report.findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.tool, f.check, f.path or ""))
    return report
