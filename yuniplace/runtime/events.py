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
from collections.abc import Mapping
from typing import Any

from yuniplace.kube import KubeClient
from yuniplace.runtime.metrics import Metrics

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "yuniplace.io/controller"
MAX_NOTE = 1024
FLUSH_TIMEOUT_S = 5.0

NORMAL, WARNING = "Normal", "Warning"


class Reason(enum.StrEnum):
    """Every reason yuniplace posts an event for, with the verb of its `action` field (events.k8s.io
    requires one) and the types it is posted with, the first being its usual one. A str, so the
    reason reads as the text kubectl shows. The README's Events table is checked against this one."""

    action: str
    kinds: tuple[str, ...]

    def __new__(cls, reason: str, action: str, *kinds: str) -> Reason:
        member = str.__new__(cls, reason)
        member._value_ = reason
        member.action = action
        member.kinds = kinds
        return member

    TASK_GROUP_MATCH = "TaskGroupMatch", "Match", NORMAL
    TASK_GROUP_WARNING = "TaskGroupWarning", "Validate", WARNING
    TASK_GROUPS_ERROR = "TaskGroupsError", "Validate", WARNING
    CREATING_PLACEHOLDERS = "CreatingPlaceholders", "Reserve", NORMAL
    PLACEHOLDER_ALLOCATED = "PlaceholderAllocated", "Reserve", NORMAL
    GANG_RESERVATION_COMPLETE = "GangReservationComplete", "Reserve", NORMAL
    PLACEHOLDER_SWAPPED = "PlaceholderSwapped", "Swap", NORMAL
    GANG_STARTING = "GangStarting", "Start", NORMAL
    GANG_STARTED = "GangStarted", "Start", NORMAL
    TASK_GROUP_RESOURCE_MISMATCH = "TaskGroupResourceMismatch", "Swap", WARNING
    # A timeout is a warning; releasing the placeholders a running application left unused is not.
    PLACEHOLDER_TIMEOUT = "PlaceholderTimeOut", "Timeout", WARNING, NORMAL
    GANG_SCHEDULING_FAILED = "GangSchedulingFailed", "Fallback", WARNING
    APPLICATION_FAILED = "ApplicationFailed", "Fail", WARNING
    RESOURCE_RESERVATION_TIMEOUT = "ResourceReservationTimeout", "Fail", WARNING
    GANG_TIMED_OUT = "GangTimedOut", "Timeout", WARNING
    GANG_WAITING = "GangWaiting", "Admit", NORMAL
    GANG_EXCEEDS_CAPACITY = "GangExceedsCapacity", "Admit", WARNING
    GANG_REFUSED = "GangRefused", "Admit", WARNING
    GANG_RESERVATION_RELEASED = "GangReservationReleased", "Reserve", WARNING
    PLACEHOLDERS_REFUSED = "PlaceholdersRefused", "Reserve", WARNING
    GANG_GROUP_WAITING = "GangGroupWaiting", "Reserve", NORMAL
    SCHEDULER_NOT_RUNNING = "SchedulerNotRunning", "Validate", WARNING
    GANG_PREEMPTED = "GangPreempted", "Preempt", WARNING
    QUEUES_APPLIED = "QueuesApplied", "Configure", NORMAL, WARNING
    QUEUES_REFUSED = "QueuesRefused", "Configure", WARNING
    NATIVE_GANG = "NativeGang", "Observe", NORMAL
    GANG_DEGRADED = "GangDegraded", "Observe", WARNING
    GANG_RECOVERED = "GangRecovered", "Observe", NORMAL
    GANG_RESTARTING = "GangRestarting", "Restart", WARNING
    GANG_RELEASED = "GangReleased", "Release", WARNING


# A pod yuniplace failed carries one of its reasons as its status reason.
FAILURE_REASONS = frozenset(reason.value for reason in Reason)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    def __init__(self, client: KubeClient, *, metrics: Metrics | None = None, instance: str | None = None) -> None:
        self._client = client
        self._metrics = metrics  # counts the events posted, by type and reason
        self._instance = instance or socket.gethostname()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._last_stamp = 0
        self._stamp_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

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
        self._queue.put(
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

    def _run(self) -> None:
        while (event := self._queue.get()) is not None:
            namespace = event["metadata"]["namespace"]
            try:
                self._client.create(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
                if self._metrics is not None:
                    self._metrics.events.labels(event["type"], event["reason"]).inc()
            except Exception as error:  # noqa: BLE001 - an event must never take the controller down
                log.warning("could not post event %s: %s", event["reason"], error)
            finally:
                self._queue.task_done()

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Wait (bounded) for queued events to be posted, e.g. before shutting down."""
        done = threading.Event()

        def drain() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=drain, daemon=True).start()
        done.wait(timeout_s)

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
