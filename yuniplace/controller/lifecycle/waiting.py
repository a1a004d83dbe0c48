"""The phase of an application whose originator is not (or no longer) the one of this attempt: its task
groups have not appeared yet; what is left is of an attempt the gang was restarted from; or the pod
that carried its record went away and another, with no record, takes its place."""

from __future__ import annotations

from yuniplace.controller.lifecycle.context import RESYNC_S, Context, Step
from yuniplace.controller.lifecycle.seats import swap
from yuniplace.controller.lifecycle.table import Trigger
from yuniplace.controller.plan import Failure
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects.registry import dialect_of, pod_group_api
from yuniplace.gang.state import AppState
from yuniplace.runtime.events import Reason


def without_originator(ctx: Context) -> Step | None:
    """Members whose task groups have not appeared (yet: no pod with task groups, no PodGroup, no
    pod of a Volcano task with a minimum): wait for an originator as long as the default timeout,
    then let them run normally rather than hold them forever. Members of a PodGroup that never came
    (nor, maybe, its API: a CRD installed after them) fail instead: their gang's minimum is unknown, and
    let go one by one they could start it in part, which their own schedulers never do either."""
    app, plan = ctx.app, ctx.plan
    gated = app.gated_members()
    # Placeholders without a live originator are garbage collected with it; deleting them here as
    # well covers an originator removed without cascading deletion.
    ctx.delete_placeholders()
    if not gated:
        plan.forget = not app.placeholders
        return Step(Trigger.ENDED) if plan.forget else None
    dialect = dialect_of(gated[0])
    native = dialect is not None and dialect.started_by_kube_scheduler
    if native and app.pod_group is not None:
        # A native pod group under the basic policy is no gang: nothing to hold its pods for.
        plan.ungate += gated
        ctx.event(
            gated[0],
            Reason.NATIVE_GANG,
            f"pod group {app.key.app_id} has no gang policy (no minCount): kube-scheduler schedules its pods one "
            "by one; its gates come off",
        )
        return None
    timeout_s = ctx.settings.limits.default_timeout_s
    expires = min(p.created_at(m) for m in gated) + timeout_s
    if ctx.now < expires:
        plan.requeue_after_s = expires - ctx.now
        return None
    missing = _what_is_missing(ctx, gated)
    api = pod_group_api(gated)
    if api is not None and app.pod_group is None:
        why = (
            f"{missing} after {timeout_s}s: failed rather than started without its gang, which could start in part; "
            f"create the {api.kind} (and its CRD, {api.path.removeprefix('/apis/')}, where it is not installed), "
            "then the pods again"
        )
        plan.fail += [Failure(member, Reason.RESOURCE_RESERVATION_TIMEOUT, why) for member in gated]
        return None
    for member in gated:
        plan.ungate.append(member)
        ctx.event(member, Reason.GANG_SCHEDULING_FAILED, f"{missing} after {timeout_s}s; scheduling this pod normally")
    return None


def _what_is_missing(ctx: Context, gated: list[p.Pod]) -> str:
    """Why its members found no originator, in the words of their dialect."""
    app = ctx.app
    dialect = dialect_of(gated[0])
    api = pod_group_api(gated)
    tasks = api.missing_tasks(app.pod_group, app.members) if api is not None and app.pod_group is not None else []
    if dialect is not None and dialect.started_by_kube_scheduler:
        return (
            f"{dialect.named_by(gated[0])} names no pod group {app.key.app_id} of the Workload API in this "
            "namespace (kube-scheduler keeps such a pod unschedulable until it is created)"
        )
    if api is not None and app.pod_group is None:
        return f"{api.named_by} names no PodGroup {app.key.app_id} of this namespace"
    if tasks:  # e.g. a Volcano PodGroup's minTaskMember names tasks that have no pod
        return f"no pod of task(s) {', '.join(tasks)} of PodGroup {app.key.app_id} exists"
    return f"no pod of application {app.key.app_id} defines {keys.TASK_GROUPS}"


def of_an_earlier_attempt(ctx: Context) -> bool:
    return ctx.app.originator is not None and ctx.of_an_earlier_attempt(ctx.originator)


def next_attempt(ctx: Context) -> Step | None:
    """Only what is left of an attempt the gang was restarted from (a failed pod its Job keeps): it says
    nothing of the next attempt, which begins once its owner makes its pods again."""
    ctx.plan.requeue_after_s = RESYNC_S
    return None


def carry_on(ctx: Context) -> Step | None:
    """Take up a gang whose record went with its originator where it stands: its members still held
    (a Job's replacement of a pod that went) start as late members do, or fail as it did."""
    state = ctx.successor
    if state == AppState.RUNNING:
        return swap(ctx) or Step(Trigger.SEEN_RUNNING)
    if state == AppState.FAILED:
        failure = (Reason.APPLICATION_FAILED, f"application {ctx.app.key.app_id} has failed; see its pods' events")
        ctx.release_everything(failure=failure)
        return Step(Trigger.FAILED)
    ctx.release_everything()
    return Step(Trigger.FELL_BACK)
