"""Admission decisions on AdmissionReview v1 requests, as the apiserver sends them."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang.dialects import coscheduling, koordinator, podgroup
from yuniplace.webhook.admission import mutate, validate

GROUPS = builders.task_groups(builders.task_group("workers", 2, {"cpu": "1", "memory": "1Gi"}))


def review(pod: dict[str, Any], operation: str = "CREATE", kind: str = "Pod") -> dict[str, Any]:
    return builders.admission_review(pod, operation=operation, kind=kind)


def pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return builders.pod(
        labels={"applicationId": "app"} if labels is None else labels, annotations=annotations or {}, **spec
    )


def update(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    answer = review(new, operation="UPDATE")
    answer["request"]["oldObject"] = old
    return answer


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def test_gang_pod_is_gated() -> None:
    answer = mutate(review(pod({keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"})))
    assert answer["response"] == {**answer["response"], "uid": "u-1", "allowed": True, "patchType": "JSONPatch"}
    assert patch_of(answer) == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]}]


def test_member_with_other_gates_gets_ours_appended() -> None:
    answer = mutate(review(pod({keys.TASK_GROUP_NAME: "workers"}, schedulingGates=[{"name": "example.com/other"}])))
    assert patch_of(answer) == [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": keys.GATE}}]


def test_already_gated_pod_is_not_patched() -> None:
    answer = mutate(review(pod({keys.TASK_GROUP_NAME: "workers"}, schedulingGates=[{"name": keys.GATE}])))
    assert "patch" not in answer["response"] and answer["response"]["allowed"]


@pytest.mark.parametrize(
    "subject",
    [
        pod(),  # no gang annotations
        pod({keys.TASK_GROUPS: GROUPS}, labels={keys.PLACEHOLDER: "true"}),  # our own placeholder
        pod({keys.TASK_GROUP_NAME: "workers"}, nodeName="node-1"),  # created bound: cannot be gated
    ],
)
def test_pods_it_does_not_concern_are_untouched(subject: dict[str, Any]) -> None:
    answer = mutate(review(subject))
    assert answer["response"]["allowed"] and "patch" not in answer["response"]
    assert validate(update(subject, subject))["response"]["allowed"]


def test_updates_without_their_old_object_and_other_kinds_pass() -> None:
    gang = pod({keys.TASK_GROUPS: "not json"})
    assert validate(review(gang, operation="UPDATE"))["response"]["allowed"]
    assert validate(review(gang, kind="ConfigMap", operation="UPDATE"))["response"]["allowed"]
    assert mutate(review(gang, kind="ConfigMap"))["response"]["allowed"]


def test_a_creation_is_decided_by_the_mutating_webhook_alone() -> None:
    """Every gang pod is reviewed once at creation: the validating webhook is not asked then (the chart
    sends it updates only), and what it would have denied, the mutating one denies."""
    gang = pod({keys.TASK_GROUPS: "not json"})
    assert mutate(review(gang))["response"]["allowed"] is False
    assert validate(review(gang))["response"]["allowed"]


def test_scheduler_name_rewritten_only_when_asked() -> None:
    subject = pod({keys.TASK_GROUP_NAME: "workers"}, schedulerName="yunikorn")
    assert all(op["path"] != "/spec/schedulerName" for op in patch_of(mutate(review(subject))))
    ops = patch_of(mutate(review(subject), rewrite_scheduler_name=True))
    assert {"op": "replace", "path": "/spec/schedulerName", "value": "default-scheduler"} in ops


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({keys.TASK_GROUPS: "[{"}, "is not valid JSON"),
        (
            {keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "drivers"},
            '"drivers" is not a task group of this application',
        ),
        ({keys.TASK_GROUP_NAME: "Bad_Name"}, '"Bad_Name" must be a DNS-1123 label'),
        (
            {keys.TASK_GROUP_NAME: "workers", keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Firm"},
            "must be Soft or Hard",
        ),
    ],
)
def test_invalid_gang_annotations_are_denied_with_the_field(annotations: dict[str, str], expected: str) -> None:
    answer = mutate(review(pod(annotations)))["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 400
    assert answer["status"]["message"].startswith("yuniplace: pod p has invalid gang annotations: ")
    assert expected in answer["status"]["message"]
    assert "patch" not in answer


def test_valid_gang_pod_is_allowed() -> None:
    assert mutate(review(pod({keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"})))["response"]["allowed"]


def test_pods_for_another_scheduler_are_left_to_it() -> None:
    subject = pod({keys.TASK_GROUPS: "not even json", keys.TASK_GROUP_NAME: "workers"}, schedulerName="yunikorn")
    answer = mutate(review(subject))
    assert answer["response"]["allowed"] and patch_of(answer) == []
    # Rewritten to the default scheduler, it becomes ours: gated, or denied when its annotations cannot be used.
    usable = pod({keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"}, schedulerName="yunikorn")
    ops = patch_of(mutate(review(usable), rewrite_scheduler_name=True))
    assert {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]} in ops
    assert mutate(review(subject), rewrite_scheduler_name=True)["response"]["allowed"] is False
    # And a scheduler named in the configuration is served too.
    assert patch_of(mutate(review(usable), schedulers=frozenset({"yunikorn"})))


@pytest.mark.parametrize(
    ("annotations", "labels"),
    [
        ({}, {coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "3"}),
        ({koordinator.NAME: "train", koordinator.MIN_AVAILABLE: "2"}, {}),
        ({}, {podgroup.LABEL: "etl"}),
    ],
)
def test_pods_of_other_gang_dialects_are_gated(annotations: dict[str, str], labels: dict[str, str]) -> None:
    subject = pod(annotations, labels, containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}])
    answer = mutate(review(subject))
    assert answer["response"]["allowed"]
    assert patch_of(answer) == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]}]


def test_bad_dialect_labels_are_denied_naming_the_label() -> None:
    subject = pod(
        {},
        {coscheduling.NAME: "mpi", coscheduling.MIN_AVAILABLE: "-1"},
        containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    )
    answer = mutate(review(subject))["response"]
    assert not answer["allowed"] and "pod-group.scheduling.sigs.k8s.io/min-available" in answer["status"]["message"]


def test_an_edit_that_makes_the_annotations_unusable_is_denied_naming_the_key() -> None:
    before = pod({keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"})
    after = pod({keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers", keys.RETRY_AFTER: "soon"})
    answer = validate(update(before, after))["response"]
    assert answer["allowed"] is False and keys.RETRY_AFTER in answer["status"]["message"]
    nested = pod({keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers", keys.GANG_GROUP: "[" * 5000 + "]" * 5000})
    assert validate(update(before, nested))["response"]["allowed"] is False


def test_an_edit_that_leaves_an_old_problem_as_it_was_is_allowed() -> None:
    broken = pod({keys.TASK_GROUPS: "not json"})
    relabelled = pod({keys.TASK_GROUPS: "not json"}, labels={"applicationId": "app", "team": "ml"})
    assert validate(update(broken, relabelled))["response"]["allowed"]


def test_a_pod_labelled_with_another_placeholder_value_is_an_ordinary_gang_pod() -> None:
    subject = pod(
        {keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"},
        labels={"applicationId": "app", keys.PLACEHOLDER: "no"},
    )
    assert patch_of(mutate(review(subject))) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]}
    ]


def test_a_pod_named_by_the_api_server_after_the_webhook_is_decided_too() -> None:
    """A Job's or an operator's pods come with a generateName only: the API server names them after the
    mutating webhooks. KubeRay's workers also ask more than their task group (its init container), which
    what the webhook reads of them says, naming the pod."""
    groups = builders.task_groups(builders.task_group("workers", 2, {"cpu": "100m", "memory": "128Mi"}))
    subject = pod(
        {keys.TASK_GROUPS: groups, keys.TASK_GROUP_NAME: "workers"},
        initContainers=[{"name": "wait", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}],
    )
    del subject["metadata"]["name"]
    subject["metadata"]["generateName"] = "ray-worker-"
    answer = mutate(review(subject))
    assert answer["response"]["allowed"], answer
    assert {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]} in patch_of(answer)
    unusable = pod({keys.TASK_GROUPS: "[{", keys.TASK_GROUP_NAME: "workers"})
    del unusable["metadata"]["name"]
    unusable["metadata"]["generateName"] = "ray-worker-"
    refusal = mutate(review(unusable))["response"]
    assert not refusal["allowed"] and refusal["status"]["message"].startswith("yuniplace: pod ray-worker-… has")
