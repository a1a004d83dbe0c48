"""YuniKorn's configuration fields decoded as its Go decoder decodes them (strict: an unknown key is an
error, keys are matched exactly and are lower case), each mistake reported with the queue and field
instead of stopping at the first, so an administrator sees them all at once.

Values arrive as rawyaml gives them: dicts, lists, text and None. None is Go's zero value (an empty
string, no entries, false).
"""

from __future__ import annotations

from typing import Any

from yuniplace.queues.problems import Findings

# Go's yaml.v3 decodes these into a bool: YAML 1.2's true and false, and, into a typed bool, YAML 1.1's words.
_TRUE = ("true", "True", "TRUE", "y", "Y", "yes", "Yes", "YES", "on", "On", "ON")
_FALSE = ("false", "False", "FALSE", "n", "N", "no", "No", "NO", "off", "Off", "OFF")
UINT64_MAX = 2**64 - 1


class Decoder:
    """Decodes values of one partition; `scope` prefixes where problems are, for partitions other than
    the one in use."""

    def __init__(self, findings: Findings, scope: str = "", source: str = "") -> None:
        self.findings = findings
        self.scope = scope
        self.source = source  # instead of the findings' own

    def where(self, queue: str) -> str:
        return " ".join(part for part in (self.scope, queue) if part)

    def error(self, queue: str, field: str, value: Any, expected: str) -> None:
        self.findings.error(self.where(queue), field, value, expected, source=self.source)

    def warn(self, queue: str, field: str, value: Any, expected: str) -> None:
        self.findings.warn(self.where(queue), field, value, expected, source=self.source)

    def fields(self, value: Any, queue: str, field: str, known: tuple[str, ...]) -> dict[str, Any]:
        """A mapping's entries under the keys YuniKorn knows; others are errors. Not a mapping: {}."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(queue, field, value, f"must be a mapping (keys: {', '.join(known)})")
            return {}
        entries: dict[str, Any] = {}
        for key, entry in value.items():
            if key in known:
                entries[key] = entry
                continue
            hint = (
                f" (YuniKorn's keys are lower case: {key.lower()})"
                if isinstance(key, str) and key.lower() in known
                else ""
            )
            self.error(
                queue,
                _join(field, str(key)),
                key,
                f"is not a field YuniKorn knows here{hint}; known: {', '.join(known)}",
            )
        return entries

    def text(self, value: Any, queue: str, field: str) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        self.error(queue, field, value, "must be a single value, not a list or a mapping")
        return ""

    def flag(self, value: Any, queue: str, field: str, default: bool = False) -> bool:
        if value is None:
            return default
        if isinstance(value, str) and value in _TRUE:
            return True
        if isinstance(value, str) and value in _FALSE:
            return False
        self.error(queue, field, value, "must be true or false")
        return default

    def count(self, value: Any, queue: str, field: str) -> int:
        """A non-negative whole number (Go's uint64); 0 when absent."""
        if value is None:
            return 0
        text = value.strip() if isinstance(value, str) else None
        if text is not None and text.isascii() and text.isdigit() and int(text) <= UINT64_MAX:
            return int(text)
        self.error(queue, field, value, "must be a whole number, 0 or more")
        return 0

    def items(self, value: Any, queue: str, field: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, list):
            return value
        self.error(queue, field, value, "must be a list")
        return []

    def strings(self, value: Any, queue: str, field: str) -> list[str]:
        entries = self.items(value, queue, field)
        if all(isinstance(entry, str) for entry in entries):
            return entries
        self.error(queue, field, value, "must be a list of names")
        return []

    def string_map(self, value: Any, queue: str, field: str) -> dict[str, str]:
        """Go's map[string]string: any single value is kept as its text."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(queue, field, value, "must be a mapping of names to values")
            return {}
        result: dict[str, str] = {}
        for key, entry in value.items():
            if key is None or (entry is not None and not isinstance(entry, str)):
                self.error(queue, _join(field, str(key)), entry, "must be a single value, not a list or a mapping")
                continue
            result[key] = entry or ""
        return result


def _join(field: str, key: str) -> str:
    return f"{field}.{key}" if field else key
