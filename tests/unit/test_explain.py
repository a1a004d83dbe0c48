"""`yuniplace explain POD`: what a user reads of a pending pod, worded from the cluster's objects."""

from __future__ import annotations

from typing import Any

from tests import builders
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.placeholders import placeholder_pod
from yuniplace.gang.pods import format_time
from yuniplace.tools.explain import device_lines, render

NOW = 1_800_000_000.0
GROUPS = [
    builders.task_group("driver", 1, {"cpu": "1", "memory": "2Gi"}),
    builders.task_group("executor", 2, {"cpu": "2", "memory": "4Gi"}),
]


def gang(state: str, policy: str | None = None, **record: str) -> list[dict[str, Any]]:
    """A Spark-like gang: the driver with the task groups (and yuniplace's record), two executors; all gated."""
    notes = {keys.STATE: state, **record}
    driver = builders.member(
        "driver",
        app="spark-pi",
        group="driver",
        task_groups=GROUPS,
        policy=policy,
        annotations=notes,
        uid="u-driver",
        created=format_time(NOW - 120),
        gates=[keys.GATE],
        phase="Pending",
    )
    executors = [
        builders.member(
            f"exec-{i}",
            app="spark-pi",
            group="executor",
            uid=f"u-exec-{i}",
            created=format_time(NOW - 110),
            gates=[keys.GATE],
            phase="Pending",
        )
        for i in range(2)
    ]
    return [driver, *executors]


def placeholder(
    driver: dict[str, Any], group: str, index: int, node: str | None, unschedulable: str | None = None
) -> dict[str, Any]:
    """Placeholder `index` of `group`, as yuniplace makes it, placed on `node` or not."""
    spec = application([driver]).spec
    assert spec is not None
    task_group = next(g for g in spec.groups if g.name == group)
    pod = placeholder_pod(app_id="spark-pi", group=task_group, index=index, originator=driver)
    pod["metadata"].update(uid=f"u-{group}-{index}", creationTimestamp=format_time(NOW - 100))
    pod["status"] = {"phase": "Pending"}
    if node:
        pod["spec"]["nodeName"] = node
    if node:
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(NOW - 90)}
        ]
    if unschedulable:
        pod["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}
        ]
    return pod


def application(pods: list[dict[str, Any]]) -> Application:
    key = p.app_key(pods[0])
    assert key is not None
    return Application.of(key, pods)


def event(reason: str, message: str, on: str = "driver", ago: float = 5, kind: str = "Normal") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{on}.{reason}"},
        "reason": reason,
        "message": message,
        "type": kind,
        "involvedObject": {"kind": "Pod", "name": on},
        "eventTime": format_time(NOW - ago),
    }


def test_a_gang_waiting_for_admission_says_its_queue_place_and_the_time_left() -> None:
    pods = gang("Pending", **{keys.QUEUED_SINCE: format_time(NOW - 60)})
    waiting = (
        "waiting for free capacity: spark-pi/executor: 1 of 2 pods of (cpu 2, memory 4Gi) fit; position 2 in queue ns"
    )
    text = render(pods[1], application(pods), [event("GangWaiting", waiting)], NOW)
    lines = text.splitlines()
    assert lines[0] == (
        "Pod ns/exec-0: Pending, held back by yuniplace's scheduling gate yuniplace.io/gang until its gang may start"
    )
    assert lines[1] == (
        "Gang: application spark-pi in namespace ns, described by driver: 3 pods all or nothing: "
        "driver 1 × (cpu 1, memory 2Gi), executor 2 × (cpu 2, memory 4Gi); this pod is of task group executor."
    )
    assert lines[2] == "State: Pending, waiting for admission: nothing is reserved for it yet."
    assert lines[3] == "Queue: ns."
    assert lines[4] == f"Waiting for: {waiting} (GangWaiting)."
    assert lines[5] == (
        "Timeout: 14m0s left of 900s; then its placeholders are removed and its pods are scheduled normally, "
        "one by one (Soft)."
    )
    assert lines[6].startswith("Next: admission reserves it (or starts it directly) as soon as the whole gang fits")
    assert lines[7:] == ["Recent events:", f"     5s ago  Normal GangWaiting on driver: {waiting}"]


def test_a_gang_behind_others_in_its_queue_says_its_timeout_does_not_run_yet() -> None:
    pods = gang("Pending", "placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard")
    text = render(pods[0], application(pods), [], NOW)
    assert (
        "Timeout: 60s, not running while others are ahead of it in its queue; then its placeholders are removed "
        "and its pods that have not started fail (Hard)."
    ) in text.splitlines()
    assert text.splitlines()[-1] == "Events: none yet."


def test_a_reserving_gang_says_how_many_placeholders_are_placed_and_why_the_rest_are_not() -> None:
    started = format_time(NOW - 100)
    pods = gang("Reserving", **{keys.RESERVATION_STARTED: started, keys.FIRST_ALLOCATED: format_time(NOW - 90)})
    pods += [
        placeholder(pods[0], "driver", 0, "node-1"),
        placeholder(pods[0], "executor", 0, "node-2"),
        placeholder(pods[0], "executor", 1, None, "0/4 nodes are available: 4 Insufficient cpu."),
    ]
    text = render(pods[0], application(pods), [], NOW).splitlines()
    assert "State: Reserving, reserving: placeholders hold room for it while kube-scheduler places them." in text
    assert "Placeholders placed: 2 of 3; room held by group: driver 1/1, executor 1/2." in text
    assert "Not yet placed, as kube-scheduler says: 0/4 nodes are available: 4 Insufficient cpu." in text
    assert any(line.startswith("Timeout: 13m30s left of 900s; then") for line in text), text
    assert any(line.startswith("Next: once every placeholder is placed, the members are swapped in") for line in text)


def test_the_placeholder_itself_says_whose_room_it_holds() -> None:
    pods = gang("Reserving", **{keys.RESERVATION_STARTED: format_time(NOW - 10)})
    pods.append(placeholder(pods[0], "executor", 1, None, "0/4 nodes are available"))
    text = render(pods[-1], application(pods), [], NOW).splitlines()
    assert text[0] == f"Pod ns/{p.name(pods[-1])}: Pending, not scheduled: 0/4 nodes are available"
    assert text[1] == "This pod is a placeholder: it holds room for task group executor of the gang below."


def test_a_pod_of_no_gang_says_so() -> None:
    pod = builders.pod("web", phase="Pending", node="node-1")
    text = render(pod, None, [], NOW).splitlines()
    assert text[0] == "Pod ns/web: Pending, bound to node node-1"
    assert text[1].startswith("Gang: none. yuniplace does not manage this pod")


def test_a_member_whose_originator_is_not_there_yet_waits_for_it() -> None:
    member = gang("Pending")[1]
    text = render(member, application([member]), [], NOW).splitlines()
    assert text[1].startswith("Gang: application spark-pi in namespace ns, whose pod describing the gang")


def test_a_failed_gang_says_nothing_comes_next() -> None:
    pods = gang("Failed", "gangSchedulingStyle=Hard")
    text = render(pods[0], application(pods), [event("ApplicationFailed", "timed out", kind="Warning")], NOW)
    assert "State: Failed, failed: its pods were not started." in text.splitlines()
    assert "Next: nothing: delete the pods (or the workload) and create them again to try anew." in text.splitlines()
    assert not any(line.startswith("Timeout:") for line in text.splitlines())


def test_a_member_using_dra_claims_says_what_each_asks_and_who_holds_it() -> None:
    member = builders.using_claims(builders.pod("exec-0"), templates=["two", "missing"], claims=["channel"])
    member["status"] = {"resourceClaimStatuses": [{"name": "t0", "resourceClaimName": "exec-0-t0-abc"}]}
    made = builders.resource_claim("exec-0-t0-abc", builders.device_request("gpu.example.com", 2))
    made["status"] = {
        "allocation": {
            "devices": {"results": []},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "tg-train-exec-1a2b3-0", "uid": "u"}],
    }
    channel = builders.resource_claim("channel", builders.device_request("channel.example.com", 1))
    lines = device_lines(member, {"exec-0-t0-abc": made, "channel": channel}, {})
    assert lines == [
        "Devices (DRA):",
        "  claim t0 (exec-0-t0-abc): asks 2 × devices of class gpu.example.com; allocated on node n1, reserved for "
        "tg-train-exec-1a2b3-0",
        "  claim t1: ResourceClaimTemplate missing does not exist; the pod cannot be scheduled until it does",
        "  claim c0 (channel): asks 1 × devices of class channel.example.com; not allocated: no device is held for it yet",
    ]
