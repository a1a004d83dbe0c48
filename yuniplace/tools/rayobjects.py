"""The pods KubeRay's operator creates for a RayCluster or a RayJob, for `yuniplace validate`: what its
`yunikorn` batch scheduler writes on them (as of KubeRay v1.5.0), so the webhook's checks and the
comparison of each pod with its task group run on a Ray manifest as on a Pod.

KubeRay gives every pod of a RayCluster labelled `ray.io/gang-scheduling-enabled` YuniKorn's task groups:
the head group (one pod), each worker group at its minimum (`minReplicas` × `numOfHosts`) and, for a
RayJob, its submitter; each group sized by its template's containers (requests, else limits). It adds an
init container (`wait-gcs-ready`, 200m CPU and 256Mi) to every worker, which the groups do not count. Its
`scheduler-plugins` mode makes the same gang a PodGroup of the desired replicas, whose pods yuniplace
sizes as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang.resources import format_quantity, quantities, total

GANG_LABEL = "ray.io/gang-scheduling-enabled"
KEYS = (
    keys.Key(
        GANG_LABEL,
        "label",
        "RayCluster or RayJob",
        keys.YOU,
        "`true` makes KubeRay write a gang; "
        "`yuniplace validate` reads it to tell the gang KubeRay's operator will write",
    ),
)
HEAD_GROUP = "headgroup"
SUBMITTER_GROUP = "submittergroup"
# What KubeRay's yunikorn mode copies from the RayCluster's (or RayJob's) labels onto each pod.
COPIED_LABELS = {keys.APP_ID: "applicationId", keys.YUNIKORN_QUEUE: "queue"}
# The init container KubeRay adds to every worker, waiting for the head (ENABLE_INIT_CONTAINER_INJECTION).
WAIT_FOR_HEAD = {"name": "wait-gcs-ready", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}
# The submitter KubeRay runs when a RayJob names no submitterPodTemplate.
DEFAULT_SUBMITTER = {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def _containers_size(spec: Mapping[str, Any]) -> dict[str, str]:
    """A template's size as KubeRay counts it: each container's requests, its limits where it requests
    nothing of a resource, summed."""
    sizes = []
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        counted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        sizes.append(quantities(counted))
    return {name: format_quantity(amount) for name, amount in total(sizes).items()}


def _group(name: str, count: int, template: Mapping[str, Any]) -> dict[str, Any]:
    spec = template.get("spec") or {}
    group: dict[str, Any] = {"name": name, "minMember": count, "minResource": _containers_size(spec)}
    for field in ("nodeSelector", "tolerations", "affinity"):
        if spec.get(field):
            group[field] = spec[field]
    return group


def _whole(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def _pod(
    name: str, group: str, template: Mapping[str, Any], owner: Mapping[str, Any], task_groups: str | None
) -> dict[str, Any]:
    """A pod as the operator makes it of a group's template, with what the yunikorn mode adds; owned,
    as the operator's are, by what it was made for (the RayCluster, or a RayJob's submitter Job)."""
    metadata = template.get("metadata") or {}
    owner_meta = owner.get("metadata") or {}
    owner_labels = owner_meta.get("labels") or {}
    labels = {"ray.io/group": group, **(metadata.get("labels") or {})}
    labels.update(
        {copied: owner_labels[source] for source, copied in COPIED_LABELS.items() if owner_labels.get(source)}
    )
    annotations = dict(metadata.get("annotations") or {})
    if task_groups is not None:
        annotations.update({keys.TASK_GROUPS: task_groups, keys.TASK_GROUP_NAME: group})
    kind = "Job" if group == SUBMITTER_GROUP else "RayCluster"
    return {
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{"kind": kind, "name": str(owner_meta.get("name") or "?"), "controller": True}],
        },
        # The operator names YuniKorn's scheduler; yuniplace's webhook takes the pod over, as it ships.
        "spec": dict(template.get("spec") or {}),
    }


def ray_pods(document: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what, pod) for each kind of pod the operator creates for a RayCluster or RayJob: the head, one
    worker of each group, a RayJob's submitter."""
    kind = document.get("kind")
    spec = document.get("spec") or {}
    cluster = spec.get("rayClusterSpec") if kind == "RayJob" else spec
    if not isinstance(cluster, Mapping):
        return
    head = (cluster.get("headGroupSpec") or {}).get("template") or {}
    workers = [w for w in cluster.get("workerGroupSpecs") or [] if isinstance(w, Mapping)]
    gang = GANG_LABEL in ((document.get("metadata") or {}).get("labels") or {})
    groups = [_group(HEAD_GROUP, 1, head)]
    for worker in workers:
        count = _whole(worker.get("minReplicas"), 0) * _whole(worker.get("numOfHosts"), 1)
        groups.append(_group(str(worker.get("groupName")), count, worker.get("template") or {}))
    submitter = spec.get("submitterPodTemplate") or {"spec": {"containers": [{"resources": DEFAULT_SUBMITTER}]}}
    if kind == "RayJob":
        groups.append(_group(SUBMITTER_GROUP, 1, submitter))
    task_groups = json.dumps(groups) if gang else None
    yield "head", _pod("head", HEAD_GROUP, head, document, task_groups)
    for worker in workers:
        name = str(worker.get("groupName"))
        pod = _pod(f"{name}-worker", name, worker.get("template") or {}, document, task_groups)
        pod["spec"]["initContainers"] = [*(pod["spec"].get("initContainers") or []), WAIT_FOR_HEAD]
        yield f"worker group {name}", pod
    if kind == "RayJob":
        yield "submitter", _pod("submitter", SUBMITTER_GROUP, submitter, document, task_groups)


def gang_summary(document: Mapping[str, Any]) -> tuple[str, list[str]]:
    """What its gang will be, in a line, and what to fix before it is one as meant."""
    labels = (document.get("metadata") or {}).get("labels") or {}
    if GANG_LABEL not in labels:
        return "no gang", [
            f"without the label {GANG_LABEL}, KubeRay writes no gang for it: its pods are scheduled one by one"
        ]
    pods = list(ray_pods(document))
    groups = json.loads(pods[0][1]["metadata"]["annotations"][keys.TASK_GROUPS]) if pods else []
    sizes = ", ".join(
        f"{g['name']} {g['minMember']} × ({', '.join(f'{k} {v}' for k, v in sorted(g['minResource'].items()))})"
        for g in groups
    )
    summary = f"{sum(g['minMember'] for g in groups)} pods, all or nothing: {sizes}"
    warnings = []
    if document.get("kind") == "RayJob" and not labels.get(keys.APP_ID):
        warnings.append(
            f"without the label {keys.APP_ID}, the submitter KubeRay's yunikorn mode creates is an application of its "
            "own (its Job's), which reserves the whole gang again; set it, as KubeRay's and YuniKorn's documentation do"
        )
    return summary, warnings


def is_ray_object(document: Mapping[str, Any]) -> bool:
    return document.get("kind") in ("RayCluster", "RayJob") and str(document.get("apiVersion", "")).startswith(
        "ray.io/"
    )
