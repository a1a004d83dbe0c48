"""Capacity-aware admission over a real PodStore and ClusterRoom fed with plain dicts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from tests import builders
from yuniplace.admission.cycle import COALESCE_S, Admission, Queues
from yuniplace.admission.decision import AdmissionRules
from yuniplace.admission.tickets import Granted, Ticket, Undecided, Waiting
from yuniplace.controller.queuesource import QueueSource
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.taskgroups import Limits
from yuniplace.runtime.store import PodStore

NS = "team"
NO_QUEUES = QueueSource()  # no queue configuration: FIFO queues by name


def node(name: str, cpu: str = "2", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return builders.node(name, cpu, memory="64Gi", labels=labels)


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
    notes: dict[str, str] = {}
    if state:
        notes[keys.STATE] = state
    if group_with:
        notes[keys.GANG_GROUP] = json.dumps(group_with)
    return builders.member(
        f"{app}-0",
        app=app,
        group="workers",
        task_groups=[builders.task_group("workers", members, {"cpu": cpu}, nodeSelector=node_selector or {})],
        labels={"queue": queue} if queue else {},
        annotations=notes,
        namespace=NS,
        uid=f"uid-{app}",
        rv="1",
        created=f"2026-01-01T00:00:{created:02d}Z",
        requests={"cpu": cpu},
        gates=[keys.GATE],
        phase="Pending",
    )


def bound(name: str, node_name: str, cpu: str = "1") -> dict[str, Any]:
    """A pod of no gang, of another namespace, running on `node_name`."""
    return builders.pod(
        name, namespace="other", uid=f"uid-{name}", rv="1", requests={"cpu": cpu}, node=node_name, phase="Running"
    )


class World:
    """Admission as the controller wires it, its loop driven by hand: each reconcile's ticket is read
    after the turn of the loop that would come before it. Applications are decided at once, not waited
    for while their other members may still be being created (that wait has tests of its own)."""

    def __init__(
        self,
        nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]],
        queues: Queues = NO_QUEUES,
        clock: Callable[[], float] = time.time,
        **rules: Any,
    ) -> None:
        self.store = PodStore(clock=clock)
        self.woken: list[p.AppKey] = []
        self.pod_group_of: Callable[[p.AppKey], dict[str, Any] | None] = lambda _key: None
        self.admission = Admission(
            self.store,
            Limits(),
            self.pod_group_of,
            queues,
            self.woken.append,
            AdmissionRules(**{"direct_start_wait_s": 0.0, **rules}),
            clock,
        )
        self.room = self.admission.room
        self.room.nodes_listed(nodes)
        self.room.pods_listed(pods)
        self.store.replace(pods)

    @property
    def cycles(self) -> int:
        return self.admission.cycles

    def ticket(self, app: str | p.AppKey) -> Ticket:
        """What a reconcile of `app` (in NS, unless a key) reads: the last cycle's ticket, or, if it
        has none or something changed since, the one of the cycle that follows (which wakes it)."""
        key = app if isinstance(app, p.AppKey) else p.AppKey(NS, app)
        originator = self.store.application(key, self.pod_group_of(key), Limits()).originator
        attempt = "" if originator is None else p.uid(originator)  # as the controller asks
        first = self.admission.standing(key, pending=True, attempt=attempt).ticket
        return self.admission.standing(key, pending=True, attempt=attempt).ticket if self.admission.turn() else first


def admitted(ticket: Ticket | None) -> bool:
    """Admitted without a warning: to reserve with placeholders, or (every member there) to start on seats."""
    return isinstance(ticket, Granted) and ticket.warning is None


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
    return builders.member(
        f"{app}-{index}",
        app=app,
        group="workers",
        namespace=NS,
        uid=f"uid-{app}-{index}",
        rv="1",
        created="2026-01-01T00:00:01Z",
        requests={"cpu": "1"},
        gates=[keys.GATE] if gated else [],
        phase="Pending",
    )


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


def test_an_application_that_is_no_candidate_stays_undecided_and_others_are_decided() -> None:
    """Its reconcile, which saw it pending, hears that admission has not decided (and so announces
    nothing); the cycle it asked for decides every other application, and asking again brings no
    other cycle until the application changes: here, its pod that describes the gang arrives."""
    member = gang("a", 2, created=1)
    member["metadata"].update(name="a-1", uid="uid-a-1")
    del member["metadata"]["annotations"][keys.TASK_GROUPS]
    world = World(ten_slots(), [member, gang("b", 2, created=2)])
    assert world.ticket("a") == Undecided()
    assert world.ticket("a") == Undecided()
    assert admitted(world.ticket("b")) and world.cycles == 1
    world.store.upsert(gang("a", 2, created=1))
    assert admitted(world.ticket("a")) and world.cycles == 2


def test_a_gang_backing_off_is_decided_once_its_backoff_is_over_though_nothing_else_changed() -> None:
    """Its backoff ends with time alone: no pod changes, and yet its next ask brings a decision."""
    now = [1_800_000_000.0]
    backing_off = gang("a", 2, created=1)
    backing_off["metadata"]["annotations"][keys.RETRY_AFTER] = p.format_time(now[0] + 30)
    world = World(ten_slots(), [backing_off], clock=lambda: now[0])
    assert world.ticket("a") == Undecided()
    now[0] += 31
    assert world.ticket("a") == Granted()


def test_a_gang_whose_members_are_being_created_is_decided_once_they_stop_coming() -> None:
    """A gang of 2 with one pod so far is not decided while more may come; room freed meanwhile (a cycle
    with nobody waiting) must not lose the time it is to be decided at."""
    now = [1000.0]
    world = World(ten_slots(), [gang("a", 2, created=1)], clock=lambda: now[0], direct_start_wait_s=1.0)
    assert world.ticket("a") == Undecided()
    world.admission.turn()  # the cycle its reconcile asked for again: still being created
    now[0] += 0.5
    world.admission.capacity_changed()
    assert world.admission.turn() is False  # nobody waits: no cycle
    now[0] += 0.6
    assert world.admission.turn() is True
    assert world.ticket("a") == Granted()  # placeholders
    assert p.AppKey(NS, "a") in world.woken


def test_a_gang_restarted_whole_is_decided_anew_not_given_its_last_attempts_seats() -> None:
    """Gang a (2 members, one CPU each) was given seats; it started, no cycle ran since (nobody waited),
    then it was restarted whole: its owner made its pods again, and the node of one seat is gone. The
    new attempt (a new originator) is not handed the old ticket: a cycle decides it on the nodes there."""
    first = [gang("a", 2, created=1), member("a", 1, gated=True)]
    world = World([node("n0"), node("n1")], first)
    seated = world.ticket("a")
    assert isinstance(seated, Granted) and seated.seats
    [seat_node] = set(seated.seats_of("workers"))
    for pod in first:
        world.store.delete(pod)
    world.room.node_event("DELETED", node(seat_node))
    again = [gang("a", 2, created=5), member("a", 1, gated=True)]
    for pod in again:
        pod["metadata"]["uid"] += "-again"
        world.store.upsert(pod)
    ticket = world.ticket("a")
    assert isinstance(ticket, Granted) and ticket.seats, ticket
    assert seat_node not in ticket.seats_of("workers"), ticket
    assert p.AppKey(NS, "a") in world.woken


class _Stop:
    """The loop's stop signal, recording each pause the loop takes before a cycle; it stops the loop
    after `cycles` pauses."""

    def __init__(self, cycles: int) -> None:
        self.pauses: list[float] = []
        self._cycles = cycles

    def is_set(self) -> bool:
        return len(self.pauses) >= self._cycles

    def wait(self, timeout: float) -> bool:
        self.pauses.append(timeout)
        return self.is_set()


def test_cycles_are_paced_by_the_cpu_they_use_not_by_the_time_they_waited() -> None:
    """A cycle held up (here: waiting 0.3 s, as one waits for the GIL behind the webhook and the watch
    in a busy controller) but doing little delays the next cycle by no more than the little it did."""
    world = World(ten_slots(), [])
    held_up = threading.Event()

    def slow_turn() -> bool:
        held_up.wait(0.3)
        world.admission._due.set()  # something changed meanwhile: the loop decides again
        return True

    world.admission.turn = slow_turn  # type: ignore[method-assign]
    world.admission._due.set()
    stop = _Stop(cycles=2)
    world.admission.run(stop)  # type: ignore[arg-type]
    assert stop.pauses[0] == COALESCE_S
    assert stop.pauses[1] < 0.3 / 2, stop.pauses
