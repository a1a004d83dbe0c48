"""What a pod really asks the scheduler for, so a real pod is only swapped into a placeholder whose
room it fits. The commonest gang-scheduling surprise is a Spark pod whose memory overhead was left out
of minResource: the swap then frees room the real pod cannot use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from yuniplace.kube import parse_quantity

Resources = dict[str, Decimal]


def _requests(container: Mapping[str, Any]) -> Resources:
    raw = (container.get("resources") or {}).get("requests") or {}
    return {name: Decimal(parse_quantity(value)) for name, value in raw.items()}


def _add(total: Resources, more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, Decimal(0)) + amount


def _max_into(total: Resources, other: Mapping[str, Decimal]) -> None:
    for name, amount in other.items():
        total[name] = max(total.get(name, Decimal(0)), amount)


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """Effective requests as kube-scheduler computes them: the containers, plus sidecars (init
    containers with restartPolicy Always, which keep running), or the largest init phase if larger,
    plus the pod overhead. Pod-level resources, where set, replace the container sum."""
    total: Resources = {}
    for container in spec.get("containers") or []:
        _add(total, _requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = _requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            phase = dict(sidecars)
        else:
            phase = dict(sidecars)
            _add(phase, requests)
        _max_into(init_peak, phase)
    _max_into(total, init_peak)
    pod_level = ((spec.get("resources") or {}).get("requests")) or {}
    for name, value in pod_level.items():
        total[name] = Decimal(parse_quantity(value))
    _add(total, {name: Decimal(parse_quantity(v)) for name, v in (spec.get("overhead") or {}).items()})
    return total


def quantities(raw: Mapping[str, Any]) -> Resources:
    return {name: Decimal(parse_quantity(value)) for name, value in raw.items()}


def shortfalls(needed: Mapping[str, Decimal], available: Mapping[str, Decimal]) -> list[tuple[str, Decimal, Decimal]]:
    """(resource, needed, available) for every resource where `needed` exceeds `available`."""
    return [
        (name, amount, available.get(name, Decimal(0)))
        for name, amount in sorted(needed.items())
        if amount > available.get(name, Decimal(0))
    ]


def said_short(short: Iterable[tuple[str, Decimal, Decimal]]) -> str:
    """Shortfalls as messages say them: "memory 1408Mi > 1Gi, cpu 2 > 1"."""
    return ", ".join(f"{name} {format_quantity(need)} > {format_quantity(have)}" for name, need, have in short)


BINARY_SUFFIXES = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
# From a million up only: a thousand cores reads better as 1000 than as 1k.
DECIMAL_SUFFIXES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6))


def format_quantity(amount: Decimal) -> str:
    """A quantity as a manifest would write it: fractions in milli-units, whole multiples of a
    binary unit with its suffix (1408Mi, not 1476395008), else of a decimal one from M up (100M, not
    100000000), other numbers plain. Exact either way: it parses back to the same amount."""
    if amount != amount.to_integral_value():
        return f"{int((amount * 1000).to_integral_value())}m"
    value = int(amount)
    for suffix, factor in BINARY_SUFFIXES + DECIMAL_SUFFIXES:
        if value >= factor and value % factor == 0:
            return f"{value // factor}{suffix}"
    return str(value)


def fits(needed: Mapping[str, Decimal], available: Mapping[str, Decimal]) -> bool:
    return not shortfalls(needed, available)


def total(items: Iterable[Mapping[str, Decimal]]) -> Resources:
    result: Resources = {}
    for item in items:
        _add(result, item)
    return result
