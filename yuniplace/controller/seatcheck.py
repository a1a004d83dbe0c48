"""Whether the members of a gang started directly may be released onto their seats.

A seat is room admission counted free: nothing holds it until kube-scheduler has seen its member's
nomination, and a pod created between admission's decision and the nominations could take it, leaving
its member nowhere to go and the gang started in part. kube-scheduler takes pods up in the order the API
server stored them, and so does the controller's pod watch: once the watch has brought the nominations
back, every pod kube-scheduler might have placed before seeing them is known here. The members are
released when none of those still waits to be tried for a seat's node and no seat was taken; until
then they stay gated and nominated, and every pod that comes after them is kept off their seats.

The hold is short (HOLD_LIMIT_S): a pod created in that moment is tried within milliseconds, and a seat
taken is not given back by waiting (the pod on it may run for hours, and a gang held gated would be
stuck). Past it the members are released to kube-scheduler, as they were before there was a check:
the member whose seat was taken goes wherever there is room, and is told why.

Where no pod of another application waits to be scheduled, the members are not nominated at all
(`clear`): the gang's record, written first, stands in for the nominations as the write the watch must
bring back, and the members are released onto their seats, steered, in one write each, if by then no
pod stored before it took a seat or waits to be tried for a seat's node; else they are nominated after
all. Without nominations nothing keeps a pod created after that check off a seat. No worker waits
for the watch to bring the record back: until it has, the members are left gated with their seats
(plan.SeatsToRelease) for the gang's next reconcile, which the watch wakes as soon as it has the record
(under 1 000-node arrivals that wait was half of a direct start's time in its worker). Past CATCH_UP_S
without it, they are nominated.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence

from yuniplace.admission.room import RoomView
from yuniplace.controller.plan import Swap
from yuniplace.gang import pods as p
from yuniplace.runtime.events import WARNING, EventRecorder, Reason

log = logging.getLogger(__name__)

# How long a gang started directly is held back at most (see above).
HOLD_LIMIT_S = 1.0
# How long a check waits for the pod watch to bring back the nominations just written.
CATCH_UP_S = 2.0


class Clearance(enum.Enum):
    """What the check of seats nobody else waits for found."""

    CLEAR = "clear"  # the members may go to their seats without nominations
    CONTENDED = "contended"  # a seat was taken, or a pod that may take one waits: nominate them
    UNSEEN = "unseen"  # the pod watch has not brought the record back yet


class WatchProgress:
    """The newest resourceVersion the pod watch has brought: every pod written before it is known.

    The watch moves it on every pod event (scores a second in a busy cluster) while a waiter wants one
    version: each waiter is woken once, when its version is reached, not by every event on the way
    (a wake-up each event had the waiting workers and the watch's thread take turns for the GIL)."""

    def __init__(self) -> None:
        self._version = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, Callable[[], None]]] = []

    def saw(self, version: int) -> None:
        with self._lock:
            if version <= self._version:
                return
            self._version = version
            if not self._waiters:
                return
            reached = [wake for wanted, wake in self._waiters if wanted <= version]
            self._waiters = [(wanted, wake) for wanted, wake in self._waiters if wanted > version]
        for wake in reached:
            wake()

    def when_reached(self, version: int, wake: Callable[[], None]) -> None:
        """Call `wake` once the watch has brought `version` (at once if it has)."""
        with self._lock:
            if self._version < version:
                self._waiters.append((version, wake))
                return
        wake()

    def reached(self, version: int, timeout_s: float) -> bool:
        done = threading.Event()
        self.when_reached(version, done.set)
        if done.wait(timeout_s):
            return True
        with self._lock:
            self._waiters = [(wanted, wake) for wanted, wake in self._waiters if wake != done.set]
            return self._version >= version


class SeatCheck:
    def __init__(
        self,
        room: Callable[[], RoomView] | None,
        progress: WatchProgress,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._room = room
        self._progress = progress
        self._recorder = recorder
        self._clock = clock
        self._lock = threading.Lock()
        self._held_since: dict[p.AppKey, float] = {}  # gangs held back, since when

    def holds(self, key: p.AppKey, swaps: Sequence[Swap], version: int) -> bool:
        """Whether the members `swaps` seats, nominated by writes up to `version`, may be released."""
        if self._room is None:
            return True  # no admission, no seat
        if not self._progress.reached(version, CATCH_UP_S):
            log.info("%s: not releasing its members yet: the pod watch has not brought their nominations", key)
            return False
        view = self._room()
        taken = view.seats_taken((swap.node, swap.member) for swap in swaps)
        contended = view.contended({swap.node for swap in swaps})
        now = self._clock()
        with self._lock:
            since = self._held_since.setdefault(key, now)
        if (taken or contended) and now - since < HOLD_LIMIT_S:
            why = f"its seats on {', '.join(taken)} were taken" if taken else "a pod that may take a seat waits"
            log.info("%s: not releasing its members yet: %s", key, why)
            return False
        self.forget(key)
        if taken:
            self._tell_taken([swap for swap in swaps if swap.node in taken])
        return True

    def clear(self, swaps: Sequence[Swap], version: int) -> Clearance:
        """Whether members started directly may go to their seats without nominations: once the pod
        watch has brought every pod stored up to `version` (their gang's record), none of those took a
        seat or waits to be tried for a seat's node. Never waits for the watch: UNSEEN until then."""
        if self._room is None:
            return Clearance.CLEAR
        if not self._progress.reached(version, 0.0):
            return Clearance.UNSEEN
        view = self._room()
        if view.seats_taken((swap.node, swap.member) for swap in swaps) or view.contended({s.node for s in swaps}):
            return Clearance.CONTENDED
        return Clearance.CLEAR

    def _tell_taken(self, swaps: Sequence[Swap]) -> None:
        """Say, on each member whose seat was taken, why it does not start where it was seated."""
        if self._recorder is None:
            return
        for swap in swaps:
            self._recorder.record(
                swap.member,
                Reason.GANG_STARTING,
                f"its seat on node {swap.node} was taken by another pod before it was nominated there: released "
                "to be scheduled wherever there is room",
                kind=WARNING,
            )

    def forget(self, key: p.AppKey) -> None:
        with self._lock:
            self._held_since.pop(key, None)
