"""Capacity-aware admission over a real PodStore and ClusterRoom fed with plain dicts."""

from __future__ import annotations

import json
from typing import Any

from yuniplace.admission.cycle import Admission
from yuniplace.admission.room import ClusterRoom
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.store import PodStore

NS = "team"


def node(name: str, cpu: str = "2", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def gang(
    app: str,
    members: int,
    *,
    created: int,
    cpu: str = "1",
    queue: str | None = None,
    state: str | None = None,
    node_selector: dict[str, str] | None = None,
    group_with: list[str] | None = None,
) -> dict[str, Any]:
    """The originator of a gang of `members` pods of `cpu` each."""
    groups = [
        {"name": "workers", "minMember": members, "minResource": {"cpu": cpu}, "nodeSelector": node_selector or {}}
    ]
    notes = {keys.TASK_GROUPS: json.dumps(groups), keys.TASK_GROUP_NAME: "workers"}
    if state:
        notes[keys.STATE] = state
    if group_with:
        notes[keys.GANG_GROUP] = json.dumps(group_with)
    labels = {keys.APP_ID: app, **({"queue": queue} if queue else {})}
    return {
        "metadata": {
            "name": f"{app}-0",
            "namespace": NS,
            "uid": f"uid-{app}",
            "resourceVersion": "1",
            "labels": labels,
            "annotations": notes,
            "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
        },
        "spec": {
            "schedulingGates": [{"name": keys.GATE}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    }


def bound(name: str, node_name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "other", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"},
    }


class World:
    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.store = PodStore()
        self.room = ClusterRoom(on_freed=self._freed)  # as the controller wires it
        self.room.nodes_listed(nodes)
        self.room.pods_listed(pods)
        self.store.replace(pods)
        self.woken: list[p.AppKey] = []
        self.cycles = 0
        self.admission = Admission(
            self.room, self.store, Limits(), lambda _key: None, self.woken.append, on_cycle=self._cycled
        )

    def _cycled(self, _seconds: float, _cpu_seconds: float) -> None:
        self.cycles += 1

    def _freed(self) -> None:
        if hasattr(self, "admission"):
            self.admission.capacity_changed()

    def ticket(self, app: str) -> Granted | Waiting:
        return self.admission.ticket(p.AppKey(NS, app))


def ten_slots() -> list[dict[str, Any]]:
    return [node(f"n{i}") for i in range(5)]


def test_three_gangs_of_five_on_ten_slots_admit_two_and_queue_the_third() -> None:
    world = World(ten_slots(), [gang("a", 5, created=1), gang("b", 5, created=2), gang("c", 5, created=3)])
    assert world.ticket("a") == Granted()
    assert world.ticket("b") == Granted()
    waiting = world.ticket("c")
    assert isinstance(waiting, Waiting) and waiting.announce
    assert "c/workers: 0 of 5 pods of (cpu 1) fit" in waiting.message
    assert f"first in queue {NS}" in waiting.message
    assert world.ticket("c").announce is False  # the same news is announced once


def test_reservations_in_flight_count_as_used() -> None:
    """b is reserving (its placeholders not placed yet): its room is not offered to c."""
    world = World(ten_slots(), [gang("b", 6, created=1, state="Reserving"), gang("c", 5, created=2)])
    assert isinstance(world.ticket("c"), Waiting)


def test_a_waiting_gang_is_decided_again_only_after_something_changed() -> None:
    """Its reconciles ask again and again; the answer can only change with the cluster."""
    world = World(ten_slots(), [bound(f"x{i}", f"n{i}") for i in range(5)] + [gang("a", 6, created=1)])
    assert isinstance(world.ticket("a"), Waiting)
    assert isinstance(world.ticket("a"), Waiting)
    assert world.cycles == 1
    world.room.pod_event("DELETED", bound("x0", "n0"))
    assert world.ticket("a") == Granted() and world.cycles == 2


def test_what_runs_on_the_nodes_counts_as_used() -> None:
    world = World(ten_slots(), [bound(f"x{i}", f"n{i}") for i in range(5)] + [gang("a", 6, created=1)])
    assert isinstance(world.ticket("a"), Waiting)
    world.room.pod_event("DELETED", bound("x0", "n0"))
    assert world.ticket("a") == Granted()


def test_fifo_head_holds_its_room_against_later_small_gangs() -> None:
    """The head needs 8 of 10 slots and 6 are free; a later gang of 2 that would fit must wait, or a
    stream of them would starve the head."""
    running = [bound("x0", "n0"), bound("x1", "n0"), bound("x2", "n1"), bound("x3", "n1")]
    world = World(ten_slots(), running + [gang("big", 8, created=1), gang("small", 2, created=2)])
    head = world.ticket("big")
    assert isinstance(head, Waiting) and "6 of 8" in head.message
    small = world.ticket("small")
    assert isinstance(small, Waiting) and "position 2" in small.message and "behind team/big" in small.message


def test_backfill_into_room_the_head_cannot_use() -> None:
    """The head only fits on gpu nodes; a later gang may use the other nodes meanwhile."""
    nodes = [node("g0", labels={"kind": "gpu"}), node("c0"), node("c1")]
    world = World(nodes, [gang("big", 4, created=1, node_selector={"kind": "gpu"}), gang("small", 4, created=2)])
    assert isinstance(world.ticket("big"), Granted)  # exceeds: admitted anyway, with a warning
    assert world.ticket("big").warning and "more than all matching nodes hold" in world.ticket("big").warning  # type: ignore[union-attr]
    world2 = World(
        nodes,
        [bound("x", "g0"), gang("head", 2, created=1, node_selector={"kind": "gpu"}), gang("small", 4, created=2)],
    )
    assert isinstance(world2.ticket("head"), Waiting)
    assert world2.ticket("small") == Granted()


def test_queues_are_fifo_each() -> None:
    running = [bound(f"x{i}", f"n{i}", cpu="2") for i in range(4)] + [bound("x4", "n4")]  # one slot free
    world = World(
        ten_slots(),
        running
        + [
            gang("a", 2, created=1, queue="etl"),
            gang("b", 2, created=2, queue="ml"),
            gang("c", 2, created=3, queue="ml"),
        ],
    )
    a, b, c = world.ticket("a"), world.ticket("b"), world.ticket("c")
    assert isinstance(a, Waiting) and "first in queue etl" in a.message
    assert isinstance(b, Waiting) and "first in queue ml" in b.message
    assert isinstance(c, Waiting) and "position 2 in queue ml" in c.message


def test_a_gang_group_is_admitted_whole_or_not_at_all() -> None:
    together = [f"{NS}/a", f"{NS}/b"]
    busy = [bound(f"x{i}", f"n{i}", cpu="2") for i in range(2)]  # 6 slots free
    world = World(
        ten_slots(), busy + [gang("a", 3, created=1, group_with=together), gang("b", 4, created=2, group_with=together)]
    )
    assert isinstance(world.ticket("a"), Waiting) and isinstance(world.ticket("b"), Waiting)
    world = World(
        ten_slots(), busy + [gang("a", 3, created=1, group_with=together), gang("b", 3, created=2, group_with=together)]
    )
    assert world.ticket("a") == Granted() and world.ticket("b") == Granted()


def test_a_gang_group_waits_for_members_not_created_yet() -> None:
    world = World(ten_slots(), [gang("a", 2, created=1, group_with=[f"{NS}/a", "elsewhere/b"])])
    waiting = world.ticket("a")
    assert isinstance(waiting, Waiting) and "elsewhere/b" in waiting.message


def test_freed_room_wakes_the_waiting_application() -> None:
    import threading

    world = World(ten_slots(), [bound(f"x{i}", f"n{i}", cpu="2") for i in range(5)] + [gang("a", 2, created=1)])
    assert isinstance(world.ticket("a"), Waiting)
    stop = threading.Event()
    runner = threading.Thread(target=world.admission.run, args=(stop,))
    runner.start()
    try:
        world.room.pod_event("DELETED", bound("x0", "n0", cpu="2"))
        world.admission.capacity_changed()
        from yuniplace.localcluster import wait_until

        wait_until(lambda: p.AppKey(NS, "a") in world.woken, 10)
    finally:
        stop.set()
        runner.join()
    assert world.ticket("a") == Granted()


def member(app: str, index: int, *, gated: bool) -> dict[str, Any]:
    pod = gang(app, 1, created=1)
    pod["metadata"].update(
        name=f"{app}-{index}", uid=f"uid-{app}-{index}", annotations={keys.TASK_GROUP_NAME: "workers"}
    )
    pod["spec"]["schedulingGates"] = [{"name": keys.GATE}] if gated else []
    return pod


def test_members_released_by_a_swap_keep_their_room_until_bound() -> None:
    """b is reserved and swapping: its placeholders are gone, its members released but not bound yet.
    Their room must not be offered to c in between."""
    swapping = [gang("b", 6, created=1, state="Reserved")] + [member("b", i, gated=False) for i in range(1, 6)]
    swapping[0]["spec"]["schedulingGates"] = []
    world = World(ten_slots(), swapping + [gang("c", 5, created=2)])
    assert isinstance(world.ticket("c"), Waiting)


def test_members_that_finished_need_no_room() -> None:
    """b runs; its members are done but its originator still runs: the room is c's."""
    done = [member("b", i, gated=False) for i in range(1, 6)]
    for pod in done:
        pod["status"]["phase"] = "Succeeded"
    running = gang("b", 6, created=1, state="Running")
    running["spec"] = {"nodeName": "n0", "containers": running["spec"]["containers"]}
    running["status"]["phase"] = "Running"
    world = World(ten_slots(), [running, *done, gang("c", 5, created=2)])
    assert world.ticket("c") == Granted()


def test_an_application_that_is_no_candidate_waits_without_an_announcement() -> None:
    leaving = gang("a", 2, created=1)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    world = World(ten_slots(), [leaving])
    ticket = world.ticket("a")
    assert isinstance(ticket, Waiting) and not ticket.announce
    assert not world.ticket("a").announce
