"""The application state machine as data: states, the transitions allowed between them, and the
event that announces each one. The reconciler proposes a state; only listed transitions happen."""

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


S = AppState
TRANSITIONS: dict[AppState, frozenset[AppState]] = {
    # Pending -> Reserved or Running: placeholders found already placed (another originator began the
    # reservation), the originator possibly running already; or the gang started under an originator
    # since gone, whose successor carries no record.
    S.PENDING: frozenset({S.RESERVING, S.RESERVED, S.RUNNING, S.RESUMING, S.FAILED, S.COMPLETED}),
    # Reserving -> Running: the last placeholder is placed while the originator (not a gang member
    # itself, so never held) already runs.
    # Reserving -> Pending: Strict mode gave a partial reservation back and will try again (or a timeout
    # did, under a dialect's Retry rule).
    S.RESERVING: frozenset({S.PENDING, S.RESERVED, S.RUNNING, S.RESUMING, S.FAILED, S.COMPLETED}),
    # Reserved/Running -> Resuming/Failed: the task groups were edited into something invalid.
    # Reserved -> Pending: the queue that lent its room took it back before it ran, or (Retry rule) the
    # gang timed out waiting for the rest of its gang group or for its members to exist.
    # Reserved -> Reserving: a gang none of whose members started, whose placeholders no longer hold what
    # its members ask (they came larger, or in shapes not reserved for), reserves that first.
    S.RESERVED: frozenset({S.PENDING, S.RESERVING, S.RUNNING, S.RESUMING, S.FAILED, S.COMPLETED}),
    S.RUNNING: frozenset({S.RESUMING, S.FAILED, S.COMPLETED}),
    S.RESUMING: frozenset({S.COMPLETED}),
    # A failed application stays Failed, even once its pods (failed by us) are all terminal.
    S.FAILED: frozenset(),
    S.COMPLETED: frozenset(),
}

TERMINAL = frozenset({S.COMPLETED, S.FAILED})
# States in which placeholders may still exist and be used; outside them any placeholder is removed.
HOLDS_PLACEHOLDERS = frozenset({S.RESERVING, S.RESERVED, S.RUNNING})


def allowed(current: AppState, proposed: AppState) -> bool:
    return proposed == current or proposed in TRANSITIONS[current]
