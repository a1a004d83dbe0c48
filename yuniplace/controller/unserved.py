"""Gang pods that no scheduler will ever pick up, told so: a pod naming a scheduler that does not run
(YuniKorn's, where YuniKorn is not installed) otherwise waits Pending forever without a word.

Every scheduler marks a pod it has tried (the PodScheduled condition), so a gang pod for another
scheduler still unmarked after UNSERVED_AFTER_S is reported once, with what to change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from yuniplace.gang import pods as p
from yuniplace.runtime.events import EventRecorder, Reason

UNSERVED_AFTER_S = 10.0


def _advice(pod: p.Pod, schedulers: frozenset[str]) -> str:
    name = p.scheduler_name(pod)
    served = ", ".join(sorted(schedulers))
    return (
        f"no scheduler has picked this gang pod up in {UNSERVED_AFTER_S:.0f}s: its schedulerName {name!r} names "
        f"none that runs here, and yuniplace gang-schedules pods of {served}. Remove the schedulerName (Spark: "
        f"spark.kubernetes.scheduler.name; an operator: its batch-scheduler setting), or let yuniplace's webhook "
        f"rewrite it (chart values webhook.rewriteSchedulerName: auto or always, and {name!r} in "
        f"webhook.rewrittenSchedulers); if a scheduler named {name!r} does run, start yuniplace "
        f"with --scheduler-name={name} to gang-schedule its pods"
    )


class UnservedPods:
    """Fed every pod change (cheap: a few dict lookups); `run` reports, on the leader only."""

    def __init__(
        self, recorder: EventRecorder, schedulers: frozenset[str], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._recorder = recorder
        self._schedulers = schedulers
        self._clock = clock
        self._lock = threading.Lock()
        self._since: dict[str, tuple[float, p.Pod]] = {}  # uid -> (first seen unserved, the pod)
        self._reported: set[str] = set()

    def replace(self, pods: list[p.Pod]) -> None:
        """After a (re-)list: what it shows is all there is."""
        with self._lock:
            listed = {p.uid(pod) for pod in pods}
            for uid in set(self._since) - listed:
                del self._since[uid]
        for pod in pods:
            self.observe("ADDED", pod)

    def observe(self, kind: str, pod: p.Pod) -> None:
        uid = p.uid(pod)
        unserved = kind != "DELETED" and p.is_unserved(pod, self._schedulers)
        with self._lock:
            if not unserved:
                self._since.pop(uid, None)
                self._reported.discard(uid)
            elif uid not in self._since:
                self._since[uid] = (
                    self._clock(),
                    {"metadata": pod["metadata"], "spec": {"schedulerName": p.scheduler_name(pod)}},
                )

    def report_due(self) -> int:
        """Post the events now due; return how many."""
        now = self._clock()
        with self._lock:
            due = [
                (uid, pod)
                for uid, (since, pod) in self._since.items()
                if uid not in self._reported and now - since >= UNSERVED_AFTER_S
            ]
            self._reported.update(uid for uid, _ in due)
        for _, pod in due:
            self._recorder.record(pod, Reason.SCHEDULER_NOT_RUNNING, _advice(pod, self._schedulers))
        return len(due)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            self.report_due()
