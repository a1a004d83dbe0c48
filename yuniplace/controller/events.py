"""Kubernetes Events (events.k8s.io/v1) on the pods an application's story concerns.

Events are auxiliary: they are posted from a queue by a thread of their own, so a slow or failing
events API never delays a reservation, and a failure is logged, never raised.
"""

from __future__ import annotations

import datetime
import logging
import queue
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

from yuniplace.kube import KubeClient

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "yuniplace.io/controller"
MAX_NOTE = 1024
FLUSH_TIMEOUT_S = 5.0

# Reason -> action, the verb an event's `action` field carries (events.k8s.io requires one).
ACTIONS = {
    "TaskGroupMatch": "Match",
    "TaskGroupWarning": "Validate",
    "TaskGroupsError": "Validate",
    "CreatingPlaceholders": "Reserve",
    "PlaceholderAllocated": "Reserve",
    "GangReservationComplete": "Reserve",
    "PlaceholderSwapped": "Swap",
    "TaskGroupResourceMismatch": "Swap",
    "PlaceholderTimeOut": "Timeout",
    "GangSchedulingFailed": "Fallback",
    "ApplicationFailed": "Fail",
    "ResourceReservationTimeout": "Fail",
}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    def __init__(self, client: KubeClient, *, on_posted: Callable[[str, str], None] | None = None, instance: str | None = None) -> None:
        self._client = client
        self._on_posted = on_posted
        self._instance = instance or socket.gethostname()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def record(self, pod: dict[str, Any], reason: str, note: str, *, warning: bool = False) -> None:
        meta = pod["metadata"]
        self._queue.put(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
                "eventTime": _now(),
                "reportingController": REPORTING_CONTROLLER,
                "reportingInstance": self._instance,
                "action": ACTIONS.get(reason, "Reconcile"),
                "reason": reason,
                "note": note if len(note) <= MAX_NOTE else note[: MAX_NOTE - 1] + "…",
                "type": "Warning" if warning else "Normal",
                "regarding": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                },
            }
        )
        log.info("event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], note)

    def _run(self) -> None:
        while (event := self._queue.get()) is not None:
            namespace = event["metadata"]["namespace"]
            try:
                self._client.create(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", event)
                if self._on_posted is not None:
                    self._on_posted(event["type"], event["reason"])
            except Exception as error:  # noqa: BLE001 - an event must never take the controller down
                log.warning("could not post event %s: %s", event["reason"], error)
            finally:
                self._queue.task_done()

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> None:
        """Wait (bounded) for queued events to be posted, e.g. before shutting down."""
        done = threading.Event()
        threading.Thread(target=lambda: (self._queue.join(), done.set()), daemon=True).start()
        done.wait(timeout_s)

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
