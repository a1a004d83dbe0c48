"""A gang's life on one page: what can happen to it (triggers) and, for each state it is in, where each
takes it and what that is counted as. `move` is the only code that sets a gang's state.

The phases find out what happened and return it as a trigger; the dispatcher (dispatch.py) carries it
through this table, which says whether it may happen there. A move not in the table is a fault of the
controller, never of the input: it raises. A trigger whose row keeps the state records what happened
(and what it is counted as) all the same. docs/reference/transitions.md is made from this table.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from yuniplace.controller.plan import Outcome, Plan
from yuniplace.gang.state import AppState

S = AppState


class Trigger(enum.Enum):
    """What happened to the gang, as the table and the state diagram name it, and what that means."""

    meaning: str

    def __new__(cls, label: str, meaning: str) -> Trigger:
        member = object.__new__(cls)
        member._value_ = label
        member.meaning = meaning
        return member

    ADMITTED = ("admitted", "admission lets it reserve: its placeholders are made")
    ADMITTED_AGAIN = ("admitted again", "the next attempt, after a reservation given back, makes them again")
    SEATED = ("seated", "admission seated every member: it starts directly, without placeholders")
    PLACED = ("placed", "every placeholder is placed: its members swap in")
    RESIZED = ("resized", "its placeholders no longer hold what its members ask: that is reserved first")
    STARTED = ("started", "its originator runs")
    SEEN_RUNNING = ("seen running", "its record went with its originator, and its members show it started")
    TIMED_OUT = ("timed out", "out of time: its timeout rule says what follows")
    GAVE_BACK = ("gave back", "its reservation is given back, to try again after a backoff")
    FELL_BACK = ("fell back", "its pods go to normal scheduling (Soft style)")
    FAILED = ("failed", "its pods fail (Hard style, or as the gang already did)")
    MARKED = ("marked timed out", "its pods are marked and never scheduled (Koordinator's rule)")
    RECLAIMED = ("reclaimed", "the queue that lent its room takes it back from a gang that started: evicted whole")
    MEMBER_LOST = ("member lost", "a started gang stayed below its minimum past the grace: reported degraded")
    RESTARTED = ("restarted", "evicted whole for its owner to make it again (on-member-lost: restart)")
    RELEASED = ("released", "evicted whole after its recovery timeout (on-member-lost: release)")
    RESTARTS_EXHAUSTED = ("restarts exhausted", "it lost a member past its restart limit")
    BOUND = ("bound", "kube-scheduler's gang plugin bound the minimum of a native gang left to it")
    UNBOUND = ("unbound", "fewer than the minimum of a native gang left to kube-scheduler are bound again")
    ATTEMPT_OVER = (
        "attempt over",
        "evicted whole while its originator, ended, stays (a Job keeps its failed pod): its record is cleared",
    )
    ENDED = ("ended", "its originator finished or went away, or nothing of it is left")


@dataclass(frozen=True)
class Move:
    to: AppState
    outcome: Outcome | None = None  # what the move is counted as (metrics)
    record_ends: bool = False  # the originator's record is cleared, not written (dispatch.finish)


T = Trigger
STARTING = (S.PENDING, S.RESERVING, S.RESERVED)
LIVE = (S.PENDING, S.RESERVING, S.RESERVED, S.RUNNING)


def _rows(
    trigger: Trigger,
    sources: Iterable[AppState],
    to: AppState | None,
    outcome: Outcome | None = None,
    *,
    record_ends: bool = False,
) -> dict[tuple[AppState, Trigger], Move]:
    """One trigger's row: from each source to `to` (None: it stays where it is)."""
    return {(source, trigger): Move(source if to is None else to, outcome, record_ends) for source in sources}


TRANSITIONS: Mapping[tuple[AppState, Trigger], Move] = {
    # Reserving. Admission is asked while Pending; a Reserving gang with no reservation begun is asked too.
    **_rows(T.ADMITTED, (S.PENDING, S.RESERVING), S.RESERVING, Outcome.RESERVING),
    **_rows(T.ADMITTED_AGAIN, (S.PENDING, S.RESERVING), S.RESERVING),
    **_rows(T.SEATED, (S.PENDING, S.RESERVING), S.RESERVED, Outcome.STARTED_DIRECTLY),
    **_rows(T.PLACED, (S.RESERVING,), S.RESERVED, Outcome.RESERVED),
    # Resized also from Pending: a gang taken up (its record gone) holding placeholders too small.
    **_rows(T.RESIZED, (S.PENDING, S.RESERVED), S.RESERVING),
    **_rows(T.STARTED, (S.RESERVED,), S.RUNNING),
    **_rows(T.SEEN_RUNNING, (S.PENDING,), S.RUNNING),
    # Out of time, or turned away: the gang's rule or style says which of these follows.
    **_rows(T.TIMED_OUT, STARTING, None, Outcome.TIMED_OUT),
    **_rows(T.GAVE_BACK, STARTING, S.PENDING),
    **_rows(T.FELL_BACK, LIVE, S.RESUMING),
    **_rows(T.FAILED, LIVE, S.FAILED),
    **_rows(T.MARKED, STARTING, S.FAILED),
    # A gang that started.
    **_rows(T.RECLAIMED, (S.RESERVING, S.RESERVED, S.RUNNING), None),
    **_rows(T.MEMBER_LOST, (S.RUNNING,), None, Outcome.DEGRADED),
    **_rows(T.RESTARTED, (S.RUNNING,), None, Outcome.RESTARTED),
    **_rows(T.RELEASED, (S.RUNNING,), None, Outcome.RELEASED),
    **_rows(T.RESTARTS_EXHAUSTED, (S.RUNNING,), S.FAILED, Outcome.RESTARTS_EXHAUSTED),
    # The next attempt, its owner's new pods, begins Pending with a record of its own.
    **_rows(T.ATTEMPT_OVER, (S.RUNNING,), S.PENDING, record_ends=True),
    # A native gang yuniplace leaves to kube-scheduler, as its pods show it (controller/observe.py).
    **_rows(T.BOUND, (S.PENDING,), S.RUNNING),
    **_rows(T.UNBOUND, (S.RUNNING,), S.PENDING),
    # The end: a gang that fell back completes once its originator does.
    **_rows(T.ENDED, (*LIVE, S.RESUMING), S.COMPLETED),
}


def move(plan: Plan, trigger: Trigger) -> Move:
    """Carry the plan's gang through `trigger`: its new state, and the outcome counted."""
    found = TRANSITIONS.get((plan.state, trigger))
    if found is None:
        raise AssertionError(f"{plan.key}: {trigger.value} is not in the table for {plan.state.value}")
    plan.state = found.to
    plan.record_ends = found.record_ends
    if found.outcome is not None:
        plan.outcomes.append(found.outcome)
    return found


def moves() -> dict[tuple[AppState, AppState], tuple[Trigger, ...]]:
    """Every move between two different states, with the triggers that make it, in the table's order."""
    found: dict[tuple[AppState, AppState], tuple[Trigger, ...]] = {}
    for (source, trigger), target in TRANSITIONS.items():
        if target.to != source:
            found[(source, target.to)] = (*found.get((source, target.to), ()), trigger)
    return found


def reachable(start: AppState = S.PENDING) -> set[AppState]:
    seen, frontier = {start}, [start]
    while frontier:
        state = frontier.pop()
        for (source, _), target in TRANSITIONS.items():
            if source == state and target.to not in seen:
                seen.add(target.to)
                frontier.append(target.to)
    return seen
