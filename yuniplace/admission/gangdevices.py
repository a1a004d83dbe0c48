"""A gang's DRA devices as admission reads them: what each task group's pods ask (the largest ask of its
members, and what its minResource names for members yet to come), what the claims its members share
ask (once for the gang), the kinds of device, why they cannot be counted, and what its members' claims
already hold; and the room with the devices of every kind asked, counted once a cycle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from yuniplace.admission.room import RoomView
from yuniplace.devices.claims import (
    Kind,
    claim_names,
    class_resource,
    device_class_of,
    is_allocated,
    uses_devices,
)
from yuniplace.devices.inventory import DeviceCounts, DeviceInventory
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application


@dataclass(frozen=True)
class GangDevices:
    by_group: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # a pod's ask, in the room's names
    shared: Mapping[str, int] = field(default_factory=dict)  # the claims its members share, once
    kinds: frozenset[Kind] = frozenset()
    note: str | None = None  # why they cannot be counted (a template missing, a request of alternatives)
    held: Mapping[str, int] = field(default_factory=dict)  # what its members' claims already hold

    def counted(self, counts: DeviceCounts) -> GangDevices | None:
        """The devices as one cycle's counts let them be read, or None where nothing changes: kinds not
        bound to one node are left to kube-scheduler (their asks dropped), and a kind that cannot be
        counted is why the gang waits."""
        asked = {kind.resource for kind in self.kinds} | {class_resource(kind.device_class) for kind in self.kinds}
        problem = next((counts.problems[name] for name in sorted(asked) if name in counts.problems), None)
        dropped = counts.uncounted & asked
        if not dropped and (problem is None or self.note is not None):
            return None
        return GangDevices(
            {group: _without(asks, dropped) for group, asks in self.by_group.items()},
            _without(self.shared, dropped),
            self.kinds,
            self.note or problem,
            self.held,
        )


def _without(asks: Mapping[str, int], uncounted: Iterable[str]) -> dict[str, int]:
    """Device asks without the kinds left uncounted (and with them, their class's own count)."""
    dropped = set(uncounted) | {class_resource(c) for name in uncounted if (c := device_class_of(name))}
    return {name: amount for name, amount in asks.items() if name not in dropped}


def _plus(one: Mapping[str, int], other: Mapping[str, int]) -> dict[str, int]:
    total = dict(one)
    for name, amount in other.items():
        total[name] = total.get(name, 0) + amount
    return total


def read_devices(devices: DeviceInventory, app: Application) -> GangDevices | None:
    """The gang's devices, or None where it asks for none (or the cluster serves no DRA)."""
    if not devices.served or app.spec is None:
        return None
    by_group: dict[str, dict[str, int]] = {}
    held: dict[str, int] = {}
    shared: dict[str, Mapping[str, int]] = {}
    kinds: set[Kind] = set()
    note = None
    for group in app.spec.groups:
        kinds.update(
            Kind(c) for name in group.min_resource if (c := device_class_of(name)) and name == class_resource(c)
        )
    extended = devices.extended_resources()
    for member in app.live_members():
        kinds.update(Kind(extended[name]) for name in app.requests_of(member) if name in extended)
        if not uses_devices(member):
            continue
        asks = devices.asks(member)
        if note is None and (asks.missing or asks.problem):
            note = f"pod {p.name(member)}: {asks.missing or asks.problem}"
        kinds.update(asks.kinds)
        asked = by_group.setdefault(app.group_of(member) or "", {})
        for name, amount in asks.own.items():
            asked[name] = max(asked.get(name, 0), amount)
        shared.update(asks.shared)
        if asks.own and _holds_its_claims(devices, member):
            held = _plus(held, asks.own)
    if not kinds and note is None:
        return None
    once: dict[str, int] = {}
    for amounts in shared.values():
        once = _plus(once, amounts)
    return GangDevices(by_group, once, frozenset(kinds), note, held)


def _holds_its_claims(devices: DeviceInventory, member: p.Pod) -> bool:
    """Whether every claim the member uses is allocated (to it, or to the placeholder holding it)."""
    names = claim_names(member)
    namespace = p.namespace(member)
    return names is not None and all(
        (claim := devices.claim(namespace, name)) is not None and is_allocated(claim) for name in names
    )


def room_with_devices(devices: DeviceInventory, view: RoomView, kinds: Iterable[Kind]) -> tuple[RoomView, DeviceCounts]:
    """The room with the nodes' devices of the kinds asked, and the counts it was made of."""
    counts = devices.count(kinds)
    aliases = {name: class_resource(device_class) for name, device_class in devices.extended_resources().items()}
    return view.with_devices(counts, aliases), counts
