"""Admission decisions as pure functions of an AdmissionReview (v1), so every rule is unit-tested
without a server.

The apiserver only calls the webhook for pods with gang annotations, and for workloads whose pod
template has them (the chart's matchConditions), but the decisions check it again: a pod or workload
that is not a gang's is always allowed, untouched. The mutating webhook sees pod creations (it gates
the pod, records its requester, webhook/identity.py, and denies gang annotations yuniplace cannot use)
and workload creations and updates (the requester's record); the validating one sees pod updates,
because the annotations yuniplace reads can be edited on a running pod (`kubectl annotate`).

A pod's creation is decided by the mutating webhook alone, as YuniKorn's admission controller does:
reviewed by both, every gang pod cost the API server two round trips to the webhook as it was created,
and the webhook's process two reviews. What a mutating webhook ordered after this one might write into
a pod's gang annotations is read by the controller as any other input, and an unusable gang is told
there (TaskGroupsError).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects.registry import dialect_of, ignored_dialect
from yuniplace.gang.taskgroups import (
    DNS1123_LABEL,
    InvalidGang,
    Limits,
    check_member,
    loss_policy_of,
)
from yuniplace.webhook import identity
from yuniplace.webhook.identity import DEFAULT_TRUST, Trust

YUNIKORN_SCHEDULER = "yunikorn"
# Another batch scheduler whose users bring pods with `schedulerName: ai-scheduler`.
AI_SCHEDULER = "ai-scheduler"
# The name KubeRay's `scheduler-plugins` batch scheduler (and other operators' for scheduler-plugins)
# gives pods: that of scheduler-plugins' second scheduler, as its Helm chart installs it.
SCHEDULER_PLUGINS_SCHEDULER = "scheduler-plugins-scheduler"
# Schedulers whose pods the webhook may hand to the default scheduler unless told others (rewrite.py
# decides when).
REWRITTEN_SCHEDULERS = (YUNIKORN_SCHEDULER, AI_SCHEDULER, SCHEDULER_PLUGINS_SCHEDULER)
DEFAULT_SCHEDULER = p.DEFAULT_SCHEDULER
# Whether to hand pods naming a scheduler to the default one: asked with the scheduler's name (False for
# a name not taken over), or, as a bool, for the schedulers of REWRITTEN_SCHEDULERS alike.
Rewrite = bool | Callable[[str], bool]


def _response(
    review: Mapping[str, Any],
    *,
    allowed: bool = True,
    message: str = "",
    patch: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
    forbidden: bool = False,
) -> dict[str, Any]:
    """`forbidden`: the refusal is about who asked (403), not about what the object says (400)."""
    answer: dict[str, Any] = {"uid": review.get("request", {}).get("uid", ""), "allowed": allowed}
    if warnings:
        answer["warnings"] = warnings
    if message:
        answer["status"] = {
            "code": 200 if allowed else 403 if forbidden else 400,
            "reason": "" if allowed else "Forbidden" if forbidden else "Invalid",
            "message": message,
        }
    if patch:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}


def _pod(
    review: Mapping[str, Any], field: str = "object", operations: tuple[str, ...] = ("CREATE",)
) -> dict[str, Any] | None:
    request = review.get("request") or {}
    if request.get("kind", {}).get("kind") != "Pod" or request.get("operation") not in operations:
        return None
    pod = request.get(field)
    return pod if isinstance(pod, dict) else None


def is_gang_pod(
    pod: Mapping[str, Any], schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS, *, hold_native: bool = False
) -> bool:
    """A pod yuniplace must hold back: a real pod of a gang in any dialect it reads (YuniKorn's task
    groups or task-group name, Coscheduling labels, Koordinator annotations, a PodGroup label,
    Volcano's group-name annotation), meant for a scheduler yuniplace works with (a pod for YuniKorn's
    or Volcano's own scheduler is that scheduler's business). A pod of a native pod group is one only
    where native gangs are held (`hold_native`: the request came through the webhook for them, which
    namespaces may opt out of); elsewhere kube-scheduler gangs it alone."""
    if p.is_placeholder(pod) or p.scheduler_name(pod) not in schedulers:
        return False
    dialect = dialect_of(pod)
    return dialect is not None and (hold_native or not dialect.started_by_kube_scheduler)


def native_warnings(pod: Mapping[str, Any]) -> list[str]:
    """What a pod of a native pod group that also describes a gang in another dialect is told: its
    gang is the native one, and the other is ignored."""
    also = ignored_dialect(pod)
    dialect = dialect_of(pod)
    if also is None or dialect is None:
        return []
    return [
        f"yuniplace: this pod belongs to native pod group {dialect.gang_name(pod)} ({dialect.named_by(pod)}), which "
        f"kube-scheduler gang-schedules itself; its {also.title} gang annotations or labels are ignored"
    ]


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("name") or str(metadata.get("generateName", "")) + "…")


def _named(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod with a name: one created with a generateName has none yet when the mutating webhooks
    see it (the API server names it after them), and what is said of it names it by its prefix."""
    metadata = pod.get("metadata") or {}
    return {**pod, "metadata": {**metadata, "name": _name(pod)}}


def _rewritten(pod: Mapping[str, Any], rewrite: Rewrite) -> dict[str, Any] | None:
    """The pod (or pod template) with its schedulerName handed to the default scheduler, when it names
    a scheduler whose pods are taken over and the rewrite is wanted for it; else None. A callable is
    asked, with the scheduler's name, only for pods naming another scheduler than the default."""
    spec = pod.get("spec") or {}
    name = spec.get("schedulerName")
    if not isinstance(name, str) or name in ("", DEFAULT_SCHEDULER):
        return None
    if not (rewrite(name) if callable(rewrite) else rewrite and name in REWRITTEN_SCHEDULERS):
        return None
    return {**pod, "spec": {**spec, "schedulerName": DEFAULT_SCHEDULER}}


def _gang_template(
    workload: Mapping[str, Any], path: tuple[str, ...], rewrite: Rewrite, schedulers: frozenset[str]
) -> Mapping[str, Any] | None:
    """The workload's pod template when the pods made from it will be gang pods, else None."""
    template: Any = workload
    for key in path:
        template = template.get(key) if isinstance(template, Mapping) else None
    if not isinstance(template, Mapping):
        return None
    return template if is_gang_pod(_rewritten(template, rewrite) or template, schedulers) else None


def _mutate_workload(
    review: Mapping[str, Any], path: tuple[str, ...], rewrite: Rewrite, schedulers: frozenset[str], trust: Trust
) -> dict[str, Any]:
    """Record who created a workload whose pods will be gang pods on its pod template, so the pods its
    controller makes carry it; keep that record as it is through updates."""
    request = review.get("request") or {}
    workload, operation = request.get("object"), request.get("operation")
    if operation not in ("CREATE", "UPDATE") or not isinstance(workload, dict):
        return _response(review)
    template = _gang_template(workload, path, rewrite, schedulers)
    if template is None:
        return _response(review)
    vetted = None
    if operation == "UPDATE":
        old = request.get("oldObject")
        old_template = _gang_template(old, path, rewrite, schedulers) if isinstance(old, dict) else None
        vetted = (old_template.get("metadata") or {}) if old_template is not None else None
    kind = str(request.get("kind", {}).get("kind"))
    who = identity.requester(request)
    verdict = identity.check(
        template.get("metadata") or {},
        "/" + "/".join(path) + "/metadata",
        vetted=vetted,
        who=who,
        trust=trust,
        subject=f"{kind} {_name(workload)}: its pod template",
        # A ReplicaSet a controller creates must keep its Deployment's template exactly: with anything
        # added, the Deployment controller no longer finds it its own and creates another, endlessly.
        add=not (kind == "ReplicaSet" and who is not None and trust.is_controller(who)),
        restore=True,
    )
    if verdict.denial is not None:
        return _response(review, allowed=False, message=verdict.denial, forbidden=True)
    return _response(review, patch=list(verdict.patch), warnings=list(verdict.warnings))


def mutate(
    review: Mapping[str, Any],
    *,
    rewrite_scheduler_name: Rewrite = False,
    schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS,
    trust: Trust = DEFAULT_TRUST,
    hold_native: bool = False,
    admitted: Callable[[Mapping[str, Any]], bool] = lambda _pod: False,
    limits: Limits = Limits(),
) -> dict[str, Any]:
    """Gate a gang pod and record who created it, or deny it when its gang annotations cannot be used;
    record who created a gang workload on its pod template; rewrite the schedulerName of a scheduler
    whose pods are taken over when asked. Pods of native pod groups are gang pods only with
    `hold_native` (the webhook for them); of those, a member of a gang its queue has admitted already
    (`admitted`, where the webhook serves in the controller's process) is not gated: the gang plugin
    holds it with the rest."""
    request = review.get("request") or {}
    kind = request.get("kind") or {}
    path = identity.TEMPLATES.get((str(kind.get("group")), str(kind.get("kind"))))
    if path is not None:
        return _mutate_workload(review, path, rewrite_scheduler_name, schedulers, trust)
    pod = _pod(review)
    if pod is None:
        return _response(review)
    patch: list[dict[str, Any]] = []
    rewritten = _rewritten(pod, rewrite_scheduler_name)
    if rewritten is not None:
        patch.append({"op": "replace", "path": "/spec/schedulerName", "value": DEFAULT_SCHEDULER})
        pod = rewritten
    problem = problems_of(_named(pod), limits, schedulers)
    if problem is not None:
        return _invalid(review, pod, problem)
    spec = pod.get("spec") or {}
    # Told once, by the webhook every gang pod goes through, whether or not native gangs are held.
    warnings = [] if hold_native else native_warnings(pod)
    if is_gang_pod(pod, schedulers, hold_native=hold_native):
        # A pod created already bound (spec.nodeName) cannot carry a scheduling gate; nothing to hold.
        if not spec.get("nodeName") and not (hold_native and admitted(pod)):
            gates = spec.get("schedulingGates")
            if not gates:
                patch.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]})
            elif not any(g.get("name") == keys.GATE for g in gates):
                patch.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": keys.GATE}})
        verdict = identity.check(
            pod.get("metadata") or {},
            "/metadata",
            vetted=None,
            who=identity.requester(request),
            trust=trust,
            subject=f"pod {_name(pod)}",
            add=True,
            restore=False,
        )
        if verdict.denial is not None:
            return _response(review, allowed=False, message=verdict.denial, forbidden=True)
        patch.extend(verdict.patch)
        warnings.extend(verdict.warnings)
    return _response(review, patch=patch, warnings=warnings)


def problems_of(
    pod: Mapping[str, Any], limits: Limits = Limits(), schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS
) -> str | None:
    """Why the pod's gang annotations cannot be used, or None when they can (or it has none)."""
    if not is_gang_pod(pod, schedulers):
        return None
    dialect = dialect_of(pod)
    if dialect is not None and dialect.pod_groups is not None:
        # Its PodGroup may be created after it, and the controller reports a missing one: only what
        # the pod says itself is checked here.
        problems = dialect.own_problems(pod, limits)
        loss_policy_of(p.annotations_of(pod), limits.on_loss, problems)  # read on the pod in every dialect
        return str(InvalidGang(problems)) if problems else None
    # The pod as the application it would be on its own: what the controller will read of it.
    app = Application.of(p.AppKey("", ""), [dict(pod)], limits=limits)
    if app.problem is not None:
        return str(app.problem)
    group = p.task_group_name(pod)
    if app.spec is None and dialect is not None:
        # A member that does not describe its gang: what it says of itself.
        problems = dialect.own_problems(pod, limits)
        if problems:
            return str(InvalidGang(problems))
    try:
        if app.spec is not None and group is not None:
            check_member(app.spec, group)
    except InvalidGang as error:
        return str(error)
    if group is not None and (len(group) > 63 or not DNS1123_LABEL.match(group)):
        return (
            f'{keys.TASK_GROUP_NAME}: "{group}" must be a DNS-1123 label '
            "(lower-case letters, digits, '-'; at most 63)"
        )
    return None


def validate(
    review: Mapping[str, Any],
    limits: Limits = Limits(),
    schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS,
    trust: Trust = DEFAULT_TRUST,
) -> dict[str, Any]:
    """Deny an update of a gang pod that makes its annotations unusable, and one of its recorded
    requester by anyone not trusted to write it (its creation is decided by `mutate`). An update that
    leaves an old problem as it was is let through: the pod exists either way, and refusing every edit
    of it (its labels, say) would help nobody; the controller reports it."""
    request = review.get("request") or {}
    pod = _pod(review, operations=("UPDATE",))
    old = _pod(review, "oldObject", ("UPDATE",))
    if pod is not None and is_gang_pod(pod, schedulers):
        verdict = identity.check(
            pod.get("metadata") or {},
            "/metadata",
            vetted=(old.get("metadata") or {}) if old is not None and is_gang_pod(old, schedulers) else None,
            who=identity.requester(request),
            trust=trust,
            subject=f"pod {_name(pod)}",
            add=False,
            restore=False,
        )
        if verdict.denial is not None:
            return _response(review, allowed=False, message=verdict.denial, forbidden=True)
    problem = None if pod is None else problems_of(pod, limits, schedulers)
    if problem is None or pod is None or old is None or problems_of(old, limits, schedulers) == problem:
        return _response(review)
    return _invalid(review, pod, problem)


def _invalid(review: Mapping[str, Any], pod: Mapping[str, Any], problem: str) -> dict[str, Any]:
    return _response(
        review, allowed=False, message=f"yuniplace: pod {_name(pod)} has invalid gang annotations: {problem}"
    )
