"""Admission's decision as a pure function: plain snapshots in (nodes, what each pod takes, the
applications and queues), tickets and reclaims out. No store, no room, no callbacks: the decision
reads the snapshot alone, and trying a reclaim leaves the snapshot as it was."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace

from yuniplace.admission.decision import ARRIVAL_CAP_S, AdmissionRules, Memory, Reclaim, decide
from yuniplace.admission.room import RoomView
from yuniplace.admission.snapshot import App, Peer, Snapshot
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.gang import pods as p
from yuniplace.gang.fit import Constraints, Node, Room
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import GangSpec, Policy, Style, TaskGroup
from yuniplace.gang.topology import Domains, Level, Pin, Topology
from yuniplace.queues.model import QueueConfig, QueueSpec

NOW = 1_800_000_000.0
RULES = AdmissionRules()
NO_QUEUES = QueueConfig()


def nodes(count: int, cpu: int = 4) -> list[Node]:
    return [Node(f"n{i}", {}, (), {"cpu": cpu * 1000, "pods": 110_000}) for i in range(count)]


def gang(members: int, group_with: Sequence[str] = (), topology: Topology | None = None) -> GangSpec:
    """A gang of `members` pods of 1 cpu, asking for `topology` domains."""
    return GangSpec(
        (TaskGroup("workers", members, {"cpu": "1"}),),
        Policy(60, Style.SOFT),
        gang_group=tuple(group_with),
        topology=topology,
    )


def app(
    name: str,
    members: int,
    *,
    created: float,
    state: AppState = AppState.PENDING,
    queue: str = "default",
    held: int = 0,
    group_with: Sequence[str] = (),
    topology: Topology | None = None,
    domains: Domains | None = None,
    present: int = 0,
    arrived: tuple[float, float] = (0.0, 0.0),
) -> App:
    """An application of `members` pods of 1 cpu; `held` of them take room on nodes, `present` exist
    (gated) and take none yet; its reservation holds `domains`."""
    return App(
        p.AppKey("team", name),
        gang(members, group_with, topology),
        state,
        (created, 0, name),
        queue,
        holding={"workers": held},
        needing={"workers": present} if present else {},
        placeholders=0,
        backing_off=False,
        queued_since=None,
        held={"cpu": 1000 * held, "pods": 1000 * held} if held else {},
        running=state == AppState.RUNNING,
        domains=domains or Domains(),
        arrived=arrived,
    )


def snapshot(
    cluster: Sequence[Node],
    apps: Sequence[App],
    *,
    takes: Mapping[str, tuple[str, int]] = {},  # pod uid -> (node, cpu in cores)
    pods: Mapping[str, Sequence[str]] = {},  # application name -> its pods' uids
    config: QueueConfig = NO_QUEUES,
    peers: Mapping[p.AppKey, Peer] = {},
    competing: Sequence[Constraints] = (),
) -> Snapshot:
    used: dict[str, dict[str, int]] = {}
    for node, cores in takes.values():
        on = used.setdefault(node, {"cpu": 0, "pods": 0})
        on["cpu"] += cores * 1000
        on["pods"] += 1000
    free = {n.name: n.free(used.get(n.name, {})) for n in cluster}
    view = RoomView(
        cluster, free, {uid: (node, {"cpu": cores * 1000}) for uid, (node, cores) in takes.items()}, tuple(competing)
    )
    return Snapshot(
        now=NOW,
        config=config,
        apps={a.key: a for a in apps},
        refused={},
        room=view,
        empty=Room(cluster, {}),
        pods={p.AppKey("team", name): uids for name, uids in pods.items()},
        peers=peers,
    )


def key(name: str) -> p.AppKey:
    return p.AppKey("team", name)


def granted_last_cycle(name: str, ticket: Granted) -> Memory:
    """What admission remembers of the application `name` it granted `ticket` (to the attempt `app`
    makes: one with no originator)."""
    return Memory(granted=frozenset({key(name)}), tickets={key(name): ticket}, attempts={key(name): ""})


def test_gangs_that_fit_are_granted_and_the_first_that_does_not_is_the_head() -> None:
    seen = snapshot(nodes(2), [app("a", 4, created=1), app("b", 5, created=2), app("c", 2, created=3)])
    decided = decide(seen, RULES)
    assert decided.tickets[key("a")] == Granted()
    head = decided.tickets[key("b")]
    assert isinstance(head, Waiting) and "first in queue default" in head.message and head.times_out
    behind = decided.tickets[key("c")]  # 2 would fit in the 4 left, but the head claims them
    assert isinstance(behind, Waiting) and "position 2 in queue default, behind team/b" in behind.message
    assert decided.granted == {key("a")} and decided.waiting_by_queue == {"default": 2}


def test_the_same_snapshot_gets_the_same_decision() -> None:
    seen = snapshot(nodes(2), [app("a", 4, created=1), app("b", 3, created=2), app("c", 2, created=3)])
    assert decide(seen, RULES) == decide(seen, RULES)


def test_room_taken_on_nodes_and_reservations_in_flight_count_as_used() -> None:
    """3 of 8 cores run ordinary pods; `r` reserves 2 more (none placed yet): 3 are left for `a`."""
    reserving = app("r", 2, created=1, state=AppState.RESERVING)
    seen = snapshot(
        nodes(2), [reserving, app("a", 4, created=2)], takes={"x0": ("n0", 2), "x1": ("n1", 1)}, pods={"r": []}
    )
    assert isinstance(decide(seen, RULES).tickets[key("a")], Waiting)
    fewer = snapshot(nodes(2), [reserving, app("a", 3, created=2)], takes={"x0": ("n0", 2), "x1": ("n1", 1)})
    assert decide(fewer, RULES).tickets[key("a")] == Granted()


def test_granted_last_cycle_its_room_is_still_counted_until_it_reserves() -> None:
    seen = snapshot(nodes(1), [app("a", 3, created=1), app("b", 2, created=2)])
    decided = decide(seen, RULES, granted_last_cycle("a", Granted()))
    assert decided.tickets[key("a")] == Granted() and isinstance(decided.tickets[key("b")], Waiting)


def test_a_gang_group_waits_for_an_application_that_does_not_exist_yet() -> None:
    named = ["team/a", "team/later"]
    seen = snapshot(nodes(2), [app("a", 2, created=1, group_with=named)])
    waiting = decide(seen, RULES).tickets[key("a")]
    assert isinstance(waiting, Waiting) and "team/later" in waiting.message
    existing = snapshot(
        nodes(2), [app("a", 2, created=1, group_with=named)], peers={key("later"): Peer(True, tuple(named))}
    )
    assert decide(existing, RULES).tickets[key("a")] == Granted()


# -- reclaim ------------------------------------------------------------------------------------------------

QUEUES = QueueConfig(
    {
        q.path: q
        for q in (
            QueueSpec("root"),
            QueueSpec("root.a", guaranteed={"cpu": 4000}),
            QueueSpec("root.b", guaranteed={"cpu": 4000}),
        )
    }
)


def borrowed() -> tuple[list[App], dict[str, tuple[str, int]], dict[str, list[str]]]:
    """Queue a runs two gangs of 3 on 8 cores (2 beyond its guarantee of 4); b asks for its 4."""
    apps = [
        app("a-old", 3, created=1, state=AppState.RUNNING, queue="root.a", held=3),
        app("a-new", 3, created=2, state=AppState.RUNNING, queue="root.a", held=3),
        app("b-job", 4, created=3, queue="root.b"),
    ]
    takes = {f"a-old-{i}": ("n0", 1) for i in range(3)} | {f"a-new-{i}": ("n1", 1) for i in range(3)}
    pods = {"a-old": [f"a-old-{i}" for i in range(3)], "a-new": [f"a-new-{i}" for i in range(3)]}
    return apps, takes, pods


def test_reclaim_chooses_the_newest_borrowing_gang_whole_and_leaves_the_snapshot_as_it_was() -> None:
    apps, takes, pods = borrowed()
    seen = snapshot(nodes(2), apps, takes=takes, pods=pods, config=QUEUES)
    free_before = copy.deepcopy(dict(seen.room.free))
    decided = decide(seen, RULES)
    assert list(decided.reclaims) == [key("a-new")]
    assert decided.reclaims[key("a-new")].beneficiary == key("b-job")
    assert "evicting all its pods, the whole gang" in decided.reclaims[key("a-new")].message
    waiting = decided.tickets[key("b-job")]
    assert isinstance(waiting, Waiting) and "taking back room its queue root.b lent to root.a" in waiting.message
    assert dict(seen.room.free) == free_before  # the removals it tried were undone
    assert seen.free_room().free_of("n1") == {"cpu": 1000, "pods": 107_000}


def test_a_reclaim_under_way_takes_no_second_victim_until_its_gang_has_left() -> None:
    apps, takes, pods = borrowed()
    under_way = Memory(reclaiming={key("a-new"): Reclaim(key("b-job"), "taking back")})
    decided = decide(snapshot(nodes(2), apps, takes=takes, pods=pods, config=QUEUES), RULES, under_way)
    assert decided.reclaims == {} and list(decided.reclaiming) == [key("a-new")]
    waiting = decided.tickets[key("b-job")]
    assert isinstance(waiting, Waiting) and "room being freed for it: 1 gang(s) going" in waiting.message
    # Once its pods hold no room, the reclaim is over, and the room it freed is the waiting gang's.
    gone = [a for a in apps if a.key != key("a-new")]
    left = {uid: take for uid, take in takes.items() if not uid.startswith("a-new")}
    after = decide(snapshot(nodes(2), gone, takes=left, pods=pods, config=QUEUES), RULES, under_way)
    assert after.reclaiming == {} and after.tickets[key("b-job")] == Granted()


def test_a_gang_a_budget_kept_whole_is_spared_and_the_next_is_chosen() -> None:
    apps, takes, pods = borrowed()
    spared = Memory(spared=frozenset({key("a-new")}))
    decided = decide(snapshot(nodes(2), apps, takes=takes, pods=pods, config=QUEUES), RULES, spared)
    assert list(decided.reclaims) == [key("a-old")]


# -- topology domains -------------------------------------------------------------------------------------

RACK = "example.com/rack"
BLOCK = "example.com/block"
IN_A_RACK = Topology((Level(RACK, True),))


def racks(*cores: int, per_node: int = 2, blocks: int = 1) -> list[Node]:
    """Racks of nodes of `per_node` cores each, `cores` free per rack (a rack of 5 with 2 per node:
    nodes of 2, 2 and 1); racks are dealt into `blocks` blocks in turn."""
    found = []
    for index, total in enumerate(cores):
        labels = {RACK: f"r{index}", BLOCK: f"b{index % blocks}"}
        for node in range(-(-total // per_node)):
            cpu = min(per_node, total - node * per_node)
            found.append(Node(f"r{index}-n{node}", labels, (), {"cpu": cpu * 1000, "pods": 110_000}))
    return found


def domains_of(ticket: object) -> Domains:
    assert isinstance(ticket, Granted), ticket
    return ticket.domains


def test_a_gang_that_requires_a_rack_is_given_the_tightest_rack_that_holds_it_whole() -> None:
    seen = snapshot(racks(4, 8, 6, 5), [app("a", 5, created=1, topology=IN_A_RACK)])
    assert domains_of(decide(seen, RULES).tickets[key("a")]) == Domains((Pin(RACK, ("r3",), True),))


def test_a_gang_that_fits_in_no_one_rack_waits_and_says_how_much_the_largest_holds() -> None:
    seen = snapshot(
        racks(6, 3, 6),
        [app("a", 5, created=1, topology=IN_A_RACK), app("b", 5, created=2)],
        takes={"x0": ("r0-n0", 2), "x2": ("r2-n0", 2)},
    )
    decided = decide(seen, RULES)
    waiting = decided.tickets[key("a")]
    assert isinstance(waiting, Waiting) and waiting.times_out
    assert waiting.message.startswith(
        "waiting for free capacity: a needs 5 × (cpu 1) in one rack (example.com/rack); the largest free rack holds 4; "
        "first in queue default"
    )
    # Spread over racks, the same gang fits; the head claims only the rack that holds most of it.
    assert domains_of(decided.tickets[key("b")]) == Domains()


def test_a_gang_no_rack_could_ever_hold_waits_with_its_timeout_running() -> None:
    seen = snapshot(racks(4, 4), [app("a", 5, created=1, topology=IN_A_RACK)])
    waiting = decide(seen, RULES).tickets[key("a")]
    assert isinstance(waiting, Waiting) and waiting.times_out
    assert waiting.message == (
        "no single domain could ever hold the gang: a needs 5 × (cpu 1) in one rack (example.com/rack); "
        "the largest rack holds 4 when empty"
    )


def test_a_gang_larger_than_the_cluster_that_requires_a_rack_waits_rather_than_be_admitted_unpinned() -> None:
    waiting = decide(snapshot(racks(4, 4), [app("a", 10, created=1, topology=IN_A_RACK)]), RULES).tickets[key("a")]
    assert isinstance(waiting, Waiting) and waiting.times_out
    assert waiting.message == (
        "the gang needs more than all matching nodes hold (a/workers: 8 of 10 pods of (cpu 1) fit), "
        "and it requires one topology domain: waiting for nodes to be added"
    )


def test_a_preferred_rack_spreads_over_the_fewest_racks_only_when_no_rack_holds_it() -> None:
    prefers = Topology((Level(RACK, False),))
    one = snapshot(racks(4, 3, 6), [app("a", 5, created=1, topology=prefers)])
    assert domains_of(decide(one, RULES).tickets[key("a")]) == Domains((Pin(RACK, ("r2",), False),))
    spread = snapshot(racks(4, 2, 3, 1), [app("a", 6, created=1, topology=prefers)])
    assert domains_of(decide(spread, RULES).tickets[key("a")]) == Domains((Pin(RACK, ("r0", "r2"), False),))


def test_a_rack_is_chosen_within_the_block_a_gang_requires() -> None:
    """Block b0 holds racks r0 (3) and r2 (2); b1 holds r1 (4) and r3 (4). A gang of 5 that requires a
    block and prefers a rack: b0 holds it only spread, b1 holds it in neither rack alone either, so the
    tightest block; one of 4 fits whole in a rack of b1."""
    block_then_rack = Topology((Level(BLOCK, True), Level(RACK, False)))
    nodes = racks(3, 4, 2, 4, blocks=2)
    five = decide(snapshot(nodes, [app("a", 5, created=1, topology=block_then_rack)]), RULES)
    assert domains_of(five.tickets[key("a")]) == Domains((Pin(BLOCK, ("b0",), True), Pin(RACK, ("r0", "r2"), False)))
    four = decide(snapshot(nodes, [app("a", 4, created=1, topology=block_then_rack)]), RULES)
    assert domains_of(four.tickets[key("a")]) == Domains((Pin(BLOCK, ("b1",), True), Pin(RACK, ("r1",), False)))


def test_a_task_group_may_require_a_rack_of_its_own_within_the_gangs_block() -> None:
    spec = GangSpec(
        (
            TaskGroup("launcher", 1, {"cpu": "2"}),
            TaskGroup("workers", 3, {"cpu": "1"}, topology=IN_A_RACK),
        ),
        Policy(60, Style.SOFT),
        topology=Topology((Level(BLOCK, True),)),
    )
    job = replace(app("a", 4, created=1), spec=spec)
    decided = decide(snapshot(racks(2, 4, 3, 2, blocks=2), [job]), RULES)
    assert domains_of(decided.tickets[key("a")]) == Domains(
        (Pin(BLOCK, ("b0",), True),), (("workers", (Pin(RACK, ("r2",), True),)),)
    )


def test_a_reservation_in_flight_takes_room_in_its_own_rack_only() -> None:
    """r0 and r1 hold 4 each; `r` reserves 3 in r1 (none placed yet): a gang of 4 gets r0 whole."""
    reserving = app("r", 3, created=1, state=AppState.RESERVING, domains=Domains((Pin(RACK, ("r1",), True),)))
    seen = snapshot(racks(4, 4), [reserving, app("a", 4, created=2, topology=IN_A_RACK)], pods={"r": []})
    assert domains_of(decide(seen, RULES).tickets[key("a")]) == Domains((Pin(RACK, ("r0",), True),))
    elsewhere = replace(reserving, domains=Domains((Pin(RACK, ("r0",), True),)))
    seen = snapshot(racks(4, 4), [elsewhere, app("a", 4, created=2, topology=IN_A_RACK)], pods={"r": []})
    assert domains_of(decide(seen, RULES).tickets[key("a")]) == Domains((Pin(RACK, ("r1",), True),))


def test_granted_last_cycle_its_room_is_counted_in_the_rack_its_ticket_chose() -> None:
    granted = Granted(domains=Domains((Pin(RACK, ("r0",), True),)))
    memory = granted_last_cycle("a", granted)
    seen = snapshot(
        racks(4, 4), [app("a", 4, created=1, topology=IN_A_RACK), app("b", 4, created=2, topology=IN_A_RACK)]
    )
    decided = decide(seen, RULES, memory)
    assert decided.tickets[key("a")] == granted
    assert domains_of(decided.tickets[key("b")]) == Domains((Pin(RACK, ("r1",), True),))


def test_a_waiting_head_that_requires_a_rack_claims_only_the_rack_closest_to_holding_it() -> None:
    """Racks of 4 with 3 and 2 free: the head claims the 3 of r0, and a gang of 2 gets r1's."""
    seen = snapshot(
        racks(4, 4),
        [app("head", 4, created=1, topology=IN_A_RACK), app("small", 2, created=2)],
        takes={"x0": ("r0-n0", 1), "x1": ("r1-n0", 2)},
    )
    decided = decide(seen, RULES)
    assert isinstance(decided.tickets[key("head")], Waiting)
    assert decided.tickets[key("small")] == Granted()  # backfills the rack the head has no use for


LENDING = QueueConfig(
    {
        q.path: q
        for q in (
            QueueSpec("root"),
            QueueSpec("root.a"),
            QueueSpec("root.b", guaranteed={"cpu": 8000}),
        )
    }
)


def test_reclaim_for_a_gang_that_requires_a_rack_frees_one_rack_not_gangs_spread_over_racks() -> None:
    """Queue a borrows all it runs: g1 (oldest) and g3 (newest) in rack r0, g2 in r1 beside an ordinary
    pod. b's gang of 4 needs one rack: taking back the newest first would take g3, g2 and g1; freeing
    one rack takes g3 and g1 from r0, and leaves g2 running."""
    apps = [
        app("g1", 2, created=1, state=AppState.RUNNING, queue="root.a", held=2),
        app("g2", 2, created=2, state=AppState.RUNNING, queue="root.a", held=2),
        app("g3", 2, created=3, state=AppState.RUNNING, queue="root.a", held=2),
        app("b-job", 4, created=4, queue="root.b", topology=IN_A_RACK),
    ]
    takes = {
        "g1-0": ("r0-n0", 1),
        "g1-1": ("r0-n0", 1),
        "g3-0": ("r0-n1", 1),
        "g3-1": ("r0-n1", 1),
        "g2-0": ("r1-n0", 1),
        "g2-1": ("r1-n0", 1),
        "other": ("r1-n1", 2),
    }
    pods = {name: [uid for uid in takes if uid.startswith(name)] for name in ("g1", "g2", "g3")}
    decided = decide(snapshot(racks(4, 4), apps, takes=takes, pods=pods, config=LENDING), RULES)
    assert set(decided.reclaims) == {key("g1"), key("g3")}
    assert {r.within for r in decided.reclaims.values()} == {Pin(RACK, ("r0",), True)}
    waiting = decided.tickets[key("b-job")]
    assert isinstance(waiting, Waiting) and "2 gang(s)" in waiting.message
    # The next cycles claim that rack for it while its gangs leave, and then it is given that rack.
    going = Memory(reclaiming=decided.reclaims)
    left = {uid: take for uid, take in takes.items() if uid[:2] not in ("g1", "g3")}
    rest = [a for a in apps if a.key not in decided.reclaims]
    after = decide(snapshot(racks(4, 4), rest, takes=left, pods=pods, config=LENDING), RULES, going)
    assert domains_of(after.tickets[key("b-job")]) == Domains((Pin(RACK, ("r0",), True),))


def test_no_victim_is_taken_when_no_one_rack_would_then_hold_the_gang() -> None:
    """Each rack keeps an ordinary pod of 1: however many gangs went, no rack would hold 4."""
    apps = [
        app("g1", 2, created=1, state=AppState.RUNNING, queue="root.a", held=2),
        app("g2", 2, created=2, state=AppState.RUNNING, queue="root.a", held=2),
        app("b-job", 4, created=4, queue="root.b", topology=IN_A_RACK),
    ]
    takes = {
        "g1-0": ("r0-n0", 1),
        "g1-1": ("r0-n0", 1),
        "g2-0": ("r1-n0", 1),
        "g2-1": ("r1-n0", 1),
        "o0": ("r0-n1", 1),
        "o1": ("r1-n1", 1),
    }
    pods = {"g1": ["g1-0", "g1-1"], "g2": ["g2-0", "g2-1"]}
    decided = decide(snapshot(racks(4, 4), apps, takes=takes, pods=pods, config=LENDING), RULES)
    assert decided.reclaims == {}
    assert isinstance(decided.tickets[key("b-job")], Waiting)


# -- the direct start ---------------------------------------------------------------------------------


def test_a_gang_whose_members_all_exist_and_fit_gets_a_seat_for_each_member() -> None:
    seen = snapshot(nodes(2), [app("a", 6, created=1, present=6), app("b", 2, created=2, present=2)])
    decided = decide(seen, RULES)
    a, b = decided.tickets[key("a")], decided.tickets[key("b")]
    assert isinstance(a, Granted) and a.seats_of("workers") == ("n0",) * 4 + ("n1",) * 2
    assert isinstance(b, Granted) and b.seats_of("workers") == ("n1", "n1")  # the room `a` took is not given twice


def test_placeholders_when_members_are_missing_do_not_fit_or_the_rules_say_always() -> None:
    spread = snapshot(nodes(2), [app("spark", 3, created=1)])  # only its driver: executors come later
    assert decide(spread, RULES).tickets[key("spark")] == Granted()
    always = snapshot(nodes(2), [app("a", 3, created=1, present=3)])
    assert decide(always, AdmissionRules(direct_start=False)).tickets[key("a")] == Granted()
    # An ordinary pod waiting to be scheduled could take a seat before its member is nominated to it.
    contended = snapshot(nodes(2), [app("a", 3, created=1, present=3)], competing=[Constraints()])
    assert decide(contended, RULES).tickets[key("a")] == Granted()
    # One that may only go elsewhere (its own pool) takes no seat of it.
    elsewhere = snapshot(
        nodes(2), [app("a", 3, created=1, present=3)], competing=[Constraints(node_selector={"pool": "other"})]
    )
    ticket = decide(elsewhere, RULES).tickets[key("a")]
    assert isinstance(ticket, Granted) and len(ticket.seats_of("workers")) == 3


def test_a_gang_whose_members_are_being_created_is_decided_once_all_exist_or_they_stop_coming() -> None:
    wait = RULES.direct_start_wait_s
    arriving = app("a", 4, created=1, arrived=(NOW - 5, NOW - 0.2), present=3)  # its latest pod came just now
    decided = decide(snapshot(nodes(2), [arriving]), RULES)
    assert key("a") not in decided.tickets and decided.next_cycle_at == NOW - 0.2 + wait
    stopped = app("a", 4, created=1, arrived=(NOW - 5, NOW - wait), present=3)
    assert decide(snapshot(nodes(2), [stopped]), RULES).tickets[key("a")] == Granted()  # placeholders for the rest
    trickling = app("a", 4, created=1, arrived=(NOW - ARRIVAL_CAP_S, NOW - 0.1), present=3)
    assert decide(snapshot(nodes(2), [trickling]), RULES).tickets[key("a")] == Granted()
    complete = app("a", 4, created=1, arrived=(NOW - 5, NOW - 0.2), present=4)
    ticket = decide(snapshot(nodes(2), [complete]), RULES).tickets[key("a")]
    assert isinstance(ticket, Granted) and len(ticket.seats_of("workers")) == 4


def test_a_native_gang_whose_members_are_being_created_waits_only_a_moment_for_the_next() -> None:
    """A native gang's admission lifts no gate before all its members exist, so a burst of them is
    admitted whole (nothing to hold) once none has come for native_arrival_wait_s; one whose members
    keep it waiting longer is admitted then, to hold their room with placeholders. The whole wait even
    with direct starts off (they are for YuniKorn's gangs)."""
    wait = RULES.native_arrival_wait_s
    assert wait < RULES.direct_start_wait_s

    def native(arrived: tuple[float, float], present: int) -> App:
        seen = app("n", 4, created=1, arrived=arrived, present=present)
        return replace(seen, spec=replace(seen.spec, native=True))

    for rules in (RULES, replace(RULES, direct_start=False)):
        decided = decide(snapshot(nodes(2), [native((NOW - 0.05, NOW - 0.05), 1)]), rules)
        assert key("n") not in decided.tickets and decided.next_cycle_at == NOW - 0.05 + wait
        assert decide(snapshot(nodes(2), [native((NOW - 0.3, NOW - wait), 2)]), rules).tickets[key("n")] == Granted()
        assert isinstance(decide(snapshot(nodes(2), [native((NOW - 0.05, NOW), 4)]), rules).tickets[key("n")], Granted)


def test_a_gang_whose_owner_makes_all_its_pods_at_once_waits_for_a_group_with_none_yet() -> None:
    """A Ray head seen before its workers: KubeRay makes them in the same pass, so the gang waits for them
    (and its placeholders, or seats, are then sized by them); a Spark driver's executors come only once
    it runs, so a gang like it is decided at once."""
    head_first = GangSpec(
        (TaskGroup("head", 1, {"cpu": "1"}), TaskGroup("workers", 2, {"cpu": "1"})), Policy(60, Style.SOFT)
    )
    seen = replace(app("ray", 3, created=1, arrived=(NOW - 0.2, NOW - 0.2)), spec=head_first, needing={"head": 1})
    ray = replace(seen, made_together=True)
    assert key("ray") not in decide(snapshot(nodes(2), [ray]), RULES).tickets
    assert decide(snapshot(nodes(2), [seen]), RULES).tickets[key("ray")] == Granted()


def test_seats_granted_last_cycle_keep_their_room_on_their_nodes() -> None:
    """`a` was seated on n1 (not where first fit would put it now): `b` gets n0, and nothing on n1."""
    seated = Granted(seats=(("workers", ("n1", "n1", "n1", "n1")),))
    seen = snapshot(nodes(2), [app("a", 4, created=1, present=4), app("b", 4, created=2, present=4)])
    decided = decide(seen, RULES, granted_last_cycle("a", seated))
    assert decided.tickets[key("a")] == seated
    b = decided.tickets[key("b")]
    assert isinstance(b, Granted) and b.seats_of("workers") == ("n0",) * 4


def test_a_gang_that_starts_directly_is_seated_in_the_tightest_rack_that_holds_it() -> None:
    """Racks of 4, 6 and 5 free: all 5 members of a gang that requires a rack exist, and get seats in
    r2 alone; kube-scheduler's first fit would have seated them in r0 and r1."""
    seen = snapshot(racks(4, 6, 5), [app("a", 5, created=1, topology=IN_A_RACK, present=5)])
    ticket = decide(seen, RULES).tickets[key("a")]
    assert isinstance(ticket, Granted) and ticket.domains == Domains((Pin(RACK, ("r2",), True),))
    assert set(ticket.seats_of("workers")) == {"r2-n0", "r2-n1", "r2-n2"} and len(ticket.seats_of("workers")) == 5


def test_a_gang_that_would_start_directly_but_fits_no_rack_waits() -> None:
    seen = snapshot(racks(4, 4), [app("a", 5, created=1, topology=IN_A_RACK, present=5)], takes={"x": ("r0-n0", 1)})
    assert isinstance(decide(seen, RULES).tickets[key("a")], Waiting)
