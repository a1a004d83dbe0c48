"""The phase of a gang whose room is taken back: its queue holds more than its guarantee, and the queue
that lent the room reclaims it. A gang that started is evicted, all of its pods at once (or none, where
a PodDisruptionBudget forbids); one that only holds placeholders gives them back and queues again."""

from __future__ import annotations

from yuniplace.controller.lifecycle.acts import give_back
from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason

HOLDING_ROOM = (AppState.RESERVING, AppState.RESERVED, AppState.RUNNING)


def reclaimed(ctx: Context) -> bool:
    return ctx.around.reclaimed is not None and ctx.app.state in HOLDING_ROOM


def give_room_back(ctx: Context) -> Step | None:
    app, why = ctx.app, ctx.around.reclaimed
    if not ctx.started():
        if any(p.is_deleting(m) and p.node_name(m) for m in app.members):
            return None  # evicted already: its pods are on their way out
        return give_back(ctx, Reason.GANG_PREEMPTED, f"{why}: giving its reservation back")
    members = app.live_members()
    ctx.plan.evict = members
    ctx.delete_placeholders()
    pods = "its pod" if len(members) == 1 else f"its {len(members)} pods"
    ctx.event(ctx.originator, Reason.GANG_PREEMPTED, f"{why}: evicting {pods}")
    return Step(Trigger.RECLAIMED)
