"""PodGroups, of every gang dialect that has them (scheduler-plugins', Volcano's): each API watched when
it is installed (the gangs their members name), and where their status is written (podgroupstatus.py
says what it is). Kubernetes' own pod groups (the Workload API) are watched too, in the newest version
the cluster serves, to be seen."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from yuniplace.gang import pods as p
from yuniplace.gang.dialects.base import GangDialect, PodGroupApi
from yuniplace.gang.dialects.registry import pod_group_apis
from yuniplace.kube import KubeClient, workloadapi
from yuniplace.kube.discovery import served_resources
from yuniplace.kube.watch import ListWatch

log = logging.getLogger(__name__)
PodGroup = dict[str, Any]
STATUS = "podgroups/status"


def _key(pod_group: PodGroup) -> p.AppKey:
    return p.AppKey(pod_group["metadata"]["namespace"], pod_group["metadata"]["name"])


def status_path(api: PodGroupApi, key: p.AppKey, subresource: bool = True) -> str:
    """Where the status of the PodGroup of `key` is written: its status subresource, or, where the
    installed CRD has none (Volcano's own CRD), the PodGroup itself."""
    path = f"{api.path}/namespaces/{key.namespace}/podgroups/{key.app_id}"
    return f"{path}/status" if subresource else path


class PodGroupWatch:
    """One API's PodGroups in the watched namespace(s), by application key (a PodGroup's name is its
    gang's application id); every change wakes that application."""

    def __init__(
        self, client: KubeClient, api: PodGroupApi, namespace: str | None, wake: Callable[[p.AppKey], None]
    ) -> None:
        self._client = client
        self._wake = wake
        self.api = api
        self.status_subresource = True
        self._by_key: dict[p.AppKey, PodGroup] = {}
        path = f"{api.path}/namespaces/{namespace}/podgroups" if namespace else f"{api.path}/podgroups"
        self.name = api.watch_name
        self.watch = ListWatch(client, path, on_list=self._listed, on_event=self._changed, name=self.name)

    def served(self) -> bool:
        """Whether the API (the CRD) is installed, and whether it serves a status subresource; without
        the API, that dialect is off."""
        served = served_resources(self._client, self.api.path, self.api.gangs)
        if served is None:
            return False
        # Only a listing of podgroups without podgroups/status says there is none: discovery may not list
        # a CRD's resources yet a moment after it was installed.
        self.status_subresource = STATUS in served.names or "podgroups" not in served.names
        if not self.status_subresource:
            log.info(
                "the %s PodGroup CRD has no status subresource: their status is written on the object", self.api.path
            )
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
        threading.Thread(target=self.watch.run, name=f"watch-{self.name}", daemon=True).start()
        return self.watch.synced


def served_native_version(client: KubeClient) -> workloadapi.ServedVersion | None:
    """The newest version of the Workload API the cluster serves that yuniplace reads; None when it
    serves none (its feature gates are off), or only versions yuniplace does not know, which the log
    says: their gangs are then left to kube-scheduler, unseen by admission, queues and status."""
    group = served_resources(client, "/apis/" + workloadapi.GROUP, "native gangs (the Workload API)")
    versions = group.versions if group is not None else []
    gang_versions = []
    for version in versions:
        resources = served_resources(client, f"/apis/{workloadapi.GROUP}/{version}", "native gangs (the Workload API)")
        if resources is not None and resources.names & {"podgroups", "workloads"}:
            gang_versions.append(version)
    for known in workloadapi.KNOWN_VERSIONS:
        if known.version in gang_versions:
            return known
    if gang_versions:
        log.warning(
            "the cluster serves the Workload API as %s/%s, a version yuniplace does not read (it reads %s): "
            "pods of native pod groups are left to kube-scheduler, unseen by admission, queues and status",
            workloadapi.GROUP,
            ", ".join(gang_versions),
            ", ".join(v.version for v in workloadapi.KNOWN_VERSIONS),
        )
    return None


class NativeGroupWatch:
    """Kubernetes' own pod groups in the watched namespace(s), by application key (a pod group's name
    as its pods name it); every change wakes the applications it describes."""

    def __init__(self, client: KubeClient, namespace: str | None, wake: Callable[[p.AppKey], None]) -> None:
        self._client = client
        self._namespace = namespace
        self._wake = wake
        self._groups: dict[str, dict[str, workloadapi.NativeGroup]] = {}  # namespace -> group name -> group
        self.version: workloadapi.ServedVersion | None = None
        self.watch: ListWatch | None = None

    def get(self, key: p.AppKey) -> PodGroup | None:
        found = workloadapi.lookup(self._groups.get(key.namespace, {}), key.app_id)
        return None if found is None else found.as_object()

    def _described(self, obj: PodGroup) -> tuple[str, dict[str, workloadapi.NativeGroup]]:
        namespace = str(obj["metadata"]["namespace"])
        return namespace, {group.name: group for group in workloadapi.groups_described(obj)}

    def _listed(self, objects: list[PodGroup]) -> None:
        before = {p.AppKey(ns, name) for ns, groups in self._groups.items() for name in groups}
        fresh: dict[str, dict[str, workloadapi.NativeGroup]] = {}
        for obj in objects:
            namespace, groups = self._described(obj)
            fresh.setdefault(namespace, {}).update(groups)
        self._groups = fresh
        for key in before | {p.AppKey(ns, name) for ns, groups in fresh.items() for name in groups}:
            self._wake(key)

    def _changed(self, kind: str, obj: PodGroup) -> None:
        namespace, groups = self._described(obj)
        held = self._groups.setdefault(namespace, {})
        for name, group in groups.items():
            if kind == "DELETED":
                held.pop(name, None)
            else:
                held[name] = group
            self._wake(p.AppKey(namespace, name))

    def start(self) -> threading.Event | None:
        """Watch the newest served version yuniplace reads; None when there is none."""
        self.version = served_native_version(self._client)
        if self.version is None:
            return None
        served = self.version
        scope = f"/namespaces/{self._namespace}" if self._namespace else ""
        path = f"{served.api}{scope}/{served.resource}"
        log.info("native gangs: watching %s/%s %s", workloadapi.GROUP, served.version, served.resource)
        self.watch = ListWatch(self._client, path, on_list=self._listed, on_event=self._changed, name="native-groups")
        threading.Thread(target=self.watch.run, name="watch-native-groups", daemon=True).start()
        return self.watch.synced

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()


class PodGroups:
    """Every PodGroup API's watch. A scheduler-plugins and a Volcano PodGroup may share a name: an
    application's PodGroup is the one of the API its pods name (`pods_of`: the application's pods)."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str | None,
        wake: Callable[[p.AppKey], None],
        dialect_of: Callable[[p.AppKey], GangDialect | None],
    ) -> None:
        self._dialect_of = dialect_of
        self.watches = {api: PodGroupWatch(client, api, namespace, wake) for api in pod_group_apis()}
        self.native = NativeGroupWatch(client, namespace, wake)

    def get(self, key: p.AppKey) -> PodGroup | None:
        """The pod group of the application's dialect (`dialect_of`: the store's pod_group_dialect)."""
        dialect = self._dialect_of(key)
        if dialect is None:
            return None
        if dialect.started_by_kube_scheduler:
            return self.native.get(key)
        return None if dialect.pod_groups is None else self.watches[dialect.pod_groups].get(key)

    def status_path(self, api: PodGroupApi, key: p.AppKey) -> str:
        return status_path(api, key, self.watches[api].status_subresource)

    def start(self) -> list[threading.Event]:
        """Watch every API that is served; return the events set once each first list is in."""
        synced = [synced for watch in self.watches.values() if (synced := watch.start()) is not None]
        native_synced = self.native.start()
        return synced if native_synced is None else [*synced, native_synced]

    def stop(self) -> None:
        for watch in self.watches.values():
            watch.watch.stop()
        self.native.stop()
