"""Watches of an autoscaler's node pools: Karpenter's NodePools and NodeClaims, where the cluster serves
them, feed admission's count of the room that can come (admission/growth.py)."""

from __future__ import annotations

import logging
import threading

from yuniplace.admission.growth import NODECLAIMS, NODEPOOLS, Growth
from yuniplace.kube import KubeClient
from yuniplace.kube.discovery import served_resources
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)
KARPENTER_API = "/apis/karpenter.sh/v1"


class NodePoolWatches:
    def __init__(self, client: KubeClient, growth: Growth) -> None:
        self._client = client
        self._growth = growth
        self._watches: list[ListWatch] = []

    def start(self) -> list[threading.Event]:
        """Watch NodePools and NodeClaims if Karpenter's API is served; return the events set once each
        has been read. Without it, admission counts only the nodes there are."""
        served = served_resources(self._client, KARPENTER_API, "Karpenter's NodePools (autoscaled room)")
        if served is None or not {"nodepools", "nodeclaims"} <= served.names:
            return []
        log.info("autoscaling: counting what Karpenter's NodePools can still make (%s)", KARPENTER_API)
        growth = self._growth
        self._watches = [
            ListWatch(
                self._client, NODEPOOLS, on_list=growth.pools_listed, on_event=growth.pool_event, name="nodepools"
            ),
            ListWatch(
                self._client, NODECLAIMS, on_list=growth.claims_listed, on_event=growth.claim_event, name="nodeclaims"
            ),
        ]
        for watch in self._watches:
            threading.Thread(target=watch.run, name="watch-nodepools", daemon=True).start()
        return [watch.synced for watch in self._watches]

    def stop(self) -> None:
        for watch in self._watches:
            watch.stop()
