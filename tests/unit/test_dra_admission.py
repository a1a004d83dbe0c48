"""Admission of gangs whose members ask for DRA devices, over a real PodStore, ClusterRoom and
DeviceInventory fed with plain dicts: devices counted per node and class, a gang that does not fit its
devices waits whole and says why, and none starts directly (a nomination holds no device)."""

from __future__ import annotations

from typing import Any

from tests import builders
from tests.unit.test_gang_admission import NS, World
from yuniplace.admission.tickets import Granted, Waiting
from yuniplace.devices.claims import class_resource
from yuniplace.gang import keys
from yuniplace.runtime.events import Reason

DRIVER = "gpu.example.com"
GPU = class_resource("gpu")


def world(per_node: int = 2, nodes: int = 2, held: tuple[str, ...] = (), **rules: Any) -> World:
    """`nodes` nodes of 16 CPU, each with `per_node` devices of class gpu; the devices of the nodes
    `held` taken by claims of other pods."""
    names = [f"n{i}" for i in range(nodes)]
    made = World([builders.node(name, "16", memory="64Gi") for name in names], [], **rules)
    devices = made.admission.devices
    devices.served = True
    devices.classes_listed([builders.device_class("gpu", DRIVER)])
    devices.slices_listed(
        [builders.resource_slice(f"{n}-gpus", n, DRIVER, [f"g{i}" for i in range(per_node)]) for n in names]
    )
    template = builders.claim_template("two", builders.device_request("gpu", 2))
    template["metadata"]["namespace"] = NS
    devices.templates_listed([template])
    taken = []
    for node in held:
        claim = builders.resource_claim(f"taken-{node}", builders.device_request("gpu", per_node))
        claim["metadata"]["namespace"] = "other"
        results = [{"request": "devices", "driver": DRIVER, "pool": node, "device": f"g{i}"} for i in range(per_node)]
        claim["status"] = {"allocation": {"devices": {"results": results}}}
        taken.append(claim)
    devices.claims_listed(taken)
    return made


def gated(name: str, app: str, group: str, groups: list[dict[str, Any]], **requests: str) -> dict[str, Any]:
    """A member of `app` in `group` (each carries the task groups), gated, asking `requests` (cpu 1 by default)."""
    return builders.member(
        name,
        app=app,
        group=group,
        task_groups=groups,
        namespace=NS,
        uid=f"uid-{name}",
        rv="1",
        created="2026-01-01T00:00:00Z",
        requests=requests or {"cpu": "1"},
        gates=[keys.GATE],
        phase="Pending",
    )


def gpu_gang(
    made: World, app: str, members: int, template: str = "two", min_resource: dict[str, str] | None = None
) -> None:
    """A gang of `members` pods, each using a claim of `template`."""
    groups = [builders.task_group("workers", members, min_resource or {"cpu": "1"})]
    pods = [
        builders.using_claims(
            gated(f"{app}-{i}", app, "workers", groups),
            templates=[template],
        )
        for i in range(members)
    ]
    for pod in pods:
        made.store.upsert(pod)
        made.room.pod_event("ADDED", pod)


def test_a_gang_asking_more_devices_than_all_nodes_have_waits_whole_naming_the_class() -> None:
    made = world()
    gpu_gang(made, "big", 3)
    ticket = made.ticket("big")
    assert isinstance(ticket, Waiting) and ticket.reason is Reason.GANG_EXCEEDS_CAPACITY, ticket
    assert ticket.times_out
    assert f"2 of 3 pods of (cpu 1, {GPU} 2) fit" in ticket.message, ticket.message
    assert f"the nodes have 4 of {GPU} on 2 node(s)" in ticket.message, ticket.message


def test_a_gang_that_fits_its_devices_reserves_with_placeholders_never_seats() -> None:
    made = world()
    gpu_gang(made, "fits", 2)
    ticket = made.ticket("fits")
    assert isinstance(ticket, Granted) and ticket.warning is None and ticket.seats == (), ticket


def test_devices_another_claim_holds_are_not_free() -> None:
    made = world(held=("n0",))
    gpu_gang(made, "waits", 2)
    ticket = made.ticket("waits")
    assert isinstance(ticket, Waiting) and ticket.reason is Reason.GANG_WAITING, ticket
    assert f"1 of 2 pods of (cpu 1, {GPU} 2) fit" in ticket.message, ticket.message


def test_devices_freed_wake_admission_and_the_gang_is_admitted() -> None:
    made = world(held=("n0",))
    gpu_gang(made, "waits", 2)
    assert isinstance(made.ticket("waits"), Waiting)
    made.admission.devices.claim_event("DELETED", {"metadata": {"name": "taken-n0", "namespace": "other"}})
    assert isinstance(made.ticket("waits"), Granted)


def test_a_gang_whose_devices_cannot_be_counted_waits_and_says_why() -> None:
    made = world()
    gpu_gang(made, "odd", 2, template="missing")
    ticket = made.ticket("odd")
    assert isinstance(ticket, Waiting) and ticket.reason is Reason.GANG_DEVICES, ticket
    assert "pod odd-0: ResourceClaimTemplate missing does not exist" in ticket.message, ticket.message


def test_devices_a_task_group_names_count_for_members_yet_to_come() -> None:
    """A Spark driver alone: its executors' devices, named in their task group's minResource, count."""
    made = world()
    groups = [
        builders.task_group("driver", 1, {"cpu": "1"}),
        builders.task_group("executors", 3, {"cpu": "1", GPU: "2"}),
    ]
    originator = gated("driver", "spark", "driver", groups)
    made.store.upsert(originator)
    ticket = made.ticket("spark")
    assert isinstance(ticket, Waiting) and ticket.reason is Reason.GANG_EXCEEDS_CAPACITY, ticket
    assert "spark/executors: 2 of 3 pods" in ticket.message, ticket.message


def test_where_dra_is_not_served_nothing_is_counted() -> None:
    made = world()
    made.admission.devices.served = False
    gpu_gang(made, "plain", 3)
    ticket = made.ticket("plain")
    assert isinstance(ticket, Granted) and ticket.seats, ticket  # as before: it fits by CPU, and starts directly


def extended_gang(made: World, app: str, members: int) -> None:
    """A gang whose members ask 2 devices each by the extended resource the class names."""
    groups = [builders.task_group("workers", members, {"cpu": "1", "example.com/gpu": "2"})]
    for i in range(members):
        pod = gated(f"{app}-{i}", app, "workers", groups, **{"cpu": "1", "example.com/gpu": "2"})
        made.store.upsert(pod)
        made.room.pod_event("ADDED", pod)


def test_devices_asked_by_an_extended_resource_are_counted_from_the_slices() -> None:
    """No node advertises example.com/gpu: the class that names it has 2 devices on each of 2 nodes. 3
    members of 2 wait whole (no autoscaler makes devices: never admitted to grow); 2 fit."""
    made = world()
    gpu = builders.device_class("gpu", DRIVER, extended_resource="example.com/gpu")
    made.admission.devices.classes_listed([gpu])
    extended_gang(made, "big", 3)
    ticket = made.ticket("big")
    assert isinstance(ticket, Waiting) and ticket.reason is Reason.GANG_EXCEEDS_CAPACITY, ticket
    assert "2 of 3 pods of (cpu 1, example.com/gpu 2) fit" in ticket.message, ticket.message
    extended_gang(made, "fits", 2)
    assert isinstance(made.ticket("fits"), Granted)


def test_a_claim_the_members_share_is_counted_once_for_the_gang() -> None:
    """2 GPUs on one node and a channel: 2 members of 1 GPU each and the one channel claim they share fit
    (counted per member the channel would not); 3 members never fit, and saying so counts the shared claim
    without a pod of its own."""
    made = world(per_node=2, nodes=1)
    devices = made.admission.devices
    devices.classes_listed([builders.device_class("gpu", DRIVER), builders.device_class("chan", "chan.example.com")])
    devices.slices_listed(
        [
            builders.resource_slice("n0-gpus", "n0", DRIVER, ["g0", "g1"]),
            builders.resource_slice("n0-chan", "n0", "chan.example.com", ["c0"]),
        ]
    )
    one = builders.claim_template("one", builders.device_request("gpu", 1))
    one["metadata"]["namespace"] = NS
    devices.templates_listed([one])
    channel = builders.resource_claim("channel", builders.device_request("chan", 1))
    channel["metadata"]["namespace"] = NS
    devices.claims_listed([channel])
    for app, members in (("pair", 2), ("trio", 3)):
        groups = [builders.task_group("workers", members, {"cpu": "1"})]
        for i in range(members):
            pod = gated(f"{app}-{i}", app, "workers", groups)
            made.store.upsert(builders.using_claims(pod, templates=["one"], claims=["channel"]))
    assert isinstance(made.ticket("pair"), Granted)
    trio = made.ticket("trio")
    assert isinstance(trio, Waiting) and trio.reason is Reason.GANG_EXCEEDS_CAPACITY, trio
