"""A work queue keyed by application, with client-go's guarantees: a key is never processed by two
workers at once, a key added while it is processed is processed again afterwards, a key waiting in
the queue is there once however many events asked for it, and a key whose processing keeps failing
is retried ever later (exponential backoff per key), so it cannot crowd out the others."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
RETRY_BASE_S = 1.0
MAX_RETRY_S = 30.0


class WorkQueue(Generic[K]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._ready: deque[K] = deque()
        self._queued: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        self._delayed: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._sequence = itertools.count()
        self._failures: dict[K, int] = {}
        self._shutdown = False

    def add(self, key: K) -> None:
        with self._cond:
            if self._shutdown:
                return
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
                self._cond.notify()

    def add_after(self, key: K, delay_s: float) -> None:
        """Add `key` once `delay_s` has passed. A key waits once, for its earliest due time, however
        often it is asked for: a large gang produces thousands of events and requeues."""
        if delay_s <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            due = self._clock() + delay_s
            if self._due.get(key, float("inf")) <= due:
                return
            self._due[key] = due
            earliest = self._delayed[0][0] if self._delayed else float("inf")
            heapq.heappush(self._delayed, (due, next(self._sequence), key))
            if due < earliest:
                self._cond.notify()  # a waiting worker must shorten its wait

    def retry(self, key: K) -> float:
        """`key` failed: add it again after a backoff that doubles with each failure in a row (up to
        MAX_RETRY_S); return the backoff."""
        with self._cond:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay: float = min(MAX_RETRY_S, RETRY_BASE_S * 2.0 ** (failures - 1))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """`key` succeeded: its next failure starts the backoff afresh."""
        with self._cond:
            self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        """Move due delayed keys to the ready queue; return seconds until the next one is due."""
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != due:
                continue  # superseded by an earlier due time for the same key
            del self._due[key]
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout_s: float | None = None) -> K | None:
        """The next key to process (call `done` with it afterwards); None on shutdown or timeout."""
        deadline = None if timeout_s is None else self._clock() + timeout_s
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                next_due = self._promote_due()
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                wait = next_due
                if deadline is not None:
                    remaining = deadline - self._clock()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._ready.append(key)
                    self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    def depth(self) -> int:
        with self._cond:
            return len(self._ready)
