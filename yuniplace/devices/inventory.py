"""The cluster's DRA devices as admission counts them: the DeviceClasses, the devices ResourceSlices
publish, the ResourceClaims (which devices each holds) and the ResourceClaimTemplates, kept as their
watches report them.

Admission asks, once a cycle, for the devices of the kinds its gangs ask for: per node, how many match
(the class's selectors and the request's, evaluated with CEL) and how many of those no claim holds.
Matching is worked out once per kind until the slices or classes change; what claims hold, once per
change of the claims. A kind that cannot be evaluated (a selector this environment cannot compile, or
one that fails on a device, as kube-scheduler's allocation then fails too) is said, and counted as no
device at all: a gang is never started on devices that cannot be counted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from yuniplace.devices.claims import (
    ONE_DEVICE,
    Kind,
    PodClaim,
    UnsupportedClaim,
    allocation_results,
    amounts_of,
    class_resource,
    is_allocated,
    pod_claims,
    requests_of,
)
from yuniplace.devices.selectors import Device, SelectorError, compile_selector

log = logging.getLogger(__name__)

Amounts = dict[str, int]
DeviceId = tuple[str, str, str]  # driver, pool, device
Key = tuple[str, str]  # namespace, name


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None  # the extended resource a pod may ask its devices by (1.36 on)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> DeviceClass:
        spec = raw.get("spec") or {}
        selectors = tuple(
            str(expression)
            for selector in spec.get("selectors") or []
            if (expression := ((selector or {}).get("cel") or {}).get("expression")) is not None
        )
        extended = spec.get("extendedResourceName")
        return cls(str(raw["metadata"]["name"]), selectors, str(extended) if extended else None)


@dataclass(frozen=True)
class Published:
    """A device a ResourceSlice publishes, and the node it is on (None: not bound to one node)."""

    id: DeviceId
    node: str | None
    device: Device


@dataclass(frozen=True)
class PodAsks:
    """The devices one pod asks for, as its claims' requests say."""

    own: Mapping[str, int] = field(default_factory=dict)  # its own claims' (made from templates), summed
    shared: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # claims it names, not yet allocated
    kinds: frozenset[Kind] = frozenset()
    missing: str | None = None  # a template or claim it names that does not exist (yet)
    problem: str | None = None  # a claim whose requests cannot be counted

    @property
    def any(self) -> bool:
        return bool(self.own or self.shared)


@dataclass(frozen=True)
class DeviceCounts:
    """One cycle's count of devices of the kinds asked for, per node (milli-units)."""

    free: Mapping[str, Mapping[str, int]]  # node -> resource -> devices no claim holds
    total: Mapping[str, Mapping[str, int]]  # node -> resource -> devices there are
    problems: Mapping[str, str] = field(default_factory=dict)  # resource -> why it cannot be counted
    uncounted: frozenset[str] = frozenset()  # kinds of devices not bound to one node: left to kube-scheduler
    # pod uid -> resource -> devices held by claims reserved for that pod alone, which its going frees
    held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def _newest(slices: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The slices of each pool's newest generation: a driver replacing a pool's slices publishes a
    new generation, and kube-scheduler reads only that one."""
    newest: dict[tuple[str, str], int] = {}
    for raw in slices:
        spec = raw.get("spec") or {}
        pool = spec.get("pool") or {}
        at = (str(spec.get("driver")), str(pool.get("name")))
        newest[at] = max(newest.get(at, 0), int(pool.get("generation") or 0))
    return [
        raw
        for raw in slices
        if int(((raw.get("spec") or {}).get("pool") or {}).get("generation") or 0)
        == newest[
            (str((raw.get("spec") or {}).get("driver")), str(((raw.get("spec") or {}).get("pool") or {}).get("name")))
        ]
    ]


def _published(slices: Iterable[Mapping[str, Any]]) -> list[Published]:
    devices = []
    for raw in _newest(list(slices)):
        spec = raw.get("spec") or {}
        driver = str(spec.get("driver"))
        pool = str((spec.get("pool") or {}).get("name"))
        node = spec.get("nodeName")
        for device in spec.get("devices") or []:
            if not isinstance(device, Mapping) or not device.get("name"):
                continue
            try:
                readable = Device.of(driver, device)
            except (SelectorError, ValueError, ArithmeticError) as error:
                log.warning("device %s/%s/%s cannot be read (%s): not counted", driver, pool, device["name"], error)
                continue
            on = device.get("nodeName") or node
            devices.append(Published((driver, pool, str(device["name"])), str(on) if on else None, readable))
    return devices


class DeviceInventory:
    def __init__(self, on_change: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._classes: dict[str, DeviceClass] = {}
        self._slices: dict[str, Mapping[str, Any]] = {}
        self._claims: dict[Key, Mapping[str, Any]] = {}
        self._templates: dict[Key, Mapping[str, Any]] = {}
        self._published: list[Published] | None = None  # worked out again after the slices change
        self._matched: dict[Kind, tuple[list[Published], str | None]] = {}  # until slices or classes change
        self._allocated: set[DeviceId] | None = None  # worked out again after the claims change
        self._consumers: dict[DeviceId, str] | None = None  # the one pod each device is held for (by uid)
        self._on_change = on_change
        self._on_published: list[Callable[[], None]] = []  # told when the devices there are may have changed
        self.served = False  # the cluster serves resource.k8s.io/v1 (set as its watches start)

    # -- the watches ---------------------------------------------------------------------------------

    def classes_listed(self, items: list[Mapping[str, Any]]) -> None:
        with self._lock:
            self._classes = {(c := DeviceClass.of(raw)).name: c for raw in items}
            self._matched.clear()
        self._published_changed()

    def class_event(self, kind: str, raw: Mapping[str, Any]) -> None:
        with self._lock:
            name = str(raw["metadata"]["name"])
            if kind == "DELETED":
                self._classes.pop(name, None)
            else:
                self._classes[name] = DeviceClass.of(raw)
            self._matched.clear()
        self._published_changed()

    def slices_listed(self, items: list[Mapping[str, Any]]) -> None:
        with self._lock:
            self._slices = {str(raw["metadata"]["name"]): raw for raw in items}
            self._published = None
            self._matched.clear()
        self._published_changed()

    def slice_event(self, kind: str, raw: Mapping[str, Any]) -> None:
        with self._lock:
            name = str(raw["metadata"]["name"])
            if kind == "DELETED":
                self._slices.pop(name, None)
            else:
                self._slices[name] = raw
            self._published = None
            self._matched.clear()
        self._published_changed()

    def claims_listed(self, items: list[Mapping[str, Any]]) -> None:
        with self._lock:
            self._claims = {_key(raw): raw for raw in items}
            self._allocated = None
            self._consumers = None
        self._on_change()

    def claim_event(self, kind: str, raw: Mapping[str, Any]) -> None:
        key = _key(raw)
        with self._lock:
            before = self._claims.get(key)
            if kind == "DELETED":
                self._claims.pop(key, None)
            else:
                self._claims[key] = raw
            changed = before is None or kind == "DELETED" or allocation_results(before) != allocation_results(raw)
            if changed:
                self._allocated = None
            self._consumers = None  # whom a claim is reserved for changes without its allocation
        if changed and (kind == "DELETED" or not is_allocated(raw)):
            self._on_change()  # devices were freed: a gang waiting for them may fit now

    def templates_listed(self, items: list[Mapping[str, Any]]) -> None:
        with self._lock:
            self._templates = {_key(raw): raw for raw in items}
        self._on_change()

    def template_event(self, kind: str, raw: Mapping[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self._templates.pop(_key(raw), None)
            else:
                self._templates[_key(raw)] = raw
        self._on_change()

    def follow_published(self, told: Callable[[], None]) -> None:
        """Have `told` called whenever the devices there are may have changed (a class or a slice did)."""
        self._on_published.append(told)

    def _published_changed(self) -> None:
        self._on_change()
        for told in self._on_published:
            told()

    # -- what pods ask ------------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self._lock:
            return self._claims.get((namespace, name))

    def template(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        with self._lock:
            return self._templates.get((namespace, name))

    def device_class(self, name: str) -> DeviceClass | None:
        with self._lock:
            return self._classes.get(name)

    def extended_resources(self) -> dict[str, str]:
        """The extended resources DeviceClasses let pods ask their devices by: resource -> class."""
        with self._lock:
            return {c.extended_resource: c.name for c in self._classes.values() if c.extended_resource}

    def asks(self, pod: Mapping[str, Any]) -> PodAsks:
        """The devices the pod's claims ask for: its own (claims made for it from templates) and those of
        claims it names (which several pods may share), while not yet allocated."""
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        own: Amounts = {}
        shared: dict[str, Amounts] = {}
        kinds: set[Kind] = set()
        for entry in pod_claims(pod):
            spec, missing = self._spec_of(namespace, entry)
            if missing is not None:
                return PodAsks(missing=missing)
            try:
                requests = requests_of(spec or {})
            except UnsupportedClaim as unsupported:
                return PodAsks(problem=f"claim {entry.name}: {unsupported}")
            kinds.update(request.kind for request in requests)
            if entry.shared:
                claim = self.claim(namespace, str(entry.claim))
                if claim is not None and not is_allocated(claim):
                    shared[str(entry.claim)] = amounts_of(requests)
            else:
                for name, amount in amounts_of(requests).items():
                    own[name] = own.get(name, 0) + amount
        return PodAsks(own, shared, frozenset(kinds))

    def _spec_of(self, namespace: str, entry: PodClaim) -> tuple[Mapping[str, Any] | None, str | None]:
        """The claim spec an entry of a pod asks by: its claim's, once made, else its template's; or what
        is missing."""
        if entry.claim is not None:
            claim = self.claim(namespace, entry.claim)
            if claim is not None:
                return claim.get("spec") or {}, None
            if entry.template is None:
                return None, f"ResourceClaim {entry.claim} does not exist"
        template = self.template(namespace, str(entry.template))
        if template is None:
            return None, f"ResourceClaimTemplate {entry.template} does not exist"
        return (template.get("spec") or {}).get("spec") or {}, None

    # -- counting -----------------------------------------------------------------------------------

    def count(self, kinds: Iterable[Kind]) -> DeviceCounts:
        """The devices of `kinds` (each class's own kind counted too) per node: those matching, and those
        of them no claim holds."""
        wanted = set(kinds) | {Kind(kind.device_class) for kind in kinds}
        with self._lock:
            if self._published is None:
                self._published = _published(self._slices.values())
            if self._allocated is None:
                self._allocated = {device for claim in self._claims.values() for device in allocation_results(claim)}
            allocated = self._allocated
            if self._consumers is None:
                self._consumers = _consumers(self._claims.values())
            consumers = self._consumers
            matched = {kind: self._matching(kind) for kind in wanted}
        free: dict[str, Amounts] = {}
        total: dict[str, Amounts] = {}
        held: dict[str, Amounts] = {}
        problems: dict[str, str] = {}
        uncounted: set[str] = set()
        for kind, (devices, problem) in matched.items():
            resource = kind.resource
            if problem is not None:
                problems[resource] = problem
                continue
            if any(device.node is None for device in devices):
                uncounted.add(resource)
                continue
            there: dict[str, int] = {}
            unused: dict[str, int] = {}
            for device in devices:
                node = str(device.node)
                there[node] = there.get(node, 0) + 1
                if device.id not in allocated:
                    unused[node] = unused.get(node, 0) + 1
                elif not kind.every_one and (consumer := consumers.get(device.id)) is not None:
                    mine = held.setdefault(consumer, {})
                    mine[resource] = mine.get(resource, 0) + ONE_DEVICE
            for node, count in there.items():
                left = unused.get(node, 0)
                if kind.every_one:
                    count, left = 1, int(left == count)
                total.setdefault(node, {})[resource] = count * ONE_DEVICE
                free.setdefault(node, {})[resource] = left * ONE_DEVICE
        return DeviceCounts(free, total, problems, frozenset(uncounted), held)

    def node_devices(self) -> dict[str, Amounts]:
        """Every node's devices of each class (milli-units), under every name a pod may ask them by: the
        class's resource, and its extended resource where it has one. Devices of a class that cannot be
        counted, or not bound to one node, are left out."""
        with self._lock:
            classes = list(self._classes.values())
        counts = self.count(Kind(c.name) for c in classes)
        devices: dict[str, Amounts] = {}
        for device_class in classes:
            resource = class_resource(device_class.name)
            names = [resource, *([device_class.extended_resource] if device_class.extended_resource else [])]
            for node, total in counts.total.items():
                if resource in total:
                    devices.setdefault(node, {}).update(dict.fromkeys(names, total[resource]))
        return devices

    def _matching(self, kind: Kind) -> tuple[list[Published], str | None]:
        """The devices of the kind (under the lock), or why they cannot be told."""
        known = self._matched.get(kind)
        if known is not None:
            return known
        device_class = self._classes.get(kind.device_class)
        found: tuple[list[Published], str | None]
        if device_class is None:
            found = ([], f"DeviceClass {kind.device_class} does not exist")
        else:
            found = _match(self._published or [], device_class, kind)
        self._matched[kind] = found
        return found


def _match(published: list[Published], device_class: DeviceClass, kind: Kind) -> tuple[list[Published], str | None]:
    """The devices of the kind, or why none can be counted: a selector this environment cannot compile,
    or one that fails on every device it could have matched. A device a selector fails on is never
    counted (kube-scheduler's allocation fails where it meets one), but the others still are."""
    expressions = [*device_class.selectors, *kind.selectors]
    try:
        selectors = [compile_selector(expression) for expression in expressions]
    except SelectorError as error:
        return [], f"{kind.said}: {error}"
    matching = []
    failed: str | None = None
    for device in published:
        try:
            if all(selector.matches(device.device) for selector in selectors):
                matching.append(device)
        except SelectorError as error:
            driver, pool, name = device.id
            failed = failed or f"{kind.said}: a selector fails on device {driver}/{pool}/{name} ({error})"
    return matching, (failed if not matching else None)


def _consumers(claims: Iterable[Mapping[str, Any]]) -> dict[DeviceId, str]:
    """The devices of claims reserved for one pod, each with that pod's uid: once it goes, the claim is
    given up and they are free (a claim several pods share stays while any of them is there)."""
    consumers: dict[DeviceId, str] = {}
    for claim in claims:
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if len(reserved) != 1 or not isinstance(reserved[0], Mapping) or reserved[0].get("resource") != "pods":
            continue
        uid = str(reserved[0].get("uid") or "")
        for device in allocation_results(claim) if uid else ():
            consumers[device] = uid
    return consumers


def _key(raw: Mapping[str, Any]) -> Key:
    meta = raw.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))


def class_total(counts: DeviceCounts, device_class: str) -> int:
    """Every device of the class on every node (in devices, not milli-units)."""
    resource = class_resource(device_class)
    return sum(amounts.get(resource, 0) for amounts in counts.total.values()) // ONE_DEVICE
