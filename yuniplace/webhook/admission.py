"""Admission decisions as pure functions of an AdmissionReview (v1), so every rule is unit-tested
without a server.

The apiserver only calls the webhook for pods with gang annotations (the chart's matchConditions),
but the decisions check it again: a pod that is not a gang pod is always allowed, untouched. The
mutating webhook sees creations; the validating one sees updates too, because the annotations
yuniplace reads can be edited on a running pod (`kubectl annotate`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from yuniplace.gang import keys, native
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import POD_GROUP_APIS, Dialect, dialect_of, ignored_dialect, own_problems
from yuniplace.gang.taskgroups import (
    DNS1123_LABEL,
    InvalidGang,
    Limits,
    check_member,
    parse_policy,
)

YUNIKORN_SCHEDULER = "yunikorn"
DEFAULT_SCHEDULER = p.DEFAULT_SCHEDULER


def _response(
    review: Mapping[str, Any],
    *,
    allowed: bool = True,
    message: str = "",
    patch: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    answer: dict[str, Any] = {"uid": review.get("request", {}).get("uid", ""), "allowed": allowed}
    if warnings:
        answer["warnings"] = warnings
    if message:
        answer["status"] = {
            "code": 200 if allowed else 400,
            "reason": "Invalid" if not allowed else "",
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


def is_gang_pod(pod: Mapping[str, Any], schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS) -> bool:
    """A pod yuniplace must hold back: a real pod of a gang in any dialect it reads (YuniKorn's task
    groups or task-group name, Coscheduling labels, Koordinator annotations, a PodGroup label,
    Volcano's group-name annotation), meant for a scheduler yuniplace works with (a pod for YuniKorn's
    or Volcano's own scheduler is that scheduler's business). A pod of a native pod group never is:
    kube-scheduler gangs it itself."""
    if p.is_placeholder(pod) or p.scheduler_name(pod) not in schedulers:
        return False
    return dialect_of(pod) not in (None, Dialect.NATIVE)


def native_warnings(pod: Mapping[str, Any]) -> list[str]:
    """What a pod of a native pod group that also describes a gang in another dialect is told: its
    gang is kube-scheduler's, and the other one is ignored."""
    also = ignored_dialect(pod)
    if also is None:
        return []
    return [
        f"yuniplace: this pod belongs to native pod group {native.group_of(pod)} ({native.named_by(pod)}), which "
        f"kube-scheduler gang-schedules itself; its {also.value} gang annotations or labels are ignored and the pod "
        "is neither gated nor given placeholders"
    ]


def mutate(
    review: Mapping[str, Any],
    *,
    rewrite_scheduler_name: bool | Callable[[], bool] = False,
    schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS,
) -> dict[str, Any]:
    """Gate a gang pod; rewrite `schedulerName: yunikorn` when asked (a callable is asked only for
    such pods, since asking may cost an API call)."""
    pod = _pod(review)
    if pod is None:
        return _response(review)
    spec = pod.get("spec") or {}
    patch: list[dict[str, Any]] = []
    names_yunikorn = spec.get("schedulerName") == YUNIKORN_SCHEDULER
    if names_yunikorn and (rewrite_scheduler_name() if callable(rewrite_scheduler_name) else rewrite_scheduler_name):
        patch.append({"op": "replace", "path": "/spec/schedulerName", "value": DEFAULT_SCHEDULER})
        pod = {**pod, "spec": {**spec, "schedulerName": DEFAULT_SCHEDULER}}
    # A pod created already bound (spec.nodeName) cannot carry a scheduling gate; nothing to hold.
    if is_gang_pod(pod, schedulers) and not spec.get("nodeName"):
        gates = spec.get("schedulingGates")
        if not gates:
            patch.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]})
        elif not any(g.get("name") == keys.GATE for g in gates):
            patch.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": keys.GATE}})
    return _response(review, patch=patch, warnings=native_warnings(pod))


def problems_of(
    pod: Mapping[str, Any], limits: Limits = Limits(), schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS
) -> str | None:
    """Why the pod's gang annotations cannot be used, or None when they can (or it has none)."""
    if not is_gang_pod(pod, schedulers):
        return None
    dialect = dialect_of(pod)
    if dialect in POD_GROUP_APIS:
        # Its PodGroup may be created after it, and the controller reports a missing one: only what
        # the pod says itself is checked here.
        problems = own_problems(pod, dialect, limits)
        return str(InvalidGang(problems)) if problems else None
    # The pod as the application it would be on its own: what the controller will read of it.
    app = Application.of(p.AppKey("", ""), [dict(pod)], limits=limits)
    if app.problem is not None:
        return str(app.problem)
    group = p.task_group_name(pod)
    try:
        if app.spec is not None:
            if group is not None:
                check_member(app.spec, group)
        else:
            parse_policy(p.annotations_of(pod).get(keys.SCHEDULING_POLICY_PARAMETERS), limits)
    except InvalidGang as error:
        return str(error)
    if group is not None and (len(group) > 63 or not DNS1123_LABEL.match(group)):
        return (
            f'{keys.TASK_GROUP_NAME}: "{group}" must be a DNS-1123 label '
            "(lower-case letters, digits, '-'; at most 63)"
        )
    return None


def validate(
    review: Mapping[str, Any], limits: Limits = Limits(), schedulers: frozenset[str] = p.DEFAULT_SCHEDULERS
) -> dict[str, Any]:
    """Deny a gang pod created with annotations yuniplace cannot use, or updated into having them. An
    update that leaves an old problem as it was is let through: the pod exists either way, and
    refusing every edit of it (its labels, say) would help nobody; the controller reports it."""
    pod = _pod(review, operations=("CREATE", "UPDATE"))
    problem = None if pod is None else problems_of(pod, limits, schedulers)
    if problem is not None and review.get("request", {}).get("operation") == "UPDATE":
        old = _pod(review, "oldObject", ("UPDATE",))
        if old is None or problems_of(old, limits, schedulers) == problem:
            problem = None
    if problem is None:
        return _response(review)
    name = (pod or {}).get("metadata", {}).get("name") or (pod or {}).get("metadata", {}).get("generateName", "") + "…"
    return _response(review, allowed=False, message=f"yuniplace: pod {name} has invalid gang annotations: {problem}")
