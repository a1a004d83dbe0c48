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
- Volcano has no placeholder timeout: yuniplace's default, unless the pod's own parameters say.

Its status is written back in Volcano's terms. Volcano has no phase for yuniplace's reservation or for
failure, so its phases map as follows, with Volcano's own rule first: once `minMember` members are
bound, Running, and Completed when every bound member has ended. Before that: Pending while the gang
waits for admission; Inqueue from admission on (reserving, reserved, swapping in); Unknown when the
reservation was given up (Resuming: its pods are scheduled one by one, as Volcano's Unknown says, "part
running, the rest cannot be scheduled") or the gang failed while some of its pods still live; Completed
once a failed or ended gang has no live pod left (the failed count says how it ended). Counts of
running, succeeded and failed members, and one condition, `Scheduled`: True once every placeholder was
placed, False with the reason while it is not (Pending, Reserving, GangSchedulingFailed,
ApplicationFailed); its lastTransitionTime moves only when its status does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang.dialects.base import GangProgress, Pod, PodGroup, annotations_of, differs
from yuniplace.gang.dialects.stated import PodsLikeThese, StatedGang, gang_spec, member_problems, no_pod_group
from yuniplace.gang.keys import Key
from yuniplace.gang.podshape import MEMBER_GROUP, beyond_groups, min_resources, shaped_group, whole_number
from yuniplace.gang.state import TERMINAL, AppState
from yuniplace.gang.taskgroups import DNS1123_LABEL, GangSpec, Limits, OnTimeout, Problem

# The annotation naming a pod's PodGroup, and the one Volcano's Job controller puts on every pod naming
# the pod's task (matched with the PodGroup's spec.minTaskMember). Its API also serves Volcano's
# Queues, which queue sources read: keys.VOLCANO_API.
GROUP_NAME = "scheduling.k8s.io/group-name"
TASK = "volcano.sh/task-spec"
KEYS = (
    Key(
        GROUP_NAME,
        "annotation",
        "gang member",
        "you (or Volcano's job controller)",
        "names the Volcano PodGroup (`scheduling.volcano.sh/v1beta1`) that describes the pod's gang",
    ),
    Key(
        TASK,
        "annotation",
        "gang member",
        "Volcano's job controller",
        "the pod's task, matched with the PodGroup's `spec.minTaskMember`: a task group per task",
    ),
)

DEFAULT_QUEUE = "default"  # Volcano's queue for a PodGroup that names none
MIN_MEMBER = "PodGroup spec.minMember"
MIN_TASK_MEMBER = "PodGroup spec.minTaskMember"
MIN_RESOURCES = "PodGroup spec.minResources"
COUNTS = ("running", "succeeded", "failed")
SCHEDULED = "Scheduled"
# The Scheduled condition for each state: (status, reason, message). A completed gang keeps the one it has.
SCHEDULED_IN: Mapping[AppState, tuple[str, str, str]] = {
    AppState.PENDING: ("False", "Pending", "the gang waits until all of it fits (see its GangWaiting events)"),
    AppState.RESERVING: ("False", "Reserving", "placeholders are reserving room for the whole gang"),
    AppState.RESERVED: ("True", "GangReserved", "every placeholder is placed; members take their places"),
    AppState.RUNNING: ("True", "GangReserved", "every placeholder is placed; members take their places"),
    AppState.RESUMING: (
        "False",
        "GangSchedulingFailed",
        "the gang could not be reserved in time; its pods are scheduled normally",
    ),
    AppState.FAILED: ("False", "ApplicationFailed", "the gang failed; see the events of its pods"),
}


@dataclass(frozen=True)
class VolcanoGang:
    """What a Volcano PodGroup says of its gang, in yuniplace's terms."""

    groups: list[dict[str, Any]]  # YuniKorn task-group objects
    warnings: list[str]
    priority_class_name: str | None


def task_of(pod: Mapping[str, Any]) -> str | None:
    """The Volcano task a pod belongs to, as Volcano's Job controller marks it."""
    return annotations_of(pod).get(TASK) or None


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
        if check_task_name(name, f"annotation {TASK}", problems):
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
                missing = f"names a task no pod belongs to (annotation {TASK})"
                problems.append(Problem(where, count, missing))
            else:
                groups.append(shaped_group(shape, task, count, where, problems))
    priority = spec.get("priorityClassName")
    if priority is not None and not isinstance(priority, str):
        problems.append(Problem("PodGroup spec.priorityClassName", priority, "must be the name of a PriorityClass"))
        priority = None
    wanted = min_resources(spec.get("minResources"), MIN_RESOURCES, problems)
    if not problems:
        warnings += beyond_groups(wanted, groups, MIN_RESOURCES)
    return VolcanoGang(groups, warnings, priority or None)


def _phase(progress: GangProgress, min_member: int) -> str:
    if progress.scheduled and progress.scheduled >= min_member:
        return "Completed" if progress.bound_have_ended else "Running"
    if progress.state in TERMINAL:
        return "Unknown" if progress.some_member_lives else "Completed"
    if progress.state == AppState.RESUMING:
        return "Unknown"
    if progress.state in (AppState.RESERVING, AppState.RESERVED, AppState.RUNNING):
        return "Inqueue"
    return "Pending"


def _conditions(state: AppState, shown: list[Mapping[str, Any]], now: str, ran: bool) -> list[Mapping[str, Any]]:
    """The conditions shown, with yuniplace's Scheduled condition for `state` in place of the one
    there. A completed gang keeps what it has, unless that still says it waits (the PodGroup last seen
    before its start was written, a gang that started and ended between two looks): one whose members
    `ran` was scheduled."""
    before = next((c for c in shown if c.get("type") == SCHEDULED), None)
    wanted = SCHEDULED_IN.get(state)
    still_waiting = before is not None and before.get("reason") in ("Pending", "Reserving")
    if wanted is None and ran and still_waiting:
        wanted = SCHEDULED_IN[AppState.RUNNING]
    if wanted is None:
        return shown
    status, reason, message = wanted
    since = before.get("lastTransitionTime") if before is not None and before.get("status") == status else None
    condition = {
        "type": SCHEDULED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
    }
    return [c for c in shown if c.get("type") != SCHEDULED] + [condition]


class VolcanoPodGroups:
    path = keys.VOLCANO_API
    named_by = f"annotation {GROUP_NAME}"
    kind = "Volcano PodGroup"
    gangs = "Volcano gangs"
    watch_name = "volcano-podgroups"

    def status(self, pod_group: PodGroup, progress: GangProgress) -> dict[str, Any] | None:
        """Phase, member counts and the Scheduled condition. Volcano's minMember may be fewer than the
        task groups' total (see above): its own rule counts it."""
        shown = pod_group.get("status") or {}
        min_member = (pod_group.get("spec") or {}).get("minMember")
        if not (isinstance(min_member, int) and not isinstance(min_member, bool) and min_member > 0):
            min_member = progress.min_members
        status: dict[str, Any] = {
            "phase": _phase(progress, min_member),
            **progress.counts(COUNTS),
            "conditions": _conditions(
                progress.state,
                list(shown.get("conditions") or []),
                progress.now,
                ran=progress.scheduled > 0 or progress.succeeded > 0,
            ),
        }
        if not status["conditions"]:
            del status["conditions"]
        return status if differs(status, shown, COUNTS) else None

    def queue(self, pod_group: PodGroup) -> str | None:
        return volcano_queue(pod_group)

    def missing_tasks(self, pod_group: PodGroup, members: Sequence[Pod]) -> list[str]:
        return missing_tasks(pod_group, members)


class Volcano(PodsLikeThese):
    title = "Volcano"
    keys = KEYS
    pod_groups: VolcanoPodGroups = VolcanoPodGroups()

    def detects(self, pod: Pod) -> bool:
        return bool(annotations_of(pod).get(GROUP_NAME))

    def gang_name(self, pod: Pod) -> str | None:
        return annotations_of(pod)[GROUP_NAME]

    def named_by(self, pod: Pod) -> str:
        return self.pod_groups.named_by

    def task_group(self, pod: Pod) -> str | None:
        """The pod's task: the task groups of a PodGroup with minTaskMember are its tasks."""
        return annotations_of(pod).get(TASK) or MEMBER_GROUP

    def readable(self, pod_group: PodGroup | None, members: Sequence[Pod]) -> bool:
        return pod_group is not None and not missing_tasks(pod_group, members)

    def spec(self, pod: Pod, pod_group: PodGroup | None, members: Sequence[Pod], limits: Limits) -> GangSpec:
        """One task group per task with a minimum, shaped like the task's pods; members of other tasks
        follow the gang unreserved."""
        if pod_group is None:
            raise no_pod_group(self.named_by(pod), self.gang_name(pod), self.pod_groups.kind)
        # Volcano has no gang timeout: it drops a gang's partial allocation each session and tries again.
        stated = StatedGang(on_timeout=OnTimeout.RETRY)
        gang = read(pod, pod_group, members, stated.problems, limits)
        stated.groups = gang.groups
        spec = gang_spec(pod, stated, self.title, limits, members)
        return dataclasses.replace(
            spec,
            warnings=spec.warnings + tuple(gang.warnings),
            priority_class_name=gang.priority_class_name,
            other_groups_follow=True,
        )

    def own_problems(self, pod: Pod, limits: Limits) -> list[Problem]:
        """A member's own annotations, and the task its Job marked it with."""
        problems = member_problems(pod, limits)
        task = task_of(pod)
        if task is not None:
            check_task_name(task, TASK, problems)
        return problems


DIALECT = Volcano()
