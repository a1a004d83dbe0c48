"""scheduler-plugins' PodGroups, watched when their API is installed: the gangs their members name."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from yuniplace.gang import keys
from yuniplace.gang import pods as p
from yuniplace.kube import ApiError, KubeClient, NotFound
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)
PodGroup = dict[str, Any]


def _key(pod_group: PodGroup) -> p.AppKey:
    return p.AppKey(pod_group["metadata"]["namespace"], pod_group["metadata"]["name"])


class PodGroups:
    """The PodGroups of the watched namespace(s), by application key (a PodGroup's name is its
    gang's application id); every change wakes that application."""

    def __init__(self, client: KubeClient, namespace: str | None, wake: Callable[[p.AppKey], None]) -> None:
        self._client = client
        self._wake = wake
        self._by_key: dict[p.AppKey, PodGroup] = {}
        path = f"{keys.POD_GROUP_API}/namespaces/{namespace}/podgroups" if namespace else f"{keys.POD_GROUP_API}/podgroups"
        self.watch = ListWatch(client, path, on_list=self._listed, on_event=self._changed, name="podgroups")

    def served(self) -> bool:
        """Whether the PodGroup API (the CRD) is installed; without it, that dialect is off."""
        try:
            self._client.get(keys.POD_GROUP_API)
        except NotFound:
            log.info("the %s API is not installed: PodGroup gangs are not read (install the chart's CRD to enable them)",
                     keys.POD_GROUP_API)
            return False
        except ApiError as error:
            log.warning("cannot tell whether the PodGroup API is installed (%s): PodGroup gangs are not read", error)
            return False
        return True

    def get(self, key: p.AppKey) -> PodGroup | None:
        return self._by_key.get(key)

    def _listed(self, pod_groups: list[PodGroup]) -> None:
        before = set(self._by_key)
        self._by_key = {_key(g): g for g in pod_groups}
        for key in before | set(self._by_key):
            self._wake(key)

    def _changed(self, kind: str, pod_group: PodGroup) -> None:
        key = _key(pod_group)
        if kind == "DELETED":
            self._by_key.pop(key, None)
        else:
            self._by_key[key] = pod_group
        self._wake(key)

    def start(self) -> threading.Event | None:
        """Watch, if the API is served; return the event set once the first list is in."""
        if not self.served():
            return None
        threading.Thread(target=self.watch.run, name="watch-podgroups", daemon=True).start()
        return self.watch.synced
