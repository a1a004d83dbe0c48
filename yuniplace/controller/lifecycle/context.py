"""What every phase of one application's plan shares: the application, the time and its surroundings,
the plan being built, its members by task group, and the few things every phase does the same way
(post an event, look again sooner, give its placeholders back, let its held members go or fail them).

A phase reads the context and writes to its plan; what happened it returns as a `Step`, which the
dispatcher carries through the transitions table (table.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.controller.plan import Event, Failure, Plan, Settings, Surroundings
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.losses import Losses, Readiness, losses_of
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, InvalidGang, Style, check_member
from yuniplace.runtime.events import FAILURE_REASONS, Reason

Pod = p.Pod
RESYNC_S = 60.0
IN_FLIGHT_RECHECK_S = 2.0
# How long a started gang may be below its minimum before it is reported degraded.
LOSS_GRACE_S = 5.0
# Members naming no task group: no placeholder is theirs, but, as in YuniKorn, they start with their
# gang (once it is reserved, or has fallen back) and not before. Group names are never empty.
UNGROUPED = ""


@dataclass(frozen=True)
class Step:
    """What happened, for the dispatcher to carry through the table; `why`, what ran out (a timeout)."""

    trigger: Trigger
    why: str = ""


class Context:
    """One application at one moment, and the plan made for it."""

    def __init__(self, app: Application, now: float, settings: Settings, around: Surroundings) -> None:
        self.app = app
        self.now = now
        self.settings = settings
        self.around = around
        self.plan = Plan(app.key, app.state, app.originator, spec=app.spec, current=app.state)
        # The topology domains its reservation holds: its record's, or the ticket's once it starts.
        self.domains = app.record.domains
        # Its gated members by task group (members_by_group), once the dispatcher has sorted them.
        self.members: dict[str, list[Pod]] = {}

    @property
    def spec(self) -> GangSpec:
        assert self.app.spec is not None
        return self.app.spec

    @property
    def originator(self) -> Pod:
        assert self.app.originator is not None
        return self.app.originator

    def started(self) -> bool:
        """Whether the gang got past its reservation: a member seated, or its record says it runs (which
        it may with no member seated: written by hand, or its members since gone). Nothing takes a gang
        that runs back to reserving: its room is given back by evicting it."""
        return self.app.state == AppState.RUNNING or self.app.started()

    def event(self, pod: Pod, reason: Reason, note: str, kind: str = "") -> None:
        self.plan.events.append(Event(pod, reason, note, kind))

    def requeue_within(self, delay_s: float) -> None:
        """Look again within `delay_s`, or sooner if the plan already says so."""
        current = self.plan.requeue_after_s
        self.plan.requeue_after_s = delay_s if current is None else min(current, delay_s)

    def delete_placeholders(self) -> None:
        """Every placeholder still there goes (once)."""
        self.plan.delete += [ph for ph in self.app.live_placeholders() if ph not in self.plan.delete]

    def release_everything(self, failure: tuple[Reason, str] | None = None) -> None:
        """Remove every placeholder; ungate every gated member, or fail it with (reason, message).
        A member the plan has already decided about (no group, unknown group) keeps that decision. A
        failed native gang's members whose gates came off at its admission, held by the gang plugin
        and not bound, fail too: the plugin would bind them once the rest came."""
        plan = self.plan
        self.delete_placeholders()
        decided = {p.uid(m) for m in plan.ungate} | {p.uid(f.pod) for f in plan.fail}
        held = self.app.gated_members()
        if failure is not None and self.app.spec is not None and self.app.spec.native:
            held += [m for m in self.app.live_members() if p.waits_for_scheduler(m) and m not in held]
        for member in held:
            if p.uid(member) in decided:
                continue
            if failure is None:
                plan.ungate.append(member)
            else:
                plan.fail.append(Failure(member, *failure))

    def of_an_earlier_attempt(self, member: Pod) -> bool:
        """Whether the member is what is left of an attempt the gang was restarted from: made before the
        last restart, and ended or going (a Job keeps the pod that failed; a pod on a node deleted goes
        only once the pod garbage collector takes it, a minute on). It says nothing of this attempt."""
        last = self.around.restarts
        going = p.is_terminal(member) or p.is_deleting(member)
        return last is not None and going and p.created_at(member) < last.last_at

    def peers_that_gave_up(self) -> list[str]:
        """The applications of its gang group that failed or fell back."""
        gave_up = (AppState.FAILED, AppState.RESUMING)
        return sorted(ref for ref, state in self.around.peers.items() if state in gave_up)

    @functools.cached_property
    def successor(self) -> AppState | None:
        """Where the gang stands when the pod that carried its record went away (deleted, evicted, its Job
        cleaned up) and another pod with the task groups is the originator now, with no record of its
        own; None when the originator keeps a record or the gang never got past its gate. Its members
        tell: one failed by yuniplace, the gang failed; another started, it runs; another released
        without starting, it fell back. Reserving again would put placeholders beside the members in
        their seats, or give a gang that fell back a second timeout."""
        app, originator = self.app, self.originator
        if app.record.kept:
            return None
        if any(p.phase(m) == "Failed" and p.status_reason(m) in FAILURE_REASONS for m in app.members):
            return AppState.FAILED
        others = [m for m in app.members if p.uid(m) != p.uid(originator) and not self.of_an_earlier_attempt(m)]
        # A member being deleted from its node says nothing of where the gang stands now: a gang evicted
        # whole (reclaimed) whose Job makes its pods again is a new attempt while the old pods terminate,
        # not a gang that runs (or fell back) with its new pods as late members.
        evicted = {p.uid(m) for m in others if p.is_deleting(m) and p.node_name(m)}
        staying = [m for m in others if p.uid(m) not in evicted]
        if p.node_name(originator) or any(p.node_name(m) or p.is_terminal(m) for m in staying):
            return AppState.RUNNING
        if any(not p.is_gated(m) for m in staying):
            return AppState.RESUMING
        return None

    @functools.cached_property
    def losses(self) -> Losses:
        """Its losses, among the members of this attempt."""
        members = [m for m in self.app.members if not self.of_an_earlier_attempt(m)]
        held = sum(1 for ph in self.app.live_placeholders() if not p.is_terminal(ph))
        return losses_of(
            members,
            self.spec.min_members,
            self.around.node_health,
            Readiness(self.now, self.spec.on_loss.ready_timeout_s),
            held,
            started_at=self.app.record.reservation_started,
        )


def members_by_group(ctx: Context) -> dict[str, list[Pod]]:
    """Gated members by group (UNGROUPED for those naming none, or a group the gang has not when its
    dialect lets such members follow it). One naming an unknown group otherwise gets a
    TaskGroupsError and follows the application's style."""
    spec = ctx.spec
    by_group: dict[str, list[Pod]] = {g.name: [] for g in spec.groups}
    by_group[UNGROUPED] = []
    for member in ctx.app.gated_members():
        group = ctx.app.group_of(member)
        if group is None or (spec.other_groups_follow and spec.group(group) is None):
            by_group[UNGROUPED].append(member)
            continue
        try:
            check_member(spec, group)
        except InvalidGang as error:
            hard = spec.policy.style == Style.HARD
            ctx.event(
                member,
                Reason.TASK_GROUPS_ERROR,
                f"{error}; " + ("failing this pod" if hard else "scheduling it normally"),
            )
            if hard:
                ctx.plan.fail.append(Failure(member, Reason.TASK_GROUPS_ERROR, str(error)))
            else:
                ctx.plan.ungate.append(member)
            continue
        by_group[group].append(member)
    return by_group
