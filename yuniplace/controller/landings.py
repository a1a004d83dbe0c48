"""Where the members handed a node's room land: on it or elsewhere, and how long it took. Metrics for
every member, and one event per task group once its members have all landed (an event per member is
one API write each, a third of the controller's writes under load; `--member-events` posts them too)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from yuniplace.controller.plan import Settings, Swap
from yuniplace.gang import pods as p
from yuniplace.runtime.events import EventRecorder, Reason
from yuniplace.runtime.metrics import Metrics

Pod = p.Pod


@dataclass
class _Group:
    """The members of one task group of one application on their way to their nodes."""

    originator: Pod | None
    direct: bool
    started: float
    pending: int = 0
    landed: int = 0
    moved: int = 0


@dataclass(frozen=True)
class _Member:
    node: str  # the node whose room it was given
    group: tuple[p.AppKey, str]
    started: float
    direct: bool


class Landings:
    def __init__(
        self, recorder: EventRecorder, metrics: Metrics, settings: Settings, clock: Callable[[], float]
    ) -> None:
        self._recorder = recorder
        self._metrics = metrics
        self._settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._members: dict[str, _Member] = {}  # by uid
        self._groups: dict[tuple[p.AppKey, str], _Group] = {}
        # Landings of an application whose plan is being applied, told once the plan has posted its own
        # events: a member can be bound before its plan's writes are all done, and its GangStarted must
        # not come before the GangStarting that releases it.
        self._held: dict[p.AppKey, list[tuple[Pod, Reason, str]]] = {}

    def hold(self, key: p.AppKey) -> None:
        """The application's plan is being applied: its landings wait for `release`."""
        with self._lock:
            self._held.setdefault(key, [])

    def release(self, key: p.AppKey) -> None:
        """The application's plan has posted its events: tell its landings held meanwhile, in order."""
        with self._lock:
            held = self._held.pop(key, [])
        for pod, reason, note in held:
            self._recorder.record(pod, reason, note)

    def _tell(self, key: p.AppKey, pod: Pod, reason: Reason, note: str) -> None:
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                held.append((pod, reason, note))
                return
        self._recorder.record(pod, reason, note)

    def expect(self, swap: Swap, key: p.AppKey, originator: Pod | None) -> None:
        """A member is being handed its node's room (a placeholder's, or its seat)."""
        now = self._clock()
        uid = p.uid(swap.member)
        with self._lock:
            if uid in self._members:
                return
            self._members[uid] = _Member(swap.node, (key, swap.group), now, swap.direct)
            group = self._groups.setdefault((key, swap.group), _Group(originator, swap.direct, now))
            group.pending += 1

    def forget(self, pod: Pod) -> None:
        """A member deleted before it was bound: nothing more to report about it."""
        with self._lock:
            member = self._members.pop(p.uid(pod), None)
            done = None if member is None else self._settle(member.group)
        if done is not None:
            self._report(*done)

    def observe(self, pod: Pod) -> None:
        node = p.node_name(pod)
        if not node:
            return
        with self._lock:
            member = self._members.pop(p.uid(pod), None)
            if member is None:
                return
            landed = node == member.node
            group = self._groups[member.group]
            group.landed += landed
            group.moved += not landed
            done = self._settle(member.group)
        elapsed = self._clock() - member.started
        self._metrics.swaps.labels("landed" if landed else "moved").inc()
        self._metrics.swap_seconds.observe(elapsed)
        if self._settings.member_events:
            given = "its seat" if member.direct else "its reserved node"
            where = f"on {given} {node}" if landed else f"on {node} ({given} {member.node} was taken)"
            what = (
                "started on the seat admission chose"
                if member.direct
                else f"took the place of a {member.group[1]} placeholder"
            )
            self._tell(
                member.group[0],
                pod,
                Reason.GANG_STARTED if member.direct else Reason.PLACEHOLDER_SWAPPED,
                f"{what}: bound {where} in {elapsed:.2f}s",
            )
        if done is not None:
            self._report(*done)

    def _settle(self, key: tuple[p.AppKey, str]) -> tuple[tuple[p.AppKey, str], _Group] | None:
        """One member of the group is done; the group, once none is left on its way."""
        group = self._groups[key]
        group.pending -= 1
        if group.pending > 0:
            return None
        del self._groups[key]
        return key, group

    def _report(self, key: tuple[p.AppKey, str], group: _Group) -> None:
        app, name = key
        bound = group.landed + group.moved
        if group.originator is None or bound == 0:
            return
        elapsed = self._clock() - group.started
        where = "on the nodes admission chose" if group.direct else "on their reserved nodes"
        moved = f", {group.moved} elsewhere (their node was taken)" if group.moved else ""
        self._tell(
            app,
            group.originator,
            Reason.GANG_STARTED if group.direct else Reason.PLACEHOLDER_SWAPPED,
            f"task group {name}: {bound} member(s) bound in {elapsed:.2f}s, {group.landed} {where}{moved}",
        )
