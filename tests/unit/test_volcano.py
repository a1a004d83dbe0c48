"""A Volcano gang through the planner and the webhook: placeholders per task, sized like the task's
pods and of the PodGroup's priority class; each member swapped into its task's placeholders; pods of
a task without a minimum start with the gang; the webhook gates and checks Volcano's pods, and leaves
those for Volcano's own scheduler alone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.planning import (
    NOW,
    make_pod,
    materialize,
)
from tests.unit.test_admission import patch_of, review
from yuniplace.controller.lifecycle import plan_application
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import volcano
from yuniplace.gang.state import AppState
from yuniplace.webhook.admission import mutate

KEY = p.AppKey("default", "tf-job")
POD_GROUP = {
    "metadata": {"name": "tf-job", "namespace": "default"},
    "spec": {
        "minMember": 3,
        "minTaskMember": {"ps": 1, "worker": 2},
        "queue": "ml",
        "priorityClassName": "batch-high",
    },
}
SIZES = {"ps": {"cpu": "1", "memory": "1Gi"}, "worker": {"cpu": "4", "memory": "8Gi"}, "eval": {"cpu": "1"}}


def member(name: str, task: str, **fields: Any) -> dict[str, Any]:
    notes = {volcano.GROUP_NAME: "tf-job", volcano.TASK: task, **fields.pop("annotations", {})}
    return make_pod(name, app=None, annotations=notes, requests=SIZES[task], **fields)


def gang(state: AppState | None = None, started: float | None = None) -> list[dict[str, Any]]:
    return [
        member("ps-0", "ps", created=NOW - 60, state=state, started=started),
        member("worker-0", "worker", created=NOW - 59),
        member("worker-1", "worker", created=NOW - 59),
        member("eval-0", "eval", created=NOW - 58),
    ]


def test_placeholders_per_task_sized_like_its_pods_with_the_pod_groups_priority() -> None:
    plan = plan_application(Application.of(KEY, gang(), POD_GROUP), NOW)
    assert plan.state == AppState.RESERVING and not [e for e in plan.events if e.reason == "TaskGroupsError"]
    made = sorted(
        (ph["metadata"]["labels"][keys.PLACEHOLDER_GROUP], ph["spec"]["containers"][0]["resources"]["requests"]["cpu"])
        for ph in plan.create
    )
    assert made == [("ps", "1"), ("worker", "4"), ("worker", "4")]
    assert {ph["spec"]["priorityClassName"] for ph in plan.create} == {"batch-high"}
    assert plan.pod_group_status is not None and plan.pod_group_status["phase"] == "Inqueue"


def test_each_member_takes_its_tasks_place_and_other_tasks_start_with_the_gang() -> None:
    pods = gang(AppState.RESERVING, NOW - 30)
    first = plan_application(Application.of(KEY, pods, POD_GROUP), NOW - 30)
    assert not first.ungate  # while reserving, every pod waits
    nodes = iter(["n-ps", "n-w0", "n-w1"])
    placed = [materialize(ph, created=NOW - 29, node=next(nodes), scheduled_at=NOW - 20) for ph in first.create]
    reserved = plan_application(Application.of(KEY, pods + placed, POD_GROUP), NOW)
    assert reserved.state in (AppState.RESERVED, AppState.RUNNING)
    swaps = {p.name(s.member): (s.group, s.node) for s in reserved.swaps}
    assert swaps["ps-0"] == ("ps", "n-ps")
    assert {swaps["worker-0"][0], swaps["worker-1"][0]} == {"worker"}
    assert {swaps["worker-0"][1], swaps["worker-1"][1]} == {"n-w0", "n-w1"}
    # The evaluator's task has no minimum: no place of its own, it is released with the gang.
    assert [p.name(m) for m in reserved.ungate] == ["eval-0"]
    assert not [e for e in reserved.events if e.reason == "TaskGroupsError"]


def test_a_volcano_pod_is_gated_and_checked_by_the_webhook() -> None:
    pod = member("worker-0", "worker", gated=False)
    answer = mutate(review(pod))
    assert answer["response"]["allowed"]
    assert patch_of(answer) == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]}]


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Firm"}, "must be Soft or Hard"),
        ({volcano.TASK: "Worker_1"}, 'volcano.sh/task-spec: "Worker_1" is not a task name yuniplace can use'),
        ({keys.GANG_MODE: "Lenient"}, 'yuniplace.io/gang-mode: "Lenient" must be Strict or NonStrict'),
    ],
)
def test_what_a_volcano_pod_says_itself_is_checked(annotations: dict[str, str], message: str) -> None:
    pod = member("worker-0", "worker", gated=False, annotations=annotations)
    answer = mutate(review(pod))["response"]
    assert not answer["allowed"] and message in answer["status"]["message"], answer


def test_pods_for_volcanos_own_scheduler_are_left_to_it() -> None:
    pod = member("worker-0", "worker", gated=False, annotations={volcano.TASK: "Worker_1"})
    pod["spec"]["schedulerName"] = "volcano"
    answer = mutate(review(pod))
    assert answer["response"]["allowed"] and patch_of(answer) == []
