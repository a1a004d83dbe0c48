"""Deciding what should happen to one application now, as a pure function of the application (as its
pods show it), the clock and what lies beyond it (admission's ticket, its gang group, nodes in flight)
to a Plan of API writes. It never calls the API, so every rule is unit-tested with plain dicts and a
fake clock; and since the gang's progress lives in the cluster (its pods, its placeholders, its record
on the originator), a restarted or newly elected controller makes the plan the last one would have.

The dispatcher picks the phase from named rows: first what happened to the gang whatever its state,
then where it stands. A phase returns what happened (a step); the table (table.py) carries the gang to
its next state, and what follows a trigger at once (FOLLOWS) runs in the same plan. Phases never call
one another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from yuniplace.admission.tickets import Ticket
from yuniplace.controller.lifecycle import ending, pending, reclaim, reserving, running, swapping, waiting
from yuniplace.controller.lifecycle.context import RESYNC_S, Context, Step, members_by_group
from yuniplace.controller.lifecycle.policies import onloss, timeout
from yuniplace.controller.lifecycle.table import Trigger, move
from yuniplace.controller.plan import Plan, Settings, Surroundings
from yuniplace.controller.podgroupstatus import pod_group_status
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.state import TERMINAL, AppState

Phase = Callable[[Context], Step | None]
FollowUp = Callable[[Context, Step], Step | None]
S = AppState


@dataclass(frozen=True)
class Row:
    name: str
    holds: Callable[[Context], bool]
    phase: Phase


def _in(*states: AppState) -> Callable[[Context], bool]:
    return lambda ctx: ctx.app.state in states


def _restarted_past_limit(ctx: Context) -> bool:
    return waiting.of_an_earlier_attempt(ctx) and pending.past_restart_limit(ctx)


def _new_attempt_past_limit(ctx: Context) -> bool:
    return ctx.app.state in (S.PENDING, S.RESERVING) and pending.past_restart_limit(ctx)


# What happened to it, whatever its state; the first row that holds picks the phase.
WHATEVER_ITS_STATE = (
    Row("waiting for its originator", lambda ctx: ctx.app.originator is None, waiting.without_originator),
    Row("its gang cannot be read", lambda ctx: ctx.app.problem is not None, ending.invalid),
    Row("timed out for good", ending.timed_out_for_good, ending.keep_timed_out),
    Row("left of an attempt past its restart limit", _restarted_past_limit, pending.fail_past_restart_limit),
    Row("left of an earlier attempt", waiting.of_an_earlier_attempt, waiting.next_attempt),
    Row("its originator, a member, lost", running.originator_lost, running.watch),
    Row("ended", ending.ended, ending.end),
    Row("its room reclaimed", reclaim.reclaimed, reclaim.give_room_back),
)

# Where it stands, once its members are sorted by task group.
BY_ITS_STATE = (
    Row("taken up where its members stand", lambda ctx: ctx.successor is not None, waiting.carry_on),
    Row("a new attempt past its restart limit", _new_attempt_past_limit, pending.fail_past_restart_limit),
    Row("pending", pending.not_begun, pending.begin),
    Row("reserving", _in(S.RESERVING), reserving.run),
    Row("its originator going", running.originator_going, running.until_originator_gone),
    Row("reserved", _in(S.RESERVED), swapping.run),
    Row("running", _in(S.RUNNING), running.run),
    Row("resuming", _in(S.RESUMING), ending.resume),
)


def _then(phase: Phase) -> FollowUp:
    return lambda ctx, _step: phase(ctx)


# What follows a trigger at once, in the same plan; after any other, the gang waits for its next look.
FOLLOWS: Mapping[Trigger, FollowUp] = {
    Trigger.ADMITTED: _then(reserving.place),
    Trigger.ADMITTED_AGAIN: _then(reserving.place),
    Trigger.RESIZED: _then(reserving.run),
    Trigger.PLACED: _then(swapping.run),
    Trigger.TIMED_OUT: timeout.expire,
    Trigger.MARKED: _then(ending.keep_timed_out),
    Trigger.MEMBER_LOST: onloss.act,
    Trigger.RESTARTED: onloss.end_attempt,
    Trigger.RELEASED: onloss.end_attempt,
}


def _first(rows: tuple[Row, ...], ctx: Context) -> Row | None:
    return next((row for row in rows if row.holds(ctx)), None)


def run(ctx: Context) -> Plan:
    """Pick the phase, and carry each step it returns through the table."""
    row = _first(WHATEVER_ITS_STATE, ctx)
    if row is None:
        ctx.members = members_by_group(ctx)
        row = _first(BY_ITS_STATE, ctx)
    assert row is not None, f"{ctx.app.key}: no phase for {ctx.app.state.value}"
    step = row.phase(ctx)
    while step is not None:
        move(ctx.plan, step.trigger)
        follow = FOLLOWS.get(step.trigger)
        step = None if follow is None else follow(ctx, step)
    return ctx.plan if ctx.app.originator is None else finish(ctx)


def finish(ctx: Context) -> Plan:
    """What every plan of an application with an originator ends with: the domains its members are kept
    in, its PodGroup's status, its new state on its record (or its record cleared, where its move says
    so), and when to look again."""
    plan, app = ctx.plan, ctx.app
    if ctx.domains and app.spec is not None:
        for member in [swap.member for swap in plan.swaps] + plan.ungate:
            group = p.task_group_name(member)
            pins = ctx.domains.of_member(group if group is not None and app.spec.group(group) else None)
            if pins:
                plan.pins[p.uid(member)] = pins
    if app.pod_group is not None:
        started = plan.annotate.get(keys.RESERVATION_STARTED)
        plan.pod_group_status = pod_group_status(app, plan.state, started, ctx.now)
    if plan.record_ends:
        plan.annotate[keys.STATE] = None
    elif plan.transition is not None:
        plan.annotate[keys.STATE] = plan.state.value
    if plan.requeue_after_s is None and plan.state not in TERMINAL:
        plan.requeue_after_s = RESYNC_S
    return plan


def make_plan(app: Application, now: float, settings: Settings, around: Surroundings) -> Plan:
    """The plan for one application at `now`."""
    return run(Context(app, now, settings, around))


def plan_application(
    app: Application,
    now: float,
    settings: Settings = Settings(),
    nodes_in_flight: frozenset[str] = frozenset(),
    ticket: Ticket | None = None,
    peers: Mapping[str, AppState | None] | None = None,
    refusal: str | None = None,
) -> Plan:
    return make_plan(app, now, settings, Surroundings(nodes_in_flight, ticket, peers or {}, refusal))
