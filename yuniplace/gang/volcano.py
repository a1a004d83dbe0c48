"""Volcano's PodGroup (`scheduling.volcano.sh/v1beta1`) read as task groups.

A Volcano gang's pods name their PodGroup in the annotation `scheduling.k8s.io/group-name`, and a
Volcano Job marks each pod with its task (`volcano.sh/task-spec`). The PodGroup says how many pods
must start together (`spec.minMember`) and, task by task, how many of each (`spec.minTaskMember`).

- Without `minTaskMember` the gang is one task group of `minMember` pods shaped like the originator,
  named after its task (or `members`).
- With it, each task with a minimum is a task group of that many pods, shaped like the task's oldest
  pod: tasks differ in size (a parameter server and its workers), and a placeholder must be as large
  as the pod that takes its place. Until every such task has a pod the gang waits, as it waits for
  a missing PodGroup (`missing_tasks`). The minimums must account for `minMember`: fewer is refused,
  since yuniplace could not tell which tasks the other pods would belong to; more is reserved in full
  (Volcano itself then waits for `minMember` pods of any tasks), with a warning.
- Pods of a task the gang has no group for start with the gang, unreserved.
- `minResources` is Volcano's estimate of the whole gang for its queue; yuniplace reserves what the
  pods request, node by node, so it is only checked: a resource it asks more of than the task groups
  reserve gets a warning.
- `priorityClassName` is the placeholders' priority class; `queue` is the Volcano queue the gang waits
  in (`volcano_queue`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang.podshape import MEMBER_GROUP, shaped_group, whole_number
from yuniplace.gang.resources import format_quantity, quantities, total
from yuniplace.gang.taskgroups import DNS1123_LABEL, QUANTITY, Limits, Problem
from yuniplace.kube import parse_quantity

DEFAULT_QUEUE = "default"  # Volcano's queue for a PodGroup that names none
# Kubernetes' count of pods: Volcano may put it in minResources, and no container requests it.
POD_COUNT = "pods"
MIN_MEMBER = "PodGroup spec.minMember"
MIN_TASK_MEMBER = "PodGroup spec.minTaskMember"
MIN_RESOURCES = "PodGroup spec.minResources"


@dataclass(frozen=True)
class VolcanoGang:
    """What a Volcano PodGroup says of its gang, in yuniplace's terms."""

    groups: list[dict[str, Any]]  # YuniKorn task-group objects
    warnings: list[str]
    priority_class_name: str | None


def task_of(pod: Mapping[str, Any]) -> str | None:
    """The Volcano task a pod belongs to, as Volcano's Job controller marks it."""
    return (pod.get("metadata", {}).get("annotations") or {}).get(keys.VOLCANO_TASK) or None


def volcano_queue(pod_group: Mapping[str, Any]) -> str:
    """The Volcano queue a PodGroup's gang waits in: `spec.queue`, else Volcano's `default`."""
    queue = (pod_group.get("spec") or {}).get("queue")
    return queue if isinstance(queue, str) and queue else DEFAULT_QUEUE


def _task_minimums(spec: Mapping[str, Any], problems: list[Problem]) -> dict[str, int]:
    """`spec.minTaskMember`'s tasks that have a minimum, by name; a task of minimum 0 has none."""
    raw = spec.get("minTaskMember")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(Problem(MIN_TASK_MEMBER, raw, "must be an object of task names and pod counts"))
        return {}
    minimums: dict[str, int] = {}
    for task, count in sorted(raw.items()):
        where = f"{MIN_TASK_MEMBER}.{task}"
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            problems.append(Problem(where, count, "must be a whole number of pods"))
        elif count > 0 and check_task_name(task, where, problems):
            minimums[task] = count
    return minimums


def check_task_name(name: str, where: str, problems: list[Problem]) -> bool:
    """Whether a task's name can name its task group (and placeholders); a problem if not."""
    if len(name) <= 63 and DNS1123_LABEL.match(name):
        return True
    problems.append(
        Problem(where, name, "is not a task name yuniplace can use (a DNS-1123 label: a-z, 0-9, '-'; at most 63)")
    )
    return False


def missing_tasks(pod_group: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> list[str]:
    """The tasks with a minimum that no member belongs to yet: the gang cannot be sized until they have."""
    present = {task_of(member) for member in members}
    return [task for task in _task_minimums(pod_group.get("spec") or {}, []) if task not in present]


def _min_resources(raw: Any, problems: list[Problem]) -> dict[str, Decimal]:
    """`spec.minResources`, checked; the count of pods left out."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(Problem(MIN_RESOURCES, raw, "must be an object of resource quantities"))
        return {}
    wanted: dict[str, Decimal] = {}
    for name, value in sorted(raw.items()):
        text = value if isinstance(value, str) else json.dumps(value)
        if isinstance(value, bool) or not QUANTITY.match(text):
            problems.append(Problem(f"{MIN_RESOURCES}.{name}", value, 'is not a quantity such as "500m" or "2Gi"'))
        elif name != POD_COUNT:
            wanted[name] = Decimal(parse_quantity(text))
    return wanted


def _beyond_groups(wanted: Mapping[str, Decimal], groups: list[dict[str, Any]]) -> list[str]:
    """A warning for each resource minResources asks more of than the task groups reserve."""
    reserved = total(
        {name: amount * group["minMember"] for name, amount in quantities(group["minResource"]).items()}
        for group in groups
    )
    return [
        f"{MIN_RESOURCES}.{name} is {format_quantity(amount)}, more than the task groups reserve "
        f"({format_quantity(reserved.get(name, Decimal(0)))}); yuniplace reserves what the pods request"
        for name, amount in wanted.items()
        if amount > reserved.get(name, Decimal(0))
    ]


def read(
    pod: Mapping[str, Any],
    pod_group: Mapping[str, Any],
    members: Sequence[Mapping[str, Any]],
    problems: list[Problem],
    limits: Limits,
) -> VolcanoGang:
    """The gang `pod_group` describes for its originator `pod`, its task groups shaped like the
    `members` of each task (oldest first). Problems name Volcano's own fields."""
    spec = pod_group.get("spec") or {}
    min_member = whole_number(spec.get("minMember"), MIN_MEMBER, problems, most=limits.max_members_per_app)
    minimums = _task_minimums(spec, problems)
    warnings: list[str] = []
    groups: list[dict[str, Any]] = []
    if not minimums:
        name = task_of(pod) or MEMBER_GROUP
        if check_task_name(name, f"annotation {keys.VOLCANO_TASK}", problems):
            groups.append(shaped_group(pod, name, min_member, MIN_MEMBER, problems))
    else:
        listed = sum(minimums.values())
        if listed < min_member:
            problems.append(
                Problem(
                    MIN_TASK_MEMBER,
                    spec["minTaskMember"],
                    f"adds up to {listed} pods, fewer than spec.minMember {min_member}: yuniplace reserves room "
                    "task by task, so the tasks' minimums must account for every pod of the gang",
                )
            )
        elif listed > min_member:
            warnings.append(
                f"{MIN_TASK_MEMBER} adds up to {listed} pods, more than spec.minMember {min_member}: "
                "yuniplace reserves every task's minimum"
            )
        for task, count in minimums.items():
            where = f"{MIN_TASK_MEMBER}.{task}"
            shape = pod if task_of(pod) == task else next((m for m in members if task_of(m) == task), None)
            if shape is None:
                missing = f"names a task no pod belongs to (annotation {keys.VOLCANO_TASK})"
                problems.append(Problem(where, count, missing))
            else:
                groups.append(shaped_group(shape, task, count, where, problems))
    priority = spec.get("priorityClassName")
    if priority is not None and not isinstance(priority, str):
        problems.append(Problem("PodGroup spec.priorityClassName", priority, "must be the name of a PriorityClass"))
        priority = None
    wanted = _min_resources(spec.get("minResources"), problems)
    if not problems:
        warnings += _beyond_groups(wanted, groups)
    return VolcanoGang(groups, warnings, priority or None)
