"""What a gang whose reservation runs out of time does: one rule per `OnTimeout`, each with the words
that announce it, what follows (its decision) and the writes that carry it out (its action). The
rule is the gang's own scheduler's, or the style its pod names (taskgroups.Policy.on_timeout); a new
rule is one entry of `ON_TIMEOUT`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

from yuniplace.controller.lifecycle.acts import give_back
from yuniplace.controller.lifecycle.context import Context, Step
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.controller.restarts import Restarts
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, OnTimeout
from yuniplace.runtime.events import Reason


def timed_out_mark(spec: GangSpec) -> str:
    mark = spec.timed_out_mark
    assert mark is not None, "a dialect whose rule marks timed-out pods names its mark"
    return mark


class Rule:
    """A timeout rule. `lets_members_start`: once out of time, members of a gang whose scheduler starts
    it only when all exist may start anyway (YuniKorn's styles); else the gang gives its reservation
    back instead."""

    said: ClassVar[str] = ""
    lets_members_start: ClassVar[bool] = False

    def says(self, spec: GangSpec) -> str:
        """What the TaskGroupMatch event says it does if it times out."""
        return self.said

    def decide(self, ctx: Context) -> Trigger:
        raise NotImplementedError

    def act(self, ctx: Context, summary: str) -> Step:
        raise NotImplementedError


class Soft(Rule):
    """YuniKorn's Soft style: placeholders go, its pods are scheduled normally. Two gangs wait for the next
    attempt instead, still gated: one that requires a topology domain and holds none, as Kueue keeps such
    a workload pending (scheduled one by one, it would spread over any nodes); and one whose reservation
    counted on nodes an autoscaler was to make (scheduled one by one, it would start in part on the nodes
    made for it, and the autoscaler would make more for the rest up to its limits), so the nodes made
    for it are given back."""

    said = "Soft style"
    lets_members_start = True

    def decide(self, ctx: Context) -> Trigger:
        waits = (ctx.spec.topology_required and not ctx.domains) or bool(ctx.app.record.grows)
        return Trigger.GAVE_BACK if waits else Trigger.FELL_BACK

    def act(self, ctx: Context, summary: str) -> Step:
        if self.decide(ctx) == Trigger.GAVE_BACK:
            why = (
                f"its reservation counted on nodes NodePool {', '.join(ctx.app.record.grows)} was to make, so "
                "rather than schedule its pods normally (Soft style), where they would start in part on the "
                "nodes made for it, its placeholders are removed (the nodes made are given back) and its pods "
                "wait, still gated, for the next attempt"
                if ctx.app.record.grows
                else "its pods must share a topology domain and none was found for them, so rather than "
                "schedule them spread out (Soft style), its pods wait, still gated, for the next attempt"
            )
            return give_back(
                ctx,
                Reason.GANG_RESERVATION_RELEASED,
                f"gang reservation timed out ({summary}); {why}",
                restart_clock=True,
            )
        ctx.event(
            ctx.originator,
            Reason.GANG_SCHEDULING_FAILED,
            f"gang reservation timed out ({summary}); Soft style: placeholders removed, pods scheduled normally",
        )
        ctx.release_everything()
        return Step(Trigger.FELL_BACK)


class Hard(Rule):
    """YuniKorn's Hard style: placeholders go, its gated pods fail."""

    said = "Hard style"
    lets_members_start = True

    def decide(self, ctx: Context) -> Trigger:
        return Trigger.FAILED

    def act(self, ctx: Context, summary: str) -> Step:
        message = f"gang reservation timed out ({summary}); Hard style fails the application"
        ctx.event(ctx.originator, Reason.APPLICATION_FAILED, message + _count_attempt(ctx))
        ctx.release_everything(failure=(Reason.RESOURCE_RESERVATION_TIMEOUT, message))
        return Step(self.decide(ctx))


def _count_attempt(ctx: Context) -> str:
    """An owner may make the failed gang again (KubeRay makes a Ray cluster's failed pods again): each
    attempt out of time is counted for it, with the restarts, against the gang's restart limit, so that
    such attempts back off and end. What the event adds about it."""
    owner = p.controller_of(ctx.originator)
    if owner is None:
        return ""
    limit = ctx.spec.on_loss.restart_limit
    kept = ctx.around.restarts or Restarts((), 0, 0.0)
    owners = tuple(sorted({*kept.owners, *ctx.app.owners}))
    timeouts = kept.timeouts + 1
    failed = kept.failed or timeouts > limit
    ctx.plan.restarts = replace(kept, owners=owners, timeouts=timeouts, timed_out_at=ctx.now, failed=failed)
    if failed:
        return (
            f"; {timeouts} of its attempts ran out of time, past its limit ({keys.RESTART_LIMIT}: {limit}): every "
            f"new pod {owner.get('kind')} {owner.get('name')} makes of it fails at once"
        )
    return (
        f"; if {owner.get('kind')} {owner.get('name')} makes it again, attempt {timeouts + 1} of at most {limit + 1} "
        "waits a backoff before it reserves"
    )


class Retry(Rule):
    """Coscheduling's, a PodGroup's, Volcano's: placeholders go and the gang is reserved again after a
    backoff, its clock started afresh; its pods never start without it."""

    said = "reserved again after a backoff if it times out"

    def decide(self, ctx: Context) -> Trigger:
        return Trigger.GAVE_BACK

    def act(self, ctx: Context, summary: str) -> Step:
        return give_back(
            ctx,
            Reason.GANG_RESERVATION_RELEASED,
            f"gang reservation timed out ({summary}); as a timed-out PodGroup backs off, its placeholders "
            "are removed and its pods wait, still gated, for the next attempt",
            restart_clock=True,
        )


class MarkTimedOut(Rule):
    """Koordinator's: its pods are marked timed out and never scheduled (ending.keep_timed_out)."""

    def says(self, spec: GangSpec) -> str:
        return f"its pods marked {spec.timed_out_mark}=true and never scheduled if it times out"

    def decide(self, ctx: Context) -> Trigger:
        return Trigger.MARKED

    def act(self, ctx: Context, summary: str) -> Step:
        mark = timed_out_mark(ctx.spec)
        ctx.plan.annotate[mark] = "true"
        ctx.event(
            ctx.originator,
            Reason.GANG_TIMED_OUT,
            f"gang {ctx.app.key.app_id} timed out ({summary}): as Koordinator does, its pods are marked "
            f"{mark}=true and will not be scheduled; delete them and create them again to schedule the gang",
        )
        return Step(self.decide(ctx))


ON_TIMEOUT: Mapping[OnTimeout, Rule] = {
    OnTimeout.SOFT: Soft(),
    OnTimeout.HARD: Hard(),
    OnTimeout.RETRY: Retry(),
    OnTimeout.MARK_TIMED_OUT: MarkTimedOut(),
}


def rule_of(spec: GangSpec) -> Rule:
    return ON_TIMEOUT[spec.policy.on_timeout]


def expire(ctx: Context, step: Step) -> Step:
    """The reservation ran out of time (`step.why` says how): say so, and follow the gang's rule. Where
    its room was to come from an autoscaler, the words say which, as the likeliest cause."""
    why = step.why
    if ctx.app.record.grows and ctx.app.state == AppState.RESERVING:
        why += (
            f"; its nodes were to come from NodePool {', '.join(ctx.app.record.grows)}, which made room for part of it"
        )
    ctx.event(ctx.originator, Reason.PLACEHOLDER_TIMEOUT, f"gang reservation timed out: {why}")
    return rule_of(ctx.spec).act(ctx, why)


def is_marked(pod: p.Pod, spec: GangSpec | None) -> bool:
    """Whether the pod carries its dialect's mark of a gang that timed out."""
    mark = spec.timed_out_mark if spec is not None else None
    return mark is not None and p.annotations_of(pod).get(mark) == "true"
