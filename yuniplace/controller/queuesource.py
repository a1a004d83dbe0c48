"""The queue configuration in force, read where users keep it (YuniKorn's queues.yaml in a ConfigMap,
Volcano's Queue objects, ai-scheduler's Pool objects) and applied as it changes, without a restart.

A source that cannot be read is refused whole: every problem is logged and posted as an event on the
ConfigMap, Queue or Pool that has it, and the last good configuration of that source stays in force, so
an edit with a typo never touches what is reserved or running. An accepted ConfigMap or Pool edit is
confirmed by an event too, so `kubectl get events -w` shows the outcome of every edit. A Pool is
guaranteed what its nodes hold, so the nodes are watched alongside the Pools, and the guarantees follow
nodes added, removed, relabelled or resized (quietly: no Pool was edited).

Applications are placed by YuniKorn's placement rules once per admission cycle (`placing`): the
queues rules create exist for as long as an application is placed in them, as in YuniKorn.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from yuniplace.admission.tickets import Refused
from yuniplace.controller.optionalapis import OptionalApi, ServedApi
from yuniplace.devices.inventory import DeviceInventory
from yuniplace.gang import keys, watched
from yuniplace.gang import pods as p
from yuniplace.gang.application import Application, queue_of
from yuniplace.kube import KubeClient
from yuniplace.kube.watch import ListWatch
from yuniplace.queues import aischeduler
from yuniplace.queues.config import (
    InvalidQueues,
    merge,
    place,
    read_ai_scheduler_pools,
    read_configmap,
    read_volcano_queues,
)
from yuniplace.queues.model import QueueConfig, QueueSpec
from yuniplace.queues.placement import PARENT_QUEUE_ANNOTATION, Placement
from yuniplace.runtime.events import EventRecorder, Reason

log = logging.getLogger(__name__)
VOLCANO_QUEUE_VERSION = "scheduling.volcano.sh/v1beta1"
POOL_VERSION = aischeduler.API_VERSION
MAX_PLACEMENTS_KEPT = 20_000  # placements remembered between cycles (an application's inputs rarely change)
MAX_PROBLEMS_SHOWN = 5

Object = Mapping[str, Any]


def _problems(error: InvalidQueues, limit: int = MAX_PROBLEMS_SHOWN) -> str:
    shown = "; ".join(str(problem) for problem in error.problems[:limit])
    more = len(error.problems) - limit
    return shown + (f"; and {more} more" if more > 0 else "")


def node_view(node: Object) -> dict[str, Any]:
    """What of a node the Pools' guarantees read: its name, labels and allocatable room. Kept in place
    of the node, so that its heartbeats and conditions change nothing."""
    metadata, status = node.get("metadata") or {}, node.get("status") or {}
    return {
        "metadata": {"name": metadata.get("name"), "labels": dict(metadata.get("labels") or {})},
        "status": {"allocatable": dict(status.get("allocatable") or status.get("capacity") or {})},
    }


def _summary(config: QueueConfig) -> str:
    if config.empty:
        return "no queues: applications wait first in first out in a queue per name, as without a configuration"
    leaves = len(config.leaves())
    text = f"{len(config.queues)} queues ({leaves} taking applications), {len(config.rules)} placement rule(s)"
    if config.warnings:
        text += f"; {len(config.warnings)} setting(s) without effect: " + "; ".join(config.warnings[:3])
    return text


class QueueSource:
    """Holds the configuration in force and places applications in it. Fed by watches (`start`), or by
    hand (`configmap_changed` and friends) where the objects were read once, as `yuniplace status` does."""

    def __init__(
        self,
        configmap: tuple[str, str] | None = None,
        *,
        recorder: EventRecorder | None = None,
        on_change: Callable[[], None] = lambda: None,
        events_namespace: str = "default",
    ) -> None:
        self._configmap_ref = configmap
        self._events_namespace = events_namespace  # where events on (cluster-scoped) Volcano Queues go
        self._recorder = recorder
        self._on_change = on_change
        self._lock = threading.Lock()
        self._configmap_data: object = None  # the data last read, so an unchanged resync says nothing
        self._yunikorn: QueueConfig | None = None  # the last good queues.yaml
        self._volcano_objects: dict[str, Object] = {}
        self._volcano: QueueConfig = QueueConfig()  # the last good set of Volcano Queues
        self._pool_objects: dict[str, Object] = {}  # the Pools as they are now, read or not
        self._good_pools: dict[str, Object] = {}  # the Pools of the last good set
        self._nodes: dict[str, Object] = {}  # each node's name, labels and allocatable room (`node_view`)
        self._node_devices: Callable[[], Mapping[str, Mapping[str, int]]] = dict  # each node's DRA devices
        self._pools: QueueConfig = QueueConfig()  # the last good set of Pools, guaranteed what the nodes hold
        self._config = QueueConfig()
        self._parent_queues: dict[str, str] = {}  # namespace -> its yunikorn.apache.org/parentqueue
        self._placements: dict[tuple[object, ...], Placement] = {}
        self._dynamic: frozenset[str] = frozenset()  # queues rules created in the last cycle
        self._watches: list[ListWatch] = []
        self._refusals: dict[str, str] = {}  # by source: why its last edit was refused, until one applies

    # -- the configuration ---------------------------------------------------------------------------

    def config(self) -> QueueConfig:
        return self._config

    def configmap_changed(self, configmap: Object | None) -> None:
        """The ConfigMap as it is now (None: it does not exist, and no queues come from it)."""
        with self._lock:
            data = None if configmap is None else configmap.get("data")
            if configmap is not None and data == self._configmap_data:
                return
            self._configmap_data = data
            if configmap is None:
                if self._configmap_ref is not None:
                    log.warning("ConfigMap %s/%s does not exist: no queues from it", *self._configmap_ref)
                yunikorn = None
            else:
                try:
                    yunikorn = read_configmap(configmap)
                except InvalidQueues as error:
                    self._refuse(
                        "configmap", error, [(configmap, "v1", "ConfigMap")], "its previous queues stay in force"
                    )
                    return
            self._refusals.pop("configmap", None)
            sources = [(configmap, "v1", "ConfigMap")] if configmap else []
            changed = self._apply(yunikorn, self._volcano, self._pools, sources, confirm=True)
        if configmap is not None and changed is not None:
            self._post(configmap, "v1", "ConfigMap", Reason.QUEUES_APPLIED, changed)
        if changed is not None:
            self._on_change()

    def volcano_queues_changed(self, queues: Iterable[Object]) -> None:
        """Volcano's Queues as they are now."""
        with self._lock:
            # A list's items need not carry their kind; these are Queues by where they were read.
            self._volcano_objects = {
                str(q["metadata"]["name"]): {"apiVersion": VOLCANO_QUEUE_VERSION, "kind": "Queue", **q} for q in queues
            }
            objects = [(q, VOLCANO_QUEUE_VERSION, "Queue") for q in self._volcano_objects.values()]
            try:
                volcano = read_volcano_queues(list(self._volcano_objects.values()))
            except InvalidQueues as error:
                named = [o for o in objects if any(o[0]["metadata"]["name"] in pr.source for pr in error.problems)]
                self._refuse("volcano", error, named, "the Queues as they were before stay in force")
                return
            self._refusals.pop("volcano", None)
            changed = self._apply(self._yunikorn, volcano, self._pools, objects)
        if changed is not None:
            self._on_change()

    def _volcano_event(self, kind: str, queue: Object) -> None:
        queues = {name: q for name, q in self._volcano_objects.items() if name != queue["metadata"]["name"]}
        if kind != "DELETED":
            queues[str(queue["metadata"]["name"])] = queue
        self.volcano_queues_changed(queues.values())

    def pools_changed(self, pools: Iterable[Object]) -> None:
        """ai-scheduler's Pools as they are now. Each Pool new or edited since they were last seen is told
        the outcome by an event: applied, or refused (and so is each Pool a problem names)."""
        with self._lock:
            seen = self._pool_objects
            # A list's items need not carry their kind; these are Pools by where they were read.
            self._pool_objects = {
                str(pool["metadata"]["name"]): {"apiVersion": POOL_VERSION, "kind": aischeduler.KIND, **pool}
                for pool in pools
            }
            edited = [
                (pool, POOL_VERSION, aischeduler.KIND)
                for name, pool in self._pool_objects.items()
                if name not in seen or seen[name].get("spec") != pool.get("spec")
            ]
            try:
                config = self._read_pools(self._pool_objects)
            except InvalidQueues as error:
                # Told: the Pools edited (their edit is not in force) and those a problem names; nobody
                # when nothing was edited (a relist of the same Pools).
                named = {problem.source for problem in error.problems}
                told = [
                    (pool, POOL_VERSION, aischeduler.KIND)
                    for name, pool in self._pool_objects.items()
                    if aischeduler.source_of(name) in named or any(pool is obj for obj, _, _ in edited)
                ]
                self._refuse("pools", error, told if edited else [], "the Pools as they were before stay in force")
                return
            self._refusals.pop("pools", None)
            changed = self._apply(
                self._yunikorn, self._volcano, config, edited, confirm=bool(edited), pool_objects=self._pool_objects
            )
        if changed is not None:
            for obj, api_version, kind in edited:
                self._post(obj, api_version, kind, Reason.QUEUES_APPLIED, changed)
            self._on_change()

    def _pool_event(self, kind: str, pool: Object) -> None:
        pools = {name: p for name, p in self._pool_objects.items() if name != pool["metadata"]["name"]}
        if kind != "DELETED":
            pools[str(pool["metadata"]["name"])] = pool
        self.pools_changed(pools.values())

    def nodes_changed(self, nodes: Iterable[Object]) -> None:
        """The nodes as they are now, for what each Pool is guaranteed."""
        views: dict[str, Object] = {str(node["metadata"]["name"]): node_view(node) for node in nodes}
        with self._lock:
            if views == self._nodes:
                return
            self._nodes = views
        self._nodes_moved()

    def _node_event(self, kind: str, node: Object) -> None:
        name = str(node["metadata"]["name"])
        view = None if kind == "DELETED" else node_view(node)
        with self._lock:
            if self._nodes.get(name) == view:
                return  # a heartbeat, a condition, a taint: nothing a Pool is guaranteed by
            if view is None:
                del self._nodes[name]
            else:
                self._nodes[name] = view
        self._nodes_moved()

    def count_devices(self, devices: DeviceInventory) -> None:
        """Have each Pool guaranteed its nodes' DRA devices too, as `devices` counts them, following them
        as drivers publish them."""
        self._node_devices = devices.node_devices
        devices.follow_published(self._nodes_moved)

    def _read_pools(self, pools: Mapping[str, Object]) -> QueueConfig:
        """The Pools read (under the lock), guaranteed what their nodes hold now."""
        if not pools:
            return read_ai_scheduler_pools([])
        try:
            devices = self._node_devices()
        except Exception:  # yuniplace's own fault: the Pools are still read, guaranteed their nodes without devices
            log.exception("the DRA devices of the Pools' nodes cannot be counted; their guarantees leave them out")
            devices = {}
        return read_ai_scheduler_pools(list(pools.values()), list(self._nodes.values()), devices)

    def _nodes_moved(self) -> None:
        """The nodes changed what they hold (their devices among it) or which Pool they are in: the last
        good Pools are read again (they read as before, nodes aside), and the guarantees follow."""
        with self._lock:
            if not self._good_pools:
                return
            config = self._read_pools(self._good_pools)
            changed = self._apply(self._yunikorn, self._volcano, config, [])
        if changed is not None:
            self._on_change()

    def _apply(
        self,
        yunikorn: QueueConfig | None,
        volcano: QueueConfig,
        pools: QueueConfig,
        sources: list[tuple[Object, str, str]],
        *,
        confirm: bool = False,
        pool_objects: Mapping[str, Object] | None = None,
    ) -> str | None:
        """Merge the sources into the configuration in force; what changed, or None if nothing did (or
        the merge was refused). `sources`: the objects a refusal is posted on; `confirm`: an edit to be
        confirmed even when it changes nothing; `pool_objects`: the Pools `pools` was read from."""
        try:
            merged = merge(yunikorn, volcano, pools)
        except InvalidQueues as error:
            self._refuse("merge", error, sources, "the queues in force stay as they were")
            return None
        self._yunikorn, self._volcano, self._pools = yunikorn, volcano, pools
        if pool_objects is not None:
            self._good_pools = dict(pool_objects)
        self._refusals.pop("merge", None)
        if merged == self._config and not confirm:
            return None
        self._config = merged
        self._placements.clear()
        summary = _summary(merged)
        log.info("queue configuration applied: %s", summary)
        for warning in merged.warnings:
            log.warning("queue configuration: %s", warning)
        return summary

    @property
    def refused(self) -> str | None:
        """Why the sources' last edits were refused, while they are."""
        return "; ".join(self._refusals.values()) or None

    def _refuse(self, source: str, error: InvalidQueues, objects: list[tuple[Object, str, str]], kept: str) -> None:
        note = f"refused, {kept}: {_problems(error)}"
        self._refusals[source] = note
        log.error("queue configuration %s", note)
        for problem in error.problems:
            log.error("queue configuration problem: %s", problem)
        for obj, api_version, kind in objects:
            self._post(obj, api_version, kind, Reason.QUEUES_REFUSED, note)

    def _post(self, obj: Object, api_version: str, kind: str, reason: Reason, note: str) -> None:
        if self._recorder is None:
            return
        warned = reason is Reason.QUEUES_APPLIED and bool(self._config.warnings)
        self._recorder.record_on(
            obj, api_version, kind, reason, note, kind="Warning" if warned else None, namespace=self._events_namespace
        )

    def namespaces_changed(self, namespaces: Iterable[Object]) -> None:
        parents = {}
        for namespace in namespaces:
            annotation = (namespace["metadata"].get("annotations") or {}).get(PARENT_QUEUE_ANNOTATION)
            if annotation:
                parents[str(namespace["metadata"]["name"])] = str(annotation)
        with self._lock:
            changed = parents != self._parent_queues
            self._parent_queues = parents
            self._placements.clear()
        if changed:
            self._on_change()

    def _namespace_event(self, kind: str, namespace: Object) -> None:
        name = str(namespace["metadata"]["name"])
        annotation = (
            None if kind == "DELETED" else (namespace["metadata"].get("annotations") or {}).get(PARENT_QUEUE_ANNOTATION)
        )
        with self._lock:
            if self._parent_queues.get(name) == annotation:
                return
            if annotation:
                self._parent_queues[name] = str(annotation)
            else:
                self._parent_queues.pop(name, None)
            self._placements.clear()
        self._on_change()

    # -- placing applications ------------------------------------------------------------------------

    def placing(self) -> Placing:
        """One admission cycle's placements, in the configuration as it is at its start."""
        with self._lock:
            return Placing(self, self._config, self._dynamic)

    def _placement(self, app: Application, config: QueueConfig, dynamic: frozenset[str]) -> Placement:
        originator = app.originator
        assert originator is not None
        provided = queue_of(app) or p.provided_queue(originator)
        namespace = app.key.namespace
        labels = p.labels_of(originator)
        service_account = p.service_account(originator)
        inputs = (provided, namespace, tuple(sorted(labels.items())), service_account)
        with self._lock:
            if config is not self._config:
                return self._place(config, inputs, dynamic)
            found = self._placements.get(inputs)
            if found is None:
                found = self._place(config, inputs, dynamic)
                if len(self._placements) >= MAX_PLACEMENTS_KEPT:
                    self._placements.clear()
                self._placements[inputs] = found
            return found

    def _place(self, config: QueueConfig, inputs: tuple[Any, ...], dynamic: frozenset[str]) -> Placement:
        provided, namespace, labels, service_account = inputs
        parent = self._parent_queues.get(namespace)
        return place(
            config,
            provided_queue=provided,
            namespace=namespace,
            labels=dict(labels),
            service_account=service_account,
            namespace_annotations={PARENT_QUEUE_ANNOTATION: parent} if parent else None,
            dynamic_queues=dynamic,
        )

    def _cycle_ended(self, config: QueueConfig, created: Iterable[str]) -> None:
        with self._lock:
            if config is self._config:
                self._dynamic = frozenset(created)

    # -- watching ------------------------------------------------------------------------------------

    def start(self, client: KubeClient) -> list[threading.Event]:
        """Watch the ConfigMap (and the namespaces its rules read); return the events set once each has
        been read. Volcano's Queues and ai-scheduler's Pools are watched while their APIs are served
        (`feeds`)."""
        if self._configmap_ref is not None:
            namespace, name = self._configmap_ref
            self._watches.append(
                ListWatch(
                    client,
                    f"/api/v1/namespaces/{namespace}/configmaps",
                    on_list=lambda items: self.configmap_changed(items[0] if items else None),
                    on_event=lambda kind, cm: self.configmap_changed(None if kind == "DELETED" else cm),
                    selectors={"fieldSelector": f"metadata.name={name}"},
                    name="queues configmap",
                )
            )
            self._watches.append(
                ListWatch(
                    client,
                    "/api/v1/namespaces",
                    on_list=self.namespaces_changed,
                    on_event=self._namespace_event,
                    name="namespaces",
                )
            )
        for watch in self._watches:
            threading.Thread(target=watch.run, name="watch-queues", daemon=True).start()
        return [watch.synced for watch in self._watches]

    def stop(self) -> None:
        for watch in self._watches:
            watch.stop()

    def feeds(self, client: KubeClient) -> list[VolcanoQueues | AiSchedulerPools]:
        """The queue sources of optional APIs, for the follower of the cluster's APIs to start and stop."""
        return [VolcanoQueues(self, client), AiSchedulerPools(self, client)]


VOLCANO_QUEUES = OptionalApi(
    key="volcano-queues",
    title="Volcano Queues",
    reads="reading Volcano Queues into the queue configuration",
    without="no queue comes from Volcano Queues",
    candidates=((keys.VOLCANO_API, frozenset({"queues"})),),
)
AI_SCHEDULER_POOLS = OptionalApi(
    key="ai-scheduler-pools",
    title="ai-scheduler Pools",
    reads="reading ai-scheduler Pools into the queue configuration, with the nodes each holds",
    without="no queue comes from ai-scheduler Pools",
    candidates=((keys.AI_SCHEDULER_API, frozenset({"pools"})),),
)


class _SourceFeed:
    """Watches of one optional queue source, feeding the QueueSource."""

    def __init__(self, source: QueueSource, client: KubeClient) -> None:
        self._source = source
        self._client = client
        self._watches: list[ListWatch] = []

    def _run(self, watches: list[ListWatch]) -> list[threading.Event]:
        self._watches = watches
        for watch in watches:
            threading.Thread(target=watch.run, name="watch-queues", daemon=True).start()
        return [watch.synced for watch in watches]

    def _stop_watches(self) -> None:
        for watch in self._watches:
            watch.stop()
        self._watches = []


class VolcanoQueues(_SourceFeed):
    optional_api = VOLCANO_QUEUES

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        source = self._source
        return self._run(
            [
                ListWatch(
                    self._client,
                    f"{keys.VOLCANO_API}/queues",
                    on_list=source.volcano_queues_changed,
                    on_event=source._volcano_event,
                    name="volcano queues",
                    on_missing=missing,
                )
            ]
        )

    def stop(self, *, forget: bool = True) -> None:
        self._stop_watches()
        if forget:
            self._source.volcano_queues_changed([])


class AiSchedulerPools(_SourceFeed):
    """A Pool is guaranteed what its nodes hold: the nodes are watched beside the Pools."""

    optional_api = AI_SCHEDULER_POOLS

    def start(self, served: ServedApi, missing: Callable[[], None]) -> list[threading.Event]:
        source = self._source
        return self._run(
            [
                ListWatch(
                    self._client,
                    f"{keys.AI_SCHEDULER_API}/pools",
                    on_list=source.pools_changed,
                    on_event=source._pool_event,
                    name="ai-scheduler pools",
                    on_missing=missing,
                ),
                ListWatch(
                    self._client,
                    "/api/v1/nodes",
                    on_list=source.nodes_changed,
                    on_event=source._node_event,
                    name="nodes of pools",
                    trim=node_view,
                    decoding=watched.NODES,
                ),
            ]
        )

    def stop(self, *, forget: bool = True) -> None:
        self._stop_watches()
        if forget:
            self._source.pools_changed([])


class Placing:
    """One admission cycle's placements. Its `config` is the configuration the cycle started with, and
    the queues the placement rules create for the applications placed so far."""

    def __init__(self, source: QueueSource, config: QueueConfig, dynamic: frozenset[str]) -> None:
        self._source = source
        self._base = config
        self._dynamic = dynamic
        self._created: dict[str, QueueSpec] = {}
        self._config = config

    @property
    def config(self) -> QueueConfig:
        return self._config

    def place(self, app: Application) -> str | Refused:
        """The queue the application goes to; Refused says why none takes it. Without a configuration,
        the queue it names (a Volcano PodGroup's queue, YuniKorn's queue label), else its namespace."""
        if self._base.empty:
            return queue_of(app) or app.queue
        placement = self._source._placement(app, self._base, self._dynamic)
        if placement.queue is None:
            return Refused(Reason.GANG_REFUSED, f"admission refuses the gang: no queue takes it: {placement.reason}")
        new = [spec for spec in placement.new_queues if spec.path not in self._created]
        if new:
            self._created.update({spec.path: spec for spec in new})
            self._config = replace(self._base, queues={**self._base.queues, **self._created})
        return placement.queue

    def done(self) -> None:
        """The cycle has placed everyone: the queues created now exist until a cycle places nobody there."""
        self._source._cycle_ended(self._base, [path for path, spec in self._created.items() if not spec.parent_queue])
