"""What one tenant cannot do to the others: unreadable annotations, a head that never fits, refused
placeholders, unconsented gang groups, floods of placeholders or applications, and what events say."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.planning import (
    APP,
    NOW,
    driver,
    executor,
    placeholder,
)
from tests.unit.test_gang_admission import NS, World, admitted, bound, gang, node, ten_slots
from yuniplace import boundedjson
from yuniplace.admission.tickets import Granted, Refused, Undecided, Waiting
from yuniplace.controller.lifecycle import plan_application
from yuniplace.controller.plan import Settings
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application
from yuniplace.gang.dialects import koordinator
from yuniplace.gang.groups import GroupConsent
from yuniplace.gang.record import Record, read_record
from yuniplace.gang.state import AppState
from yuniplace.gang.taskgroups import InvalidGang, Limits
from yuniplace.runtime.events import Reason

KEY = p.AppKey("default", APP)


def reasons(plan: Any) -> list[str]:
    return [e.reason for e in plan.events]


# -- the record: yuniplace's own annotations, read in one place ------------------------------------------


def test_a_record_written_by_the_controller_reads_back() -> None:
    notes = {
        keys.STATE: "Reserving",
        keys.RESERVATION_STARTED: "2026-01-02T03:04:05Z",
        keys.ATTEMPTS: "2",
        keys.RETRY_AFTER: "2026-01-02T03:05:05.5Z",
        keys.QUEUED_SINCE: "2026-01-02T03:00:00Z",
    }
    record = read_record(notes)
    assert record.state == AppState.RESERVING and record.attempts == 2
    assert record.retry_after is not None and record.reservation_started is not None
    assert record.retry_after - record.reservation_started == 60.5
    assert read_record({}) == Record()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (keys.RETRY_AFTER, "soon"),
        (keys.RESERVATION_STARTED, "2026-13-40T99:99:99Z"),
        (keys.FIRST_ALLOCATED, "1700000000"),
        (keys.QUEUED_SINCE, "2026-01-02 03:04:05"),
        (keys.ATTEMPTS, "-1"),
        (keys.ATTEMPTS, "1" * 40),
        (keys.STATE, "Running!"),
    ],
)
def test_an_unreadable_record_names_its_key(key: str, value: str) -> None:
    with pytest.raises(InvalidGang) as error:
        read_record({key: value})
    assert key in str(error.value)


def test_bounded_json_refuses_deep_nesting_as_a_value_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ValueError, match="nested more deeply"):
        boundedjson.loads(deep, max_depth=8)
    with pytest.raises(ValueError, match="nested more deeply"):
        boundedjson.loads("[[[[1]]]]", max_depth=3)
    assert boundedjson.loads('[["a"], {"b": [1]}]', max_depth=3) == [["a"], {"b": [1]}]


# -- the planner: what each outcome means for the application ------------------------------------------


def test_an_unreadable_record_fails_the_application_by_its_style() -> None:
    soft = plan_application(Application.of(KEY, [driver(annotations={keys.RETRY_AFTER: "soon"}), executor(0)]), NOW)
    assert soft.state == AppState.RESUMING and reasons(soft) == ["TaskGroupsError"]
    assert keys.RETRY_AFTER in soft.events[0].note and len(soft.ungate) == 2
    hard = plan_application(
        Application.of(
            KEY, [driver(annotations={keys.ATTEMPTS: "many"}, policy="gangSchedulingStyle=Hard"), executor(0)]
        ),
        NOW,
    )
    assert hard.state == AppState.FAILED and len(hard.fail) == 2


def test_deeply_nested_gang_group_is_an_invalid_gang() -> None:
    deep = "[" * 50_000 + "]" * 50_000
    plan = plan_application(Application.of(KEY, [driver(annotations={keys.GANG_GROUP: deep}), executor(0)]), NOW)
    assert plan.state == AppState.RESUMING and "TaskGroupsError" in reasons(plan)
    assert keys.GANG_GROUP in plan.events[0].note


def test_first_in_queue_its_timeout_runs_from_when_it_became_first() -> None:
    view = Application.of(KEY, [driver(policy="placeholderTimeoutInSeconds=60"), executor(0), executor(1)])
    first = plan_application(
        view, NOW, ticket=Waiting("waiting for free capacity; first in queue default", times_out=True)
    )
    assert first.state == AppState.PENDING and first.annotate == {keys.QUEUED_SINCE: p.format_time(NOW)}
    assert first.requeue_after_s == 60
    queued = Application.of(
        KEY,
        [
            driver(
                policy="placeholderTimeoutInSeconds=60 gangSchedulingStyle=Hard",
                annotations={keys.QUEUED_SINCE: p.format_time(NOW - 61)},
            ),
            executor(0),
            executor(1),
        ],
    )
    late = plan_application(
        queued, NOW, ticket=Waiting("waiting for free capacity; first in queue default", times_out=True)
    )
    assert late.state == AppState.FAILED and "PlaceholderTimeOut" in reasons(late)
    assert "not admitted within 60s of becoming first in its queue" in late.events[0].note


def test_until_admission_decides_nothing_changes_and_its_queue_clock_keeps_running() -> None:
    """A controller that restarts has no tickets until its first cycle: a gang first in its queue for
    30 of its 60 seconds keeps its clock (not restarted, as YUNIKORN-1155 had it), announces nothing,
    and is looked at again when its timeout would run out."""
    queued = Application.of(
        KEY,
        [
            driver(policy="placeholderTimeoutInSeconds=60", annotations={keys.QUEUED_SINCE: p.format_time(NOW - 30)}),
            executor(0),
        ],
    )
    plan = plan_application(queued, NOW, ticket=Undecided())
    assert plan.state == AppState.PENDING and plan.events == [] and plan.annotate == {}
    assert plan.requeue_after_s == 30


def test_behind_others_its_timeout_does_not_run() -> None:
    queued = Application.of(
        KEY,
        [
            driver(policy="placeholderTimeoutInSeconds=60", annotations={keys.QUEUED_SINCE: p.format_time(NOW - 30)}),
            executor(0),
        ],
    )
    plan = plan_application(queued, NOW, ticket=Waiting("position 2 in queue default, behind default/big"))
    assert plan.state == AppState.PENDING and plan.annotate == {keys.QUEUED_SINCE: None}


def test_admitted_it_forgets_when_it_was_queued() -> None:
    queued = Application.of(
        KEY, [driver(annotations={keys.QUEUED_SINCE: p.format_time(NOW - 30)}), executor(0), executor(1)]
    )
    plan = plan_application(queued, NOW, ticket=Granted())
    assert plan.state == AppState.RESERVING and plan.annotate[keys.QUEUED_SINCE] is None


@pytest.mark.parametrize(("style", "state"), [("Soft", AppState.RESUMING), ("Hard", AppState.FAILED)])
def test_a_refused_gang_ends_by_its_style_at_once(style: str, state: AppState) -> None:
    view = Application.of(KEY, [driver(policy=f"gangSchedulingStyle={style}"), executor(0)])
    plan = plan_application(view, NOW, ticket=Refused(Reason.GANG_REFUSED, "admission refuses the gang: too many"))
    assert plan.state == state and reasons(plan) == ["GangRefused"] and not plan.create
    assert (len(plan.ungate), len(plan.fail)) == ((2, 0) if style == "Soft" else (0, 2))


def test_placeholders_refused_by_the_api_give_the_reservation_back_and_retry() -> None:
    origin = driver(state=AppState.RESERVING, started=NOW - 5)
    view = Application.of(KEY, [origin, executor(0), executor(1), placeholder("driver", 0, min_member=1, owner=origin)])
    quota = 'placeholder tg-x: pods "tg-x" is forbidden: exceeded quota: team, requested: cpu=1, used: cpu=2, limited: cpu=2'
    plan = plan_application(view, NOW, Settings(strict_backoff_s=4), refusal=quota)
    assert plan.state == AppState.PENDING and not plan.create and len(plan.delete) == 1
    assert plan.annotate[keys.ATTEMPTS] == "1" and plan.annotate[keys.RETRY_AFTER] == p.format_time(NOW + 4)
    assert reasons(plan) == ["PlaceholdersRefused"] and "exceeded quota: team" in plan.events[0].note
    expired = plan_application(
        Application.of(KEY, [driver(state=AppState.RESERVING, started=NOW - 901), executor(0)]), NOW, refusal=quota
    )
    assert expired.state == AppState.RESUMING and "PlaceholderTimeOut" in reasons(expired)


# -- admission ----------------------------------------------------------------------------------------


def world(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None, now: float = NOW, **rules: Any
) -> World:
    return World(nodes or ten_slots(), pods, clock=lambda: now, **rules)


def queued(pod: dict[str, Any], since: float) -> dict[str, Any]:
    pod["metadata"]["annotations"][keys.QUEUED_SINCE] = p.format_time(since)
    return pod


def test_one_unreadable_application_does_not_stop_admission_for_others() -> None:
    bad = gang("bad", 2, created=1)
    bad["metadata"]["annotations"][keys.RETRY_AFTER] = "soon"
    nested = gang("nested", 2, created=2)
    nested["metadata"]["annotations"][keys.GANG_GROUP] = "[" * 50_000 + "]" * 50_000
    made = world([bad, nested, gang("good", 2, created=3)])
    assert admitted(made.ticket("good"))


def test_a_head_gives_its_claim_up_after_the_head_claim_time() -> None:
    """31.5 of 32 free: the head needs all 32, nobody else may use the room while it claims it."""
    nodes = [node(f"n{i}", cpu="8") for i in range(4)]
    busy = [bound("x", "n0", cpu="500m")]
    head = queued(gang("big", 32, created=1), since=NOW - 10)
    holding = world(busy + [head, gang("other", 4, created=2)], nodes, head_claim_s=60)
    assert isinstance(holding.ticket("big"), Waiting) and holding.ticket("big").times_out  # type: ignore[union-attr]
    assert isinstance(holding.ticket("other"), Waiting)
    head = queued(gang("big", 32, created=1), since=NOW - 61)
    lapsed = world(busy + [head, gang("other", 4, created=2)], nodes, head_claim_s=60)
    ticket = lapsed.ticket("big")
    assert isinstance(ticket, Waiting) and "no longer holds room" in ticket.message
    assert lapsed.ticket("other") == Granted()


def test_the_namer_of_an_admitted_application_does_not_skip_the_fit_check() -> None:
    made = world([bound(f"x{i}", f"n{i}", cpu="2") for i in range(4)] + [gang("a", 1, created=1)])
    assert admitted(made.ticket("a"))
    namer = gang("namer", 4, created=2, group_with=[f"{NS}/a", f"{NS}/namer"])
    made.store.upsert(namer)
    assert isinstance(made.ticket("namer"), Waiting)


def cross(app: str, namespace: str, members: int, created: int, group_with: list[str] | None = None) -> dict[str, Any]:
    pod = gang(app, members, created=created, group_with=group_with)
    pod["metadata"]["namespace"] = namespace
    pod["metadata"]["uid"] = f"uid-{namespace}-{app}"
    return pod


def test_an_application_of_another_namespace_is_not_dragged_into_a_gang_group_it_did_not_name() -> None:
    busy = [bound(f"x{i}", f"n{i}", cpu="2") for i in range(3)]  # 4 slots free
    namer = cross("train", "team-a", 5, created=1, group_with=["team-a/train", "team-b/eval"])
    victim = cross("eval", "team-b", 2, created=2)
    made = world(busy + [namer, victim])
    assert made.ticket(p.AppKey("team-b", "eval")) == Granted()
    waiting = made.ticket(p.AppKey("team-a", "train"))
    assert isinstance(waiting, Waiting) and "team-b/eval" in waiting.message and waiting.times_out


def test_gang_groups_across_namespaces_form_when_both_name_each_other_or_are_trusted() -> None:
    busy = [bound(f"x{i}", f"n{i}", cpu="2") for i in range(3)]
    both = ["team-a/train", "team-b/eval"]
    mutual = world(busy + [cross("train", "team-a", 3, 1, both), cross("eval", "team-b", 2, 2, both)])
    assert isinstance(mutual.ticket(p.AppKey("team-b", "eval")), Waiting)  # 5 needed, 4 free: together
    one_sided = [cross("train", "team-a", 3, 1, both), cross("eval", "team-b", 2, 2)]
    trusted = world(busy + one_sided, consent=GroupConsent.of([["team-a", "team-b"]]))
    assert isinstance(trusted.ticket(p.AppKey("team-b", "eval")), Waiting)


def test_a_gang_larger_than_its_namespace_may_hold_is_refused() -> None:
    made = world([gang("huge", 1000, created=1), gang("fine", 2, created=2)], max_placeholders_per_namespace=10)
    refused = made.ticket("huge")
    assert isinstance(refused, Refused) and refused.reason == "GangRefused" and "1000 placeholders" in refused.message
    assert made.ticket("fine") == Granted()


def test_a_namespace_at_its_placeholder_limit_waits() -> None:
    holding = gang("holding", 8, created=1, state="Reserving")
    made = world([holding, gang("next", 4, created=2)], max_placeholders_per_namespace=10)
    waiting = made.ticket("next")
    assert isinstance(waiting, Waiting) and "8 of the 10" in waiting.message


def test_a_namespace_may_queue_only_so_many_applications() -> None:
    full = [bound(f"x{i}", f"n{i}", cpu="2") for i in range(5)]
    made = world(full + [gang(f"g{i}", 1, created=i) for i in range(4)], max_waiting_per_namespace=2)
    tickets = [made.ticket(f"g{i}") for i in range(4)]
    assert [type(t).__name__ for t in tickets] == ["Waiting", "Waiting", "Refused", "Refused"]
    assert "--max-waiting-per-namespace" in tickets[2].message  # type: ignore[union-attr]


def test_waiting_messages_never_name_another_namespaces_application() -> None:
    full = [bound(f"x{i}", f"n{i}", cpu="2") for i in range(4)]  # 2 slots free
    head = cross("secret-project", "team-a", 6, created=1)
    head["metadata"]["labels"]["queue"] = "shared"
    mine = cross("mine", "team-b", 4, created=2)
    mine["metadata"]["labels"]["queue"] = "shared"
    made = world(full + [head, mine])
    waiting = made.ticket(p.AppKey("team-b", "mine"))
    assert isinstance(waiting, Waiting) and "position 2 in queue shared" in waiting.message
    assert "secret-project" not in waiting.message and "team-a" not in waiting.message
    assert "another namespace" in waiting.message


# -- whatever a tenant writes, admission and the planner carry on ---------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

OWN_KEYS = [
    keys.STATE,
    keys.RESERVATION_STARTED,
    keys.FIRST_ALLOCATED,
    keys.ATTEMPTS,
    keys.RETRY_AFTER,
    keys.QUEUED_SINCE,
    keys.GANG_MODE,
    keys.GANG_GROUP,
    keys.SWAP_PLACEHOLDER,
    keys.TASK_GROUPS,
    keys.TASK_GROUP_NAME,
    keys.SCHEDULING_POLICY_PARAMETERS,
    koordinator.GROUPS,
    koordinator.NAME,
    koordinator.MIN_AVAILABLE,
    koordinator.WAITING_TIME,
    koordinator.MODE,
    "yunikorn.apache.org/queue",
]
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
VALUES = st.one_of(
    st.text(max_size=40),
    JSONISH.map(json.dumps),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.sampled_from(
        [
            "soon",
            "-1",
            "NaN",
            "1e999",
            "Reserving",
            "2026-01-02T03:04:05Z",
            '["team/b"]',
            "Strict",
            '[{"name":"w","minMember":1,"minResource":{"cpu":"1"}}]',
        ]
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(st.sampled_from(OWN_KEYS), VALUES, max_size=5), min_size=1, max_size=4))
def test_any_annotation_values_never_break_admission_or_planning(annotations: list[dict[str, str]]) -> None:
    """Each hostile pod is its own application; a well-formed one sits beside them and must still be
    decided, and every application gets a plan without an exception."""
    pods = []
    for index, notes in enumerate(annotations):
        pod = gang(f"t{index}", 2, created=index)
        pod["metadata"]["annotations"].update(notes)
        pods.append(pod)
    pods.append(gang("good", 1, created=59))
    made = world(pods)
    applications = made.store.keys()
    for key in applications:
        ticket = made.ticket(key)
        view = Application.of(key, made.store.app_pods(key))
        plan_application(view, NOW, Settings(limits=Limits()), ticket=ticket, peers={})
    assert admitted(made.ticket("good"))
