"""Task groups shaped like pods: how gangs written in other dialects than YuniKorn's, which say "N pods
like these" rather than describing each kind of pod, become task groups yuniplace can reserve room for.

Such a gang is rarely uniform: an MPI launcher is smaller than its workers, a Ray head differs from each
worker group, an operator adds init containers of its own. So each member belongs to the task group of
its own shape (its requests and where it may go) and role (the replica type its operator labels it
with): a pure function of the pod, which never changes as other members come and go, and a group never
holds a pod larger than what it reserves for each. Members yet to come, whose shapes cannot be known,
are reserved as large as the largest seen, and at least as large as the gang's stated total
(a PodGroup's `minResources`) asks.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from yuniplace.gang.keys import Key
from yuniplace.gang.resources import format_quantity, pod_requests, quantities, total
from yuniplace.gang.taskgroups import QUANTITY, Problem
from yuniplace.kube import parse_quantity

# The role of a gang whose operator labels none; and the one task group of a Volcano gang whose
# PodGroup lists no task minimums, named after its originator's task when it has one.
MEMBER_GROUP = "members"
# The labels by which operators mark each pod's replica type, first found: KubeRay's group (the head
# group or a worker group), Kubeflow's training jobs' replica type, the MPI operator's role, JobSet's
# replicated job (Kubeflow Trainer), Spark's role. A member's task group is named after it.
ROLE_LABELS = (
    "ray.io/group",
    "training.kubeflow.org/replica-type",
    "training.kubeflow.org/job-role",
    "jobset.sigs.k8s.io/replicatedjob-name",
    "spark-role",
)
KEYS = tuple(
    Key(
        label,
        "label",
        "gang member of another dialect",
        "its operator",
        "the member's role (its replica type): "
        "its task group is named after it and a digest of its shape, first found of these labels",
    )
    for label in ROLE_LABELS
)
MAX_ROLE_CHARS = 40
# What makes two pods alike for a reservation: what shaped_group copies of a pod.
SHAPE_FIELDS = ("minResource", "nodeSelector", "tolerations", "affinity")
SHAPE_DIGITS = 6
# Kubernetes' count of pods: a PodGroup may put it in minResources, and no container requests it.
POD_COUNT = "pods"


def whole_number(value: Any, where: str, problems: list[Problem], *, most: int) -> int:
    """A count of pods, as a label (a string) or an API field (an integer) writes it; from 1 to `most`
    (the limit yuniplace is configured with). A problem names `where`, the key the user wrote."""
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value):
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        number = 0
    if number < 1:
        problems.append(Problem(where, value, "must be a whole number of pods, at least 1"))
    elif number > most:
        problems.append(Problem(where, value, f"must be at most {most} pods, yuniplace's limit for a gang"))
    return number


def shaped_group(
    pod: Mapping[str, Any], name: str, min_member: int, where: str, problems: list[Problem]
) -> dict[str, Any]:
    """A YuniKorn task-group object of `min_member` pods like `pod`: its requests, node selector,
    tolerations and node affinity. `where` names what set the count, for the message when the pod
    requests nothing (a placeholder could then hold no room)."""
    spec = pod.get("spec", {})
    requests = {key: format_quantity(amount) for key, amount in pod_requests(spec).items() if amount > 0}
    if not requests:
        problems.append(
            Problem(
                f"{where}: pod {pod.get('metadata', {}).get('name')} requests",
                {},
                "are empty; a gang reserves room by the members' requests, so set cpu/memory requests",
            )
        )
    group: dict[str, Any] = {"name": name, "minMember": min_member, "minResource": requests}
    for field in ("nodeSelector", "tolerations"):
        if spec.get(field):
            group[field] = spec[field]
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        group["affinity"] = {"nodeAffinity": node_affinity}
    return group


def shape_key(group: Mapping[str, Any]) -> str:
    """A short digest of a task-group object's shape: equal for pods that reserve the same room in the
    same places."""
    shape = {field: group[field] for field in SHAPE_FIELDS if field in group}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:SHAPE_DIGITS]


def role_of(pod: Mapping[str, Any]) -> str:
    """The replica type the pod's operator labels it with, as a DNS-1123 label; MEMBER_GROUP without."""
    labels = pod.get("metadata", {}).get("labels") or {}
    role = next((value for key in ROLE_LABELS if isinstance(value := labels.get(key), str) and value), "")
    cleaned = re.sub(r"[^a-z0-9-]+", "-", role.lower())[:MAX_ROLE_CHARS].strip("-")
    return cleaned or MEMBER_GROUP


def member_group(pod: Mapping[str, Any]) -> str:
    """The task group of a member of an "N pods like these" gang: its role and its shape."""
    return f"{role_of(pod)}-{shape_key(shaped_group(pod, '', 1, '', []))}"


def min_resources(raw: Any, where: str, problems: list[Problem]) -> dict[str, Decimal]:
    """A PodGroup's `spec.minResources` (scheduler-plugins' and Volcano's alike), checked; the count of
    pods left out. `where` names the field, for problems."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(Problem(where, raw, "must be an object of resource quantities"))
        return {}
    wanted: dict[str, Decimal] = {}
    for name, value in sorted(raw.items()):
        text = value if isinstance(value, str) else json.dumps(value)
        if isinstance(value, bool) or not QUANTITY.match(text):
            problems.append(Problem(f"{where}.{name}", value, 'is not a quantity such as "500m" or "2Gi"'))
        elif name != POD_COUNT:
            wanted[name] = Decimal(parse_quantity(text))
    return wanted


def beyond_groups(wanted: Mapping[str, Decimal], groups: Sequence[Mapping[str, Any]], where: str) -> list[str]:
    """A warning for each resource a gang's stated total (`where`) asks more of than its task groups
    reserve: yuniplace reserves what the pods request, node by node."""
    reserved = _reserved(groups)
    return [
        f"{where}.{name} is {format_quantity(amount)}, more than the task groups reserve "
        f"({format_quantity(reserved.get(name, Decimal(0)))}); yuniplace reserves what the pods request"
        for name, amount in wanted.items()
        if amount > reserved.get(name, Decimal(0))
    ]


def _reserved(groups: Sequence[Mapping[str, Any]]) -> dict[str, Decimal]:
    return total(
        {name: amount * group["minMember"] for name, amount in quantities(group["minResource"]).items()}
        for group in groups
    )


def shaped_groups(
    originator: Mapping[str, Any],
    members: Sequence[Mapping[str, Any]],
    min_member: int,
    where: str,
    problems: list[Problem],
    *,
    wanted: Mapping[str, Decimal] | None = None,
    wanted_where: str = "",
) -> tuple[list[dict[str, Any]], list[str]]:
    """The task groups of a gang of `min_member` pods (`where` names the field that says how many), and
    its warnings: one group per role and shape among its first `min_member` live members, oldest first
    (later ones start with the gang, unreserved); members yet to come, as many as are missing, shaped
    like the largest seen in each resource and placed like the originator, and large enough together
    for what `wanted` (the gang's stated total, the field `wanted_where`) asks beyond the members seen."""
    seen = [m for m in members if not m.get("metadata", {}).get("deletionTimestamp")]
    if not any(m is originator for m in seen):
        seen.insert(0, originator)
    groups: dict[str, dict[str, Any]] = {}
    for pod in seen[:min_member]:
        shaped = shaped_group(pod, "", 1, where, problems)
        name = f"{role_of(pod)}-{shape_key(shaped)}"
        if name in groups:
            groups[name]["minMember"] += 1
        else:
            groups[name] = {**shaped, "name": name}
    missing = min_member - len(seen[:min_member])
    if missing <= 0:
        return list(groups.values()), beyond_groups(wanted or {}, list(groups.values()), wanted_where)
    to_come = _yet_to_come(originator, list(groups.values()), missing, wanted or {})
    alike = next((g for g in groups.values() if shape_key(g) == shape_key(to_come)), None)
    if alike is not None:
        alike["minMember"] += missing
    else:
        groups[to_come["name"]] = to_come
    return list(groups.values()), []


def _yet_to_come(
    originator: Mapping[str, Any], groups: Sequence[Mapping[str, Any]], missing: int, wanted: Mapping[str, Decimal]
) -> dict[str, Any]:
    """The task group of `missing` members not created yet: no smaller in any resource than the largest
    member seen, and together with the members seen at least the gang's stated total."""
    peak: dict[str, Decimal] = {}
    for group in groups:
        for name, amount in quantities(group["minResource"]).items():
            peak[name] = max(peak.get(name, Decimal(0)), amount)
    reserved = _reserved(groups)
    for name, amount in wanted.items():
        share = (amount - reserved.get(name, Decimal(0))) / missing
        if share > peak.get(name, Decimal(0)):
            peak[name] = Decimal(math.ceil(share * 1000)) / 1000  # whole milli-units, never below the share
    placed = shaped_group(originator, "", missing, "", [])
    group = {**placed, "minResource": {name: format_quantity(amount) for name, amount in peak.items() if amount > 0}}
    return {**group, "name": f"{MEMBER_GROUP}-{shape_key(group)}"}
