"""What is wrong with a queue configuration, said the way yuniplace reports task-group problems: where
(the source, the queue, the field), the value found and what was expected, so the administrator can fix
the configuration without guessing. Every problem is collected before the configuration is refused, so
one round of fixes is enough.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from yuniplace.gang.taskgroups import MAX_ERRORS_SHOWN, MAX_SHOWN_VALUE


class _Omitted:
    """The value of a problem that is about the whole text (it cannot be read), so none is shown."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = _Omitted()


@dataclass(frozen=True)
class QueueProblem:
    """One thing wrong (or, as a warning, without effect) in a configuration source."""

    source: str  # "queues.yaml", "Volcano Queue ml"
    queue: str  # the queue's path ("root.team-a"), or "" for what lies outside any queue
    field: str  # "resources.max.vcore", "placementrules[0].value"
    value: Any
    expected: str

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.source, self.queue, self.field) if part)
        if self.value is OMITTED:
            return f"{where}: {self.expected}"
        shown = json.dumps(self.value)
        if len(shown) > MAX_SHOWN_VALUE:
            shown = shown[: MAX_SHOWN_VALUE - 1] + "…"
        return f"{where}: {shown} {self.expected}"


class InvalidQueues(ValueError):
    """The queue configuration cannot be used; `problems` lists every reason found. The caller keeps
    the configuration it had."""

    def __init__(self, problems: list[QueueProblem]) -> None:
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:MAX_ERRORS_SHOWN])
        more = len(problems) - MAX_ERRORS_SHOWN
        super().__init__(shown + (f"; and {more} more" if more > 0 else ""))


class Findings:
    """The errors and warnings of reading one source, collected as the reader goes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[QueueProblem] = []
        self.warnings: list[QueueProblem] = []

    def error(self, queue: str, field: str, value: Any, expected: str, *, source: str = "") -> None:
        self.errors.append(QueueProblem(source or self.source, queue, field, value, expected))

    def warn(self, queue: str, field: str, value: Any, expected: str, *, source: str = "") -> None:
        self.warnings.append(QueueProblem(source or self.source, queue, field, value, expected))

    def raise_errors(self) -> None:
        if self.errors:
            raise InvalidQueues(self.errors)

    def warning_lines(self) -> tuple[str, ...]:
        return tuple(str(w) for w in self.warnings)
