"""Queue settings that must do what the README says they do, on the real control plane: ordering by
arrival alone when priority sorting is disabled, a queue whose gangs are never reclaim's victims,
reclaim that takes no more gangs than the waiting gang needs whatever starts the next admission cycle,
maxapplications, and YuniKorn's limits per user and per group, who being recorded by the webhook the
chart installs. Outcomes and orders are asserted, never times."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.builders import queues_yaml
from tests.e2e.support import (
    Cluster,
    ControllerProcess,
    Placement,
    chart_installed,
    editors,
    events_for,
    finish,
    gang_pod,
    is_running,
    posted,
    put_queues,
)
from tests.e2e.test_identity import As
from tests.e2e.test_queues import (
    WAIT_S,
    YUNIKORN_QUEUE,
    app_placeholders,
    app_pods,
    configured,
    gang,
    running,
    waiting,
)
from yuniplace.gang.userinfo import UserInfo
from yuniplace.kube import NotFound
from yuniplace.localcluster import wait_until
from yuniplace.localcluster.components import LINGERS_ANNOTATION

pytestmark = pytest.mark.every_version


def preempted(cluster: Cluster, namespace: str) -> list[str]:
    """The applications GangPreempted was posted for, in the order posted."""
    events = sorted(events_for(cluster, namespace, "GangPreempted"), key=lambda e: e["metadata"]["creationTimestamp"])
    return [e["involvedObject"]["name"].rpartition("-")[0] for e in events]


@contextmanager
def lingering(cluster: Cluster, namespace: str, place: Placement) -> Iterator[Callable[..., None]]:
    """`start(app, queue)` starts a gang of one pod of 2 CPUs that, once evicted, stays on its node,
    terminating, until the block ends or `release` lets it go, as a pod slow to stop does."""
    started: list[str] = []

    def start(app: str, queue: str) -> None:
        [group] = [place.group("workers", 1, cpu="2", memory="256Mi")]
        pod = place.pin(gang_pod(f"{app}-0", app, "workers", task_groups=[group], cpu="2", memory="256Mi"))
        pod["metadata"]["labels"][YUNIKORN_QUEUE] = queue
        pod["metadata"]["annotations"][LINGERS_ANNOTATION] = "true"
        pod["spec"]["terminationGracePeriodSeconds"] = 30  # 0 would delete it at once, without a kubelet
        cluster.create_pod(namespace, pod)
        started.append(app)
        running(cluster, namespace, app, 1)

    try:
        yield start
    finally:
        release(cluster, namespace, *started)


def release(cluster: Cluster, namespace: str, *apps: str) -> None:
    for app in apps:
        for pod in app_pods(cluster, namespace, app):
            if LINGERS_ANNOTATION in (pod["metadata"].get("annotations") or {}):
                with suppress(NotFound):  # gone already
                    cluster.client.patch(
                        f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                        {"metadata": {"annotations": {LINGERS_ANNOTATION: None}}},
                    )


# -- application.sort.priority: disabled ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["queue", "root"])
def test_with_priority_sorting_disabled_an_earlier_low_priority_gang_goes_first(
    cluster: Cluster,
    namespace: str,
    pool: Callable[..., Placement],
    cluster_wide: Callable[..., ControllerProcess],
    priority_classes: Callable[[int], str],
    where: str,
) -> None:
    """YuniKorn's `application.sort.priority: disabled`, on the queue or on root (whence it passes down):
    a high-priority gang submitted after a low-priority one waits behind it, and the low one runs first."""
    disabled = "\n  properties:\n    application.sort.priority: disabled"
    text = queues_yaml(f"- name: batch{disabled if where == 'queue' else ''}")
    if where == "root":
        text = text.replace(
            "submitacl: '*'\n", "submitacl: '*'\n        properties:\n          application.sort.priority: disabled\n"
        )
    put_queues(cluster, namespace, text)
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(1, cpu="4", memory="16Gi")
    queue = {YUNIKORN_QUEUE: "root.batch"}
    low, high = priority_classes(10), priority_classes(1000)
    holder = gang(cluster, namespace, place, "holder", 4, labels=queue)
    running(cluster, namespace, "holder", 4)
    gang(cluster, namespace, place, "low", 4, labels=queue, priority_class=low)
    waiting(cluster, namespace, "low", "first in queue root.batch")
    gang(cluster, namespace, place, "high", 4, labels=queue, priority_class=high)
    waiting(cluster, namespace, "high", f"position 2 in queue root.batch, behind {namespace}/low")

    for name in holder:
        finish(cluster, namespace, name)
    running(cluster, namespace, "low", 4)
    assert not app_placeholders(cluster, namespace, "high")
    assert not any(is_running(p) for p in app_pods(cluster, namespace, "high"))


# -- preemption.policy: disabled -------------------------------------------------------------------------


def test_a_queue_with_preemption_disabled_is_never_a_victim_and_reclaim_takes_another(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """Queues s2 (`preemption.policy: disabled`) and s3 borrow s1's idle guarantee, s2's gang last. When
    s1 takes its guarantee back, reclaim passes over s2's newer gang and evicts s3's, whole."""
    put_queues(
        cluster,
        namespace,
        queues_yaml(
            "- name: s1\n  resources:\n    guaranteed: {vcore: 4}",
            "- name: s2\n  properties:\n    preemption.policy: disabled",
            "- name: s3",
        ),
    )
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(2, cpu="4", memory="16Gi")
    s3 = gang(cluster, namespace, place, "s3gang", 3, labels={YUNIKORN_QUEUE: "root.s3"})
    running(cluster, namespace, "s3gang", 3)
    gang(cluster, namespace, place, "gd", 3, labels={YUNIKORN_QUEUE: "root.s2"})
    guarded = running(cluster, namespace, "gd", 3)

    gang(cluster, namespace, place, "reclaimer", 4, labels={YUNIKORN_QUEUE: "root.s1"})
    running(cluster, namespace, "reclaimer", 4)
    wait_until(lambda: not app_pods(cluster, namespace, "s3gang"), WAIT_S)
    posted(cluster, namespace, "GangPreempted")
    assert preempted(cluster, namespace) == ["s3gang"] and len(s3) == 3
    assert {p["metadata"]["uid"] for p in running(cluster, namespace, "gd", 3)} == {
        p["metadata"]["uid"] for p in guarded
    }


# -- reclaim takes only what it needs --------------------------------------------------------------------


def test_reclaim_takes_one_gang_when_one_is_enough_whatever_triggers_the_next_cycles(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    """Queue r is guaranteed 4 of 8 CPUs and fenced (it does not reclaim); queue a runs three gangs of
    2 CPUs in it. r's gang of 4 waits with 2 CPUs free. A live edit lifts the fence: one of a's gangs,
    the newest, is enough and is evicted. While its pods are still terminating (held there as a pod slow to stop is),
    further cycles are started by a pod event, another ConfigMap edit and a head's claim running out:
    none takes a second gang. Once the victim is gone, r's gang runs and a's other two never stopped."""

    def config(fenced: bool, extra: str = "") -> str:
        fence = "\n  properties:\n    preemption.policy: fence" if fenced else ""
        return queues_yaml(
            f"- name: r\n  resources:\n    guaranteed: {{vcore: 4}}{fence}", "- name: a", f"- name: c{extra}"
        )

    put_queues(cluster, namespace, config(fenced=True))
    cluster_wide(f"--queues-configmap={namespace}/queues", "--head-claim=1")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(2, cpu="4", memory="16Gi")
    with lingering(cluster, namespace, place) as start:
        for name in ("a1", "a2", "a3"):
            start(name, "root.a")
        gang(cluster, namespace, place, "rgang", 2, cpu="2", labels={YUNIKORN_QUEUE: "root.r"})
        waiting(cluster, namespace, "rgang", "waiting for free capacity")
        assert preempted(cluster, namespace) == []

        put_queues(cluster, namespace, config(fenced=False))  # cycle 1: a ConfigMap edit
        configured(cluster, namespace, "QueuesApplied", 2)
        wait_until(lambda: preempted(cluster, namespace), WAIT_S)
        assert preempted(cluster, namespace) == ["a3"]
        victim = app_pods(cluster, namespace, "a3")
        wait_until(
            lambda: all(p["metadata"].get("deletionTimestamp") for p in app_pods(cluster, namespace, "a3")), WAIT_S
        )
        assert victim, "the victim's pods linger, terminating"

        # A pod event: a new gang of queue c, too large for the free room, becomes its queue's head.
        gang(cluster, namespace, place, "cgang", 4, cpu="2", labels={YUNIKORN_QUEUE: "root.c"})
        # A timer: the head's claim runs out after --head-claim, which only a timed cycle notices.
        waiting(cluster, namespace, "cgang", "it no longer holds room for itself")
        put_queues(cluster, namespace, config(fenced=False, extra="\n  maxapplications: 10"))  # another edit
        configured(cluster, namespace, "QueuesApplied", 3)
        waiting(cluster, namespace, "rgang", "1 gang(s) going")
        assert preempted(cluster, namespace) == ["a3"]

        release(cluster, namespace, "a3")
        running(cluster, namespace, "rgang", 2)
        assert preempted(cluster, namespace) == ["a3"]
        for name in ("a1", "a2"):
            [pod] = running(cluster, namespace, name, 1)
            assert not pod["metadata"].get("deletionTimestamp")


# -- maxapplications, and the limits of users and groups ---------------------------------------------------


def test_a_queue_at_its_maxapplications_holds_its_next_gang_while_room_is_free(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], cluster_wide: Callable[..., ControllerProcess]
) -> None:
    put_queues(cluster, namespace, queues_yaml("- name: batch\n  maxapplications: 1"))
    cluster_wide(f"--queues-configmap={namespace}/queues")
    configured(cluster, namespace, "QueuesApplied")
    place = pool(1, cpu="8", memory="32Gi")
    queue = {YUNIKORN_QUEUE: "root.batch"}
    first = gang(cluster, namespace, place, "first", 2, labels=queue)
    running(cluster, namespace, "first", 2)
    gang(cluster, namespace, place, "second", 2, labels=queue)
    waiting(cluster, namespace, "second", "queue root.batch is at its maxapplications: 1 of 1 applications running")
    assert not app_placeholders(cluster, namespace, "second")
    for name in first:
        finish(cluster, namespace, name)
    running(cluster, namespace, "second", 2)


@pytest.fixture
def people(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Callable[[UserInfo], As]]:
    """yuniplace installed by its chart (its webhook records who creates each gang pod), reading the
    queues ConfigMap `queues` of the test's namespace; `as_(user)` acts as that user, who may edit there."""
    editors(cluster, namespace, "alice", "bob", "carol")
    values = {"queues.configMap": "queues", "queues.configMapNamespace": namespace}
    with chart_installed(cluster, namespace, tmp_path / "chart", values):
        yield lambda user: As(cluster, namespace, tmp_path, user)


def submitted(person: As, place: Placement, app: str, members: int, queue: str) -> None:
    """A gang of `members` pods of 1 CPU, created by `person` through the webhook (which gates them and
    records who created them)."""
    groups = [place.group("workers", members, cpu="1", memory="256Mi")]
    for index in range(members):
        pod = place.pin(
            gang_pod(f"{app}-{index}", app, "workers", task_groups=groups, cpu="1", memory="256Mi", gated=False)
        )
        pod["metadata"]["labels"][YUNIKORN_QUEUE] = queue
        person.create(pod)


ALICE = UserInfo("alice", ("devs",))
BOB = UserInfo("bob", ("devs",))
CAROL = UserInfo("carol", ("ops",))


def test_a_user_over_their_maxapplications_waits_while_another_user_of_the_queue_runs(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], people: Callable[[UserInfo], As]
) -> None:
    put_queues(
        cluster,
        namespace,
        queues_yaml("- name: ml\n  limits:\n    - limit: one each\n      users: ['*']\n      maxapplications: 1"),
    )
    configured(cluster, namespace, "QueuesApplied")
    place = pool(1, cpu="8", memory="32Gi")
    alice, bob = people(ALICE), people(BOB)
    submitted(alice, place, "first", 2, "root.ml")
    running(cluster, namespace, "first", 2)
    submitted(alice, place, "second", 2, "root.ml")
    waiting(
        cluster,
        namespace,
        "second",
        "user alice is at the limit 'one each' of queue root.ml: 1 of 1 applications running",
    )
    submitted(bob, place, "bobs", 2, "root.ml")
    running(cluster, namespace, "bobs", 2)
    assert not app_placeholders(cluster, namespace, "second")
    for index in range(2):
        finish(cluster, namespace, f"first-{index}")
    running(cluster, namespace, "second", 2)


def test_a_groups_maxresources_holds_across_two_users_of_the_group(
    cluster: Cluster, namespace: str, pool: Callable[..., Placement], people: Callable[[UserInfo], As]
) -> None:
    put_queues(
        cluster,
        namespace,
        queues_yaml("- name: ml\n  limits:\n    - limit: devs\n      groups: [devs]\n      maxresources: {vcore: 3}"),
    )
    configured(cluster, namespace, "QueuesApplied")
    place = pool(1, cpu="8", memory="32Gi")
    submitted(people(ALICE), place, "alices", 2, "root.ml")
    running(cluster, namespace, "alices", 2)
    submitted(people(BOB), place, "bobs", 2, "root.ml")
    waiting(cluster, namespace, "bobs", "group devs is at the limit 'devs' of queue root.ml: 2 of 3 cpu used")
    submitted(people(CAROL), place, "carols", 2, "root.ml")
    running(cluster, namespace, "carols", 2)
    assert not app_placeholders(cluster, namespace, "bobs")
    for index in range(2):
        finish(cluster, namespace, f"alices-{index}")
    running(cluster, namespace, "bobs", 2)
