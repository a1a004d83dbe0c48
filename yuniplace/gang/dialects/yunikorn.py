"""YuniKorn's task groups: the language yuniplace speaks natively (its keys, in keys.py, are read all
over yuniplace). The originator carries the task groups; every member names its own task group, so
members of different sizes are reserved each by its own kind, and a member starts as soon as it fits."""

from __future__ import annotations

from collections.abc import Sequence

from yuniplace.gang import keys
from yuniplace.gang.dialects.base import Pod, PodGroup, PodGroupApi, annotations_of
from yuniplace.gang.dialects.stated import member_problems
from yuniplace.gang.keys import Key
from yuniplace.gang.taskgroups import GangSpec, Limits, Problem, parse_gang


class YuniKorn:
    title = "YuniKorn"
    keys: tuple[Key, ...] = ()  # keys.py's: YuniKorn's keys are read all over yuniplace
    pod_groups: PodGroupApi | None = None
    started_by_kube_scheduler = False
    spec_fields: tuple[str, ...] = ()  # task groups say their pods' shape themselves

    def detects(self, pod: Pod) -> bool:
        notes = annotations_of(pod)
        return keys.TASK_GROUPS in notes or keys.TASK_GROUP_NAME in notes

    def gang_name(self, pod: Pod) -> str | None:
        return None  # an application id of YuniKorn's sources

    def named_by(self, pod: Pod) -> str:
        return f"annotation {keys.TASK_GROUPS}"

    def task_group(self, pod: Pod) -> str | None:
        return annotations_of(pod).get(keys.TASK_GROUP_NAME) or None

    def describes_gang(self, pod: Pod) -> bool:
        return keys.TASK_GROUPS in annotations_of(pod)

    def readable(self, pod_group: PodGroup | None, members: Sequence[Pod]) -> bool:
        return True

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        return parse_gang(annotations_of(pod), limits)

    def own_problems(self, pod: Pod, limits: Limits) -> list[Problem]:
        return member_problems(pod, limits)


DIALECT = YuniKorn()
