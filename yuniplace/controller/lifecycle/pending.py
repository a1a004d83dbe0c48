"""The phase of a gang that has not begun to reserve (Pending, or Reserving with no reservation begun on
its record): it waits out a retry's backoff or admission, then begins to reserve (admitted), or, where
admission seated every member, starts directly with no placeholder at all (seated). A native gang its
queue does not hold is left to kube-scheduler."""

from __future__ import annotations

from yuniplace.admission.tickets import Faulted, Granted, LeftToKubeScheduler, Refused, Undecided, Waiting
from yuniplace.controller import faults
from yuniplace.controller.lifecycle.acts import follow_peers, refused, reject
from yuniplace.controller.lifecycle.context import UNGROUPED, Context, Step
from yuniplace.controller.lifecycle.policies.onloss import MAX_RESTART_BACKOFF_S
from yuniplace.controller.lifecycle.policies.timeout import rule_of
from yuniplace.controller.lifecycle.seats import fits_group
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.controller.plan import Swap
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason


def not_begun(ctx: Context) -> bool:
    state, record = ctx.app.state, ctx.app.record
    return state == AppState.PENDING or (state == AppState.RESERVING and record.reservation_started is None)


def past_restart_limit(ctx: Context) -> bool:
    """A new attempt of a gang that failed past its restart limit (its owner made its pods again)."""
    return ctx.around.restarts is not None and ctx.around.restarts.failed


def fail_past_restart_limit(ctx: Context) -> Step | None:
    """Each pod of a gang failed past its restart limit fails at once, as Hard style fails a gang, so
    its owner sees them fail."""
    history = ctx.around.restarts
    assert history is not None
    ctx.release_everything(
        failure=(
            Reason.APPLICATION_FAILED,
            f"application {ctx.app.key.app_id} failed after {history.said()}, its limit ({keys.RESTART_LIMIT})",
        )
    )
    return None if ctx.plan.state == AppState.FAILED else Step(Trigger.FAILED)


def begin(ctx: Context) -> Step | None:
    """Wait out a retry backoff or admission, else begin reserving (or, where admission gave its
    members seats, start them directly)."""
    app, plan, ticket, record = ctx.app, ctx.plan, ctx.around.ticket, ctx.app.record
    step = follow_peers(ctx) or refused(ctx)
    if step is not None:
        return step
    if isinstance(ticket, Faulted):
        _held_by_fault(ctx, ticket)
        return None
    deadline = app.pending_deadline()
    if deadline is not None and ctx.now >= deadline:
        return Step(Trigger.TIMED_OUT, _why_out_of_time(ctx, deadline))
    if record.retry_after is not None and ctx.now < record.retry_after:
        plan.requeue_after_s = record.retry_after - ctx.now
        return None
    if _backs_off(ctx):
        return None
    if isinstance(ticket, Undecided):  # admission's next cycle decides, and wakes it
        if deadline is not None:
            plan.requeue_after_s = max(0.0, deadline - ctx.now)
        return None
    if isinstance(ticket, Refused):
        return reject(ctx, ticket.reason, ticket.message)
    if ctx.spec.native and (ticket is None or isinstance(ticket, LeftToKubeScheduler)):
        _leave_to_kube_scheduler(ctx, ticket.message if ticket is not None else "admission is off")
        return None
    if isinstance(ticket, Waiting):
        _wait(ctx, ticket, deadline)
        return None
    return _admitted(ctx)


def backoff_after_timeouts(ctx: Context, timeouts: int) -> float:
    """How long a gang's owner's next attempt waits after `timeouts` of its attempts failed out of time."""
    return min(MAX_RESTART_BACKOFF_S, ctx.settings.restart_backoff_s * 2.0 ** (timeouts - 1))


def _backs_off(ctx: Context) -> bool:
    """A new attempt its owner made after the last one failed out of time (Hard style: KubeRay makes a
    Ray cluster's failed pods again) waits a backoff before it reserves, as a container's restarts do;
    its record keeps the wait, so it is said once and outlives the controller."""
    history, record = ctx.around.restarts, ctx.app.record
    if history is None or not history.timeouts or record.retry_after is not None:
        return False
    until = history.timed_out_at + backoff_after_timeouts(ctx, history.timeouts)
    if ctx.now >= until:
        return False
    owner = p.controller_of(ctx.originator) or {}
    limit = ctx.spec.on_loss.restart_limit
    ctx.plan.annotate[keys.RETRY_AFTER] = p.format_time(until)
    ctx.plan.annotate[keys.ATTEMPTS] = str(history.timeouts)
    ctx.event(
        ctx.originator,
        Reason.GANG_BACKING_OFF,
        f"{owner.get('kind')} {owner.get('name')} made the gang again after {history.timeouts} of its attempts ran out "
        f"of time (Hard style): attempt {history.timeouts + 1} of at most {limit + 1} reserves in "
        f"{until - ctx.now:.0f}s",
    )
    ctx.plan.requeue_after_s = until - ctx.now
    return True


def _why_out_of_time(ctx: Context, deadline: float) -> str:
    record, timeout_s, ticket = ctx.app.record, ctx.spec.policy.timeout_s, ctx.around.ticket
    queued = record.queued_since + timeout_s if record.queued_since is not None else None
    if record.retry_after is not None and (queued is None or queued > deadline):
        return f"no complete reservation after {record.attempts} attempt(s) in {timeout_s}s"
    summary = f"not admitted within {timeout_s}s of becoming first in its queue"
    if isinstance(ticket, Waiting):
        summary += f" ({ticket.message})"
    return summary


def _admitted(ctx: Context) -> Step:
    """Admission lets it reserve: its record says where, and its placeholders are made (by the
    reserving phase), or its members start on admission's seats."""
    plan, spec, ticket, record, originator = ctx.plan, ctx.spec, ctx.around.ticket, ctx.app.record, ctx.originator
    if record.queued_since is not None:
        plan.annotate[keys.QUEUED_SINCE] = None
    if isinstance(ticket, Granted) and ticket.warning:
        ctx.event(originator, Reason.GANG_EXCEEDS_CAPACITY, ticket.warning)
    if isinstance(ticket, Granted) and ticket.domains:
        ctx.domains = plan.placed_in = ticket.domains
        plan.annotate[keys.TOPOLOGY_DOMAIN] = ticket.domains.text()
    where = f" in {ctx.domains}" if ctx.domains else ""
    if isinstance(ticket, Granted) and ticket.lender:
        plan.annotate[keys.BORROWED_FROM] = ticket.lender
        where += f", on its queue's nodes and the idle ones of {ticket.lender} it borrows"
    elif record.lender is not None:
        plan.annotate[keys.BORROWED_FROM] = None  # the last attempt's
    if isinstance(ticket, Granted) and ticket.grows:
        plan.annotate[keys.SCALE_UP] = ",".join(ticket.grows)
        pools = ", ".join(ticket.grows)
        where += f"; NodePool {pools} is to make the nodes for them (its placeholders are what it makes them for)"
    if record.retry_after is not None:
        if record.reservation_started is None:  # the attempt after a timeout has a clock of its own
            plan.annotate[keys.RESERVATION_STARTED] = p.format_time(ctx.now)
        if spec.native and _lifts_at_once(ctx):
            _lift_native_gates(ctx, f"{where} (attempt {record.attempts + 1})")
            return Step(Trigger.SEATED)
        ctx.event(
            originator,
            Reason.CREATING_PLACEHOLDERS,
            f"attempt {record.attempts + 1}: creating {spec.min_members} placeholder pods again{where}"
            + _held_for_members_to_come(ctx),
        )
        return Step(Trigger.ADMITTED_AGAIN)
    plan.annotate[keys.RESERVATION_STARTED] = p.format_time(ctx.now)
    groups = ", ".join(f"{g.name}×{g.min_member}" for g in spec.groups)
    ctx.event(
        originator,
        Reason.TASK_GROUP_MATCH,
        f"application {ctx.app.key.app_id}: gang of {spec.min_members} ({groups}), "
        f"timeout {spec.policy.timeout_s}s, {rule_of(spec).says(spec)}, {spec.mode.value} mode",
    )
    # Seats are for every member admission saw; one gone since (deleted, say) leaves the gang to
    # reserve with placeholders, which wait for it to come back rather than start the rest.
    members = ctx.members
    if spec.native and _lifts_at_once(ctx):
        _lift_native_gates(ctx, where)
        _warn(ctx)
        return Step(Trigger.SEATED)
    seated = (
        not spec.native
        and isinstance(ticket, Granted)
        and bool(ticket.seats)
        and all(len(members[group.name]) >= group.min_member for group in spec.groups)
    )
    if seated:
        assert isinstance(ticket, Granted)
        _start_directly(ctx, ticket, where)
    else:
        ctx.event(
            originator,
            Reason.CREATING_PLACEHOLDERS,
            f"creating {spec.min_members} placeholder pods{where}" + _held_for_members_to_come(ctx),
        )
    _warn(ctx)
    return Step(Trigger.SEATED if seated else Trigger.ADMITTED)


def _warn(ctx: Context) -> None:
    spec = ctx.spec
    for warning in spec.warnings:
        ctx.event(ctx.originator, Reason.TASK_GROUP_WARNING, warning)
    if ctx.around.ticket is None and (spec.topology or any(group.topology for group in spec.groups)):
        ctx.event(
            ctx.originator,
            Reason.TASK_GROUP_WARNING,
            "its topology domains are ignored: admission, which chooses them, is off (--admission=off)",
        )


def _start_directly(ctx: Context, ticket: Granted, where: str) -> None:
    """Every member exists and admission found room for the whole gang now, so no placeholder would
    reserve anything admission has not: each member is steered to the node admission chose for it
    and released, all in one pass (each seat holds its group's largest member). Seats lie in the
    topology domains admission chose (and on the nodes of the pool it borrows, if it does), and each
    member is kept in a required domain as it is released (see dispatch.finish). `where` says where."""
    plan, spec, members = ctx.plan, ctx.spec, ctx.members
    plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(ctx.now)
    nodes: set[str] = set()
    for group in spec.groups:
        seats = list(ticket.seats_of(group.name))
        nodes.update(seats)
        for member in members[group.name]:
            if seats and fits_group(ctx, member, group.name, group.min_resource):
                plan.swaps.append(Swap(member, None, seats.pop(0), group.name, direct=True))
            else:
                plan.ungate.append(member)
    plan.ungate += members[UNGROUPED]
    ctx.event(
        ctx.originator,
        Reason.GANG_STARTING,
        f"all {spec.min_members} pods exist and the whole gang fits now: starting them on {len(nodes)} node(s) "
        f"admission chose{where}, without placeholders",
    )


def _lifts_at_once(ctx: Context) -> bool:
    """Whether a native gang's gates come off at its admission with nothing to hold its room: its whole
    minimum exists, or an earlier attempt let its members go already (their room cannot be held for
    them, and placeholders would stand in their way). Else kube-scheduler's gang plugin would keep the
    members it has in PreEnqueue until the last one comes, holding no room meanwhile (neither assumed
    nor nominated), and any pod outside the gang could take that room first and starve a gang its queue
    admitted."""
    return len(ctx.app.live_members()) >= ctx.spec.min_members or not p.is_held(ctx.originator)


def _held_for_members_to_come(ctx: Context) -> str:
    """What a native gang's placeholders are for: the room of its members yet to come, and of those
    there, which kube-scheduler's gang plugin would hold without room until the rest exist."""
    if not ctx.spec.native:
        return ""
    present = len(ctx.app.live_members())
    return (
        f" ({present} of its {ctx.spec.min_members} pods exist: they hold the whole gang's room until the rest "
        f"come, as {ctx.spec.starts_when_all_exist} holds none for pods it waits with)"
    )


def _lift_native_gates(ctx: Context, where: str) -> None:
    """A native gang its queue admits with its whole minimum there: every gate comes off at once, and
    kube-scheduler's gang plugin binds them all or none, in the cycle it sees them in. No placeholder,
    no seat and no write but the gates: the plugin alone places the group, its queue keeps the room of
    the whole minimum. Its timeout runs from now."""
    plan, spec = ctx.plan, ctx.spec
    plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(ctx.now)
    plan.ungate += ctx.app.gated_members()
    ctx.event(
        ctx.originator,
        Reason.GANG_STARTING,
        f"its queue admits the whole gang{where} (all {spec.min_members} pods exist): lifting their gates; "
        f"{spec.starts_when_all_exist} binds them all or none",
    )


def _leave_to_kube_scheduler(ctx: Context, why: str) -> None:
    """A native gang its queue does not hold: its gates come off with no record written, so from
    then on it is kube-scheduler's alone, as one never gated is, and yuniplace only counts it."""
    ctx.plan.ungate += ctx.app.gated_members()
    ctx.event(
        ctx.originator,
        Reason.NATIVE_GANG,
        f"native gang {ctx.app.key.app_id}: {why}; its gates come off and {ctx.spec.starts_when_all_exist} alone "
        "binds it all or nothing",
    )


def _held_by_fault(ctx: Context, ticket: Faulted) -> None:
    """Admission failed on the gang through a fault of yuniplace's own, not of its task groups: it is
    held as it is (gated; nothing failed or released, and no timeout runs out on it meanwhile), said
    once, and looked at again when admission tries again (its next cycle wakes it then)."""
    retry_in_s = max(0.0, ticket.retry_at - ctx.now)
    if ticket.announce:
        ctx.event(ctx.originator, Reason.INTERNAL_ERROR, faults.note(ticket.stage, ticket.error, retry_in_s))
    if retry_in_s > 0:
        ctx.plan.requeue_after_s = retry_in_s


def _wait(ctx: Context, ticket: Waiting, deadline: float | None) -> None:
    """Admission holds it back: say why, when that is news, and keep its queue clock."""
    plan, record = ctx.plan, ctx.app.record
    if ticket.announce:
        ctx.event(ctx.originator, ticket.reason, ticket.message)
    if not ticket.times_out:
        if record.queued_since is not None:
            plan.annotate[keys.QUEUED_SINCE] = None  # the clock starts again once it is first
    elif record.queued_since is None:
        plan.annotate[keys.QUEUED_SINCE] = p.format_time(ctx.now)
        deadline = min(ctx.now + ctx.spec.policy.timeout_s, deadline or float("inf"))
    if deadline is not None:
        plan.requeue_after_s = max(0.0, deadline - ctx.now)
