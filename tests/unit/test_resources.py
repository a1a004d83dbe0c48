"""Effective pod requests, shortfalls and quantity formatting."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yuniplace.gang.resources import (
    fits,
    format_quantity,
    pod_requests,
    quantities,
    shortfalls,
    total,
)
from yuniplace.kube import parse_quantity

D = Decimal


def c(name: str = "c", restart: str | None = None, **requests: str) -> dict[str, Any]:
    """A container; keyword names use '_' for '-' and '__' for '/' (nvidia__gpu -> nvidia/gpu)."""
    container: dict[str, Any] = {"name": name}
    if requests:
        container["resources"] = {"requests": {k.replace("__", "/").replace("_", "-"): v for k, v in requests.items()}}
    if restart is not None:
        container["restartPolicy"] = restart
    return container


def sidecar(**requests: str) -> dict[str, Any]:
    return c("sidecar", restart="Always", **requests)


def spec(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"containers": containers, **extra}
    if init is not None:
        result["initContainers"] = init
    return result


def dec(raw: dict[str, str]) -> dict[str, Decimal]:
    return {k: D(parse_quantity(v)) for k, v in raw.items()}


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        pytest.param(spec([]), {}, id="no-containers"),
        pytest.param({}, {}, id="empty-spec"),
        pytest.param({"containers": None, "initContainers": None}, {}, id="null-lists"),
        pytest.param(spec([c()]), {}, id="no-resources"),
        pytest.param(spec([{"name": "c", "resources": None}]), {}, id="null-resources"),
        pytest.param(
            spec([{"name": "c", "resources": {"requests": None, "limits": {"cpu": "1"}}}]), {}, id="limits-only"
        ),
        pytest.param(spec([c(cpu="1", memory="1Gi")]), {"cpu": "1", "memory": "1Gi"}, id="one-container"),
        pytest.param(
            spec([c("a", cpu="1", memory="1Gi"), c("b", cpu="500m"), c("c", memory="512Mi", nvidia__gpu="1")]),
            {"cpu": "1500m", "memory": "1536Mi", "nvidia/gpu": "1"},
            id="containers-summed",
        ),
        pytest.param(spec([c(cpu="1")], [c("i", cpu="2")]), {"cpu": "2"}, id="init-larger-wins"),
        pytest.param(spec([c(cpu="1")], [c("i", cpu="500m")]), {"cpu": "1"}, id="init-smaller-ignored"),
        pytest.param(
            spec([c(cpu="1", memory="1Gi")], [c("i1", cpu="3"), c("i2", memory="2Gi"), c("i3", cpu="2", memory="4Gi")]),
            {"cpu": "3", "memory": "4Gi"},
            id="init-max-per-resource-not-summed",
        ),
        pytest.param(
            spec([c(cpu="1")], [c("i", ephemeral_storage="1Gi")]),
            {"cpu": "1", "ephemeral-storage": "1Gi"},
            id="init-only-resource",
        ),
        pytest.param(
            spec([c(cpu="1", memory="1Gi")], [sidecar(cpu="500m", memory="256Mi")]),
            {"cpu": "1500m", "memory": "1280Mi"},
            id="sidecar-adds-to-sum",
        ),
        pytest.param(
            spec([c(cpu="1")], [sidecar(cpu="500m"), c("i", cpu="2")]),
            {"cpu": "2500m"},
            id="sidecar-adds-to-later-init-phase",
        ),
        pytest.param(
            spec([c(cpu="1")], [c("i", cpu="2"), sidecar(cpu="500m")]),
            {"cpu": "2"},
            id="sidecar-does-not-add-to-earlier-init-phase",
        ),
        pytest.param(
            spec([c(cpu="100m")], [sidecar(cpu="1"), sidecar(cpu="1"), c("i", cpu="1")]),
            {"cpu": "3"},
            id="sidecars-accumulate-into-init-phase",
        ),
        pytest.param(
            spec([c(cpu="3")], [sidecar(cpu="1"), c("i", cpu="1")]),
            {"cpu": "4"},
            id="sidecar-sum-beats-init-phase",
        ),
        pytest.param(
            spec([c(cpu="1")], [c("i", cpu="1", restart="Never")]),
            {"cpu": "1"},
            id="init-with-other-restart-policy-is-not-a-sidecar",
        ),
        pytest.param(
            spec([c(cpu="1", memory="1Gi")], [c("i", cpu="3")], overhead={"cpu": "250m", "memory": "100Mi"}),
            {"cpu": "3250m", "memory": "1124Mi"},
            id="overhead-added-after-init-max",
        ),
        pytest.param(spec([], overhead={"cpu": "100m"}), {"cpu": "100m"}, id="overhead-alone"),
        pytest.param(
            spec([c(cpu="1", memory="1Gi")], resources={"requests": {"cpu": "4"}}),
            {"cpu": "4", "memory": "1Gi"},
            id="pod-level-replaces-per-resource",
        ),
        pytest.param(
            spec([c(cpu="2", memory="2Gi")], resources={"requests": {"cpu": "1", "memory": "1Gi"}}),
            {"cpu": "1", "memory": "1Gi"},
            id="pod-level-can-be-smaller",
        ),
        pytest.param(
            spec([c(cpu="1")], [c("i", cpu="8")], resources={"requests": {"cpu": "2"}}, overhead={"cpu": "100m"}),
            {"cpu": "2100m"},
            id="pod-level-replaces-init-max-then-overhead",
        ),
        pytest.param(
            spec([c(cpu="1")], resources={"requests": {"memory": "1Gi"}}),
            {"cpu": "1", "memory": "1Gi"},
            id="pod-level-only-for-its-resources",
        ),
        pytest.param(
            spec([c(cpu="1")], resources={"limits": {"cpu": "8"}}), {"cpu": "1"}, id="pod-level-limits-ignored"
        ),
        pytest.param(spec([c(cpu="1")], resources=None, overhead=None), {"cpu": "1"}, id="null-pod-level-and-overhead"),
    ],
)
def test_pod_requests(pod_spec: dict[str, Any], expected: dict[str, str]) -> None:
    assert pod_requests(pod_spec) == dec(expected)


def test_pod_requests_does_not_modify_the_spec() -> None:
    pod_spec = spec([c(cpu="1")], [sidecar(cpu="1"), c("i", cpu="2")], overhead={"cpu": "1"})
    before = repr(pod_spec)
    pod_requests(pod_spec)
    assert repr(pod_spec) == before


# A literal transcription of Kubernetes' PodRequests (k8s.io/component-helpers/resource), as the reference.
def reference_requests(pod_spec: dict[str, Any]) -> dict[str, Decimal]:
    def add(into: dict[str, Decimal], more: dict[str, Decimal]) -> None:
        for k, v in more.items():
            into[k] = into.get(k, D(0)) + v

    def maximum(into: dict[str, Decimal], more: dict[str, Decimal]) -> None:
        for k, v in more.items():
            into[k] = max(into.get(k, D(0)), v)

    def reqs_of(container: dict[str, Any]) -> dict[str, Decimal]:
        return dec(((container.get("resources") or {}).get("requests")) or {})

    reqs: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or []:
        add(reqs, reqs_of(container))
    restartable: dict[str, Decimal] = {}
    init_reqs: dict[str, Decimal] = {}
    for container in pod_spec.get("initContainers") or []:
        container_reqs = reqs_of(container)
        if container.get("restartPolicy") == "Always":
            add(reqs, container_reqs)
            add(restartable, container_reqs)
            container_reqs = dict(restartable)
        else:
            tmp = dict(container_reqs)
            add(tmp, restartable)
            container_reqs = tmp
        maximum(init_reqs, container_reqs)
    maximum(reqs, init_reqs)
    for k, v in dec(((pod_spec.get("resources") or {}).get("requests")) or {}).items():
        reqs[k] = v
    add(reqs, dec(pod_spec.get("overhead") or {}))
    return reqs


amount = st.one_of(
    st.integers(min_value=0, max_value=4000).map(lambda n: f"{n}m"),
    st.integers(min_value=0, max_value=64).map(lambda n: f"{n}Gi"),
    st.integers(min_value=0, max_value=100).map(str),
)
requests = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), amount, max_size=3)
container = st.builds(
    lambda reqs, restart: {
        "name": "x",
        "resources": {"requests": reqs},
        **({"restartPolicy": restart} if restart else {}),
    },
    requests,
    st.sampled_from([None, None, "Always"]),
)
pod_specs = st.builds(
    lambda containers, init, pod_level, overhead: {
        "containers": [{k: v for k, v in ctr.items() if k != "restartPolicy"} for ctr in containers],
        "initContainers": init,
        **({"resources": {"requests": pod_level}} if pod_level else {}),
        **({"overhead": overhead} if overhead else {}),
    },
    st.lists(container, max_size=4),
    st.lists(container, max_size=4),
    st.one_of(st.none(), requests),
    st.one_of(st.none(), requests),
)


@settings(max_examples=200, deadline=None)
@given(pod_spec=pod_specs)
def test_pod_requests_matches_kubernetes_rule(pod_spec: dict[str, Any]) -> None:
    assert pod_requests(pod_spec) == reference_requests(pod_spec)


@settings(max_examples=200, deadline=None)
@given(pod_spec=pod_specs)
def test_pod_requests_are_at_least_the_containers_sum(pod_spec: dict[str, Any]) -> None:
    if "resources" in pod_spec:
        return
    result = pod_requests(pod_spec)
    summed = total(dec(((ctr.get("resources") or {}).get("requests")) or {}) for ctr in pod_spec["containers"])
    assert fits(summed, result)


# -- shortfalls, fits, totals -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("needed", "available", "expected"),
    [
        ({}, {}, []),
        ({"cpu": "1"}, {"cpu": "1"}, []),
        ({"cpu": "500m"}, {"cpu": "1", "memory": "1Gi"}, []),
        ({"cpu": "1001m"}, {"cpu": "1"}, [("cpu", "1001m", "1")]),
        ({"memory": "1Gi"}, {"cpu": "1"}, [("memory", "1Gi", "0")]),
        ({"memory": "0"}, {}, []),
        (
            {"memory": "2Gi", "cpu": "2", "nvidia.com/gpu": "1"},
            {"cpu": "1", "memory": "2Gi"},
            [("cpu", "2", "1"), ("nvidia.com/gpu", "1", "0")],
        ),
    ],
)
def test_shortfalls_and_fits(
    needed: dict[str, str], available: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    result = shortfalls(dec(needed), dec(available))
    assert result == [(name, D(parse_quantity(n)), D(parse_quantity(a))) for name, n, a in expected]
    assert fits(dec(needed), dec(available)) is (not expected)


def test_quantities_and_total() -> None:
    assert quantities({"cpu": "250m", "memory": "1Gi", "pods": 3}) == {
        "cpu": D("0.25"),
        "memory": D(2**30),
        "pods": D(3),
    }
    assert total([{"cpu": D(1)}, {"cpu": D("0.5"), "memory": D(2)}, {}]) == {"cpu": D("1.5"), "memory": D(2)}
    assert total([]) == {}


# -- format_quantity ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (D(0), "0"),
        (D(1), "1"),
        (D("2.000"), "2"),
        (D("1E+3"), "1000"),
        (D(1000), "1000"),
        (D("0.5"), "500m"),
        (D("0.001"), "1m"),
        (D("1.5"), "1500m"),
        (D(1023), "1023"),
        (D(1024), "1Ki"),
        (D(1536), "1536"),
        (D(1536 * 1024), "1536Ki"),
        (D(2**20), "1Mi"),
        (D(1476395008), "1408Mi"),
        (D(3 * 2**29), "1536Mi"),
        (D(2**30), "1Gi"),
        (D(5 * 2**40), "5Ti"),
        (D(2**50), "1024Ti"),
        (D(50_000_000), "50M"),
        (D(100_000_000), "100M"),
        (D(100_000_001), "100000001"),
        (D(3 * 10**9), "3G"),
    ],
)
def test_format_quantity(value: Decimal, expected: str) -> None:
    assert format_quantity(value) == expected


@settings(max_examples=200, deadline=None)
@given(milli=st.integers(min_value=0, max_value=10**15))
def test_format_quantity_round_trips_milli_precision(milli: int) -> None:
    value = D(milli) / 1000
    assert D(parse_quantity(format_quantity(value))) == value


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=10**6), power=st.sampled_from([10, 20, 30, 40]))
def test_format_quantity_round_trips_binary_multiples(n: int, power: int) -> None:
    value = D(n * 2**power)
    text = format_quantity(value)
    assert D(parse_quantity(text)) == value
    assert text[-2:] in ("Ki", "Mi", "Gi", "Ti")
