"""Kubernetes' own gangs (KEP-4671, the Workload API), as a dialect: a pod of a native pod group is
kube-scheduler's gang whatever else it carries, one task group of its group's minimum shaped like the
pod.

kube-scheduler's gang plugin binds these gangs all or nothing by itself, so yuniplace never gates,
placeholds or swaps their pods. It reads them only to see them: a native gang counts in its queue and
in the room admission gives out, and `yuniplace status` and the events tell about it. The objects that
describe the groups are read in kube/workloadapi.py; they reach `spec` as `NativeGroup.as_object()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from yuniplace.gang.dialects.base import Pod, PodGroup
from yuniplace.gang.dialects.stated import PodsLikeThese, StatedGang, gang_spec, most_members
from yuniplace.gang.podshape import whole_number
from yuniplace.gang.taskgroups import GangSpec, InvalidGang, Limits, Problem


def group_of(pod: Mapping[str, Any]) -> str | None:
    """The native pod group the pod belongs to, if any: the PodGroup it names (1.36 on), or the
    Workload and pod group it points at (1.35, with the replica key when it has one)."""
    spec = pod.get("spec") or {}
    scheduling_group = spec.get("schedulingGroup")
    if isinstance(scheduling_group, Mapping):
        name = scheduling_group.get("podGroupName")
        if isinstance(name, str) and name:
            return name
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping):
        parts = [ref.get("name"), ref.get("podGroup"), ref.get("podGroupReplicaKey")]
        named = [part for part in parts if isinstance(part, str) and part]
        if len(named) >= 2 and named[:2] == parts[:2]:
            return "/".join(named)
    return None


def named_by(pod: Mapping[str, Any]) -> str:
    """The pod field that names its native group, for messages."""
    return "spec.workloadRef" if (pod.get("spec") or {}).get("workloadRef") else "spec.schedulingGroup.podGroupName"


class Native(PodsLikeThese):
    title = "Workload API"
    started_by_kube_scheduler = True
    # The fields naming its group are kept too: a trimmed pod must still be known as kube-scheduler's.
    spec_fields = (*PodsLikeThese.spec_fields, "schedulingGroup", "workloadRef")

    def detects(self, pod: Pod) -> bool:
        return group_of(pod) is not None

    def gang_name(self, pod: Pod) -> str | None:
        return group_of(pod)

    def named_by(self, pod: Pod) -> str:
        return named_by(pod)

    def readable(self, pod_group: PodGroup | None, members: Sequence[Pod]) -> bool:
        """A group under the basic policy (no minimum) is no gang at all."""
        return pod_group is None or (pod_group.get("spec") or {}).get("minCount") is not None

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        if pod_group is None:
            missing = (
                "names no pod group of the Workload API in this namespace: kube-scheduler keeps the pod "
                "unschedulable until it is created (yuniplace does not hold it)"
            )
            raise InvalidGang([Problem(named_by(pod), group_of(pod), missing)])
        spec = pod_group.get("spec") or {}
        stated = StatedGang(counted_by=f"{spec.get('describedBy')} gang minCount")
        stated.min_member = whole_number(
            spec.get("minCount"), stated.counted_by, stated.problems, most=most_members(limits)
        )
        return gang_spec(pod, stated, self.title, limits, members)


DIALECT = Native()
