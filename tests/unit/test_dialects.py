"""Coscheduling labels, Koordinator annotations, PodGroups and Volcano's PodGroups read as YuniKorn task groups."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application, queue_of, read_gang
from yuniplace.gang.dialects import coscheduling, koordinator, podgroup, volcano, yunikorn
from yuniplace.gang.dialects.registry import dialect_of, pod_group_dialect
from yuniplace.gang.dialects.volcano import volcano_queue
from yuniplace.gang.podshape import MEMBER_GROUP
from yuniplace.gang.taskgroups import InvalidGang, Limits, Mode, OnTimeout, Style, parse_gang


def pod(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, cpu: str = "2", **spec: Any
) -> dict[str, Any]:
    return builders.pod(
        "worker-0",
        labels=labels or {},
        annotations=annotations or {},
        container="main",
        requests={"cpu": cpu, "memory": "3Gi"},
        **spec,
    )


COSCHEDULING = pod(
    {coscheduling.NAME: "mpi-job", coscheduling.MIN_AVAILABLE: "4"},
    nodeSelector={"kind": "hpc"},
    tolerations=[{"key": "hpc", "operator": "Exists"}],
)
KOORDINATOR = pod(
    annotations={
        koordinator.NAME: "train",
        koordinator.MIN_AVAILABLE: "3",
        koordinator.WAITING_TIME: "1m30s",
        koordinator.MODE: "NonStrict",
        koordinator.GROUPS: '["ns/train", "other/eval"]',
    }
)
POD_GROUP_MEMBER = pod({podgroup.LABEL: "pg-1"})
POD_GROUP = {"metadata": {"name": "pg-1", "namespace": "ns"}, "spec": {"minMember": 5, "scheduleTimeoutSeconds": 120}}


def test_each_dialect_is_recognised_and_names_its_application() -> None:
    assert dialect_of(COSCHEDULING) is coscheduling.DIALECT
    assert dialect_of(KOORDINATOR) is koordinator.DIALECT
    assert dialect_of(POD_GROUP_MEMBER) is podgroup.DIALECT
    assert dialect_of(pod()) is None
    assert [p.app_key(x) for x in (COSCHEDULING, KOORDINATOR, POD_GROUP_MEMBER)] == [
        p.AppKey("ns", "mpi-job"),
        p.AppKey("ns", "train"),
        p.AppKey("ns", "pg-1"),
    ]
    # A member's task group is its role and shape: these pods' operators label no role.
    assert all(
        re.fullmatch(r"members-[0-9a-f]{6}", str(p.task_group_name(x))) and p.carries_task_groups(x)
        for x in (COSCHEDULING, KOORDINATOR, POD_GROUP_MEMBER)
    )
    assert all(p.is_concerned(x) for x in (COSCHEDULING, KOORDINATOR, POD_GROUP_MEMBER))


def test_yunikorn_annotations_win_over_another_dialect() -> None:
    both = pod({coscheduling.NAME: "x"}, {keys.TASK_GROUP_NAME: "g"})
    assert dialect_of(both) is yunikorn.DIALECT
    both["metadata"]["annotations"][keys.TASK_GROUPS] = json.dumps(
        [{"name": "g", "minMember": 7, "minResource": {"cpu": "1"}}]
    )
    assert read_gang(both) == parse_gang(both["metadata"]["annotations"])


def test_coscheduling_gang_is_one_group_of_the_pods_own_shape() -> None:
    spec = read_gang(COSCHEDULING)
    (group,) = spec.groups
    assert (group.name, group.min_member) == (p.task_group_name(COSCHEDULING), 4)
    assert dict(group.min_resource) == {"cpu": "2", "memory": "3Gi"}
    assert dict(group.node_selector) == {"kind": "hpc"}
    assert list(group.tolerations) == [{"key": "hpc", "operator": "Exists"}]
    assert spec.mode == Mode.NON_STRICT


def test_koordinator_waiting_time_mode_and_groups() -> None:
    spec = read_gang(KOORDINATOR)
    assert spec.groups[0].min_member == 3
    assert spec.policy.timeout_s == 90
    assert spec.mode == Mode.NON_STRICT
    assert spec.gang_group == ("ns/train", "other/eval")


def test_an_empty_koordinator_gang_group_is_no_gang_group_as_koordinator_reads_it() -> None:
    for empty in ("", "  ", "[]"):
        spec = read_gang(pod(annotations={koordinator.NAME: "t", koordinator.GROUPS: empty}))
        assert spec.gang_group == () and spec.groups[0].min_member == 1, repr(empty)


def test_koordinator_defaults_to_strict_like_koordinator() -> None:
    spec = read_gang(pod(annotations={koordinator.NAME: "t"}))
    assert spec.mode == Mode.STRICT
    assert spec.groups[0].min_member == 1


def test_pod_group_gives_min_member_and_timeout() -> None:
    spec = read_gang(POD_GROUP_MEMBER, POD_GROUP)
    assert spec.groups[0].min_member == 5
    assert spec.policy.timeout_s == 120


def test_the_pods_own_style_is_kept() -> None:
    hard = pod({coscheduling.NAME: "j"}, {keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Hard"})
    assert read_gang(hard).policy.style.value == "Hard"


def test_each_dialect_times_out_by_its_own_schedulers_rule_unless_the_pod_names_a_style() -> None:
    """Koordinator marks a gang out of time and never schedules it; Coscheduling and a PodGroup back off
    and retry; Volcano never times a gang out (it waits, reserved again after each timeout here);
    YuniKorn's task groups follow --default-style. A gangSchedulingStyle on the pod wins over all."""
    yunikorn = pod(
        annotations={keys.TASK_GROUPS: json.dumps([{"name": "a", "minMember": 1, "minResource": {"cpu": "1"}}])}
    )
    volcano_pg = volcano_group(minMember=1)
    rules = {
        "YuniKorn": read_gang(yunikorn).policy.on_timeout,
        "YuniKorn, --default-style Hard": read_gang(
            yunikorn, limits=Limits(default_style=Style.HARD)
        ).policy.on_timeout,
        "Koordinator": read_gang(KOORDINATOR).policy.on_timeout,
        "Coscheduling": read_gang(COSCHEDULING).policy.on_timeout,
        "PodGroup": read_gang(POD_GROUP_MEMBER, POD_GROUP).policy.on_timeout,
        "Volcano": read_gang(VOLCANO_MEMBER, volcano_pg, members=[VOLCANO_MEMBER]).policy.on_timeout,
    }
    assert rules == {
        "YuniKorn": OnTimeout.SOFT,
        "YuniKorn, --default-style Hard": OnTimeout.HARD,
        "Koordinator": OnTimeout.MARK_TIMED_OUT,
        "Coscheduling": OnTimeout.RETRY,
        "PodGroup": OnTimeout.RETRY,
        "Volcano": OnTimeout.RETRY,
    }
    for style in ("Soft", "Hard"):
        named = {keys.SCHEDULING_POLICY_PARAMETERS: f"placeholderTimeoutInSeconds=30 gangSchedulingStyle={style}"}
        koordinator_pod = pod(annotations={**p.annotations_of(KOORDINATOR), **named})
        coscheduling_pod = pod(p.labels_of(COSCHEDULING), named)
        assert read_gang(koordinator_pod).policy.on_timeout == OnTimeout(style)
        assert read_gang(coscheduling_pod).policy.on_timeout == OnTimeout(style)
    # A timeout alone keeps the dialect's rule.
    timeout_only = pod(
        annotations={
            **p.annotations_of(KOORDINATOR),
            keys.SCHEDULING_POLICY_PARAMETERS: "placeholderTimeoutInSeconds=30",
        }
    )
    assert read_gang(timeout_only).policy.on_timeout == OnTimeout.MARK_TIMED_OUT


@pytest.mark.parametrize(
    ("subject", "pod_group", "message"),
    [
        (
            pod({coscheduling.NAME: "j", coscheduling.MIN_AVAILABLE: "two"}),
            None,
            'min-available: "two" must be a whole number',
        ),
        (pod({coscheduling.NAME: "j", coscheduling.MIN_AVAILABLE: "0"}), None, "at least 1"),
        (
            pod(annotations={koordinator.NAME: "t", koordinator.WAITING_TIME: "soon"}),
            None,
            'waiting-time: "soon" must be a duration',
        ),
        (
            pod(annotations={koordinator.NAME: "t", koordinator.MODE: "Lenient"}),
            None,
            'mode: "Lenient" must be Strict or NonStrict',
        ),
        (
            pod(annotations={koordinator.NAME: "t", koordinator.GROUPS: '["no-slash"]'}),
            None,
            'koordinator.sh/groups: "no-slash" is not "namespace/app-id"',
        ),
        (POD_GROUP_MEMBER, None, "names no PodGroup"),
        (POD_GROUP_MEMBER, {"spec": {}}, "PodGroup spec.minMember"),
        (
            {
                "metadata": {"name": "w", "labels": {coscheduling.NAME: "j"}},
                "spec": {"containers": [{"name": "c"}]},
            },
            None,
            "requests: {} are empty",
        ),
    ],
)
def test_bad_dialect_input_names_the_field(subject: dict[str, Any], pod_group: Any, message: str) -> None:
    with pytest.raises(InvalidGang, match=message.replace("(", r"\(")):
        read_gang(subject, pod_group)


def test_a_minimum_beyond_the_limit_is_reported_with_the_key_the_user_wrote() -> None:
    assert read_gang(COSCHEDULING).groups[0].min_member == 4
    cases = [
        (
            pod({coscheduling.NAME: "j", coscheduling.MIN_AVAILABLE: "5000"}),
            None,
            f'label {coscheduling.MIN_AVAILABLE}: "5000" must be at most 1000 pods',
        ),
        (
            pod(annotations={koordinator.NAME: "j", koordinator.MIN_AVAILABLE: "5000"}),
            None,
            f'{koordinator.MIN_AVAILABLE}: "5000" must be at most 1000 pods',
        ),
        (POD_GROUP_MEMBER, {**POD_GROUP, "spec": {"minMember": 5000}}, "PodGroup spec.minMember: 5000 must be at most"),
    ]
    for member, group, expected in cases:
        with pytest.raises(InvalidGang) as refused:
            read_gang(member, group)
        assert expected in str(refused.value) and "task-groups" not in str(refused.value), str(refused.value)


# -- Volcano ---------------------------------------------------------------------------------------


def volcano_pod(name: str, task: str | None = None, cpu: str = "2", **notes: str) -> dict[str, Any]:
    member = pod(annotations={volcano.GROUP_NAME: "tf-job", **notes}, cpu=cpu)
    member["metadata"]["name"] = name
    if task is not None:
        member["metadata"]["annotations"][volcano.TASK] = task
    return member


def volcano_group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "tf-job", "namespace": "ns"},
        "spec": spec,
    }


VOLCANO_MEMBER = volcano_pod("tf-job-0")


def test_volcano_pods_are_recognised_by_their_group_name_annotation() -> None:
    assert dialect_of(VOLCANO_MEMBER) is volcano.DIALECT
    assert p.app_key(VOLCANO_MEMBER) == p.AppKey("ns", "tf-job")
    assert p.carries_task_groups(VOLCANO_MEMBER) and p.is_concerned(VOLCANO_MEMBER)
    assert p.task_group_name(VOLCANO_MEMBER) == MEMBER_GROUP
    assert p.task_group_name(volcano_pod("ps-0", "ps")) == "ps"  # a Volcano Job's task
    # The label of the same name is no gang, and other dialects come first.
    assert dialect_of(pod({volcano.GROUP_NAME: "tf-job"})) is None
    assert dialect_of(pod({podgroup.LABEL: "pg"}, {volcano.GROUP_NAME: "tf-job"})) is podgroup.DIALECT


def test_pods_for_volcanos_own_scheduler_are_left_to_it() -> None:
    assert not p.is_concerned({**VOLCANO_MEMBER, "spec": {**VOLCANO_MEMBER["spec"], "schedulerName": "volcano"}})


def test_volcano_pod_group_without_tasks_is_one_group_of_min_member() -> None:
    spec = read_gang(VOLCANO_MEMBER, volcano_group(minMember=4, queue="ml", priorityClassName="batch-high"))
    (group,) = spec.groups
    assert (group.name, group.min_member, dict(group.min_resource)) == (MEMBER_GROUP, 4, {"cpu": "2", "memory": "3Gi"})
    assert spec.priority_class_name == "batch-high" and spec.other_groups_follow
    # Volcano has no placeholder timeout: yuniplace's default, or the pod's own parameters.
    assert spec.policy.timeout_s == Limits().default_timeout_s and spec.mode == Mode.NON_STRICT
    own = volcano_pod(
        "w", **{keys.SCHEDULING_POLICY_PARAMETERS: "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard"}
    )
    policy = read_gang(own, volcano_group(minMember=2)).policy
    assert (policy.timeout_s, policy.style.value) == (60, "Hard")


def test_volcano_single_task_gang_is_named_after_its_task() -> None:
    spec = read_gang(volcano_pod("w-0", "worker"), volcano_group(minMember=3))
    assert [(g.name, g.min_member) for g in spec.groups] == [("worker", 3)]


def test_volcano_min_task_member_gives_each_task_a_group_shaped_like_its_pods() -> None:
    ps, worker = volcano_pod("ps-0", "ps", cpu="1"), volcano_pod("worker-0", "worker", cpu="4")
    pod_group = volcano_group(minMember=3, minTaskMember={"worker": 2, "ps": 1, "evaluator": 0})
    spec = read_gang(ps, pod_group, members=[ps, worker])
    assert [(g.name, g.min_member, g.min_resource["cpu"]) for g in spec.groups] == [("ps", 1, "1"), ("worker", 2, "4")]
    assert spec.min_members == 3 and not spec.warnings


def test_volcano_min_task_member_beyond_min_member_is_reserved_in_full_with_a_warning() -> None:
    ps, worker = volcano_pod("ps-0", "ps"), volcano_pod("worker-0", "worker")
    spec = read_gang(ps, volcano_group(minMember=2, minTaskMember={"ps": 1, "worker": 4}), members=[ps, worker])
    assert spec.min_members == 5
    assert spec.warnings == (
        "PodGroup spec.minTaskMember adds up to 5 pods, more than spec.minMember 2: yuniplace reserves every task's minimum",
    )


def test_volcano_min_resources_is_checked_against_what_the_groups_reserve() -> None:
    pod_group = volcano_group(minMember=2, minResources={"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 1, "pods": 2})
    spec = read_gang(VOLCANO_MEMBER, pod_group)  # 2 pods of cpu 2, memory 3Gi
    assert spec.warnings == (
        "PodGroup spec.minResources.memory is 8Gi, more than the task groups reserve (6Gi); "
        "yuniplace reserves what the pods request",
        "PodGroup spec.minResources.nvidia.com/gpu is 1, more than the task groups reserve (0); "
        "yuniplace reserves what the pods request",
    )
    assert not read_gang(VOLCANO_MEMBER, volcano_group(minMember=2, minResources={"cpu": "4"})).warnings


def test_volcano_gang_waits_for_its_pod_group_and_a_pod_of_every_task() -> None:
    ps = volcano_pod("ps-0", "ps", cpu="1")
    ps["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    worker = volcano_pod("worker-0", "worker", cpu="4")
    worker["metadata"]["creationTimestamp"] = "2026-01-01T00:00:01Z"
    key = p.AppKey("ns", "tf-job")
    pod_group = volcano_group(minMember=3, minTaskMember={"ps": 1, "worker": 2})
    assert Application.of(key, [ps, worker]).originator is None  # no PodGroup yet
    assert Application.of(key, [ps], pod_group).originator is None  # no worker yet
    app = Application.of(key, [ps, worker], pod_group)
    assert app.originator is ps and app.spec is not None and app.spec.min_members == 3


def test_volcano_queue_is_the_pod_groups() -> None:
    key = p.AppKey("ns", "tf-job")
    assert queue_of(Application.of(key, [VOLCANO_MEMBER], volcano_group(minMember=1, queue="ml"))) == "ml"
    assert queue_of(Application.of(key, [VOLCANO_MEMBER], volcano_group(minMember=1))) == "default"
    assert volcano_queue({"spec": {"queue": ""}}) == "default"
    # Other dialects name no queue of their own.
    assert queue_of(Application.of(p.AppKey("ns", "pg-1"), [POD_GROUP_MEMBER], POD_GROUP)) is None
    assert queue_of(Application.of(p.AppKey("ns", "mpi-job"), [COSCHEDULING])) is None


def test_an_applications_pod_group_api_is_the_one_its_pods_name() -> None:
    assert pod_group_dialect([COSCHEDULING, VOLCANO_MEMBER]) is volcano.DIALECT
    assert pod_group_dialect([POD_GROUP_MEMBER]) is podgroup.DIALECT
    assert pod_group_dialect([COSCHEDULING, KOORDINATOR]) is None


@pytest.mark.parametrize(
    ("subject", "pod_group", "message"),
    [
        (VOLCANO_MEMBER, None, 'annotation scheduling.k8s.io/group-name: "tf-job" names no Volcano PodGroup'),
        (VOLCANO_MEMBER, volcano_group(), "PodGroup spec.minMember: null must be a whole number of pods"),
        (VOLCANO_MEMBER, volcano_group(minMember=0), "PodGroup spec.minMember: 0 must be a whole number"),
        (
            volcano_pod("w", "worker"),
            volcano_group(minMember=3, minTaskMember={"worker": 2}),
            'PodGroup spec.minTaskMember: {"worker": 2} adds up to 2 pods, fewer than spec.minMember 3',
        ),
        (
            volcano_pod("w", "worker"),
            volcano_group(minMember=1, minTaskMember={"worker": -1}),
            "PodGroup spec.minTaskMember.worker: -1 must be a whole number of pods",
        ),
        (
            volcano_pod("w", "Worker_1"),
            volcano_group(minMember=1, minTaskMember={"Worker_1": 1}),
            'PodGroup spec.minTaskMember.Worker_1: "Worker_1" is not a task name yuniplace can use',
        ),
        (
            volcano_pod("w", "Worker_1"),
            volcano_group(minMember=1),
            'annotation volcano.sh/task-spec: "Worker_1" is not a task name',
        ),
        (
            volcano_pod("w", "worker"),
            volcano_group(minMember=2, minTaskMember={"worker": 1, "ps": 1}),
            "PodGroup spec.minTaskMember.ps: 1 names a task no pod belongs to",
        ),
        (
            VOLCANO_MEMBER,
            volcano_group(minMember=1, minResources={"cpu": "lots"}),
            'PodGroup spec.minResources.cpu: "lots" is not a quantity',
        ),
        (
            VOLCANO_MEMBER,
            volcano_group(minMember=1, priorityClassName=7),
            "PodGroup spec.priorityClassName: 7 must be the name of a PriorityClass",
        ),
        (
            VOLCANO_MEMBER,
            volcano_group(minMember=5000),
            "minMember: 5000 must be an integer from 1 to 1000",
        ),
    ],
)
def test_bad_volcano_input_names_volcanos_field(subject: dict[str, Any], pod_group: Any, message: str) -> None:
    with pytest.raises(InvalidGang, match=re.escape(message)):
        read_gang(subject, pod_group)
