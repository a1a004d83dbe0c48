"""Kubernetes' own gangs (KEP-4671, the Workload API): the objects that describe native pod groups, and
the minimum each asks kube-scheduler to place all at once, in every version yuniplace reads.

The controller's watch and `yuniplace status` read these objects; the benchmark and the tests write
them. How a pod names its group, and the gang yuniplace reads from it, is the native gang dialect's
(gang/dialects/native.py).

The API changed shape with every release, and each shape is read as it is served:
- 1.35, `scheduling.k8s.io/v1alpha1`: a pod points at a Workload and one of its pod groups with
  `spec.workloadRef` (name, podGroup, podGroupReplicaKey); the Workload lists its groups in
  `spec.podGroups[].policy.gang.minCount`.
- 1.36 (`v1alpha2`) and 1.37 (`v1beta1`, also `v1alpha3`): a pod names a PodGroup object in
  `spec.schedulingGroup.podGroupName`; the PodGroup says `spec.schedulingPolicy.gang.minCount`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GROUP = "scheduling.k8s.io"


@dataclass(frozen=True)
class ServedVersion:
    """One version of the Workload API: where its gangs are listed, and how a pod names its group."""

    version: str
    resource: str  # "podgroups", or (1.35) "workloads"

    @property
    def api(self) -> str:
        return f"/apis/{GROUP}/{self.version}"


# The versions yuniplace reads, newest first: the newest one a cluster serves is watched.
KNOWN_VERSIONS = (
    ServedVersion("v1beta1", "podgroups"),
    ServedVersion("v1alpha3", "podgroups"),
    ServedVersion("v1alpha2", "podgroups"),
    ServedVersion("v1alpha1", "workloads"),
)


def version_named(api_version: str) -> ServedVersion | None:
    """The known version an API version string names ("scheduling.k8s.io/v1beta1"), if any."""
    return next((v for v in KNOWN_VERSIONS if f"{GROUP}/{v.version}" == api_version), None)


@dataclass(frozen=True)
class NativeGroup:
    """A native pod group as yuniplace reads it, whichever object describes it."""

    name: str  # the group's name as its pods name it (a Workload's group: "<workload>/<pod group>")
    min_count: int | None  # the gang minimum; None for a group under the basic (non-gang) policy
    described_by: str  # what says so, for messages: "PodGroup x" or "Workload w, pod group g"
    # The describing object's annotations: the gang's timeout and style, where its user set them there.
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The group's own priority (1.37's PodGroup spec.priority, which kube-scheduler orders the group by):
    # None where the object has none, and its pods' priority counts.
    priority: int | None = None
    # Whether kube-scheduler disrupts the group only as a whole (1.37's spec.disruptionMode.all): its
    # workload-aware preemption then manages it.
    disrupted_whole: bool = False

    def as_object(self) -> dict[str, Any]:
        """The group as a plain object, the way the other dialects' PodGroups reach the gang readers."""
        return {
            "kind": "NativeGroup",
            "metadata": {"name": self.name, "annotations": dict(self.annotations)},
            "spec": {
                "minCount": self.min_count,
                "describedBy": self.described_by,
                "priority": self.priority,
                "disruptedWhole": self.disrupted_whole,
            },
        }


def _gang_minimum(policy: Any) -> int | None:
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    if not isinstance(gang, Mapping):
        return None
    count = gang.get("minCount")
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _annotations(metadata: Mapping[str, Any]) -> dict[str, str]:
    notes = metadata.get("annotations")
    if not isinstance(notes, Mapping):
        return {}
    return {str(key): value for key, value in notes.items() if isinstance(value, str)}


def _priority(spec: Mapping[str, Any]) -> int | None:
    value = spec.get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _disrupted_whole(spec: Mapping[str, Any]) -> bool:
    mode = spec.get("disruptionMode")
    return isinstance(mode, Mapping) and mode.get("all") is not None


def groups_described(obj: Mapping[str, Any]) -> list[NativeGroup]:
    """Every native pod group an object of the API describes: a PodGroup describes itself, a 1.35
    Workload each of its pod groups (their pods may carry a replica key; `lookup` finds those)."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name") or "")
    notes = _annotations(metadata)
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Workload" or "podGroups" in spec:
        found = []
        for group in spec.get("podGroups") or []:
            if isinstance(group, Mapping) and isinstance(group.get("name"), str):
                found.append(
                    NativeGroup(
                        f"{name}/{group['name']}",
                        _gang_minimum(group.get("policy")),
                        f"Workload {name}, pod group {group['name']}",
                        notes,
                    )
                )
        return found
    return [
        NativeGroup(
            name,
            _gang_minimum(spec.get("schedulingPolicy")),
            f"PodGroup {name}",
            notes,
            _priority(spec),
            _disrupted_whole(spec),
        )
    ]


def lookup(groups: Mapping[str, NativeGroup], name: str) -> NativeGroup | None:
    """The group a pod names; a 1.35 pod's replica key picks one replica of its Workload's group,
    whose minimum is the group's."""
    found = groups.get(name)
    if found is None and name.count("/") == 2:
        found = groups.get(name.rsplit("/", 1)[0])
    return found


def manifests(
    served: ServedVersion,
    name: str,
    min_count: int,
    annotations: Mapping[str, str] | None = None,
    priority_class_name: str | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The objects that make a native gang `name` of `min_count` in this version of the API, as
    (resource, object) to create in its namespace in that order: a Workload of one pod group "workers"
    (v1alpha1), a Workload and the PodGroup made from its template (v1alpha2), or a PodGroup alone.
    `annotations` go on the object that describes the group (the Workload on 1.35, else the PodGroup);
    `priority_class_name` on a v1beta1 PodGroup, the first version with a priority of its own."""
    gang = {"gang": {"minCount": min_count}}
    api_version = f"{GROUP}/{served.version}"
    described: dict[str, Any] = {"name": name, **({"annotations": dict(annotations)} if annotations else {})}
    if served.resource == "workloads":
        spec: dict[str, Any] = {"podGroups": [{"name": "workers", "policy": gang}]}
        return [("workloads", {"apiVersion": api_version, "kind": "Workload", "metadata": described, "spec": spec})]
    objects: list[tuple[str, dict[str, Any]]] = []
    pod_group: dict[str, Any] = {"schedulingPolicy": gang}
    if priority_class_name and served.version == "v1beta1":
        pod_group["priorityClassName"] = priority_class_name
    if served.version == "v1alpha2":
        template = {"name": "workers", "schedulingPolicy": gang}
        workload = {"podGroupTemplates": [template]}
        objects.append(
            ("workloads", {"apiVersion": api_version, "kind": "Workload", "metadata": {"name": name}, "spec": workload})
        )
        pod_group["podGroupTemplateRef"] = {"workload": {"workloadName": name, "podGroupTemplateName": "workers"}}
    pod_group_object = {"apiVersion": api_version, "kind": "PodGroup", "metadata": described, "spec": pod_group}
    return [*objects, ("podgroups", pod_group_object)]


def member_spec(served: ServedVersion, name: str) -> dict[str, Any]:
    """The pod spec fields that make a pod a member of the native gang `manifests` made."""
    if served.resource == "workloads":
        return {"workloadRef": {"name": name, "podGroup": "workers"}}
    return {"schedulingGroup": {"podGroupName": name}}


def app_id(served: ServedVersion, name: str) -> str:
    """The application yuniplace sees in the native gang `manifests` made."""
    return f"{name}/workers" if served.resource == "workloads" else name
