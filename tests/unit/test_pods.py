"""Reading raw pod dicts: application ids, roles, gates, times and trimming."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.dialects import coscheduling


def pod(
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    gates: list[dict[str, str]] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod with only the fields given: the readers must cope with every one missing."""
    if gates is not None:
        spec["schedulingGates"] = gates
    made = builders.pod(uid="u1", labels=labels, annotations=annotations, container=None, **spec)
    if status is not None:
        made["status"] = status
    return made


# -- application id -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        ({}, {}, None),
        (None, None, None),
        ({keys.APP_ID: "a1"}, {}, "a1"),
        ({}, {keys.APP_ID: "a2"}, "a2"),
        ({"applicationId": "a3"}, {}, "a3"),
        ({"spark-app-selector": "a4"}, {}, "a4"),
        # Precedence: label app-id, annotation app-id, label applicationId, label spark-app-selector.
        ({keys.APP_ID: "label", "applicationId": "x", "spark-app-selector": "y"}, {keys.APP_ID: "annotation"}, "label"),
        ({"applicationId": "x", "spark-app-selector": "y"}, {keys.APP_ID: "annotation"}, "annotation"),
        ({"applicationId": "x", "spark-app-selector": "y"}, {}, "x"),
        # Empty values are skipped, not taken.
        ({keys.APP_ID: ""}, {keys.APP_ID: "annotation"}, "annotation"),
        ({keys.APP_ID: "", "applicationId": ""}, {keys.APP_ID: ""}, None),
        ({keys.APP_ID: "", "applicationId": "", "spark-app-selector": "s"}, {keys.APP_ID: ""}, "s"),
        # Only these sources count.
        ({"app": "x", "app.kubernetes.io/name": "y"}, {"applicationId": "z", "spark-app-selector": "w"}, None),
    ],
)
def test_app_id_precedence(
    labels: dict[str, str] | None, annotations: dict[str, str] | None, expected: str | None
) -> None:
    assert p.app_id(pod(labels=labels, annotations=annotations)) == expected


@pytest.mark.parametrize(
    ("annotations", "owners", "expected"),
    [
        ({keys.TASK_GROUP_NAME: "g"}, [{"kind": "Job", "name": "job-1", "controller": True}], "job-1"),
        ({keys.TASK_GROUPS: "[]"}, [{"kind": "Job", "name": "job-1", "controller": True}], "job-1"),
        (
            {keys.TASK_GROUP_NAME: "g"},
            [{"kind": "ConfigMap", "name": "x"}, {"kind": "Job", "name": "job-2", "controller": True}],
            "job-2",
        ),
        ({keys.TASK_GROUP_NAME: "g"}, [{"kind": "Job", "name": "job-1", "controller": False}], "p"),
        ({keys.TASK_GROUP_NAME: "g"}, None, "p"),
        ({}, [{"kind": "Job", "name": "job-1", "controller": True}], None),
    ],
)
def test_gang_pod_without_app_id_belongs_to_its_controller_or_itself(
    annotations: dict[str, str], owners: list[dict[str, Any]] | None, expected: str | None
) -> None:
    candidate = pod(annotations=annotations)
    if owners is not None:
        candidate["metadata"]["ownerReferences"] = owners
    assert p.app_id(candidate) == expected
    with_label = pod(labels={keys.APP_ID: "explicit"}, annotations=annotations)
    assert p.app_id(with_label) == "explicit"


def test_app_id_sources_are_declared_in_order() -> None:
    assert keys.APP_ID_SOURCES == (
        ("label", "yunikorn.apache.org/app-id"),
        ("annotation", "yunikorn.apache.org/app-id"),
        ("label", "applicationId"),
        ("label", "spark-app-selector"),
    )


def test_placeholders_carry_their_app_id_verbatim_in_an_annotation() -> None:
    placeholder = pod(
        labels={keys.PLACEHOLDER: "true", keys.PLACEHOLDER_APP: "Spark-App-1-abcdef12", keys.APP_ID: "other"},
        annotations={keys.PLACEHOLDER_APP: "Spark App/1", keys.PLACEHOLDER_GROUP: "exec", keys.TASK_GROUP_NAME: "x"},
    )
    assert p.is_placeholder(placeholder)
    assert p.app_id(placeholder) == "Spark App/1"
    assert p.task_group_name(placeholder) == "exec"
    assert p.app_key(placeholder) == p.AppKey("ns", "Spark App/1")


def test_placeholder_without_its_annotation_has_no_app() -> None:
    assert p.app_id(pod(labels={keys.PLACEHOLDER: "true", keys.APP_ID: "a"})) is None


@pytest.mark.parametrize("value", ["false", "True", "", "yes"])
def test_only_the_exact_placeholder_label_marks_a_placeholder(value: str) -> None:
    assert not p.is_placeholder(pod(labels={keys.PLACEHOLDER: value}))


def test_app_key() -> None:
    key = p.app_key(pod(labels={keys.APP_ID: "a"}))
    assert key == p.AppKey("ns", "a")
    assert str(key) == "ns/a"
    assert p.app_key(pod()) is None
    assert p.AppKey("ns1", "a") != p.AppKey("ns2", "a")


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, None),
        ({keys.TASK_GROUP_NAME: ""}, None),
        ({keys.TASK_GROUP_NAME: "exec"}, "exec"),
        ({keys.PLACEHOLDER_GROUP: "x"}, None),
    ],
)
def test_task_group_name_of_a_member(annotations: dict[str, str], expected: str | None) -> None:
    assert p.task_group_name(pod(annotations=annotations)) == expected


# -- role and state -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        (None, False),
        ([], False),
        ([{"name": "other.io/gate"}], False),
        ([{"name": keys.GATE}], True),
        ([{"name": "other.io/gate"}, {"name": keys.GATE}], True),
        ([{}], False),
    ],
)
def test_is_gated(gates: list[dict[str, str]] | None, expected: bool) -> None:
    assert p.is_gated(pod(gates=gates)) is expected


def test_is_gated_without_spec() -> None:
    assert not p.is_gated({"metadata": {}})
    assert not p.is_gated({"metadata": {}, "spec": {"schedulingGates": None}})


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        (pod(), False),
        (pod(labels={keys.APP_ID: "a"}), False),
        (pod(labels={keys.PLACEHOLDER: "true"}), True),
        (pod(annotations={keys.TASK_GROUPS: "[]"}), True),
        (pod(annotations={keys.TASK_GROUP_NAME: "g"}), True),
        (pod(annotations={keys.TASK_GROUP_NAME: ""}), False),
        (pod(gates=[{"name": keys.GATE}]), True),
    ],
)
def test_is_concerned(candidate: dict[str, Any], expected: bool) -> None:
    assert p.is_concerned(candidate) is expected


@pytest.mark.parametrize(
    ("status", "phase", "terminal"),
    [
        (None, "Pending", False),
        ({}, "Pending", False),
        ({"phase": None}, "Pending", False),
        ({"phase": "Running"}, "Running", False),
        ({"phase": "Succeeded"}, "Succeeded", True),
        ({"phase": "Failed"}, "Failed", True),
        ({"phase": "Unknown"}, "Unknown", False),
    ],
)
def test_phase_and_terminal(status: dict[str, Any] | None, phase: str, terminal: bool) -> None:
    candidate = pod(status=status)
    assert p.phase(candidate) == phase
    assert p.is_terminal(candidate) is terminal


def test_node_nomination_and_deletion() -> None:
    assert p.node_name(pod()) is None
    assert p.node_name(pod(nodeName="")) is None
    assert p.node_name(pod(nodeName="n1")) == "n1"
    assert p.nominated_node(pod()) is None
    assert p.nominated_node(pod(status={"nominatedNodeName": ""})) is None
    assert p.nominated_node(pod(status={"nominatedNodeName": "n2"})) == "n2"
    deleting = pod()
    assert not p.is_deleting(deleting)
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert p.is_deleting(deleting)


def test_names() -> None:
    candidate = pod()
    assert (p.name(candidate), p.namespace(candidate), p.uid(candidate)) == ("p", "ns", "u1")
    assert p.labels_of({"metadata": {"labels": None}}) == {}
    assert p.annotations_of({}) == {}


# -- times ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("1970-01-01T00:00:00Z", 0.0),
        ("2024-01-02T03:04:05Z", 1704164645.0),
        ("2024-01-02T03:04:05+00:00", 1704164645.0),
        ("2024-01-02T04:04:05+01:00", 1704164645.0),
        ("2024-01-02T03:04:05.5Z", 1704164645.5),
    ],
)
def test_parse_time(text: str | None, expected: float | None) -> None:
    assert p.parse_time(text) == expected


@settings(max_examples=200, deadline=None)
@given(milliseconds=st.integers(min_value=0, max_value=4_000_000_000_000))
def test_format_time_round_trips_to_the_millisecond(milliseconds: int) -> None:
    text = p.format_time(milliseconds / 1000)
    assert text.endswith("Z") and "T" in text and len(text) == 24
    assert p.parse_time(text) == pytest.approx(milliseconds / 1000, abs=1e-6)


def test_format_time_keeps_milliseconds_and_drops_the_rest() -> None:
    assert p.format_time(1704164645.9) == "2024-01-02T03:04:05.900Z"
    assert p.format_time(1704164645.0129) == "2024-01-02T03:04:05.012Z"


def test_created_at() -> None:
    candidate = pod()
    assert p.created_at(candidate) == 0.0
    candidate["metadata"]["creationTimestamp"] = "2024-01-02T03:04:05Z"
    assert p.created_at(candidate) == 1704164645.0


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (None, None),
        ([], None),
        ([{"type": "PodScheduled", "status": "False", "lastTransitionTime": "2024-01-02T03:04:05Z"}], None),
        ([{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}], None),
        ([{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}], 1704164645.0),
        (
            [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"},
            ],
            1704164645.0,
        ),
        ([{"type": "PodScheduled", "status": "True"}], None),
    ],
)
def test_scheduled_at(conditions: list[dict[str, str]] | None, expected: float | None) -> None:
    assert p.scheduled_at(pod(status={"conditions": conditions})) == expected


def test_scheduled_at_without_status() -> None:
    assert p.scheduled_at(pod()) is None


# -- trim -----------------------------------------------------------------------------------------


FULL_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "driver",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "42",
        "generation": 1,
        "labels": {keys.APP_ID: "a"},
        "annotations": {keys.TASK_GROUPS: "[]"},
        "ownerReferences": [{"kind": "Job", "name": "j"}],
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "deletionTimestamp": "2024-01-02T03:05:05Z",
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {}}}],
        "finalizers": ["x"],
    },
    "spec": {
        "nodeName": "n1",
        "schedulingGates": [{"name": keys.GATE}],
        "priorityClassName": "high",
        "priority": 1000,
        "overhead": {"cpu": "100m"},
        "resources": {"requests": {"cpu": "2"}},
        "schedulerName": "default-scheduler",
        "serviceAccountName": "sa",
        "volumes": [{"name": "v", "emptyDir": {}}],
        "nodeSelector": {"a": "b"},
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sh"],
                "env": [{"name": "SECRET", "value": "x"}],
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
                "volumeMounts": [{"name": "v", "mountPath": "/v"}],
            },
            {"name": "noresources", "image": "busybox"},
        ],
        "initContainers": [
            {"name": "sidecar", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
        ],
    },
    "status": {
        "phase": "Pending",
        "nominatedNodeName": "n2",
        "reason": "Evicted",
        "message": "long message",
        "hostIP": "10.0.0.1",
        "containerStatuses": [
            {"name": "main", "image": "main:1", "state": {"running": {"startedAt": "2024-01-02T03:04:07Z"}}},
            {"name": "side", "image": "side:1", "state": {"waiting": {"reason": "ErrImagePull", "message": "long"}}},
        ],
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", "status": "False"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-02T03:04:06Z"},
        ],
    },
}


def test_trim_keeps_exactly_the_listed_fields() -> None:
    assert p.trim(FULL_POD) == {
        "metadata": {
            "name": "driver",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "42",
            "labels": {keys.APP_ID: "a"},
            "annotations": {keys.TASK_GROUPS: "[]"},
            "ownerReferences": [{"kind": "Job", "name": "j"}],
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "deletionTimestamp": "2024-01-02T03:05:05Z",
        },
        "spec": {
            "nodeName": "n1",
            "schedulingGates": [{"name": keys.GATE}],
            "priorityClassName": "high",
            "priority": 1000,
            "overhead": {"cpu": "100m"},
            "resources": {"requests": {"cpu": "2"}},
            "schedulerName": "default-scheduler",
            "serviceAccountName": "sa",  # who submits it, for a queue's submitacl
            "containers": [
                {"name": "main", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}},
                {"name": "noresources"},
            ],
            "initContainers": [{"name": "sidecar", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}],
        },
        "status": {
            "phase": "Pending",
            "nominatedNodeName": "n2",
            "reason": "Evicted",
            # Why a container still waits: what a member lost for not coming up says (gang/losses.py).
            "containerStatuses": [{"name": "side", "state": {"waiting": {"reason": "ErrImagePull"}}}],
            "conditions": [  # Ready: whether a started member came up (gang/losses.py)
                {"type": "Ready", "status": "False"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-02T03:04:06Z"},
            ],
        },
    }


def test_waiting_reasons_say_which_container_waits_and_why() -> None:
    assert p.waiting_reasons(FULL_POD) == ["side: ErrImagePull"]
    assert p.waiting_reasons(p.trim(FULL_POD)) == ["side: ErrImagePull"]
    assert p.waiting_reasons(pod()) == []


def test_container_statuses_of_any_shape_are_read_without_failing() -> None:
    odd = {"status": {"containerStatuses": ["x", {"state": "y"}, {"state": {"waiting": 3}}, {"name": "m"}]}}
    assert p.waiting_reasons(odd) == []
    assert "containerStatuses" not in p.trim(odd)["status"]


def test_trim_keeps_node_constraints_of_gangs_shaped_like_their_pods() -> None:
    pod = {
        **FULL_POD,
        "metadata": {**FULL_POD["metadata"], "labels": {coscheduling.NAME: "mpi"}, "annotations": {}},
        "spec": {**FULL_POD["spec"], "tolerations": [{"operator": "Exists"}]},
    }
    kept = p.trim(pod)["spec"]
    assert kept["nodeSelector"] == {"a": "b"} and kept["tolerations"] == [{"operator": "Exists"}]


def test_trim_of_a_minimal_pod() -> None:
    assert p.trim({"metadata": {"name": "x"}}) == {"metadata": {"name": "x"}, "spec": {"containers": []}, "status": {}}


def test_trim_does_not_modify_its_input_and_keeps_what_readers_need() -> None:
    before = copy.deepcopy(FULL_POD)
    trimmed = p.trim(FULL_POD)
    assert before == FULL_POD
    for read in (
        p.app_id,
        p.is_gated,
        p.node_name,
        p.nominated_node,
        p.phase,
        p.scheduled_at,
        p.created_at,
        p.is_deleting,
        p.task_group_name,
        p.carries_task_groups,
        p.is_concerned,
    ):
        assert read(trimmed) == read(FULL_POD), read.__name__


def test_trim_keeps_the_effective_requests() -> None:
    from yuniplace.gang.resources import pod_requests

    assert pod_requests(p.trim(FULL_POD)["spec"]) == pod_requests(FULL_POD["spec"])
