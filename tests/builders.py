"""The objects tests feed yuniplace, built in one place: pods as the apiserver shows them, gang members
with YuniKorn's task-group annotations, nodes, and queues.yaml text.

Each builder writes only what it is given (a pod without labels has no `labels` key at all), so a test
states exactly the object it means and the readers' handling of missing fields stays under test. A test
file's own defaults (its namespace, its container's name, its sizes) live in a one-line wrapper there.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from yuniplace.gang import keys

Pod = dict[str, Any]


def pod(
    name: str = "p",
    *,
    namespace: str | None = "ns",
    uid: str | None = None,
    rv: str | None = None,
    created: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
    container: str | None = "c",
    requests: Mapping[str, str] | None = None,
    node: str | None = None,
    gates: Sequence[str] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> Pod:
    """A pod with one container named `container` (none when None) requesting `requests`, bound to
    `node`, held by the scheduling `gates` (an empty sequence: an empty list) and in `phase` (no status
    when None). `spec` adds or replaces fields of the spec, containers among them."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if uid is not None:
        metadata["uid"] = uid
    if rv is not None:
        metadata["resourceVersion"] = rv
    if created is not None:
        metadata["creationTimestamp"] = created
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    body: dict[str, Any] = {}
    if container is not None:
        resources = {"resources": {"requests": dict(requests)}} if requests is not None else {}
        body["containers"] = [{"name": container, **resources}]
    if node is not None:
        body["nodeName"] = node
    if gates is not None:
        body["schedulingGates"] = [{"name": gate} for gate in gates]
    body.update(spec)
    result: Pod = {"metadata": metadata, "spec": body}
    if phase is not None:
        result["status"] = {"phase": phase}
    return result


def task_group(name: str, min_member: int, resources: Mapping[str, str], **fields: Any) -> dict[str, Any]:
    """One YuniKorn task group; `fields` are further keys as the annotation spells them (nodeSelector,
    tolerations, ...)."""
    return {"name": name, "minMember": min_member, "minResource": dict(resources), **fields}


def task_groups(*groups: Mapping[str, Any]) -> str:
    """The task-groups annotation's value: the groups as JSON."""
    return json.dumps(list(groups))


def gang_annotations(
    *, group: str | None = None, task_groups: str | Sequence[Mapping[str, Any]] | None = None, policy: str | None = None
) -> dict[str, str]:
    """YuniKorn's gang annotations: the pod's task group, the task groups (JSON, or text as given, which
    may be invalid on purpose) and the scheduling policy parameters; only those given."""
    notes: dict[str, str] = {}
    if task_groups is not None:
        notes[keys.TASK_GROUPS] = task_groups if isinstance(task_groups, str) else json.dumps(list(task_groups))
    if group is not None:
        notes[keys.TASK_GROUP_NAME] = group
    if policy is not None:
        notes[keys.SCHEDULING_POLICY_PARAMETERS] = policy
    return notes


def member(
    name: str,
    *,
    app: str,
    group: str | None,
    task_groups: str | Sequence[Mapping[str, Any]] | None = None,
    policy: str | None = None,
    app_label: str = keys.APP_ID,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    **fields: Any,
) -> Pod:
    """A pod of YuniKorn gang `app` (named by `app_label`; Spark sets spark-app-selector) in task group
    `group`; its originator also carries the `task_groups`. `labels` and `annotations` add to the gang's,
    `fields` are the pod's (see `pod`)."""
    notes = {**gang_annotations(group=group, task_groups=task_groups, policy=policy), **(annotations or {})}
    return pod(name, labels={app_label: app, **(labels or {})}, annotations=notes, **fields)


# The group and version of each kind a review may carry (others are taken as core v1).
KINDS = {
    "Pod": ("", "v1"),
    "Deployment": ("apps", "v1"),
    "ReplicaSet": ("apps", "v1"),
    "StatefulSet": ("apps", "v1"),
    "DaemonSet": ("apps", "v1"),
    "Job": ("batch", "v1"),
    "CronJob": ("batch", "v1"),
}


def admission_review(
    obj: Mapping[str, Any],
    *,
    operation: str = "CREATE",
    kind: str | None = None,
    user: tuple[str, list[str]] | None = None,
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The AdmissionReview the API server sends a webhook for `obj` (of its own kind unless `kind` says
    otherwise), by `user` (name, groups) where given, with `old` for an update."""
    kind = kind or obj.get("kind") or "Pod"
    group, version = KINDS.get(kind, ("", "v1"))
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": group, "version": version, "kind": kind},
        "operation": operation,
        "object": obj,
    }
    if user is not None:
        request["userInfo"] = {"username": user[0], "uid": "x", "groups": user[1]}
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def node(
    name: str,
    cpu: str = "4",
    *,
    memory: str = "8Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A node offering `cpu`, `memory` and `pods` to new pods, with `labels`, `taints` (none when None)
    and cordoned when `unschedulable`."""
    spec: dict[str, Any] = {}
    if taints is not None:
        spec["taints"] = [dict(taint) for taint in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def queues_yaml(*queues: str, rules: str = "") -> str:
    """A queues.yaml: root open to anyone, with the queues given (each a YAML list item under root) and
    the placement `rules` (a YAML list) when given."""
    body = "\n".join(textwrap.indent(textwrap.dedent(q).strip(), " " * 10) for q in queues)
    placement = f"    placementrules:\n{textwrap.indent(textwrap.dedent(rules).strip(), ' ' * 6)}\n" if rules else ""
    return f"partitions:\n  - name: default\n{placement}    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n{body}\n"


DRA = "resource.k8s.io/v1"


def device_class(
    name: str, driver: str, *, selectors: Sequence[str] = (), extended_resource: str | None = None
) -> dict[str, Any]:
    """A DeviceClass of the devices of `driver`, narrowed by more CEL `selectors`."""
    expressions = [f'device.driver == "{driver}"', *selectors]
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if extended_resource is not None:
        spec["extendedResourceName"] = extended_resource
    return {"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def resource_slice(
    name: str,
    node: str,
    driver: str,
    devices: Sequence[str],
    *,
    pool: str | None = None,
    generation: int = 1,
    attributes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ResourceSlice as a DRA driver publishes one for its node: one pool (the node's), its `devices`
    by name, each with the `attributes` given for it (by device name)."""
    return {
        "apiVersion": DRA,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": device,
                    **({"attributes": dict(attributes[device])} if attributes and device in attributes else {}),
                }
                for device in devices
            ],
        },
    }


def device_request(
    device_class_name: str, count: int = 1, *, name: str = "devices", selectors: Sequence[str] = (), mode: str = ""
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    if mode == "All":
        exactly["allocationMode"] = "All"
    else:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim_spec(*requests: Mapping[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": [dict(r) for r in requests]}}


def claim_template(name: str, *requests: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceClaimTemplate whose claims make the requests."""
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim_spec(*requests)},
    }


def resource_claim(name: str, *requests: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": DRA, "kind": "ResourceClaim", "metadata": {"name": name}, "spec": claim_spec(*requests)}


def using_claims(pod: dict[str, Any], *, templates: Sequence[str] = (), claims: Sequence[str] = ()) -> dict[str, Any]:
    """The pod with claims made from `templates` and the named `claims`, each used by its first container."""
    entries = [{"name": f"t{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    entries += [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    pod["spec"]["resourceClaims"] = entries
    container = pod["spec"]["containers"][0]
    container.setdefault("resources", {})["claims"] = [{"name": e["name"]} for e in entries]
    return pod


def discovery(served: Mapping[str, Sequence[str]]) -> dict[str, dict[str, Any]]:
    """API discovery's documents by path, as the apiserver serves them: `served` maps a group version
    ("/apis/karpenter.sh/v1") to its resources; /apis lists each group with its versions."""
    groups: dict[str, list[str]] = {}
    for path in served:
        group, version = path.removeprefix("/apis/").split("/")
        groups.setdefault(group, []).append(version)
    documents: dict[str, dict[str, Any]] = {
        "/apis": {
            "kind": "APIGroupList",
            "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs]}
                for g, vs in groups.items()
            ],
        }
    }
    for path, resources in served.items():
        documents[path] = {"kind": "APIResourceList", "resources": [{"name": name} for name in resources]}
    return documents
