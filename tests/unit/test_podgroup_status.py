"""PodGroup status in each scheduler's terms (Volcano's phases, counts and Scheduled condition), and the
PodGroup watches: one per API, each on only when served, an application's PodGroup taken from the API
its pods name."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests import builders
from tests.planning import (
    NOW,
    make_pod,
)
from yuniplace.controller.optionalapis import ServedApi
from yuniplace.controller.podgroups import PodGroups, PodGroupWatch, pod_group_optional_api, status_path
from yuniplace.controller.podgroupstatus import pod_group_status
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import podgroup, volcano
from yuniplace.gang.state import AppState
from yuniplace.kube import KubeClient, NotFound
from yuniplace.kube.discovery import discover
from yuniplace.runtime.store import PodStore

NS = "default"
KEY = p.AppKey(NS, "tf-job")
VOLCANO_GROUPS = volcano.DIALECT.pod_groups
PLUGIN_GROUPS = podgroup.DIALECT.pod_groups


def volcano_member(name: str, *, phase: str = "Pending", node: str | None = None, state: AppState | None = None) -> Any:
    return make_pod(
        name,
        app=None,
        annotations={volcano.GROUP_NAME: "tf-job"},
        phase=phase,
        node=node,
        gated=node is None and phase == "Pending",
        state=state,
        created=NOW - 60 + int(name[-1]),
    )


def volcano_group(status: dict[str, Any] | None = None, min_member: int = 2) -> dict[str, Any]:
    group: dict[str, Any] = {"metadata": {"name": "tf-job", "namespace": NS}, "spec": {"minMember": min_member}}
    if status is not None:
        group["status"] = status
    return group


def app_of(members: list[Any], pod_group: dict[str, Any]) -> Application:
    return Application.of(KEY, members, pod_group)


def gang(*phases_and_nodes: tuple[str, str | None], state: AppState = AppState.RUNNING) -> list[Any]:
    members = [volcano_member(f"w-{i}", phase=ph, node=node) for i, (ph, node) in enumerate(phases_and_nodes)]
    members[0]["metadata"]["annotations"][keys.STATE] = state.value
    return members


@pytest.mark.parametrize(
    ("members", "state", "phase"),
    [
        # Before minMember are bound: by yuniplace's state.
        (gang(("Pending", None), ("Pending", None), state=AppState.PENDING), AppState.PENDING, "Pending"),
        (gang(("Pending", None), ("Pending", None), state=AppState.RESERVING), AppState.RESERVING, "Inqueue"),
        (gang(("Pending", None), ("Pending", None), state=AppState.RESERVED), AppState.RESERVED, "Inqueue"),
        (gang(("Running", "n1"), ("Pending", None)), AppState.RUNNING, "Inqueue"),
        (gang(("Running", "n1"), ("Pending", None), state=AppState.RESUMING), AppState.RESUMING, "Unknown"),
        # Volcano's own rule: minMember bound is Running, every bound one ended is Completed.
        (gang(("Running", "n1"), ("Pending", "n2")), AppState.RUNNING, "Running"),
        (gang(("Succeeded", "n1"), ("Running", "n2")), AppState.RUNNING, "Running"),
        (gang(("Succeeded", "n1"), ("Failed", "n2")), AppState.COMPLETED, "Completed"),
        (gang(("Running", "n1"), ("Running", "n2"), state=AppState.RESUMING), AppState.RESUMING, "Running"),
        # A failed gang: Unknown while a pod still lives, Completed when none does.
        (gang(("Failed", None), ("Pending", None), state=AppState.FAILED), AppState.FAILED, "Unknown"),
        (gang(("Failed", None), ("Failed", None), state=AppState.FAILED), AppState.FAILED, "Completed"),
    ],
)
def test_volcano_phase_follows_the_gang(members: list[Any], state: AppState, phase: str) -> None:
    status = pod_group_status(app_of(members, volcano_group()), state, None, NOW)
    assert status is not None and status["phase"] == phase, status


def test_volcano_counts_and_scheduled_condition() -> None:
    members = gang(("Running", "n1"), ("Succeeded", "n2"), ("Failed", "n3"))
    status = pod_group_status(app_of(members, volcano_group(min_member=3)), AppState.RUNNING, None, NOW)
    assert status == {
        "phase": "Running",
        "running": 1,
        "succeeded": 1,
        "failed": 1,
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "reason": "GangReserved",
                "message": "every placeholder is placed; members take their places",
                "lastTransitionTime": p.format_time(NOW),
            }
        ],
    }


def test_volcano_condition_keeps_its_transition_time_and_other_conditions() -> None:
    members = gang(("Pending", None), ("Pending", None), state=AppState.RESERVING)
    first = pod_group_status(app_of(members, volcano_group()), AppState.RESERVING, None, NOW)
    assert first is not None
    [condition] = first["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "Reserving")
    # Reserved a minute later: the condition turns True, at that moment; Volcano's own conditions stay.
    shown = {**first, "conditions": [*first["conditions"], {"type": "Unschedulable", "status": "False"}]}
    reserved = gang(("Pending", None), ("Pending", None), state=AppState.RESERVED)
    later = pod_group_status(app_of(reserved, volcano_group(shown)), AppState.RESERVED, None, NOW + 60)
    assert later is not None
    assert later["conditions"][0] == {"type": "Unschedulable", "status": "False"}
    assert later["conditions"][1]["status"] == "True"
    assert later["conditions"][1]["lastTransitionTime"] == p.format_time(NOW + 60)
    # Unchanged since: nothing to write, however late.
    assert pod_group_status(app_of(reserved, volcano_group(later)), AppState.RESERVED, None, NOW + 600) is None
    # Running now: only the phase and counts change, the condition keeps its time.
    running = gang(("Running", "n1"), ("Running", "n2"))
    status = pod_group_status(app_of(running, volcano_group(later)), AppState.RUNNING, None, NOW + 900)
    assert status is not None and status["phase"] == "Running" and status["running"] == 2
    assert status["conditions"][1]["lastTransitionTime"] == p.format_time(NOW + 60)


def test_a_completed_gang_keeps_the_condition_it_has() -> None:
    done = gang(("Succeeded", "n1"), ("Succeeded", "n2"), state=AppState.COMPLETED)
    assert pod_group_status(app_of(done, volcano_group()), AppState.COMPLETED, None, NOW) == {
        "phase": "Completed",
        "running": 0,
        "succeeded": 2,
        "failed": 0,
    }


def test_a_gang_that_started_and_ended_between_two_looks_was_scheduled() -> None:
    """The PodGroup last seen still says the gang waits (its start's status not seen back yet): once
    its members ran and it completed, it says it was scheduled, not that it waits."""
    done = gang(("Succeeded", "n1"), ("Succeeded", "n2"), state=AppState.COMPLETED)
    waiting = volcano_group()
    pending = {"type": "Scheduled", "status": "False", "reason": "Pending", "lastTransitionTime": "t0"}
    waiting["status"] = {"phase": "Pending", "conditions": [pending]}
    shown = pod_group_status(app_of(done, waiting), AppState.COMPLETED, None, NOW)
    assert shown is not None and shown["phase"] == "Completed"
    [scheduled] = shown["conditions"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "GangReserved")


def test_each_pod_group_gets_its_own_schedulers_status() -> None:
    members = gang(("Running", "n1"), ("Running", "n2"))
    volcano = pod_group_status(app_of(members, volcano_group()), AppState.RUNNING, None, NOW)
    assert volcano is not None and "scheduled" not in volcano and "conditions" in volcano
    labelled = [make_pod(f"pg-{i}", app=None, labels={podgroup.LABEL: "tf-job"}, node=f"n{i}") for i in (1, 2)]
    for member in labelled:
        member["status"]["phase"] = "Running"
    plugins = pod_group_status(app_of(labelled, volcano_group()), AppState.RUNNING, None, NOW)
    assert plugins == {"phase": "Running", "scheduled": 2, "running": 2, "succeeded": 0, "failed": 0}


# -- the watches -------------------------------------------------------------------------------------


class Discovery:
    """A client that answers API discovery only: `served` maps a group version to its resources. Its
    collections cannot be watched: a watch started here only records how the API is served."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.documents = builders.discovery(served)

    def get(self, path: str, **_: Any) -> dict[str, Any]:
        if path not in self.documents:
            raise NotFound(404, "NotFound", f"{path} not found")
        return self.documents[path]

    def open_stream(self, path: str, **_: Any) -> Any:
        raise OSError(f"no watch of {path} here")


def watches(served: dict[str, list[str]], pods: dict[p.AppKey, list[Any]]) -> PodGroups:
    """PodGroup watches whose applications' dialects are those of `pods`, as the store reads them, each
    started (and at once stopped) where `served` serves its API, as the follower of APIs starts them."""
    client = cast(KubeClient, Discovery(served))
    store = PodStore()
    store.replace([pod for members in pods.values() for pod in members])
    groups = PodGroups(client, None, lambda _key: None, store.pod_group_dialect)
    found = discover(client, [path for feed in groups.feeds() for path in feed.optional_api.paths])
    for watch in groups.watches.values():
        if isinstance(api := watch.optional_api.served_as(found), ServedApi):
            watch.start(api, lambda: None)
            watch.stop(forget=False)
    return groups


def test_each_api_is_read_only_when_served() -> None:
    client = cast(KubeClient, Discovery({keys.VOLCANO_API: ["podgroups", "podgroups/status", "queues"]}))
    groups = PodGroups(client, None, lambda _key: None, PodStore().pod_group_dialect)
    found = discover(client, [path for feed in groups.feeds() for path in feed.optional_api.paths])
    served = [w.optional_api.served_as(found) for w in groups.watches.values()]
    assert served == [None, ServedApi(keys.VOLCANO_API, frozenset({"podgroups", "podgroups/status"}))]


def test_status_is_written_where_the_installed_crd_takes_it() -> None:
    assert status_path(VOLCANO_GROUPS, KEY) == f"{keys.VOLCANO_API}/namespaces/{NS}/podgroups/tf-job/status"
    assert status_path(PLUGIN_GROUPS, KEY, subresource=False) == (f"{podgroup.API}/namespaces/{NS}/podgroups/tf-job")
    # Volcano's own CRD serves no status subresource: the status is part of the object.
    groups = watches({keys.VOLCANO_API: ["podgroups"], podgroup.API: ["podgroups", "podgroups/status"]}, {})
    assert groups.status_path(VOLCANO_GROUPS, KEY) == f"{keys.VOLCANO_API}/namespaces/{NS}/podgroups/tf-job"
    assert groups.status_path(PLUGIN_GROUPS, KEY).endswith("/podgroups/tf-job/status")
    # A CRD installed a moment ago, whose resources discovery does not list yet, is not read yet.
    unlisted = discover(cast(KubeClient, Discovery({keys.VOLCANO_API: []})), [keys.VOLCANO_API])
    assert pod_group_optional_api(VOLCANO_GROUPS).served_as(unlisted) is None


def test_an_application_gets_the_pod_group_of_the_api_its_pods_name() -> None:
    volcano_key, plugins_key = KEY, p.AppKey(NS, "etl")
    pods = {
        volcano_key: [volcano_member("w-0")],
        plugins_key: [make_pod("e-0", app=None, labels={podgroup.LABEL: "etl"})],
    }
    groups = watches({}, pods)
    both = [
        {"metadata": {"name": name, "namespace": NS}, "spec": {"minMember": 1}, "api": api}
        for name in ("tf-job", "etl")
        for api in ("volcano", "plugins")
    ]
    watch: PodGroupWatch
    for served, watch in groups.watches.items():
        api = "volcano" if served is VOLCANO_GROUPS else "plugins"
        watch._listed([g for g in both if g["api"] == api])
    assert (groups.get(volcano_key) or {})["api"] == "volcano"
    assert (groups.get(plugins_key) or {})["api"] == "plugins"
    assert groups.get(p.AppKey(NS, "nobody")) is None
