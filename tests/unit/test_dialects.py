"""Coscheduling labels, Koordinator annotations and PodGroups read as YuniKorn task groups."""

from __future__ import annotations

import json
from typing import Any

import pytest

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import MEMBER_GROUP, Dialect, dialect_of, gang_annotations
from yuniplace.gang.taskgroups import InvalidGang, Mode, parse_gang


def pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, cpu: str = "2",
        **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "worker-0", "namespace": "ns", "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "3Gi"}}}], **spec},
    }


COSCHEDULING = pod({keys.COSCHEDULING_NAME: "mpi-job", keys.COSCHEDULING_MIN_AVAILABLE: "4"},
                   nodeSelector={"kind": "hpc"}, tolerations=[{"key": "hpc", "operator": "Exists"}])
KOORDINATOR = pod(annotations={keys.KOORDINATOR_NAME: "train", keys.KOORDINATOR_MIN_AVAILABLE: "3",
                               keys.KOORDINATOR_WAITING_TIME: "1m30s", keys.KOORDINATOR_MODE: "NonStrict",
                               keys.KOORDINATOR_GROUPS: '["ns/train", "other/eval"]'})
POD_GROUP_MEMBER = pod({keys.POD_GROUP_LABEL: "pg-1"})
POD_GROUP = {"metadata": {"name": "pg-1", "namespace": "ns"}, "spec": {"minMember": 5, "scheduleTimeoutSeconds": 120}}


def test_each_dialect_is_recognised_and_names_its_application() -> None:
    assert dialect_of(COSCHEDULING) == Dialect.COSCHEDULING
    assert dialect_of(KOORDINATOR) == Dialect.KOORDINATOR
    assert dialect_of(POD_GROUP_MEMBER) == Dialect.POD_GROUP
    assert dialect_of(pod()) is None
    assert [p.app_key(x) for x in (COSCHEDULING, KOORDINATOR, POD_GROUP_MEMBER)] == [
        p.AppKey("ns", "mpi-job"), p.AppKey("ns", "train"), p.AppKey("ns", "pg-1")]
    assert all(p.task_group_name(x) == MEMBER_GROUP and p.carries_task_groups(x) for x in (COSCHEDULING, KOORDINATOR, POD_GROUP_MEMBER))
    assert all(p.is_concerned(x) for x in (COSCHEDULING, KOORDINATOR, POD_GROUP_MEMBER))


def test_yunikorn_annotations_win_over_another_dialect() -> None:
    both = pod({keys.COSCHEDULING_NAME: "x"}, {keys.TASK_GROUP_NAME: "g"})
    assert dialect_of(both) == Dialect.YUNIKORN
    assert gang_annotations(both) is both["metadata"]["annotations"]


def test_coscheduling_gang_is_one_group_of_the_pods_own_shape() -> None:
    spec = parse_gang(gang_annotations(COSCHEDULING))
    (group,) = spec.groups
    assert (group.name, group.min_member) == (MEMBER_GROUP, 4)
    assert dict(group.min_resource) == {"cpu": "2", "memory": "3Gi"}
    assert dict(group.node_selector) == {"kind": "hpc"}
    assert list(group.tolerations) == [{"key": "hpc", "operator": "Exists"}]
    assert spec.mode == Mode.NON_STRICT


def test_koordinator_waiting_time_mode_and_groups() -> None:
    spec = parse_gang(gang_annotations(KOORDINATOR))
    assert spec.groups[0].min_member == 3
    assert spec.policy.timeout_s == 90
    assert spec.mode == Mode.NON_STRICT
    assert spec.gang_group == ("ns/train", "other/eval")


def test_koordinator_defaults_to_strict_like_koordinator() -> None:
    spec = parse_gang(gang_annotations(pod(annotations={keys.KOORDINATOR_NAME: "t"})))
    assert spec.mode == Mode.STRICT
    assert spec.groups[0].min_member == 1


def test_pod_group_gives_min_member_and_timeout() -> None:
    spec = parse_gang(gang_annotations(POD_GROUP_MEMBER, POD_GROUP))
    assert spec.groups[0].min_member == 5
    assert spec.policy.timeout_s == 120


def test_the_pods_own_style_is_kept() -> None:
    hard = pod({keys.COSCHEDULING_NAME: "j"}, {keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Hard"})
    assert parse_gang(gang_annotations(hard)).policy.style.value == "Hard"


@pytest.mark.parametrize(
    ("subject", "pod_group", "message"),
    [
        (pod({keys.COSCHEDULING_NAME: "j", keys.COSCHEDULING_MIN_AVAILABLE: "two"}), None, "min-available: \"two\" must be a whole number"),
        (pod({keys.COSCHEDULING_NAME: "j", keys.COSCHEDULING_MIN_AVAILABLE: "0"}), None, "at least 1"),
        (pod(annotations={keys.KOORDINATOR_NAME: "t", keys.KOORDINATOR_WAITING_TIME: "soon"}), None, "waiting-time: \"soon\" must be a duration"),
        (pod(annotations={keys.KOORDINATOR_NAME: "t", keys.KOORDINATOR_MODE: "Lenient"}), None, "mode: \"Lenient\" must be Strict or NonStrict"),
        (pod(annotations={keys.KOORDINATOR_NAME: "t", keys.KOORDINATOR_GROUPS: '["no-slash"]'}), None,
         'koordinator.sh/groups: "no-slash" is not "namespace/app-id"'),
        (POD_GROUP_MEMBER, None, "names no PodGroup"),
        (POD_GROUP_MEMBER, {"spec": {}}, "PodGroup spec.minMember"),
        ({"metadata": {"name": "w", "labels": {keys.COSCHEDULING_NAME: "j"}}, "spec": {"containers": [{"name": "c"}]}}, None,
         "requests: {} are empty"),
    ],
)
def test_bad_dialect_input_names_the_field(subject: dict[str, Any], pod_group: Any, message: str) -> None:
    with pytest.raises(InvalidGang, match=message.replace("(", r"\(")):
        parse_gang(gang_annotations(subject, pod_group))


def test_built_task_groups_are_valid_json_for_the_parser() -> None:
    built = gang_annotations(COSCHEDULING)
    assert json.loads(built[keys.TASK_GROUPS])[0]["minMember"] == 4
