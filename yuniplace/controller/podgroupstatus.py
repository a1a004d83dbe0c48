"""A PodGroup's status as its own scheduler would report it, computed from the gang, so that users
and tools that read PodGroups (`kubectl get podgroups`, a Volcano Job's controller, dashboards) see
the gang's progress in the terms they know.

scheduler-plugins: Pending → PreScheduling (reserving) → Scheduling → Scheduled → Running →
Finished, or Failed; counts of scheduled, running, succeeded and failed members.

Volcano has no phase for yuniplace's reservation or for failure, so its phases map as follows, with
Volcano's own rule first: once `minMember` members are bound, Running, and Completed when every
bound member has ended. Before that: Pending while the gang waits for admission; Inqueue from
admission on (reserving, reserved, swapping in); Unknown when the reservation was given up
(Resuming: its pods are scheduled one by one, as Volcano's Unknown says, "part running, the rest
cannot be scheduled") or the gang failed while some of its pods still live; Completed once a failed
or ended gang has no live pod left (the failed count says how it ended). Counts of running,
succeeded and failed members, and one condition, `Scheduled`: True once every placeholder was
placed, False with the reason while it is not (Pending, Reserving, GangSchedulingFailed,
ApplicationFailed); its lastTransitionTime moves only when its status does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import Dialect, pod_group_dialect
from yuniplace.gang.state import TERMINAL, AppState

POD_GROUP_COUNTS = ("scheduled", "running", "succeeded", "failed")
VOLCANO_COUNTS = ("running", "succeeded", "failed")
SCHEDULED = "Scheduled"
# The Volcano Scheduled condition for each state: (status, reason, message). A completed gang keeps
# the one it has.
VOLCANO_SCHEDULED: Mapping[AppState, tuple[str, str, str]] = {
    AppState.PENDING: ("False", "Pending", "the gang waits until all of it fits (see its GangWaiting events)"),
    AppState.RESERVING: ("False", "Reserving", "placeholders are reserving room for the whole gang"),
    AppState.RESERVED: ("True", "GangReserved", "every placeholder is placed; members take their places"),
    AppState.RUNNING: ("True", "GangReserved", "every placeholder is placed; members take their places"),
    AppState.RESUMING: (
        "False",
        "GangSchedulingFailed",
        "the gang could not be reserved in time; its pods are scheduled normally",
    ),
    AppState.FAILED: ("False", "ApplicationFailed", "the gang failed; see the events of its pods"),
}


def pod_group_status(app: Application, state: AppState, started_now: str | None, now: float) -> dict[str, Any] | None:
    """The status of `app`'s PodGroup for the application in `state`, in its scheduler's terms, when
    it differs from what the PodGroup shows. `started_now`: the reservation's start, when it begins
    in this very plan."""
    if pod_group_dialect(app.members) == Dialect.VOLCANO:
        return volcano_status(app, state, now)
    return scheduler_plugins_status(app, state, started_now)


def _members(app: Application) -> list[p.Pod]:
    return [m for m in app.members if p.task_group_name(m) is not None]


def _counts(members: list[p.Pod]) -> dict[str, int]:
    return {
        "scheduled": sum(1 for m in members if p.node_name(m)),
        "running": sum(1 for m in members if p.phase(m) == "Running"),
        "succeeded": sum(1 for m in members if p.phase(m) == "Succeeded"),
        "failed": sum(1 for m in members if p.phase(m) == "Failed"),
    }


def _changed(status: Mapping[str, Any], shown: Mapping[str, Any], counts: tuple[str, ...]) -> bool:
    """Whether `status` says anything `shown` does not; counts left out read as 0, as both schedulers
    leave them out."""
    return any(shown.get(k, 0 if k in counts else None) != v for k, v in status.items())


def scheduler_plugins_status(app: Application, state: AppState, started_now: str | None) -> dict[str, Any] | None:
    """scheduler-plugins' PodGroup status: its phase and member counts, and when scheduling began."""
    assert app.pod_group is not None
    counts = _counts(_members(app))
    wanted = app.spec.min_members if app.spec is not None else 1
    if state == AppState.FAILED:
        phase = "Failed"
    elif counts["succeeded"] >= wanted:
        phase = "Finished"
    elif counts["running"] >= wanted:
        phase = "Running"
    elif counts["scheduled"] >= wanted:
        phase = "Scheduled"
    elif state in (AppState.RESERVED, AppState.RUNNING, AppState.RESUMING) or counts["scheduled"]:
        phase = "Scheduling"
    elif state == AppState.RESERVING:
        phase = "PreScheduling"
    else:
        phase = "Pending"
    status: dict[str, Any] = {"phase": phase, **counts}
    started = started_now or (
        p.annotations_of(app.originator).get(keys.RESERVATION_STARTED) if app.originator else None
    )
    if started:
        status["scheduleStartTime"] = started
    shown = app.pod_group.get("status") or {}
    return status if _changed(status, shown, POD_GROUP_COUNTS) else None


def _volcano_min_member(app: Application) -> int:
    """Volcano's minMember (which may be fewer than the task groups' total: see gang/volcano.py)."""
    assert app.pod_group is not None
    value = (app.pod_group.get("spec") or {}).get("minMember")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return app.spec.min_members if app.spec is not None else 1


def _volcano_phase(app: Application, state: AppState, members: list[p.Pod]) -> str:
    bound = [m for m in members if p.node_name(m)]
    if bound and len(bound) >= _volcano_min_member(app):
        return "Completed" if all(p.is_terminal(m) for m in bound) else "Running"
    if state in TERMINAL:
        return "Unknown" if any(not p.is_terminal(m) for m in members) else "Completed"
    if state == AppState.RESUMING:
        return "Unknown"
    if state in (AppState.RESERVING, AppState.RESERVED, AppState.RUNNING):
        return "Inqueue"
    return "Pending"


def _volcano_conditions(state: AppState, shown: list[Mapping[str, Any]], now: float) -> list[Mapping[str, Any]]:
    """The conditions shown, with yuniplace's Scheduled condition for `state` in place of the one
    there; a completed gang keeps what it has."""
    wanted = VOLCANO_SCHEDULED.get(state)
    if wanted is None:
        return shown
    status, reason, message = wanted
    before = next((c for c in shown if c.get("type") == SCHEDULED), None)
    since = before.get("lastTransitionTime") if before is not None and before.get("status") == status else None
    condition = {
        "type": SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or p.format_time(now),
    }
    return [c for c in shown if c.get("type") != SCHEDULED] + [condition]


def volcano_status(app: Application, state: AppState, now: float) -> dict[str, Any] | None:
    """Volcano's PodGroup status: phase, member counts and the Scheduled condition."""
    assert app.pod_group is not None
    shown = app.pod_group.get("status") or {}
    members = _members(app)
    counts = _counts(members)
    status: dict[str, Any] = {
        "phase": _volcano_phase(app, state, members),
        **{k: counts[k] for k in VOLCANO_COUNTS},
        "conditions": _volcano_conditions(state, list(shown.get("conditions") or []), now),
    }
    if not status["conditions"]:
        del status["conditions"]
    return status if _changed(status, shown, VOLCANO_COUNTS) else None
