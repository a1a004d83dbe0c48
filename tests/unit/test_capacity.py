"""The cluster's room as the node and pod watches keep it: the same as counting it from scratch."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests import builders
from tests.builders import node
from yuniplace.admission.room import ClusterRoom
from yuniplace.gang.fit import Node, Room

NODES = ("n1", "n2", "n3")


def pod(uid: str, node_name: str | None, cpu: str = "1") -> dict[str, Any]:
    return builders.pod(
        uid,
        uid=uid,
        rv="1",
        requests={"cpu": cpu},
        node=node_name or None,
        phase="Running" if node_name else "Pending",
    )


def free(room: Room) -> dict[str, dict[str, int]]:
    return {n.name: dict(room.free_of(n.name)) for n in room.nodes}


events = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from([*NODES, None]),
        st.sampled_from(["500m", "1", "2"]),
    ),
    max_size=30,
)


@given(events=events, released=st.sets(st.sampled_from(["a", "b", "c", "d"])))
def test_room_kept_per_event_is_the_room_counted_from_scratch(
    events: list[tuple[str, str, str | None, str]], released: set[str]
) -> None:
    room = ClusterRoom()
    room.nodes_listed([node(name) for name in NODES])
    live: dict[str, dict[str, Any]] = {}
    for kind, uid, node_name, cpu in events:
        if kind == "DELETED":
            live.pop(uid, None)
            room.pod_event(kind, pod(uid, node_name, cpu))
            continue
        current = live.get(uid)
        if current is not None and current["spec"].get("nodeName"):
            continue  # a bound pod neither moves nor changes its requests
        live[uid] = pod(uid, node_name, cpu)
        room.pod_event(kind, live[uid])
    used: dict[str, dict[str, int]] = {}
    for uid, manifest in live.items():
        bound_to = manifest["spec"].get("nodeName")
        if bound_to and uid not in released:
            cpu = manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"]
            node_used = used.setdefault(bound_to, {"cpu": 0, "pods": 0})
            node_used["cpu"] += {"500m": 500, "1": 1000, "2": 2000}[cpu]
            node_used["pods"] += 1000
    expected = Room([Node.of(node(name)) for name in NODES], used)
    assert free(room.view().room(released=released)) == free(expected)


def test_a_node_heartbeat_frees_no_room_and_a_grown_node_does() -> None:
    freed: list[str] = []
    room = ClusterRoom(on_freed=lambda: freed.append("freed"))
    room.nodes_listed([node("n1")])
    freed.clear()
    heartbeat = node("n1")
    heartbeat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "now"}]
    room.node_event("MODIFIED", heartbeat)
    assert freed == []
    room.node_event("MODIFIED", node("n1", cpu="8"))
    assert freed == ["freed"]
    assert room.view().room().free_of("n1")["cpu"] == 8000
    room.node_event("ADDED", node("n2"))
    assert [n.name for n in room.view().room().nodes] == ["n1", "n2"]
    room.node_event("DELETED", node("n1"))
    assert [n.name for n in room.view().room().nodes] == ["n2"]
    assert [n.name for n in room.empty_room().nodes] == ["n2"]


def test_nodes_the_control_plane_keeps_new_pods_off_are_counted_apart() -> None:
    """A new node is tainted not-ready until kube-controller-manager sees it Ready; an unreachable or a
    cordoned node takes no new pods either; a tenant's own taint does not make a node closed."""
    room = ClusterRoom()
    not_ready = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    room.nodes_listed(
        [
            node("new", taints=not_ready),
            node("lost", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
            node("cordoned", unschedulable=True),
            node("pool", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]),
            node("plain"),
        ]
    )
    assert (room.node_count(), room.nodes_taking_pods()) == (5, 2)
    room.node_event("MODIFIED", node("new"))
    assert (room.node_count(), room.nodes_taking_pods()) == (5, 3)


node_events = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
        st.sampled_from(["n0", "n1", "n2", "n3", "n4"]),
        st.sampled_from(["2", "4", "8"]),
    ),
    max_size=30,
)


@given(events=node_events)
def test_nodes_kept_per_event_are_the_nodes_listed_from_scratch(events: list[tuple[str, str, str]]) -> None:
    room = ClusterRoom()
    room.nodes_listed([node("n1"), node("n3")])
    room.pod_event("ADDED", pod("a", "n1", "1"))
    live = {"n1": node("n1"), "n3": node("n3")}
    for kind, name, cpu in events:
        if kind == "DELETED":
            live.pop(name, None)
            room.node_event(kind, node(name))
        else:
            live[name] = node(name, cpu=cpu)
            room.node_event(kind, live[name])
        expected = Room([Node.of(n) for n in live.values()], {"n1": {"cpu": 1000, "pods": 1000}})
        assert [n.name for n in room.view().room().nodes] == [n.name for n in expected.nodes]
        assert free(room.view().room()) == free(expected)
        assert free(room.empty_room()) == free(Room([Node.of(n) for n in live.values()], {}))
