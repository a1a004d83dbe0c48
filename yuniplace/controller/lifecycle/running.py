"""The phase of a gang that runs: late members swap into what is left of its room (seats.py), and its
losses are watched (gang/losses.py). A started gang below its minimum for LOSS_GRACE_S is reported
degraded once (member lost), and its loss rule (policies/onloss.py) says what follows; back at its
minimum, that is said once too. The grace lets what ends a gang on purpose (a Spark driver deleting its
executors before it completes) or mends it at once (a Job replacing a pod) pass unreported; the record
keeps since when, and whether it was said."""

from __future__ import annotations

from yuniplace.controller.lifecycle.context import LOSS_GRACE_S, Context, Step
from yuniplace.controller.lifecycle.policies.onloss import degraded, rule_of
from yuniplace.controller.lifecycle.seats import swap
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason


def run(ctx: Context) -> Step | None:
    """Late members swap in, unless the gang is about to be restarted whole (a replacement would only
    join members about to be evicted, and mend for a moment a job that hangs); then its losses."""
    if not rule_of(ctx).holds_back(ctx):
        step = swap(ctx)
        if step is not None:
            return step
    return watch(ctx)


def originator_lost(ctx: Context) -> bool:
    """Its originator is a member like the others (a Job's pod), lost as any would be, where its loss
    rule acts on a loss."""
    running = ctx.app.state == AppState.RUNNING and p.phase(ctx.originator) == "Failed"
    return running and rule_of(ctx).acts(ctx)


def originator_going(ctx: Context) -> bool:
    return ctx.app.state in (AppState.RESERVED, AppState.RUNNING) and p.is_deleting(ctx.originator)


def until_originator_gone(ctx: Context) -> Step | None:
    """An originator being deleted takes the application with it (its gang evicted whole, say): nothing
    more of it starts, and a pod its Job makes again meanwhile waits for the next attempt, which the
    next originator begins."""
    ctx.plan.requeue_after_s = LOSS_GRACE_S
    return None


def watch(ctx: Context) -> Step | None:
    """Say when a started gang has been below its minimum for LOSS_GRACE_S, act on it as its rule says,
    and say when it is back."""
    plan, record, losses = ctx.plan, ctx.app.record, ctx.losses
    if losses.unready_due is not None:  # look again when a member not Ready yet would count as lost
        ctx.requeue_within(max(0.0, losses.unready_due - ctx.now))
    if degraded(ctx, losses):
        since = record.degraded_since
        if since is None:
            plan.annotate[keys.DEGRADED_SINCE] = p.format_time(ctx.now)
            ctx.requeue_within(LOSS_GRACE_S)
            return None
        if ctx.now < since + LOSS_GRACE_S:
            ctx.requeue_within(since + LOSS_GRACE_S - ctx.now)
            return None
        if not record.degraded_reported:
            plan.annotate[keys.DEGRADED_REPORTED] = "true"
            ctx.event(
                ctx.originator,
                Reason.GANG_DEGRADED,
                f"the gang is degraded: {losses.describe()}; {rule_of(ctx).says(ctx)}",
            )
            return Step(Trigger.MEMBER_LOST)
        return rule_of(ctx).act(ctx, since)
    if record.degraded_since is not None:
        plan.annotate[keys.DEGRADED_SINCE] = None
        plan.annotate[keys.DEGRADED_REPORTED] = None
        if record.degraded_reported:
            done = f", {losses.done} done" if losses.done else ""
            ctx.event(
                ctx.originator,
                Reason.GANG_RECOVERED,
                f"back at its minimum after {ctx.now - record.degraded_since:.0f}s degraded: {losses.up} of "
                f"{losses.minimum} members up{done}",
            )
    return None
