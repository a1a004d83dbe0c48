"""The phase of a reserved gang: once every other application of its gang group is reserved too, its
members swap into its placeholders (seats.py); its originator bound, it runs (started). A gang group
swaps all-or-nothing: while it waits for the others it follows any of them that fails or falls back,
or its own timeout."""

from __future__ import annotations

from yuniplace.controller.lifecycle.acts import follow_peers
from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.seats import swap
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason

RESERVED_OR_BEYOND = (AppState.RESERVED, AppState.RUNNING, AppState.COMPLETED)


def run(ctx: Context) -> Step | None:
    step = follow_peers(ctx)
    if step is not None:
        return step
    waiting = sorted(ref for ref, state in ctx.around.peers.items() if state not in RESERVED_OR_BEYOND)
    return _wait_for_group(ctx, waiting) if waiting else swap(ctx)


def _wait_for_group(ctx: Context, waiting: list[str]) -> Step | None:
    """Applications of its gang group are not reserved yet: say so (once, as it is reserved) and look
    again at its deadline; past it, it times out."""
    deadline = ctx.app.reservation_deadline()
    if deadline is not None and ctx.now >= deadline:
        return Step(
            Trigger.TIMED_OUT,
            f"gang group application(s) {', '.join(waiting)} still not reserved after {ctx.spec.policy.timeout_s}s",
        )
    if ctx.plan.state != AppState.RESERVED or ctx.app.state != AppState.RESERVED:
        ctx.event(
            ctx.originator,
            Reason.GANG_GROUP_WAITING,
            f"reserved; waiting for the rest of its gang group: {', '.join(waiting)}",
        )
    if deadline is not None:
        ctx.plan.requeue_after_s = max(0.0, deadline - ctx.now)
    return None
