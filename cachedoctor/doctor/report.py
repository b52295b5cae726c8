"""What the doctor reports: findings (with why and the fix), checks that could not run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

Severity = Literal["error", "warning", "hint"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "hint": 2}
GLOBAL_TOOL = "(cachedoctor)"


class Hit(msgspec.Struct, frozen=True):
    """One place where a condition holds, with the facts found there."""

    path: str | None = None
    location: str | None = None
    value: str | None = None
    facts: Mapping[str, str] = msgspec.field(default_factory=dict)


class Finding(msgspec.Struct, frozen=True):
    tool: str
    location: str | None
    path: str | None
    check: str
    severity: Severity
    message: str
    why: str
    fix: str | None
    value: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "location": self.location,
            "path": self.path,
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
            "value": self.value,
        }


class CheckError(msgspec.Struct, frozen=True):
    """A check that could not be evaluated (unreadable settings file, broken policy JSON...)."""

    tool: str
    check: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"tool": self.tool, "check": self.check, "error": self.error}


class DoctorReport(msgspec.Struct):
    tools: list[str] = msgspec.field(default_factory=list)
    findings: list[Finding] = msgspec.field(default_factory=list)
    errors: list[CheckError] = msgspec.field(default_factory=list)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def exit_code(self) -> int:
        return 1 if self.count("error") or self.errors else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tools": list(self.tools),
            "findings": [f.to_json() for f in self.findings],
            "errors": [e.to_json() for e in self.errors],
            "summary": {
                "errors": self.count("error"),
                "warnings": self.count("warning"),
                "hints": self.count("hint"),
                "check_errors": len(self.errors),
            },
        }


