"""Kubernetes' own gangs (the Workload API), seen but never held: kube-scheduler's gang plugin binds
them all or nothing, so yuniplace writes nothing to their pods. What it tells is where such a gang
stands, derived from its pods each time, and an event when that changes: recognised (with its queue),
started whole, or naming a pod group that does not exist.
"""

from __future__ import annotations

from collections.abc import Mapping

from yuniplace.controller.lifecycle.table import Trigger, move
from yuniplace.controller.plan import Event, Plan
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import WARNING, Reason


def bound_members(app: Application) -> int:
    return sum(1 for m in app.members if p.node_name(m) and not p.is_terminal(m))


def observed_state(app: Application) -> AppState:
    """Pending until kube-scheduler has bound its minimum, Running from then on, Completed once no
    member is left to run."""
    if not app.live_members():
        return AppState.COMPLETED
    if app.spec is not None and bound_members(app) >= app.spec.min_members:
        return AppState.RUNNING
    return AppState.PENDING


# What takes a native gang from the state it was last seen in to the one it is seen in now.
SEEN: Mapping[AppState, Trigger] = {
    AppState.RUNNING: Trigger.BOUND,
    AppState.PENDING: Trigger.UNBOUND,
    AppState.COMPLETED: Trigger.ENDED,
}


def observe(
    app: Application,
    announced: str | None,
    queue: str | None,
    *,
    before: AppState | None = None,
    watched: bool = True,
) -> tuple[Plan, str]:
    """The plan for a native gang (events only), and the headline it stands at, which the caller keeps:
    an event is posted only when the headline differs from the one `announced` last. `before`: the state
    it was last seen in (None: never, or not as a native gang), from which the table (table.py) carries it
    to the one seen now. Where the cluster serves no version of the API yuniplace reads (`watched` False,
    said in the log at start), its groups are unknown, so nothing is said of them: a missing group could
    not be told from an unread one."""
    state = observed_state(app)
    current = before if before in (AppState.PENDING, AppState.RUNNING) else state
    plan = Plan(app.key, current, app.originator, spec=app.spec, current=current)
    if state != current:
        move(plan, SEEN[state])
    plan.forget = plan.state == AppState.COMPLETED
    originator = app.originator
    if originator is None or plan.state == AppState.COMPLETED or not watched:
        return plan, state.value
    if app.problem is not None:
        headline = f"problem: {app.problem}"
        if headline != announced:
            plan.events.append(
                Event(originator, Reason.TASK_GROUPS_ERROR, f"native gang {app.key.app_id}: {app.problem}", WARNING)
            )
        return plan, headline
    assert app.spec is not None
    minimum = app.spec.min_members
    where = f"; counted in queue {queue}" if queue else ""
    if state == AppState.RUNNING:
        note = f"native gang {app.key.app_id} started whole: {bound_members(app)} of minimum {minimum} bound"
    else:
        note = (
            f"native gang {app.key.app_id} (minimum {minimum}): kube-scheduler's gang plugin binds it all or "
            f"nothing; yuniplace neither gates nor placeholds it{where}"
        )
    if state.value != announced:
        plan.events.append(Event(originator, Reason.NATIVE_GANG, note))
    return plan, state.value
