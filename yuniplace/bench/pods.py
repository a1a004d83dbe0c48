"""When each pod of a namespace was first seen bound and first seen Running, from a watch, so
timings come from the API's own stream of changes rather than from polling."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from yuniplace.kube import KubeClient
from yuniplace.kube.watch import ListWatch

# Where a gang's time went, in the order it goes: each figure, the moment of the pods' story it is read
# from (PodTimeline.story), which pod's moment (the first or the last), and its heading in the report.
PHASES: tuple[tuple[str, str, Callable[[Sequence[float]], float], str], ...] = (
    ("all_seen_s", "seen_ms", max, "every pod seen"),
    ("first_free_s", "free_ms", min, "first gate lifted"),
    ("last_free_s", "free_ms", max, "last gate lifted"),
    ("first_bound_s", "bound_ms", min, "first bound"),
    ("last_bound_s", "bound_ms", max, "last bound"),
)


def phases(story: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Where one gang's time went, in seconds from its first pod's creation: when the watch had seen every
    pod (their creations, through any webhook), the first and last gate lifted (for a peer that gates),
    and the first and last pod bound. A peer slower than another is slower somewhere in these."""

    def moments(name: str) -> list[float]:
        return [float(pod[name]) / 1000 for pod in story if pod.get(name) is not None]

    found: dict[str, float] = {}
    for figure, name, pick, _heading in PHASES:
        at = moments(name)
        if at and (name != "free_ms" or any(pod.get("gated") for pod in story)):
            found[figure] = round(pick(at), 3)
    return found


class PodTimeline:
    """Watches one namespace's pods in a background thread; use as a context manager."""

    def __init__(self, client: KubeClient, namespace: str, *, label_selector: str | None = None) -> None:
        selectors = {"labelSelector": label_selector} if label_selector else {}
        self._changed = threading.Condition()
        self.seen_at: dict[str, float] = {}  # first seen (created)
        self.gated: set[str] = set()  # seen held by yuniplace's gate at some point
        self.free_at: dict[str, float] = {}  # first seen with no scheduling gate
        self.bound_at: dict[str, float] = {}
        self.running_at: dict[str, float] = {}
        self.nodes: dict[str, str] = {}
        self._watch = ListWatch(
            client,
            f"/api/v1/namespaces/{namespace}/pods",
            on_list=self._observe_all,
            on_event=lambda _kind, pod: self._observe_all([pod]),
            selectors=selectors,
        )
        self._thread = threading.Thread(target=self._watch.run, name=f"pods-{namespace}", daemon=True)

    def _observe_all(self, pods: Iterable[dict[str, Any]]) -> None:
        now = time.monotonic()
        with self._changed:
            for pod in pods:
                name = pod["metadata"]["name"]
                self.seen_at.setdefault(name, now)
                if pod.get("spec", {}).get("schedulingGates"):
                    self.gated.add(name)
                else:
                    self.free_at.setdefault(name, now)
                node = pod.get("spec", {}).get("nodeName")
                if node:
                    self.bound_at.setdefault(name, now)
                    self.nodes[name] = node
                if pod.get("status", {}).get("phase") == "Running":
                    self.running_at.setdefault(name, now)
            self._changed.notify_all()

    def wait_running(self, count: int, timeout_s: float) -> float:
        """Block until `count` pods have been seen Running; return when the last of them was."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.running_at) >= count, timeout_s):
                raise TimeoutError(f"{len(self.running_at)}/{count} pods Running after {timeout_s:.0f}s")
            return max(self.running_at.values())

    def wait_bound(self, names: Iterable[str], timeout_s: float) -> float:
        """Block until every named pod is bound; return when the last of them was."""
        wanted = set(names)
        with self._changed:
            if not self._changed.wait_for(lambda: wanted <= self.bound_at.keys(), timeout_s):
                missing = len(wanted - self.bound_at.keys())
                raise TimeoutError(f"{missing}/{len(wanted)} pods still unbound after {timeout_s:.0f}s")
            return max(self.bound_at[name] for name in wanted)

    def story(self, start: float, names: Iterable[str] | None = None) -> list[dict[str, object]]:
        """Each pod's moments (of those `names`, or all), in ms from `start`: seen, gate lifted (or never
        gated), bound."""

        def ms(at: float | None) -> float | None:
            return None if at is None else round((at - start) * 1000, 1)

        return [
            {
                "pod": name,
                "seen_ms": ms(self.seen_at[name]),
                "gated": name in self.gated,
                "free_ms": ms(self.free_at.get(name)),
                "bound_ms": ms(self.bound_at.get(name)),
            }
            for name in sorted(self.seen_at if names is None else names, key=lambda n: self.seen_at[n])
        ]

    def __enter__(self) -> PodTimeline:
        self._thread.start()
        if not self._watch.synced.wait(30):
            raise TimeoutError("pod watch did not sync within 30s")
        return self

    def __exit__(self, *_: object) -> None:
        self._watch.stop()
        self._thread.join(timeout=10)
