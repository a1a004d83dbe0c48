"""Kubernetes' own gangs (the Workload API) in each served shape: recognised, never held by yuniplace,
read as a gang of their group's minimum, and reported once per change."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests import builders
from yuniplace.controller.lifecycle.table import TRANSITIONS, Trigger
from yuniplace.controller.observe import observe, observed_state
from yuniplace.controller.podgroups import served_native_version
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import native, yunikorn
from yuniplace.gang.dialects.registry import dialect_of, ignored_dialect
from yuniplace.gang.state import AppState
from yuniplace.kube import KubeClient, NotFound, workloadapi
from yuniplace.runtime.events import Reason
from yuniplace.webhook.admission import is_gang_pod, mutate

GROUPS = builders.task_groups(builders.task_group("workers", 2, {"cpu": "1", "memory": "1Gi"}))


def member(name: str, node: str | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> p.Pod:
    return builders.pod(
        name,
        namespace="ml",
        uid=f"uid-{name}",
        created=f"2026-11-25T10:00:0{name[-1]}Z",
        labels={},
        annotations=annotations or {},
        requests={"cpu": "1", "memory": "1Gi"},
        node=node or None,
        phase="Running" if node else "Pending",
        **spec,
    )


GROUP_REF = {"schedulingGroup": {"podGroupName": "trainer"}}  # 1.36 on
WORKLOAD_REF = {"workloadRef": {"name": "job", "podGroup": "workers"}}  # 1.35
POD_GROUP = {
    "kind": "PodGroup",
    "metadata": {"name": "trainer", "namespace": "ml"},
    "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
}
WORKLOAD = {
    "kind": "Workload",
    "metadata": {"name": "job", "namespace": "ml"},
    "spec": {
        "podGroups": [
            {"name": "workers", "policy": {"gang": {"minCount": 4}}},
            {"name": "driver", "policy": {"basic": {}}},
        ]
    },
}


@pytest.mark.parametrize(
    ("spec", "group"),
    [
        (GROUP_REF, "trainer"),
        (WORKLOAD_REF, "job/workers"),
        ({"workloadRef": {"name": "job", "podGroup": "workers", "podGroupReplicaKey": "r1"}}, "job/workers/r1"),
        ({"workloadRef": {"name": "job"}}, None),  # no pod group: not a member of any
        ({"schedulingGroup": {}}, None),
        ({}, None),
    ],
)
def test_the_native_group_a_pod_names(spec: dict[str, Any], group: str | None) -> None:
    pod = member("w-0", **spec)
    assert native.group_of(pod) == group
    assert (dialect_of(pod) is native.DIALECT) == (group is not None)


def test_a_native_member_is_kube_schedulers_gang_whatever_else_it_carries() -> None:
    pod = member("w-0", annotations={keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"}, **GROUP_REF)
    assert dialect_of(pod) is native.DIALECT
    assert ignored_dialect(pod) is yunikorn.DIALECT
    assert p.app_key(pod) == p.AppKey("ml", "trainer")
    assert not is_gang_pod(pod)


def test_the_webhook_never_gates_a_native_member_and_says_what_it_ignores() -> None:
    pod = member("w-0", annotations={keys.TASK_GROUPS: GROUPS, keys.TASK_GROUP_NAME: "workers"}, **GROUP_REF)
    review = {"request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": pod}}
    response = mutate(review)["response"]
    assert response["allowed"] and "patch" not in response
    assert "native pod group trainer" in response["warnings"][0]
    assert "YuniKorn gang annotations or labels are ignored" in response["warnings"][0]


def test_objects_describe_their_groups_with_each_minimum() -> None:
    groups = {g.name: g for obj in (POD_GROUP, WORKLOAD) for g in workloadapi.groups_described(obj)}
    assert {name: g.min_count for name, g in groups.items()} == {
        "trainer": 3,
        "job/workers": 4,
        "job/driver": None,  # the basic policy: no gang
    }
    replica = workloadapi.lookup(groups, "job/workers/r1")
    assert replica is not None and replica.min_count == 4


def app_of(pods: list[p.Pod], group: dict[str, Any] | None) -> Application:
    found = workloadapi.lookup({g.name: g for g in workloadapi.groups_described(group)}, "trainer") if group else None
    return Application.of(p.AppKey("ml", "trainer"), pods, None if found is None else found.as_object())


def test_a_native_gang_is_one_group_of_its_minimum_shaped_like_its_pods() -> None:
    app = app_of([member(f"w-{i}", **GROUP_REF) for i in range(3)], POD_GROUP)
    assert app.spec is not None and app.problem is None
    assert [(g.name, g.min_member) for g in app.spec.groups] == [(p.task_group_name(app.members[0]), 3)]
    assert app.spec.groups[0].min_resource == {"cpu": "1", "memory": "1Gi"}


def test_a_missing_native_group_is_a_problem_that_says_what_kube_scheduler_does() -> None:
    app = app_of([member("w-0", **GROUP_REF)], None)
    assert app.spec is None
    assert "names no pod group of the Workload API" in str(app.problem)
    assert "kube-scheduler keeps the pod unschedulable until it is created" in str(app.problem)


def test_a_basic_policy_group_is_no_gang() -> None:
    basic = {**POD_GROUP, "spec": {"schedulingPolicy": {"basic": {}}}}
    assert app_of([member("w-0", **GROUP_REF)], basic).originator is None


def test_its_state_follows_what_kube_scheduler_bound() -> None:
    pending = app_of([member("w-0", **GROUP_REF), member("w-1", **GROUP_REF), member("w-2", **GROUP_REF)], POD_GROUP)
    assert observed_state(pending) == AppState.PENDING
    started = app_of([member(f"w-{i}", node="n1", **GROUP_REF) for i in range(3)], POD_GROUP)
    assert observed_state(started) == AppState.RUNNING
    assert observed_state(app_of([], POD_GROUP)) == AppState.COMPLETED


def test_a_change_of_where_it_stands_goes_through_the_transitions_table() -> None:
    """From the state it was last seen in; first seen, it is where it stands, with no move."""
    pending = app_of([member(f"w-{i}", **GROUP_REF) for i in range(3)], POD_GROUP)
    started = app_of([member(f"w-{i}", node="n1", **GROUP_REF) for i in range(3)], POD_GROUP)
    first, _ = observe(started, None, None)
    assert first.state == AppState.RUNNING and first.transition is None
    bound, _ = observe(started, None, None, before=AppState.PENDING)
    assert bound.transition == (AppState.PENDING, AppState.RUNNING) and not bound.annotate
    unbound, _ = observe(pending, None, None, before=AppState.RUNNING)
    assert unbound.transition == (AppState.RUNNING, AppState.PENDING)
    ended, _ = observe(app_of([], POD_GROUP), None, None, before=AppState.RUNNING)
    assert ended.transition == (AppState.RUNNING, AppState.COMPLETED) and ended.forget
    assert all(
        TRANSITIONS[(plan.current, trigger)].to == plan.state
        for plan, trigger in ((bound, Trigger.BOUND), (unbound, Trigger.UNBOUND), (ended, Trigger.ENDED))
    )


def test_an_event_only_when_where_it_stands_changes_and_nothing_written() -> None:
    app = app_of([member(f"w-{i}", **GROUP_REF) for i in range(3)], POD_GROUP)
    plan, headline = observe(app, None, "root.ml")
    assert [e.reason for e in plan.events] == [Reason.NATIVE_GANG]
    assert "queue root.ml" in plan.events[0].note and "neither gates nor placeholds" in plan.events[0].note
    assert plan.writes() == 0
    again, same = observe(app, headline, "root.ml")
    assert not again.events and same == headline
    missing, problem = observe(app_of([member("w-0", **GROUP_REF)], None), None, None)
    assert [(e.reason, e.kind) for e in missing.events] == [(Reason.TASK_GROUPS_ERROR, "Warning")]
    assert not observe(app_of([member("w-0", **GROUP_REF)], None), problem, None)[0].events


def test_nothing_is_said_of_a_gang_whose_api_version_is_not_read() -> None:
    """A cluster serving only a version yuniplace does not know: a group not read is not a missing one."""
    plan, _ = observe(app_of([member("w-0", **GROUP_REF)], None), None, None, watched=False)
    assert not plan.events and plan.writes() == 0


class Discovery:
    """A client answering API discovery only: `served` maps a group version to its resources."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.documents = builders.discovery(served)

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.documents:
            raise NotFound(404, "NotFound", f"{path} not found")
        return self.documents[path]


GROUP_PATH = "/apis/scheduling.k8s.io"


@pytest.mark.parametrize(
    ("served", "read"),
    [
        # 1.37 with the API on: the beta wins over the alpha served beside it.
        (
            {
                f"{GROUP_PATH}/v1": ["priorityclasses"],
                f"{GROUP_PATH}/v1beta1": ["workloads", "podgroups", "podgroups/status"],
                f"{GROUP_PATH}/v1alpha3": ["workloads", "podgroups"],
            },
            ("v1beta1", "podgroups"),
        ),
        # 1.35: Workloads only, which its pods point at.
        ({f"{GROUP_PATH}/v1": ["priorityclasses"], f"{GROUP_PATH}/v1alpha1": ["workloads"]}, ("v1alpha1", "workloads")),
        # The gates off: PriorityClasses only.
        ({f"{GROUP_PATH}/v1": ["priorityclasses"]}, None),
    ],
)
def test_the_newest_served_version_yuniplace_reads_is_watched(
    served: dict[str, list[str]], read: tuple[str, str] | None
) -> None:
    found = served_native_version(cast(KubeClient, Discovery(served)))
    assert (None if found is None else (found.version, found.resource)) == read


def test_a_version_yuniplace_does_not_know_is_named_and_left_to_kube_scheduler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    served = {f"{GROUP_PATH}/v2alpha1": ["podgroups"], f"{GROUP_PATH}/v1": []}
    assert served_native_version(cast(KubeClient, Discovery(served))) is None
    assert "scheduling.k8s.io/v2alpha1, a version yuniplace does not read" in caplog.text
    assert "left to kube-scheduler" in caplog.text
