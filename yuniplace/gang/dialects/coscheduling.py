"""scheduler-plugins' Coscheduling labels: a gang of `min-available` pods like the one labelled, named
by its `name` label. Coscheduling turns a gang's pods away while fewer than its minimum exist, so no
member starts before all do."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from yuniplace.gang.dialects.base import Pod, PodGroup, labels_of
from yuniplace.gang.dialects.stated import PodsLikeThese, StatedGang, gang_spec, most_members
from yuniplace.gang.keys import Key
from yuniplace.gang.podshape import whole_number
from yuniplace.gang.taskgroups import GangSpec, Limits, OnTimeout

NAME = "pod-group.scheduling.sigs.k8s.io/name"  # label
MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"  # label
KEYS = (
    Key(NAME, "label", "gang member", "you", "marks a Coscheduling gang pod and names its gang"),
    Key(MIN_AVAILABLE, "label", "gang member", "you", "the gang's minimum: pods that start together"),
)


class Coscheduling(PodsLikeThese):
    title = "Coscheduling"
    keys = KEYS

    def detects(self, pod: Pod) -> bool:
        return bool(labels_of(pod).get(NAME))

    def gang_name(self, pod: Pod) -> str | None:
        return labels_of(pod)[NAME]

    def named_by(self, pod: Pod) -> str:
        return f"label {NAME}"

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        # Out of time, Coscheduling rejects the gang's pods and tries the group again after a backoff.
        stated = StatedGang(counted_by=f"label {MIN_AVAILABLE}", on_timeout=OnTimeout.RETRY)
        stated.min_member = whole_number(
            labels_of(pod).get(MIN_AVAILABLE, "1"), stated.counted_by, stated.problems, most=most_members(limits)
        )
        return dataclasses.replace(
            gang_spec(pod, stated, self.title, limits, members), starts_when_all_exist=self.title
        )


DIALECT = Coscheduling()
