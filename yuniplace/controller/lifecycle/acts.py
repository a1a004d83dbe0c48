"""What more than one phase does to a gang: give its reservation back to try again after a backoff, turn
it away by its style, follow the rest of its gang group when one gave up, and give back what the API
refused. Each returns the step that follows (None: nothing happened), for the dispatcher to carry out."""

from __future__ import annotations

from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import TERMINAL, AppState
from yuniplace.gang.taskgroups import Style
from yuniplace.gang.topology import Domains
from yuniplace.runtime.events import Reason

MAX_STRICT_BACKOFF_S = 300.0


def give_back(ctx: Context, reason: Reason, why: str, *, restart_clock: bool = False) -> Step:
    """Give a partial reservation back at once and try again after a backoff: in Strict mode when a
    placeholder cannot be placed (the gang will not fit now), whenever the API refuses to create
    placeholders (a namespace quota, say), when its queue's lender reclaims the room, and when it times
    out under the Retry rule. The room it held is then free for others. Strict and refused attempts
    share one timeout, counted from the first; `restart_clock` gives the next attempt a whole timeout
    of its own (else it would time out again at once)."""
    plan, record = ctx.plan, ctx.app.record
    attempts = record.attempts + 1
    backoff = min(MAX_STRICT_BACKOFF_S, ctx.settings.strict_backoff_s * 2 ** (attempts - 1))
    plan.create.clear()
    ctx.delete_placeholders()
    plan.annotate[keys.ATTEMPTS] = str(attempts)
    plan.annotate[keys.RETRY_AFTER] = p.format_time(ctx.now + backoff)
    if ctx.domains or keys.TOPOLOGY_DOMAIN in plan.annotate:
        # The domains were the reservation's: the next attempt is given its own.
        plan.annotate[keys.TOPOLOGY_DOMAIN] = None
        ctx.domains = Domains()
    if record.lender is not None or plan.annotate.get(keys.BORROWED_FROM):
        plan.annotate[keys.BORROWED_FROM] = None  # the next attempt borrows, or not, afresh
    if restart_clock:
        for key, value in (
            (keys.RESERVATION_STARTED, record.reservation_started),
            (keys.FIRST_ALLOCATED, record.first_allocated),
            (keys.QUEUED_SINCE, record.queued_since),
        ):
            if value is not None:
                plan.annotate[key] = None
    ctx.event(ctx.originator, reason, f"{why}; trying again in {backoff:.0f}s (attempt {attempts})")
    plan.requeue_after_s = backoff
    return Step(Trigger.GAVE_BACK)


def reject(ctx: Context, reason: Reason, message: str) -> Step | None:
    """The application cannot be a gang (its annotations cannot be read, or admission refuses it):
    Hard style fails it, Soft style schedules its pods normally; announced once, as it happens."""
    current = ctx.app.state
    if current in TERMINAL or current == AppState.RESUMING:
        ctx.release_everything(failure=(reason, message) if current == AppState.FAILED else None)
        return None
    hard = ctx.app.style == Style.HARD
    outcome = "failing the application (Hard style)" if hard else "scheduling its pods normally (Soft style)"
    ctx.event(ctx.originator, reason, f"{message}; {outcome}")
    ctx.release_everything(failure=(reason, message) if hard else None)
    return Step(Trigger.FAILED if hard else Trigger.FELL_BACK)


def follow_peers(ctx: Context) -> Step | None:
    """A gang group is reserved all-or-nothing: an application follows any other of its group that
    failed or fell back, as if it had timed out itself."""
    gave_up = ctx.peers_that_gave_up()
    if not gave_up:
        return None
    return Step(Trigger.TIMED_OUT, f"gang group application(s) {', '.join(gave_up)} could not be reserved")


def refused(ctx: Context) -> Step | None:
    """The API refused to create its placeholders (a namespace quota, say): the partial reservation is
    given back at once, so its room is free for others, unless its time is up already."""
    refusal = ctx.around.refusal
    if ctx.app.state != AppState.RESERVING or refusal is None:
        return None
    deadline = ctx.app.reservation_deadline()
    if deadline is not None and ctx.now >= deadline:
        return Step(Trigger.TIMED_OUT, f"its placeholders were refused ({refusal})")
    created = len(ctx.app.live_placeholders())
    return give_back(
        ctx,
        Reason.PLACEHOLDERS_REFUSED,
        f"the API refused to create its placeholders: {refusal}; releasing the reservation "
        f"({created}/{ctx.spec.min_members} created)",
    )
