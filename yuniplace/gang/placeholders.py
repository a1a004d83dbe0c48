"""Placeholder pods as data: names and manifests are pure functions of the application, so a restarted
controller computes the same names and can never create a second copy of a placeholder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from yuniplace.devices.claims import holding_entries, is_device_resource
from yuniplace.gang import keys
from yuniplace.gang.pods import queue
from yuniplace.gang.resources import Resources, quantities
from yuniplace.gang.taskgroups import TaskGroup

DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
MAX_NAME = 63
_INVALID = re.compile(r"[^a-z0-9-]+")

PLACEHOLDER_SECURITY_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
}
# The pause image runs as 65535 ("nobody"); saying so lets runAsNonRoot be checked without an image.
POD_SECURITY_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": 65535,
    "runAsGroup": 65535,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _digest(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def label_value(text: str) -> str:
    """A label value standing for `text`: itself when valid, else a readable prefix and a hash."""
    if len(text) <= MAX_NAME and re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", text):
        return text
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[: MAX_NAME - 9].strip("-_.") or "app"
    return f"{cleaned}-{_digest(text)}"


def placeholder_name(app_id: str, group: str, index: int) -> str:
    """`tg-<app>-<group>-<hash>-<n>`: readable, lower-case, at most 63 characters. The hash of the
    exact app id and group keeps apart what the readable part alone would merge ("a-b"/"c" and
    "a"/"b-c", "App" and "app"), so two applications never share a placeholder name."""
    tag = f"-{_digest(app_id + chr(0) + group, 5)}"
    suffix = f"-{index}"
    readable = _INVALID.sub("-", f"tg-{app_id}-{group}".lower()).strip("-")
    return readable[: MAX_NAME - len(tag) - len(suffix)].rstrip("-") + tag + suffix


def claims_held_for(placeholder: Mapping[str, Any]) -> str | None:
    """The uid of the member whose DRA claims the placeholder holds, if it holds any."""
    value = ((placeholder.get("metadata") or {}).get("annotations") or {}).get(keys.CLAIMS_OF)
    return str(value) if value else None


def placeholder_size(group: TaskGroup) -> Resources:
    """What each placeholder of the group requests of its node (DRA devices aside: it holds those
    through its member's claims)."""
    return {name: amount for name, amount in quantities(group.min_resource).items() if not is_device_resource(name)}


def placeholder_names(app_id: str, group: TaskGroup) -> list[str]:
    return [placeholder_name(app_id, group.name, index) for index in range(group.min_member)]


def placeholder_pod(
    *,
    app_id: str,
    group: TaskGroup,
    index: int,
    originator: Mapping[str, Any],
    image: str = DEFAULT_IMAGE,
    priority_class_name: str | None = None,
    queue_name: str | None = None,
    holding: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of placeholder `index` of `group`: sized by minResource, placed by the group's
    constraints, owned by the originator (so garbage collection removes it with the originator),
    restricted enough for Pod Security "restricted" namespaces, and marked both as yuniplace's and as
    YuniKorn marks its own. Its priority class is the gang's (`priority_class_name`, as a Volcano
    PodGroup names it), else the originator's, so it holds room as firmly as the members will. Its
    YuniKorn queue label is the queue admission placed the gang in (`queue_name`), else the one it names.
    The devices its group names (DRA device classes, as admission counts them) it holds through the
    claims of the member it is made for (`holding`: each by name, so they are allocated to it and later
    handed to that member without ever being freed), not as resources of its own."""
    meta = originator["metadata"]
    resources = {name: value for name, value in group.min_resource.items() if not is_device_resource(name)}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": POD_SECURITY_CONTEXT,
        "containers": [
            {
                "name": "pause",
                "image": image,
                "resources": {"requests": resources, "limits": resources},
                "securityContext": PLACEHOLDER_SECURITY_CONTEXT,
            }
        ],
    }
    priority_class = priority_class_name or originator.get("spec", {}).get("priorityClassName")
    if priority_class:
        spec["priorityClassName"] = priority_class
    if group.node_selector:
        spec["nodeSelector"] = dict(group.node_selector)
    if group.tolerations:
        spec["tolerations"] = list(group.tolerations)
    if group.affinity:
        spec["affinity"] = dict(group.affinity)
    if group.topology_spread_constraints:
        spec["topologySpreadConstraints"] = list(group.topology_spread_constraints)
    holds: dict[str, str] = {}
    if holding is not None:
        spec["resourceClaims"] = holding_entries(holding)
        holds[keys.CLAIMS_OF] = str(holding["metadata"]["uid"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": placeholder_name(app_id, group.name, index),
            "namespace": meta["namespace"],
            "labels": {
                **group.labels,
                keys.APP_ID: label_value(app_id),
                keys.YUNIKORN_QUEUE: label_value(queue_name or queue(originator)),
                keys.PLACEHOLDER: "true",
                keys.PLACEHOLDER_APP: label_value(app_id),
                keys.PLACEHOLDER_GROUP: group.name,
            },
            "annotations": {
                **group.annotations,
                **dict.fromkeys(keys.YUNIKORN_PLACEHOLDER_FLAGS, "true"),
                keys.TASK_GROUP_NAME: group.name,
                keys.PLACEHOLDER_APP: app_id,
                keys.PLACEHOLDER_GROUP: group.name,
                # Its node holds a gang's room: an autoscaler must not take it away while the gang forms.
                keys.KARPENTER_DO_NOT_DISRUPT: "true",
                keys.CLUSTER_AUTOSCALER_SAFE_TO_EVICT: "false",
                **holds,
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "blockOwnerDeletion": True,
                    "controller": False,
                }
            ],
        },
        "spec": spec,
    }
