"""What a pod asks of DRA (resource.k8s.io/v1): the ResourceClaims it uses, and the devices their
requests count, as plain data.

Devices are counted under resource names, as the room counts CPU: the devices of a class under
`deviceclass.resource.kubernetes.io/<class>` (the name Kubernetes itself gives a class's devices as an
extended resource, and the name a task group's minResource and a queue's limits use); the devices a
request's own selectors narrow further, under that name with the selectors' digest in brackets (a
request of them takes from both counts); a request of every matching device of a node
(`allocationMode: All`) under that name with `[all]`. Amounts are milli-units, as every amount of the
room is: a device is 1000.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DRA_API = "/apis/resource.k8s.io/v1"  # the DRA API's group version (GA since Kubernetes 1.34)
DEVICE_CLASS_RESOURCE = "deviceclass.resource.kubernetes.io/"
ONE_DEVICE = 1000  # a device, in the room's milli-units
MAX_REQUESTS = 32  # a claim's requests (Kubernetes' own limit): more is no claim the API server took


class UnsupportedClaim(Exception):
    """A claim whose requests admission cannot count; the message says which and why."""


def class_resource(device_class: str) -> str:
    """The resource name a class's devices are counted under."""
    return DEVICE_CLASS_RESOURCE + device_class


def is_device_resource(name: str) -> bool:
    """Whether a resource name counts devices of a class, not something a node advertises."""
    return name.startswith(DEVICE_CLASS_RESOURCE)


def device_class_of(name: str) -> str | None:
    """The class a device resource name counts, or None for any other resource."""
    if not is_device_resource(name):
        return None
    return name[len(DEVICE_CLASS_RESOURCE) :].split("[", 1)[0]


@dataclass(frozen=True)
class Kind:
    """Devices alike for admission: of one class, matching the same request selectors, asked one by one
    or all of a node's at once."""

    device_class: str
    selectors: tuple[str, ...] = ()
    every_one: bool = False  # allocationMode All: every matching device of the node

    @property
    def resource(self) -> str:
        name = class_resource(self.device_class)
        tags = []
        if self.selectors:
            tags.append(hashlib.sha256("\0".join(self.selectors).encode()).hexdigest()[:8])
        if self.every_one:
            tags.append("all")
        return f"{name}[{','.join(tags)}]" if tags else name

    @property
    def said(self) -> str:
        """The kind as an event says it."""
        narrowed = f" matching {' && '.join(self.selectors)}" if self.selectors else ""
        return f"{'every device' if self.every_one else 'devices'} of class {self.device_class}{narrowed}"


@dataclass(frozen=True)
class Request:
    """One request of a claim, as admission counts it."""

    name: str
    kind: Kind
    count: int  # devices (for allocationMode All: 1, all of a node's)

    def amounts(self) -> dict[str, int]:
        """What one claim of this request takes, in the room's resource names."""
        if self.kind.every_one:
            return {self.kind.resource: ONE_DEVICE}
        taken = {class_resource(self.kind.device_class): self.count * ONE_DEVICE}
        if self.kind.selectors:
            taken[self.kind.resource] = self.count * ONE_DEVICE
        return taken


def _selectors(raw: Any) -> tuple[str, ...]:
    expressions = []
    for selector in raw or []:
        expression = ((selector or {}).get("cel") or {}).get("expression")
        if not isinstance(expression, str):
            raise UnsupportedClaim(f"a selector {selector!r} has no CEL expression")
        expressions.append(expression)
    return tuple(expressions)


def requests_of(claim_spec: Mapping[str, Any]) -> tuple[Request, ...]:
    """The requests of a ResourceClaim's (or a template's claim's) spec; UnsupportedClaim for a request
    admission cannot count (a prioritized list, `firstAvailable`, whose device kube-scheduler picks
    among alternatives)."""
    requests = ((claim_spec or {}).get("devices") or {}).get("requests") or []
    if not isinstance(requests, list) or len(requests) > MAX_REQUESTS:
        raise UnsupportedClaim("its devices.requests is not a list of at most 32 requests")
    found = []
    for request in requests:
        name = str((request or {}).get("name") or "")
        if request.get("firstAvailable"):
            raise UnsupportedClaim(
                f"request {name} lists alternatives (firstAvailable), which yuniplace cannot count for a gang: "
                "name one device class per request (exactly)"
            )
        exactly = request.get("exactly")
        if not isinstance(exactly, Mapping) or not exactly.get("deviceClassName"):
            raise UnsupportedClaim(f"request {name} names no device class (exactly.deviceClassName)")
        if exactly.get("adminAccess"):
            continue  # admin access allocates no device: it takes nothing from anyone
        mode = exactly.get("allocationMode") or "ExactCount"
        every_one = mode == "All"
        count = exactly.get("count", 1)
        if mode not in ("ExactCount", "All") or not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise UnsupportedClaim(f"request {name} has allocationMode {mode!r} and count {count!r}")
        kind = Kind(str(exactly["deviceClassName"]), _selectors(exactly.get("selectors")), every_one)
        found.append(Request(name, kind, 1 if every_one else count))
    return tuple(found)


def amounts_of(requests: Sequence[Request]) -> dict[str, int]:
    total: dict[str, int] = {}
    for request in requests:
        for name, amount in request.amounts().items():
            total[name] = total.get(name, 0) + amount
    return total


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's `spec.resourceClaims`: a claim named outright, or one made for the pod from a
    template (named in the pod's status once the resourceclaim controller made it)."""

    name: str
    template: str | None
    claim: str | None  # the ResourceClaim used: named outright, or made from the template (None: not yet)

    @property
    def shared(self) -> bool:
        """A claim named outright may be used by several pods (a gang's one channel, say)."""
        return self.template is None


def pod_claims(pod: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    """The pod's claims, as its spec lists them."""
    made = {
        str(status.get("name")): str(status["resourceClaimName"])
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(status, Mapping) and status.get("resourceClaimName")
    }
    claims = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if not isinstance(entry, Mapping) or not entry.get("name"):
            continue
        name = str(entry["name"])
        template = entry.get("resourceClaimTemplateName")
        if template:
            claims.append(PodClaim(name, str(template), made.get(name)))
        elif entry.get("resourceClaimName"):
            claims.append(PodClaim(name, None, str(entry["resourceClaimName"])))
    return tuple(claims)


def uses_devices(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def claim_names(pod: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The names of every ResourceClaim the pod uses, in its spec's order; None while one made from a
    template does not exist yet."""
    claims = pod_claims(pod)
    if any(claim.claim is None for claim in claims):
        return None
    return tuple(str(claim.claim) for claim in claims)


def holding_entries(pod: Mapping[str, Any]) -> list[dict[str, str]]:
    """`spec.resourceClaims` for a pod that holds the pod's claims: each by name, under the pod's own
    entry names. Call only where `claim_names` has them all."""
    return [{"name": claim.name, "resourceClaimName": str(claim.claim)} for claim in pod_claims(pod)]


def allocation_results(claim: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The devices a claim is allocated, as (driver, pool, device); none while it is not allocated.
    Devices given with admin access are nobody's."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [
        (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
        for r in results
        if isinstance(r, Mapping) and not r.get("adminAccess")
    ]


def is_allocated(claim: Mapping[str, Any]) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))


def reserved_for(claim: Mapping[str, Any]) -> set[str]:
    """The uids of the pods a claim is reserved for."""
    return {
        str(consumer.get("uid"))
        for consumer in (claim.get("status") or {}).get("reservedFor") or []
        if isinstance(consumer, Mapping) and consumer.get("resource") == "pods"
    }
