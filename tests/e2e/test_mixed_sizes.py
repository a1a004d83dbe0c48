"""Gangs whose members differ in size, as operators write them: a PodGroup or Coscheduling labels over
an MPI launcher and its workers (smaller launcher) or a training master and its workers (larger
master), on a cluster with room for all but one worker. No member runs until every member fits as it
is, whichever pod was created first; then all of them start, each into room of its own size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    NamespaceRecorder,
    Placement,
    assert_on_held_room,
    events_for,
    fill,
    is_running,
    make_pod,
)
from yuniplace.gang import keys
from yuniplace.gang.dialects import coscheduling, podgroup
from yuniplace.localcluster import wait_until

GANG = "mpi"
# (name, CPUs) of each member, in the order the test creates them.
SMALL_LAUNCHER = [("launcher", "1"), ("worker-0", "2"), ("worker-1", "2")]
LARGE_MASTER = [("master", "2"), ("worker-0", "1"), ("worker-1", "1")]
# CPUs already taken on each of three 2-CPU nodes: room for all but one worker (and, sized like any one
# of its pods, for a gang of three), and what frees the last worker's room.
BLOCKERS = {
    "small-launcher": ({0: "1", 1: "1"}, 1),  # free 1, 1, 2: launcher + one 2-CPU worker
    "large-master": ({0: "1", 1: "2"}, 1),  # free 1, 0, 2: master + one 1-CPU worker
}
CASES = [
    ("podgroup", "small-launcher", SMALL_LAUNCHER),
    ("podgroup", "small-launcher", SMALL_LAUNCHER[::-1]),
    ("coscheduling", "large-master", LARGE_MASTER),
    ("coscheduling", "large-master", LARGE_MASTER[::-1]),
]


def member(dialect: str, name: str, cpu: str, place: Placement) -> dict[str, Any]:
    """A gang member as its operator creates it; gated, as yuniplace's webhook gates it."""
    role = name.split("-")[0]
    labels = {"training.kubeflow.org/job-role": role}
    if dialect == "podgroup":
        labels[podgroup.LABEL] = GANG
    else:
        labels |= {coscheduling.NAME: GANG, coscheduling.MIN_AVAILABLE: "3"}
    return place.pin(make_pod(f"{GANG}-{name}", cpu=cpu, memory="256Mi", labels=labels, gates=[keys.GATE]))


@pytest.mark.every_version
@pytest.mark.usefixtures("pod_group_api")
@pytest.mark.parametrize(
    ("dialect", "shape", "order"),
    CASES,
    ids=[f"{dialect}-{shape}-{order[0][0]}-first" for dialect, shape, order in CASES],
)
def test_no_member_runs_until_every_member_fits_as_it_is(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    recorder: NamespaceRecorder,
    controller: ControllerProcess,
    dialect: str,
    shape: str,
    order: list[tuple[str, str]],
    tmp_path: Path,
) -> None:
    place = pool(3, cpu="2", memory="4Gi")
    taken, freed = BLOCKERS[shape]
    for index, cpu in taken.items():
        fill(cluster, namespace, place, place.nodes[index], f"blocker-{index}", cpu)
    if dialect == "podgroup":
        cluster.client.create(
            f"{podgroup.API}/namespaces/{namespace}/podgroups",
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": GANG},
                "spec": {"minMember": 3, "minResources": {"cpu": "5" if shape == "small-launcher" else "4"}},
            },
        )
    for name, cpu in order:
        cluster.create_pod(namespace, member(dialect, name, cpu, place))

    waiting = wait_until(lambda: events_for(cluster, namespace, "GangWaiting"), 60)[0]
    worker_cpu = dict(order)["worker-0"]
    assert f"1 of 2 pods of (cpu {worker_cpu}, memory 256Mi) fit" in waiting["message"], waiting
    members = [f"{GANG}-{name}" for name, _ in order]
    assert not [name for name in members if cluster.get_pod(namespace, name)["spec"].get("nodeName")], (
        "a member ran alone"
    )

    cluster.client.delete(f"/api/v1/namespaces/{namespace}/pods/blocker-{freed}", {"gracePeriodSeconds": 0})
    running = [cluster.wait_pod(namespace, name, is_running, timeout_s=60) for name in members]
    assert not events_for(cluster, namespace, "TaskGroupResourceMismatch")
    # Every member ran where room of its own size was held for it: its seat, or its shape's placeholder.
    assert_on_held_room(recorder, running)
