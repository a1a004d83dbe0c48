"""The states of an application, as its record on the originator keeps them (`yuniplace.io/state`):
their values are what every version of yuniplace writes and reads. What moves a gang from one to
another is the lifecycle's transitions table (yuniplace/controller/lifecycle/table.py)."""

from __future__ import annotations

import enum


class AppState(enum.Enum):
    PENDING = "Pending"  # seen, nothing reserved yet
    RESERVING = "Reserving"  # placeholders created, waiting for kube-scheduler to place them all
    RESERVED = "Reserved"  # every placeholder placed; real pods are being swapped in
    RUNNING = "Running"  # the originator runs; late members still swap into what is left
    RESUMING = "Resuming"  # Soft fallback: placeholders gone, real pods scheduled normally
    FAILED = "Failed"  # Hard timeout, invalid input under Hard style, or a Koordinator gang out of time
    COMPLETED = "Completed"  # the originator finished or went away; nothing of ours is left

    @classmethod
    def parse(cls, text: str | None) -> AppState:
        return next((s for s in cls if s.value == text), cls.PENDING)


# Nothing leaves these (the transitions: yuniplace/controller/lifecycle/table.py).
TERMINAL = frozenset({AppState.COMPLETED, AppState.FAILED})
