"""Kubernetes' own gangs that yuniplace holds: the webhook gates them where native gangs are held,
their queue admits them like any gang (or lets them go, where no queue holds them), their gates come
off together, members yet to come are reserved, and a timeout follows the gang's style."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests import builders
from tests.fakeapi import FakeApi
from tests.unit import test_gang_admission as gang_admission
from tests.unit.test_admission import patch_of, review
from tests.unit.test_queue_admission import NOW, Queues, cores, nodes
from yuniplace.admission.cycle import Admission
from yuniplace.admission.decision import AdmissionRules
from yuniplace.admission.tickets import Granted, LeftToKubeScheduler, Ticket, Waiting
from yuniplace.controller.controller import Controller
from yuniplace.controller.lifecycle import plan_application
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.placeholders import placeholder_name
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import Limits, OnTimeout
from yuniplace.kube import workloadapi
from yuniplace.queues.model import QueueSpec
from yuniplace.runtime.events import Reason
from yuniplace.runtime.store import PodStore
from yuniplace.webhook.admission import mutate

NS = gang_admission.NS


def pod_group(name: str, min_count: int, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A 1.37 PodGroup as the cluster serves it, read as yuniplace reads it."""
    served = {
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec},
    }
    return workloadapi.groups_described(served)[0].as_object()


def native(
    group: str,
    index: int,
    *,
    gated: bool = True,
    cpu: str = "1",
    queue: str | None = None,
    priority: int = 0,
    node: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A member of native pod group `group`, held by yuniplace's gate unless told otherwise."""
    return builders.pod(
        f"{group}-{index}",
        namespace=NS,
        uid=f"uid-{group}-{index}",
        rv="1",
        created=f"2026-01-01T00:00:{index:02d}Z",
        labels={"queue": queue} if queue else {},
        annotations=annotations or {},
        requests={"cpu": cpu},
        gates=[keys.GATE] if gated else [],
        node=node,
        phase="Running" if node else "Pending",
        schedulingGroup={"podGroupName": group},
        priority=priority,
    )


def application(pods: list[dict[str, Any]], group: dict[str, Any] | None) -> Application:
    return Application.of(p.AppKey(NS, pods[0]["spec"]["schedulingGroup"]["podGroupName"]), pods, group)


# -- the webhook --------------------------------------------------------------------------------------


def test_the_webhook_for_native_gangs_gates_their_pods_and_the_other_one_does_not() -> None:
    pod = native("trainer", 0, gated=False)
    held = mutate(review(pod), hold_native=True)
    assert patch_of(held) == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": keys.GATE}]}]
    assert "warnings" not in held["response"]
    assert patch_of(mutate(review(pod))) == []  # a namespace that opts out: kube-scheduler's alone


def test_a_member_of_a_gang_its_queue_admitted_is_let_through_ungated() -> None:
    """Where the webhook serves in the controller's process, it knows the gang's admission: a member
    created after it is not gated (the gang plugin holds it with the rest); one of a gang not admitted is."""
    pod = native("trainer", 3, gated=False)
    asked: list[str] = []

    def admitted(member: dict[str, Any]) -> bool:
        asked.append(member["metadata"]["name"])
        return True

    assert patch_of(mutate(review(pod), hold_native=True, admitted=admitted)) == []
    assert asked == ["trainer-3"]
    assert patch_of(mutate(review(pod), hold_native=True, admitted=lambda _pod: False)) != []
    assert patch_of(mutate(review(native("other", 0, gated=False)), admitted=admitted)) == []  # opted out: not asked
    assert asked == ["trainer-3"]


# -- reading the gang ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on_group", "on_pod", "rule", "timeout_s"),
    [
        (None, None, OnTimeout.RETRY, 900),  # Soft by default: its admission is given back, tried again later
        ("placeholderTimeoutInSeconds=30 gangSchedulingStyle=Hard", None, OnTimeout.HARD, 30),
        ("placeholderTimeoutInSeconds=30", "gangSchedulingStyle=Hard", OnTimeout.HARD, 30),  # the pod's own wins
        ("gangSchedulingStyle=Hard", "gangSchedulingStyle=Soft", OnTimeout.RETRY, 900),
    ],
)
def test_its_timeout_and_style_are_read_from_its_group_then_its_pod(
    on_group: str | None, on_pod: str | None, rule: OnTimeout, timeout_s: int
) -> None:
    group = pod_group("trainer", 2, {keys.SCHEDULING_POLICY_PARAMETERS: on_group} if on_group else None)
    notes = {keys.SCHEDULING_POLICY_PARAMETERS: on_pod} if on_pod else None
    app = application([native("trainer", i, annotations=notes) for i in range(2)], group)
    assert app.spec is not None and app.spec.native
    assert (app.spec.policy.on_timeout, app.spec.policy.timeout_s) == (rule, timeout_s)
    assert app.spec.starts_when_all_exist == "kube-scheduler's gang plugin"


def test_a_bad_style_on_its_group_is_named_as_the_groups() -> None:
    group = pod_group("trainer", 2, {keys.SCHEDULING_POLICY_PARAMETERS: "gangSchedulingStyle=Firm"})
    app = application([native("trainer", 0)], group)
    assert app.spec is None
    assert 'PodGroup trainer: yunikorn.apache.org/schedulingPolicyParameters.gangSchedulingStyle: "Firm"' in str(
        app.problem
    )


def test_its_groups_priority_is_the_gangs_and_disruption_mode_all_is_read() -> None:
    group = pod_group("trainer", 2, priority=500, disruptionMode={"all": {}})
    app = application([native("trainer", i, priority=7) for i in range(2)], group)
    assert app.priority == 500
    assert app.spec is not None and app.spec.disrupted_by_kube_scheduler
    plain = application([native("trainer", i, priority=7) for i in range(2)], pod_group("trainer", 2))
    assert plain.priority == 7 and plain.spec is not None and not plain.spec.disrupted_by_kube_scheduler


def test_a_gang_never_gated_is_kube_schedulers_alone_and_one_held_is_yuniplaces() -> None:
    group = pod_group("trainer", 2)
    assert application([native("trainer", i, gated=False) for i in range(2)], group).left_to_kube_scheduler
    assert not application([native("trainer", i) for i in range(2)], group).left_to_kube_scheduler
    started = [
        native("trainer", 0, gated=False, annotations={keys.STATE: "Running"}),
        native("trainer", 1, gated=False),
    ]
    assert not application(started, group).left_to_kube_scheduler  # held once: followed to its end


def test_held_members_wait_for_a_group_not_seen_yet() -> None:
    held = application([native("trainer", 0)], None)
    assert held.originator is None and held.problem is None
    told = application([native("trainer", 0, gated=False)], None)
    assert told.problem is not None and "names no pod group" in str(told.problem)


# -- admission ----------------------------------------------------------------------------------------


class World(gang_admission.World):
    """Admission at NOW, with the native pod groups given and the queues given."""

    def __init__(self, pods: list[dict[str, Any]], groups: dict[str, dict[str, Any]], queues: Any) -> None:
        self.store = PodStore(clock=lambda: NOW)
        self.woken: list[p.AppKey] = []
        self.pod_group_of = lambda key: groups.get(key.app_id)
        self.admission = Admission(
            self.store,
            Limits(),
            self.pod_group_of,
            queues,
            self.woken.append,
            AdmissionRules(direct_start_wait_s=0.0),
            lambda: NOW,
        )
        self.room = self.admission.room
        self.room.nodes_listed(nodes(4))
        self.room.pods_listed(pods)
        self.store.replace(pods)


def test_no_queue_configuration_lets_a_held_native_gang_go_to_kube_scheduler() -> None:
    world = World(
        [native("trainer", i) for i in range(2)], {"trainer": pod_group("trainer", 2)}, gang_admission.NO_QUEUES
    )
    ticket = world.ticket("trainer")
    assert isinstance(ticket, LeftToKubeScheduler) and "no queue configuration" in ticket.message


def test_a_queue_that_opts_out_lets_its_native_gangs_go() -> None:
    queues = Queues(QueueSpec("root.ml", native_gangs=False))
    world = World([native("trainer", i, queue="ml") for i in range(2)], {"trainer": pod_group("trainer", 2)}, queues)
    ticket = world.ticket("trainer")
    assert isinstance(ticket, LeftToKubeScheduler) and "queue root.ml leaves native gangs" in ticket.message


def test_native_and_yunikorn_gangs_share_a_queue_by_priority_then_arrival() -> None:
    """Queue root.ml holds 4 cpu: one gang of 4 at a time. A native gang of low priority came first, a
    YuniKorn gang of high priority second, a native gang whose PodGroup says high priority third."""
    queues = Queues(QueueSpec("root.ml", max=cores(4)))
    low = [native("low", i, queue="ml") for i in range(4)]
    yunikorn = gang_admission.gang("yk", 4, created=10, queue="ml")
    yunikorn["spec"]["priority"] = 100
    high = [native("high", i, queue="ml") for i in range(4)]
    for pod in high:
        pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:20Z"
    groups = {"low": pod_group("low", 4), "high": pod_group("high", 4, priority=100)}
    world = World([*low, yunikorn, *high], groups, queues)
    order = []
    for gone in ([yunikorn], high, low):
        tickets: dict[str, Ticket] = {app: world.ticket(app) for app in ("low", "yk", "high") if app not in order}
        granted = [app for app, ticket in tickets.items() if isinstance(ticket, Granted)]
        assert len(granted) == 1 and all(isinstance(t, Waiting) for a, t in tickets.items() if a not in granted), (
            tickets
        )
        order += granted
        for pod in gone:  # it ran and ended
            world.store.delete(pod)
            world.room.pod_event("DELETED", pod)
        world.admission.capacity_changed()
    assert order == ["yk", "high", "low"]


# -- the plan -----------------------------------------------------------------------------------------


def plan_of(app: Application, ticket: Ticket | None, now: float = NOW) -> Any:
    return plan_application(app, now, ticket=ticket)


def test_admitted_whole_its_gates_come_off_together_with_nothing_steered() -> None:
    app = application([native("trainer", i) for i in range(3)], pod_group("trainer", 3))
    plan = plan_of(app, Granted(seats=((app.spec.groups[0].name, ("n0", "n1", "n2")),)))  # type: ignore[union-attr]
    assert sorted(p.name(m) for m in plan.ungate) == ["trainer-0", "trainer-1", "trainer-2"]
    assert not plan.swaps and not plan.create and not plan.pins
    assert plan.state == AppState.RESERVED
    starting = [e.note for e in plan.events if e.reason == Reason.GANG_STARTING]
    assert starting and "kube-scheduler's gang plugin binds them all or none" in starting[0]


@pytest.mark.parametrize("ticket", [LeftToKubeScheduler("no queue configuration holds it"), None])
def test_one_its_queue_does_not_hold_goes_with_no_record(ticket: LeftToKubeScheduler | None) -> None:
    app = application([native("trainer", i) for i in range(2)], pod_group("trainer", 2))
    plan = plan_of(app, ticket)
    assert sorted(p.name(m) for m in plan.ungate) == ["trainer-0", "trainer-1"]
    assert plan.transition is None and keys.STATE not in plan.annotate and not plan.create
    assert [e.reason for e in plan.events] == [Reason.NATIVE_GANG]


def test_admitted_before_all_its_members_exist_its_placeholders_hold_the_whole_gangs_room() -> None:
    """Its group says 3, 2 pods exist: admitted from what its group declares, but its gates stay on.
    kube-scheduler's gang plugin would hold the two without room until the third exists, so a flood of
    other pods could take it: placeholders for all 3 hold it instead, as for a YuniKorn gang."""
    app = application([native("launcher", i, cpu="2") for i in range(2)], pod_group("launcher", 3))
    plan = plan_of(app, Granted())
    assert not plan.ungate and not plan.swaps
    assert len(plan.create) == 3 and all(p.is_placeholder(ph) for ph in plan.create)
    assert plan.state == AppState.RESERVING
    [creating] = [e.note for e in plan.events if e.reason == Reason.CREATING_PLACEHOLDERS]
    assert "2 of its 3 pods exist: they hold the whole gang's room until the rest come" in creating
    assert not [e for e in plan.events if e.reason == Reason.GANG_STARTING]


def test_an_attempt_after_one_that_let_its_pods_go_lifts_the_rest_with_nothing_held() -> None:
    """Its first attempt was admitted whole and let its pods go; out of time (Soft), it tries again with
    one of them gone since. Their room cannot be held for pods the gang plugin already has, and
    placeholders would only stand in their way: the gate of the one made since comes off too."""
    record = {
        keys.STATE: "Pending",
        keys.RETRY_AFTER: p.format_time(NOW - 1),
        keys.ATTEMPTS: "1",
        keys.RESERVATION_STARTED: p.format_time(NOW - 100),
    }
    members = [native("launcher", 0, gated=False, annotations=record), native("launcher", 2)]
    plan = plan_of(application(members, pod_group("launcher", 3)), Granted())
    assert [p.name(m) for m in plan.ungate] == ["launcher-2"] and not plan.create
    assert plan.state == AppState.RESERVED


def native_placeholders(app: Application, count: int) -> list[dict[str, Any]]:
    """The gang's placeholders, placed one a node."""
    group = app.spec.groups[0].name  # type: ignore[union-attr]
    return [
        builders.pod(
            placeholder_name(app.key.app_id, group, i),
            namespace=NS,
            uid=f"ph-{i}",
            labels={keys.PLACEHOLDER: "true", keys.PLACEHOLDER_APP: app.key.app_id},
            annotations={keys.PLACEHOLDER_APP: app.key.app_id, keys.PLACEHOLDER_GROUP: group},
            requests={"cpu": "2"},
            node=f"n{i}",
            phase="Running",
        )
        for i in range(count)
    ]


def reserving_record() -> dict[str, str]:
    at = p.format_time(NOW)
    return {keys.STATE: "Reserved", keys.RESERVATION_STARTED: at, keys.FIRST_ALLOCATED: at}


def test_reserved_with_a_member_still_to_come_its_members_stay_gated_on_their_placeholders() -> None:
    """Its 3 placeholders are placed, 2 of its pods exist: nothing moves until the third comes."""
    members = [native("launcher", 0, cpu="2", annotations=reserving_record()), native("launcher", 1, cpu="2")]
    app = application(members, pod_group("launcher", 3))
    app = application([*members, *native_placeholders(app, 3)], pod_group("launcher", 3))
    plan = plan_of(app, None, NOW + 5)
    assert not plan.ungate and not plan.swaps and not plan.delete and not plan.create


def test_a_placeholder_lost_while_it_waits_for_a_member_is_made_again_before_anything_starts() -> None:
    """Its 3 placeholders were placed, 2 of its pods exist, and one placeholder is gone (its node lost):
    the gang reserves again at once, with its members still gated, rather than when the third comes."""
    members = [native("launcher", 0, cpu="2", annotations=reserving_record()), native("launcher", 1, cpu="2")]
    app = application(members, pod_group("launcher", 3))
    app = application([*members, *native_placeholders(app, 3)[:2]], pod_group("launcher", 3))
    plan = plan_of(app, None, NOW + 5)
    assert plan.state == AppState.RESERVING and not plan.ungate and not plan.swaps
    [creating] = [e.note for e in plan.events if e.reason == Reason.CREATING_PLACEHOLDERS]
    assert "no longer hold what its members ask" in creating and " 2/3 " in creating


def test_every_placeholder_lost_while_it_waits_it_reserves_again_and_lifts_no_gate() -> None:
    """Both nodes of its placeholders gone: no placeholder is left, and its pods, still gated, are not
    let go to the gang plugin as a gang admitted whole would be. It reserves its whole room again."""
    members = [native("launcher", 0, cpu="2", annotations=reserving_record()), native("launcher", 1, cpu="2")]
    plan = plan_of(application(members, pod_group("launcher", 3)), None, NOW + 5)
    assert plan.state == AppState.RESERVING and not plan.ungate and not plan.swaps
    [creating] = [e.note for e in plan.events if e.reason == Reason.CREATING_PLACEHOLDERS]
    assert " 0/3 " in creating


def test_its_last_member_come_every_member_takes_a_placeholders_place() -> None:
    """The third comes (gated by the webhook, since placeholders hold its gang's room): each of the three
    is swapped into a placeholder's node, for the gang plugin to bind them all or none."""
    members = [native("launcher", i, cpu="2", annotations=reserving_record() if i == 0 else None) for i in range(3)]
    app = application(members, pod_group("launcher", 3))
    app = application([*members, *native_placeholders(app, 3)], pod_group("launcher", 3))
    plan = plan_of(app, None, NOW + 5)
    assert sorted(p.name(s.member) for s in plan.swaps) == ["launcher-0", "launcher-1", "launcher-2"]
    assert sorted(s.node for s in plan.swaps) == ["n0", "n1", "n2"]


def test_the_webhook_gates_a_member_of_a_native_gang_its_placeholders_hold() -> None:
    """Admitted and reserved with placeholders (2 of 3 were there): the third is gated by the webhook,
    to take a placeholder's place; once the placeholders are gone, a member comes through ungated."""
    controller = Controller(FakeApi(), admission=False)  # type: ignore[arg-type]
    try:
        members = [native("launcher", 0, annotations=reserving_record()), native("launcher", 1)]
        app = application(members, pod_group("launcher", 3))
        placeholders = native_placeholders(app, 3)
        controller.store.replace([*members, *placeholders])
        joining = native("launcher", 2, gated=False)
        assert not controller.admits_native(joining)
        for placeholder in placeholders:
            controller.store.delete(placeholder)
        assert controller.admits_native(joining)
    finally:
        controller.close()


def admitted_record(started: float = NOW) -> dict[str, str]:
    at = p.format_time(started)
    return {keys.STATE: "Reserved", keys.RESERVATION_STARTED: at, keys.FIRST_ALLOCATED: at}


def test_a_member_gated_after_its_gang_was_admitted_goes_at_once() -> None:
    """The webhook that gated the third member did not know its gang was admitted: it goes too."""
    members = [
        native("launcher", 0, gated=False, annotations=admitted_record()),
        native("launcher", 1, gated=False),
        native("launcher", 2),
    ]
    plan = plan_of(application(members, pod_group("launcher", 3)), None, NOW + 5)
    assert [p.name(m) for m in plan.ungate] == ["launcher-2"] and not plan.create and plan.events == []


@pytest.mark.parametrize(("style", "state"), [("Soft", AppState.PENDING), ("Hard", AppState.FAILED)])
def test_admitted_and_still_missing_a_member_at_its_timeout_it_follows_its_style(style: str, state: AppState) -> None:
    """Admitted for 3, 2 exist (ungated, held by the gang plugin); 60 s later the third has not come:
    Soft gives its room back and tries again after a backoff (what comes next is gated again), Hard fails
    the gang. None of its members is ever bound in part."""
    policy = {keys.SCHEDULING_POLICY_PARAMETERS: f"placeholderTimeoutInSeconds=60 gangSchedulingStyle={style}"}
    members = [native("launcher", 0, gated=False, annotations=admitted_record()), native("launcher", 1, gated=False)]
    plan = plan_of(application(members, pod_group("launcher", 3, policy)), None, NOW + 61)
    assert plan.state == state and not plan.ungate and not plan.create
    if state == AppState.FAILED:
        assert sorted(p.name(f.pod) for f in plan.fail) == ["launcher-0", "launcher-1"]
    else:
        assert plan.annotate.get(keys.RETRY_AFTER) is not None and plan.fail == []


@pytest.mark.parametrize(("style", "state"), [("Soft", AppState.PENDING), ("Hard", AppState.FAILED)])
def test_members_still_missing_at_its_timeout_follow_its_style(style: str, state: AppState) -> None:
    """Reserved for 3, 2 exist; 60 s later the third has not come: Soft gives the room back and tries
    again after a backoff, Hard fails the gang. Neither lets a member go."""
    group = pod_group(
        "launcher",
        3,
        {keys.SCHEDULING_POLICY_PARAMETERS: f"placeholderTimeoutInSeconds=60 gangSchedulingStyle={style}"},
    )
    started = p.format_time(NOW)
    record = {keys.STATE: "Reserved", keys.RESERVATION_STARTED: started, keys.FIRST_ALLOCATED: started}
    members = [native("launcher", 0, annotations=record), native("launcher", 1)]
    app = application(members, group)
    placeholders = [
        builders.pod(
            f"tg-launcher-{app.spec.groups[0].name}-{i}",  # type: ignore[union-attr]
            namespace=NS,
            uid=f"ph-{i}",
            labels={keys.PLACEHOLDER: "true", keys.PLACEHOLDER_APP: "launcher"},
            annotations={keys.PLACEHOLDER_GROUP: app.spec.groups[0].name},  # type: ignore[union-attr]
            requests={"cpu": "1"},
            node=f"n{i}",
            phase="Running",
        )
        for i in range(3)
    ]
    app = application([*members, *placeholders], group)
    plan = plan_of(app, None, NOW + 61)
    assert plan.state == state
    assert not plan.ungate and not plan.swaps
    assert len(plan.delete) == 3  # its placeholders go either way
    if state == AppState.FAILED:
        assert sorted(p.name(f.pod) for f in plan.fail) == ["launcher-0", "launcher-1"]
    else:
        assert plan.annotate.get(keys.RETRY_AFTER) is not None


def test_a_basic_policy_group_held_is_let_go_at_once() -> None:
    basic = {"kind": "NativeGroup", "metadata": {"name": "trainer"}, "spec": {"minCount": None}}
    plan = plan_of(application([native("trainer", 0)], basic), None, time.time())
    assert [p.name(m) for m in plan.ungate] == ["trainer-0"]
    assert "no gang policy" in plan.events[0].note


@pytest.mark.parametrize("left", ["terminating", "ended"])
def test_only_the_current_attempts_record_lets_a_new_member_through_ungated(left: str) -> None:
    """A native gang restarted whole: its last attempt's originator still carries that attempt's record
    (Running) while it terminates, or once ended; a member of the new attempt is gated all the same, until
    the new attempt is admitted and its own originator carries a record."""
    running = {keys.STATE: AppState.RUNNING.value}
    old = native("trainer", 0, gated=False, node="n1", annotations=running)
    if left == "terminating":
        old["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    else:
        old["status"]["phase"] = "Failed"
    new = [native("trainer", 10 + i) for i in range(2)]
    controller = Controller(FakeApi(), admission=False)  # type: ignore[arg-type]
    try:
        controller.store.replace([old, *new])
        joining = native("trainer", 12, gated=False)
        assert not controller.admits_native(joining)
        admitted = native("trainer", 10, annotations=running)  # the new attempt's originator, admitted
        controller.store.upsert({**admitted, "metadata": {**admitted["metadata"], "resourceVersion": "2"}})
        assert controller.admits_native(joining)
    finally:
        controller.close()
