"""A gang whose owner makes it again after Hard style failed it (KubeRay makes a Ray cluster's failed pods
again): each attempt out of time is counted for that owner against the gang's restart limit; the next
attempt waits a backoff before it reserves, and past the limit every new pod of it fails at once."""

from __future__ import annotations

import json

from tests.planning import (
    HARD,
    KEY,
    NOW,
    ConfigMaps,
    Pod,
    all_placeholders,
    driver,
    executor,
    names,
    owned_by,
    plan_of,
    reasons,
)
from yuniplace.controller.restarts import MEMORY_S, RestartLedger, Restarts
from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.gang.state import AppState

RAY = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "ray", "uid": "ray-uid", "controller": True}
LIMIT = f"{keys.RESTART_LIMIT}"


def owned(pods: list[Pod]) -> list[Pod]:
    return [owned_by(pod, RAY) if not p.is_placeholder(pod) else pod for pod in pods]


def out_of_time(limit: int = 3) -> list[Pod]:
    """A Hard gang owned by a RayCluster whose reservation began 900 s ago, nothing placed."""
    notes = {keys.RESTART_LIMIT: str(limit)}
    return owned(
        [
            driver(state=AppState.RESERVING, started=NOW - 900, policy=HARD, annotations=notes),
            executor(0),
            executor(1),
            *all_placeholders(bound=False),
        ]
    )


def test_an_attempt_out_of_time_is_counted_for_its_owner_and_says_what_its_next_one_does() -> None:
    plan = plan_of(out_of_time())
    assert plan.state == AppState.FAILED and len(plan.fail) == 3
    assert plan.restarts == Restarts(("ray-uid",), 0, 0.0, timeouts=1, timed_out_at=NOW)
    [failed] = [e for e in plan.events if e.reason == "ApplicationFailed"]
    assert failed.note.endswith(
        "; if RayCluster ray makes it again, attempt 2 of at most 4 waits a backoff before it reserves"
    )


def test_counted_with_its_restarts_an_attempt_out_of_time_keeps_them() -> None:
    before = Restarts(("ray-uid",), 1, NOW - 500)
    plan = plan_of(out_of_time(), restarts=before)
    assert plan.restarts == Restarts(("ray-uid",), 1, NOW - 500, timeouts=1, timed_out_at=NOW)


def new_attempt() -> list[Pod]:
    """The owner's new pods, made after the last attempt failed: no record of their own yet."""
    return owned([driver(annotations={keys.RESTART_LIMIT: "3"}), executor(0), executor(1)])


def test_the_owners_next_attempt_waits_a_backoff_before_it_reserves_and_says_so_once() -> None:
    last = Restarts(("ray-uid",), 0, 0.0, timeouts=1, timed_out_at=NOW - 4)
    plan = plan_of(new_attempt(), restarts=last)
    assert plan.create == [] and plan.ungate == [] and plan.requeue_after_s == 6
    assert plan.annotate[keys.RETRY_AFTER] == p.format_time(NOW + 6) and plan.annotate[keys.ATTEMPTS] == "1"
    assert reasons(plan) == ["GangBackingOff"]
    assert plan.events[0].note == (
        "RayCluster ray made the gang again after 1 of its attempts ran out of time (Hard style): attempt 2 of at "
        "most 4 reserves in 6s"
    )
    waiting = [
        owned_by(driver(annotations={keys.RESTART_LIMIT: "3", **{k: v for k, v in plan.annotate.items() if v}}), RAY),
        *new_attempt()[1:],
    ]
    again = plan_of(waiting, now=NOW + 1, restarts=last)
    assert again.events == [] and again.requeue_after_s == 5


def test_its_backoff_doubles_with_each_attempt_out_of_time() -> None:
    last = Restarts(("ray-uid",), 0, 0.0, timeouts=3, timed_out_at=NOW - 4)
    plan = plan_of(new_attempt(), restarts=last)
    assert plan.requeue_after_s == 36  # 10 s × 2², counted from when the last attempt failed


def test_once_its_backoff_is_over_the_attempt_reserves_as_another_attempt() -> None:
    last = Restarts(("ray-uid",), 0, 0.0, timeouts=1, timed_out_at=NOW - 20)
    waited = owned_by(
        driver(annotations={keys.RESTART_LIMIT: "3", keys.RETRY_AFTER: p.format_time(NOW - 10), keys.ATTEMPTS: "1"}),
        RAY,
    )
    plan = plan_of([waited, *new_attempt()[1:]], restarts=last, ticket=None)
    assert len(plan.create) == 3 and plan.state == AppState.RESERVING
    assert "attempt 2: creating 3 placeholder pods again" in [e.note for e in plan.events]


def test_past_its_limit_the_last_attempt_says_so_and_every_new_pod_fails_at_once() -> None:
    last = Restarts(("ray-uid",), 0, 0.0, timeouts=1, timed_out_at=NOW - 900)
    plan = plan_of(out_of_time(limit=1), restarts=last)
    assert plan.restarts == Restarts(("ray-uid",), 0, 0.0, failed=True, timeouts=2, timed_out_at=NOW)
    [failed] = [e for e in plan.events if e.reason == "ApplicationFailed"]
    assert failed.note.endswith(
        f"; 2 of its attempts ran out of time, past its limit ({LIMIT}: 1): every new pod RayCluster ray makes of "
        "it fails at once"
    )
    fails = plan_of(new_attempt(), restarts=plan.restarts)
    assert fails.state == AppState.FAILED and names([f.pod for f in fails.fail]) == ["driver", "exec-0", "exec-1"]
    assert fails.fail[0].message == (
        "application spark-1 failed after 2 attempt(s) out of time (Hard style), its limit (yuniplace.io/restart-limit)"
    )


def test_a_job_that_keeps_its_failed_pods_is_unchanged_its_new_pods_fail_at_once() -> None:
    """A Job keeps the pod Hard style failed, with the record that says so: the application stays Failed
    and the Job's new pods fail at once, as before any attempt was counted."""
    failed_driver = driver(state=AppState.FAILED, policy=HARD, phase="Failed")
    pods = [owned_by(failed_driver, RAY), owned_by(executor(5), RAY)]
    plan = plan_of(pods, restarts=Restarts(("ray-uid",), 0, 0.0, timeouts=1, timed_out_at=NOW - 1))
    assert plan.state == AppState.FAILED and [(p.name(f.pod), f.reason) for f in plan.fail] == [
        ("exec-5", "ApplicationFailed")
    ]


def test_attempts_out_of_time_are_kept_for_their_owner_and_forgotten_only_an_hour_after_the_last() -> None:
    """A count made of attempts out of time alone (no restart: its last restart is at 0) is as fresh as its
    last attempt, kept across the controller, and read back whole by one that does not know the fields."""
    api = ConfigMaps()
    now = [NOW]
    ledger = RestartLedger(api, "yuniplace", "restarts", lambda: now[0])  # type: ignore[arg-type]
    counted = Restarts(("ray-uid",), 0, 0.0, timeouts=2, timed_out_at=NOW)
    ledger.record(KEY, counted)
    later = RestartLedger(api, "yuniplace", "restarts", lambda: now[0])  # type: ignore[arg-type]
    later.load()
    assert later.get(KEY, "ray-uid") == counted
    now[0] += MEMORY_S + 1
    assert later.get(KEY, "ray-uid") is None
    written_before = json.dumps({"namespace": "default", "app": "x", "owner": "u", "count": 1, "last_at": NOW})
    api.data = {"restarts.default.old": written_before}
    older = RestartLedger(api, "yuniplace", "restarts", lambda: NOW)  # type: ignore[arg-type]
    older.load()
    assert older.get(p.AppKey("default", "x"), "u") == Restarts(("u",), 1, NOW)
