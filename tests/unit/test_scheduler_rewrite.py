"""`schedulerName: ai-scheduler` handed to the default scheduler as `yunikorn` is: each scheduler's
pods are rewritten while that scheduler does not run."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests import builders
from yuniplace.gang import keys
from yuniplace.kube import Forbidden
from yuniplace.webhook.admission import mutate
from yuniplace.webhook.rewrite import CACHE_S, Mode, SchedulerNameRewrite, decider, finders, rewrites


class Pods:
    """The API calls a rewrite makes: pods by label selector, some of them Running."""

    def __init__(
        self, running: set[str] | None = None, fail: bool = False, named: dict[str, str] | None = None
    ) -> None:
        self.running = running or set()
        self.named = named or {}  # the name of the pod a selector finds
        self.fail = fail
        self.selectors: list[str] = []

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        assert (method, path) == ("GET", "/api/v1/pods")
        selector = kwargs["query"]["labelSelector"]
        self.selectors.append(selector)
        if self.fail:
            raise Forbidden(403, "Forbidden", "pods is forbidden")
        phase = "Running" if selector in self.running else "Pending"
        return {"items": [{"metadata": {"name": self.named.get(selector, "some-pod")}, "status": {"phase": phase}}]}


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def ai_scheduler(pods: Pods, mode: Mode = Mode.AUTO, clock: Clock | None = None) -> SchedulerNameRewrite:
    return SchedulerNameRewrite(mode, pods, clock or Clock(), scheduler="ai-scheduler")  # type: ignore[arg-type]


def test_auto_rewrites_while_no_ai_scheduler_pod_runs_under_any_of_its_labels() -> None:
    pods = Pods()
    assert ai_scheduler(pods).wanted() is True
    assert pods.selectors == ["app=ai-scheduler", "app.kubernetes.io/name=ai-scheduler", "component=ai-scheduler"]
    for selector, _ in finders("ai-scheduler"):
        assert ai_scheduler(Pods({selector})).wanted() is False, selector


def test_auto_rewrites_nothing_when_it_cannot_tell_and_asks_again_later() -> None:
    pods, clock = Pods(fail=True), Clock()
    decide = ai_scheduler(pods, clock=clock)
    assert decide.wanted() is False and decide.wanted() is False and len(pods.selectors) == 1
    pods.fail = False
    clock.now += CACHE_S
    assert decide.wanted() is True


@pytest.mark.parametrize(("mode", "expected"), [(Mode.ALWAYS, True), (Mode.NEVER, False)])
def test_always_and_never_ask_nobody(mode: Mode, expected: bool) -> None:
    pods = Pods({"app=ai-scheduler"})
    assert ai_scheduler(pods, mode).wanted() is expected and pods.selectors == []


def test_each_scheduler_is_decided_on_its_own() -> None:
    pods = Pods({"component=yunikorn-scheduler"})
    decisions = rewrites(Mode.AUTO, pods)  # type: ignore[arg-type]
    assert decisions["yunikorn"].wanted() is False and decisions["ai-scheduler"].wanted() is True


def pod(scheduler: str) -> dict[str, Any]:
    return builders.pod(namespace=None, annotations={keys.TASK_GROUP_NAME: "workers"}, schedulerName=scheduler)


def ops(answer: dict[str, Any]) -> list[dict[str, Any]]:
    response = answer["response"]
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def review(subject: dict[str, Any]) -> dict[str, Any]:
    return {
        "request": {
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "object": subject,
        }
    }


def test_a_pod_naming_ai_scheduler_is_handed_to_the_default_scheduler_and_gated() -> None:
    asked: list[str] = []

    def wanted(name: str) -> bool:
        asked.append(name)
        return name == "ai-scheduler"

    answer = ops(mutate(review(pod("ai-scheduler")), rewrite_scheduler_name=wanted))
    assert {"op": "replace", "path": "/spec/schedulerName", "value": "default-scheduler"} in answer
    assert {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]} in answer
    assert ops(mutate(review(pod("yunikorn")), rewrite_scheduler_name=wanted)) == []
    assert ops(mutate(review(pod("volcano")), rewrite_scheduler_name=wanted)) == []
    assert ops(mutate(review(pod("default-scheduler")), rewrite_scheduler_name=wanted)) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]}
    ]
    assert asked == ["ai-scheduler", "yunikorn", "volcano"]  # never asked about the default scheduler
    # Left to a running ai-scheduler, the pod is its own.
    assert ops(mutate(review(pod("ai-scheduler")), rewrite_scheduler_name=False)) == []


def test_only_the_schedulers_taken_over_are_ever_asked_about() -> None:
    """The webhook's decider asks the cluster about the schedulers it takes over, and about no other:
    pods of any other keep their scheduler without an API call."""
    pods = Pods()
    wanted = decider(rewrites(Mode.AUTO, pods, ["scheduler-plugins-scheduler", "volcano"]))  # type: ignore[arg-type]
    assert wanted("volcano") is True and wanted("scheduler-plugins-scheduler") is True
    asked = list(pods.selectors)
    assert wanted("yunikorn") is False and wanted("default-scheduler") is False and pods.selectors == asked


def test_scheduler_plugins_runs_when_its_charts_scheduler_pod_runs() -> None:
    """scheduler-plugins' chart labels its scheduler `component: scheduler` in a Deployment named after
    the scheduler: such a pod is its; one of another name with that label is not."""
    name = "scheduler-plugins-scheduler"

    def decide(pods: Pods) -> bool:
        return SchedulerNameRewrite(Mode.AUTO, pods, Clock(), scheduler=name).wanted()  # type: ignore[arg-type]

    assert decide(Pods({"component=scheduler"}, named={"component=scheduler": f"{name}-7d9f8-x2k"})) is False
    assert decide(Pods({"component=scheduler"}, named={"component=scheduler": "some-other-scheduler-1"})) is True


def test_kuberays_scheduler_plugins_pods_are_taken_over_by_default() -> None:
    """KubeRay's `scheduler-plugins` mode names scheduler-plugins' scheduler on every pod it creates,
    gang or not: with none running, the pod is the default scheduler's (and a gang pod is gated)."""
    wanted = decider(rewrites(Mode.AUTO, Pods()))  # type: ignore[arg-type]
    plain = builders.pod(namespace=None, schedulerName="scheduler-plugins-scheduler")
    assert ops(mutate(review(plain), rewrite_scheduler_name=wanted)) == [
        {"op": "replace", "path": "/spec/schedulerName", "value": "default-scheduler"}
    ]
