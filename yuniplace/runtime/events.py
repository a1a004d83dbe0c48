"""Kubernetes Events (events.k8s.io/v1) on the pods an application's story concerns.

Events are auxiliary: they are posted from a queue by a thread of their own, so a slow or failing
events API never delays a reservation, and a failure is logged, never raised.
"""

from __future__ import annotations

import datetime
import enum
import logging
import queue
import socket
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yuniplace.kube import KubeClient
from yuniplace.runtime.metrics import Metrics

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "yuniplace.io/controller"
MAX_NOTE = 1024
# How a GangRestarting or GangPreempted event begins when the API refused to evict the gang whole (a
# PodDisruptionBudget): it keeps running, and nothing was restarted.
EVICTION_REFUSED = "cannot be evicted whole"
FLUSH_TIMEOUT_S = 5.0
POSTERS = 4

NORMAL, WARNING = "Normal", "Warning"


class Reason(enum.StrEnum):
    """Every reason yuniplace posts an event for, with the verb of its `action` field (events.k8s.io
    requires one), the types it is posted with ("Warning/Normal": the first is its usual one), the
    objects it is posted on and when it is sent. A str, so the reason reads as the text kubectl shows.
    The reference of events (python -m yuniplace.docsgen) is made from this table."""

    action: str
    kinds: tuple[str, ...]
    on: str
    when: str

    def __new__(cls, reason: str, action: str, kinds: str, on: str, when: str) -> Reason:
        member = str.__new__(cls, reason)
        member._value_ = reason
        member.action = action
        member.kinds = tuple(kinds.split("/"))
        member.on = on
        member.when = when
        return member

    TASK_GROUP_MATCH = (
        "TaskGroupMatch",
        "Match",
        NORMAL,
        "originator",
        "the gang is recognised: groups, sizes, timeout, style",
    )
    TASK_GROUP_WARNING = (
        "TaskGroupWarning",
        "Validate",
        WARNING,
        "originator",
        "an unknown task-group key was ignored, a topology ask (Kueue's beside yuniplace's; any, with admission off),"
        " a task group made as large as its members (which request more than its `minResource`), or a PodGroup's "
        "`minResources` beyond what its members request",
    )
    TASK_GROUPS_ERROR = (
        "TaskGroupsError",
        "Validate",
        WARNING,
        "pod",
        "invalid annotations, each problem with its field and value",
    )
    INTERNAL_ERROR = (
        "InternalError",
        "Hold",
        WARNING,
        "originator (else the gang's first pod)",
        "a fault of yuniplace's own, not of the gang's task groups, met admitting it, planning its next step or "
        "carrying the plan out (which stage, the error's type, what of the plan was done): the gang is held as it is "
        "(gated, nothing failed or released, no Soft fallback) and tried again after a backoff; said once for a run"
        " of faults",
    )
    CREATING_PLACEHOLDERS = (
        "CreatingPlaceholders",
        "Reserve",
        NORMAL,
        "originator",
        "the reservation starts",
    )
    PLACEHOLDER_ALLOCATED = (
        "PlaceholderAllocated",
        "Reserve",
        NORMAL,
        "originator",
        "a task group's placeholders are all placed",
    )
    GANG_RESERVATION_COMPLETE = (
        "GangReservationComplete",
        "Reserve",
        NORMAL,
        "originator",
        "every placeholder is placed; swaps begin",
    )
    PLACEHOLDER_SWAPPED = (
        "PlaceholderSwapped",
        "Swap",
        NORMAL,
        "originator (and each member with `--member-events`)",
        "a task group's members swapped in are bound: how many on their reserved node, how many moved and why",
    )
    GANG_STARTING = (
        "GangStarting",
        "Start",
        f"{NORMAL}/{WARNING}",
        "originator (a Warning: the member whose seat was taken)",
        "every member exists and the whole gang fits now: its members start on the nodes admission chose, without "
        "placeholders; a Warning when another pod took a member's seat before it was nominated there (that member "
        "is released to be scheduled wherever there is room)",
    )
    GANG_STARTED = (
        "GangStarted",
        "Start",
        NORMAL,
        "originator (and each member with `--member-events`)",
        "a task group's members started directly are bound: how many on their node, how many moved and why",
    )
    TASK_GROUP_RESOURCE_MISMATCH = (
        "TaskGroupResourceMismatch",
        "Swap",
        WARNING,
        "member",
        "a member come after its gang started requests more than its group's placeholders hold (resource and both "
        "sizes)",
    )
    # A timeout is a warning; releasing the placeholders a running application left unused is not.
    PLACEHOLDER_TIMEOUT = (
        "PlaceholderTimeOut",
        "Timeout",
        WARNING + "/" + NORMAL,
        "originator",
        "the reservation timed out (k/n placed), or unused placeholders were released",
    )
    GANG_SCHEDULING_FAILED = (
        "GangSchedulingFailed",
        "Fallback",
        WARNING,
        "originator",
        "Soft fallback: placeholders removed, pods scheduled normally",
    )
    APPLICATION_FAILED = (
        "ApplicationFailed",
        "Fail",
        WARNING,
        "originator",
        "Hard timeout: the application fails; or a degraded gang passed its restart limit",
    )
    RESOURCE_RESERVATION_TIMEOUT = (
        "ResourceReservationTimeout",
        "Fail",
        WARNING,
        "each failed pod",
        "the pod was failed (status reason `ResourceReservationTimeout`): its Hard gang timed out, or it is a "
        "member of a PodGroup that never came within `--default-timeout` (nor, maybe, the PodGroup's CRD)",
    )
    GANG_TIMED_OUT = (
        "GangTimedOut",
        "Timeout",
        WARNING,
        "originator, each member",
        "a Koordinator gang timed out: its pods are marked timed out (Koordinator's `timeout` annotation set to "
        "`true`) and will not be scheduled; delete and recreate them",
    )
    GANG_WAITING = (
        "GangWaiting",
        "Admit",
        NORMAL,
        "originator",
        "admission holds the gang back: what does not fit, its queue and position",
    )
    GANG_EXCEEDS_CAPACITY = (
        "GangExceedsCapacity",
        "Admit",
        WARNING,
        "originator",
        "the gang is larger than all matching nodes; admitted anyway (an autoscaler may add nodes), or, where only "
        "DRA devices are short (no autoscaler adds a driver's devices), waiting whole with its timeout running",
    )
    GANG_DEVICES = (
        "GangDevices",
        "Admit",
        WARNING,
        "originator",
        "the gang's DRA devices cannot be counted (a ResourceClaimTemplate, claim or DeviceClass that does not "
        "exist, a request of alternatives, a CEL selector yuniplace cannot evaluate): it waits whole, its timeout "
        "running, until they can; or the API forbids yuniplace to hand a placeholder's claims to its member (a "
        "permission the chart grants is missing): the member stays gated, its devices held",
    )
    GANG_REFUSED = (
        "GangRefused",
        "Admit",
        WARNING,
        "originator",
        "admission refuses the gang (a per-namespace limit); Soft: scheduled normally, Hard: failed",
    )
    GANG_RESERVATION_RELEASED = (
        "GangReservationReleased",
        "Reserve",
        WARNING,
        "originator",
        "Strict mode gave a partial reservation back, or a Coscheduling, PodGroup or Volcano gang timed out (or its "
        "pods did not all exist in time), or a Soft gang that requires a topology domain timed out holding none, and "
        "gave its reservation back; when it tries again",
    )
    PLACEHOLDERS_REFUSED = (
        "PlaceholdersRefused",
        "Reserve",
        WARNING,
        "originator",
        "the API refused its placeholders (a quota): released at once, tried again after a backoff",
    )
    GANG_GROUP_WAITING = (
        "GangGroupWaiting",
        "Reserve",
        NORMAL,
        "originator",
        "reserved, waiting for the rest of its gang group",
    )
    SCHEDULER_NOT_RUNNING = (
        "SchedulerNotRunning",
        "Validate",
        WARNING,
        "pod",
        "a gang pod for another scheduler that no scheduler has picked up in 10 s, and what to change",
    )
    GANG_PREEMPTED = (
        "GangPreempted",
        "Preempt",
        WARNING,
        "originator",
        "the queue that lent its room takes it back: which queue, from which queue, and what goes (placeholders, or "
        "every pod of the gang); or why the gang could not be evicted whole",
    )
    QUEUES_APPLIED = (
        "QueuesApplied",
        "Configure",
        NORMAL + "/" + WARNING,
        "queues ConfigMap",
        "an edit of queues.yaml is in force: how many queues and rules; Warning when some settings have no effect "
        "(each named)",
    )
    QUEUES_REFUSED = (
        "QueuesRefused",
        "Configure",
        WARNING,
        "queues ConfigMap, Volcano Queue",
        "the configuration cannot be used: each problem by queue and field; the previous one stays in force",
    )
    NATIVE_GANG = (
        "NativeGang",
        "Observe",
        NORMAL,
        "first pod of a native pod group never gated, or one whose queue does not hold native gangs",
        "a gang of the Workload API left to kube-scheduler's gang plugin (its minimum, its queue, why: an opted-out "
        "namespace or queue, no queues configured; yuniplace then neither gates nor placeholds it), and again when it"
        " has started whole",
    )
    GANG_DEGRADED = (
        "GangDegraded",
        "Observe",
        WARNING,
        "originator",
        "a started gang has been below its minimum for 5 s: how many members are up of its minimum, and each member "
        "lost and why (failed, with its reason; being deleted; its node gone, NotReady or unreachable), those that no"
        " longer exist and those waiting to be scheduled",
    )
    GANG_RECOVERED = (
        "GangRecovered",
        "Observe",
        NORMAL,
        "originator",
        "a degraded gang is back at its minimum (a replacement runs), and after how long",
    )
    GANG_RESTARTING = (
        "GangRestarting",
        "Restart",
        WARNING,
        "originator",
        "a degraded gang with `restart` is evicted whole for its owner to make it again: how far below its minimum, "
        "which owner, which restart of how many; or why it could not be evicted whole",
    )
    GANG_BACKING_OFF = (
        "GangBackingOff",
        "Wait",
        WARNING,
        "originator",
        "its owner (a RayCluster, say) made a gang again whose last attempt failed (Hard style): the new attempt "
        "waits a backoff, doubled each time, before it reserves; which attempt of how many",
    )
    OPTIONAL_API_SERVED = (
        "OptionalApiServed",
        "Discover",
        NORMAL,
        "the controller's Lease (its pod without leader election)",
        "an optional API yuniplace reads is served now, or in another version (Karpenter's, a PodGroup "
        "dialect's, Volcano's Queues, ai-scheduler's Pools, the Workload API, DRA): its watches start, and "
        "every gang is decided again",
    )
    OPTIONAL_API_GONE = (
        "OptionalApiGone",
        "Discover",
        WARNING,
        "the controller's Lease (its pod without leader election)",
        "an optional API yuniplace read is no longer served (its CRD deleted, its feature gate off): its "
        "watches stop, what they read is forgotten, and what follows is said",
    )
    GANG_RELEASED = (
        "GangReleased",
        "Release",
        WARNING,
        "originator",
        "a degraded gang with `release` stayed below its minimum past its recovery timeout and is evicted whole, its "
        "room given back",
    )


@dataclass(frozen=True)
class ObjectRef:
    """An object events are posted on that yuniplace need not have read (the controller's own Lease)."""

    api_version: str
    kind: str
    namespace: str
    name: str


# A pod yuniplace failed carries one of its reasons as its status reason.
FAILURE_REASONS = frozenset(reason.value for reason in Reason)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    def __init__(self, client: KubeClient, *, metrics: Metrics | None = None, instance: str | None = None) -> None:
        self._client = client
        self._metrics = metrics  # counts the events posted, by type and reason
        self._instance = instance or socket.gethostname()
        # Events are posted by POSTERS threads, each object's by the same one, in the order they were
        # recorded: a busy API server answers each post late, and one thread posting every gang's events
        # in turn had them reach `kubectl get events -w` ten seconds and more after they happened.
        self._queues: list[queue.Queue[dict[str, Any] | None]] = [queue.Queue() for _ in range(POSTERS)]
        self._last_stamp = 0
        self._stamp_lock = threading.Lock()
        for index, posts in enumerate(self._queues):
            threading.Thread(target=self._run, args=(posts,), name=f"events-{index}", daemon=True).start()

    def record(self, pod: Mapping[str, Any], reason: Reason, note: str, *, kind: str | None = None) -> None:
        """Post an event of `reason` on `pod`, of the reason's usual type unless `kind` says otherwise."""
        self.record_on(pod, "v1", "Pod", reason, note, kind=kind)

    def record_on(
        self,
        obj: Mapping[str, Any],
        api_version: str,
        object_kind: str,
        reason: Reason,
        note: str,
        *,
        kind: str | None = None,
        namespace: str = "default",
    ) -> None:
        """Post an event of `reason` on any object (its kind named: listed objects do not carry it).
        One of a cluster-scoped object goes to `namespace` (kubectl describe finds it in any)."""
        kind = kind or reason.kinds[0]
        assert kind in reason.kinds, f"{reason} is never {kind}"
        meta = obj["metadata"]
        namespace = meta.get("namespace") or namespace
        regarding = {"apiVersion": api_version, "kind": object_kind, "name": meta["name"], "uid": meta.get("uid", "")}
        if meta.get("namespace"):
            regarding["namespace"] = meta["namespace"]
        self._queues[zlib.crc32(f"{namespace}/{meta['name']}".encode()) % POSTERS].put(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{self._stamp():x}", "namespace": namespace},
                "eventTime": _now(),
                "reportingController": REPORTING_CONTROLLER,
                "reportingInstance": self._instance,
                "action": reason.action,
                "reason": reason.value,
                "note": note if len(note) <= MAX_NOTE else note[: MAX_NOTE - 1] + "…",
                "type": kind,
                "regarding": regarding,
            }
        )
        log.info("event %s on %s %s/%s: %s", reason, object_kind, namespace, meta["name"], note)

    def _stamp(self) -> int:
        """Nanoseconds since the epoch, never the same twice: named by it, as client-go names them, an
        object's events list in the order they happened (`kubectl get events` lists by name)."""
        with self._stamp_lock:
            self._last_stamp = max(time.time_ns(), self._last_stamp + 1)
            return self._last_stamp

    def _run(self, posts: queue.Queue[dict[str, Any] | None]) -> None:
        while (event := posts.get()) is not None:
            namespace = event["metadata"]["namespace"]
            try:
                self._client.create(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
                if self._metrics is not None:
                    self._metrics.events.labels(event["type"], event["reason"]).inc()
            except Exception as error:  # noqa: BLE001 - an event must never take the controller down
                log.warning("could not post event %s: %s", event["reason"], error)
            finally:
                posts.task_done()

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Wait (bounded) for queued events to be posted, e.g. before shutting down."""
        done = threading.Event()

        def drain() -> None:
            for posts in self._queues:
                posts.join()
            done.set()

        threading.Thread(target=drain, daemon=True).start()
        done.wait(timeout_s)

    def close(self) -> None:
        self.flush()
        for posts in self._queues:
            posts.put(None)
