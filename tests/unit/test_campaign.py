"""The fault campaign's parts that need no cluster: the seeded stream of gangs and what it submits, the
observer folding pod versions into traces, the queues it configures, and its command line."""

from __future__ import annotations

import json
import random

import pytest

from tests import builders
from yuniplace.bench import campaign, stream
from yuniplace.bench.__main__ import parser
from yuniplace.bench.invariants import EVICTED
from yuniplace.bench.observer import NodeObserver, PodObserver, new_trace, take_in
from yuniplace.gang import keys
from yuniplace.gang.pods import format_time
from yuniplace.queues.yunikorn import read_queues_yaml

NAMESPACES = ("team-a", "team-b")


def plans(seed: str, count: int = 40) -> list[stream.GangPlan]:
    rng = random.Random(seed)
    return [stream.draw(rng, index, NAMESPACES) for index in range(count)]


def test_a_seed_replays_the_same_gangs_and_another_does_not() -> None:
    assert plans("stream-24") == plans("stream-24")
    assert plans("stream-24") != plans("stream-25")


def test_the_stream_mixes_every_kind_of_gang() -> None:
    drawn = plans("stream-24", 200)
    assert {p.kind for p in drawn} == {"pods", "job"}
    assert {p.style for p in drawn if p.kind == "pods"} == {"Soft", "Hard"}
    assert {p.style for p in drawn if p.kind == "job"} == {"Soft"}  # a Job would replace pods failed by Hard
    assert any(not p.fits for p in drawn) and any(p.delete_after_s for p in drawn)
    assert any(len(p.groups) > 2 for p in drawn if p.kind == "pods")
    assert {p.namespace for p in drawn} == set(NAMESPACES)


def test_a_spark_like_gang_has_its_task_groups_on_its_driver_only() -> None:
    plan = next(p for p in plans("stream-24") if p.kind == "pods")
    pods = [body for _, body in stream.manifests(plan)]
    assert len(pods) == plan.members
    driver = pods[0]
    assert driver["metadata"]["name"] == plan.originator
    groups = json.loads(driver["metadata"]["annotations"][keys.TASK_GROUPS])
    assert {g["name"]: g["minMember"] for g in groups} == plan.gang().groups
    assert all(keys.TASK_GROUPS not in pod["metadata"]["annotations"] for pod in pods[1:])
    assert all("schedulingGates" not in pod["spec"] for pod in pods)  # the webhook gates them
    assert f"gangSchedulingStyle={plan.style}" in driver["metadata"]["annotations"][keys.SCHEDULING_POLICY_PARAMETERS]


def test_a_job_gang_ignores_evictions_and_keeps_running_when_it_has_a_lifetime() -> None:
    plan = next(p for p in plans("stream-24") if p.kind == "job" and p.lifetime_s is not None)
    for path, job in stream.manifests(plan):
        assert path == f"/apis/batch/v1/namespaces/{plan.namespace}/jobs"
        assert job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"] == [{"type": "DisruptionTarget"}]
        notes = job["spec"]["template"]["metadata"]["annotations"]
        assert keys.TASK_GROUPS in notes and notes["kwok.yuniplace.io/completes"] == "never"
        assert notes[keys.ON_MEMBER_LOST] == "restart"  # a long-running Job restarts whole on a lost member
    assert plan.originator is None and plan.gang().restarts_on_loss
    instant = next(p for p in plans("stream-24") if p.kind == "job" and p.lifetime_s is None)
    assert not instant.gang().restarts_on_loss


def test_the_observer_follows_a_member_from_gated_to_evicted() -> None:
    started = format_time(1000.0)
    gated = builders.member(
        "m", app="app", group="workers", uid="u1", gates=[keys.GATE], annotations={keys.RESERVATION_STARTED: started}
    )
    trace = new_trace(gated, 10.0)
    assert trace is not None and trace.app == "ns/app" and trace.group == "workers" and not trace.placeholder
    take_in(trace, gated, 10.0)
    running = builders.member(
        "m",
        app="app",
        group="workers",
        uid="u1",
        node="n1",
        phase="Running",
        annotations={keys.STATE: "Running", keys.SWAP_PLACEHOLDER: "tg-1"},
    )
    take_in(trace, running, 12.0)
    evicted = {**running, "metadata": {**running["metadata"], "deletionTimestamp": "x"}}
    evicted["status"] = {
        "phase": "Running",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": EVICTED}],
    }
    take_in(trace, evicted, 20.0)
    assert (trace.gated_since, trace.ungated_at, trace.bound_at, trace.node) == (10.0, 12.0, 12.0, "n1")
    assert trace.reservation_started == 1000.0 and trace.states == [(12.0, "Running")]
    assert trace.claims == "tg-1" and trace.deleting_at == 20.0 and trace.disruption == EVICTED
    assert trace.terminal_at is None


def test_a_pod_of_no_application_is_not_traced() -> None:
    assert new_trace(builders.pod("plain", uid="u"), 1.0) is None


def test_the_campaigns_queues_are_a_configuration_yuniplace_accepts() -> None:
    config = read_queues_yaml(campaign.queues_yaml(8))
    assert {"root.team-a", "root.team-b"} <= set(config.queues)
    assert config.queues["root.team-a"].guaranteed["cpu"] == 32_000
    assert not config.warnings


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800.0), ("90s", 90.0), ("1h", 3600.0), ("45", 45.0)])
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parser().parse_args(["--scenario", "faults", "--duration", text]).duration == seconds


def test_a_bad_duration_or_interval_is_refused_with_what_was_expected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--duration", "soon"])
    assert "not a duration such as 30m" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser().parse_args(["--fault-interval", "40-20"])
    assert "MIN must be above 0 and at most MAX" in capsys.readouterr().err


def test_campaigns_run_only_when_named_with_a_fixed_seed() -> None:
    args = parser().parse_args([])
    assert args.scenario is None and args.seed == campaign.DEFAULT_SEED and args.fault_interval == (20.0, 40.0)
    assert args.duration == 30 * 60


REAL_KUBELETS = stream.Workload(
    image="yuniplace:dev",
    scale=0.25,
    programs=True,
    lost_node_toleration_s=30,
    policies=("restart", "release", "none"),
    replacements=stream.REPLACEMENTS,
    termination_grace_s=10,
    ready_timeout_s=60,
    recovery_timeout_s=30,
)


def test_on_real_kubelets_members_run_a_program_sized_for_the_nodes_and_tolerate_a_lost_node_briefly() -> None:
    rng = random.Random("stream-24")
    drawn = [stream.draw(rng, index, NAMESPACES, REAL_KUBELETS) for index in range(200)]
    assert {p.on_loss for p in drawn if p.kind == "job" and p.lifetime_s is not None} == {"restart", "release", "none"}
    assert {p.replacement for p in drawn if p.kind == "job"} == set(stream.REPLACEMENTS)
    plan = next(p for p in drawn if p.kind == "job" and p.lifetime_s is not None and p.on_loss == "release")
    [(_, job), *_] = stream.manifests(plan, REAL_KUBELETS)
    pod = job["spec"]["template"]
    [container] = pod["spec"]["containers"]
    assert container["image"] == "yuniplace:dev"
    assert container["command"][:2] == ["sh", "-c"] and f"sleep {plan.lifetime_s:.0f}" in container["command"][2]
    assert container["resources"]["requests"] == {
        "cpu": stream.scaled(plan.groups[0].cpu, 0.25),
        "memory": stream.scaled(plan.groups[0].memory, 0.25),
    }
    assert {(t["key"], t["tolerationSeconds"]) for t in pod["spec"]["tolerations"]} == {
        ("node.kubernetes.io/unreachable", 30),
        ("node.kubernetes.io/not-ready", 30),
    }
    notes = pod["metadata"]["annotations"]
    assert "kwok.yuniplace.io/completes" not in notes
    assert (notes[keys.ON_MEMBER_LOST], notes[keys.RECOVERY_TIMEOUT], notes[keys.READY_TIMEOUT]) == (
        "release",
        "30",
        "60",
    )
    groups = json.loads(notes[keys.TASK_GROUPS])
    assert all(g["tolerations"] == pod["spec"]["tolerations"] for g in groups)  # placeholders leave with them
    assert ("podFailurePolicy" in job["spec"]) is (plan.replacement != stream.AT_ONCE)
    assert (job["spec"].get("completionMode") == "Indexed") is (plan.replacement == stream.INDEXED)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 10
    gang = plan.gang(REAL_KUBELETS)
    assert (gang.on_loss, gang.recovery_timeout_s, gang.ready_timeout_s) == ("release", 30.0, 60.0)
    instant = next(p for p in drawn if p.kind == "job" and p.lifetime_s is None)
    assert stream.manifests(instant, REAL_KUBELETS)[0][1]["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "true"
    ]


@pytest.mark.parametrize(
    ("quantity", "scale", "result"),
    [
        ("500m", 0.25, "125m"),
        ("2", 0.25, "500m"),
        ("12", 0.25, "3000m"),
        ("1Gi", 0.25, "256Mi"),
        ("512Mi", 0.25, "128Mi"),
        ("1", 1.0, "1"),
    ],
)
def test_quantities_scale_for_smaller_nodes(quantity: str, scale: float, result: str) -> None:
    assert stream.scaled(quantity, scale) == result


def test_a_broken_group_names_an_image_no_node_can_pull() -> None:
    plan = stream.GangPlan(
        app="p",
        namespace="team-a",
        kind="job",
        style="Soft",
        timeout_s=60,
        groups=[stream.Group("workers", 2, "1", "1Gi"), stream.Group("ps", 1, "1", "1Gi")],
        fits=True,
        lifetime_s=60.0,
        delete_after_s=None,
        on_loss="restart",
        broken_group="ps",
    )
    images = {
        job["metadata"]["name"]: job["spec"]["template"]["spec"]["containers"][0]["image"]
        for _, job in stream.manifests(plan, REAL_KUBELETS)
    }
    assert images == {"p-workers": "yuniplace:dev", "p-ps": stream.BROKEN_IMAGE}


def test_the_node_observer_keeps_when_each_node_was_in_trouble_and_not_ready() -> None:
    clock = iter([1.0, 10.0, 20.0, 30.0])
    nodes = NodeObserver(None, clock=lambda: next(clock))  # type: ignore[arg-type]  # never started
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    unknown = {"conditions": [{"type": "Ready", "status": "Unknown"}]}
    unreachable = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]
    nodes._listed([{**builders.node("w1"), "status": ready}, {**builders.node("w2"), "status": ready}])
    nodes._changed("MODIFIED", {**builders.node("w1"), "status": unknown})
    nodes._changed("MODIFIED", {**builders.node("w1", taints=unreachable), "status": unknown})
    nodes._changed("MODIFIED", {**builders.node("w1"), "status": ready})
    seen = nodes.snapshot()
    assert seen["w1"].not_ready == [[10.0, 30.0]] and seen["w1"].troubled == [[20.0, 30.0]]
    assert seen["w2"].not_ready == [] and nodes.troubles() == {"w1": [(20.0, 30.0)], "w2": []}


def test_the_observer_notes_when_a_member_first_ran_and_was_first_ready() -> None:
    pending = builders.member("m", app="app", group="workers", uid="u1", node="n1")
    trace = new_trace(pending, 1.0)
    assert trace is not None
    take_in(trace, pending, 1.0)
    running = builders.member("m", app="app", group="workers", uid="u1", node="n1", phase="Running")
    take_in(trace, running, 2.0)
    running["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    take_in(trace, running, 3.0)
    assert (trace.bound_at, trace.running_at, trace.ready_at) == (1.0, 2.0, 3.0)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _EventsClient:
    """Answers the checker's read of events, taking `slow_s` of the clock, or fails after it as an API
    server that is away does once its retries run out."""

    def __init__(self, clock: _Clock, slow_s: float = 0.0, away: bool = False) -> None:
        self.clock, self.slow_s, self.away = clock, slow_s, away

    def get(self, path: str, **_query: object) -> dict[str, object]:
        self.clock.now += self.slow_s
        if self.away:
            raise ConnectionRefusedError("connection refused")
        return {"items": []}


class _QuietStream:
    def gangs(self) -> dict[str, object]:
        return {}

    def disturbed(self) -> dict[str, float]:
        return {}

    def deleted(self) -> frozenset[str]:
        return frozenset()


def _checker(client: _EventsClient, clock: _Clock, said: list[str]) -> campaign.Checker:
    observer = PodObserver(client, NAMESPACES)  # type: ignore[arg-type]
    return campaign.Checker(observer, _QuietStream(), 60.0, said.append, clock=clock)  # type: ignore[arg-type]


@pytest.mark.parametrize("away", [False, True], ids=["slow", "away"])
def test_a_slow_check_is_not_taken_for_the_campaign_standing_still(away: bool) -> None:
    clock, said = _Clock(), []
    client = _EventsClient(clock, slow_s=campaign.CHECK_EVERY_S + campaign.STALL_S + 5, away=away)
    checker = _checker(client, clock, said)
    for _ in range(3):
        clock.now += campaign.CHECK_EVERY_S  # the loop's wait between checks
        checker.check()
    assert checker.stalls == [] and checker.stalled_s == 0.0
    assert not any("stood still" in line for line in said)
    assert any("check skipped" in line for line in said) is away


def test_a_pause_between_checks_is_counted_and_added_to_the_grace() -> None:
    clock, said = _Clock(), []
    checker = _checker(_EventsClient(clock), clock, said)
    clock.now += campaign.CHECK_EVERY_S
    checker.check()
    clock.now += campaign.CHECK_EVERY_S + 100  # the process was paused
    checker.check()
    assert [stall["gap_s"] for stall in checker.stalls] == [campaign.CHECK_EVERY_S + 100]
    assert checker.stalled_s == 100
    assert checker.observed().grace_s == 160
    assert any("stood still for 130s" in line for line in said)
