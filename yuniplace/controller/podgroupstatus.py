"""A PodGroup's status as its own scheduler would report it, computed from the gang, so that users
and tools that read PodGroups (`kubectl get podgroups`, a Volcano Job's controller, dashboards) see
the gang's progress in the terms they know.

Where the gang stands is counted here, once for every dialect; each dialect's PodGroup API says it in
its scheduler's terms (scheduler-plugins' phases and counts, Volcano's phases, counts and Scheduled
condition: see their modules under gang/dialects/).
"""

from __future__ import annotations

from typing import Any

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects.base import GangProgress
from yuniplace.gang.dialects.registry import pod_group_api
from yuniplace.gang.state import AppState


def progress_of(app: Application, state: AppState, started_now: str | None, now: float) -> GangProgress:
    """Where `app` stands in `state`, counted from its members (pods of a task group). `started_now`:
    the reservation's start, when it begins in this very plan."""
    members = [m for m in app.members if app.group_of(m) is not None]
    bound = [m for m in members if p.node_name(m)]
    started = started_now or (
        p.annotations_of(app.originator).get(keys.RESERVATION_STARTED) if app.originator else None
    )
    return GangProgress(
        state=state,
        min_members=app.spec.min_members if app.spec is not None else 1,
        scheduled=len(bound),
        running=sum(1 for m in members if p.phase(m) == "Running"),
        succeeded=sum(1 for m in members if p.phase(m) == "Succeeded"),
        failed=sum(1 for m in members if p.phase(m) == "Failed"),
        bound_have_ended=all(p.is_terminal(m) for m in bound),
        some_member_lives=any(not p.is_terminal(m) for m in members),
        started=started,
        now=p.format_time(now),
    )


def pod_group_status(app: Application, state: AppState, started_now: str | None, now: float) -> dict[str, Any] | None:
    """The status of `app`'s PodGroup for the application in `state`, in its scheduler's terms, when
    it differs from what the PodGroup shows; None too for a gang no PodGroup API describes."""
    api = pod_group_api(app.members)
    if app.pod_group is None or api is None:
        return None
    return api.status(app.pod_group, progress_of(app, state, started_now, now))
