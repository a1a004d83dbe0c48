"""Seating a gang's members in the room held for them: each gated member takes a placed placeholder of
its group (a swap), or, where admission seated the gang, the node it chose. The phases that seat
members (a reserved gang, a running one taking late members, a gang taken up where it stands) share
these rules; what they find out of the ordinary (room too small, members missing past the timeout)
they return as a step.

kube-scheduler counts a nominated pod as taking room on its node for every other pod of equal
priority, itself excepted. While a member swapped earlier is still waiting to be bound on node N,
nominating another member to N (whose placeholder is still there) would make N look full to the
first one, and it would move elsewhere. So a node with a member in flight takes no new swap until
that member is bound: the member is kept for the next reconcile, which its binding triggers. Members
of other applications count too (`nodes_in_flight`): two gangs swapping onto one node make each
other's members move just the same.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from yuniplace.controller.lifecycle.acts import give_back
from yuniplace.controller.lifecycle.context import IN_FLIGHT_RECHECK_S, UNGROUPED, Context, Step
from yuniplace.controller.lifecycle.holders import (
    awaiting_claims,
    group_placeholders,
    holder_of,
    keep_holders,
    new_placeholder,
)
from yuniplace.controller.lifecycle.policies.timeout import rule_of
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.controller.plan import Swap
from yuniplace.devices.claims import claim_names, uses_devices
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.placeholders import claims_held_for, placeholder_size
from yuniplace.gang.resources import format_quantity, pod_requests, quantities, said_short, shortfalls
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import TaskGroup
from yuniplace.runtime.events import NORMAL, Reason

Pod = p.Pod


def fits_group(
    ctx: Context, member: Pod, group: str, min_resource: Mapping[str, Any], *, releasing: bool = False
) -> bool:
    """Whether the member fits in the room its task group reserves for each pod; if not, it is
    told why (the commonest gang mistake: a Spark executor's memory overhead left out of
    minResource), and is scheduled normally."""
    short = shortfalls(pod_requests(member.get("spec", {})), quantities(min_resource))
    if not short:
        return True
    released = "releasing one of its placeholders and " if releasing else ""
    ctx.event(
        member,
        Reason.TASK_GROUP_RESOURCE_MISMATCH,
        f"requests more than task group {group}'s minResource ({said_short(short)}); {released}scheduling this pod "
        "normally",
    )
    return False


def members_missing(ctx: Context) -> int:
    """How many members must still be created before any may start, where the gang's scheduler starts
    a gang only once its minimum of pods exists (GangSpec.starts_when_all_exist): 0 when none is
    missing, a member already started, or the rule is not the gang's; and once its reservation has
    timed out under a rule that lets members start (YuniKorn's styles; under its own scheduler's rule
    the gang gives its reservation back instead, see swap)."""
    app, spec = ctx.app, ctx.spec
    if spec.starts_when_all_exist is None or ctx.started() or any(p.node_name(m) for m in app.members):
        return 0
    deadline = app.reservation_deadline()
    # (A native gang's members never start in part: kube-scheduler's gang plugin waits for them all.)
    lets_start = rule_of(spec).lets_members_start and not spec.native
    if lets_start and deadline is not None and ctx.now >= deadline:
        return 0
    return max(0, spec.min_members - len(app.live_members()))


def unreserved(ctx: Context, live: list[Pod]) -> list[str]:
    """The task groups of a reserved gang that hold fewer placeholders of their size than members to
    seat: members came, since it was reserved, larger than its placeholders or in shapes they were not
    made for (members yet to come of a gang grouped by shapes were reserved as large as the largest
    seen then), or a placeholder went."""
    app, groups = ctx.app, ctx.spec.groups
    sizes = {g.name: placeholder_size(g) for g in groups}
    made = collections.Counter(
        group
        for ph in live
        if (group := app.group_of(ph)) in sizes and not shortfalls(sizes[group], app.requests_of(ph))
    )
    # A member whose pod uses DRA claims starts only from the placeholder holding them.
    unheld = collections.Counter(
        group
        for m in awaiting_claims(app.gated_members())
        if holder_of(m, live) is None and (group := app.group_of(m)) in sizes
    )
    # A swap interrupted after its placeholder went holds its room by the member's nomination.
    held = {p.name(ph) for ph in live}
    made.update(
        group
        for m in app.gated_members()
        if p.nominated_node(m)
        and p.annotations_of(m).get(keys.SWAP_PLACEHOLDER) not in (None, *held)
        and (group := app.group_of(m)) is not None
    )
    return [f"{g.name} {made[g.name]}/{g.min_member}" for g in groups if made[g.name] < g.min_member] + [
        f"{name}: the DRA claims of {count} member(s)" for name, count in sorted(unheld.items())
    ]


def swap(ctx: Context) -> Step | None:
    """Match gated members to placed placeholders of their group, one each; members beyond the
    reserved count run normally. A member already nominated to a node (a swap interrupted by a
    restart) keeps that node and the placeholder there. Where the gang starts only once all its
    members exist, none starts before (a new member's creation reconciles the application again);
    out of time, it gives its reservation back."""
    app, plan = ctx.app, ctx.plan
    live = app.live_placeholders()
    missing = members_missing(ctx)
    deadline = app.reservation_deadline()
    # A native gang admitted whole had its gates lifted then (its originator among them); one whose
    # placeholders hold its room keeps them on until its members take the placeholders' places.
    held_by_placeholders = ctx.spec.native and p.is_held(ctx.originator)
    if ctx.spec.native and not live and not held_by_placeholders:
        return _native_admitted(ctx, missing, deadline)
    # A gang started directly (or holding nothing yet) has no placeholder to find too small or short. A
    # native gang still waiting for members makes a lost placeholder again at once (its node gone, say),
    # the last one too: its members are held gated until all exist, and their room is the placeholders'.
    rechecked = not missing or ctx.spec.native
    if (live or held_by_placeholders) and rechecked and not ctx.started() and (short := unreserved(ctx, live)):
        ctx.event(
            ctx.originator,
            Reason.CREATING_PLACEHOLDERS,
            f"its placeholders no longer hold what its members ask (task group {', '.join(short)} of their size): "
            "reserving that before any member starts",
        )
        return Step(Trigger.RESIZED)
    if missing and deadline is not None and ctx.now >= deadline:
        return _out_of_time(ctx, missing)
    claimed: set[str] = set()
    in_flight: list[set[str]] = []  # worked out only where a member is to be swapped in
    for group in [] if missing else ctx.spec.groups:
        _seat_group(ctx, group, live, claimed, in_flight)
    plan.ungate += ctx.members[UNGROUPED]  # scheduled normally, now that the gang is reserved
    started = p.node_name(ctx.originator) and plan.state == AppState.RESERVED
    _release_unused(ctx, [ph for ph in live if p.uid(ph) not in claimed])
    return Step(Trigger.STARTED) if started else None


def _native_admitted(ctx: Context, missing: int, deadline: float | None) -> Step | None:
    """A native gang admitted (its gates lifted at admission): a member that came since, gated by a
    webhook that did not know, goes too, for the gang plugin to hold with the rest; members still
    missing at its timeout follow its style."""
    if missing and deadline is not None and ctx.now >= deadline:
        return _out_of_time(ctx, missing)
    ctx.plan.ungate += ctx.app.gated_members()
    if missing and deadline is not None:
        ctx.requeue_within(max(0.0, deadline - ctx.now))
    started = p.node_name(ctx.originator) and ctx.plan.state == AppState.RESERVED
    return Step(Trigger.STARTED) if started else None


def _out_of_time(ctx: Context, missing: int) -> Step:
    spec = ctx.spec
    summary = (
        f"{missing} of its {spec.min_members} pods still do not exist after {spec.policy.timeout_s}s, and "
        f"{spec.starts_when_all_exist} starts a gang only once all exist"
    )
    if spec.native:
        return Step(Trigger.TIMED_OUT, summary)  # its style's rule: tried again later (Soft), or failed (Hard)
    return give_back(
        ctx, Reason.GANG_RESERVATION_RELEASED, f"{summary}: giving its reservation back", restart_clock=True
    )


def _seat_group(ctx: Context, group: TaskGroup, live: list[Pod], claimed: set[str], in_flight: list[set[str]]) -> None:
    """Seat the gated members of one task group: those resuming a swap first, then the rest, each in a
    placed placeholder of the group that no member is on its way to the node of."""
    app, plan = ctx.app, ctx.plan
    placed = [ph for ph in live if app.group_of(ph) == group.name and p.node_name(ph)]
    pending: list[Pod] = []
    given = ctx.around.seats_to_release
    for member in ctx.members[group.name]:
        # A gated member naming its placeholder is a swap interrupted by a restart: it resumes
        # with that placeholder (gone already if step 2 had run) and no other.
        taken = p.annotations_of(member).get(keys.SWAP_PLACEHOLDER)
        node = p.nominated_node(member)
        seat = p.annotations_of(member).get(keys.SEAT)
        if seat is not None and node == seat and not live:
            # Started directly (a gang that holds no placeholder), nominated to its seat and still gated:
            # held until its seats are seen to hold (controller/seatcheck.py), or interrupted by a
            # restart. It goes to its seat, as it was to. (A seat its pod was written with, never
            # nominated to, is not one yuniplace gave.)
            plan.swaps.append(Swap(member, None, seat, group.name, direct=True))
            continue
        if given is not None and not live and taken is None and node is None and p.uid(member) in given.seats:
            # Started directly by the last reconcile, which wrote the gang's record and left the members
            # for this one to release, once the pod watch has brought that record back.
            plan.swaps.append(Swap(member, None, given.seats[p.uid(member)], group.name, direct=True))
            plan.seats_given = given
            continue
        if taken is None or node is None:
            pending.append(member)
            continue
        resumed = next((ph for ph in placed if p.name(ph) == taken and p.uid(ph) not in claimed), None)
        if resumed is not None:
            claimed.add(p.uid(resumed))
        plan.swaps.append(Swap(member, resumed, node, group.name, claims=_held_claims(resumed)))
    # A placeholder holding a member's DRA claims is that member's alone: the others take the rest.
    holders = [ph for ph in placed if claims_held_for(ph) is not None and p.uid(ph) not in claimed]
    free = [ph for ph in placed if p.uid(ph) not in claimed and claims_held_for(ph) is None]
    if pending and free and not in_flight:
        in_flight.append(set(ctx.around.nodes_in_flight) | app.nodes_in_flight())
    busy = in_flight[0] if in_flight else set()
    # Placeholders on a node a member is on its way to wait until it lands there.
    ready = collections.deque(ph for ph in free if p.node_name(ph) not in busy)
    blocked = [ph for ph in free if p.node_name(ph) in busy]
    unheld = []
    for member in pending:
        if uses_devices(member):
            holder = holder_of(member, holders)
            if holder is None:
                unheld.append(member)  # a placeholder holding its claims comes first
            elif p.node_name(holder) in busy:
                plan.waits_for_nodes.add(str(p.node_name(holder)))
                plan.requeue_after_s = IN_FLIGHT_RECHECK_S
            elif fits_group(ctx, member, group.name, _formatted(app.requests_of(holder))):
                claimed.add(p.uid(holder))
                plan.swaps.append(
                    Swap(member, holder, str(p.node_name(holder)), group.name, claims=_held_claims(holder))
                )
            else:
                claimed.add(p.uid(holder))
                plan.delete.append(holder)
                plan.ungate.append(member)
            continue
        # A placeholder holds what its group asked when it was made: a member that came larger
        # since (of a gang already started) does not fit it.
        room = next(iter(ready or blocked), None)
        size = group.min_resource if room is None else _formatted(app.requests_of(room))
        if not fits_group(ctx, member, group.name, size, releasing=True):
            spare = blocked.pop() if blocked else ready.pop() if ready else None
            if spare is not None:
                claimed.add(p.uid(spare))
                plan.delete.append(spare)
            plan.ungate.append(member)
        elif ready:
            chosen = ready.popleft()
            claimed.add(p.uid(chosen))
            plan.swaps.append(Swap(member, chosen, str(p.node_name(chosen)), group.name))
        elif blocked:
            # Its binding requeues it (on those nodes); the recheck is a safety net.
            plan.waits_for_nodes.update(str(p.node_name(ph)) for ph in blocked)
            plan.requeue_after_s = IN_FLIGHT_RECHECK_S
        else:
            plan.ungate.append(member)
    if unheld:
        _hold_claims_of_late_members(ctx, group, live)


def _held_claims(placeholder: Pod | None) -> tuple[str, ...]:
    """The DRA claims the placeholder holds for its member, which the swap hands over."""
    if placeholder is None or claims_held_for(placeholder) is None:
        return ()
    return claim_names(placeholder) or ()


def _hold_claims_of_late_members(ctx: Context, group: TaskGroup, live: list[Pod]) -> None:
    """Members of a started gang that came after it started (a Spark driver's executors) and use DRA
    claims: a placeholder holding nothing makes way for one holding their claims, before they start."""
    holders = keep_holders(ctx, group.name, group_placeholders(ctx, group))
    ctx.plan.delete += [ph for ph in holders.delete if ph not in ctx.plan.delete and ph in live]
    ctx.plan.create += [
        new_placeholder(ctx, group, index, member) for index, member in holders.create.items() if member
    ]


def _release_unused(ctx: Context, unused: list[Pod]) -> None:
    """Placeholders no member took are released once its timeout has passed (unless a member waits for
    a node in flight), else looked at again then."""
    plan = ctx.plan
    if not unused or plan.requeue_after_s == IN_FLIGHT_RECHECK_S:
        return
    deadline = ctx.app.reservation_deadline()
    if deadline is not None and ctx.now >= deadline:
        plan.delete += unused
        ctx.event(
            ctx.originator,
            Reason.PLACEHOLDER_TIMEOUT,
            f"releasing {len(unused)} unused placeholders after {ctx.spec.policy.timeout_s}s",
            NORMAL,
        )
    elif deadline is not None:
        plan.requeue_after_s = max(0.0, deadline - ctx.now)


def _formatted(requests: Mapping[str, Any]) -> dict[str, str]:
    return {name: format_quantity(amount) for name, amount in requests.items()}
