"""Kubernetes' own gangs (KEP-4671, the Workload API), as a dialect: a pod of a native pod group is
kube-scheduler's gang whatever else it carries, one task group of its group's minimum per role and
shape of its members.

kube-scheduler's gang plugin binds these gangs all or nothing by itself, but it has no queue, no
timeout and no room for members yet to come. Where yuniplace's webhook gated their pods (it holds
them unless their namespace opts out), a native gang waits for its queue like any gang, admitted from
what its group declares as soon as its first pod is seen: its gates come off at once (members made
later are not gated at all where the webhook knows the admission), its queue keeps the room of its
whole minimum, and the gang plugin holds its pods until the minimum exists, then binds them all or
none. A timeout under the Soft style gives the admission back and tries again after a backoff; Hard
fails it. Its timeout and style may be set on the object that describes the
group, as on any gang's pod (yunikorn.apache.org/schedulingPolicyParameters), the pod's own winning.
A gang whose pods were never gated stays kube-scheduler's alone, as before: yuniplace only counts it.
The objects that describe the groups are read in kube/workloadapi.py; they reach `spec` as
`NativeGroup.as_object()`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang.dialects.base import Pod, PodGroup, is_gated
from yuniplace.gang.dialects.stated import PodsLikeThese, StatedGang, gang_spec, most_members
from yuniplace.gang.keys import Key
from yuniplace.gang.podshape import whole_number
from yuniplace.gang.taskgroups import GangSpec, InvalidGang, Limits, OnTimeout, Problem, policy_of

# Who starts a native gang's members, and only once its whole minimum of pods exists.
GANG_PLUGIN = "kube-scheduler's gang plugin"


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
    keys: tuple[Key, ...] = ()  # a native gang is named by its pods' spec, not by a label or annotation
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
        """A group under the basic policy (no minimum) is no gang at all. Held members wait for a group
        not seen yet (its object may be created after them, or seen a moment later), as kube-scheduler
        keeps them unschedulable until it exists; pods never held are told at once that it is missing."""
        if pod_group is None:
            return not any(is_gated(member) for member in members)
        return (pod_group.get("spec") or {}).get("minCount") is not None

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        if pod_group is None:
            missing = (
                "names no pod group of the Workload API in this namespace: kube-scheduler keeps the pod "
                "unschedulable until it is created (yuniplace does not hold it)"
            )
            raise InvalidGang([Problem(named_by(pod), group_of(pod), missing)])
        spec = pod_group.get("spec") or {}
        described_by = str(spec.get("describedBy"))
        stated = StatedGang(counted_by=f"{described_by} gang minCount")
        stated.min_member = whole_number(
            spec.get("minCount"), stated.counted_by, stated.problems, most=most_members(limits)
        )
        notes = (pod_group.get("metadata") or {}).get("annotations") or {}
        _group_policy(notes.get(keys.SCHEDULING_POLICY_PARAMETERS), described_by, stated, limits)
        gang = gang_spec(pod, stated, self.title, limits, members)
        rule = gang.policy.on_timeout
        priority = spec.get("priority")
        return dataclasses.replace(
            gang,
            policy=dataclasses.replace(gang.policy, dialect_rule=OnTimeout.RETRY if rule == OnTimeout.SOFT else rule),
            starts_when_all_exist=GANG_PLUGIN,
            native=True,
            priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
            disrupted_by_kube_scheduler=spec.get("disruptedWhole") is True,
        )


def _group_policy(text: str | None, described_by: str, stated: StatedGang, limits: Limits) -> None:
    """The timeout and style the group's object states (its schedulingPolicyParameters annotation), as
    the gang's own, which a member's annotation overrides; problems are named as the object's."""
    if text is None:
        return
    problems: list[Problem] = []
    policy = policy_of(text, limits, problems)
    stated.problems += [
        Problem(f"{described_by}: {problem.field}", problem.value, problem.expected) for problem in problems
    ]
    said = {item.partition("=")[0] for item in text.split()}
    if "placeholderTimeoutInSeconds" in said:
        stated.timeout_s = policy.timeout_s
    if "gangSchedulingStyle" in said:
        stated.on_timeout = OnTimeout(policy.style.value)


DIALECT = Native()
