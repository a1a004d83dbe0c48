"""Admission by queue over a real PodStore and ClusterRoom: limits, guarantees and borrowing, priority,
pools, reclaim of whole gangs, and placeholders created for an autoscaler."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit import test_gang_admission as gang_admission
from tests.unit.test_gang_admission import NS, bound, gang, node
from yuniplace.admission.tickets import Granted, Refused, Waiting
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.queues.model import QueueConfig, QueueSpec
from yuniplace.queues.quota import Ledger
from yuniplace.runtime.events import Reason

NOW = 1_800_000_000.0


def cores(n: float) -> dict[str, int]:
    return {"cpu": int(n * 1000)}


class Queues:
    """A fixed configuration; an application is placed in `root.<the queue it names>`."""

    def __init__(self, *queues: QueueSpec) -> None:
        self.current = QueueConfig({q.path: q for q in (QueueSpec("root"), *queues)})

    def placing(self) -> Queues:
        return self

    @property
    def config(self) -> QueueConfig:
        return self.current

    def done(self) -> None:
        pass

    def place(self, app: Application) -> str | Refused:
        path = f"root.{app.queue}"
        if path not in self.current.queues:
            return Refused(Reason.GANG_REFUSED, f"no queue {path}")
        return path


def in_queue(pod: dict[str, Any], queue: str, *, priority: int = 0) -> dict[str, Any]:
    pod["metadata"]["labels"]["queue"] = queue
    pod["spec"]["priority"] = priority
    return pod


class World(gang_admission.World):
    """Admission with queues, at NOW."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]], queues: Queues, **rules: Any) -> None:
        super().__init__(nodes, pods, queues, lambda: NOW, **rules)
        self.queues = queues

    def add(self, pod: dict[str, Any]) -> None:
        self.store.upsert(pod)
        self.room.pod_event("ADDED", pod)

    def remove(self, pod: dict[str, Any]) -> None:
        self.store.delete(pod)
        self.room.pod_event("DELETED", pod)


def nodes(count: int, cpu: str = "4", labels: dict[str, str] | None = None, prefix: str = "n") -> list[dict[str, Any]]:
    return [node(f"{prefix}{i}", cpu=cpu, labels=labels) for i in range(count)]


def running(
    app: str, members: int, queue: str, *, on: list[str], created: int, priority: int = 0
) -> list[dict[str, Any]]:
    """A gang of `members` pods of 1 cpu that runs: its originator carries the state, every pod is bound."""
    originator = in_queue(gang(app, members, created=created, state="Running"), queue, priority=priority)
    pods = [originator]
    for index in range(members):
        pod = in_queue(gang(app, members, created=created), queue, priority=priority)
        pod["metadata"].update(
            name=f"{app}-m{index}",
            uid=f"uid-{app}-m{index}",
            annotations={"yunikorn.apache.org/task-group-name": "workers"},
        )
        pods.append(pod)
    for pod in pods:
        pod["spec"] = {
            "nodeName": on[pods.index(pod) % len(on)],
            "containers": pod["spec"]["containers"],
            "priority": priority,
        }
        pod["status"]["phase"] = "Running"
    originator["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "10m"}}}]
    return pods


def test_a_queue_at_its_max_keeps_its_next_gang_waiting_while_room_is_free() -> None:
    queues = Queues(QueueSpec("root.etl", max=cores(4)))
    world = World(
        nodes(4), [in_queue(gang("first", 4, created=1), "etl"), in_queue(gang("second", 2, created=2), "etl")], queues
    )
    assert world.ticket("first") == Granted()
    waiting = world.ticket("second")
    assert isinstance(waiting, Waiting) and "queue root.etl is at its max cpu: 4 of 4 used" in waiting.message
    queues.current = QueueConfig({**queues.current.queues, "root.etl": QueueSpec("root.etl", max=cores(8))})
    world.admission.capacity_changed()  # as QueueSource tells it of an edit
    assert world.ticket("second") == Granted()


def test_no_queue_takes_the_application_is_a_refusal() -> None:
    world = World(nodes(2), [in_queue(gang("lost", 1, created=1), "nowhere")], Queues(QueueSpec("root.etl")))
    refused = world.ticket("lost")
    assert isinstance(refused, Refused) and "root.nowhere" in refused.message


def test_within_a_queue_priority_comes_before_arrival() -> None:
    queues = Queues(QueueSpec("root.ml"))
    pods = [in_queue(gang("early", 4, created=1), "ml"), in_queue(gang("urgent", 4, created=5), "ml", priority=100)]
    world = World(nodes(1), [bound("x", "n0", cpu="1"), *pods], queues)  # 3 free: neither fits
    urgent = world.ticket("urgent")
    assert isinstance(urgent, Waiting) and "first in queue root.ml" in urgent.message
    early = world.ticket("early")
    assert isinstance(early, Waiting) and "position 2" in early.message


def test_a_queue_that_does_not_borrow_stays_within_its_guarantee() -> None:
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4), borrowing=False), QueueSpec("root.b", guaranteed=cores(4)))
    world = World(nodes(2), [in_queue(gang("big", 6, created=1), "a")], queues)
    waiting = world.ticket("big")
    assert isinstance(waiting, Waiting) and "does not borrow" in waiting.message


def test_room_guaranteed_to_a_queue_that_does_not_share_is_not_lent() -> None:
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4), sharing=False))
    world = World(nodes(2), [in_queue(gang("big", 6, created=1), "a")], queues)
    waiting = world.ticket("big")
    assert isinstance(waiting, Waiting) and "guaranteed to queues that do not lend" in waiting.message
    shared = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    assert World(nodes(2), [in_queue(gang("big", 6, created=1), "a")], shared).ticket("big") == Granted()


def test_a_queue_reclaims_its_guarantee_from_the_newest_borrowing_gang_whole() -> None:
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    # a runs two gangs of 3 on 8 cores (2 beyond its guarantee); b asks for its 4.
    pods = [
        *running("a-old", 3, "a", on=["n0"], created=1),
        *running("a-new", 3, "a", on=["n1"], created=2),
        in_queue(gang("b-job", 4, created=3), "b"),
    ]
    world = World(nodes(2), pods, queues)
    waiting = world.ticket("b-job")
    assert isinstance(waiting, Waiting) and "taking back room its queue root.b lent to root.a" in waiting.message
    reclaim = world.admission.standing(p.AppKey(NS, "a-new"), pending=False).reclaim
    assert reclaim is not None and reclaim.beneficiary == p.AppKey(NS, "b-job")
    assert "evicting all its pods, the whole gang" in reclaim.message
    assert world.admission.standing(p.AppKey(NS, "a-old"), pending=False).reclaim is None


def test_a_borrowing_gang_whose_members_are_swapping_in_is_taken_back_whole() -> None:
    """Its placeholders gone, its members released toward their nodes and none bound yet: it has started,
    so the reclaim evicts it whole rather than take back placeholders it no longer holds."""
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    swapping = running("a-new", 3, "a", on=["n1"], created=2)
    swapping[0]["metadata"]["annotations"][keys.STATE] = "Reserved"
    for pod in swapping:
        node = pod["spec"].pop("nodeName")
        pod["metadata"]["annotations"][keys.SWAP_PLACEHOLDER] = f"tg-{p.name(pod)}"
        pod["status"] = {"phase": "Pending", "nominatedNodeName": node}
    pods = [*running("a-old", 3, "a", on=["n0"], created=1), *swapping, in_queue(gang("b-job", 4, created=3), "b")]
    world = World(nodes(2), pods, queues)
    assert isinstance(world.ticket("b-job"), Waiting)
    reclaim = world.admission.standing(p.AppKey(NS, "a-new"), pending=False).reclaim
    assert reclaim is not None and "evicting all its pods, the whole gang" in reclaim.message


def test_of_borrowers_created_in_the_same_second_the_one_reserved_last_is_taken_back() -> None:
    """Creation times have whole seconds; reservations began at times the controller wrote to the ms."""
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    reserved_last = running("a-1", 3, "a", on=["n0"], created=1)
    reserved_first = running("a-2", 3, "a", on=["n1"], created=1)
    for gang_pods, started in ((reserved_last, NOW - 10.2), (reserved_first, NOW - 10.5)):
        gang_pods[0]["metadata"]["annotations"][keys.RESERVATION_STARTED] = p.format_time(started)
    for first in (reserved_last, reserved_first):  # whichever the store lists first
        second = reserved_first if first is reserved_last else reserved_last
        world = World(nodes(2), [*first, *second, in_queue(gang("b-job", 4, created=3), "b")], queues)
        assert isinstance(world.ticket("b-job"), Waiting)
        assert world.admission.standing(p.AppKey(NS, "a-1"), pending=False).reclaim is not None
        assert world.admission.standing(p.AppKey(NS, "a-2"), pending=False).reclaim is None


def test_a_reclaim_lasts_until_the_evicted_gang_has_let_its_room_go_though_its_job_makes_new_pods() -> None:
    """While the evicted pods are still going, the new pods of their Job make the application pending
    again: the gang waiting for the room must wait for those pods, not take another victim."""
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    older = running("a-old", 3, "a", on=["n0"], created=1)
    newer = running("a-new", 3, "a", on=["n1"], created=2)
    world = World(nodes(2), [*older, *newer, in_queue(gang("b-job", 4, created=3), "b")], queues)
    assert isinstance(world.ticket("b-job"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "a-new"), pending=False).reclaim is not None

    for pod in newer:  # evicted: going, still on their node
        pod["metadata"]["deletionTimestamp"] = p.format_time(NOW)
        world.add(pod)
    again = in_queue(gang("a-new", 3, created=3), "a")  # the same second as b-job: a tie by time
    again["metadata"].update(name="a-new-again", uid="uid-a-new-again")
    world.add(again)
    assert isinstance(world.ticket("b-job"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "a-old"), pending=False).reclaim is None

    for pod in newer:
        world.remove(pod)
    assert isinstance(world.ticket("b-job"), Granted)
    assert isinstance(world.ticket("a-new"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "a-old"), pending=False).reclaim is None


def test_a_queue_without_preemption_never_reclaims() -> None:
    queues = Queues(
        QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4), preemption=False)
    )
    pods = [
        *running("a-old", 3, "a", on=["n0"], created=1),
        *running("a-new", 3, "a", on=["n1"], created=2),
        in_queue(gang("b-job", 4, created=3), "b"),
    ]
    world = World(nodes(2), pods, queues)
    assert isinstance(world.ticket("b-job"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "a-new"), pending=False).reclaim is None


def test_a_pool_keeps_its_queues_gangs_on_its_nodes_and_others_off_it_unless_shared() -> None:
    gpu = {"pool": "gpu"}
    cluster = nodes(2, labels=gpu, prefix="g") + nodes(1, prefix="c")
    owner = QueueSpec("root.gpu", node_selector=gpu, sharing=False)
    queues = Queues(owner, QueueSpec("root.cpu"))
    world = World(
        cluster, [in_queue(gang("train", 8, created=1), "gpu"), in_queue(gang("etl", 6, created=2), "cpu")], queues
    )
    assert world.ticket("train") == Granted()  # 8 of the pool's 8
    etl = world.ticket("etl")  # 4 on the one cpu node; the pool is not shared
    assert isinstance(etl, Granted) and etl.warning and "more than all matching nodes hold" in etl.warning
    shared = Queues(QueueSpec("root.gpu", node_selector=gpu), QueueSpec("root.cpu"))
    assert World(cluster, [in_queue(gang("etl", 6, created=2), "cpu")], shared).ticket("etl") == Granted()


def test_a_head_waiting_long_enough_gets_its_placeholders_for_an_autoscaler() -> None:
    queues = Queues(QueueSpec("root.ml"))
    head = in_queue(gang("big", 4, created=1), "ml")  # fits the node, not what is free of it
    head["metadata"]["annotations"]["yuniplace.io/queued-since"] = p.format_time(NOW - 120)
    busy = bound("x", "n0", cpu="2")
    world = World(nodes(1), [busy, head], queues, placeholders_after_s=60)
    granted = world.ticket("big")
    assert isinstance(granted, Granted) and granted.warning and "cluster autoscaler" in granted.warning
    patient = World(nodes(1), [busy, head], queues, placeholders_after_s=600)
    assert isinstance(patient.ticket("big"), Waiting)


def test_ordinary_pods_on_a_pool_count_against_the_queue_that_owns_it() -> None:
    gpu = {"pool": "gpu"}
    queues = Queues(QueueSpec("root.gpu", node_selector=gpu, max=cores(8)), QueueSpec("root.cpu"))
    cluster = nodes(3, labels=gpu, prefix="g")  # 12 cores in the pool
    busy = [bound("x", "g0", cpu="3")]  # an ordinary pod on a pool node
    waiting = World(cluster, [*busy, in_queue(gang("train", 6, created=1), "gpu")], queues).ticket("train")
    assert isinstance(waiting, Waiting) and "queue root.gpu is at its max cpu: 3 of 8 used" in waiting.message
    assert World(cluster, [in_queue(gang("train", 6, created=1), "gpu")], queues).ticket("train") == Granted()


def test_the_report_shows_what_each_queue_holds_borrows_and_lends_and_each_pool() -> None:
    gpu = {"pool": "gpu"}
    queues = Queues(
        QueueSpec("root.a", guaranteed=cores(4)),
        QueueSpec("root.b", guaranteed=cores(4), node_selector=gpu),
    )
    cluster = nodes(1, labels=gpu, prefix="g") + nodes(1, prefix="c")
    pods = [*running("a-run", 6, "a", on=["c0", "g0"], created=1), in_queue(gang("a-next", 8, created=2), "a")]
    world = World(cluster, pods, queues)
    assert isinstance(world.ticket("a-next"), Waiting)
    report = world.admission.report()
    assert report is not None
    rows = {row.path: row for row in report.queues}
    assert rows["root.a"].used["cpu"] == 6010 and rows["root.a"].borrowed == {"cpu": 2010}
    assert rows["root.b"].lent == {"cpu": 2010} and rows["root.b"].borrowed == {}
    assert rows["root.a"].waiting == 1 and rows["root"].waiting == 1
    [pool] = report.pools
    assert (pool.queue, pool.nodes, pool.allocatable["cpu"]) == ("root.b", 1, 4000)
    assert pool.used["cpu"] == pool.shared["cpu"] == 3000  # a's members on g0, the originator on c0


def test_reclaim_takes_back_only_gangs_holding_room_the_waiting_gang_could_use() -> None:
    gpu = {"gpu": "yes"}
    cluster = nodes(2, prefix="c") + nodes(2, labels=gpu, prefix="g")
    queues = Queues(
        QueueSpec("root.ml", node_selector=gpu, guaranteed=cores(8)), QueueSpec("root.etl", guaranteed=cores(8))
    )
    pods = [  # created in the same second: arrival alone cannot tell the borrower on the pool apart
        *running("etl-cpu", 8, "etl", on=["c0", "c1"], created=1),
        *running("etl-gpu", 4, "etl", on=["g0", "g1"], created=1),
        in_queue(gang("train", 8, created=3), "ml"),
    ]
    world = World(cluster, pods, queues)
    assert isinstance(world.ticket("train"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "etl-gpu"), pending=False).reclaim is not None
    assert world.admission.standing(p.AppKey(NS, "etl-cpu"), pending=False).reclaim is None


def test_a_queue_whose_borrowing_cannot_be_told_comes_last_and_the_others_are_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    original = Ledger.beyond_guarantee

    def broken(self: Ledger, path: str, needs: dict[str, int]) -> dict[str, int]:
        if path == "root.a":
            raise ValueError("unreadable")
        return original(self, path, needs)

    monkeypatch.setattr(Ledger, "beyond_guarantee", broken)
    world = World(
        nodes(2), [in_queue(gang("a-job", 2, created=1), "a"), in_queue(gang("b-job", 2, created=2), "b")], queues
    )
    assert world.ticket("b-job") == Granted()
