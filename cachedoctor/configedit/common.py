"""Shared pieces of the config editors: syntax errors with positions, line/column arithmetic."""

from __future__ import annotations


class ConfigSyntaxError(ValueError):
    """The file cannot be parsed; line and column are 1-based."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.message = message
        self.line = line
        self.column = column


def position(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of a character index."""
    index = max(0, min(index, len(text)))
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, column


def newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"
