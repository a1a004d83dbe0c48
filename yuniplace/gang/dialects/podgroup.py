"""scheduler-plugins' PodGroup (`scheduling.x-k8s.io/v1alpha1`): pods name their PodGroup with a
label; the PodGroup says the gang's minimum (`spec.minMember`: a task group per role and shape of its
pods), the resources it needs in all (`spec.minResources`: members yet to come are reserved large enough
for it) and its timeout (`spec.scheduleTimeoutSeconds`). Coscheduling holds a gang's pods until its
minimum exist, so no member starts before all do.

Its status is written back as scheduler-plugins reports it: Pending → PreScheduling (reserving) →
Scheduling → Scheduled → Running → Finished, or Failed; counts of scheduled, running, succeeded and
failed members, and when scheduling began.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from yuniplace.gang.dialects.base import GangProgress, Pod, PodGroup, differs, labels_of
from yuniplace.gang.dialects.stated import PodsLikeThese, StatedGang, gang_spec, most_members, no_pod_group
from yuniplace.gang.keys import Key
from yuniplace.gang.podshape import min_resources, whole_number
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, Limits, OnTimeout

LABEL = "scheduling.x-k8s.io/pod-group"  # label naming a scheduler-plugins PodGroup
API = "/apis/scheduling.x-k8s.io/v1alpha1"
KEYS = (
    Key(
        LABEL,
        "label",
        "gang member",
        "you (or its operator)",
        "names the scheduler-plugins PodGroup (`scheduling.x-k8s.io/v1alpha1`) that describes the pod's gang",
    ),
)
MIN_MEMBER = "PodGroup spec.minMember"
MIN_RESOURCES = "PodGroup spec.minResources"
COUNTS = ("scheduled", "running", "succeeded", "failed")


class PluginPodGroups:
    path = API
    named_by = f"label {LABEL}"
    kind = "PodGroup"
    gangs = "PodGroup gangs"
    watch_name = "podgroups"

    def status(self, pod_group: PodGroup, progress: GangProgress) -> dict[str, Any] | None:
        wanted, state = progress.min_members, progress.state
        if state == AppState.FAILED:
            phase = "Failed"
        elif progress.succeeded >= wanted:
            phase = "Finished"
        elif progress.running >= wanted:
            phase = "Running"
        elif progress.scheduled >= wanted:
            phase = "Scheduled"
        elif state in (AppState.RESERVED, AppState.RUNNING, AppState.RESUMING) or progress.scheduled:
            phase = "Scheduling"
        elif state == AppState.RESERVING:
            phase = "PreScheduling"
        else:
            phase = "Pending"
        status: dict[str, Any] = {"phase": phase, **progress.counts(COUNTS)}
        if progress.started:
            status["scheduleStartTime"] = progress.started
        return status if differs(status, pod_group.get("status") or {}, COUNTS) else None

    def queue(self, pod_group: PodGroup) -> str | None:
        return None

    def missing_tasks(self, pod_group: PodGroup, members: Sequence[Pod]) -> list[str]:
        return []


class PodGroupDialect(PodsLikeThese):
    title = "PodGroup"
    keys = KEYS
    pod_groups: PluginPodGroups = PluginPodGroups()

    def detects(self, pod: Pod) -> bool:
        return bool(labels_of(pod).get(LABEL))

    def gang_name(self, pod: Pod) -> str | None:
        return labels_of(pod)[LABEL]

    def named_by(self, pod: Pod) -> str:
        return self.pod_groups.named_by

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        if pod_group is None:
            raise no_pod_group(self.named_by(pod), self.gang_name(pod), self.pod_groups.kind)
        spec = pod_group.get("spec") or {}
        # Out of scheduleTimeoutSeconds, Coscheduling rejects the group's pods and retries after a backoff.
        stated = StatedGang(counted_by=MIN_MEMBER, on_timeout=OnTimeout.RETRY)
        stated.min_member = whole_number(spec.get("minMember"), MIN_MEMBER, stated.problems, most=most_members(limits))
        stated.wanted = min_resources(spec.get("minResources"), MIN_RESOURCES, stated.problems)
        stated.wanted_by = MIN_RESOURCES
        scheduled_timeout = spec.get("scheduleTimeoutSeconds")
        if isinstance(scheduled_timeout, int) and not isinstance(scheduled_timeout, bool) and scheduled_timeout > 0:
            stated.timeout_s = scheduled_timeout
        return dataclasses.replace(
            gang_spec(pod, stated, self.title, limits, members), starts_when_all_exist=self.title
        )


DIALECT = PodGroupDialect()
