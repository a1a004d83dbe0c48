"""Watches of the cluster's DRA objects (resource.k8s.io/v1: DeviceClasses, ResourceSlices,
ResourceClaims, ResourceClaimTemplates), while the cluster serves them: they feed admission's count of
devices (devices/inventory.py) and tell the swap which claims a placeholder holds for its member."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from yuniplace.controller.optionalapis import OptionalApi, ServedApi
from yuniplace.devices.claims import DRA_API
from yuniplace.devices.inventory import DeviceInventory
from yuniplace.kube import KubeClient
from yuniplace.kube.watch import ListWatch

RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
DRA = OptionalApi(
    key="dra",
    title="DRA devices and claims",
    reads="counting the devices of ResourceSlices for gangs whose pods use ResourceClaims",
    without="no gang's devices are counted",
    candidates=((DRA_API, frozenset(RESOURCES)),),
)
KEPT_CLAIM_METADATA = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "deletionTimestamp")


def trim_claim(claim: Mapping[str, Any]) -> dict[str, Any]:
    """What yuniplace reads of a ResourceClaim: its requests, its allocation and who it is reserved for."""
    metadata = claim.get("metadata") or {}
    status = claim.get("status") or {}
    return {
        "metadata": {k: metadata[k] for k in KEPT_CLAIM_METADATA if k in metadata},
        "spec": claim.get("spec") or {},
        "status": {k: status[k] for k in ("allocation", "reservedFor") if k in status},
    }


def _trimmed(event: Callable[[str, Any], None], trim: Callable[[Any], Any]) -> Callable[[str, Any], None]:
    return lambda kind, raw: event(kind, trim(raw))


Feed = tuple[str, Callable[..., None], Callable[..., None], Callable[[Any], Any] | None]


def _feeds(devices: DeviceInventory) -> list[Feed]:
    """Each DRA resource, with the inventory's handlers of its list and of its events, and its trim."""
    return [
        ("deviceclasses", devices.classes_listed, devices.class_event, None),
        ("resourceslices", devices.slices_listed, devices.slice_event, None),
        ("resourceclaims", devices.claims_listed, devices.claim_event, trim_claim),
        ("resourceclaimtemplates", devices.templates_listed, devices.template_event, None),
    ]


def read_devices(client: KubeClient, devices: DeviceInventory) -> None:
    """The DRA objects read once into the inventory, as a tool that counts what admission counts needs
    them."""
    devices.served = True
    for name, listed, _event, trim in _feeds(devices):
        items = client.get(f"{DRA_API}/{name}")["items"]
        listed([trim(item) for item in items] if trim is not None else items)


class DeviceWatches:
    """Without resource.k8s.io/v1, no pod asks for a device and nothing here changes anything."""

    optional_api = DRA

    def __init__(self, client: KubeClient, inventory: DeviceInventory) -> None:
        self._client = client
        self._inventory = inventory
        self._watches: list[ListWatch] = []

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        """Watch the DRA objects; return the events set once each has been read."""
        self._inventory.served = True
        for name, listed, event, trim in _feeds(self._inventory):
            watch = ListWatch(
                self._client,
                f"{DRA_API}/{name}",
                on_list=listed,
                on_event=_trimmed(event, trim) if trim is not None else event,
                name=name,
                trim=trim,
                on_missing=missing,
            )
            self._watches.append(watch)
            threading.Thread(target=watch.run, name=f"watch-{name}", daemon=True).start()
        return [watch.synced for watch in self._watches]

    def stop(self, *, forget: bool = True) -> None:
        for watch in self._watches:
            watch.stop()
        self._watches = []
        if forget:
            devices = self._inventory
            devices.served = False
            devices.classes_listed([])
            devices.slices_listed([])
            devices.claims_listed([])
            devices.templates_listed([])
