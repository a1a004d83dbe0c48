"""The phases of a gang that reserves no more: it ended (its originator finished or went), it fell back
(Resuming: its pods scheduled normally), it cannot be read (turned away by its style), or it timed out
for good under Koordinator's rule. Late members run or fail as the gang did."""

from __future__ import annotations

from yuniplace.controller.lifecycle.acts import reject
from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.policies.timeout import is_marked, timed_out_mark
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.gang import pods as p
from yuniplace.gang.state import TERMINAL, AppState
from yuniplace.runtime.events import Reason


def invalid(ctx: Context) -> Step | None:
    return reject(ctx, Reason.TASK_GROUPS_ERROR, f"invalid gang annotations: {ctx.app.problem}")


def ended(ctx: Context) -> bool:
    return p.is_terminal(ctx.originator) or ctx.app.state in TERMINAL


def end(ctx: Context) -> Step | None:
    """The application is over: nothing to reserve any more; late members run or fail as it did (as
    the pods it failed say, when its record went with an originator since gone)."""
    app = ctx.app
    if app.state in TERMINAL:
        failed, step = app.state == AppState.FAILED, None
    else:
        failed = ctx.successor == AppState.FAILED
        step = Step(Trigger.FAILED if failed else Trigger.ENDED)
    failure = None
    if failed:
        failure = (
            Reason.APPLICATION_FAILED,
            f"application {app.key.app_id} has failed; see the events of pod {p.name(ctx.originator)}",
        )
    ctx.release_everything(failure=failure)
    return step


def resume(ctx: Context) -> Step | None:
    """Resuming: normal scheduling for everyone."""
    ctx.release_everything()
    return None


def timed_out_for_good(ctx: Context) -> bool:
    return ctx.app.state == AppState.FAILED and is_marked(ctx.originator, ctx.app.spec)


def keep_timed_out(ctx: Context, _step: Step | None = None) -> Step | None:
    """A gang timed out under Koordinator's rule (its originator marked so) is over for good, as
    koord-scheduler turns away every pod marked timed out: no placeholder is left, and each of its
    gated pods, those created since included, is marked and stays gated, never scheduled."""
    plan, originator, mark = ctx.plan, ctx.originator, timed_out_mark(ctx.spec)
    plan.timed_out_mark = mark
    ctx.delete_placeholders()
    for member in ctx.app.gated_members():
        if p.uid(member) == p.uid(originator) or p.annotations_of(member).get(mark) == "true":
            continue
        plan.mark_timed_out.append(member)
        ctx.event(
            member,
            Reason.GANG_TIMED_OUT,
            f"gang {ctx.app.key.app_id} timed out (see the events of pod {p.name(originator)}): this pod is "
            f"marked {mark}=true and will not be scheduled, as Koordinator does; delete "
            "the gang's pods and create them again to schedule it",
        )
    return None
