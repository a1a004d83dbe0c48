"""Watches of an autoscaler's node pools: Karpenter's NodePools and NodeClaims, while the cluster serves
them, feed admission's count of the room that can come (admission/growth.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from yuniplace.admission.growth import NODECLAIMS, NODEPOOLS, Growth
from yuniplace.controller.optionalapis import OptionalApi, ServedApi
from yuniplace.kube import KubeClient
from yuniplace.kube.watch import ListWatch

KARPENTER_API = "/apis/karpenter.sh/v1"
KARPENTER = OptionalApi(
    key="karpenter",
    title="Karpenter NodePools and NodeClaims",
    reads="counting what Karpenter's NodePools can still make as room that can come",
    without="admission counts only the nodes there are",
    candidates=((KARPENTER_API, frozenset({"nodepools", "nodeclaims"})),),
)


class NodePoolWatches:
    """Without them, admission counts only the nodes there are."""

    optional_api = KARPENTER

    def __init__(self, client: KubeClient, growth: Growth) -> None:
        self._client = client
        self._growth = growth
        self._watches: list[ListWatch] = []

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        """Watch NodePools and NodeClaims; return the events set once each has been read."""
        growth = self._growth
        self._watches = [
            ListWatch(
                self._client,
                NODEPOOLS,
                on_list=growth.pools_listed,
                on_event=growth.pool_event,
                name="nodepools",
                on_missing=missing,
            ),
            ListWatch(
                self._client,
                NODECLAIMS,
                on_list=growth.claims_listed,
                on_event=growth.claim_event,
                name="nodeclaims",
                on_missing=missing,
            ),
        ]
        for watch in self._watches:
            threading.Thread(target=watch.run, name="watch-nodepools", daemon=True).start()
        return [watch.synced for watch in self._watches]

    def stop(self, *, forget: bool = True) -> None:
        for watch in self._watches:
            watch.stop()
        self._watches = []
        if forget:
            self._growth.pools_listed([])
            self._growth.claims_listed([])
