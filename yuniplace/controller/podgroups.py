"""PodGroups, of every gang dialect that has them (scheduler-plugins', Volcano's): each API watched while
it is installed (the gangs their members name), and where their status is written (podgroupstatus.py
says what it is). Kubernetes' own pod groups (the Workload API) are watched too, in the newest version
the cluster serves, to be seen. Each is an optional API (optionalapis.py): watched from the moment it is
served, forgotten when it goes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from yuniplace.controller.optionalapis import OptionalApi, ServedApi
from yuniplace.gang import pods as p
from yuniplace.gang.dialects.base import GangDialect, PodGroupApi
from yuniplace.gang.dialects.registry import pod_group_apis
from yuniplace.kube import KubeClient, workloadapi
from yuniplace.kube.discovery import discover
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


def pod_group_optional_api(api: PodGroupApi) -> OptionalApi:
    """A PodGroup dialect's API as an optional API."""
    return OptionalApi(
        key=api.watch_name,
        title=f"{api.kind}s",
        reads=f"reading {api.gangs}, whose pods name their {api.kind} ({api.named_by})",
        without=f"{api.gangs} are not read: their pods wait, gated, for their {api.kind}",
        candidates=((api.path, frozenset({"podgroups"})),),
    )


class PodGroupWatch:
    """One API's PodGroups in the watched namespace(s), by application key (a PodGroup's name is its
    gang's application id); every change wakes that application."""

    def __init__(
        self, client: KubeClient, api: PodGroupApi, namespace: str | None, wake: Callable[[p.AppKey], None]
    ) -> None:
        self._client = client
        self._wake = wake
        self.api = api
        self.optional_api = pod_group_optional_api(api)
        self.status_subresource = True
        self._by_key: dict[p.AppKey, PodGroup] = {}
        self._path = f"{api.path}/namespaces/{namespace}/podgroups" if namespace else f"{api.path}/podgroups"
        self.name = api.watch_name
        self.watch: ListWatch | None = None

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

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        """Watch the API as served; return the event set once the first list is in. Where the CRD
        serves no status subresource (Volcano's own), a PodGroup's status is written on the object."""
        self.status_subresource = STATUS in served.resources
        if not self.status_subresource:
            log.info(
                "the %s PodGroup CRD has no status subresource: their status is written on the object", self.api.path
            )
        self.watch = ListWatch(
            self._client, self._path, on_list=self._listed, on_event=self._changed, name=self.name, on_missing=missing
        )
        threading.Thread(target=self.watch.run, name=f"watch-{self.name}", daemon=True).start()
        return [self.watch.synced]

    def stop(self, *, forget: bool = True) -> None:
        """The API went (its CRD deleted): its PodGroups with it, and their gangs wake to find them gone."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if forget:
            self._listed([])


NATIVE = OptionalApi(
    key="workload-api",
    title="native pod groups (the Workload API)",
    reads="watching Kubernetes' own pod groups: their gangs are counted, and held by their queue where the "
    "webhook gates their pods",
    without="pods of native pod groups are left to kube-scheduler, unseen by admission, queues and status",
    candidates=tuple((v.api, frozenset({v.resource})) for v in workloadapi.KNOWN_VERSIONS),
    other_versions=frozenset({"v1"}),  # PriorityClasses
)


def native_version(served: ServedApi) -> workloadapi.ServedVersion:
    return next(v for v in workloadapi.KNOWN_VERSIONS if v.api == served.path)


def served_native_version(client: KubeClient) -> workloadapi.ServedVersion | None:
    """The newest version of the Workload API the cluster serves that yuniplace reads, asked once (as
    `yuniplace status` does); None when it serves none (its feature gates are off), or only versions
    yuniplace does not know, which the log says: their gangs are then left to kube-scheduler, unseen by
    admission, queues and status."""
    found = discover(client, NATIVE.paths)
    served = NATIVE.served_as(found)
    if (unread := NATIVE.unread_versions(found)) and not isinstance(served, ServedApi):
        log.warning(
            "the cluster serves the Workload API as %s, a version yuniplace does not read (it reads %s): %s",
            ", ".join(f"{workloadapi.GROUP}/{v}" for v in unread),
            ", ".join(v.version for v in workloadapi.KNOWN_VERSIONS),
            NATIVE.without,
        )
    return native_version(served) if isinstance(served, ServedApi) else None


class NativeGroupWatch:
    """Kubernetes' own pod groups in the watched namespace(s), by application key (a pod group's name
    as its pods name it); every change wakes the applications it describes."""

    optional_api = NATIVE

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

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        """Watch the newest served version yuniplace reads."""
        version = native_version(served)
        scope = f"/namespaces/{self._namespace}" if self._namespace else ""
        path = f"{version.api}{scope}/{version.resource}"
        self.watch = ListWatch(
            self._client, path, on_list=self._listed, on_event=self._changed, name="native-groups", on_missing=missing
        )
        self.version = version
        threading.Thread(target=self.watch.run, name="watch-native-groups", daemon=True).start()
        return [self.watch.synced]

    def stop(self, *, forget: bool = True) -> None:
        """The API is no longer served (its gates switched off), or served in another version."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if forget:
            self.version = None
            self._listed([])


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

    def feeds(self) -> list[PodGroupWatch | NativeGroupWatch]:
        """Every watch, each of an optional API, for the follower of the cluster's APIs to start and stop."""
        return [*self.watches.values(), self.native]
