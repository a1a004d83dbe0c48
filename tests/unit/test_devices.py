"""DRA devices as admission reads them: CEL selectors evaluated as kube-scheduler evaluates them, what a
claim's requests count, and the devices of every node (published, matching, held by a claim)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders
from yuniplace.admission.room import RoomView
from yuniplace.devices.claims import (
    ONE_DEVICE,
    Kind,
    UnsupportedClaim,
    amounts_of,
    claim_names,
    class_resource,
    device_class_of,
    holding_entries,
    pod_claims,
    requests_of,
)
from yuniplace.devices.inventory import DeviceCounts, DeviceInventory
from yuniplace.devices.selectors import Device, SelectorError, compile_selector
from yuniplace.gang.fit import Constraints, Node

DRIVER = "gpu.example.com"
GPU = Device.of(
    DRIVER,
    {
        "name": "gpu-0",
        "attributes": {
            "model": {"string": "a100"},
            "driverVersion": {"version": "1.2.3"},
            "index": {"int": 0},
            "other.example.com/numa": {"int": 1},
        },
        "capacity": {"memory": {"value": "40Gi"}},
    },
)


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        (f'device.driver == "{DRIVER}"', True),
        ('device.driver == "nic.example.com"', False),
        (f'device.attributes["{DRIVER}"].model == "a100"', True),
        ('device.attributes["other.example.com"].numa == 1', True),
        (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("32Gi")) > 0', True),
        (f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("32Gi"))', False),
        (f'device.capacity["{DRIVER}"].memory.asInteger() == 42949672960', True),
        (f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        (f'device.attributes["{DRIVER}"].driverVersion == semver("v1.2.3", true)', True),
        (f'device.attributes["{DRIVER}"].driverVersion.major() == 1', True),
        # A domain no attribute of the device names reads as an empty map, as Kubernetes gives it.
        ('!has(device.attributes["nic.example.com"].speed)', True),
        (f'device.attributes["{DRIVER}"].?missing.orValue("none") == "none"', True),
        (f'cel.bind(gpu, device.attributes["{DRIVER}"], gpu.model.startsWith("a") && gpu.index == 0)', True),
    ],
)
def test_selectors_are_evaluated_as_kubernetes_evaluates_them(expression: str, matches: bool) -> None:
    assert compile_selector(expression).matches(GPU) is matches


def test_a_missing_attribute_is_a_runtime_error_as_it_is_for_kube_scheduler() -> None:
    with pytest.raises(SelectorError, match="CEL runtime error"):
        compile_selector(f'device.attributes["{DRIVER}"].memoryBandwidth > 1').matches(GPU)


def test_a_function_this_environment_lacks_is_a_compile_error_that_says_so() -> None:
    with pytest.raises(SelectorError, match="CEL compile error.*ip"):
        compile_selector('ip("10.0.0.1").family() == 4')


def test_a_selector_that_is_no_bool_is_never_a_match() -> None:
    with pytest.raises(SelectorError, match="not a bool"):
        compile_selector("device.driver").matches(GPU)


# -- claims -------------------------------------------------------------------------------------------


def test_requests_count_devices_under_their_class_and_narrowed_kinds() -> None:
    spec = builders.claim_spec(
        builders.device_request("gpu", 2),
        builders.device_request("gpu", 1, name="big", selectors=['device.attributes["x"].big']),
        builders.device_request("nic", name="all", mode="All"),
    )
    requests = requests_of(spec)
    assert [r.count for r in requests] == [2, 1, 1]
    narrowed, every = requests[1].kind, requests[2].kind
    assert narrowed.resource.startswith(class_resource("gpu") + "[") and device_class_of(narrowed.resource) == "gpu"
    assert every.resource == class_resource("nic") + "[all]"
    assert amounts_of(requests) == {
        class_resource("gpu"): 3 * ONE_DEVICE,  # the narrowed request takes from its class's count too
        narrowed.resource: ONE_DEVICE,
        every.resource: ONE_DEVICE,
    }


def test_admin_access_takes_no_device() -> None:
    request = builders.device_request("gpu", 1)
    request["exactly"]["adminAccess"] = True
    assert requests_of(builders.claim_spec(request)) == ()


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        ({"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu"}]}, "firstAvailable"),
        ({"name": "r", "exactly": {}}, "names no device class"),
        ({"name": "r", "exactly": {"deviceClassName": "gpu", "count": 0}}, "count 0"),
    ],
)
def test_requests_that_cannot_be_counted_say_why(request_: dict[str, Any], says: str) -> None:
    with pytest.raises(UnsupportedClaim, match=says):
        requests_of(builders.claim_spec(request_))


def test_a_pods_claims_are_named_once_its_template_claims_are_made() -> None:
    pod = builders.using_claims(builders.pod("m"), templates=["two"], claims=["channel"])
    assert [(c.name, c.template, c.claim) for c in pod_claims(pod)] == [("t0", "two", None), ("c0", None, "channel")]
    assert claim_names(pod) is None
    pod["status"] = {"resourceClaimStatuses": [{"name": "t0", "resourceClaimName": "m-t0-x1y2z"}]}
    assert claim_names(pod) == ("m-t0-x1y2z", "channel")
    assert holding_entries(pod) == [
        {"name": "t0", "resourceClaimName": "m-t0-x1y2z"},
        {"name": "c0", "resourceClaimName": "channel"},
    ]


# -- the inventory -------------------------------------------------------------------------------------


def inventory(*slices: dict[str, Any], claims: tuple[dict[str, Any], ...] = ()) -> DeviceInventory:
    devices = DeviceInventory()
    devices.classes_listed(
        [
            builders.device_class("gpu", DRIVER),
            builders.device_class("a100", DRIVER, selectors=[f'device.attributes["{DRIVER}"].model == "a100"']),
        ]
    )
    devices.slices_listed(list(slices))
    devices.claims_listed(list(claims))
    return devices


def allocated(name: str, *devices: tuple[str, str]) -> dict[str, Any]:
    """A claim allocated the devices (pool, device) of the driver."""
    claim = builders.resource_claim(name, builders.device_request("gpu", len(devices)))
    claim["metadata"]["namespace"] = "team"
    results = [{"request": "devices", "driver": DRIVER, "pool": pool, "device": d} for pool, d in devices]
    claim["status"] = {"allocation": {"devices": {"results": results}}}
    return claim


def models(*names: str) -> dict[str, dict[str, Any]]:
    return {name: {"model": {"string": "a100" if name.endswith("a") else "h100"}} for name in names}


def test_free_devices_per_node_are_those_matching_less_those_claims_hold() -> None:
    devices = inventory(
        builders.resource_slice("s1", "n1", DRIVER, ["g0a", "g1a", "g2"], attributes=models("g0a", "g1a", "g2")),
        builders.resource_slice("s2", "n2", DRIVER, ["g0a", "g1"], attributes=models("g0a", "g1")),
        claims=(allocated("c", ("n1", "g0a")),),
    )
    counts = devices.count([Kind("gpu"), Kind("a100")])
    gpu, a100 = class_resource("gpu"), class_resource("a100")
    assert counts.total == {"n1": {gpu: 3000, a100: 2000}, "n2": {gpu: 2000, a100: 1000}}
    assert counts.free == {"n1": {gpu: 2000, a100: 1000}, "n2": {gpu: 2000, a100: 1000}}
    assert not counts.problems and not counts.uncounted


def test_each_nodes_devices_of_every_class_are_counted_under_each_name_a_pod_asks_them_by() -> None:
    devices = inventory(
        builders.resource_slice("s1", "n1", DRIVER, ["g0a", "g1a", "g2"], attributes=models("g0a", "g1a", "g2")),
        builders.resource_slice("s2", "n2", DRIVER, ["g0"], attributes=models("g0")),
        claims=(allocated("c", ("n1", "g0a")),),  # held devices are still the node's
    )
    told: list[str] = []
    devices.follow_published(lambda: told.append("published"))
    devices.class_event("ADDED", builders.device_class("big", DRIVER, extended_resource="example.com/gpu"))
    gpu, a100, big = class_resource("gpu"), class_resource("a100"), class_resource("big")
    assert devices.node_devices() == {
        "n1": {gpu: 3000, a100: 2000, big: 3000, "example.com/gpu": 3000},
        "n2": {gpu: 1000, big: 1000, "example.com/gpu": 1000},
    }
    devices.claim_event("DELETED", allocated("c", ("n1", "g0a")))  # claims change what is free, not what is there
    devices.slice_event("DELETED", builders.resource_slice("s2", "n2", DRIVER, ["g0"]))
    assert told == ["published", "published"] and "n2" not in devices.node_devices()


def reserved(claim: dict[str, Any], *uids: str) -> dict[str, Any]:
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": f"pod-{uid}", "uid": uid} for uid in uids]
    return claim


def test_the_devices_of_a_claim_reserved_for_one_pod_are_held_for_it_and_a_shared_ones_for_none() -> None:
    devices = inventory(
        builders.resource_slice("s1", "n1", DRIVER, ["g0a", "g1a", "g2"], attributes=models("g0a", "g1a", "g2")),
        claims=(
            reserved(allocated("mine", ("n1", "g0a"), ("n1", "g2")), "u1"),
            reserved(allocated("shared", ("n1", "g1a")), "u2", "u3"),
        ),
    )
    gpu, a100 = class_resource("gpu"), class_resource("a100")
    assert devices.count([Kind("gpu"), Kind("a100")]).held == {"u1": {gpu: 2000, a100: 1000}}
    devices.claim_event("MODIFIED", reserved(allocated("shared", ("n1", "g1a")), "u3"))  # u2 went
    assert devices.count([Kind("gpu")]).held == {"u1": {gpu: 2000}, "u3": {gpu: 1000}}


def test_a_pod_going_gives_back_the_devices_held_for_it_alone() -> None:
    gpu = class_resource("gpu")
    allocatable = {"cpu": 4000, "pods": 110_000}
    node = Node("n1", {}, (), allocatable)
    view = RoomView([node], {"n1": {"cpu": 2000, "pods": 109_000}}, {"u1": ("n1", {"cpu": 2000})})
    counts = DeviceCounts({"n1": {gpu: 1000}}, {"n1": {gpu: 4000}}, held={"u1": {gpu: 3000}, "gone": {gpu: 1000}})
    with_devices = view.with_devices(counts)
    assert with_devices.room().free_on([Constraints()])[gpu] == 1000
    assert with_devices.room(released=["u1"]).free_on([Constraints()]) == {"cpu": 4000, "pods": 110_000, gpu: 4000}
    assert view.takes["u1"] == ("n1", {"cpu": 2000})  # the view it was made from is left as it was


def test_only_a_pools_newest_generation_counts() -> None:
    old = builders.resource_slice("old", "n1", DRIVER, ["a", "b", "c"], pool="p", generation=1)
    new = builders.resource_slice("new", "n1", DRIVER, ["a"], pool="p", generation=2)
    assert inventory(old, new).count([Kind("gpu")]).total == {"n1": {class_resource("gpu"): 1000}}


def test_every_device_of_a_node_is_one_when_all_are_free() -> None:
    every = Kind("gpu", every_one=True)
    devices = inventory(
        builders.resource_slice("s1", "n1", DRIVER, ["a", "b"]),
        builders.resource_slice("s2", "n2", DRIVER, ["a", "b"]),
        claims=(allocated("c", ("n2", "b")),),
    )
    counts = devices.count([every])
    assert counts.free["n1"][every.resource] == 1000 and counts.free["n2"][every.resource] == 0


def test_devices_not_bound_to_one_node_are_left_to_kube_scheduler() -> None:
    network = builders.resource_slice("net", "n1", DRIVER, ["a"])
    del network["spec"]["nodeName"]
    network["spec"]["allNodes"] = True
    assert class_resource("gpu") in inventory(network).count([Kind("gpu")]).uncounted


def test_a_class_that_does_not_exist_or_a_selector_that_fails_everywhere_is_a_problem() -> None:
    devices = inventory(builders.resource_slice("s1", "n1", DRIVER, ["a"]))
    missing = devices.count([Kind("tpu")])
    assert missing.problems == {class_resource("tpu"): "DeviceClass tpu does not exist"}
    failing = Kind("gpu", (f'device.attributes["{DRIVER}"].memory > 1',))
    problem = devices.count([failing]).problems[failing.resource]
    assert "a selector fails on device gpu.example.com/n1/a" in problem and "CEL runtime error" in problem


def test_a_device_a_selector_fails_on_is_not_counted_but_the_others_are() -> None:
    devices = inventory(builders.resource_slice("s1", "n1", DRIVER, ["a", "b"], attributes=models("a")))
    kind = Kind("gpu", (f'device.attributes["{DRIVER}"].model == "a100"',))
    counts = devices.count([kind])
    assert counts.total["n1"][kind.resource] == 1000 and not counts.problems


def test_what_a_pod_asks_its_own_claims_and_those_it_shares() -> None:
    devices = inventory()
    devices.templates_listed(
        [
            {
                **builders.claim_template("two", builders.device_request("gpu", 2)),
                "metadata": {"name": "two", "namespace": "team"},
            }
        ]
    )
    channel = builders.resource_claim("channel", builders.device_request("gpu", 1))
    channel["metadata"]["namespace"] = "team"
    devices.claims_listed([channel])
    pod = builders.using_claims(builders.pod("m", namespace="team"), templates=["two"], claims=["channel"])
    asks = devices.asks(pod)
    assert asks.own == {class_resource("gpu"): 2000}
    assert asks.shared == {"channel": {class_resource("gpu"): 1000}}
    missing = devices.asks(builders.using_claims(builders.pod("m", namespace="team"), templates=["nope"]))
    assert missing.missing == "ResourceClaimTemplate nope does not exist"
