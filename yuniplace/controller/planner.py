"""Deciding what should happen to one application now: a pure decision from the application (as its
pods show it), the clock and what lies beyond it (admission's ticket, its gang group, nodes in flight)
to a Plan of API writes. It never calls the API, so every rule here is unit-tested with plain dicts and
a fake clock.

The application's progress lives in the cluster: its pods, its placeholders, and its record on the
originator. A restarted or newly elected controller therefore computes the same plan the last one
would have, and continues where it stopped.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from yuniplace.admission.tickets import Granted, LeftToKubeScheduler, Refused, Ticket, Undecided, Waiting
from yuniplace.controller.plan import (
    Event,
    Failure,
    Outcome,
    Plan,
    Settings,
    Surroundings,
    Swap,
)
from yuniplace.controller.podgroupstatus import pod_group_status
from yuniplace.controller.restarts import Restarts
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects.registry import dialect_of, pod_group_api
from yuniplace.gang.losses import Losses, Readiness, losses_of
from yuniplace.gang.onloss import LossPolicy, OnLoss
from yuniplace.gang.placeholders import placeholder_name, placeholder_pod
from yuniplace.gang.resources import (
    format_quantity,
    pod_requests,
    quantities,
    shortfalls,
)
from yuniplace.gang.state import TERMINAL, AppState, allowed
from yuniplace.gang.taskgroups import GangSpec, InvalidGang, Mode, OnTimeout, Style, check_member
from yuniplace.gang.topology import Domains, pinned
from yuniplace.queues.pools import confine
from yuniplace.runtime.events import FAILURE_REASONS, NORMAL, Reason

Pod = p.Pod
RESYNC_S = 60.0
IN_FLIGHT_RECHECK_S = 2.0
# How long a started gang may be below its minimum before it is reported degraded.
LOSS_GRACE_S = 5.0
MAX_RESTART_BACKOFF_S = 600.0
MAX_STRICT_BACKOFF_S = 300.0
# kube-scheduler's verdict on a pod it could place nowhere.
UNSCHEDULABLE = "Unschedulable"
# Members naming no task group: no placeholder is theirs, but, as in YuniKorn, they start with their
# gang (once it is reserved, or has fallen back) and not before. Group names are never empty.
UNGROUPED = ""
# How the TaskGroupMatch event names each timeout rule.
ON_TIMEOUT_SAID = {
    OnTimeout.SOFT: "Soft style",
    OnTimeout.HARD: "Hard style",
    OnTimeout.RETRY: "reserved again after a backoff if it times out",
}


def _marked_timed_out(pod: Pod, spec: GangSpec | None) -> bool:
    """Whether the pod carries its dialect's mark of a gang that timed out."""
    mark = spec.timed_out_mark if spec is not None else None
    return mark is not None and p.annotations_of(pod).get(mark) == "true"


def _timeout_said(spec: GangSpec) -> str:
    if spec.policy.on_timeout == OnTimeout.MARK_TIMED_OUT:
        return f"its pods marked {spec.timed_out_mark}=true and never scheduled if it times out"
    return ON_TIMEOUT_SAID[spec.policy.on_timeout]


def plan_application(
    app: Application,
    now: float,
    settings: Settings = Settings(),
    nodes_in_flight: frozenset[str] = frozenset(),
    ticket: Ticket | None = None,
    peers: Mapping[str, AppState | None] | None = None,
    refusal: str | None = None,
) -> Plan:
    return Planner(app, now, settings, Surroundings(nodes_in_flight, ticket, peers or {}, refusal)).plan()


class Group(enum.Enum):
    """Where the rest of its gang group stands, for a reserved application."""

    READY = "ready"  # every application of the group is reserved (or it has no group)
    WAITING = "waiting"  # some are not reserved yet
    GAVE_UP = "gave up"  # one of them failed or fell back


class Planner:
    """Plans one application at one moment; `plan()` once."""

    def __init__(self, app: Application, now: float, settings: Settings, around: Surroundings) -> None:
        self.app = app
        self.now = now
        self.settings = settings
        self.around = around
        self.plan_ = Plan(app.key, app.state, app.originator, spec=app.spec, current=app.state)
        # The topology domains its reservation holds: its record's, or the ticket's once it starts.
        self.domains = app.record.domains

    @property
    def spec(self) -> GangSpec:
        assert self.app.spec is not None
        return self.app.spec

    @property
    def originator(self) -> Pod:
        assert self.app.originator is not None
        return self.app.originator

    def _event(self, pod: Pod, reason: Reason, note: str, kind: str = "") -> None:
        self.plan_.events.append(Event(pod, reason, note, kind))

    def plan(self) -> Plan:
        app, plan = self.app, self.plan_
        if app.originator is None:
            self._without_originator()
            return plan
        if app.problem is not None:
            self._reject(Reason.TASK_GROUPS_ERROR, f"invalid gang annotations: {app.problem}")
        elif app.state == AppState.FAILED and _marked_timed_out(app.originator, app.spec):
            self._keep_timed_out()
        elif self._of_an_earlier_attempt(app.originator):
            # Only what is left of an attempt the gang was restarted from (a failed pod its Job keeps):
            # it says nothing of the next attempt, which begins once its owner makes its pods again;
            # past its restart limit, each pod the owner makes fails at once.
            history = self.around.restarts
            if history is not None and history.failed:
                self._fail_restarts_exhausted(history)
            else:
                plan.requeue_after_s = RESYNC_S
        elif app.state == AppState.RUNNING and p.phase(app.originator) == "Failed" and self._acts_on_loss():
            # Its originator is a member like the others (a Job's pod), lost as any would be.
            self._watch_losses(self._losses())
        elif p.is_terminal(app.originator) or app.state in TERMINAL:
            # The application is over: nothing to reserve any more; late members run or fail as it did
            # (as the pods it failed say, when its record went with an originator since gone).
            if app.state in TERMINAL:
                plan.state = app.state
            elif self._successor_state() == AppState.FAILED:
                plan.state = AppState.FAILED
            else:
                plan.state = AppState.COMPLETED
            failure = None
            if plan.state == AppState.FAILED:
                failure = (
                    Reason.APPLICATION_FAILED,
                    f"application {app.key.app_id} has failed; see the events of pod {p.name(app.originator)}",
                )
            self._release_everything(failure=failure)
        elif self.around.reclaimed is not None and app.state in (
            AppState.RESERVING,
            AppState.RESERVED,
            AppState.RUNNING,
        ):
            self._give_back(self.around.reclaimed)
        else:
            members = self._members_by_group()
            successor = self._successor_state()
            if successor is not None:
                self._carry_on(successor, members)
            elif app.state in (AppState.PENDING, AppState.RESERVING):
                exhausted = self.around.restarts
                if exhausted is not None and exhausted.failed:
                    self._fail_restarts_exhausted(exhausted)
                else:
                    self._reserve(members)
            elif app.state in (AppState.RESERVED, AppState.RUNNING) and p.is_deleting(app.originator):
                # An originator being deleted takes the application with it (its gang evicted whole, say):
                # nothing more of it starts, and a pod its Job makes again meanwhile waits for the next
                # attempt, which the next originator begins.
                plan.requeue_after_s = LOSS_GRACE_S
            elif app.state in (AppState.RESERVED, AppState.RUNNING):
                losses = self._losses() if app.state == AppState.RUNNING else None
                if (app.state == AppState.RUNNING or self._group_hold() == Group.READY) and not (
                    losses is not None and self._restarts_on(losses)
                ):
                    self._swap(members)
                if losses is not None:
                    self._watch_losses(losses)
            else:  # RESUMING: normal scheduling for everyone
                self._release_everything()
        return self._finish()

    # -- the application as a whole -----------------------------------------------------------------

    def _finish(self) -> Plan:
        plan, app = self.plan_, self.app
        if self.domains and app.spec is not None:
            for member in [swap.member for swap in plan.swaps] + plan.ungate:
                group = p.task_group_name(member)
                pins = self.domains.of_member(group if group is not None and app.spec.group(group) else None)
                if pins:
                    plan.pins[p.uid(member)] = pins
        if app.pod_group is not None:
            started = plan.annotate.get(keys.RESERVATION_STARTED)
            plan.pod_group_status = pod_group_status(app, plan.state, started, self.now)
        if not allowed(app.state, plan.state):
            raise AssertionError(f"{plan.key}: transition {app.state.value} -> {plan.state.value} is not in the table")
        if plan.transition is not None:
            plan.annotate[keys.STATE] = plan.state.value
        if plan.requeue_after_s is None and plan.state not in TERMINAL:
            plan.requeue_after_s = RESYNC_S
        return plan

    def _without_originator(self) -> None:
        """Members whose task groups have not appeared (yet: no pod with task groups, no PodGroup, no
        pod of a Volcano task with a minimum): wait for an originator as long as the default timeout,
        then let them run normally rather than hold them forever."""
        app, plan = self.app, self.plan_
        gated = app.gated_members()
        # Placeholders without a live originator are garbage collected with it; deleting them here as
        # well covers an originator removed without cascading deletion.
        plan.delete += app.live_placeholders()
        if not gated:
            plan.forget = not app.placeholders
            plan.state = AppState.COMPLETED if plan.forget else AppState.PENDING
            return
        dialect = dialect_of(gated[0])
        native = dialect is not None and dialect.started_by_kube_scheduler
        if native and app.pod_group is not None:
            # A native pod group under the basic policy is no gang: nothing to hold its pods for.
            plan.ungate += gated
            self._event(
                gated[0],
                Reason.NATIVE_GANG,
                f"pod group {app.key.app_id} has no gang policy (no minCount): kube-scheduler schedules its pods one "
                "by one; its gates come off",
            )
            return
        timeout_s = self.settings.limits.default_timeout_s
        expires = min(p.created_at(m) for m in gated) + timeout_s
        if self.now < expires:
            plan.requeue_after_s = expires - self.now
            return
        api = pod_group_api(gated)
        tasks = api.missing_tasks(app.pod_group, app.members) if api is not None and app.pod_group is not None else []
        if native and dialect is not None:
            missing = (
                f"{dialect.named_by(gated[0])} names no pod group {app.key.app_id} of the Workload API in this "
                "namespace (kube-scheduler keeps such a pod unschedulable until it is created)"
            )
        elif api is not None and app.pod_group is None:
            missing = f"{api.named_by} names no PodGroup {app.key.app_id} of this namespace"
        elif tasks:  # e.g. a Volcano PodGroup's minTaskMember names tasks that have no pod
            missing = f"no pod of task(s) {', '.join(tasks)} of PodGroup {app.key.app_id} exists"
        else:
            missing = f"no pod of application {app.key.app_id} defines {keys.TASK_GROUPS}"
        for member in gated:
            plan.ungate.append(member)
            self._event(
                member,
                Reason.GANG_SCHEDULING_FAILED,
                f"{missing} after {timeout_s}s; scheduling this pod normally",
            )

    def _release_everything(self, *, failure: tuple[Reason, str] | None = None) -> None:
        """Remove every placeholder; ungate every gated member, or fail it with (reason, message).
        A member the plan has already decided about (no group, unknown group) keeps that decision."""
        plan = self.plan_
        plan.delete += [ph for ph in self.app.live_placeholders() if ph not in plan.delete]
        decided = {p.uid(m) for m in plan.ungate} | {p.uid(f.pod) for f in plan.fail}
        for member in self.app.gated_members():
            if p.uid(member) in decided:
                continue
            if failure is None:
                plan.ungate.append(member)
            else:
                plan.fail.append(Failure(member, *failure))

    def _reject(self, reason: Reason, message: str) -> None:
        """The application cannot be a gang (its annotations cannot be read, or admission refuses it):
        Hard style fails it, Soft style schedules its pods normally; announced once, as it happens."""
        plan, current = self.plan_, self.app.state
        if current in TERMINAL or current == AppState.RESUMING:
            self._release_everything(failure=(reason, message) if current == AppState.FAILED else None)
            return
        hard = self.app.style == Style.HARD
        outcome = "failing the application (Hard style)" if hard else "scheduling its pods normally (Soft style)"
        self._event(self.originator, reason, f"{message}; {outcome}")
        plan.state = AppState.FAILED if hard else AppState.RESUMING
        self._release_everything(failure=(reason, message) if hard else None)

    def _time_out(self, summary: str) -> None:
        """The reservation ran out of time: what follows is the gang's timeout rule (its own scheduler's,
        or the style its pod names)."""
        plan, originator, rule = self.plan_, self.originator, self.spec.policy.on_timeout
        self._event(originator, Reason.PLACEHOLDER_TIMEOUT, f"gang reservation timed out: {summary}")
        plan.outcomes.append(Outcome.TIMED_OUT)
        if rule == OnTimeout.SOFT and self.spec.topology_required and not self.domains:
            # Soft style would let its pods be scheduled one by one, spread over any nodes: a gang that
            # requires a domain and holds none waits instead, as Kueue keeps such a workload pending.
            self._retry(
                Reason.GANG_RESERVATION_RELEASED,
                f"gang reservation timed out ({summary}); its pods must share a topology domain and none was "
                "found for them, so rather than schedule them spread out (Soft style), its pods wait, still "
                "gated, for the next attempt",
                restart_clock=True,
            )
        elif rule == OnTimeout.RETRY:
            self._retry(
                Reason.GANG_RESERVATION_RELEASED,
                f"gang reservation timed out ({summary}); as a timed-out PodGroup backs off, its placeholders "
                "are removed and its pods wait, still gated, for the next attempt",
                restart_clock=True,
            )
        elif rule == OnTimeout.MARK_TIMED_OUT:
            plan.state = AppState.FAILED
            plan.annotate[self._timed_out_mark()] = "true"
            self._event(
                originator,
                Reason.GANG_TIMED_OUT,
                f"gang {self.app.key.app_id} timed out ({summary}): as Koordinator does, its pods are marked "
                f"{self._timed_out_mark()}=true and will not be scheduled; delete them and create them again "
                "to schedule the gang",
            )
            self._keep_timed_out()
        elif rule == OnTimeout.HARD:
            message = f"gang reservation timed out ({summary}); Hard style fails the application"
            plan.state = AppState.FAILED
            self._event(originator, Reason.APPLICATION_FAILED, message)
            self._release_everything(failure=(Reason.RESOURCE_RESERVATION_TIMEOUT, message))
        else:
            plan.state = AppState.RESUMING
            self._event(
                originator,
                Reason.GANG_SCHEDULING_FAILED,
                f"gang reservation timed out ({summary}); Soft style: placeholders removed, pods scheduled normally",
            )
            self._release_everything()

    def _timed_out_mark(self) -> str:
        mark = self.spec.timed_out_mark
        assert mark is not None, "a dialect whose rule marks timed-out pods names its mark"
        return mark

    def _keep_timed_out(self) -> None:
        """A gang timed out under Koordinator's rule (its originator marked so) is over for good, as
        koord-scheduler turns away every pod marked timed out: no placeholder is left, and each of its
        gated pods, those created since included, is marked and stays gated, never scheduled."""
        plan, originator, mark = self.plan_, self.originator, self._timed_out_mark()
        plan.timed_out_mark = mark
        plan.delete += [ph for ph in self.app.live_placeholders() if ph not in plan.delete]
        for member in self.app.gated_members():
            if p.uid(member) == p.uid(originator) or p.annotations_of(member).get(mark) == "true":
                continue
            plan.mark_timed_out.append(member)
            self._event(
                member,
                Reason.GANG_TIMED_OUT,
                f"gang {self.app.key.app_id} timed out (see the events of pod {p.name(originator)}): this pod is "
                f"marked {mark}=true and will not be scheduled, as Koordinator does; delete "
                "the gang's pods and create them again to schedule it",
            )

    def _members_by_group(self) -> dict[str, list[Pod]]:
        """Gated members by group (UNGROUPED for those naming none, or a group the gang has not when its
        dialect lets such members follow it). One naming an unknown group otherwise gets a
        TaskGroupsError and follows the application's style."""
        spec = self.spec
        by_group: dict[str, list[Pod]] = {g.name: [] for g in spec.groups}
        by_group[UNGROUPED] = []
        for member in self.app.gated_members():
            group = self.app.group_of(member)
            if group is None or (spec.other_groups_follow and spec.group(group) is None):
                by_group[UNGROUPED].append(member)
                continue
            try:
                check_member(spec, group)
            except InvalidGang as error:
                hard = spec.policy.style == Style.HARD
                self._event(
                    member,
                    Reason.TASK_GROUPS_ERROR,
                    f"{error}; " + ("failing this pod" if hard else "scheduling it normally"),
                )
                if hard:
                    self.plan_.fail.append(Failure(member, Reason.TASK_GROUPS_ERROR, str(error)))
                else:
                    self.plan_.ungate.append(member)
                continue
            by_group[group].append(member)
        return by_group

    # -- gang groups --------------------------------------------------------------------------------

    def _peers_that_gave_up(self) -> list[str]:
        return sorted(ref for ref, state in self.around.peers.items() if state in (AppState.FAILED, AppState.RESUMING))

    def _group_hold(self) -> Group:
        """A gang group swaps all-or-nothing: an application whose placeholders are all placed waits for
        every other application of the group to be reserved too, and follows any of them that fails
        or falls back (or its own timeout, while waiting). READY when it may swap now."""
        gave_up = self._peers_that_gave_up()
        if gave_up:
            self._time_out(f"gang group application(s) {', '.join(gave_up)} could not be reserved")
            return Group.GAVE_UP
        waiting = sorted(
            ref
            for ref, state in self.around.peers.items()
            if state not in (AppState.RESERVED, AppState.RUNNING, AppState.COMPLETED)
        )
        if not waiting:
            return Group.READY
        deadline = self.app.reservation_deadline()
        if deadline is not None and self.now >= deadline:
            self._time_out(
                f"gang group application(s) {', '.join(waiting)} still not reserved after {self.spec.policy.timeout_s}s"
            )
            return Group.GAVE_UP
        if self.plan_.state != AppState.RESERVED or self.app.state != AppState.RESERVED:
            self._event(
                self.originator,
                Reason.GANG_GROUP_WAITING,
                f"reserved; waiting for the rest of its gang group: {', '.join(waiting)}",
            )
        if deadline is not None:
            self.plan_.requeue_after_s = max(0.0, deadline - self.now)
        return Group.WAITING

    def _successor_state(self) -> AppState | None:
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
        others = [m for m in app.members if p.uid(m) != p.uid(originator) and not self._of_an_earlier_attempt(m)]
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

    def _carry_on(self, state: AppState, members: dict[str, list[Pod]]) -> None:
        """Take up a gang whose record went with its originator where it stands: its members still held
        (a Job's replacement of a pod that went) start as late members do, or fail as it did."""
        self.plan_.state = state
        if state == AppState.RUNNING:
            self._swap(members)
        elif state == AppState.FAILED:
            key = self.app.key
            self._release_everything(
                failure=(Reason.APPLICATION_FAILED, f"application {key.app_id} has failed; see its pods' events")
            )
        else:
            self._release_everything()

    # -- reserving ------------------------------------------------------------------------------------

    def _reserve(self, members: dict[str, list[Pod]]) -> None:
        app, plan, spec = self.app, self.plan_, self.spec
        gave_up = self._peers_that_gave_up()
        if gave_up:
            self._time_out(f"gang group application(s) {', '.join(gave_up)} could not be reserved")
            return
        if app.state == AppState.RESERVING and self.around.refusal is not None:
            self._refused(self.around.refusal)
            return
        if (app.state == AppState.PENDING or app.record.reservation_started is None) and not self._start(members):
            return

        existing = {p.name(ph): ph for ph in app.placeholders}
        placed = 0
        unplaceable: list[tuple[Pod, str]] = []
        required: set[str] = set()
        undersized: dict[str, list[tuple[str, Decimal, Decimal]]] = {}
        for group in spec.groups:
            confined = confine(group, self.around.pool)
            confined = dataclasses.replace(confined, affinity=pinned(confined.affinity, self.domains.of(group.name)))
            size = quantities(group.min_resource)
            for index in range(group.min_member):
                required.add(name := placeholder_name(app.key.app_id, group.name, index))
                found = existing.get(name)
                if found is None:
                    plan.create.append(
                        placeholder_pod(
                            app_id=app.key.app_id,
                            group=confined,
                            index=index,
                            originator=self.originator,
                            image=self.settings.placeholder_image,
                            priority_class_name=spec.priority_class_name,
                            queue_name=self.around.queue,
                        )
                    )
                elif p.is_terminal(found) and not p.is_deleting(found):
                    plan.delete.append(found)  # evicted or failed: recreated once it is gone
                elif not p.is_deleting(found) and (short := shortfalls(size, app.requests_of(found))):
                    plan.delete.append(found)  # smaller than its group now asks: made again once it is gone
                    undersized.setdefault(group.name, short)
                elif p.node_name(found) and not p.is_deleting(found):
                    placed += 1
                elif not p.is_deleting(found) and (why := _unschedulable(found)) is not None:
                    unplaceable.append((found, why))
        for name, short in undersized.items():
            detail = ", ".join(f"{res} {format_quantity(need)} > {format_quantity(have)}" for res, need, have in short)
            self._event(
                self.originator,
                Reason.TASK_GROUP_WARNING,
                f"task group {name}: its members request more than its placeholders hold ({detail}, init containers "
                "and overhead included): making them again that large before any member starts",
            )
        if spec.groups_by_shape:
            # Placeholders made for members yet to come, sized as the largest seen, are given back once
            # those members exist in shapes of their own, each of which is reserved as it is.
            plan.delete += [
                ph for ph in app.live_placeholders() if p.name(ph) not in required and ph not in plan.delete
            ]

        if placed == spec.min_members:
            self._reserved(placed)
            if self._group_hold() == Group.READY:
                self._swap(members)
            return
        deadline = app.reservation_deadline()
        if deadline is not None and self.now >= deadline:
            self._time_out(f"{placed}/{spec.min_members} placeholders placed after {spec.policy.timeout_s}s")
        elif spec.mode == Mode.STRICT and unplaceable:
            pod, why = unplaceable[0]
            self._retry(
                Reason.GANG_RESERVATION_RELEASED,
                f"placeholder {p.name(pod)} cannot be placed ({why}); Strict mode releases the partial "
                f"reservation ({placed}/{spec.min_members} placed)",
            )
        elif deadline is not None:
            plan.requeue_after_s = max(0.0, deadline - self.now)
            if placed and app.record.first_allocated is None:
                # The clock is kept from the first placement on: placeholders deleted and made again (or
                # a reservation given back to a reclaim and begun again) must not move the timeout later.
                plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(app.first_placement() or self.now)

    def _reserved(self, placed: int) -> None:
        plan, spec, originator = self.plan_, self.spec, self.originator
        plan.state = AppState.RESERVED
        plan.outcomes.append(Outcome.RESERVED)
        first = self.app.record.first_allocated or self.app.first_placement() or self.now
        plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(first)
        for group in spec.groups:
            nodes = {p.node_name(ph) for ph in self.app.placeholders if self.app.group_of(ph) == group.name}
            self._event(
                originator,
                Reason.PLACEHOLDER_ALLOCATED,
                f"task group {group.name}: {group.min_member}/{group.min_member} placeholders placed "
                f"on {len(nodes)} node(s)",
            )
        missing = self._members_missing()
        self._event(
            originator,
            Reason.GANG_RESERVATION_COMPLETE,
            f"all {placed} placeholders are placed; "
            + (
                f"the real pods start once all {spec.min_members} exist ({spec.min_members - missing} so far), as "
                f"{spec.starts_when_all_exist} starts a gang"
                if missing
                else "swapping the real pods in"
            ),
        )

    def _fits_group(self, member: Pod, group: str, min_resource: Mapping[str, Any], *, releasing: bool = False) -> bool:
        """Whether the member fits in the room its task group reserves for each pod; if not, it is
        told why (the commonest gang mistake: a Spark executor's memory overhead left out of
        minResource), and is scheduled normally."""
        short = shortfalls(pod_requests(member.get("spec", {})), quantities(min_resource))
        if not short:
            return True
        detail = ", ".join(f"{name} {format_quantity(need)} > {format_quantity(have)}" for name, need, have in short)
        released = "releasing one of its placeholders and " if releasing else ""
        self._event(
            member,
            Reason.TASK_GROUP_RESOURCE_MISMATCH,
            f"requests more than task group {group}'s minResource ({detail}); {released}scheduling this pod normally",
        )
        return False

    def _members_missing(self) -> int:
        """How many members must still be created before any may start, where the gang's scheduler starts
        a gang only once its minimum of pods exists (GangSpec.starts_when_all_exist): 0 when none is
        missing, a member already started, or the rule is not the gang's; and once its reservation has
        timed out under a YuniKorn style, which then lets them start (under its own scheduler's timeout
        rule the gang gives its reservation back instead, see _swap)."""
        app, spec = self.app, self.spec
        if spec.starts_when_all_exist is None or any(p.node_name(m) for m in app.members):
            return 0
        deadline = app.reservation_deadline()
        # (A native gang's members never start in part: kube-scheduler's gang plugin waits for them all.)
        yunikorn_style = spec.policy.on_timeout in (OnTimeout.SOFT, OnTimeout.HARD) and not spec.native
        if yunikorn_style and deadline is not None and self.now >= deadline:
            return 0
        live = [m for m in app.members if not p.is_terminal(m) and not p.is_deleting(m)]
        return max(0, spec.min_members - len(live))

    def _refused(self, refusal: str) -> None:
        deadline = self.app.reservation_deadline()
        if deadline is not None and self.now >= deadline:
            self._time_out(f"its placeholders were refused ({refusal})")
            return
        created = len(self.app.live_placeholders())
        self._retry(
            Reason.PLACEHOLDERS_REFUSED,
            f"the API refused to create its placeholders: {refusal}; releasing the reservation "
            f"({created}/{self.spec.min_members} created)",
        )

    def _start(self, members: dict[str, list[Pod]]) -> bool:
        """A pending application: wait out a retry backoff or admission, else begin reserving (or, where
        admission gave its members seats, start them directly). True when placeholders are to be
        created now."""
        app, plan, spec, ticket = self.app, self.plan_, self.spec, self.around.ticket
        record, originator = app.record, self.originator
        deadline = app.pending_deadline()
        if deadline is not None and self.now >= deadline:
            queued = record.queued_since + spec.policy.timeout_s if record.queued_since is not None else None
            if record.retry_after is not None and (queued is None or queued > deadline):
                summary = f"no complete reservation after {record.attempts} attempt(s) in {spec.policy.timeout_s}s"
            else:
                summary = f"not admitted within {spec.policy.timeout_s}s of becoming first in its queue"
                if isinstance(ticket, Waiting):
                    summary += f" ({ticket.message})"
            self._time_out(summary)
            return False
        if record.retry_after is not None and self.now < record.retry_after:
            plan.requeue_after_s = record.retry_after - self.now
            return False
        if isinstance(ticket, Undecided):  # admission's next cycle decides, and wakes it
            if deadline is not None:
                plan.requeue_after_s = max(0.0, deadline - self.now)
            return False
        if isinstance(ticket, Refused):
            self._reject(ticket.reason, ticket.message)
            return False
        if spec.native and (ticket is None or isinstance(ticket, LeftToKubeScheduler)):
            self._leave_to_kube_scheduler(ticket.message if ticket is not None else "admission is off")
            return False
        if isinstance(ticket, Waiting):
            self._wait(ticket, deadline)
            return False
        plan.state = AppState.RESERVING
        if record.queued_since is not None:
            plan.annotate[keys.QUEUED_SINCE] = None
        if isinstance(ticket, Granted) and ticket.warning:
            self._event(originator, Reason.GANG_EXCEEDS_CAPACITY, ticket.warning)
        if isinstance(ticket, Granted) and ticket.domains:
            self.domains = plan.placed_in = ticket.domains
            plan.annotate[keys.TOPOLOGY_DOMAIN] = ticket.domains.text()
        where = f" in {self.domains}" if self.domains else ""
        if isinstance(ticket, Granted) and ticket.lender:
            plan.annotate[keys.BORROWED_FROM] = ticket.lender
            where += f", on its queue's nodes and the idle ones of {ticket.lender} it borrows"
        elif app.record.lender is not None:
            plan.annotate[keys.BORROWED_FROM] = None  # the last attempt's
        if record.retry_after is not None:
            if record.reservation_started is None:  # the attempt after a timeout has a clock of its own
                plan.annotate[keys.RESERVATION_STARTED] = p.format_time(self.now)
            self._event(
                originator,
                Reason.CREATING_PLACEHOLDERS,
                f"attempt {record.attempts + 1}: creating {spec.min_members} placeholder pods again{where}",
            )
            return True
        plan.annotate[keys.RESERVATION_STARTED] = p.format_time(self.now)
        groups = ", ".join(f"{g.name}×{g.min_member}" for g in spec.groups)
        self._event(
            originator,
            Reason.TASK_GROUP_MATCH,
            f"application {app.key.app_id}: gang of {spec.min_members} ({groups}), "
            f"timeout {spec.policy.timeout_s}s, {_timeout_said(spec)}, {spec.mode.value} mode",
        )
        # Seats are for every member admission saw; one gone since (deleted, say) leaves the gang to
        # reserve with placeholders, which wait for it to come back rather than start the rest.
        seated = (
            ticket
            if isinstance(ticket, Granted)
            and ticket.seats
            and all(len(members[group.name]) >= group.min_member for group in spec.groups)
            else None
        )
        if seated is not None:
            self._start_directly(seated, members, where)
        else:
            self._event(
                originator, Reason.CREATING_PLACEHOLDERS, f"creating {spec.min_members} placeholder pods{where}"
            )
            plan.outcomes.append(Outcome.RESERVING)
        for warning in spec.warnings:
            self._event(originator, Reason.TASK_GROUP_WARNING, warning)
        if ticket is None and (spec.topology or any(group.topology for group in spec.groups)):
            self._event(
                originator,
                Reason.TASK_GROUP_WARNING,
                "its topology domains are ignored: admission, which chooses them, is off (--admission=off)",
            )
        return seated is None

    def _start_directly(self, ticket: Granted, members: dict[str, list[Pod]], where: str) -> None:
        """Every member exists and admission found room for the whole gang now, so no placeholder would
        reserve anything admission has not: each member is steered to the node admission chose for it
        and released, all in one pass (each seat holds its group's largest member). Seats lie in the
        topology domains admission chose (and on the nodes of the pool it borrows, if it does), and each
        member is kept in a required domain as it is released (see _finish). `where` says where they are."""
        plan, spec = self.plan_, self.spec
        plan.state = AppState.RESERVED
        plan.outcomes.append(Outcome.STARTED_DIRECTLY)
        plan.annotate[keys.FIRST_ALLOCATED] = p.format_time(self.now)
        if spec.native:
            # kube-scheduler's gang plugin binds the group in one cycle once every gate is off: nothing to
            # steer, and a preference for a seat would only narrow its choice.
            plan.ungate += [member for group in members.values() for member in group]
            self._event(
                self.originator,
                Reason.GANG_STARTING,
                f"all {spec.min_members} pods exist and its queue admits the whole gang{where}: lifting their "
                f"gates together; {spec.starts_when_all_exist} binds them all or none",
            )
            return
        nodes: set[str] = set()
        for group in spec.groups:
            seats = list(ticket.seats_of(group.name))
            nodes.update(seats)
            for member in members[group.name]:
                if seats and self._fits_group(member, group.name, group.min_resource):
                    plan.swaps.append(Swap(member, None, seats.pop(0), group.name, direct=True))
                else:
                    plan.ungate.append(member)
        plan.ungate += members[UNGROUPED]
        self._event(
            self.originator,
            Reason.GANG_STARTING,
            f"all {spec.min_members} pods exist and the whole gang fits now: starting them on {len(nodes)} node(s) "
            f"admission chose{where}, without placeholders",
        )

    def _leave_to_kube_scheduler(self, why: str) -> None:
        """A native gang its queue does not hold: its gates come off with no record written, so from
        then on it is kube-scheduler's alone, as one never gated is, and yuniplace only counts it."""
        self.plan_.ungate += self.app.gated_members()
        self._event(
            self.originator,
            Reason.NATIVE_GANG,
            f"native gang {self.app.key.app_id}: {why}; its gates come off and {self.spec.starts_when_all_exist} alone "
            "binds it all or nothing",
        )

    def _wait(self, ticket: Waiting, deadline: float | None) -> None:
        """Admission holds it back: say why, when that is news, and keep its queue clock."""
        plan, record = self.plan_, self.app.record
        if ticket.announce:
            self._event(self.originator, Reason.GANG_WAITING, ticket.message)
        if not ticket.times_out:
            if record.queued_since is not None:
                plan.annotate[keys.QUEUED_SINCE] = None  # the clock starts again once it is first
        elif record.queued_since is None:
            plan.annotate[keys.QUEUED_SINCE] = p.format_time(self.now)
            deadline = min(self.now + self.spec.policy.timeout_s, deadline or float("inf"))
        if deadline is not None:
            plan.requeue_after_s = max(0.0, deadline - self.now)

    def _give_back(self, why: str) -> None:
        """Its queue holds more than its guarantee, and the queue that lent the room takes it back: a gang
        that runs is evicted, all of its pods at once (or none, where a PodDisruptionBudget forbids);
        one that only holds placeholders gives them back and queues again."""
        app = self.app
        members = [m for m in app.members if not p.is_terminal(m) and not p.is_deleting(m)]
        if not app.started():
            if any(p.is_deleting(m) and p.node_name(m) for m in app.members):
                return  # evicted already: its pods are on their way out
            self._retry(Reason.GANG_PREEMPTED, f"{why}: giving its reservation back")
            return
        self.plan_.evict = members
        self.plan_.delete += [ph for ph in app.live_placeholders() if ph not in self.plan_.delete]
        pods = "its pod" if len(members) == 1 else f"its {len(members)} pods"
        self._event(self.originator, Reason.GANG_PREEMPTED, f"{why}: evicting {pods}")

    def _retry(self, reason: Reason, why: str, *, restart_clock: bool = False) -> None:
        """Give a partial reservation back at once and try again after a backoff: in Strict mode when a
        placeholder cannot be placed (the gang will not fit now), whenever the API refuses to create
        placeholders (a namespace quota, say), and when it times out under the Retry rule. The room it
        held is then free for others. Strict and refused attempts share one timeout, counted from the
        first; `restart_clock` gives the next attempt a whole timeout of its own (else it would time
        out again at once)."""
        plan, record = self.plan_, self.app.record
        attempts = self.app.record.attempts + 1
        backoff = min(MAX_STRICT_BACKOFF_S, self.settings.strict_backoff_s * 2 ** (attempts - 1))
        plan.state = AppState.PENDING
        plan.create.clear()
        plan.delete += [ph for ph in self.app.live_placeholders() if ph not in plan.delete]
        plan.annotate[keys.ATTEMPTS] = str(attempts)
        plan.annotate[keys.RETRY_AFTER] = p.format_time(self.now + backoff)
        if self.domains or keys.TOPOLOGY_DOMAIN in plan.annotate:
            # The domains were the reservation's: the next attempt is given its own.
            plan.annotate[keys.TOPOLOGY_DOMAIN] = None
            self.domains = Domains()
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
        self._event(self.originator, reason, f"{why}; trying again in {backoff:.0f}s (attempt {attempts})")
        plan.requeue_after_s = backoff

    # -- swapping -------------------------------------------------------------------------------------

    def _unreserved(self, live: list[Pod]) -> list[str]:
        """The task groups of a reserved gang that hold fewer placeholders of their size than members to
        seat: members came, since it was reserved, larger than its placeholders or in shapes they were not
        made for (members yet to come of a gang grouped by shapes were reserved as large as the largest
        seen then), or a placeholder went."""
        sizes = {g.name: quantities(g.min_resource) for g in self.spec.groups}
        made = collections.Counter(
            group
            for ph in live
            if (group := self.app.group_of(ph)) in sizes and not shortfalls(sizes[group], self.app.requests_of(ph))
        )
        # A swap interrupted after its placeholder went holds its room by the member's nomination.
        held = {p.name(ph) for ph in live}
        made.update(
            group
            for m in self.app.gated_members()
            if p.nominated_node(m)
            and p.annotations_of(m).get(keys.SWAP_PLACEHOLDER) not in (None, *held)
            and (group := self.app.group_of(m)) is not None
        )
        return [f"{g.name} {made[g.name]}/{g.min_member}" for g in self.spec.groups if made[g.name] < g.min_member]

    def _reserve_again(self, short: list[str], members: dict[str, list[Pod]]) -> None:
        """Before any member starts, reserve what each task group now asks: no member may start into room
        smaller than it, nor without room at all."""
        self.plan_.state = AppState.RESERVING
        self._event(
            self.originator,
            Reason.CREATING_PLACEHOLDERS,
            f"its placeholders no longer hold what its members ask (task group {', '.join(short)} of their size): "
            "reserving that before any member starts",
        )
        self._reserve(members)

    def _swap(self, members: dict[str, list[Pod]]) -> None:
        """Match gated members to placed placeholders of their group, one each; members beyond the
        reserved count run normally. A member already nominated to a node (a swap interrupted by a
        restart) keeps that node and the placeholder there.

        kube-scheduler counts a nominated pod as taking room on its node for every other pod of equal
        priority, itself excepted. While a member swapped earlier is still waiting to be bound on node N,
        nominating another member to N (whose placeholder is still there) would make N look full to the
        first one, and it would move elsewhere. So a node with a member in flight takes no new swap until
        that member is bound: the member is kept for the next reconcile, which its binding triggers.
        Members of other applications count too (`nodes_in_flight`): two gangs swapping onto one node
        make each other's members move just the same."""
        app, plan = self.app, self.plan_
        live = app.live_placeholders()
        claimed: set[str] = set()
        in_flight: set[str] | None = None  # worked out only where a member is to be swapped in
        # Where the gang starts only once all its members exist, none starts before (a new member's
        # creation reconciles the application again); out of time, it gives its reservation back.
        missing = self._members_missing()
        deadline = app.reservation_deadline()
        # A gang started directly (or holding nothing yet) has no placeholder to find too small or short.
        if live and not missing and not app.started() and (short := self._unreserved(live)):
            self._reserve_again(short, members)
            return
        if missing and deadline is not None and self.now >= deadline:
            spec = self.spec
            summary = (
                f"{missing} of its {spec.min_members} pods still do not exist after {spec.policy.timeout_s}s, and "
                f"{spec.starts_when_all_exist} starts a gang only once all exist"
            )
            if spec.native:
                self._time_out(summary)  # its style's rule: tried again later (Soft), or failed (Hard)
            else:
                self._retry(
                    Reason.GANG_RESERVATION_RELEASED, f"{summary}: giving its reservation back", restart_clock=True
                )
            return
        for group in [] if missing else self.spec.groups:
            placed = [ph for ph in live if app.group_of(ph) == group.name and p.node_name(ph)]
            pending: list[Pod] = []
            for member in members[group.name]:
                # A gated member naming its placeholder is a swap interrupted by a restart: it resumes
                # with that placeholder (gone already if step 2 had run) and no other.
                taken = p.annotations_of(member).get(keys.SWAP_PLACEHOLDER)
                node = p.nominated_node(member)
                if taken is None or node is None:
                    pending.append(member)
                    continue
                resumed = next((ph for ph in placed if p.name(ph) == taken and p.uid(ph) not in claimed), None)
                if resumed is not None:
                    claimed.add(p.uid(resumed))
                plan.swaps.append(Swap(member, resumed, node, group.name))
            free = [ph for ph in placed if p.uid(ph) not in claimed]
            if pending and free and in_flight is None:
                in_flight = set(self.around.nodes_in_flight) | app.nodes_in_flight()
            busy = in_flight or set()
            # Placeholders on a node a member is on its way to wait until it lands there (see above).
            ready = collections.deque(ph for ph in free if p.node_name(ph) not in busy)
            blocked = [ph for ph in free if p.node_name(ph) in busy]
            for member in pending:
                # A placeholder holds what its group asked when it was made: a member that came larger
                # since (of a gang already started) does not fit it.
                room = next(iter(ready or blocked), None)
                size = group.min_resource if room is None else _formatted(app.requests_of(room))
                if not self._fits_group(member, group.name, size, releasing=True):
                    spare = blocked.pop() if blocked else ready.pop() if ready else None
                    if spare is not None:
                        claimed.add(p.uid(spare))
                        plan.delete.append(spare)
                    plan.ungate.append(member)
                elif ready:
                    chosen = ready.popleft()
                    claimed.add(p.uid(chosen))
                    plan.swaps.append(Swap(member, chosen, str(p.node_name(chosen)), group.name))
                elif blocked:
                    # Its binding requeues it (on those nodes); the recheck is a safety net.
                    plan.waits_for_nodes.update(str(p.node_name(ph)) for ph in blocked)
                    plan.requeue_after_s = IN_FLIGHT_RECHECK_S
                else:
                    plan.ungate.append(member)

        plan.ungate += members[UNGROUPED]  # scheduled normally, now that the gang is reserved
        if p.node_name(self.originator) and plan.state == AppState.RESERVED:
            plan.state = AppState.RUNNING
        unused = [ph for ph in live if p.uid(ph) not in claimed]
        if unused and plan.requeue_after_s != IN_FLIGHT_RECHECK_S:
            deadline = app.reservation_deadline()
            if deadline is not None and self.now >= deadline:
                plan.delete += unused
                self._event(
                    self.originator,
                    Reason.PLACEHOLDER_TIMEOUT,
                    f"releasing {len(unused)} unused placeholders after {self.spec.policy.timeout_s}s",
                    NORMAL,
                )
            elif deadline is not None:
                plan.requeue_after_s = max(0.0, deadline - self.now)

    def _of_an_earlier_attempt(self, member: Pod) -> bool:
        """Whether the member is what is left of an attempt the gang was restarted from: made before the
        last restart, and ended or going (a Job keeps the pod that failed; a pod on a node deleted goes
        only once the pod garbage collector takes it, a minute on). It says nothing of this attempt."""
        last = self.around.restarts
        going = p.is_terminal(member) or p.is_deleting(member)
        return last is not None and going and p.created_at(member) < last.last_at

    def _acts_on_loss(self) -> bool:
        """Whether a loss makes the gang do something (restart or release it), not only be reported."""
        return self.spec.on_loss.on_loss != OnLoss.NONE and p.controller_of(self.originator) is not None

    def _losses(self) -> Losses:
        """Its losses, among the members of this attempt."""
        members = [m for m in self.app.members if not self._of_an_earlier_attempt(m)]
        ready_timeout_s = self.spec.on_loss.ready_timeout_s
        held = sum(1 for ph in self.app.live_placeholders() if not p.is_terminal(ph))
        return losses_of(
            members,
            self.spec.min_members,
            self.around.node_health,
            Readiness(self.now, ready_timeout_s),
            held,
            started_at=self.app.record.reservation_started,
        )

    def _restarts_on(self, losses: Losses) -> bool:
        """Whether the gang is short for a loss and will restart whole: it then takes no replacement in
        (its Job's new pod for one that failed or went), which would only join members about to be
        evicted, and mend for a moment a job that hangs."""
        if self.spec.on_loss.on_loss != OnLoss.RESTART or p.controller_of(self.originator) is None:
            return False
        return self._degraded(losses)

    def _degraded(self, losses: Losses) -> bool:
        """Below its minimum for a loss; and, once so, until members that run bring it back: room held
        and members on their way make a starting gang whole, not one that lost members."""
        return losses.degraded or (self.app.record.degraded_since is not None and not losses.whole)

    def _watch_losses(self, losses: Losses) -> None:
        """Say when a started gang has been below its minimum for LOSS_GRACE_S (members lost:
        gang/losses.py), act on it as its policy says (gang/onloss.py), and say when it is back. The
        grace lets what ends a gang on purpose (a Spark driver deleting its executors before it
        completes) or mends it at once (a Job replacing a pod) pass unreported; the record keeps since
        when, and whether it was said, so each is said once."""
        app, plan = self.app, self.plan_
        policy = self.spec.on_loss
        record = app.record
        if losses.unready_due is not None:  # look again when a member not Ready yet would count as lost
            self._requeue_within(max(0.0, losses.unready_due - self.now))
        if self._degraded(losses):
            since = record.degraded_since
            if since is None:
                plan.annotate[keys.DEGRADED_SINCE] = p.format_time(self.now)
                self._requeue_within(LOSS_GRACE_S)
                return
            if self.now < since + LOSS_GRACE_S:
                self._requeue_within(since + LOSS_GRACE_S - self.now)
                return
            if not record.degraded_reported:
                plan.annotate[keys.DEGRADED_REPORTED] = "true"
                plan.outcomes.append(Outcome.DEGRADED)
                self._event(
                    self.originator,
                    Reason.GANG_DEGRADED,
                    f"the gang is degraded: {losses.describe()}; {self._what_follows(policy)}",
                )
            self._act_on_loss(losses, since)
        elif record.degraded_since is not None:
            plan.annotate[keys.DEGRADED_SINCE] = None
            plan.annotate[keys.DEGRADED_REPORTED] = None
            if record.degraded_reported:
                done = f", {losses.done} done" if losses.done else ""
                self._event(
                    self.originator,
                    Reason.GANG_RECOVERED,
                    f"back at its minimum after {self.now - record.degraded_since:.0f}s degraded: {losses.up} of "
                    f"{losses.minimum} members up{done}",
                )

    def _what_follows(self, policy: LossPolicy) -> str:
        """What its policy does next, as the GangDegraded event says it."""
        owner = p.controller_of(self.originator)
        if policy.on_loss == OnLoss.RESTART:
            if owner is None:
                return f"{keys.ON_MEMBER_LOST} is restart, but its pods have no owner to make them again: not restarted"
            return f"restarting it whole ({keys.ON_MEMBER_LOST}: restart)"
        if policy.on_loss == OnLoss.RELEASE:
            return (
                f"evicting it whole unless it is back at its minimum within {policy.recovery_timeout_s}s "
                f"({keys.ON_MEMBER_LOST}: release)"
            )
        return f"it keeps running as it is ({keys.ON_MEMBER_LOST}: none)"

    def _act_on_loss(self, losses: Losses, since: float) -> None:
        """Restart or release a degraded gang: evict all of its pods still there together (its owner
        makes them again, and the gang is admitted and started whole as a new attempt), after a
        backoff that doubles with each restart; past its restart limit it fails instead."""
        app, plan, policy = self.app, self.plan_, self.spec.on_loss
        remaining = [m for m in app.members if not p.is_terminal(m) and not p.is_deleting(m)]
        if policy.on_loss == OnLoss.NONE or not remaining:
            return  # only reported; or evicted already, its pods on their way out
        owner = p.controller_of(self.originator)
        if policy.on_loss == OnLoss.RESTART and owner is None:
            return  # said so in the GangDegraded event: nothing would make its pods again
        if policy.on_loss == OnLoss.RELEASE and self.now < since + policy.recovery_timeout_s:
            self._requeue_within(since + policy.recovery_timeout_s - self.now)
            return
        history = self.around.restarts
        count = 0 if history is None else history.count
        owner_uid = "" if owner is None else str(owner.get("uid") or "")
        if history is not None and policy.on_loss == OnLoss.RESTART and count < policy.restart_limit:
            next_at = history.last_at + min(MAX_RESTART_BACKOFF_S, self.settings.restart_backoff_s * 2 ** (count - 1))
            if self.now < next_at:
                self._requeue_within(next_at - self.now)
                return
        plan.evict = remaining
        plan.delete += [ph for ph in app.live_placeholders() if ph not in plan.delete]
        if p.is_terminal(self.originator):  # it stays (a Job keeps its failed pod): its record is over
            for key in (keys.STATE, keys.DEGRADED_SINCE, keys.DEGRADED_REPORTED):
                plan.annotate[key] = None
        pods = "its pod" if len(remaining) == 1 else f"its {len(remaining)} pods"
        lost = f"{losses.minimum - losses.up - losses.done} of its minimum {losses.minimum} members lost"
        if owner is not None and count >= policy.restart_limit:
            plan.state = AppState.FAILED
            plan.outcomes.append(Outcome.RESTARTS_EXHAUSTED)
            plan.restarts = Restarts(owner_uid, count, self.now, failed=True)
            self._event(
                self.originator,
                Reason.APPLICATION_FAILED,
                f"{lost} after {count} restart(s), its limit ({keys.RESTART_LIMIT}: {policy.restart_limit}): the "
                f"application fails; evicting {pods}, and every new pod of it fails at once",
            )
            return
        made_again = "" if owner is None else f" for {owner.get('kind')} {owner.get('name')} to make them again"
        if owner is not None:
            plan.restarts = Restarts(owner_uid, count + 1, self.now)
        attempt = "" if owner is None else f" (restart {count + 1} of at most {policy.restart_limit})"
        if policy.on_loss == OnLoss.RESTART:
            plan.outcomes.append(Outcome.RESTARTED)
            self._event(
                self.originator, Reason.GANG_RESTARTING, f"{lost}: evicting {pods} together{made_again}{attempt}"
            )
        else:
            plan.outcomes.append(Outcome.RELEASED)
            self._event(
                self.originator,
                Reason.GANG_RELEASED,
                f"{lost} for {self.now - since:.0f}s, past its recovery timeout ({policy.recovery_timeout_s}s): "
                f"evicting {pods} to give its room back{made_again}{attempt}",
            )

    def _fail_restarts_exhausted(self, history: Restarts) -> None:
        """A new attempt of a gang that failed past its restart limit (its owner made its pods again):
        each of its pods fails at once, as Hard style fails a gang, so the owner sees them fail."""
        self.plan_.state = AppState.FAILED
        self._release_everything(
            failure=(
                Reason.APPLICATION_FAILED,
                f"application {self.app.key.app_id} failed after {history.count} restart(s) for lost members, its "
                f"limit ({keys.RESTART_LIMIT})",
            )
        )

    def _requeue_within(self, delay_s: float) -> None:
        """Look again within `delay_s`, or sooner if the plan already says so."""
        current = self.plan_.requeue_after_s
        self.plan_.requeue_after_s = delay_s if current is None else min(current, delay_s)


def _formatted(requests: Mapping[str, Decimal]) -> dict[str, str]:
    return {name: format_quantity(amount) for name, amount in requests.items()}


def _unschedulable(pod: Pod) -> str | None:
    """kube-scheduler's message when it found no node for the pod, else None."""
    for condition in pod.get("status", {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == UNSCHEDULABLE
        ):
            return str(condition.get("message") or "no node fits it")
    return None
