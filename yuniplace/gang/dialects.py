"""The gang dialects users already write, read as YuniKorn's task groups.

Coscheduling's labels, Koordinator's annotations and scheduler-plugins' PodGroup each describe a gang
as "N pods like these". Each becomes one task group built from the pod's own spec (its requests,
node selector, tolerations and node affinity), checked like any task group, so the rest of yuniplace
speaks one language. A gang whose pods differ in size should use YuniKorn's task groups, which
describe each kind of pod, or, written for Volcano, its PodGroup's minTaskMember (see volcano.py).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from yuniplace.gang import keys, native, volcano
from yuniplace.gang.podshape import MEMBER_GROUP, shaped_group, whole_number
from yuniplace.gang.taskgroups import (
    GangSpec,
    InvalidGang,
    Limits,
    Mode,
    OnTimeout,
    Problem,
    gang_group,
    gang_of,
    mode_of,
    policy_of,
)

GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s))+$")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class Dialect(enum.Enum):
    YUNIKORN = "YuniKorn"
    COSCHEDULING = "Coscheduling"
    KOORDINATOR = "Koordinator"
    POD_GROUP = "PodGroup"
    VOLCANO = "Volcano"
    # Kubernetes' own gangs (native.py): kube-scheduler binds them; yuniplace only sees them.
    NATIVE = "Workload API"


# The dialects whose gang a PodGroup object describes, and the API that serves their PodGroups.
POD_GROUP_APIS = {Dialect.POD_GROUP: keys.POD_GROUP_API, Dialect.VOLCANO: keys.VOLCANO_API}
# What each dialect's own scheduler does with a gang out of time, its default here (README: "Pods written
# for other gang schedulers"): Koordinator marks its pods timed out and never schedules them;
# scheduler-plugins' Coscheduling rejects them and retries the group after a backoff; Volcano has no
# timeout and retries every session, never binding part of a gang. The Workload API's gangs are
# kube-scheduler's own.
ON_TIMEOUT = {
    Dialect.KOORDINATOR: OnTimeout.MARK_TIMED_OUT,
    Dialect.COSCHEDULING: OnTimeout.RETRY,
    Dialect.POD_GROUP: OnTimeout.RETRY,
    Dialect.VOLCANO: OnTimeout.RETRY,
}
# What names a member's PodGroup, for messages.
POD_GROUP_NAMED_BY = {
    Dialect.POD_GROUP: f"label {keys.POD_GROUP_LABEL}",
    Dialect.VOLCANO: f"annotation {keys.VOLCANO_GROUP_NAME}",
}


def _meta(pod: Mapping[str, Any], kind: str) -> Mapping[str, str]:
    return pod.get("metadata", {}).get(kind) or {}


def dialect_of(pod: Mapping[str, Any]) -> Dialect | None:
    """The dialect a pod's gang is written in. A pod of a native pod group is kube-scheduler's gang
    whatever else it carries: reserving it a second time would count its room twice. Otherwise
    YuniKorn's wins when a pod carries several."""
    if native.group_of(pod) is not None:
        return Dialect.NATIVE
    return _written_dialect(pod)


def ignored_dialect(pod: Mapping[str, Any]) -> Dialect | None:
    """The gang a pod of a native pod group also describes in another dialect, which yuniplace then
    ignores (kube-scheduler gangs the pod); None for every other pod."""
    return _written_dialect(pod) if native.group_of(pod) is not None else None


def _written_dialect(pod: Mapping[str, Any]) -> Dialect | None:
    notes, labels = _meta(pod, "annotations"), _meta(pod, "labels")
    if keys.TASK_GROUPS in notes or keys.TASK_GROUP_NAME in notes:
        return Dialect.YUNIKORN
    if notes.get(keys.KOORDINATOR_NAME):
        return Dialect.KOORDINATOR
    if labels.get(keys.COSCHEDULING_NAME):
        return Dialect.COSCHEDULING
    if labels.get(keys.POD_GROUP_LABEL):
        return Dialect.POD_GROUP
    if notes.get(keys.VOLCANO_GROUP_NAME):
        return Dialect.VOLCANO
    return None


def is_native_gang(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an application's pods form a gang of Kubernetes' own: its pods share the pod group that
    makes them one application, so its first pod tells (a pod naming another is another application)."""
    return bool(pods) and dialect_of(pods[0]) == Dialect.NATIVE


def pod_group_dialect(pods: Iterable[Mapping[str, Any]]) -> Dialect | None:
    """Which PodGroup API describes the gang of an application's pods (its first member's dialect),
    if any: a scheduler-plugins and a Volcano PodGroup may share a name, and only the one its pods
    name is theirs."""
    return next((d for pod in pods if (d := dialect_of(pod)) in POD_GROUP_APIS), None)


def gang_name(pod: Mapping[str, Any], dialect: Dialect | None) -> str | None:
    """The gang a pod of another dialect (`dialect`, as dialect_of found it) belongs to: its application id."""
    if dialect == Dialect.KOORDINATOR:
        return _meta(pod, "annotations")[keys.KOORDINATOR_NAME]
    if dialect == Dialect.COSCHEDULING:
        return _meta(pod, "labels")[keys.COSCHEDULING_NAME]
    if dialect == Dialect.POD_GROUP:
        return _meta(pod, "labels")[keys.POD_GROUP_LABEL]
    if dialect == Dialect.VOLCANO:
        return _meta(pod, "annotations")[keys.VOLCANO_GROUP_NAME]
    if dialect == Dialect.NATIVE:
        return native.group_of(pod)
    return None


def _duration_s(text: str, where: str, problems: list[Problem]) -> int | None:
    """Go's duration syntax ("90s", "10m", "1h30m"), as Koordinator's waiting-time is written."""
    if not GO_DURATION.match(text):
        problems.append(Problem(where, text, 'must be a duration such as "600s", "10m" or "1h30m"'))
        return None
    seconds = sum(float(amount) * SECONDS[unit] for amount, unit in DURATION_PART.findall(text))
    if seconds < 1:
        problems.append(Problem(where, text, "must be at least 1s"))
        return None
    return int(seconds)


def gang_spec_of(
    pod: Mapping[str, Any],
    dialect: Dialect,
    pod_group: Mapping[str, Any] | None,
    limits: Limits,
    members: Sequence[Mapping[str, Any]] = (),
) -> GangSpec:
    """The gang a pod of another dialect than YuniKorn's describes: one task group shaped like the pod
    (Volcano: one per task, shaped like the task's pods among `members`). InvalidGang names the
    dialect's own fields, so the message points at what the user wrote. The pod's own yuniplace
    annotations (gang mode and group) and schedulingPolicyParameters win over what the dialect says."""
    notes, labels = _meta(pod, "annotations"), _meta(pod, "labels")
    problems: list[Problem] = []
    timeout_s: int | None = None
    mode = Mode.NON_STRICT
    group_with: tuple[str, ...] = ()
    gang: volcano.VolcanoGang | None = None
    if dialect in POD_GROUP_APIS and pod_group is None:
        named_by = POD_GROUP_NAMED_BY[dialect]
        name = gang_name(pod, dialect)
        kind = "PodGroup" if dialect == Dialect.POD_GROUP else f"{dialect.value} PodGroup"
        raise InvalidGang([Problem(named_by, name, f"names no {kind} in this namespace")])
    if dialect == Dialect.NATIVE and pod_group is None:
        raise InvalidGang(
            [
                Problem(
                    native.named_by(pod),
                    native.group_of(pod),
                    "names no pod group of the Workload API in this namespace: kube-scheduler keeps the pod "
                    "unschedulable until it is created (yuniplace does not hold it)",
                )
            ]
        )
    most = min(limits.max_members_per_group, limits.max_members_per_app)  # one group of members
    if dialect == Dialect.COSCHEDULING:
        where = keys.COSCHEDULING_MIN_AVAILABLE
        min_member = whole_number(labels.get(where, "1"), f"label {where}", problems, most=most)
    elif dialect == Dialect.KOORDINATOR:
        where = keys.KOORDINATOR_MIN_AVAILABLE
        min_member = whole_number(notes.get(where, "1"), where, problems, most=most)
        if keys.KOORDINATOR_WAITING_TIME in notes:
            timeout_s = _duration_s(notes[keys.KOORDINATOR_WAITING_TIME], keys.KOORDINATOR_WAITING_TIME, problems)
        # Koordinator's default mode is Strict.
        mode = next((m for m in Mode if m.value == notes.get(keys.KOORDINATOR_MODE, Mode.STRICT.value)), Mode.STRICT)
        if notes.get(keys.KOORDINATOR_MODE, Mode.STRICT.value) != mode.value:
            problems.append(Problem(keys.KOORDINATOR_MODE, notes[keys.KOORDINATOR_MODE], "must be Strict or NonStrict"))
        groups_text = notes.get(keys.KOORDINATOR_GROUPS)
        # Koordinator reads an empty value, or an empty list, as no gang group.
        if groups_text is not None and groups_text.strip() not in ("", "[]"):
            group_with = gang_group(groups_text, keys.KOORDINATOR_GROUPS, problems)
    elif dialect == Dialect.VOLCANO:
        assert pod_group is not None
        # Volcano has no gang timeout: yuniplace's default one, after which the gang is reserved again.
        gang = volcano.read(pod, pod_group, members, problems, limits)
    elif dialect == Dialect.NATIVE:
        assert pod_group is not None
        spec = pod_group.get("spec") or {}
        where = f"{spec.get('describedBy')} gang minCount"
        min_member = whole_number(spec.get("minCount"), where, problems, most=most)
    else:
        assert pod_group is not None
        spec = pod_group.get("spec") or {}
        where = "PodGroup spec.minMember"
        min_member = whole_number(spec.get("minMember"), where, problems, most=most)
        scheduled_timeout = spec.get("scheduleTimeoutSeconds")
        if isinstance(scheduled_timeout, int) and not isinstance(scheduled_timeout, bool) and scheduled_timeout > 0:
            timeout_s = scheduled_timeout
    if timeout_s is not None and timeout_s > limits.max_timeout_s:
        problems.append(Problem(f"{dialect.value} timeout", timeout_s, f"must be at most {limits.max_timeout_s}s"))
        timeout_s = None
    if keys.GANG_MODE in notes:
        mode = mode_of(notes[keys.GANG_MODE], problems)
    if keys.GANG_GROUP in notes:
        group_with = gang_group(notes[keys.GANG_GROUP], keys.GANG_GROUP, problems)
    groups = gang.groups if gang is not None else [shaped_group(pod, MEMBER_GROUP, min_member, where, problems)]
    if problems:
        raise InvalidGang(problems)
    policy = policy_of(
        notes.get(keys.SCHEDULING_POLICY_PARAMETERS),
        limits,
        problems,
        default_timeout_s=timeout_s,
        dialect_rule=ON_TIMEOUT.get(dialect),
    )
    gang_spec = gang_of(groups, policy, mode, group_with, limits, problems)
    if gang is None:
        whole = dialect in (Dialect.COSCHEDULING, Dialect.KOORDINATOR, Dialect.POD_GROUP)
        return dataclasses.replace(gang_spec, starts_when_all_exist=dialect.value) if whole else gang_spec
    return dataclasses.replace(
        gang_spec,
        warnings=gang_spec.warnings + tuple(gang.warnings),
        priority_class_name=gang.priority_class_name,
        other_groups_follow=True,
    )


def own_problems(pod: Mapping[str, Any], dialect: Dialect, limits: Limits) -> list[Problem]:
    """What a member of a gang that a PodGroup describes says itself, checked without the PodGroup
    (the webhook reads nothing from the API, and a PodGroup may be created after its pods): its
    schedulingPolicyParameters, gang mode and gang group, and a Volcano pod's task."""
    notes = _meta(pod, "annotations")
    problems: list[Problem] = []
    policy_of(notes.get(keys.SCHEDULING_POLICY_PARAMETERS), limits, problems)
    if keys.GANG_MODE in notes:
        mode_of(notes[keys.GANG_MODE], problems)
    if keys.GANG_GROUP in notes:
        gang_group(notes[keys.GANG_GROUP], keys.GANG_GROUP, problems)
    task = volcano.task_of(pod) if dialect == Dialect.VOLCANO else None
    if task is not None:
        volcano.check_task_name(task, keys.VOLCANO_TASK, problems)
    return problems
