"""ai-scheduler's Pools as ai-scheduler runs them, on kwok nodes labelled for them: a Pool's gang that needs
more than its Pool owns borrows the most idle sharing Pool's nodes and runs whole, and the lender's own
gang takes them back (the borrower evicted whole); a Pool evicts its own lower-priority gangs before it
borrows; a Pool that does not borrow waits at home, and one that does not share is never lent; the default
pool owns the nodes no Pool selects and those two select; `yuniplace status --queues` shows ai-scheduler's
resource table, its figures those of the pods."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.e2e.support import Cluster, ControllerProcess, Placement, events_for, posted
from tests.e2e.test_queues import WAIT_S, app_pods, gang, gang_as_job, nodes_of, running, waiting
from yuniplace.gang import keys
from yuniplace.localcluster import wait_until

POOLS = f"{keys.AI_SCHEDULER_API}/pools"
MASTER = {"kubernetes.io/role": "master"}
EVERYTHING_OFF = {"disablePreemption": True, "disableBorrowing": True, "disableSharing": True}

pytestmark = pytest.mark.usefixtures("pool_api")


def make_pools(
    cluster: Cluster, place: Placement, suffix: str, *pools: tuple[str, Mapping[str, str], dict[str, Any]]
) -> dict[str, str]:
    """Pools named `<name>-<suffix>` selecting their labels and the test's own (so no other node joins);
    their names by short name."""
    names = {}
    for name, labels, spec in pools:
        names[name] = full = f"{name}-{suffix}"
        selector = {"matchLabels": {**labels, **place.node_selector}}
        cluster.client.create(
            POOLS,
            {
                "apiVersion": "resource.aibee.cn/v1alpha1",
                "kind": "Pool",
                "metadata": {"name": full},
                "spec": {"nodeSelector": selector, **spec},
            },
        )
    return names


def applied(cluster: Cluster, names: Mapping[str, str]) -> None:
    """Wait until the controller confirmed every Pool (QueuesApplied on each)."""

    def on_all() -> bool:
        seen = {
            e["involvedObject"]["name"]
            for e in events_for(cluster, "default", "QueuesApplied")
            if e["involvedObject"]["kind"] == "Pool"
        }
        return set(names.values()) <= seen

    wait_until(on_all, WAIT_S)


def in_pool(name: str) -> dict[str, str]:
    return {keys.AI_SCHEDULER_POOL: name}


def starting(cluster: Cluster, namespace: str) -> list[str]:
    """What the gangs of the namespace said as their reservation or start began."""
    return [
        e["message"]
        for reason in ("CreatingPlaceholders", "GangStarting")
        for e in events_for(cluster, namespace, reason)
    ]


def status_queues(cluster: Cluster) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "yuniplace", "status", "--queues", f"--kubeconfig={cluster.kubeconfig}", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_a_gang_larger_than_its_pool_borrows_the_most_idle_pool_and_the_lender_takes_it_back(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """ai-scheduler's examples (demo, masters) and two more Pools that share, spare and ml: demo owns one
    4-CPU node, spare one, ml two. A gang of 8 of demo lacks 4 CPUs at home; spare's idle room would hold
    half of the gang, ml's all of it: it borrows ml's nodes (never masters'), and runs whole.
    `status --queues` shows it as the pods do: what the borrower's pods on ml's nodes take is used there,
    and all of it shared. Then ml's own Job of 8 takes the room back: the borrower is evicted whole, the
    event naming both Pools, and the Job runs on ml's nodes."""
    place = pool(1, cpu="4", memory="16Gi", labels={"pool": "demo"})
    spare_nodes = set(pool(1, cpu="4", memory="16Gi", labels={"pool": "spare"}).nodes)
    ml_nodes = set(pool(2, cpu="4", memory="16Gi", labels={"pool": "ml"}).nodes)
    master_nodes = set(pool(1, cpu="4", memory="16Gi", labels=MASTER).nodes)
    names = make_pools(
        cluster,
        place,
        namespace[-6:],
        ("demo", {"pool": "demo"}, {}),
        ("spare", {"pool": "spare"}, {}),
        ("ml", {"pool": "ml"}, {}),
        ("masters", MASTER, EVERYTHING_OFF),
    )
    cluster_wide()
    applied(cluster, names)

    gang(cluster, namespace, place, "borrower", 8, annotations=in_pool(names["demo"]))
    borrower = running(cluster, namespace, "borrower", 8)
    on = nodes_of(borrower)
    assert on & ml_nodes and on <= set(place.nodes) | ml_nodes and not on & (spare_nodes | master_nodes), on
    borrows = f"root.{names['ml']} it borrows"  # in a GangStarting, posted after the gates it lifts
    posted(cluster, namespace, ("CreatingPlaceholders", "GangStarting"), saying=lambda note: borrows in note)
    on_ml = str(sum(1 for pod in borrower if pod["spec"]["nodeName"] in ml_nodes))  # 1 CPU a pod

    def table() -> dict[str, Any] | None:
        rows = {row["queue"]: row for row in status_queues(cluster)["pools"]}
        ml = rows.get(f"root.{names['ml']}")
        return rows if ml is not None and (ml["shared"] or {}).get("cpu") == on_ml else None

    rows = wait_until(table, WAIT_S)
    ml, demo = rows[f"root.{names['ml']}"], rows[f"root.{names['demo']}"]
    assert (ml["nodes"], ml["allocatable"]["cpu"], ml["used"]["cpu"], ml["shared"]["cpu"]) == (2, "8", on_ml, on_ml), ml
    assert (demo["used"]["cpu"], demo.get("shared") or {}) == (str(8 - int(on_ml)), {}), demo
    assert (ml["preemption"], ml["borrowing"], ml["sharing"]) == (True, True, True)
    masters = rows[f"root.{names['masters']}"]
    assert (masters["preemption"], masters["borrowing"], masters["sharing"]) == (False, False, False)

    gang_as_job(cluster, namespace, place, "train", 8, annotations=in_pool(names["ml"]))
    waiting(cluster, namespace, "train", f"taking back room its queue root.{names['ml']} lent to root.{names['demo']}")
    train = running(cluster, namespace, "train", 8)
    assert nodes_of(train) == ml_nodes
    wait_until(lambda: not app_pods(cluster, namespace, "borrower"), WAIT_S)  # bare pods: evicted whole, gone
    taken = [e["message"] for e in posted(cluster, namespace, "GangPreempted", on="borrower-")]
    assert (
        taken
        and f"queue root.{names['ml']} takes back room it is guaranteed and lent to queue root.{names['demo']}"
        in taken[0]
    ), taken
    assert "evicting all its pods, the whole gang" in taken[0]


def test_a_pool_evicts_its_own_lower_priority_gang_before_it_borrows(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    priority_classes: Callable[[int], str],
) -> None:
    """a's two nodes run its own low-priority gang; b's node is idle. a's high-priority gang of 4 evicts
    the low one, whole, rather than borrow b's node; a second high-priority gang, which can evict nothing
    of equal priority at home, borrows b's node."""
    place = pool(2, cpu="4", memory="16Gi", labels={"pool": "a"})
    b_nodes = set(pool(1, cpu="4", memory="16Gi", labels={"pool": "b"}).nodes)
    names = make_pools(cluster, place, namespace[-6:], ("a", {"pool": "a"}, {}), ("b", {"pool": "b"}, {}))
    cluster_wide()
    applied(cluster, names)
    low, high = priority_classes(10), priority_classes(1000)
    gang(cluster, namespace, place, "low", 8, annotations=in_pool(names["a"]), priority_class=low)
    running(cluster, namespace, "low", 8)
    gang(cluster, namespace, place, "high", 4, annotations=in_pool(names["a"]), priority_class=high)
    waiting(cluster, namespace, "high", f"evicting 1 lower-priority gang(s) of its queue root.{names['a']}")
    assert nodes_of(running(cluster, namespace, "high", 4)) <= set(place.nodes)
    wait_until(lambda: not app_pods(cluster, namespace, "low"), WAIT_S)
    assert not [message for message in starting(cluster, namespace) if "borrows" in message]

    gang(cluster, namespace, place, "more", 8, annotations=in_pool(names["a"]), priority_class=high)
    on = nodes_of(running(cluster, namespace, "more", 8))
    assert on & b_nodes and on <= set(place.nodes) | b_nodes, on
    assert len(app_pods(cluster, namespace, "high")) == 4  # the equal-priority gang at home stays


def test_a_pool_that_does_not_borrow_waits_at_home_and_masters_is_never_lent(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    place = pool(1, cpu="4", memory="16Gi", labels={"pool": "stay"})
    master_nodes = set(pool(1, cpu="4", memory="16Gi", labels=MASTER).nodes)
    names = make_pools(
        cluster,
        place,
        namespace[-6:],
        ("stay", {"pool": "stay"}, {"disableBorrowing": True}),
        ("masters", MASTER, EVERYTHING_OFF),
    )
    cluster_wide()
    applied(cluster, names)
    gang(cluster, namespace, place, "homebody", 6, annotations=in_pool(names["stay"]))
    note = waiting(cluster, namespace, "homebody", "and it does not borrow")
    assert f"queue root.{names['stay']}" in note, note
    everywhere = cluster.client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert not {p["spec"].get("nodeName") for p in everywhere} & master_nodes


def test_the_default_pool_owns_the_nodes_no_pool_selects_and_those_two_select(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """A node of no Pool and a node both a and b select: a gang naming no Pool runs on exactly those two,
    and neither a's nor b's guarantee counts the node they share."""
    place = pool(1, cpu="4", memory="16Gi")  # no Pool's
    shared = set(pool(1, cpu="4", memory="16Gi", labels={"pool": "a", "team": "b"}).nodes)
    a_nodes = set(pool(1, cpu="4", memory="16Gi", labels={"pool": "a"}).nodes)
    b_nodes = set(pool(1, cpu="4", memory="16Gi", labels={"team": "b"}).nodes)
    names = make_pools(cluster, place, namespace[-6:], ("a", {"pool": "a"}, {}), ("b", {"team": "b"}, {}))
    controller = cluster_wide()
    applied(cluster, names)
    gang(cluster, namespace, place, "nameless", 8)
    on = nodes_of(running(cluster, namespace, "nameless", 8))
    assert on == set(place.nodes) | shared, (on, a_nodes, b_nodes)
    guaranteed = {
        f'yuniplace_queue_guaranteed{{queue="root.{names["a"]}",resource="cpu"}}': 4.0,
        f'yuniplace_queue_guaranteed{{queue="root.{names["b"]}",resource="cpu"}}': 4.0,
    }
    wait_until(lambda: guaranteed.items() <= controller.metrics().items(), WAIT_S)
