"""Watches of the cluster's DRA objects (resource.k8s.io/v1: DeviceClasses, ResourceSlices,
ResourceClaims, ResourceClaimTemplates), where the cluster serves them: they feed admission's count of
devices (devices/inventory.py) and tell the swap which claims a placeholder holds for its member."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from yuniplace.devices.claims import DRA_API
from yuniplace.devices.inventory import DeviceInventory
from yuniplace.kube import KubeClient
from yuniplace.kube.discovery import served_resources
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)
RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
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


class DeviceWatches:
    def __init__(self, client: KubeClient, inventory: DeviceInventory) -> None:
        self._client = client
        self._inventory = inventory
        self._watches: list[ListWatch] = []

    def start(self) -> list[threading.Event]:
        """Watch the DRA objects if the cluster serves resource.k8s.io/v1; return the events set once
        each has been read. Without it, no pod asks for a device and nothing here changes anything."""
        served = served_resources(self._client, DRA_API, "DRA devices (resource.k8s.io/v1)")
        if served is None or not set(RESOURCES) <= served.names:
            return []
        log.info("DRA: counting devices of ResourceSlices for gangs whose pods use ResourceClaims (%s)", DRA_API)
        devices = self._inventory
        devices.served = True
        feeds: list[tuple[str, Callable[..., None], Callable[..., None], Callable[[Any], Any] | None]] = [
            ("deviceclasses", devices.classes_listed, devices.class_event, None),
            ("resourceslices", devices.slices_listed, devices.slice_event, None),
            ("resourceclaims", devices.claims_listed, devices.claim_event, trim_claim),
            ("resourceclaimtemplates", devices.templates_listed, devices.template_event, None),
        ]
        for name, listed, event, trim in feeds:
            watch = ListWatch(
                self._client,
                f"{DRA_API}/{name}",
                on_list=listed,
                on_event=_trimmed(event, trim) if trim is not None else event,
                name=name,
                trim=trim,
            )
            self._watches.append(watch)
            threading.Thread(target=watch.run, name=f"watch-{name}", daemon=True).start()
        return [watch.synced for watch in self._watches]

    def stop(self) -> None:
        for watch in self._watches:
            watch.stop()
