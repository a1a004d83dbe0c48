"""The kind campaign's figures that need no cluster: from a node's loss to its gangs whole again, beside
Kubernetes' own marks, read from observed traces; what docker stats says the cluster used."""

from __future__ import annotations

import random
from typing import Any

from yuniplace.bench import faults, kindcampaign, kindfaults
from yuniplace.bench.faults import Fault
from yuniplace.bench.invariants import EventSeen, Gang, PodTrace
from yuniplace.bench.observer import NodeTrace

T0 = 1000.0  # the node is stopped
APP = "team-a/g0001-job"
GANG = Gang(APP, "Soft", 60.0, {"workers": 3}, on_loss="restart")


def member(name: str, node: str, running: float, phase: str = "Running", **fields: Any) -> PodTrace:
    return PodTrace(
        uid=name,
        namespace="team-a",
        name=name,
        app=APP,
        placeholder=False,
        node=node,
        bound_at=running - 1,
        running_at=running,
        phase=phase,
        **fields,
    )


def test_a_node_stopped_under_a_restarting_gang_is_timed_from_its_loss_to_the_gang_whole_again() -> None:
    pods = {
        p.uid: p
        for p in (
            member("w-0", "worker", T0 - 60, deleting_at=T0 + 60, disruption="EvictionByEvictionAPI"),
            member("w-1", "worker2", T0 - 60, deleting_at=T0 + 60, terminal_at=T0 + 61, phase="Failed"),
            member("w-2", "worker3", T0 - 60, deleting_at=T0 + 60, terminal_at=T0 + 61, phase="Failed"),
            member("w-3", "worker2", T0 + 100),
            member("w-4", "worker3", T0 + 101),
            member("w-5", "worker4", T0 + 102),
            member("other", "worker3", T0 - 60),  # of no gang the stream knows
        )
    }
    pods["other"].app = "team-b/unknown"
    nodes = {"worker": NodeTrace("worker", troubled=[[T0 + 55, T0 + 130]], not_ready=[[T0 + 54, T0 + 128]])}
    events = [
        EventSeen("GangDegraded", "team-a", "w-0", "w-0", T0 + 60),
        EventSeen("GangRestarting", "team-a", "w-0", "w-0", T0 + 60.5),
        EventSeen("GangDegraded", "team-a", "w-0", "w-0", T0 - 300),  # of an earlier loss
        EventSeen(
            "GangRestarting", "team-a", "w-0", "w-0", T0 + 20
        ),  # of an earlier fault, before this node was marked
    ]
    fault = Fault(kindfaults.Kind.NODE_RESTARTED.value, T0, "", 120.0, node="worker", back_at=T0 + 120)
    [row] = kindcampaign.recoveries([fault], pods, nodes, events, {APP: GANG}, {APP: "at once"}, T0 + 600)
    assert (row["not_ready_s"], row["tainted_s"], row["taint_eviction_s"]) == (54.0, 55.0, None)
    assert row["gangs"] == [
        {
            "app": APP,
            "policy": "restart",
            "replacement": "at once",
            "members": 3,
            "degraded_s": 60.0,
            "answered_s": 60.5,
            "whole_again_s": 102.0,
        }
    ]
    summary = kindcampaign.summarise([row])
    assert summary["by_policy"]["restart, replaced at once"]["whole_again_s"] == 102.0
    assert summary["by_fault"][fault.kind]["marked"] == 1


def test_a_gang_whose_member_stays_on_a_node_in_trouble_is_whole_only_once_the_node_is_back() -> None:
    members = [member("w-0", "worker", T0 - 60), member("w-1", "worker2", T0 - 60), member("w-2", "worker3", T0 - 60)]
    node = NodeTrace("worker", troubled=[[T0 + 55, T0 + 130]])
    assert kindcampaign.whole_again(members, 3, "worker", node, T0 + 55, T0 + 600) == T0 + 130
    assert kindcampaign.whole_again(members, 3, "worker", node, T0 + 55, T0 + 100) is None


def test_docker_stats_figures_read_in_mib() -> None:
    assert kindcampaign._mib("603.8MiB") == 603.8
    assert kindcampaign._mib("1.5GiB") == 1536.0
    assert kindcampaign._percent("6.43%") == 6.43


def test_every_kind_of_fault_comes_once_a_round() -> None:
    kinds = faults.once_a_round(kindfaults.Kind, random.Random(1))
    assert {next(kinds) for _ in range(len(kindfaults.Kind))} == set(kindfaults.Kind)


def test_a_network_cut_drops_both_ways_and_is_marked_for_its_removal() -> None:
    rules = kindfaults._rules("172.18.0.4")
    assert {(r[0], r[1]) for r in rules} == {("OUTPUT", "-d"), ("FORWARD", "-d"), ("INPUT", "-s"), ("FORWARD", "-s")}
    assert all(kindfaults.FAULT_COMMENT in r and r[-1] == "DROP" for r in rules)
