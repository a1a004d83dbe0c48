"""ai-scheduler's Pools as ai-scheduler runs them: a Pool's gang that does not fit on its own nodes, once
nothing it lent can be taken back nor any lower-priority gang of its own evicted, borrows the idle
nodes of the Pool that shares with the most idle room (of those its borrowingPools allow); a Pool that
does not borrow waits; one that does not share never lends; the default pool owns the nodes no Pool
selects and those two select, and borrows like any Pool."""

from __future__ import annotations

from typing import Any

from tests.unit.test_gang_admission import NS, gang
from tests.unit.test_queue_admission import World, nodes, running
from tests.unit.test_queue_source import EVERYTHING_OFF, annotated, pool, source
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.gang import pods as p
from yuniplace.gang.taskgroups import TaskGroup
from yuniplace.queues.pools import Pool, confine, pool_of
from yuniplace.tools.queuestatus import queues_table

A, B, C = {"pool": "a"}, {"pool": "b"}, {"pool": "c"}


def pools(*specs: dict[str, Any], cluster: list[dict[str, Any]]) -> Any:
    queues, _recorder, _changes = source()
    queues.nodes_changed(cluster)
    queues.pools_changed(list(specs))
    return queues


def test_a_gang_larger_than_its_pool_borrows_the_most_idle_pool_that_shares() -> None:
    """a owns one node of 4 cores, b one and c two idle: a gang of 8 cores of a borrows c's nodes."""
    cluster = nodes(1, labels=A, prefix="a") + nodes(1, labels=B, prefix="b") + nodes(2, labels=C, prefix="c")
    queues = pools(pool("a", A), pool("b", B), pool("c", C), cluster=cluster)
    ticket = World(cluster, [annotated(gang("big", 8, created=1), "a")], queues).ticket("big")
    assert isinstance(ticket, Granted) and ticket.lender == "root.c", ticket
    assert ticket.pool == Pool({"pool": "a"}, (), (), {"pool": "c"})
    # Room enough at home: no borrowing.
    home = World(cluster, [annotated(gang("small", 4, created=1), "a")], queues).ticket("small")
    assert isinstance(home, Granted) and home.lender is None


def test_a_granted_borrower_reserves_on_the_pool_it_borrows_before_a_cycle_reads_its_record() -> None:
    """Its placeholders may be made by a reconcile after the one that took the ticket (a DRA gang's, once
    its claims are made), while it is reserving and no cycle has read the lender in its record yet."""
    cluster = nodes(1, labels=A, prefix="a") + nodes(2, labels=C, prefix="c")
    queues = pools(pool("a", A), pool("c", C), cluster=cluster)
    world = World(cluster, [annotated(gang("big", 8, created=1), "a")], queues)
    assert isinstance(world.ticket("big"), Granted)
    reserving = world.admission.standing(p.AppKey(NS, "big"), pending=False)
    assert reserving.pool == Pool({"pool": "a"}, (), (), {"pool": "c"})


def test_with_two_lenders_equally_idle_it_takes_the_one_holding_fewer_gangs() -> None:
    cluster = nodes(1, labels=A, prefix="a") + nodes(2, labels=B, prefix="b") + nodes(3, labels=C, prefix="c")
    busy = running("busy", 4, "root.c", on=["c0"], created=0)  # c: one node taken of three
    queues = pools(pool("a", A), pool("b", B), pool("c", C), cluster=cluster)
    ticket = World(cluster, [*busy, annotated(gang("big", 8, created=1), "a")], queues).ticket("big")
    assert isinstance(ticket, Granted) and ticket.lender == "root.b", ticket  # 8 idle cores each; c holds a gang


def test_a_pool_preempts_at_home_before_it_borrows() -> None:
    """a's nodes are full of its own low-priority gang: its high-priority gang evicts that gang rather
    than borrow b's idle node, as ai-scheduler preempts first and borrows after."""
    cluster = nodes(2, labels=A, prefix="a") + nodes(2, labels=B, prefix="b")
    low = running("low", 8, "a", on=["a0", "a1"], created=0, priority=10)
    for pod in low:
        annotated(pod, "a")
    queues = pools(pool("a", A), pool("b", B), cluster=cluster)
    high = annotated(gang("high", 4, created=1), "a")
    high["spec"]["priority"] = 1000
    waiting = World(cluster, [*low, high], queues).ticket("high")
    assert isinstance(waiting, Waiting) and "evicting 1 lower-priority gang(s) of its queue root.a" in waiting.message


def test_a_pool_that_does_not_borrow_waits_at_home_and_says_so() -> None:
    cluster = nodes(1, labels=A, prefix="a") + nodes(2, labels=B, prefix="b")
    queues = pools(pool("a", A, disableBorrowing=True), pool("b", B), cluster=cluster)
    waiting = World(cluster, [annotated(gang("big", 8, created=1), "a")], queues).ticket("big")
    assert isinstance(waiting, Waiting) and "queue root.a would go 4 beyond its guaranteed cpu" in waiting.message
    assert waiting.message.endswith("and it does not borrow")


def test_a_pool_that_does_not_share_never_lends_and_borrowing_pools_choose_the_lenders() -> None:
    cluster = (
        nodes(1, labels=A, prefix="a")
        + nodes(2, labels={"kubernetes.io/role": "master"}, prefix="m")
        + nodes(1, labels=B, prefix="b")
        + nodes(2, labels=C, prefix="c")
    )
    masters = pool("masters", {"kubernetes.io/role": "master"}, **EVERYTHING_OFF)
    queues = pools(pool("a", A, borrowingPools=["b", "masters"]), pool("b", B), pool("c", C), masters, cluster=cluster)
    # c is the most idle, but a borrows from b only; masters lends nothing.
    ticket = World(cluster, [annotated(gang("mid", 8, created=1), "a")], queues).ticket("mid")
    assert isinstance(ticket, Granted) and ticket.lender == "root.b", ticket
    too_big = World(cluster, [annotated(gang("big", 12, created=1), "a")], queues).ticket("big")
    assert isinstance(too_big, Granted) and too_big.warning and "more than all matching nodes hold" in too_big.warning


def test_the_default_pool_owns_the_nodes_no_pool_selects_and_those_two_select() -> None:
    """A node of no Pool and one both a and b select are the default pool's: a gang naming no Pool fits
    on them; neither Pool's guarantee counts them; a gang of the default pool larger than them borrows."""
    both = nodes(1, labels={"pool": "a", "team": "b"}, prefix="both")
    cluster = nodes(1, prefix="plain") + both + nodes(1, labels=A, prefix="a") + nodes(2, labels=B, prefix="b")
    queues = pools(pool("a", A), pool("b", {"team": "b"}), pool("bb", B), cluster=cluster)
    config = queues.config()
    assert config.queues["root.a"].guaranteed["cpu"] == 4000 and config.queues["root.b"].guaranteed == {}
    assert config.queues["root.default"].guaranteed["cpu"] == 8000
    home = pool_of(config, "root.default")
    assert home == Pool({}, ({"pool": "a"}, {"team": "b"}, {"pool": "b"}), ("both0",))
    accepted = confine(TaskGroup("workers", 1, {"cpu": "1"}), home).affinity["nodeAffinity"]
    terms = accepted["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["both0"]}]} in terms
    fits = World(cluster, [gang("home", 8, created=1)], queues).ticket("home")
    assert isinstance(fits, Granted) and fits.lender is None
    borrows = World(cluster, [gang("more", 12, created=1)], queues).ticket("more")
    assert isinstance(borrows, Granted) and borrows.lender == "root.bb", borrows


def test_a_borrowing_gangs_placeholders_may_go_to_its_own_nodes_or_the_lenders() -> None:
    group = confine(TaskGroup("workers", 2, {"cpu": "1"}, node_selector={"disk": "ssd"}), Pool(A, (), (), C))
    assert dict(group.node_selector) == {"disk": "ssd"}
    assert group.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["c"]}]},
    ]


def test_the_pool_table_shows_each_pools_room_its_borrowers_its_pending_pods_and_switches() -> None:
    """ai-scheduler's resource table: a's gang runs borrowing b's two nodes (b shares them: 8 cores of
    its 8), a gang of b waits for them (its one pod so far pending), masters lends nothing; the default pool's row
    is the node no Pool selects; TOTAL sums every pool."""
    cluster = (
        nodes(1, labels=A, prefix="a")
        + nodes(2, labels=B, prefix="b")
        + nodes(1, labels={"kubernetes.io/role": "master"}, prefix="m")
        + nodes(1, prefix="plain")
    )
    queues = pools(
        pool("a", A), pool("b", B), pool("masters", {"kubernetes.io/role": "master"}, **EVERYTHING_OFF), cluster=cluster
    )
    borrower = running("borrower", 12, "a", on=["a0", "b0", "b1"], created=0)
    for pod in borrower:
        annotated(pod, "a")
        pod["metadata"]["annotations"]["yuniplace.io/borrowed-from"] = "root.b"
    world = World(cluster, [*borrower, annotated(gang("home", 8, created=1), "b")], queues)
    world.ticket("home")
    report = world.admission.report()
    assert report is not None
    table = queues_table(report).split("\n\n")[-1].splitlines()
    assert table[0].split() == [
        "POOL",
        "QUEUE",
        "NODES",
        "CAPACITY",
        "ALLOCATABLE",
        "USED",
        "SHARED",
        "PENDING",
        "P/B/S",
    ]
    rows = {next((w for w in line.split() if w.startswith("root.")), "TOTAL"): line.split() for line in table[1:]}
    assert rows["root.a"][2] == "1" and rows["root.a"][-1] == "+p+b+s"
    assert rows["root.b"][6].startswith("cpu=8") and rows["root.b"][7] == "1", rows["root.b"]  # shared; pending
    assert rows["root.masters"][-1] == "-p-b-s"
    assert rows["root.default"][:4] == ["(the", "rest)", "root.default", "1"]  # the rest: one node
    assert rows["TOTAL"][1] == "5" and rows["TOTAL"][-1] == "1", rows["TOTAL"]  # 5 nodes; 1 pod pending


def test_a_pool_takes_back_its_nodes_from_a_gang_within_its_own_queues_guarantee() -> None:
    """The default pool owns four idle nodes, yet a gang of it runs on demo's two (it was pinned there,
    or its own nodes were full when it came): demo's gang takes them back, as a gang of another pool on
    its nodes borrowed them whatever its own queue holds."""
    cluster = nodes(4, prefix="plain") + nodes(2, labels=A, prefix="a")
    queues = pools(pool("a", A), cluster=cluster)
    borrower = running("borrower", 8, "root.default", on=["a0", "a1"], created=0)
    world = World(cluster, [*borrower, annotated(gang("home", 8, created=1), "a")], queues)
    waiting = world.ticket("home")
    assert isinstance(waiting, Waiting) and "taking back room its queue root.a lent to root.default" in waiting.message
    reclaim = world.admission.standing(p.AppKey(NS, "borrower"), pending=False).reclaim
    assert reclaim is not None and "lent to queue root.default, whose gang borrowed its nodes" in reclaim.message
