"""Each queue setting has its effect on admission: the order of a queue's line (priority or not, fifo
or fair), gangs that are never reclaim's victims, maxapplications and YuniKorn's user and group
limits; and a reclaim whose victim is slow to leave takes no second victim."""

from __future__ import annotations

from typing import Any

from tests.unit.test_gang_admission import NS, admitted, bound, gang
from tests.unit.test_queue_admission import NOW, Queues, World, cores, in_queue, nodes, running
from tests.unit.test_quota import config, holder
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.gang import pods as p
from yuniplace.gang import userinfo
from yuniplace.gang.userinfo import UserInfo
from yuniplace.queues.config import read_queues_yaml
from yuniplace.queues.model import Limit, Ordering, QueueSpec
from yuniplace.queues.quota import Ledger, reclaim


def by(user: str, *groups: str, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods, their originator recorded as submitted by `user` of `groups` (as the webhook records)."""
    pods[0]["metadata"].setdefault("annotations", {})[userinfo.ANNOTATION] = userinfo.encode(user, groups)
    return pods


def message(ticket: object) -> str:
    assert isinstance(ticket, Waiting), ticket
    return ticket.message


# -- the order of a queue's line --------------------------------------------------------------------------


def test_without_priority_sorting_the_earlier_gang_goes_first_whatever_its_priority() -> None:
    pods = [in_queue(gang("early", 4, created=1), "ml"), in_queue(gang("urgent", 4, created=5), "ml", priority=100)]
    world = World(nodes(1), [bound("x", "n0", cpu="1"), *pods], Queues(QueueSpec("root.ml", by_priority=False)))
    assert "first in queue root.ml" in message(world.ticket("early"))
    assert f"position 2 in queue root.ml, behind {NS}/early" in message(world.ticket("urgent"))


def test_gangs_created_in_the_same_second_stand_in_the_order_they_were_seen() -> None:
    """Creation times have whole seconds: `b` and `a` share one, and `b` was created (and seen) first."""
    pods = [in_queue(gang("b", 4, created=1), "ml"), in_queue(gang("a", 4, created=1), "ml")]
    world = World(nodes(1), [bound("x", "n0", cpu="1"), *pods], Queues(QueueSpec("root.ml")))
    assert f"position 2 in queue root.ml, behind {NS}/b" in message(world.ticket("a"))


def test_a_fair_queue_puts_the_application_using_least_first() -> None:
    """`busy` already runs a pod of its own (it holds 1 of 4 cpu), `idle` nothing: fair puts `idle` first,
    though `busy` came first; fifo keeps `busy` first."""
    for ordering, first in ((Ordering.FAIR, "idle"), (Ordering.FIFO, "busy")):
        busy = in_queue(gang("busy", 4, created=1), "ml")
        member = in_queue(gang("busy", 4, created=1), "ml")
        member["metadata"].update(name="busy-m", uid="uid-busy-m")
        member["spec"]["nodeName"] = "n0"
        member["status"]["phase"] = "Running"
        pods = [busy, member, in_queue(gang("idle", 4, created=2), "ml")]
        world = World(nodes(1), pods, Queues(QueueSpec("root.ml", ordering=ordering)))
        second = "busy" if first == "idle" else "idle"
        assert f"behind {NS}/{first}" in message(world.ticket(second)), ordering


# -- gangs reclaim may not take -----------------------------------------------------------------------------


def test_reclaim_passes_over_the_gangs_of_a_queue_that_is_not_reclaimable() -> None:
    tree = config(
        QueueSpec("root.a", guaranteed=cores(4)),
        QueueSpec("root.kept", reclaimable=False),
        QueueSpec("root.open"),
    )
    ledger = Ledger(tree, {"root.kept": cores(3), "root.open": cores(3)})
    kept, open_ = holder("kept", "root.kept", 3, arrival=2), holder("open", "root.open", 3, arrival=1)
    taken = reclaim(ledger, "root.a", cores(4), [kept, open_], lambda taken: len(taken) == 1)
    assert taken == [open_]  # the newer gang is the kept one: passed over
    assert reclaim(ledger, "root.a", cores(4), [kept], lambda taken: True) is None


def test_a_reclaim_lasts_while_its_evicted_pods_are_still_on_their_nodes() -> None:
    """Bare pods evicted: the victim has no live pod left, but its pods have not left their nodes. The
    waiting gang keeps waiting for them and takes no second victim, cycle after cycle."""
    queues = Queues(QueueSpec("root.a", guaranteed=cores(4)), QueueSpec("root.b", guaranteed=cores(4)))
    older = running("a-old", 3, "a", on=["n0"], created=1)
    newer = running("a-new", 3, "a", on=["n1"], created=2)
    world = World(nodes(2), [*older, *newer, in_queue(gang("b-job", 4, created=3), "b")], queues)
    assert isinstance(world.ticket("b-job"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "a-new"), pending=False).reclaim is not None

    for pod in newer:
        pod["metadata"]["deletionTimestamp"] = p.format_time(NOW)
        world.add(pod)
    for _ in range(3):  # whatever wakes the cycles
        world.admission.capacity_changed()
        assert "1 gang(s) going" in message(world.ticket("b-job"))
        assert world.admission.standing(p.AppKey(NS, "a-old"), pending=False).reclaim is None
    for pod in newer:
        world.remove(pod)
    world.admission.capacity_changed()
    assert isinstance(world.ticket("b-job"), Granted)
    assert world.admission.standing(p.AppKey(NS, "a-old"), pending=False).reclaim is None


# -- maxapplications, users and groups --------------------------------------------------------------------


def test_maxapplications_counts_running_applications_at_every_level() -> None:
    queues = Queues(
        QueueSpec("root.org", max_applications=2), QueueSpec("root.org.a", max_applications=1), QueueSpec("root.org.b")
    )
    pods = [
        *running("a1", 1, "org.a", on=["n0"], created=1),
        in_queue(gang("a2", 1, created=2), "org.a"),
        *running("b1", 1, "org.b", on=["n0"], created=3),
        in_queue(gang("b2", 1, created=4), "org.b"),
    ]
    world = World(nodes(2), pods, queues)
    assert "queue root.org.a is at its maxapplications: 1 of 1 applications running" in message(world.ticket("a2"))
    assert "queue root.org.b is at its parent root.org's maxapplications: 2 of 2" in message(world.ticket("b2"))


def test_a_user_at_their_maxapplications_waits_while_another_user_of_the_queue_starts() -> None:
    limits = (Limit(users=frozenset({"*"}), max_applications=1),)
    pods = [
        *by("alice", pods=running("first", 1, "ml", on=["n0"], created=1)),
        *by("alice", pods=[in_queue(gang("second", 1, created=2), "ml")]),
        *by("bob", pods=[in_queue(gang("bobs", 1, created=3), "ml")]),
    ]
    world = World(nodes(2), pods, Queues(QueueSpec("root.ml", limits=limits)))
    assert "user alice is at queue root.ml's user limit: 1 of 1 applications running" in message(world.ticket("second"))
    assert admitted(world.ticket("bobs"))


def test_a_group_limit_holds_across_the_users_of_the_group_and_a_user_of_its_own_is_counted_alone() -> None:
    limits = (
        Limit(groups=frozenset({"devs"}), max_resources=cores(3), name="devs"),
        Limit(users=frozenset({"carol"}), max_resources=cores(8)),
    )
    pods = [
        *by("alice", "devs", pods=running("alices", 2, "ml", on=["n0"], created=1)),
        *by("bob", "devs", pods=[in_queue(gang("bobs", 2, created=2), "ml")]),
        *by("carol", "ops", pods=[in_queue(gang("carols", 2, created=3), "ml")]),
    ]
    world = World(nodes(2), pods, Queues(QueueSpec("root.ml", limits=limits)))
    # alices holds 2 cpu and a 10m originator; bobs needs 2 more.
    assert "group devs is at the limit 'devs' of queue root.ml: 2010m of 3 cpu used, and the gang needs 2" in message(
        world.ticket("bobs")
    )
    assert world.ticket("carols") == Granted()


def test_an_application_without_a_record_counts_as_nobody() -> None:
    ledger = Ledger(config(QueueSpec("root.ml", limits=(Limit(users=frozenset({"nobody"}), max_applications=1),))), {})
    ledger.take("root.ml", cores(1), UserInfo("nobody"))
    blocked = ledger.over_limits("root.ml", cores(1), UserInfo("nobody"))
    assert blocked is not None and "user nobody" in blocked.reason


# -- reading limits -------------------------------------------------------------------------------------------


def test_yunikorn_limits_are_read_per_queue_and_the_partitions_hold_at_root() -> None:
    config_ = read_queues_yaml(
        """
partitions:
  - name: default
    limits:
      - limit: everyone
        users: ["*"]
        maxapplications: 10
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: ml
            limits:
              - limit: devs
                groups: [devs]
                maxresources: {vcore: 4, memory: 8Gi}
              - users: [alice, bob]
                maxapplications: 2
"""
    )
    assert config_.queues["root"].limits == (Limit(frozenset({"*"}), frozenset(), 10, {}, "everyone"),)
    devs, pair = config_.queues["root.ml"].limits
    assert devs == Limit(frozenset(), frozenset({"devs"}), 0, {"cpu": 4000, "memory": 8 * 2**30 * 1000}, "devs")
    assert (pair.users, pair.max_applications) == (frozenset({"alice", "bob"}), 2)
    assert config_.warnings == ()


def test_a_limit_for_no_one_or_of_nothing_or_naming_a_user_twice_is_refused() -> None:
    text = """
partitions:
  - queues:
      - name: root
        submitacl: "*"
        limits:
          - users: [alice]
          - maxapplications: 1
          - users: [alice]
            maxapplications: 2
"""
    try:
        read_queues_yaml(text)
    except ValueError as error:
        problems = str(error)
    else:
        raise AssertionError("refused")
    assert "limits[0]: 0 sets neither maxapplications nor maxresources" in problems
    assert "limits[1]: 1 names no users and no groups" in problems
    assert 'limits[2].users: "alice" is also in limits[0]' in problems


def test_the_report_shows_what_each_user_holds_in_each_queue() -> None:
    pods = [
        *by("alice", pods=running("first", 1, "ml", on=["n0"], created=1)),
        *by("bob", pods=running("second", 2, "ml", on=["n1"], created=2)),
    ]
    world = World(nodes(2), pods, Queues(QueueSpec("root.ml")))
    world.admission.decide_now()
    report = world.admission.report()
    assert report is not None
    rows = {(row.queue, row.user): (row.applications, row.used["pods"]) for row in report.users}
    assert rows == {
        ("root", "alice"): (1, 2000),
        ("root", "bob"): (1, 3000),
        ("root.ml", "alice"): (1, 2000),
        ("root.ml", "bob"): (1, 3000),
    }


def test_a_queue_that_preempts_within_itself_evicts_its_lower_priority_gang_once_nothing_lent_is_left() -> None:
    """A Pool's high-priority gang finds its nodes full of its own low-priority gang: that gang is evicted
    whole for it; in a queue that does not preempt within itself, it waits."""
    for preempts, evicted in ((True, True), (False, False)):
        pods = [
            *running("low", 4, "pool", on=["n0"], created=1, priority=10),
            in_queue(gang("high", 4, created=2), "pool", priority=1000),
        ]
        world = World(nodes(1), pods, Queues(QueueSpec("root.pool", guaranteed=cores(4), preempts_within=preempts)))
        note = message(world.ticket("high"))
        reclaim_ = world.admission.standing(p.AppKey(NS, "low"), pending=False).reclaim
        assert (reclaim_ is not None) == evicted, note
        if evicted:
            assert "evicting 1 lower-priority gang(s) of its queue root.pool" in note
            assert reclaim_ is not None and reclaim_.message == (
                "a gang of priority 1000 of its own queue root.pool, which preempts within itself, needs its room "
                "(this gang's priority is 10): evicting all its pods, the whole gang"
            )


def test_a_gang_never_preempts_one_of_its_own_priority() -> None:
    pods = [*running("old", 4, "pool", on=["n0"], created=1), in_queue(gang("new", 4, created=2), "pool")]
    world = World(nodes(1), pods, Queues(QueueSpec("root.pool", preempts_within=True)))
    assert isinstance(world.ticket("new"), Waiting)
    assert world.admission.standing(p.AppKey(NS, "old"), pending=False).reclaim is None
